"""Long rows' stored token summaries (:mod:`neardup.online.summaries`): made for rows of
``SUMMARY_MIN_TOKENS`` tokens or more, added one by one or loaded in bulk, kept through a
reopen, gone with their row; a summary whose digest or checksum does not hold is set aside;
and with them or without them, the decisions are the same."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_rowcache import _articles

from neardup.online import Deduplicator
from neardup.online.summaries import (
    SUMMARY_BYTES,
    SUMMARY_MIN_TOKENS,
    _pack,
    _unpack,
    decode_summaries,
    make_summaries,
    sketch_digest,
)
from neardup.rules.verify import bound_rule
from neardup.verify import Verifier
from neardup.verify.overlap import histogram_bound_decisions
from neardup.verify.tokens import HIST_BITS, HIST_MAX, token_histograms


def _long_texts(seed: int, n: int) -> list[str]:
    """Texts of 520-700 tokens of one small vocabulary (their SimHash fingerprints gather, and
    unrelated ones fail the histogram bound); a fifth are copies with a few tokens replaced
    (near duplicates) or many (not), some exact."""
    vocab = [f"w{k}" for k in range(60)]
    return _articles(seed, n, vocab=vocab, tokens=(520, 700), edits=(0, 2, 8, 40, 90))


def _coded(h: np.ndarray) -> np.ndarray:
    """What a summary keeps of counts ``h``, written out: 0-11 as they are, then the upper end
    of 12-15, 16-23 and 24-47, and HIST_MAX (unbounded) from 48 on."""
    h = np.asarray(h, np.int64)
    return np.select([h <= 11, h <= 15, h <= 23, h <= 47], [h, 15, 23, 47], HIST_MAX).astype(
        np.uint8
    )


def test_packing_keeps_small_counts_and_an_upper_bound_of_the_others() -> None:
    buckets = 1 << HIST_BITS
    h = np.zeros((2, buckets), np.uint8)
    h[0, :256] = np.arange(256)
    h[1, buckets - 1] = 255
    got = _unpack(_pack(h))
    assert got[0, :256].tolist() == _coded(np.arange(256)).tolist()
    assert got[0, :12].tolist() == list(range(12)) and (got[0, 256:] == 0).all()
    # never below the count (the bound stays a bound), and unbounded only from 48 on
    assert (got[0, :256] >= np.arange(256)).all() and (got[0, :48] < HIST_MAX).all()
    assert got[1, buckets - 1] == HIST_MAX and (got[1, : buckets - 1] == 0).all()


def test_a_summary_is_used_only_where_its_digest_and_checksum_hold() -> None:
    v = Verifier()
    texts = ["a b c " * 200, "short text"]
    sk = np.arange(2 * 48, dtype=np.uint8).reshape(2, 48)
    made = make_summaries(v, texts, sk, [b"0" * 16, b"1" * 16], np.array([600, 2]))
    assert made[1] is None and made[0] is not None and len(made[0]) == SUMMARY_BYTES
    digest = sketch_digest(sk[0])
    rids, hist, counts, chashes, bad = decode_summaries({7: made[0]}, {7: digest})
    assert (rids, counts.tolist(), chashes, bad) == ([7], [600], [b"0" * 16], 0)
    want, _ = token_histograms(v, texts[:1])
    assert (hist == _coded(want)).all()
    # another row's sketch (a row id allocated again), a damaged byte, a short blob
    damaged = bytearray(made[0])
    damaged[40] ^= 1
    for blobs, digests in (
        ({7: made[0]}, {7: digest ^ 1}),
        ({7: bytes(damaged)}, {7: digest}),
        ({7: made[0][:-1]}, {7: digest}),
        ({7: made[0]}, {}),
    ):
        assert (
            decode_summaries(blobs, digests)[0] == [] and decode_summaries(blobs, digests)[4] == 1
        )


words = st.lists(
    st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "h"]), min_size=1, max_size=400
)


@settings(max_examples=150, deadline=None)
@given(a=words, b=words)
def test_the_bound_on_a_summary_never_turns_down_a_pair_verification_accepts(a, b) -> None:
    v = Verifier()
    ta, tb = " ".join(a), " ".join(b)
    ok, _ = v.verify_many([ta], [tb], [0])
    made = make_summaries(
        v, [tb], np.zeros((1, 4), np.uint8), [b"x" * 16], np.array([SUMMARY_MIN_TOKENS])
    )
    _, r_hist, r_n, _, _ = decode_summaries({0: made[0]}, {0: sketch_digest(np.zeros(4, np.uint8))})
    q_hist, q_n = token_histograms(v, [ta])
    could, _ = histogram_bound_decisions(
        np.concatenate([q_hist, r_hist]),
        np.concatenate([q_n, r_n]),
        np.array([0]),
        np.array([1]),
        **bound_rule(v),
    )
    assert could[0] or not ok[0]


def _run(
    path: Path, texts: list[str], *, cache_rows: int, bulk: int = 0, resident: bool = False
) -> tuple[list, Deduplicator]:
    """Decisions of ``texts`` through a store at ``path``: the first ``bulk`` loaded as they
    are, the rest checked and added in groups of 30, then all checked again after a reopen;
    returns (decisions, the reopened deduplicator, still open)."""
    out: list = []
    d = Deduplicator.open(
        path,
        lsh_bands=30,
        lsh_rows=3,
        memtable_size=200,
        histogram_cache_rows=cache_rows,
        resident_summaries=resident,
    )
    if bulk:
        d.load([{"id": str(i), "text": t} for i, t in enumerate(texts[:bulk])])
    added: list[str] = []
    for lo in range(bulk, len(texts), 30):
        part = [{"id": str(lo + k), "text": t} for k, t in enumerate(texts[lo : lo + 30])]
        for g in d.check_and_add(part):
            out.append((g.duplicate, g.added, [(m.id, m.distance, m.score) for m in g.matches]))
            added += [g.id] if g.added else []
    d.delete(added[3])
    out.append(("deleted", added[3]))
    d.close()
    d = Deduplicator.open(
        path, memtable_size=200, histogram_cache_rows=cache_rows, resident_summaries=resident
    )
    while resident and not d.stats()["resident_summaries_loaded"]:  # checked from memory
        time.sleep(0.01)
    for g in d.check([{"id": f"q{i}", "text": t} for i, t in enumerate(texts[1::2])]):
        out.append((g.duplicate, g.added, [(m.id, m.distance, m.score) for m in g.matches]))
    return out, d


@pytest.mark.parametrize("resident", [False, True], ids=["from-sqlite", "held-in-memory"])
@pytest.mark.parametrize("bulk", [0, 120], ids=["added", "loaded-in-bulk"])
def test_summaries_change_no_decision_and_spare_reads(
    tmp_path: Path, bulk: int, resident: bool
) -> None:
    texts = _long_texts(5, 300)
    # no cache: every hit is read (the summaries are stored, never used)
    want, d = _run(tmp_path / "read", texts, cache_rows=0, bulk=bulk)
    assert d._decider.summaries_used == 0
    d.close()
    got, d = _run(tmp_path / "summaries", texts, cache_rows=131_072, bulk=bulk, resident=resident)
    try:
        assert got == want
        # after the reopen the cache starts empty: the bound worked from stored summaries
        assert d._decider.summaries_used > 100 and d._decider.histogram_rejected > 30
        assert d._decider.summaries_set_aside == 0
        stats = d.stats()
        assert stats["summaries_used_rows"] == d._decider.summaries_used
        # every long row stored has one, and a deleted row's goes with it
        deleted = next(x[1] for x in got if x[0] == "deleted")
        rids = d.store.lookup_ids([str(i) for i in range(len(texts))])
        assert deleted not in rids and len(rids) > 150
        stored = d.store.summaries(rids.values())
        assert len(stored) == len(rids)
        if resident:  # every one held, and the checks took them from memory
            assert stats["resident_summaries"] == len(stored)
        gone = next(iter(rids))
        d.delete(gone)
        assert rids[gone] not in d.store.summaries([rids[gone]])
    finally:
        d.close()
    with Deduplicator.open(tmp_path / "summaries") as d:
        assert d.store.summaries(rids.values()).keys() == set(rids.values()) - {rids[gone]}
    dups = [x[0] for x in want if x[0] != "deleted"]
    assert sum(dups) > 40 and sum(not x for x in dups) > 100


def test_histograms_from_the_signatures_pass_change_no_decision_nor_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request's token histograms come from its MinHash pass (``PreparedDocs.hists``): the
    histogram bound and the long rows' summaries take them instead of tokenising the texts
    again in the writer, with the same decisions and the same stored summaries as a
    preparation that makes none (``HIST_DOCS`` below every batch)."""
    import neardup.online.bounds as bounds_mod
    import neardup.online.prepare as prepare_mod
    import neardup.online.summaries as summaries_mod

    tokenised: list[int] = []

    def counted(verifier: Verifier, texts: list[str], **kw: object) -> tuple:
        tokenised.append(len(texts))
        return token_histograms(verifier, texts, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(summaries_mod, "token_histograms", counted)
    monkeypatch.setattr(bounds_mod, "token_histograms", counted)
    texts = _long_texts(5, 300)
    got, d = _run(tmp_path / "prepared", texts, cache_rows=131_072)
    try:
        assert tokenised == [] and d._decider.histogram_rejected > 30
        rids = d.store.lookup_ids([str(i) for i in range(len(texts))])
        got_summaries = d.store.summaries(rids.values())
    finally:
        d.close()
    monkeypatch.setattr(prepare_mod, "HIST_DOCS", -1)
    want, d = _run(tmp_path / "tokenised", texts, cache_rows=131_072)
    try:
        assert sum(tokenised) > 100  # (the writer tokenised them)
        assert got == want
        assert d.store.lookup_ids(list(rids)) == rids
        assert d.store.summaries(rids.values()) == got_summaries and len(got_summaries) > 150
    finally:
        d.close()


def test_a_short_row_has_no_summary_and_a_stale_one_is_set_aside(tmp_path: Path) -> None:
    texts = _long_texts(9, 60)
    with Deduplicator.open(tmp_path, lsh_bands=30, lsh_rows=3, memtable_size=50) as d:
        for i, t in enumerate(texts):
            d.check_and_add({"id": str(i), "text": t})
        d.check_and_add({"id": "short", "text": "a short post of a few words"})
        rid = d.store.lookup_ids(["short"])["short"]
        assert rid not in d.store.summaries([rid])
        stored = d.store.summaries(range(rid))
        assert stored
        # every summary moved to another row id: none matches its row's sketch any more
        d.flush()
        d.store._state.db.put_summaries(
            [(r + 1, b) for r, b in sorted(stored.items(), reverse=True)]
        )
    want, _ = _decisions(tmp_path, texts, cache_rows=0)
    got, d = _decisions(tmp_path, texts, cache_rows=131_072)
    assert got == want
    assert d._decider.summaries_set_aside > 0


def _decisions(path: Path, texts: list[str], *, cache_rows: int) -> tuple[list, Deduplicator]:
    with Deduplicator.open(path, memtable_size=50, histogram_cache_rows=cache_rows) as d:
        out = [
            (g.duplicate, [(m.id, m.distance, m.score) for m in g.matches])
            for g in d.check([{"id": f"q{i}", "text": t} for i, t in enumerate(texts)])
        ]
    return out, d


def test_summary_layout_is_pinned() -> None:
    # u32 digest, 16-byte content hash, u32 tokens, 512 bytes of 4-bit count codes (1,024
    # buckets), u32 CRC-32
    assert SUMMARY_BYTES == 4 + 16 + 4 + 512 + 4
    v = Verifier()
    n_tok = SUMMARY_MIN_TOKENS
    made = make_summaries(
        v, ["x " * n_tok], np.zeros((1, 2), np.uint8), [b"h" * 16], np.array([n_tok])
    )
    digest, ch, n = struct.unpack_from("<I16sI", made[0])
    assert (digest, ch, n) == (sketch_digest(np.zeros(2, np.uint8)), b"h" * 16, n_tok)
    # one token fewer: no summary
    assert make_summaries(
        v, ["x " * (n_tok - 1)], np.zeros((1, 2), np.uint8), [b"h" * 16], np.array([n_tok - 1])
    ) == [None]
