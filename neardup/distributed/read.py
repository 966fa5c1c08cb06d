"""Step ``read``: read one partition, fingerprint it, and shuffle its exact content hashes.

Per document: its position (input order), id, text, length, SimHash fingerprint (and whether it
had features), the MinHash signature of its token bigrams (:mod:`neardup.fingerprint.minhash`,
the plan of the job's config) and its 128-bit normalised content hash. The documents stay in
``docs/p<partition>.arrow``; ``(hash, position, id, length)`` go to the ``exact`` shuffle keyed
on the hash, so that copies meet in one reducer.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from ..errors import ConfigError, InputError
from . import _store
from .job import POS_SHIFT, Job

__all__ = [
    "EXACT_SCHEMA",
    "exclude_digest",
    "read_exclude",
    "read_partition",
    "step_read",
    "write_exclude",
]


def _schemas() -> tuple[Any, Any]:
    import pyarrow as pa

    exact = pa.schema(
        [("h0", pa.uint64()), ("h1", pa.uint64()), ("pos", pa.int64()), ("id", pa.string()),
         ("len", pa.int64())]
    )  # fmt: skip
    return exact, None


EXACT_SCHEMA = _schemas()[0]


def read_partition(
    job: Job, task: int, skipped: list[Any] | None = None
) -> tuple[np.ndarray, list[str], list[str]]:
    """``(positions int64, ids, texts)`` of partition ``task`` (its rows of its file; the
    positions start at ``file << POS_SHIFT`` plus its first row, even when it is empty). The
    file is read with the job's read options, as :func:`neardup.io.read_corpus` reads it for
    the local engine; ``skipped`` receives ``(count, [{path, line, reason}, ...])`` of the
    records ``--on-error skip`` left out."""
    from ..io import InputFile, read_corpus

    part = job.partitions[task]
    name = part.path.rstrip("/").rsplit("/", 1)[-1]
    try:
        corpus = read_corpus(
            [InputFile(part.path, part.fmt or "jsonl", name, job.input_format is not None)],
            text_field=job.text_field,
            id_field=job.id_field,
            encoding=job.encoding,
            on_error="skip" if job.on_error == "skip" else "fail",
            generate_ids=job.generate_ids,
        )
    except InputError as exc:  # name the partition's file (read_corpus names the record)
        raise InputError(f"partition {task} ({part.path}): {exc}") from exc
    if skipped is not None:
        skipped.append(corpus.skipped)
        skipped.append(
            [{"path": r.path, "line": r.line, "reason": r.reason} for r in corpus.skipped_records]
        )
    with corpus:
        n = len(corpus.texts)
        lo, hi = part.slice * n // part.slices, (part.slice + 1) * n // part.slices
        ids = [str(x) for x in corpus.ids[lo:hi]]
        texts = list(corpus.texts[lo:hi])
    if hi - lo >= 1 << POS_SHIFT:
        raise InputError(f"{part.path} has more than 2**{POS_SHIFT} records; split it")
    pos = (np.int64(part.file) << np.int64(POS_SHIFT)) + np.arange(lo, hi + 1, dtype=np.int64)
    if job.exclude is not None:  # left out, as if the records were not there (their positions
        # stay: the others keep their input order, and the partition where it starts)
        out = np.isin(pos[:-1], read_exclude(job.workdir, job.exclude))
        if out.any():
            stay = np.flatnonzero(~out).tolist()
            ids = [ids[i] for i in stay]
            texts = [texts[i] for i in stay]
            pos = np.concatenate([pos[:-1][~out], pos[-1:]])
    return pos, ids, texts  # pos has one more entry: where the partition starts or ends


def exclude_digest(positions: np.ndarray) -> str:
    """What names a set of left-out positions in the job's fingerprint."""
    return hashlib.sha256(np.ascontiguousarray(positions, "<i8").tobytes()).hexdigest()


def write_exclude(workdir: str, positions: np.ndarray) -> None:
    """Write the positions the read step leaves out (sorted, distinct: what the job's
    :func:`exclude_digest` names)."""
    import pyarrow as pa

    table = pa.table({"pos": pa.array(positions, pa.int64())})
    _store.write_table(f"{workdir}/exclude.arrow", table)


def read_exclude(workdir: str, digest: str) -> np.ndarray:
    """The positions :func:`write_exclude` wrote, checked against the job's digest."""
    pos = _store.read_table(f"{workdir}/exclude.arrow").column("pos").to_numpy()
    if exclude_digest(pos) != digest:
        raise InputError(
            f"{workdir}/exclude.arrow does not hold the positions this job leaves out; "
            "pass an empty --workdir"
        )
    return np.asarray(pos, np.int64)


@_store.resumable("read")
def step_read(workdir: str, task: int, job: Job) -> dict[str, Any]:
    """Read and fingerprint partition ``task``; returns its first position and row count."""
    import pyarrow as pa

    from ..fingerprint.minhash import minhash_signatures
    from ..fingerprint.simhash import content_hash_many

    cfg = job.dedup_config()
    skipped: list[Any] = []
    pos, ids, texts = read_partition(job, task, skipped)
    first, pos = int(pos[0]), pos[:-1]
    fp = cfg.make_fingerprinter()
    if getattr(fp, "bits", 64) != 64:
        raise ConfigError("the distributed engines take 64-bit fingerprints; drop bits=128")
    batch = fp.fingerprint_batch(texts)
    fps = np.asarray(batch.fingerprints, np.uint64).reshape(-1)
    empty = np.asarray(batch.empty, bool)
    plan = cfg.lsh_plan()
    sig, tokens = minhash_signatures(cfg.make_verifier(), texts, plan.hashes)
    h = (
        np.asarray(content_hash_many(texts, normalize=True), np.uint64).reshape(-1, 2)
        if texts
        else np.zeros((0, 2), np.uint64)
    )
    lengths = np.fromiter(map(len, texts), np.int64, len(texts))
    width = 2 * plan.hashes
    docs = pa.table(
        {
            "pos": pa.array(pos, pa.int64()),
            "id": pa.array(ids, pa.string()),
            "text": pa.array(texts, pa.large_string()),
            "len": pa.array(lengths, pa.int64()),
            "fp": pa.array(fps, pa.uint64()),
            "empty": pa.array(empty, pa.bool_()),
            "tokens": pa.array(tokens, pa.int64()),
            "sig": pa.FixedSizeBinaryArray.from_buffers(
                pa.binary(width), len(texts), [None, pa.py_buffer(sig.astype("<u2").tobytes())]
            ),
        }
    )
    _store.write_table(f"{workdir}/docs/p{task:05d}.arrow", docs)
    ex = pa.table(
        {"h0": h[:, 0], "h1": h[:, 1], "pos": pos, "id": pa.array(ids, pa.string()),
         "len": lengths},
        schema=EXACT_SCHEMA,
    )  # fmt: skip
    size = _store.shuffle_write(
        workdir, "exact", task, ex, _store.mix_bucket(h[:, 0].copy(), job.buckets)
    )
    out: dict[str, Any] = {"rows": len(texts), "first": first, "shuffle_bytes": size}
    if job.partitions[task].slice == 0 and skipped[0]:  # a file's, counted once
        out["skipped"] = skipped[0]
        out["skipped_list"] = skipped[1]
    return out
