"""``Deduplicator.load``: documents stored as they are, straight into segments and the metadata,
deciding nothing; later checks meet them exactly as if they had been added (same rows, same
band keys, same decisions), durable on return; bad ids refused before anything is stored."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest

from neardup.errors import InputError, InputTypeError
from neardup.online.deduplicator import Deduplicator

_WORDS = [
    "river",
    "stone",
    "cloud",
    "market",
    "winter",
    "signal",
    "garden",
    "engine",
    "paper",
    "window",
    "silver",
    "harbor",
    "forest",
    "candle",
    "bridge",
    "letter",
    "mirror",
    "orange",
    "planet",
    "ticket",
    "violin",
    "yellow",
    "zebra",
    "anchor",
]


def _texts(n: int, seed: int) -> list[str]:
    """Posts and edited copies of some (one or two words replaced), a few Chinese ones."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        if rng.random() < 0.15:
            out.append("".join(rng.choice("天地玄黄宇宙洪荒日月盈昃辰宿列张") for _ in range(30)))
            continue
        words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 40))]
        out.append(" ".join(words))
        if rng.random() < 0.4:
            w = list(words)
            for k in rng.sample(range(len(w)), min(2, len(w))):
                w[k] = rng.choice(_WORDS)
            out.append(" ".join(w))
    return out[:n]


_T0 = time.time() - 3600


def _docs(texts: list[str], tag: str) -> list[dict]:
    return [
        {"id": f"{tag}{i}", "text": t, "time": _T0 + i, "metadata": {"n": i} if i % 3 else None}
        for i, t in enumerate(texts)
    ]


def _entries(d: Deduplicator) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s in d.store._state.segments:
        for run in s.segment.band_runs():
            k, r = run
            out += zip(k.tolist(), r.tolist(), strict=True)
    return sorted(out)


@pytest.mark.parametrize("candidates", ["lsh", "simhash"])
def test_loaded_documents_are_met_as_added_ones(tmp_path, candidates) -> None:
    stored = _docs(_texts(400, 1), "s")
    queries = _docs(_texts(300, 2) + _texts(100, 1)[::2], "q")
    with (
        Deduplicator.open(tmp_path / "added", candidates=candidates) as a,
        Deduplicator.open(tmp_path / "loaded", candidates=candidates) as b,
    ):
        a.add(stored)
        a.flush()
        assert b.load(stored) == len(stored)
        assert len(a) == len(b) == len(stored)
        # the same rows: ids, texts, metadata, fingerprints; the same band keys by row id
        for doc in stored[::37]:
            assert a.get(doc["id"]) == b.get(doc["id"])
        assert _entries(a) == _entries(b)
        if candidates == "lsh":
            assert _entries(b)  # the loaded rows are keyed for the MinHash channel
        want = [(x.duplicate, [m.id for m in x.matches]) for x in a.check(queries)]
        got = [(x.duplicate, [m.id for m in x.matches]) for x in b.check(queries)]
        assert got == want and any(dup for dup, _ in got)
    with Deduplicator.open(tmp_path / "loaded", candidates=candidates) as b:  # durable
        assert len(b) == len(stored)
        got = [(x.duplicate, [m.id for m in x.matches]) for x in b.check(queries)]
        assert got == want


def test_a_prepared_batch_loads_as_its_documents_would(tmp_path) -> None:
    """``load_prepared`` of a part of a batch ``prepare`` made (``PreparedDocs.take`` /
    ``concat``), with its own times: the same rows, band keys and later decisions as ``load``
    of those documents (what a store check's batches become in ``dedup_into``)."""
    from neardup.online.prepare import PreparedDocs

    texts = _texts(400, 4)
    docs = [{"id": f"p{i}", "text": t} for i, t in enumerate(texts)]
    pick = np.array([i for i in range(len(docs)) if i % 3], np.int64)
    times = _T0 + pick.astype(np.float64)
    queries = _docs(_texts(200, 5) + texts[::3], "q")
    with (
        Deduplicator.open(tmp_path / "docs") as a,
        Deduplicator.open(tmp_path / "prepared") as b,
    ):
        a.load([{**docs[i], "time": float(t)} for i, t in zip(pick, times, strict=True)])
        first, second = b.prepare(docs[:150]), b.prepare(docs[150:])
        parts = [first.take(pick[pick < 150]), second.take(pick[pick >= 150] - 150)]
        batch = PreparedDocs.concat(parts)
        assert batch.ids == [docs[i]["id"] for i in pick]
        assert batch.hists is not None and first.hists is not None  # (the MinHash pass's)
        assert np.array_equal(batch.hists[: len(parts[0])], first.hists[pick[pick < 150]])
        assert batch.special == PreparedDocs.specials(parts)  # (kernel forms, re-keyed)
        assert batch.special is not None and first.special is not None and second.special
        want_special = {k: v for k, v in enumerate(
            [first.special.get(i) for i in pick[pick < 150].tolist()]
            + [second.special.get(i - 150) for i in pick[pick >= 150].tolist()]
        ) if v is not None}  # fmt: skip
        assert batch.special == want_special
        with pytest.raises(InputError, match="times"):
            b.load_prepared(batch, times=np.full(len(pick), np.nan))
        assert len(b) == 0
        assert b.load_prepared(batch, times=times) == len(pick)
        for i in pick[::17].tolist():
            assert a.get(f"p{i}") == b.get(f"p{i}")
        assert _entries(a) == _entries(b) and _entries(b)
        want = [(x.duplicate, [m.id for m in x.matches]) for x in a.check(queries)]
        got = [(x.duplicate, [m.id for m in x.matches]) for x in b.check(queries)]
        assert got == want and any(dup for dup, _ in got)
        with pytest.raises(InputError, match="already"):  # stored ids: refused as load does
            b.load_prepared(b.prepare(docs[1:3]))


def test_a_memory_store_loads_too() -> None:
    texts = _texts(60, 3)
    with Deduplicator.open() as d:
        assert d.load(_docs(texts, "m")) == 60
        hit = d.check({"id": "x", "text": texts[5]})
        assert hit.duplicate and hit.matches[0].id == "m5"


def test_load_refuses_repeated_or_stored_ids_and_loads_nothing(tmp_path) -> None:
    texts = _texts(20, 4)
    with Deduplicator.open(tmp_path / "s") as d:
        with pytest.raises(InputError, match="'r1' repeats documents\\[1\\]"):
            d.load([*_docs(texts[:3], "r"), {"id": "r1", "text": "again"}])
        assert len(d) == 0
        d.load(_docs(texts[:5], "r"))
        with pytest.raises(InputError, match="already exist"):
            d.load(_docs(texts, "r"))  # r0..r4 are stored
        assert len(d) == 5 and "r7" not in d
        with pytest.raises(InputTypeError):
            d.load([{"id": "t", "text": 5}])
        assert d.load([]) == 0 and len(d) == 5
    with Deduplicator.open(tmp_path / "s") as d:
        assert len(d) == 5
        assert np.all([f"r{i}" in d for i in range(5)])


_CHILD = """
import random, sys
from neardup.online.deduplicator import Deduplicator
words = "river stone cloud market winter signal garden engine paper window".split()
rng = random.Random(1)
with Deduplicator.open(sys.argv[1]) as d:
    for c in range(1000):
        docs = [
            {"id": f"c{c}-{i}", "text": " ".join(rng.choice(words) for _ in range(20)) + f" {c} {i}"}
            for i in range(2000)
        ]
        d.load(docs)
        print("ACK", c, flush=True)
"""


def test_a_kill_during_loads_keeps_every_acknowledged_load_and_no_part_of_another(
    tmp_path,
) -> None:
    """A real process loading 2,000-document batches is SIGKILLed mid-way: after a restart every
    batch it acknowledged is there, and the batch it was writing is there whole or not at all
    (its metadata rows without a segment in the manifest are removed on open)."""
    import os
    import signal
    import subprocess
    import sys

    path = tmp_path / "s"
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path)], stdout=subprocess.PIPE, text=True
    )
    acked = -1
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            acked = int(line.split()[1])
            if acked >= 2:
                time.sleep(random.uniform(0.0, 0.1))  # a 2,000-document load takes ~40 ms
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert acked >= 2
    with Deduplicator.open(path) as d:
        n = len(d)
        assert n % 2000 == 0 and n >= 2000 * (acked + 1), (n, acked)
        assert all(f"c{c}-{i}" in d for c in range(acked + 1) for i in (0, 1999))
        assert f"c{n // 2000}-0" not in d
        got = d.get("c1-7")
        hit = d.check({"id": "q", "text": got["text"]})
        assert hit.duplicate and hit.matches[0].id == "c1-7"


def test_a_failed_load_leaves_no_rows_and_no_segment_files(tmp_path, monkeypatch) -> None:
    """The metadata rows (a helper thread) and the segment files (the writer) are written side
    by side, the manifest last: when either fails, neither is left behind."""
    from neardup.errors import StorageError
    from neardup.store import partitions

    texts = _texts(40, 6)
    path = tmp_path / "s"
    with Deduplicator.open(path) as d:
        d.load(_docs(texts[:10], "a"))
        files = sorted(p.name for p in path.glob("seg-*"))
        # the rows fail (an id already stored) while the segments were written: files removed
        with pytest.raises(InputError, match="already exist"):
            d.load(_docs(texts, "a"))
        assert sorted(p.name for p in path.glob("seg-*")) == files and len(d) == 10

        # the segments fail (a full disk) while the rows went in: rows taken out again
        def full(*args, **kwargs):
            raise StorageError("cannot write segment: [Errno 28] No space left on device")

        monkeypatch.setattr(partitions, "new_segment", full)
        with pytest.raises(StorageError, match="No space left"):
            d.load(_docs(texts, "b"))
        monkeypatch.undo()
        assert len(d) == 10 and "b0" not in d
        assert sorted(p.name for p in path.glob("seg-*")) == files
        assert d.load(_docs(texts, "b")) == 40 and len(d) == 50
    with Deduplicator.open(path) as d:
        assert len(d) == 50 and "b39" in d
