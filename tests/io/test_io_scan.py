"""The JSONL pre-scan (``neardup.io._jsonl_scan``) and the span-backed texts (``SpanTexts``).

A FAST line must be one that orjson and the standard library both accept as a dict whose text
field is exactly the reported bytes and whose id is what the reader would take; the mapped
reader must give the same corpus as the reference reader (ids, texts, errors, lines, spans).
"""

from __future__ import annotations

import csv
import json

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from io_state import read_state

from neardup import dedup
from neardup.io import jsonl as jsonl_mod
from neardup.io import read_corpus
from neardup.io._jsonl_scan import (
    FAST,
    ID_ABSENT,
    ID_INT,
    ID_STR,
    gather_spans,
    scan_lines,
    unescape_spans,
)
from neardup.io.texts import SpanTexts

_PLAIN = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=30)
_ANY = st.text(max_size=8)
_WS = st.sampled_from(["", " ", "  ", "\t", "\r", " \t "])
# escapes json.dumps never writes, valid and not (a FAST line may only have the valid ASCII ones)
_RAW_ESCAPES = st.sampled_from(
    ["\\/", "\\u001F", "\\u007f", "\\u0041", "\\u00e9", "\\u0080", "\\u12", "\\x41", "\\", "\\a"]
)


@st.composite
def _escaped(draw):
    """A JSON string of ASCII text with escapes: json.dumps's (control bytes, quotes,
    backslashes) and now and then one written by hand."""
    body = json.dumps(draw(st.text(alphabet=st.characters(max_codepoint=127), max_size=20)))[1:-1]
    if draw(st.booleans()):
        at = draw(st.integers(0, len(body)))
        if at == len(body) or body[at - 1 : at] != "\\":  # not inside an escape
            body = body[:at] + draw(_RAW_ESCAPES) + body[at:]
    return f'"{body}"'


@st.composite
def _value(draw):
    kind = draw(st.integers(0, 10))
    if kind == 10:
        return draw(_escaped())
    if kind <= 3:
        return json.dumps(draw(_PLAIN if kind else _ANY), ensure_ascii=draw(st.booleans()))
    if kind == 4:
        return str(draw(st.integers(-(10**20), 10**20)))
    if kind == 5:
        return draw(st.sampled_from(["1.5", "-0.25", "0", "-0", "1e3", "2E-2", "01", "1.", ".5"]))
    if kind == 6:
        return draw(st.sampled_from(["true", "false", "null", "nul", "True", "NaN"]))
    if kind == 7:
        return draw(st.sampled_from(['{"a": 1}', "[1, 2]", "[]", "{}"]))
    return json.dumps(draw(_PLAIN))


@st.composite
def _line(draw):
    """Objects built by hand (whitespace, key order, duplicate keys, odd values), sometimes cut
    or followed by garbage."""
    keys = draw(st.lists(st.sampled_from(["text", "id", "meta", "text", "x"]), max_size=5))
    ws = [draw(_WS) for _ in range(4)]
    parts = [f"{json.dumps(k)}{ws[0]}:{ws[1]}{draw(_value())}" for k in keys]
    line = (
        f"{ws[2]}{{{ws[3]}" + f"{draw(_WS)},{draw(_WS)}".join(parts) + f"{draw(_WS)}}}{draw(_WS)}"
    )
    tail = draw(st.integers(0, 12))
    if tail == 0:
        line = line[: draw(st.integers(0, len(line)))]
    elif tail == 1:
        line += draw(st.sampled_from([",", " x", "}", "{}"]))
    return line.encode("utf-8")


def _orjson_view(raw: bytes, text_key: str, id_key: str) -> tuple[str, object] | None:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict or type(obj.get(text_key)) is not str:
        return None
    return obj[text_key], obj.get(id_key)


@settings(max_examples=400, deadline=None)
@given(lines=st.lists(_line(), min_size=1, max_size=8), id_key=st.sampled_from(["id", "x"]))
def test_fast_lines_are_what_orjson_and_json_read(lines: list[bytes], id_key: str) -> None:
    data = b"\n".join(lines)
    buf = np.frombuffer(data, np.uint8)
    ls, le, st_, f = scan_lines(buf, 0, buf.size, b"text", id_key.encode())
    want = data.split(b"\n")
    if not want[-1]:  # a final newline (or nothing at all) ends the last line, opens no new one
        want.pop()
    assert len(ls) == len(want)
    for k, raw in enumerate(want):
        assert data[ls[k] : le[k]] == raw
        if st_[k] != FAST:
            continue
        view = _orjson_view(raw, "text", id_key)
        assert view is not None, raw
        assert json.loads(raw) == orjson.loads(raw)  # the standard library agrees
        text, idv = view
        assert f[k, 5] == len(text)
        assert _decoded(buf, f[k, 0], f[k, 1], f[k, 5]) == text
        got = data[f[k, 3] : f[k, 4]]
        if f[k, 2] == ID_STR:
            assert type(idv) is str and idv and got.decode() == idv
        elif f[k, 2] == ID_INT:
            assert type(idv) is int and int(got) == idv
        else:
            assert f[k, 2] == ID_ABSENT and idv is None


def _decoded(buf: np.ndarray, s: int, e: int, n: int) -> str:
    out = np.empty(n, np.uint8)
    unescape_spans(buf, np.array([s]), np.array([e]), out, np.array([0]))
    return out.tobytes().decode("ascii")


def test_scan_classifies_the_edge_cases() -> None:
    fast = [
        b'{"id": "a1", "text": "hello world"}',
        b' {"text":"x","id":12}\r',
        b'{"id": 7, "text": "ok", "n": -0.5, "b": true, "c": false}',
        b'{"text": "~ \x7e"}',
        b'{"text": "a\\nb\\t\\"q\\" \\\\ \\/ \\b\\f\\r \\u0041\\u007F\\u001f"}',
        b'{"url": "https:\\/\\/x", "text": "t"}',  # escapes in another field
    ]
    slow = [
        b'{"text": "caf\\u00e9"}',  # escapes of non-ASCII characters: orjson decodes them
        b'{"text": "\\u0080"}',
        b'{"text": "\\u00FF"}',
        b'{"text": "\\ud83d\\ude00"}',
        b'{"text": "\\x41"}',  # not JSON
        b'{"text": "\\u12"}',
        b'{"text": "\\u004G"}',
        b'{"text": "ends \\"}',
        b'{"te\\u0078t": "x"}',  # an escaped key (orjson reads "text")
        b'{"text": "a", "te\\u0078t": "b"}',  # ... so this text is "b"
        b'{"id": "a", "i\\u0064": "b", "text": "x"}',  # and this id "b"
        b'{"id": "a\\nb", "text": "x"}',  # an escaped string id
        '{"text": "café"}'.encode(),  # non-ASCII
        b'{"text": "del \x7f"}',
        b"{}",
        b"",
        b'{"text": "t", "text": "u"}',  # duplicate text key: last wins, left to orjson
        b'{"id": 1e5, "text": "x"}',
        b'{"text": "x", "o": {"a": 1}}',
        b'{"text": "x",}',
        b'{"text": 5}',
        b'{"id": "", "text": "x"}',
        b'{"id": null, "text": "x"}',  # a null id: refused by the general path
        b'{"id": 1.5, "text": "x"}',
        b'{"id": 01, "text": "x"}',
        b'{"id": 1234567890123456789, "text": "x"}',
        b'{"text": "x"} x',
        b'{"text": "x"}\x0c',
    ]
    data = b"\n".join(fast + slow)
    buf = np.frombuffer(data, np.uint8)
    _ls, _le, st_, f = scan_lines(buf, 0, buf.size, b"text", b"id")
    assert st_.tolist() == [1] * len(fast) + [0] * len(slow)
    assert _decoded(buf, f[4, 0], f[4, 1], f[4, 5]) == orjson.loads(fast[4])["text"]
    assert f[5, 5] == 1 and f[0, 5] == 11


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.text(alphabet=st.characters(max_codepoint=127), max_size=40), max_size=6))
def test_unescape_spans_decodes_what_json_encodes(texts: list[str]) -> None:
    """Several escaped strings decoded side by side into one buffer, each at its offset."""
    lines = [json.dumps({"text": t}).encode() for t in texts]
    data = b"\n".join(lines)
    buf = np.frombuffer(data, np.uint8)
    _ls, _le, st_, f = scan_lines(buf, 0, buf.size, b"text", b"id")
    assert st_.all()
    lens = f[:, 5]
    at = np.cumsum(lens) - lens
    out = np.empty(int(lens.sum()), np.uint8)
    unescape_spans(buf, f[:, 0].copy(), f[:, 1].copy(), out, at)
    assert out.tobytes().decode("ascii") == "".join(texts)


@pytest.mark.parametrize("offset", range(9))
def test_word_skipping_at_every_alignment(offset: int) -> None:
    """Strings are skipped 8 bytes at a time from aligned words: a special byte at any
    position of a word must still stop the scan."""
    for special in (b'"', b"\\x", b"\x1f", b"\x7f", b"\xc3\xa9", b"\\n", b"\\u0009"):
        for at in range(20):
            body = b"a" * at + special + b"b" * 17
            line = b" " * offset + b'{"text": "' + body + b'"}'
            buf = np.frombuffer(line, np.uint8)
            _ls, _le, st_, f = scan_lines(buf, 0, buf.size, b"text", b"id")
            if special == b'"':  # the string ends there; the rest is garbage
                assert st_[0] == 0
            elif special in (b"\\n", b"\\u0009"):  # a valid escape: decoded
                assert st_[0] == 1, (special, at)
                text = _decoded(buf, f[0, 0], f[0, 1], f[0, 5])
                assert text == "a" * at + json.loads(b'"' + special + b'"') + "b" * 17
            else:
                assert st_[0] == 0, (special, at)
        ok = b" " * offset + b'{"text": "' + b"z" * 40 + b'"}'
        buf = np.frombuffer(ok, np.uint8)
        _ls, _le, st_, f = scan_lines(buf, 0, buf.size, b"text", b"id")
        assert st_[0] == 1 and ok[f[0, 0] : f[0, 1]] == b"z" * 40


@st.composite
def _clean_file(draw):
    """Mostly FAST lines (string ids, some repeated), with now and then a slow or bad one."""
    n = draw(st.integers(0, 30))
    out = []
    for _ in range(n):
        r = draw(st.integers(0, 19))
        if r == 0:
            out.append(draw(_line()))
        elif r == 1:
            out.append(b'{"text": "caf\\u00e9", "id": "u%d"}' % draw(st.integers(0, 40)))
        elif r == 2:
            out.append(b"")
        elif r <= 5:  # ASCII text with escapes: a span of the block's decoded texts
            ident = draw(st.integers(0, 60))
            out.append(f'{{"id": "e{ident}", "text": {draw(_escaped())}}}'.encode())
        else:
            ident = draw(st.one_of(st.integers(0, 60).map(lambda i: f'"d{i}"'), st.just("7")))
            text = json.dumps(draw(_PLAIN))
            out.append(f'{{"id": {ident}, "text": {text}}}'.encode())
    eol = draw(st.sampled_from([b"\n", b"\r\n"]))
    data = eol.join(out)
    if out and draw(st.booleans()):
        data += eol
    return data


def _state(path, monkeypatch, reference: bool, on_error: str, id_field: str | None):
    return read_state(
        path, monkeypatch, reference=reference, texts_type=SpanTexts, on_error=on_error,
        id_field=id_field,
    )  # fmt: skip


@pytest.mark.parametrize(("block", "min_fast"), [(7, 0.1), (64, 0.1), (64, 2.0), (1 << 24, 0.1)])
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=_clean_file())
def test_mapped_reader_equals_reference(tmp_path, monkeypatch, block, min_fast, data):
    """(min_fast 2.0: every block after the first is read without the pre-scan.)"""
    monkeypatch.setattr(jsonl_mod, "BLOCK", block)
    monkeypatch.setattr(jsonl_mod, "SCAN_MIN_FAST", min_fast)
    p = tmp_path / "c.jsonl"
    p.write_bytes(data)
    for on_error in ("fail", "skip"):
        for id_field in (None, "id"):
            fast = _state(p, monkeypatch, False, on_error, id_field)
            ref = _state(p, monkeypatch, True, on_error, id_field)
            assert fast == ref


def test_small_input_skips_the_prescan_until_its_kernel_is_ready(tmp_path, monkeypatch):
    """While the pre-scan's kernel is neither compiled nor cached, a process's first
    ``SCAN_COMPILE_BYTES`` of JSONL take the per-line path (no compile for the bundled sample),
    with the reference reader's answers; past them, or once the kernel is ready, the pre-scan
    reads as before."""
    from neardup.io import _jsonl_scan

    scans: list[int] = []
    scan = _jsonl_scan.scan_lines

    def counting(*args):
        scans.append(1)
        return scan(*args)

    monkeypatch.setattr(_jsonl_scan, "scan_lines", counting)
    ready = [False]
    monkeypatch.setattr(_jsonl_scan, "scanner_ready", lambda: ready[0])
    p = tmp_path / "c.jsonl"
    p.write_text(
        "".join(json.dumps({"id": f"d{i}", "text": f"text {i}"}) + "\n" for i in range(50))
    )
    size = p.stat().st_size
    monkeypatch.setattr(jsonl_mod, "SCAN_COMPILE_BYTES", 2 * size)
    monkeypatch.setattr(jsonl_mod, "_unscanned_bytes", 0)
    ref = read_state(p, monkeypatch, reference=True, on_error="skip")
    for want_scans in (0, 0, 1):  # the budget holds two reads of the file, not a third
        scans.clear()
        assert read_state(p, monkeypatch, reference=False, on_error="skip") == ref
        assert len(scans) == want_scans
    ready[0] = True  # compiled (or cached): small inputs are scanned too
    monkeypatch.setattr(jsonl_mod, "_unscanned_bytes", 0)
    scans.clear()
    assert read_state(p, monkeypatch, reference=False, on_error="skip") == ref
    assert scans


def test_compiled_or_cached_reads_the_dispatcher_and_its_cache_index() -> None:
    from neardup._jit import compiled_or_cached
    from neardup.io._jsonl_scan import _scan_kernel

    class Index:
        def __init__(self, entries):
            self.entries = entries

        def _load_index(self):
            if isinstance(self.entries, Exception):
                raise self.entries
            return self.entries

    class Cache:
        def __init__(self, entries):
            self._cache_file = Index(entries)

    class Fake:
        def __init__(self, signatures, entries):
            self.signatures = signatures
            self._cache = Cache(entries)

    assert compiled_or_cached(Fake(["sig"], {}))  # ran in this process
    assert compiled_or_cached(Fake([], {"key": "f.1.nbc"}))  # cached for this source
    assert not compiled_or_cached(Fake([], {}))  # neither: the caller may skip the compile
    assert compiled_or_cached(Fake([], OSError("numba changed")))  # unknown: as before
    scan_lines(np.frombuffer(b'{"text": "a"}\n', np.uint8), 0, 14, b"text", b"id")
    assert compiled_or_cached(_scan_kernel)


def test_clean_blocks_are_accepted_whole(tmp_path, monkeypatch) -> None:
    """Blocks of FAST lines with new string ids are taken in one step (ids cut from their
    bytes in one go); a block whose ids repeat goes line by line, with the reference's
    answers either way."""
    monkeypatch.setattr(jsonl_mod, "BLOCK", 256)
    calls: list[bool] = []
    accept = jsonl_mod._accept_block

    def spy(*args):
        calls.append(accept(*args))
        return calls[-1]

    monkeypatch.setattr(jsonl_mod, "_accept_block", spy)
    ids = [f"doc-{i}" for i in range(60)] + ["", "doc-7", "z"]
    p = tmp_path / "c.jsonl"
    p.write_text("".join(json.dumps({"id": i, "text": f"text {i}"}) + "\n" for i in ids))
    fast = read_state(p, monkeypatch, reference=False, on_error="skip")
    assert calls[:-1] and all(calls[:-1]) and not calls[-1]  # the last block repeats doc-7
    assert fast == read_state(p, monkeypatch, reference=True, on_error="skip")
    assert fast[0][:60] == ids[:60] and fast[2] == 2  # the empty id and the repeated one


def test_span_texts_sequence_and_fast_paths(tmp_path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_bytes(b'{"text": "Alpha beta"}\n{"text": "caf\\u00e9"}\n{"text": "gamma"}\n')
    c = read_corpus([str(p)])
    t = c.texts
    assert isinstance(t, SpanTexts) and len(t) == 3
    assert list(t) == ["Alpha beta", "café", "gamma"] and t[-1] == "gamma" and t[0:2] == t[:2]
    assert t.lengths().tolist() == [10, 4, 5] and t.ascii_mask().tolist() == [True, False, True]
    with pytest.raises(IndexError):
        t[3]
    sub = t.take(np.array([2, 1]))
    assert list(sub) == ["gamma", "café"]
    data, lens, _ = t.gather_ascii(np.array([2, 0]))
    assert data.tobytes() == b"gammaAlpha beta" and lens.tolist() == [5, 10]
    assert t.gather_ascii(np.array([0, 1])) is None  # a non-ASCII text among them
    p2 = tmp_path / "u.jsonl"
    p2.write_bytes(b'{"text": "x\\ny"}\n{"text": "plain"}\n{"text": "\\u00e9\\n"}\n')
    c2 = read_corpus([str(p), str(p2)])  # two mapped files, decoded escapes, a str
    assert c2.texts._buf[:6].tolist() == [0, -1, 0, 1, 1, -1]  # the maps 0 and 1, a str
    assert c2.texts.lengths(3).tolist() == [3, 5, 2]  # decoded lengths: "x\\ny" from 5 bytes
    data, lens, _ = c2.texts.gather_ascii(np.array([3, 0, 4, 2]))
    assert data.tobytes() == b"x\nyAlpha betaplaingamma" and lens.tolist() == [3, 10, 5, 5]
    assert c2.texts[3] == "x\ny" and c2.texts[5] == "\u00e9\n"
    out = np.empty(4, np.uint8)
    assert (
        gather_spans(np.frombuffer(b"abcdef", np.uint8), np.array([4, 0]), np.array([6, 2]), out)
        == 4
    )
    assert out.tobytes() == b"efab"


def test_dedup_on_span_texts_equals_dedup_on_strs(tmp_path) -> None:
    """The pipeline's span fast paths (exact pass, lengths, verification chunks) decide as the
    str path does."""
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(300)]
    texts = []
    for i in range(400):
        base = " ".join(rng.choice(words, 80).tolist())
        texts.append(base if i % 3 else texts[-1] + " extra" if texts else base)
    texts[5] = texts[4]
    texts[7] = "Caf\u00e9 " + texts[6]
    for i in range(0, 400, 4):  # escaped in the file: spans decoded where they are gathered
        texts[i] = texts[i].replace(" w1", "\nw1").replace(" w2", ' "w2"\t', 3)
    texts[9] = texts[8].replace("\n", " ")  # the same words, other whitespace
    assert sum("\n" in t for t in texts) > 50
    p = tmp_path / "d.jsonl"
    p.write_bytes(
        b"".join(orjson.dumps({"id": f"d{i}", "text": t}) + b"\n" for i, t in enumerate(texts))
    )
    c = read_corpus([str(p)])
    assert isinstance(c.texts, SpanTexts) and list(c.texts) == texts
    assert (c.texts._buf[:400] >= 0).sum() == 399  # all but the non-ASCII text are spans
    a = dedup(c.texts, ids=c.ids, workers=2)
    b = dedup(list(c.texts), ids=c.ids, workers=2)
    assert a.keep.tolist() == b.keep.tolist() and a.cluster.tolist() == b.cluster.tolist()
    assert a.pair_rows() == b.pair_rows()
    assert a.stats["near_duplicates"] > 0


def test_mixed_inputs_and_the_cli_match_the_reference_reader(tmp_path, monkeypatch) -> None:
    """JSONL spans and CSV strings in one corpus; ``neardup dedup`` through the mapped reader
    writes what it writes through the reference reader."""
    from neardup.cli.main import main

    rng = np.random.default_rng(9)
    words = [f"v{i}" for i in range(200)]
    docs = [" ".join(rng.choice(words, 60).tolist()) for _ in range(120)]
    docs[10] = docs[3]
    docs[20] = docs[5] + " and one more"
    for i in range(0, 120, 5):  # escaped texts: decoded where the pipeline gathers them
        docs[i] = docs[i].replace(" v1", "\nv1").replace(" v2", ' "v2"\t')
    docs[31] = docs[30].replace("\n", " ")  # an exact copy once whitespace is normalised
    lines = [orjson.dumps({"id": f"j{i}", "text": t}) for i, t in enumerate(docs)]
    lines[7] = b'{"id": "j7", "text": "esc\\u00e9' + docs[7].encode() + b'"}'  # a slow line
    (tmp_path / "a.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    with open(tmp_path / "b.csv", "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([("id", "text")] + [(f"c{i}", docs[i]) for i in range(0, 120, 7)])
    inputs = [str(tmp_path / "a.jsonl"), str(tmp_path / "b.csv")]
    got = read_corpus(inputs)
    assert isinstance(got.texts, SpanTexts)
    with monkeypatch.context() as m:
        m.setenv("NEARDUP_REFERENCE", "io")
        ref = read_corpus(inputs)
    assert got.ids == ref.ids and list(got.texts) == ref.texts
    outs = {}
    for name, env in (("mapped", None), ("reference", "io")):
        with monkeypatch.context() as m:
            if env:
                m.setenv("NEARDUP_REFERENCE", env)
            out = tmp_path / f"{name}.jsonl"
            pairs = tmp_path / f"{name}-pairs.csv"
            rc = main(
                ["dedup", inputs[0], "--output", str(out), "--pairs-out", str(pairs), "--quiet"]
            )
            assert rc == 0
            outs[name] = (out.read_bytes(), pairs.read_bytes())
    assert outs["mapped"] == outs["reference"]
    assert outs["mapped"][1].count(b"\n") > 1  # some pairs were found
    assert b"j30,j31,0,1.0,exact" in outs["mapped"][1]


def test_scan_grows_its_output_past_the_first_arrays() -> None:
    """More lines than the first output arrays hold (4,096): the kernel resumes."""
    lines = [b'{"id": "i%d", "text": "t %d"}' % (k, k) if k % 5 else b"bad" for k in range(10_000)]
    data = b"\n".join(lines) + b"\n"
    buf = np.frombuffer(data, np.uint8)
    ls, le, st_, f = scan_lines(buf, 0, buf.size, b"text", b"id")
    assert len(ls) == 10_000 and st_.sum() == 8_000
    assert [data[a:b] for a, b in zip(ls.tolist(), le.tolist(), strict=True)] == lines
    k = 9_999
    assert data[f[k, 0] : f[k, 1]] == b"t 9999" and data[f[k, 3] : f[k, 4]] == b"i9999"


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=_clean_file(), bom=st.booleans(), pick=st.data())
def test_records_read_again_by_line_equal_the_first_read(tmp_path, data, bom, pick) -> None:
    """``read_records`` (a file load's slices, docs/store.md, *Bulk loads*) gives records
    ``lo:hi`` of a JSONL file as the first read gave them: ids (generated ones too), texts,
    lines and spans, with the lines that read left out (bad, blank, a repeated id) not read."""
    from neardup.io.formats import read_records, rereadable

    p = tmp_path / "c.jsonl"
    p.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data)
    for id_field, generate in ((None, False), ("id", False), (None, True)):
        opts = {"on_error": "skip", "id_field": id_field, "generate_ids": generate}
        c = read_corpus([str(p)], **opts)
        src = c.sources[0]
        assert rereadable(src)
        lo = pick.draw(st.integers(0, len(c)))
        hi = pick.draw(st.integers(lo, len(c)))
        r = read_records(src, lo, hi, **opts)
        assert list(r.ids) == list(c.ids[lo:hi])
        assert [r.texts[i] for i in range(len(r))] == [c.texts[i] for i in range(lo, hi)]
        got = r.sources[0]
        assert got.lines.tolist() == src.lines[lo:hi].tolist()
        assert got.starts.tolist() == src.starts[lo:hi].tolist()
        assert got.ends.tolist() == src.ends[lo:hi].tolist()


def test_records_are_read_again_only_from_a_jsonl_file_that_is_there(tmp_path) -> None:
    from neardup.errors import ConfigError
    from neardup.io.formats import read_records, rereadable

    p = tmp_path / "c.csv"
    p.write_text("id,text\na,alpha\nb,beta\n", encoding="utf-8")
    src = read_corpus([str(p)]).sources[0]
    assert not rereadable(src)
    with pytest.raises(ConfigError, match="only a JSONL file"):
        read_records(src, 0, 1)
    q = tmp_path / "c.jsonl"
    q.write_text('{"id": "a", "text": "alpha"}\n{"id": "b", "text": "beta"}\n', encoding="utf-8")
    src = read_corpus([str(q)]).sources[0]
    with pytest.raises(ConfigError, match="records 1:3 of"):
        read_records(src, 1, 3)
    q.unlink()
    assert not rereadable(src)
