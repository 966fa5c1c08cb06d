#!/usr/bin/env python3
"""The peers of ``bench_dedup.py --peers``, each as its user would run it: one process per run.

Run by :mod:`peers_dedup` with the peer's own interpreter (its own virtual environment where its
dependencies clash with neardup's), so this file imports only the standard library and the peer.
Two verbs per peer:

* ``run PEER CORPUS_DIR OUT_DIR`` -- the timed job: read the corpus, dedup it at the peer's
  documented defaults, write the peer's own outputs into ``OUT_DIR``;
* ``export PEER CORPUS_DIR OUT_DIR`` -- untimed: turn those outputs into the harness's common
  form, ``kept.txt`` (one kept id a line) and either ``pairs.tsv`` (``id_a<TAB>id_b``, the pairs
  the peer reports) or ``groups.tsv`` (``id<TAB>group`` for every document the peer put in a
  cluster of two or more).

``CORPUS_DIR`` holds ``docs.jsonl`` (``{"id", "text"}`` a line) and ``shards/`` (the same
records split into one file per CPU, in order: datatrove parallelises over files).

    python benchmarks/peer_runners.py run datasketch /tmp/corpus /tmp/out
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import time
from pathlib import Path


def _progress(out: Path, **fields: object) -> None:
    """Where a run has got to (read by the harness when the run is stopped at its time limit)."""
    tmp = out / "progress.json.tmp"
    tmp.write_text(json.dumps({"t": time.time(), **fields}))
    os.replace(tmp, out / "progress.json")


# ---------------------------------------------------------------------------------------------
# datasketch: MinHashLSH over character 3-grams, threshold 0.5, 128 permutations


def _char3(text: str) -> list[bytes]:
    """Character 3-grams of the lower-cased, whitespace-collapsed text (as bench_dedup's in-process
    datasketch peer and quality_dedup's ``--datasketch-shingles char3``)."""
    c = " ".join(text.lower().split())
    if len(c) < 3:
        return [c.encode()] if c else []
    return list({c[i : i + 3].encode() for i in range(len(c) - 2)})


def run_datasketch(corpus: Path, out: Path) -> None:
    """datasketch's README pipeline: a ``MinHash(num_perm=128)`` per text, ``insert`` into
    ``MinHashLSH(threshold=0.5, num_perm=128)``, then ``query`` every text; every pair a query
    returns is written (unverified candidates: datasketch has no verification step)."""
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=0.5, num_perm=128)
    sigs = []
    ids = []
    with (corpus / "docs.jsonl").open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            r = json.loads(line)
            m = MinHash(num_perm=128)
            m.update_batch(_char3(r["text"]))
            lsh.insert(i, m)
            sigs.append(m)
            ids.append(r["id"])
            if i % 20000 == 0:
                _progress(out, phase="insert", done=i)
    n_pairs = 0
    with (out / "pairs.tsv").open("w", encoding="utf-8") as fo:
        for i, m in enumerate(sigs):
            for j in lsh.query(m):
                if j > i:  # (the relation is symmetric: each pair once)
                    fo.write(f"{ids[i]}\t{ids[j]}\n")
                    n_pairs += 1
            if i % 20000 == 0:
                _progress(out, phase="query", done=i, pairs=n_pairs)


# ---------------------------------------------------------------------------------------------
# datatrove: the four-stage MinHash pipeline of its examples, MinhashConfig() defaults


def run_datatrove(corpus: Path, out: Path) -> None:
    """datatrove's ``examples/minhash_deduplication.py`` on a local executor: signatures (one task
    per input file), buckets (one task per bucket), clusters (one task), filter (one task per
    file), every stage on ``os.cpu_count()`` workers; ``MinhashConfig()`` at its defaults (word
    5-grams, 14 buckets x 8 hashes, 64-bit xxhash; English word tokenizer). Stage 3 also saves
    cluster ids (``save_cluster_id``) and stage 4 loads them and writes the removed documents
    (``exclusion_writer``), so that the harness can read the clusters."""
    from datatrove.executor.local import LocalPipelineExecutor
    from datatrove.pipeline.dedup import MinhashDedupSignature
    from datatrove.pipeline.dedup.minhash import (
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers.jsonl import JsonlWriter

    config = MinhashConfig()
    files = sorted((corpus / "shards").glob("*.jsonl"))
    tasks, workers = len(files), os.cpu_count() or 1
    base, logs = out / "minhash", out / "logs"

    def reader() -> JsonlReader:
        return JsonlReader(str(corpus / "shards"), glob_pattern="*.jsonl", compression=None)

    common = {"skip_completed": False}
    stage1 = LocalPipelineExecutor(
        pipeline=[reader(), MinhashDedupSignature(output_folder=str(base / "signatures"), config=config)],
        tasks=tasks, workers=workers, logging_dir=str(logs / "signatures"), **common,
    )  # fmt: skip
    stage2 = LocalPipelineExecutor(
        pipeline=[
            MinhashDedupBuckets(
                input_folder=str(base / "signatures"),
                output_folder=str(base / "buckets"),
                config=config,
            )
        ],
        tasks=config.num_buckets, workers=workers, logging_dir=str(logs / "buckets"),
        depends=stage1, **common,
    )  # fmt: skip
    stage3 = LocalPipelineExecutor(
        pipeline=[
            MinhashDedupCluster(
                input_folder=str(base / "buckets"),
                output_folder=str(base / "remove_ids"),
                config=config,
                save_cluster_id=True,
            )
        ],
        tasks=1, logging_dir=str(logs / "clusters"), depends=stage2, **common,
    )  # fmt: skip
    stage4 = LocalPipelineExecutor(
        pipeline=[
            reader(),
            MinhashDedupFilter(
                input_folder=str(base / "remove_ids"),
                exclusion_writer=JsonlWriter(str(out / "removed")),
                load_cluster_ids=True,
            ),
            JsonlWriter(output_folder=str(out / "deduplicated_output")),
        ],
        tasks=tasks, workers=workers, logging_dir=str(logs / "filter"), depends=stage3, **common,
    )  # fmt: skip
    stage4.run()


def export_datatrove(corpus: Path, out: Path) -> None:
    """Kept ids from the deduplicated output; clusters from ``minhash_cluster_id`` (set on every
    document the cluster stage saw; -1 on the others) of the kept and removed documents."""
    with (
        (out / "kept.txt").open("w", encoding="utf-8") as kept,
        (out / "groups.tsv").open("w", encoding="utf-8") as groups,
    ):
        for folder, is_kept in (("deduplicated_output", True), ("removed", False)):
            for path in sorted((out / folder).glob("*.jsonl.gz")):
                with gzip.open(path, "rt", encoding="utf-8") as fh:
                    for line in fh:
                        r = json.loads(line)
                        if is_kept:
                            kept.write(f"{r['id']}\n")
                        cid = r.get("metadata", {}).get("minhash_cluster_id", -1)
                        if cid != -1:
                            groups.write(f"{r['id']}\t{cid}\n")


# ---------------------------------------------------------------------------------------------
# text-dedup: python -m text_dedup.minhash at its defaults


def textdedup_command(corpus: Path, out: Path) -> list[str]:
    """text-dedup's README command for a local JSON file, defaults otherwise (word 5-grams after
    splitting on non-word characters, 250 permutations, threshold 0.7 with the band/row plan it
    derives, sha1, ``min_length`` 5, ``num_proc`` = ``os.cpu_count()``); ``--debug`` keeps the
    union-find (``uf.pkl``) the harness reads clusters from."""
    return [
        sys.executable, "-m", "text_dedup.minhash", "--path", "json",
        "--data_files", str(corpus / "docs.jsonl"), "--split", "train",
        "--cache_dir", str(out / "hf-cache"), "--output", str(out / "deduplicated"),
        "--column", "text", "--idx_column", "id", "--debug",
    ]  # fmt: skip


def run_textdedup(corpus: Path, out: Path) -> None:
    os.execv(sys.executable, textdedup_command(corpus, out))


def export_textdedup(corpus: Path, out: Path) -> None:
    """Kept ids from the saved dataset; clusters from the union-find over the original ids."""
    import pickle  # (the peer's own output, written by the run just before)

    from datasets import load_from_disk

    ds = load_from_disk(str(out / "deduplicated"))
    with (out / "kept.txt").open("w", encoding="utf-8") as kept:
        for i in ds["id"]:
            kept.write(f"{i}\n")
    with (out / "deduplicated" / "uf.pkl").open("rb") as fh:
        uf = pickle.load(fh)
    members: dict[object, list[object]] = {}
    for x in list(uf.parent):
        members.setdefault(uf.find(x), []).append(x)
    with (out / "groups.tsv").open("w", encoding="utf-8") as groups:
        for root, xs in members.items():
            if len(xs) > 1:  # (the filter step may have find()-ed singletons in)
                groups.writelines(f"{x}\t{root}\n" for x in xs)


RUN = {"datasketch": run_datasketch, "datatrove": run_datatrove, "text-dedup": run_textdedup}
EXPORT = {"datatrove": export_datatrove, "text-dedup": export_textdedup}


def main() -> None:
    verb, peer, corpus, out = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
    out.mkdir(parents=True, exist_ok=True)
    if verb == "run":
        RUN[peer](corpus, out)
    elif verb == "export":
        if peer in EXPORT:
            EXPORT[peer](corpus, out)
    else:
        raise SystemExit(f"unknown verb {verb!r}: run or export")


if __name__ == "__main__":
    main()
