"""neardup.distributed: the same kept documents, pairs and roots as neardup.dedup on every
engine and partition count; resumable work directories; batch mode against brute force."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from _distributed_common import assert_same, distributed, sample_slice, single_machine
from hypothesis import given
from hypothesis import strategies as st

from neardup.distributed import run_dedup
from neardup.errors import ConfigError, InputError
from neardup.index import batch_query
from neardup.index.reference import search_reference
from neardup.rules.config import DedupConfig


@pytest.mark.parametrize(
    ("files", "partitions", "keep"),
    [(1, 1, "first"), (1, 4, "first"), (3, 5, "longest"), (2, 2, "none")],
)
def test_local_engine_equals_single_machine(
    tmp_path: Path, files: int, partitions: int, keep: str
) -> None:
    inputs = sample_slice(tmp_path, 600, files)
    cfg = DedupConfig(keep=keep)  # type: ignore[arg-type]
    want = single_machine(inputs, cfg)
    assert want["stats"]["near_duplicates"] > 0 and want["stats"]["exact_duplicates"] > 0
    res = run_dedup(inputs, str(tmp_path / "work"), config=cfg, partitions=partitions)
    assert_same(distributed(res), want)


def test_bucket_count_does_not_change_results(tmp_path: Path) -> None:
    inputs = sample_slice(tmp_path, 400)
    a = run_dedup(inputs, str(tmp_path / "w1"), partitions=2, buckets=1)
    b = run_dedup(inputs, str(tmp_path / "w2"), partitions=3, buckets=7)
    assert distributed(a)["pairs"] == distributed(b)["pairs"]
    assert distributed(a)["roots"] == distributed(b)["roots"]


def test_rerun_resumes_and_redoes_only_unfinished_tasks(tmp_path: Path) -> None:
    inputs = sample_slice(tmp_path, 300)
    work = tmp_path / "work"
    first = run_dedup(inputs, str(work), partitions=3)
    kept = first.read("kept")["id"].to_pylist()
    # a task that died before its marker: its marker gone, its output torn
    os.remove(work / "write" / "_done" / "00001")
    (work / "kept" / "p00001.arrow").write_bytes(b"torn")
    marker = work / "read" / "_done" / "00000"
    before = marker.stat().st_mtime_ns
    again = run_dedup(inputs, str(work), partitions=3)
    assert marker.stat().st_mtime_ns == before  # finished tasks were not run again
    assert again.read("kept")["id"].to_pylist() == kept


def test_other_job_in_same_workdir_is_refused(tmp_path: Path) -> None:
    inputs = sample_slice(tmp_path, 50)
    run_dedup(inputs, str(tmp_path / "w"), partitions=1)
    with pytest.raises(InputError, match="holds another job"):
        run_dedup(inputs, str(tmp_path / "w"), partitions=1, config=DedupConfig(keep="none"))


def test_a_changed_input_in_the_same_workdir_is_refused(tmp_path: Path) -> None:
    """A rerun after an input changed (the same path, other bytes) reused the finished
    tasks: the old run's positions kept the new file's wrong rows and lost appended ones,
    exit 0."""
    inputs = sample_slice(tmp_path, 50)
    run_dedup(inputs, str(tmp_path / "w"), partitions=1)
    run_dedup(inputs, str(tmp_path / "w"), partitions=1)  # unchanged: resumed
    with open(inputs[0], "a") as fh:
        fh.write(json.dumps({"id": "new-1", "text": "an appended record of its own words"}) + "\n")
    with pytest.raises(InputError, match="holds this job's work on other bytes of its inputs"):
        run_dedup(inputs, str(tmp_path / "w"), partitions=1)
    fresh = run_dedup(inputs, str(tmp_path / "w2"), partitions=1)
    assert "new-1" in fresh.read("kept")["id"].to_pylist()


def test_missing_text_field_names_the_file(tmp_path: Path) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text(json.dumps({"id": "1", "body": "x"}) + "\n")
    with pytest.raises(InputError, match=r"bad\.jsonl"):
        run_dedup([str(f)], str(tmp_path / "w"))


def test_unsupported_config_is_refused(tmp_path: Path) -> None:
    inputs = sample_slice(tmp_path, 10)
    with pytest.raises(ConfigError, match="lsh"):
        run_dedup(inputs, str(tmp_path / "w"), config=DedupConfig(candidates="simhash"))


def _brute(stored: np.ndarray, queries: np.ndarray, k: int) -> list[tuple[int, int, int]]:
    lims, ids, d = search_reference(queries, np.arange(queries.size), stored, k)
    s = np.repeat(np.arange(stored.size), np.diff(lims))
    return sorted(zip(s.tolist(), ids.tolist(), d.tolist(), strict=True))


@given(
    seed=st.integers(0, 2**32 - 1),
    nq=st.integers(0, 60),
    ns=st.integers(0, 200),
    k=st.integers(0, 6),
    chunk=st.sampled_from([1, 7, 1 << 20]),
)
def test_batch_query_equals_brute_force(seed: int, nq: int, ns: int, k: int, chunk: int) -> None:
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 2**64, nq, dtype=np.uint64)
    flips = rng.integers(0, 64, (ns, 3))
    s = rng.integers(0, 2**64, ns, dtype=np.uint64)
    if nq:  # half the stored set near a query
        near = q[rng.integers(0, nq, ns)]
        for j in range(3):
            near ^= np.uint64(1) << flips[:, j].astype(np.uint64)
        s = np.where(rng.random(ns) < 0.5, near, s)
    a, b, d = batch_query(s, q, k, chunk=chunk)
    assert list(zip(a.tolist(), b.tolist(), d.tolist(), strict=True)) == _brute(s, q, k)


def test_batch_query_streams_chunks_with_offsets() -> None:
    rng = np.random.default_rng(3)
    q = rng.integers(0, 2**64, 50, dtype=np.uint64)
    s = np.concatenate([q ^ np.uint64(3), rng.integers(0, 2**64, 50, dtype=np.uint64)])
    whole = batch_query(s, q, 2)
    parts = batch_query(iter([s[:30], s[30:]]), q, 2)
    for x, y in zip(whole, parts, strict=True):
        assert np.array_equal(x, y)
    assert whole[0].size == 50


def test_batch_query_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from neardup.cli.main import main

    q = np.array([0, 0xFFFF, 1 << 40], np.uint64)
    np.save(tmp_path / "q.npy", q)
    (tmp_path / "s.csv").write_text("id,fingerprint\na,0000000000000001\nb,00000000000fffff\n")
    out = tmp_path / "pairs.csv"
    args = ["batch-query", "--queries", str(tmp_path / "q.npy"), "--pairs-out", str(out)]
    assert main([*args, "--stored", str(tmp_path / "s.csv"), "-k", "4", "-q"]) == 0
    assert out.read_text() == "stored_id,query_id,distance\na,0,1\na,2,2\nb,1,4\n"
    (tmp_path / "bad.csv").write_text("id,fp\na,1\n")
    assert main([*args, "--stored", str(tmp_path / "bad.csv")]) != 0
    assert "id,fingerprint" in capsys.readouterr().err


@pytest.mark.parametrize("keep", ["first", "longest", "none"])
def test_near_pairs_between_exact_groups_across_many_partitions(tmp_path: Path, keep: str) -> None:
    # every document twice (exact groups of two, the copies in another file), so near pairs are
    # repeated over both groups' members (``xpand``) and the keep rounds cross partitions
    (src,) = sample_slice(tmp_path, 300)
    rows = [json.loads(line) for line in Path(src).read_text().splitlines()]
    copy = tmp_path / "copy.jsonl"
    copy.write_text("".join(json.dumps({**r, "id": f"c{r['id']}"}) + "\n" for r in rows))
    inputs = [src, str(copy)]
    cfg = DedupConfig(keep=keep)  # type: ignore[arg-type]
    want = single_machine(inputs, cfg)
    res = run_dedup(inputs, str(tmp_path / "work"), config=cfg, partitions=8)
    assert list((tmp_path / "work" / "xpand").glob("*.arrow"))
    assert res.steps["keep"]["rounds"] >= 2
    assert_same(distributed(res), want)


def test_rerun_after_a_keep_round_died_gives_the_same_output(tmp_path: Path) -> None:
    inputs = sample_slice(tmp_path, 600, 2)
    work = tmp_path / "work"
    first = run_dedup(inputs, str(work), partitions=6)
    assert first.steps["keep"]["rounds"] >= 2
    want = distributed(first)
    # round 1 of partition 0 died before its marker, so every later step reruns too
    os.remove(work / "kround" / "r0001" / "_done" / "00000")
    for step in ("final", "write", "count"):
        shutil.rmtree(work / step / "_done")
    again = run_dedup(inputs, str(work), partitions=6)
    assert again.steps["keep"]["rounds"] == first.steps["keep"]["rounds"]
    assert_same(distributed(again), want)


def test_short_texts_searched_at_distance_zero_as_the_single_machine(tmp_path: Path) -> None:
    """On defaults ``neardup.dedup``'s SimHash pass pairs two texts of ``short_chars`` or more
    within 3 bits but short texts only at distance 0: short posts that share their words in
    another order (SimHash 1-3 bits apart, few shared bigrams) are no candidates on either
    engine (the distributed pass once searched them at 3 bits: 12 extra candidates here)."""
    import random

    rng = random.Random(3)
    words = [f"word{i}" for i in range(2000)]
    rows = []
    for _ in range(60):
        base = rng.sample(words, 12)
        for _ in range(3):
            w = list(base)
            rng.shuffle(w)
            w[rng.randrange(12)] = rng.choice(words)
            rows.append(" ".join(w))
        rows.append(" ".join(base * 4))  # a longer text of the same words
    files = []
    for p in range(2):
        f = tmp_path / f"p{p}.jsonl"
        f.write_text(
            "".join(
                json.dumps({"id": f"{p}-{i}", "text": t}) + "\n" for i, t in enumerate(rows[p::2])
            )
        )
        files.append(str(f))
    cfg = DedupConfig()
    want = single_machine(files, cfg)
    for partitions in (1, 3):
        got = distributed(
            run_dedup(files, str(tmp_path / f"w{partitions}"), config=cfg, partitions=partitions)
        )
        assert_same(got, want)
        assert got["stats"]["candidates"] == want["stats"]["candidates"]
