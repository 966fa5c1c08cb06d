"""The online store's ``lsh`` mode (the MinHash channel) through the Deduplicator: a document
checked online decides like ``neardup dedup`` on the window plus that document (generated
windows, a store with compressed texts, the dev slice, single requests); atomicity and
keep-first within a write group; band keys survive close/reopen, flushes, merges and a torn
log; bulk segments beside band-key sections; the stored mode and the service's setting; the
writer takes the preparer's band keys; the group's verification ahead decides like one by one,
and a near duplicate both channels find is not signed again. The band-key sections, look-ups
and searches themselves against their references: ``test_online_lsh_sections.py``."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from neardup.batch.run import dedup
from neardup.errors import ConfigError, UnsupportedVersionError
from neardup.online.deduplicator import Deduplicator
from neardup.store.layout import read_json_file, write_json_file

_WORDS = [
    "river",
    "stone",
    "market",
    "winter",
    "garden",
    "signal",
    "copper",
    "window",
    "silver",
    "yellow",
    "morning",
    "letter",
    "engine",
    "harbor",
    "forest",
    "candle",
    "mirror",
    "thunder",
    "orange",
    "pocket",
    "castle",
    "bridge",
    "shadow",
    "ticket",
    "planet",
    "muscle",
    "rabbit",
    "violin",
    "meadow",
    "canvas",
    "kettle",
    "lantern",
    "anchor",
    "basket",
    "feather",
    "island",
]
_CJK = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可也你"


def _corpus(seed: int, n_base: int = 60) -> list[str]:
    """Base texts (English words, some Chinese) and edited copies of many of them: swapped,
    dropped and inserted words, so many copies are beyond SimHash distance 3."""
    rng = random.Random(seed)
    out: list[str] = []
    for _ in range(n_base):
        if rng.random() < 0.25:
            base = "".join(rng.choice(_CJK) for _ in range(rng.randint(20, 60)))
            out.append(base)
            for _ in range(rng.randint(0, 2)):
                chars = list(base)
                for _ in range(rng.randint(1, 4)):
                    chars[rng.randrange(len(chars))] = rng.choice(_CJK)
                out.append("".join(chars))
            continue
        words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 60))]
        out.append(" ".join(words))
        for _ in range(rng.randint(0, 3)):
            w = list(words)
            for _ in range(rng.randint(1, max(1, len(w) // 6))):
                k = rng.randrange(len(w))
                op = rng.random()
                if op < 0.4:
                    w[k] = rng.choice(_WORDS)
                elif op < 0.7 and len(w) > 3:
                    del w[k]
                else:
                    w.insert(k, rng.choice(_WORDS))
            out.append(" ".join(w))
    rng.shuffle(out)
    return out


def _batch_pairs(texts: list[str]) -> dict[int, set[int]]:
    r = dedup(texts)
    found: dict[int, set[int]] = {}
    for a, b in zip(r.pairs.a.tolist(), r.pairs.b.tolist(), strict=True):
        found.setdefault(a, set()).add(b)
        found.setdefault(b, set()).add(a)
    return found


def _online_pairs(texts: list[str], d: Deduplicator) -> dict[int, set[int]]:
    """Add every text (``add``: kept whatever it matches), then check each under a new id;
    a document's pairs are its matches other than its own stored copy."""
    d.add([{"id": str(i), "text": t} for i, t in enumerate(texts)])
    got = d.check([{"id": f"q{i}", "text": t} for i, t in enumerate(texts)])
    return {
        i: {int(m.id) for m in dec.matches} - {i}
        for i, dec in enumerate(got)
        if {int(m.id) for m in dec.matches} - {i}
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_short_texts_are_searched_as_the_batch_searches_them(seed: int) -> None:
    """The batch's SimHash pass searches texts shorter than the verifier's ``short_chars`` at
    distance 0 only (short posts crowd SimHash space) and pairs two texts past it only where
    both are long (``neardup.rules.plan.simhash_pass_pairs``); the online store searches
    the same way, so on a plan whose bands miss many edited short copies (2 bands) it still
    reports the batch's pairs. A store searching every text at the radius
    (``candidate_radius=3``) reports more: short pairs at distance 1-3 the batch never
    compares."""
    texts = _corpus(seed, 120)
    batch = {}
    r = dedup(texts, lsh_bands=2, lsh_rows=3)
    for a, b in zip(r.pairs.a.tolist(), r.pairs.b.tolist(), strict=True):
        batch.setdefault(a, set()).add(b)
        batch.setdefault(b, set()).add(a)
    with Deduplicator.open(max_matches=len(texts), lsh_bands=2, lsh_rows=3) as d:
        assert d._decider.short_chars == 200
        online = _online_pairs(texts, d)
    assert online == batch
    with Deduplicator.open(
        max_matches=len(texts), candidates="lsh", lsh_bands=2, lsh_rows=3, candidate_radius=3
    ) as d:
        assert d._decider.short_chars is None
        wide = _online_pairs(texts, d)
    assert sum(map(len, wide.values())) > sum(map(len, batch.values()))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_window_decides_like_batch(seed: int) -> None:
    texts = _corpus(seed)
    batch = _batch_pairs(texts)
    with Deduplicator.open(max_matches=len(texts)) as d:
        assert d.candidates == "lsh"
        online = _online_pairs(texts, d)
    assert online == batch
    # the channel matters here: pairs beyond SimHash distance 3 are found
    with Deduplicator.open(max_matches=len(texts), candidates="simhash") as d:
        classic = _online_pairs(texts, d)
    assert sum(map(len, classic.values())) < sum(map(len, batch.values()))


def test_a_store_with_compressed_texts_decides_like_batch(tmp_path, monkeypatch) -> None:
    """Verification reads the stored texts: once the store has trained its text dictionary
    (after 40 texts here) they are compressed in SQLite, and the decisions stay the batch's,
    before and after a reopen (every candidate's text then comes from SQLite)."""
    import sqlite3

    from neardup.store import textcodec

    monkeypatch.setattr(textcodec, "TRAIN_MIN_TEXTS", 40)
    texts = _corpus(4)
    batch = _batch_pairs(texts)
    with Deduplicator.open(tmp_path, max_matches=len(texts)) as d:
        assert _online_pairs(texts, d) == batch
    db = sqlite3.connect(tmp_path / "meta.sqlite3")
    packed = db.execute(
        "SELECT count(*) FROM docs WHERE flags & ? AND typeof(text) = 'blob'",
        (textcodec.TEXT_ZSTD_FLAG,),
    ).fetchone()[0]
    db.close()
    assert packed > len(texts) // 2
    with Deduplicator.open(tmp_path) as d:
        got = d.check([{"id": f"q{i}", "text": t} for i, t in enumerate(texts)])
        again = {
            i: {int(m.id) for m in dec.matches} - {i}
            for i, dec in enumerate(got)
            if {int(m.id) for m in dec.matches} - {i}
        }
        assert again == batch
        assert d.get(str(len(texts) - 1))["text"] == texts[-1]


@pytest.mark.shared
@pytest.mark.slow
def test_dev_slice_decides_like_batch(dev_data) -> None:
    texts = []
    with (dev_data / "docs.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            texts.append(json.loads(line)["text"])
            if len(texts) == 2000:
                break
    batch = _batch_pairs(texts)
    with Deduplicator.open(max_matches=len(texts)) as d:
        online = _online_pairs(texts, d)
    assert online == batch
    assert sum(map(len, batch.values())) > 100  # the slice holds near duplicates


def _lsh_only_pair() -> tuple[str, str]:
    """Two texts that verify as near duplicates at SimHash distance > 3."""
    from neardup.fingerprint.simhash import Fingerprinter

    fpr = Fingerprinter()
    rng = random.Random(7)
    for _ in range(500):
        words = [rng.choice(_WORDS) for _ in range(30)]
        a = " ".join(words)
        w = list(words)
        for k in rng.sample(range(30), 3):
            w[k] = rng.choice(_WORDS)
        b = " ".join(w)
        fa, fb = fpr.fingerprint_many([a, b])
        if (int(fa) ^ int(fb)).bit_count() > 6:
            r = dedup([a, b])
            if len(r.pairs):
                return a, b
    raise AssertionError("no pair found")


def test_atomic_group_keeps_one_of_far_simhash_duplicates() -> None:
    a, b = _lsh_only_pair()
    with Deduplicator.open() as d:
        got = d.check_and_add([{"id": "a", "text": a}, {"id": "b", "text": b}])
        assert [x.added for x in got] == [True, False]
        assert got[1].matches[0].id == "a" and got[1].matches[0].distance > 3
    with Deduplicator.open(candidates="simhash") as d:  # the classic mode misses it
        got = d.check_and_add([{"id": "a", "text": a}, {"id": "b", "text": b}])
        assert [x.added for x in got] == [True, True]


def test_a_groups_own_pairs_count_only_after_a_document_it_may_add(monkeypatch) -> None:
    """Keep-first within a write group: a check adds nothing, so a group of checks looks for
    no pairs inside itself (each document is decided against the store alone), and in a mixed
    group only documents of adding ops match later ones, in both channels."""
    from neardup.online.prepare import Op

    a, b = _lsh_only_pair()
    with Deduplicator.open() as d:
        decider = d._decider

        def group(*ops: tuple[str, str, str]) -> list[list[tuple[str, bool, bool, list[str]]]]:
            batch = [Op(kind, d.prepare([{"id": i, "text": t}])) for kind, i, t in ops]
            out, _ = decider.decide(batch, None)
            return [
                [(x.id, x.duplicate, x.added, [m.id for m in x.matches]) for x in r] for r in out
            ]

        # checks only: nothing to pair (the pair searches are not even run)
        with monkeypatch.context() as m:
            for name in ("intra_pairs", "_lsh_intra"):
                m.setattr(decider, name, lambda *args, n=name: pytest.fail(f"{n} ran for checks"))
            got = group(("check", "x", a), ("check", "y", a), ("check", "z", b))
        assert [r[0][1] for r in got] == [False, False, False]
        # a check before the add does not count; the add does, for a later check and add
        got = group(
            ("check", "c", a), ("add", "k", a), ("check", "e", a), ("check_and_add", "f", b)
        )
        assert got == [
            [("c", False, False, [])],
            [("k", False, True, [])],
            [("e", True, False, ["k"])],
            [("f", True, False, ["k"])],
        ]


def test_band_keys_survive_reopen_flush_merge_and_torn_log(tmp_path) -> None:
    a, b = _lsh_only_pair()
    texts = _corpus(5, 40)
    path = tmp_path / "store"
    with Deduplicator.open(path, memtable_size=50) as d:
        d.add([{"id": f"w{i}", "text": t} for i, t in enumerate(texts)])
        d.add({"id": "a", "text": a})
    # reopen: the memtable's band keys come back from the log's texts
    with Deduplicator.open(path) as d:
        assert d.candidates == "lsh"
        m = d.check({"id": "b", "text": b})
        assert m.duplicate and m.matches[0].id == "a"
        d.flush()  # now in a segment's band-key section
        assert d.check({"id": "b", "text": b}).duplicate
        d.add([{"id": f"v{i}", "text": t + " again"} for i, t in enumerate(texts)])
        d.flush()
        d.compact()  # merges carry the section
        assert d.check({"id": "b", "text": b}).duplicate
        assert d.store._state.segments and all(
            s.segment.band_keys is not None for s in d.store._state.segments
        )
        d.add({"id": "c", "text": a + " extra words at the end"})
    # a torn tail on the live log: the record before it and its band keys are recovered
    wal = max(path.glob("wal-*.log"), key=lambda p: p.stat().st_mtime)
    with wal.open("ab") as fh:
        fh.write(b"\x07garbage-tail")
    with Deduplicator.open(path) as d:
        got = d.check({"id": "b2", "text": b})
        assert {m.id for m in got.matches} >= {"a"}
        assert d.get("c")["text"].startswith(a)


@pytest.mark.parametrize("streamed", [False, True])
def test_a_merge_keeps_exactly_the_surviving_rows_band_entries(
    tmp_path, monkeypatch, streamed
) -> None:
    """Compaction merges the segments' band sections as sorted runs (``merge_mapped``; past
    ``STREAM_ENTRIES`` entries, group by group as the segment is written, the rows spilled
    beside the segments: ``MergedSection``):
    the merged section is the inputs' (key, row id) entries less the deleted rows', sorted,
    and the deleted documents' keys find nothing afterwards."""
    import neardup.store.maintenance as maintenance
    from neardup.index.bands import MergedSection, sort_entries

    made: list[MergedSection] = []
    if streamed:

        class Spy(MergedSection):
            def __init__(self, *a, **k) -> None:
                super().__init__(*a, **k)
                made.append(self)

        monkeypatch.setattr(maintenance, "STREAM_ENTRIES", 0)
        monkeypatch.setattr(maintenance, "MergedSection", Spy)

    texts = _corpus(11, 60)
    with Deduplicator.open(tmp_path / "s", max_segments_per_partition=1) as d:
        d._writer._compacting = True  # keep the background compactor out: compact() merges
        for c in range(3):
            d.add([{"id": f"c{c}-{i}", "text": t} for i, t in enumerate(texts)])
            d.flush()
        gone = [f"c{c}-{i}" for c in range(3) for i in range(0, len(texts), 7)]
        rids = d.store.lookup_ids(gone)
        for x in gone:
            d.delete(x)
        d.flush()
        segs = d.store._state.segments
        assert len(segs) >= 3
        runs = [tuple(run) for s in segs for run in s.segment.band_runs()]
        k = np.concatenate([x for x, _ in runs])
        r = np.concatenate([y for _, y in runs])
        alive = ~np.isin(r, np.array(list(rids.values()), np.int64))
        want_k, want_r = sort_entries(k[alive], r[alive])
        d._writer._compacting = False
        assert d.compact() >= 1
        [merged] = d.store._state.segments
        got_k, got_r = merged.segment.band_keys
        assert got_k.tolist() == want_k.tolist() and got_r.tolist() == want_r.tolist()
        for i in (0, 7, 14):
            assert not {m.id for m in d.check({"id": "q", "text": texts[i]}).matches} & set(gone)
        for i in (1, 8):  # a kept document is found through the merged section
            assert f"c0-{i}" in {m.id for m in d.check({"id": "q", "text": texts[i]}).matches}
    assert len(made) == streamed
    if streamed:  # its rows spilled beside the segments (an unnamed file: nothing left there)
        assert made[0]._spill_dir == str(tmp_path / "s") and made[0]._spill is None
        assert not [f for f in (tmp_path / "s").iterdir() if "spill" in f.name]


def test_stored_mode_is_kept(tmp_path) -> None:
    a, b = _lsh_only_pair()
    old = tmp_path / "old"
    with Deduplicator.open(old, candidates="simhash") as d:
        d.add({"id": "a", "text": a})
    with Deduplicator.open(old) as d:  # the stored mode, not the default
        assert d.candidates == "simhash"
        assert not d.check({"id": "b", "text": b}).duplicate
    with pytest.raises(ConfigError, match="candidates='simhash'"):
        Deduplicator.open(old, candidates="lsh")
    cfg = read_json_file(old / "config.json")
    assert cfg["candidates"] == "simhash"
    # a config from before the option is not read (nothing was released with it)
    del cfg["candidates"]
    write_json_file(old / "config.json", cfg)
    with pytest.raises(UnsupportedVersionError, match=r"config\.json.*without candidates"):
        Deduplicator.open(old)
    new = tmp_path / "new"
    with Deduplicator.open(new) as d:
        d.add({"id": "a", "text": a})
    assert read_json_file(new / "config.json")["lsh"]["bands"] == d.lsh_plan.bands
    with pytest.raises(ConfigError, match="store_text"):
        Deduplicator.open(candidates="lsh", store_text=False)
    with Deduplicator.open(verify=False) as d:  # nothing to verify on: the classic mode
        assert d.candidates == "simhash"


def test_service_config_passes_the_mode(tmp_path) -> None:
    from neardup.online.settings import DedupSettings
    from neardup.service.config import ServiceConfig
    from neardup.service.namespaces import NamespaceRegistry

    with pytest.raises(ConfigError, match="candidates"):
        DedupSettings(candidates="minhash")
    simhash = DedupSettings(candidates="simhash")
    reg = NamespaceRegistry(ServiceConfig(data_dir=str(tmp_path / "svc"), dedup=simhash))
    reg.open()
    try:
        assert reg.get("default").candidates == "simhash"
    finally:
        reg.close()
    reg = NamespaceRegistry(ServiceConfig(data_dir=str(tmp_path / "svc2")))
    reg.open()
    try:
        assert reg.get("default").candidates == "lsh"
    finally:
        reg.close()


def test_writer_uses_the_preparers_band_keys() -> None:
    """The writer never tokenises for the channel: the band keys come from the preparer (a
    batch prepared without the channel gets them in the writer, once)."""
    from neardup.online.deduplicator import DocumentPreparer

    a, b = _lsh_only_pair()
    with Deduplicator.open() as d:

        def refuse(texts):
            raise AssertionError("band keys recomputed in the writer")

        d.store._state.band_keys_of = refuse
        d.check_and_add({"id": "a", "text": a})
        plain = DocumentPreparer(d.fingerprinter, d.bits, d.clock)
        got = d.submit_prepared("check", plain.prepare([{"id": "b", "text": b}]))
        dec = got.result() if hasattr(got, "result") else got
        assert dec[0].duplicate and dec[0].matches[0].id == "a"


def test_a_text_containing_a_stored_excerpt_is_kept_as_in_batch() -> None:
    """The batch keep rule: a verified pair never drops a text more than (2 - t) / t times
    longer than the kept one (it contains it); online reports the match and keeps the text."""
    rng = random.Random(3)
    short = " ".join(rng.choice(_WORDS) for _ in range(25))
    long_ = short + " " + " ".join(rng.choice(_WORDS) for _ in range(35))
    r = dedup([short, long_])
    assert len(r.pairs) == 1 and r.keep.tolist() == [True, True]
    with Deduplicator.open() as d:
        d.add({"id": "s", "text": short})
        got = d.check_and_add({"id": "l", "text": long_})
        assert [m.id for m in got.matches] == ["s"]
        assert not got.duplicate and got.added
        # the other way round the shorter text is a duplicate, as in batch
        again = d.check({"id": "s2", "text": short})
        assert again.duplicate
    with Deduplicator.open(candidates="simhash", candidate_radius=18) as d:  # classic: any match
        d.add({"id": "s", "text": short})
        got = d.check_and_add({"id": "l", "text": long_})
        assert got.duplicate == bool(got.matches)


def test_bulk_segments_beside_band_sections(tmp_path) -> None:
    """``bulk_load`` rows (no text) land in segments with an empty band-key section, searched by
    SimHash only; a merge with segments that have band keys keeps the keys of those rows."""
    a, b = _lsh_only_pair()
    with Deduplicator.open(tmp_path / "s", max_segments_per_partition=1) as d:
        n = d.bulk_load([f"bulk{i}" for i in range(300)], np.arange(300, dtype=np.uint64) << 20)
        assert n == 300
        assert [s.segment.band_keys for s in d.store._state.segments] == [None]
        d.add({"id": "a", "text": a})
        d.flush()
        assert sorted(s.segment.band_keys is None for s in d.store._state.segments) == [False, True]
        for k in range(3):  # more segments than the size-tiered policy lets stand
            d.add({"id": f"x{k}", "text": f"filler number {k} " + "padding words " * k})
            d.flush()
        d.compact()
        [merged] = d.store._state.segments
        assert len(merged.segment) == 304 and merged.segment.band_keys is not None
        # only the text rows' keys (4 documents with tokens)
        assert len(merged.segment.band_keys) == 4 * d.lsh_plan.bands
        got = d.check({"id": "b", "text": b})
        assert got.duplicate and got.matches[0].id == "a"


def test_group_verification_ahead_decides_like_one_by_one() -> None:
    """The decide loop's verifications done ahead for the whole group (one call) give the same
    decisions as verifying each document's candidates on its own, also when max_matches stops
    verification early."""
    from neardup.online.decide import Decider

    texts = _corpus(5)
    for mm in (1, 2, 10):
        with Deduplicator.open(max_matches=mm) as d:
            d.add([{"id": f"s{i}", "text": t} for i, t in enumerate(texts[::2])])
            fast = d.check_and_add([{"id": f"q{i}", "text": t} for i, t in enumerate(texts)])
        orig = Decider._prefetch
        Decider._prefetch = lambda self, *a, **k: {}  # type: ignore[method-assign]
        try:
            with Deduplicator.open(max_matches=mm) as d:
                d.add([{"id": f"s{i}", "text": t} for i, t in enumerate(texts[::2])])
                slow = d.check_and_add([{"id": f"q{i}", "text": t} for i, t in enumerate(texts)])
        finally:
            Decider._prefetch = orig  # type: ignore[method-assign]
        assert [x.to_dict() for x in fast] == [x.to_dict() for x in slow]
        assert sum(x.duplicate for x in fast) > 0


def test_documents_of_many_candidates_are_verified_in_a_few_group_calls() -> None:
    """Texts made mostly of one frequent token share band keys with hundreds of stored texts
    and are duplicates of few of them: each verifies nearly all of its candidates. The group's
    verification ahead takes them in a few calls for the whole group (the first chunk, then
    the rest :data:`_REST_PAIRS` at a time), not a call per document and chunk; the decisions
    equal verifying each document's candidates on its own, whatever the round size."""
    from typing import Any
    from unittest import mock

    from neardup.online import decide as decide_mod
    from neardup.online.decide import Decider

    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(300)]

    def text() -> str:
        return " ".join("tuc" if rng.random() < 0.6 else rng.choice(vocab) for _ in range(14))

    stored = [text() for _ in range(400)]
    queries = [text() for _ in range(60)] + [f"RT @a: {s}" for s in stored[:5]]

    def run(rest: int | None, ahead: bool) -> tuple[list[dict[str, Any]], dict[str, int]]:
        calls = {"group": 0, "document": 0, "most_candidates": 0}
        verify, pairs, cands = Decider.verify, Decider._verify_pairs, Decider._candidates

        def count_doc(self: Any, *a: Any) -> Any:
            calls["document"] += 1
            return verify(self, *a)

        def count_group(self: Any, *a: Any) -> Any:
            calls["group"] += 1
            return pairs(self, *a)

        def no_memo(self: Any, *a: Any) -> dict[Any, Any]:
            return {}

        def candidates(self: Any, *a: Any) -> Any:
            found, pending = cands(self, *a)
            calls["most_candidates"] = max(calls["most_candidates"], len(pending))
            return found, pending

        with (
            mock.patch.object(decide_mod, "_REST_PAIRS", rest or decide_mod._REST_PAIRS),
            mock.patch.object(Decider, "verify", count_doc),
            mock.patch.object(Decider, "_verify_pairs", count_group),
            mock.patch.object(Decider, "_candidates", candidates),
            mock.patch.object(Decider, "_prefetch", Decider._prefetch if ahead else no_memo),
            Deduplicator.open(max_matches=2) as d,
        ):
            d.add([{"id": f"s{i}", "text": t} for i, t in enumerate(stored)])
            for k in calls:
                calls[k] = 0
            out = d.check_and_add([{"id": f"q{i}", "text": t} for i, t in enumerate(queries)])
        return [x.to_dict() for x in out], calls

    one_by_one, _ = run(None, ahead=False)
    assert sum(x["duplicate"] for x in one_by_one) >= 5
    default, calls = run(None, ahead=True)
    assert default == one_by_one
    # some document verifies hundreds of candidates, yet the group makes two calls
    assert calls["most_candidates"] > 300
    assert calls["group"] == 2 and calls["document"] == 0
    for rest in (1, 7, 100):
        got, calls = run(rest, ahead=True)
        assert got == one_by_one
        assert calls["document"] == 0


@pytest.mark.parametrize("seed", [1, 2])
def test_single_requests_decide_like_batch(seed: int) -> None:
    """Documents checked one at a time, the groups the array union does not take: a band
    candidate that is also the query's SimHash hit is read and verified as a hit, neither
    sketch-filtered nor signed again, and the store's bounds wait for a few hits; the pairs
    are still batch's."""
    texts = _corpus(seed)
    batch = _batch_pairs(texts)
    with Deduplicator.open(max_matches=len(texts)) as d:
        d.add([{"id": str(i), "text": t} for i, t in enumerate(texts)])
        online = {}
        for i, t in enumerate(texts):
            found = {int(m.id) for m in d.check({"id": f"q{i}", "text": t}).matches} - {i}
            if found:
                online[i] = found
    assert online == batch


def test_requests_histograms_and_kernel_forms_from_their_preparation_decide_the_same(
    monkeypatch,
) -> None:
    """A request's verification takes its texts' histograms and kernel forms (Chinese texts
    pre-tokenised, social markers stripped) from the MinHash pass that prepared them, where
    its first step tokenised them again: fewer texts tokenised there, the same decisions and
    scores, one at a time and in groups, as a preparation that keeps none."""
    import neardup.online.prepare as prepare_mod
    import neardup.verify.tokens as tokens_mod

    real = tokens_mod.token_histograms
    tokenised: list[int] = []

    def counted(verifier, texts, **kw):  # type: ignore[no-untyped-def]
        tokenised.append(len(texts))
        return real(verifier, texts, **kw)

    monkeypatch.setattr(tokens_mod, "token_histograms", counted)
    base = _corpus(4)
    texts = base + [f"RT @user{i % 3}: {t} #tag" for i, t in enumerate(base[::3])]

    def run() -> list:
        out = []
        with Deduplicator.open(max_matches=len(texts)) as d:
            for lo in range(0, len(texts), 7):  # groups, then one at a time
                part = texts[lo : lo + 7]
                got = d.check_and_add([{"id": f"g{lo + k}", "text": t} for k, t in enumerate(part)])
                out += [(g.duplicate, [(m.id, m.score) for m in g.matches]) for g in got]
            for i, t in enumerate(texts):
                g = d.check({"id": f"q{i}", "text": t})
                out.append((g.duplicate, [(m.id, m.score) for m in g.matches]))
        return out

    with_forms = run()
    n_with = sum(tokenised)
    tokenised.clear()
    monkeypatch.setattr(prepare_mod, "HIST_DOCS", -1)
    assert run() == with_forms
    assert sum(tokenised) > n_with
    assert sum(dup for dup, _ in with_forms) > 50 and any(not dup for dup, _ in with_forms)


def test_a_near_duplicate_both_channels_find_is_not_signed_again(tmp_path, monkeypatch) -> None:
    """A single request whose near duplicate is both a SimHash hit and a band candidate reads
    and verifies it as a hit: its MinHash signature is not made again from its text (after a
    reopen no signature is cached), and the decision is the same."""
    import neardup.online.decide as decide_module

    with Deduplicator.open(tmp_path / "d") as d:
        for seed in range(100):  # a one-word edit within the SimHash radius
            rng = random.Random(seed)
            words = [rng.choice(_WORDS) for _ in range(60)]
            a = " ".join(words)
            words[30] = "zeppelin"
            b = " ".join(words)
            fa, fb = (int(d.prepare([{"id": "x", "text": t}]).fps[0]) for t in (a, b))
            if (fa ^ fb).bit_count() <= d.radius:
                break
        else:
            raise AssertionError("no one-word edit within the SimHash radius")
        d.add({"id": "a", "text": a})
    signed: list[int] = []
    real = decide_module.minhash_signatures

    def spy(verifier, texts, *args, **kw):
        signed.append(len(texts))
        return real(verifier, texts, *args, **kw)

    monkeypatch.setattr(decide_module, "minhash_signatures", spy)
    with Deduplicator.open(tmp_path / "d") as d:
        st = d.store._state
        prepared = d.prepare([{"id": "b", "text": b}])
        hits = d.store.search(prepared.fps, d.radius)[1]
        assert hits.tolist() == [d.store.lookup_ids(["a"])["a"]]  # a SimHash hit
        assert d.store.search_bands(prepared.bands, 1000)[0].tolist() == hits.tolist()  # a band's
        got = d.check({"id": "b", "text": b})
        assert got.duplicate and [m.id for m in got.matches] == ["a"]
        assert st is d.store._state
    assert signed == []


def test_the_split_pass_rule() -> None:
    """``simhash_pass_pairs``: within the short distance any pair; past it, within the
    distance, only two texts of ``short_chars`` or more."""
    from neardup.rules.plan import simhash_pass_pairs

    d = np.array([0, 1, 3, 3, 3, 4])
    a = np.array([10, 250, 250, 199, 250, 250])
    b = np.array([10, 250, 200, 250, 199, 250])
    assert simhash_pass_pairs(d, a, b, 200, 3).tolist() == [True, True, True, False, False, False]
