"""Deduplicator: decisions, atomic check-and-insert, durability, retention, errors."""

from __future__ import annotations

import errno
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from doubles import SimpleFingerprinter, output_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.errors import (
    ConfigError,
    IndexStateError,
    InputError,
    InputTypeError,
    NotFoundError,
    StorageError,
)
from neardup.online.deduplicator import Deduplicator, DedupSettings
from neardup.rules.decision import Decision, Match


def _fp():
    # the store's mechanics are tested with the contract-shaped stand-in, so these tests do not
    # depend on the fingerprint module's tuning; tests/online/test_online_integration.py uses the real one
    return SimpleFingerprinter()


def _dd(path=None, **kw):
    kw.setdefault("verify", False)
    kw.setdefault("fingerprinter", _fp())
    kw.setdefault("commit_interval_ms", 0.0)
    return Deduplicator.open(path, **kw)


def _text(i: int) -> str:
    rng = np.random.default_rng(i)
    return " ".join(f"w{x}" for x in rng.integers(0, 100_000, 40))


def test_open_is_the_one_constructor(tmp_path):
    """``Deduplicator.open`` opens (or recovers) a data directory or an in-memory store, from
    keyword options or a :class:`DedupSettings`; the class itself takes no path."""
    with Deduplicator.open(tmp_path, verify=False, fingerprinter=_fp()) as d:
        assert d.add({"id": "a", "text": _text(1)}).added
    settings = DedupSettings(verify=False, fingerprinter=_fp())
    with Deduplicator.open(tmp_path, settings) as d:
        assert "a" in d and d.check({"id": "b", "text": _text(1)}).matches[0].id == "a"
    with Deduplicator.open(None, settings) as m:  # in memory
        assert m.add({"id": "a", "text": _text(1)}).added and m.stats()["durable"] is False
    with pytest.raises(TypeError):
        Deduplicator(tmp_path)  # type: ignore[misc]
    with pytest.raises(ConfigError, match="unknown option max_distanse"):
        Deduplicator.open(max_distanse=3)


class FakeClock:
    def __init__(self, t: float = 1_700_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.mark.parametrize("durable", [False, True])
def test_check_and_add_basic(tmp_path, durable):
    with _dd(tmp_path / "d" if durable else None) as d:
        a = d.check_and_add({"id": "a", "text": _text(1)})
        assert isinstance(a, Decision) and a.added and not a.duplicate and a.matches == ()
        b = d.check_and_add({"id": "b", "text": _text(1) + " "})
        assert b.duplicate and not b.added
        assert b.matches[0] == Match("a", 0, 1.0)
        c = d.check({"id": "c", "text": _text(2)})
        assert not c.duplicate and not c.added
        assert len(d) == 1 and "a" in d and "b" not in d
        assert b.to_dict()["matches"] == [{"id": "a", "distance": 0, "score": 1.0}]
        assert b.to_dict()["fingerprint"] == format(b.fingerprint, "x")


def test_batch_keeps_exactly_one_of_duplicates():
    with _dd() as d:
        out = d.check_and_add([{"id": f"x{i}", "text": _text(7)} for i in range(5)])
        assert [o.added for o in out] == [True, False, False, False, False]
        assert all(o.matches[0].id == "x0" for o in out[1:])


def test_add_inserts_duplicates_and_reports_them():
    with _dd() as d:
        d.add({"id": "a", "text": _text(1)})
        b = d.add({"id": "b", "text": _text(1)})
        assert b.added and b.duplicate and b.matches[0].id == "a"
        assert len(d) == 2


def test_resend_is_idempotent(tmp_path):
    with _dd(tmp_path) as d:
        d.check_and_add({"id": "a", "text": _text(1)})
        again = d.check_and_add({"id": "a", "text": _text(1)})
        assert again.duplicate and not again.added and again.matches[0] == Match("a", 0, 1.0)
        again = d.add({"id": "a", "text": _text(3)})
        assert not again.added and again.matches[0].id == "a"
        assert len(d) == 1


def test_get_delete(tmp_path):
    with _dd(tmp_path) as d:
        d.add({"id": "a", "text": "hello there world", "metadata": {"k": [1, 2]}, "time": 1234.5})
        g = d.get("a")
        assert g["id"] == "a" and g["time"] == 1234.5 and g["metadata"] == {"k": [1, 2]}
        assert g["text"] == "hello there world" and int(g["fingerprint"], 16) >= 0
        d.delete("a")
        with pytest.raises(NotFoundError):
            d.get("a")
        with pytest.raises(NotFoundError):
            d.delete("a")
        assert not d.check({"id": "z", "text": "hello there world"}).duplicate
        assert d.check_and_add({"id": "a", "text": "hello there world"}).added


def test_store_text_false_hides_text(tmp_path):
    with _dd(tmp_path, store_text=False) as d:
        d.add({"id": "a", "text": "hello there world"})
        assert "text" not in d.get("a")


@pytest.mark.parametrize(
    ("docs", "exc", "needle"),
    [
        ([{"id": "a"}], InputError, "documents[0].text"),
        ([{"text": "x"}], InputError, "documents[0].id"),
        ([{"id": "a", "text": "x"}, {"id": 3, "text": "y"}], InputTypeError, "documents[1].id"),
        ([{"id": "a", "text": b"x"}], InputTypeError, "documents[0].text"),
        ([{"id": "a", "text": "x", "time": "now"}], InputTypeError, "documents[0].time"),
        ([{"id": "a", "text": "x", "metadata": [1]}], InputTypeError, "documents[0].metadata"),
        ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], InputError, "repeats"),
        (["nope"], InputTypeError, "documents[0]"),
        ("nope", InputTypeError, "expected a document"),
        ([{"id": "a", "text": "x \udc80"}], InputError, "documents[0].text: holds a lone surr"),
        ([{"id": "a", "text": "x", "metadata": {"k": "\ud800"}}], InputError, "metadata: holds"),
    ],
)
def test_bad_documents_reject_whole_batch(docs, exc, needle):
    with _dd() as d:
        with pytest.raises(exc, match=None) as info:
            d.check_and_add(docs)
        assert needle in str(info.value)
        assert len(d) == 0


def test_a_store_refuses_lone_surrogates_and_opens_again(tmp_path):
    """A lone surrogate has no UTF-8 form: a store that took one (the text or the metadata)
    failed every later open. Refused before anything is queued; the store opens again. A
    NumPy number is a time like any other."""
    with _dd(tmp_path) as d:
        d.add({"id": "a", "text": "fine text"})
        for bad in ({"text": "y \ud800"}, {"text": "y", "metadata": {"k": "\udfff"}}):
            with pytest.raises(InputError, match="lone surrogate"):
                d.add({"id": "b", **bad})
        with pytest.raises(InputError, match="lone surrogate"):
            d.load([{"id": "c", "text": "z \ud800"}])
        now = time.time()
        d.add({"id": "t", "text": "numpy time", "time": np.int64(now)})
        d.add({"id": "u", "text": "numpy float time", "time": np.float64(now)})
    with _dd(tmp_path) as d:
        assert len(d) == 3 and d.get("t")["time"] == float(int(now))


def test_concurrent_pairs_exactly_one_kept(tmp_path):
    n = 1000
    with _dd(tmp_path, commit_interval_ms=1.0) as d:
        barrier = threading.Barrier(8)

        def send(i: int, side: str) -> Decision:
            return d.check_and_add(
                {"id": f"{side}{i}", "text": _text(10_000 + i) + (" ." if side == "b" else "")}
            )

        def worker(k: int) -> list[tuple[int, Decision]]:
            barrier.wait()
            return [(i, send(i, "a" if k < 4 else "b")) for i in range(k % 4, n, 4)]

        with ThreadPoolExecutor(8) as ex:
            futures = [ex.submit(worker, k) for k in range(8)]
            results = [r for f in futures for r in f.result()]
        by_pair: dict[int, list[Decision]] = {}
        for i, dec in results:
            by_pair.setdefault(i, []).append(dec)
        assert len(by_pair) == n
        for _i, decs in by_pair.items():
            assert len(decs) == 2
            assert sum(x.added for x in decs) == 1
            loser = next(x for x in decs if not x.added)
            winner = next(x for x in decs if x.added)
            assert loser.duplicate and loser.matches[0].id == winner.id
        assert len(d) == n


def test_reopen_replays_log_without_close(tmp_path):
    d = _dd(tmp_path)
    d.check_and_add([{"id": f"x{i}", "text": _text(i)} for i in range(50)])
    d.delete("x3")
    # simulate a crash: no close(), just drop the lock so the directory can be reopened
    d._writer._closed = True
    d.store._state.dir.unlock()
    with _dd(tmp_path) as d2:
        assert len(d2) == 49 and "x3" not in d2 and "x4" in d2
        assert d2.check({"id": "q", "text": _text(5)}).matches[0].id == "x5"
        assert d2.stats()["replayed_records"] == 51


def test_flush_and_reopen_from_segments(tmp_path):
    with _dd(tmp_path, memtable_size=100) as d:
        for s in range(0, 300, 50):
            d.check_and_add([{"id": f"x{i}", "text": _text(i)} for i in range(s, s + 50)])
        d.flush()
        assert d.stats()["segments"] >= 2
        d.delete("x10")
    with _dd(tmp_path) as d2:
        st = d2.stats()
        assert st["replayed_records"] == 0 and st["segment_rows"] == 300
        assert len(d2) == 299
        assert d2.check({"id": "q", "text": _text(250)}).matches[0].id == "x250"
        assert not d2.check({"id": "q", "text": _text(10)}).duplicate


def test_lock_refuses_second_open(tmp_path):
    with _dd(tmp_path), pytest.raises(IndexStateError, match="already open"):
        _dd(tmp_path)


def test_reopen_with_other_fingerprinter_config_is_refused(tmp_path):
    with _dd(tmp_path):
        pass

    class Other(SimpleFingerprinter):
        def config(self):
            return {"kind": "other", "bits": 64}

    with pytest.raises(ConfigError, match="fingerprinter config"):
        _dd(tmp_path, fingerprinter=Other())


def test_retention_drops_whole_partitions(tmp_path):
    clock = FakeClock()
    with _dd(tmp_path, retention="4h", partition_seconds=3600, clock=clock) as d:
        d.add({"id": "old", "text": _text(1)})
        d.flush()
        clock.t += 2 * 3600
        d.add({"id": "mid", "text": _text(2)})
        d.flush()
        assert d.stats()["partitions"] == 2
        clock.t += 3 * 3600  # "old" is now 5 h old, its partition ended 4 h+ ago
        assert not d.check({"id": "q", "text": _text(1)}).duplicate
        assert d.check({"id": "q", "text": _text(2)}).duplicate
        d.flush()  # runs retention in the writer
        d._writer._last_expire = 0.0
        d.check({"id": "q", "text": _text(2)})
        st = d.stats()
        assert st["partitions"] == 1 and st["dropped_partitions"] == 1
        assert "old" not in d and "mid" in d and len(d) == 1


def test_retention_in_memory():
    clock = FakeClock()
    with _dd(None, retention=7200, partition_seconds=3600, clock=clock) as d:
        d.add({"id": "old", "text": _text(1)})
        clock.t += 4 * 3600
        assert not d.check({"id": "q", "text": _text(1)}).duplicate
        d._writer._last_expire = 0.0
        d.add({"id": "new", "text": _text(2)})
        assert "old" not in d and len(d) == 1


def test_enospc_refuses_write_and_keeps_store_usable(tmp_path, monkeypatch):
    import neardup.store.wal as wal

    with _dd(tmp_path) as d:
        d.add({"id": "a", "text": _text(1)})
        real = wal.os.write

        def full(fd, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(wal.os, "write", full)
        with pytest.raises(StorageError, match="disk is full"):
            d.check_and_add({"id": "b", "text": _text(2)})
        assert "b" not in d
        assert d.check({"id": "q", "text": _text(1)}).duplicate  # reads still work
        monkeypatch.setattr(wal.os, "write", real)
        assert d.check_and_add({"id": "b", "text": _text(2)}).added
    with _dd(tmp_path) as d2:
        assert len(d2) == 2


def test_fsync_failure_is_storage_error(tmp_path, monkeypatch):
    import neardup.store.wal as wal

    with _dd(tmp_path) as d:
        d.add({"id": "a", "text": _text(1)})
        size = d.stats()["wal_bytes"]
        monkeypatch.setattr(
            wal.os, "fdatasync", lambda fd: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error"))
        )
        with pytest.raises(StorageError):
            d.add({"id": "b", "text": _text(2)})
        monkeypatch.undo()
        assert d.stats()["wal_bytes"] == size
    with _dd(tmp_path) as d2:
        assert "b" not in d2 and "a" in d2


def test_closed_deduplicator_refuses():
    d = _dd()
    d.add({"id": "a", "text": "x"})
    d.close()
    for call in (
        lambda: d.check({"id": "a", "text": "x"}),
        lambda: d.get("a"),
        lambda: "a" in d,
        lambda: len(d),
        lambda: d.compact(),
        lambda: d.group_matches([{"id": "b", "text": "y"}]),
    ):
        with pytest.raises(IndexStateError, match="closed"):
            call()


def test_delete_many_takes_a_list_of_ids_not_a_str_and_reads_a_generator_once():
    with _dd() as d:
        for i in ("a", "b", "c", "abc"):
            d.add({"id": i, "text": f"doc {i} " * 5})
        with pytest.raises(InputTypeError, match="wrap one id in a list"):
            d.delete_many("abc")
        with pytest.raises(InputTypeError, match="ids must be a list of str"):
            d.delete_many(None)  # type: ignore[arg-type]
        assert len(d) == 4
        assert d.delete_many(x for x in ["abc", "zz"]) == [True, False]
        assert sorted(i for i in ("a", "b", "c", "abc") if i in d) == ["a", "b", "c"]


def test_past_the_window_a_document_is_not_in_the_store():
    """``in`` answers as ``get`` does: a row past the retention window (which the next drop
    removes) is not there."""
    now = [1_700_000_000.0]
    with _dd(retention="1h", clock=lambda: now[0]) as d:
        d.add({"id": "a", "text": "the quick brown fox jumps over the lazy dog"})
        assert "a" in d
        now[0] += 3601
        assert "a" not in d
        with pytest.raises(NotFoundError):
            d.get("a")


def test_an_id_past_the_window_is_not_stored_for_the_writes_either(tmp_path):
    """Between a row leaving the window and the expiry pass that removes it, a re-send of its
    id was answered "already stored" (a duplicate of itself) and nothing was stored, though
    ``get`` said 404: 800 acknowledged documents of an exploratory pass were lost. Now the id
    is free: a check finds nothing, a delete is 404, an add replaces the row, durably."""
    now = [1_700_000_000.0]
    text = "the quick brown fox jumps over the lazy dog near the river bank today"
    with _dd(tmp_path, retention="1h", clock=lambda: now[0]) as d:
        assert d.check_and_add({"id": "x0", "text": text, "time": now[0] - 3598}).added
        now[0] += 5
        assert not d.check({"id": "x0", "text": text}).duplicate
        with pytest.raises(NotFoundError):
            d.delete("x0")
        again = d.check_and_add({"id": "x0", "text": text})
        assert again.added and not again.duplicate
        assert d.get("x0")["time"] == now[0]
        assert d.check_and_add({"id": "x0", "text": text}).matches[0].id == "x0"  # stored now
    with _dd(tmp_path, retention="1h", clock=lambda: now[0]) as d:
        assert d.get("x0")["time"] == now[0] and len(d) == 1


def test_open_names_a_bad_path(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a data directory"):
        Deduplicator.open(tmp_path / "f")
    with pytest.raises(InputTypeError, match="path must be a str or Path"):
        Deduplicator.open(str(tmp_path / "d").encode())  # type: ignore[arg-type]


def test_a_store_made_without_a_verifier_stays_without_on_reopen(tmp_path):
    """The default ``verify=True`` takes what the store was made with: a store made with
    ``verify=False`` keeps deciding by the distance rule alone after a restart (it turned
    verification on silently); a verifier given turns it on."""
    from neardup.verify import Verifier

    with Deduplicator.open(tmp_path, verify=False) as d:
        assert d.verifier is None
    with Deduplicator.open(tmp_path) as d:
        assert d.verifier is None
    with Deduplicator.open(tmp_path, verify=Verifier()) as d:
        assert d.verifier is not None
    with Deduplicator.open(tmp_path) as d:  # now recorded with the store
        assert d.verifier is not None


def test_config_validation():
    with pytest.raises(ConfigError, match="max_distance"):
        Deduplicator.open(max_distance=-1)
    with pytest.raises(ConfigError, match="retention"):
        Deduplicator.open(retention="soon")
    with pytest.raises(ConfigError, match="fingerprinter"):
        Deduplicator.open(fingerprinter=42)


# ------------------------------------------------------------------ model-based agreement
class _IntFingerprinter:
    """Fingerprint = the integer before the first space of the text (tests pick neighbours)."""

    bits = 64

    def config(self):
        return {"kind": "tests.IntFingerprinter", "bits": 64}

    def fingerprint_batch(self, texts, workers=1):
        from types import SimpleNamespace

        fps = np.array([int(t.split(" ", 1)[0]) for t in texts], dtype=np.uint64)
        return SimpleNamespace(fingerprints=fps, empty=np.zeros(len(texts), bool))


class _Model:
    """Sequential reference of the distance rule (verify=False): the writer must decide every
    operation exactly as if it were applied alone, in submission order."""

    def __init__(self, max_distance: int, max_matches: int) -> None:
        self.k, self.m = max_distance, max_matches
        self.docs: dict[str, tuple[int, str, int]] = {}  # id -> (fp, text, insertion seq)
        self.seq = 0

    def decide(self, kind: str, docs: list[dict]) -> list[tuple]:
        out = []
        for doc in docs:
            fp = int(doc["text"].split(" ", 1)[0])
            cands = []
            for cid, (cfp, ctext, seq) in self.docs.items():
                d = (fp ^ cfp).bit_count()
                if d <= self.k:
                    same = ctext.casefold() == doc["text"].casefold()
                    cands.append((d, seq, cid, 1.0 if same else None))
            cands.sort()
            matches = [(cid, d, sc) for d, _, cid, sc in cands[: self.m]]
            if doc["id"] in self.docs:
                cfp, ctext, _ = self.docs[doc["id"]]
                if not any(mid == doc["id"] for mid, _, _ in matches):
                    same = ctext.casefold() == doc["text"].casefold()
                    matches = [(doc["id"], (fp ^ cfp).bit_count(), 1.0 if same else None)]
                    matches = (matches + [(c, d, s) for c, d, s in cands_ids(cands)])[: self.m]
                out.append((doc["id"], True, False, matches))
                continue
            dup = bool(matches)
            add = kind == "add" or (kind == "check_and_add" and not dup)
            if add:
                self.docs[doc["id"]] = (fp, doc["text"], self.seq)
                self.seq += 1
            out.append((doc["id"], dup, add, matches))
        return out

    def delete(self, doc_id: str) -> bool:
        return self.docs.pop(doc_id, None) is not None


def cands_ids(cands):
    return [(cid, d, sc) for d, _, cid, sc in cands]


_BASES = [0, 0xFFFF, 0xF0F0F0F0F0F0F0F0, 2**63 + 12345]
_ops = st.lists(
    st.tuples(
        st.sampled_from(["check", "add", "check_and_add", "check_and_add", "delete"]),
        st.lists(
            st.tuples(
                st.integers(0, 11),  # id
                st.integers(0, len(_BASES) - 1),  # base fingerprint
                st.sets(st.integers(0, 63), max_size=5),  # flipped bits
                st.sampled_from(["a", "A", "b"]),  # text variant (a/A: same content hash)
            ),
            min_size=1,
            max_size=6,
            unique_by=lambda x: x[0],
        ),
    ),
    min_size=1,
    max_size=14,
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_ops, durable=st.booleans(), concurrent=st.booleans())
def test_writer_agrees_with_sequential_model(tmp_path_factory, ops, durable, concurrent):
    """Fast path (no candidate, new id) and full rules, grouped or not, durable (pending
    overlay before SQLite) or in memory: every decision equals the sequential model's."""
    path = tmp_path_factory.mktemp("model") if durable else None
    model = _Model(max_distance=3, max_matches=3)
    d = Deduplicator.open(
        path, verify=False, fingerprinter=_IntFingerprinter(), max_matches=3, max_distance=3
    )
    try:
        requests = []
        for kind, items in ops:
            docs = []
            for doc_id, base, flips, variant in items:
                fp = _BASES[base]
                for b in flips:
                    fp ^= 1 << b
                docs.append({"id": f"d{doc_id}", "text": f"{fp} {variant}"})
            requests.append((kind, docs))
        pending: list[tuple[list[dict], str, object]] = []

        def settle() -> None:  # compare the queued operations, in submission order
            for docs, kind, fut in pending:
                got = fut.result()
                want = model.decide(kind, docs)
                assert [
                    (x.id, x.duplicate, x.added, [(m.id, m.distance, m.score) for m in x.matches])
                    for x in got
                ] == want
            pending.clear()

        for kind, docs in requests:
            if kind == "delete":
                settle()
                for doc in docs:
                    if model.delete(doc["id"]):
                        d.delete(doc["id"])
                    else:
                        with pytest.raises(NotFoundError):
                            d.delete(doc["id"])
                continue
            # queued together (concurrent): the writer may decide them as one group
            pending.append((docs, kind, d.submit(kind, docs)[0]))
            if not concurrent:
                settle()
        settle()
        for doc_id in [f"d{i}" for i in range(12)]:
            assert (doc_id in d) == (doc_id in model.docs)
        assert len(d) == len(model.docs)
    finally:
        d.close()


# ---------------------------------------------------------------------------------------------
# pipelined group commit: the next group is decided while the previous one's fsync runs


def _gated_sync(monkeypatch, fail: bool):
    """Make the log's fsync wait for ``release`` (then fail with EIO when ``fail``), once."""
    import neardup.store.wal as wal

    real = wal.datasync
    entered, release = threading.Event(), threading.Event()
    calls = []

    def gated(fd):
        calls.append(fd)
        if len(calls) == 1:
            entered.set()
            assert release.wait(30)
            if fail:
                raise OSError(errno.EIO, "I/O error")
        real(fd)

    monkeypatch.setattr(wal, "datasync", gated)
    return entered, release


def test_groups_decided_during_an_fsync_see_the_earlier_group_and_wait_for_durability(
    tmp_path, monkeypatch
):
    with _dd(tmp_path) as d:
        d.add({"id": "seed", "text": _text(50)})
        entered, release = _gated_sync(monkeypatch, fail=False)
        fa, _ = d.submit("check_and_add", [{"id": "a", "text": _text(1)}])
        assert entered.wait(30)  # a is written and applied in memory, its fsync in flight
        fb, _ = d.submit("check_and_add", [{"id": "b", "text": _text(1)}])
        fc, _ = d.submit("check_and_add", [{"id": "c", "text": _text(2)}])
        # decided meanwhile, but not answered before the fsync that covers them
        assert not fa.done() and not fb.done() and not fc.done()
        release.set()
        a, b, c = fa.result(30)[0], fb.result(30)[0], fc.result(30)[0]
        assert a.added and not a.duplicate
        assert b.duplicate and not b.added and b.matches[0].id == "a"  # saw a while in flight
        assert c.added
    with _dd(tmp_path) as d2:
        assert "seed" in d2 and "a" in d2 and "c" in d2 and "b" not in d2


def test_failed_fsync_refuses_every_group_in_flight_and_takes_them_back(tmp_path, monkeypatch):
    with _dd(tmp_path) as d:
        d.add({"id": "seed", "text": _text(50)})
        size = d.stats()["wal_bytes"]
        n = len(d)
        entered, release = _gated_sync(monkeypatch, fail=True)
        fa, _ = d.submit("add", [{"id": "a", "text": _text(1)}])
        assert entered.wait(30)
        fb, _ = d.submit("check_and_add", [{"id": "b", "text": _text(2)}])
        time.sleep(0.2)  # b is decided (on top of a) while a's fsync hangs
        release.set()
        for f in (fa, fb):
            with pytest.raises(StorageError):
                f.result(30)
        # nothing refused stays visible, the log is back at its last durable offset
        assert "a" not in d and "b" not in d and len(d) == n
        assert d.stats()["wal_bytes"] == size
        assert not d.check({"id": "q", "text": _text(1)}).duplicate
        monkeypatch.undo()
        assert d.check_and_add({"id": "a", "text": _text(1)}).added  # writes work again
        d.delete("seed")
    with _dd(tmp_path) as d2:
        assert "a" in d2 and "b" not in d2 and "seed" not in d2 and len(d2) == 1


# -- submit(inline=True): the caller decides when the writer is idle ---------------------------
def _summary(decs: list[Decision]) -> list[tuple[str, bool, bool, tuple[str, ...]]]:
    return [(x.id, x.duplicate, x.added, tuple(m.id for m in x.matches)) for x in decs]


@pytest.mark.parametrize("durable", [False, True])
def test_inline_decisions_equal_writer_thread_decisions(tmp_path, durable):
    """One document at a time, inline and through the writer thread: the same decisions, and
    the inline ones were really decided in the caller's thread."""
    docs = []
    for i in range(60):
        docs.append({"id": f"x{i}", "text": _text(500 + i % 23)})  # repeats every 23
        docs.append({"id": f"y{i}", "text": _text(900 + i) + " ."})
    out = {}
    for inline in (False, True):
        path = tmp_path / f"inline-{inline}" if durable else None
        with _dd(path) as d:
            decs = [d.submit("check_and_add", doc, inline=inline)[0].result()[0] for doc in docs]
            out[inline] = _summary(decs)
            inline_groups = d.stats()["inline_groups"]
        assert inline_groups == (len(docs) if inline else 0)
    assert out[True] == out[False]
    assert sum(dup for _, dup, _, _ in out[True]) == 60 - 23


def test_inline_waits_for_the_group_the_writer_is_deciding(tmp_path):
    """A document submitted inline while the writer thread decides an earlier group is queued
    behind it (never decided beside it): it sees the earlier document as a duplicate."""
    with _dd(tmp_path) as d:
        entered, release = threading.Event(), threading.Event()
        decide = d._decider.decide

        def slow_decide(group, cutoff):
            if any(op.docs is not None and op.docs.ids[0] == "first" for op in group):
                entered.set()
                assert release.wait(10)
            return decide(group, cutoff)

        d._decider.decide = slow_decide  # type: ignore[method-assign]
        first, _ = d.submit("check_and_add", {"id": "first", "text": _text(7)})
        assert entered.wait(10)
        second, _ = d.submit("check_and_add", {"id": "second", "text": _text(7)}, inline=True)
        assert not second.done()  # queued: the writer is busy with "first"
        release.set()
        a, b = first.result(10)[0], second.result(10)[0]
        assert a.added and not b.added and b.duplicate and b.matches[0].id == "first"
        assert d.stats()["inline_groups"] == 0


def test_inline_and_writer_thread_take_turns_under_concurrency(tmp_path):
    """Eight threads, half inline, half through the writer, sending both sides of 600 pairs:
    exactly one of each pair is kept, and the other names it."""
    n = 600
    with _dd(tmp_path) as d:
        barrier = threading.Barrier(8)

        def worker(k: int) -> list[tuple[int, Decision]]:
            barrier.wait()
            out = []
            for i in range(k % 4, n, 4):
                side = "a" if k < 4 else "b"
                doc = {
                    "id": f"{side}{i}",
                    "text": _text(20_000 + i) + (" ." if side == "b" else ""),
                }
                fut, _ = d.submit("check_and_add", doc, inline=k % 2 == 0)
                out.append((i, fut.result(30)[0]))
            return out

        with ThreadPoolExecutor(8) as ex:
            results = [r for f in [ex.submit(worker, k) for k in range(8)] for r in f.result()]
        by_pair: dict[int, list[Decision]] = {}
        for i, dec in results:
            by_pair.setdefault(i, []).append(dec)
        assert len(by_pair) == n
        for decs in by_pair.values():
            assert sum(x.added for x in decs) == 1
            loser = next(x for x in decs if not x.added)
            winner = next(x for x in decs if x.added)
            assert loser.duplicate and loser.matches[0].id == winner.id
        assert len(d) == n
        st = d.stats()
        assert 0 < st["inline_groups"] < st["groups"]


def test_inline_group_that_fills_the_memtable_hands_the_flush_to_the_writer(tmp_path):
    with _dd(tmp_path, memtable_size=50) as d:
        for i in range(120):
            d.submit("check_and_add", {"id": f"m{i}", "text": _text(3000 + i)}, inline=True)[
                0
            ].result(10)
        deadline = time.monotonic() + 10
        while d.stats()["flushes"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert d.stats()["flushes"] >= 1
        assert len(d) == 120


def test_background_threads_do_not_keep_the_last_batch_alive(tmp_path):
    """The writer, syncer and SQLite applier drop a batch once it is done: objects they keep
    alive while idle are walked by every full garbage collection (a latency spike each)."""
    import gc

    with _dd(tmp_path) as d:
        d.add([{"id": f"r{i}", "text": _text(i)} for i in range(3000)])
        d.store.sync_meta()  # the applier has written them to SQLite

        def alive() -> dict[str, int]:
            gc.collect()
            kinds = {"AddRecord": 0, "Decision": 0, "Op": 0}
            for o in gc.get_objects():
                kind = type(o)
                # by neardup's own classes only: numpy.f2py (imported by numba) has an enum Op
                if kind.__name__ in kinds and kind.__module__.startswith("neardup."):
                    kinds[kind.__name__] += 1
            return kinds

        # the threads let go right after their last step; give a slow machine a moment
        deadline = time.monotonic() + 5
        while (kinds := alive()) != {"AddRecord": 0, "Decision": 0, "Op": 0}:
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert kinds == {"AddRecord": 0, "Decision": 0, "Op": 0}
        assert d.store._state.pending.by_id == {} and d.store._state.pending.by_rid == {}


def test_inline_sync_answers_in_the_callers_thread_and_a_failed_one_is_taken_back(
    tmp_path, monkeypatch
):
    """An inline group is fsynced by its caller when the syncer is idle (answered on return);
    if that fsync fails the group is refused and taken back, exactly as on the syncer thread."""
    with _dd(tmp_path) as d:
        fut, _ = d.submit("check_and_add", {"id": "a", "text": _text(1)}, inline=True)
        assert fut.done() and fut.result()[0].added  # synced and answered before submit returned
        n, size = len(d), d.stats()["wal_bytes"]
        syncs = d.stats()["wal_syncs"]
        import neardup.store.wal as wal

        real = wal.datasync
        monkeypatch.setattr(
            wal, "datasync", lambda fd: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error"))
        )
        fb, _ = d.submit("check_and_add", {"id": "b", "text": _text(2)}, inline=True)
        with pytest.raises(StorageError):
            fb.result(30)
        monkeypatch.setattr(wal, "datasync", real)
        # the writer thread takes the refused group back before anything else is decided
        c = d.check_and_add({"id": "c", "text": _text(3)})
        assert c.added and "b" not in d and len(d) == n + 1
        assert d.stats()["wal_syncs"] >= syncs + 2
        assert d.stats()["wal_bytes"] > size
    with _dd(tmp_path) as d2:
        assert "a" in d2 and "c" in d2 and "b" not in d2


_NO_NEW_KERNELS = """
import tempfile
import numpy as np
from doubles import loaded_kernels as loaded
from neardup import Deduplicator


tmp = tempfile.TemporaryDirectory()  # (removed at exit: its finalizer)
d = tmp.name
rng = np.random.default_rng(0)
words = [f"w{i}" for i in range(500)]
with Deduplicator.open(d) as dd:  # three segments on disk, one with texts (band keys, sketches)
    for tag, n in (("s", 5000), ("t", 3000)):
        dd.bulk_load([f"{tag}{i}" for i in range(n)], rng.integers(0, 2**64, n, dtype=np.uint64))
        dd.flush()
    dd.check_and_add([{"id": f"u{i}", "text": " ".join(rng.choice(words, 40).tolist())}
                      for i in range(300)])
    dd.flush()
dd = Deduplicator.open(d)
before = loaded()
for n, size in ((1, 40), (16, 40), (100, 40), (2000, 40), (3, 3000)):
    docs = [{"id": f"g{n}-{size}-{i}", "text": " ".join(rng.choice(words, size).tolist())}
            for i in range(n)]
    dd.check_and_add(docs)
zh = [chr(0x4E00 + i) for i in range(300)]  # non-ASCII texts: the word kernel's path
for n in (1, 16):
    dd.check_and_add([{"id": f"zh{n}-{i}", "text": "".join(rng.choice(zh, 30).tolist()) + "。"}
                      for i in range(n)])
dd.check_and_add({"id": "fr", "text": "Café crème — " + " ".join(rng.choice(words, 20).tolist())})
dd.delete("g16-40-0")  # a flush of the memtable's band keys with a row left out
dd.flush()
after = loaded()
dd.close()
print({k: (before.get(k, 0), v) for k, v in after.items() if v != before.get(k, 0)})
"""


def test_warm_up_loads_every_kernel_a_group_needs() -> None:
    """Right after opening (a fresh interpreter, a store with segments, one with texts),
    groups of 1, 16, 100 and 2,000 documents, long texts and non-ASCII ones (Chinese, Latin
    with accents), then a flush (which merges the segments), load no numba kernel that the
    warm-up did not: loading one from the cache on a request stalled everything queued behind
    it for tens of ms (a server's first Chinese request: ~125 ms, the word kernel and its
    code-point table)."""
    assert output_of(_NO_NEW_KERNELS) == "{}"


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=60) | st.sampled_from(["", " a  B\n", "x\x1cy", "Café  crème"]))
def test_one_document_preparation_equals_the_batch_one(text: str) -> None:
    """A single document (the service's usual request) takes the one-text fingerprint and
    content-hash paths; a batch of two the batch paths: the same fingerprint and hash."""
    with Deduplicator.open(verify=False) as d:  # the real fingerprinter
        p = d._preparer
        one = p.prepare([{"id": "a", "text": text}])
        two = p.prepare([{"id": "a", "text": text}, {"id": "b", "text": "zz"}])
    assert one.chash[0] == two.chash[0]
    assert one.fps.tolist() == two.fps[:1].tolist() and one.empty[0] == two.empty[0]


def test_compact_and_a_background_merge_never_build_the_same_segments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``compact()`` called while the writer is about to start a background merge: one of the
    two merges the segments, never both (the second read segments the first had closed: a
    ``TypeError`` out of ``compact()`` in a CI run). The writer is held inside its merge
    check until ``compact()`` is building, the window the race needs."""
    from neardup.store import Store

    held, go_on = threading.Event(), threading.Event()
    hold = [False]
    real_candidates, real_build = Store.compaction_candidates, Store.build_merged

    def candidates(self: Store, max_segments: int) -> object:
        if hold[0] and threading.current_thread().name == "neardup-writer":
            hold[0] = False
            held.set()
            go_on.wait(30)
        return real_candidates(self, max_segments)

    builds: list[tuple[str, tuple[object, ...]]] = []

    def build(self: Store, segs: list[object]) -> object:
        name = threading.current_thread().name
        builds.append((name, tuple(s.segment.path for s in segs)))  # type: ignore[attr-defined]
        if name != "neardup-compactor":
            go_on.set()  # the writer goes on while this merge reads its segments
            time.sleep(0.5)
        return real_build(self, segs)  # type: ignore[arg-type]

    monkeypatch.setattr(Store, "compaction_candidates", candidates)
    monkeypatch.setattr(Store, "build_merged", build)
    with Deduplicator.open(tmp_path / "d", verify=False, fingerprinter=SimpleFingerprinter()) as d:
        for k in range(3):
            hold[0] = k == 2  # the third flush makes three segments: a merge is due
            d.add([{"id": f"g{k}-{i}", "text": f"group {k} text {i} " * 5} for i in range(50)])
            d.flush()
        assert held.wait(30), "the writer never looked for a merge"
        assert d.compact() == 1
        assert len(d) == 150
    paths = [p for _, p in builds]
    assert len(paths) == len(set(paths)), builds


def test_a_steady_stream_of_inline_requests_does_not_starve_the_writers_housekeeping(tmp_path):
    """The writer's rounds of housekeeping (retention once a second, installing a finished
    flush, starting merges) come when its wait for work runs out. Requests decided inline (the
    service's single requests) keep the writer idle but hold the turn most of the time: a wait
    that runs out during a turn is owed at its end, before the next request decides inline.
    Before, the writer waited out the turn and then a whole second again, and a steady stream
    of requests could starve its housekeeping for as long as the stream lasted."""
    with _dd(tmp_path, retention=3600.0) as d:
        for k in range(3):  # the kernels both paths run compiled (or loaded) first
            doc = {"id": f"warm{k}", "text": _text(10**6 + k)}
            d.submit("check_and_add", doc, inline=k > 0)[0].result(600)
        before = d.stats()
        writer = d._writer
        rounds: list[float] = []
        real = writer._housekeeping

        def counted() -> None:
            rounds.append(time.monotonic())
            real()

        writer._housekeeping = counted  # the writer thread's rounds (after a group, or idle)
        start = time.monotonic()
        i = 0
        while time.monotonic() - start < 3.5:
            fut, _ = d.submit("check_and_add", {"id": f"s{i}", "text": _text(i)}, inline=True)
            fut.result(10)
            i += 1
        st = d.stats()
        inline = st["inline_groups"] - before["inline_groups"]
        assert inline > st["groups"] - before["groups"] - inline  # mostly inline
        assert len(rounds) >= 2, (len(rounds), i, inline)
