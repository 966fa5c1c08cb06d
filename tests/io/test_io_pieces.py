"""A JSONL file read a piece at a time (:mod:`neardup.io.pieces`, the first pass of a store load
over one large file): the pieces give the records the whole file's read gives, but for the later
copies of ids repeated between pieces, which the caller leaves out; a compressed file's one
uncompressed copy goes with the corpus or the source that owns it."""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.errors import ConfigError
from neardup.io import plan_inputs, read_corpus
from neardup.io.formats import read_records, rereadable
from neardup.io.pieces import FilePieces
from tests.io.test_io_scan import _clean_file


def _in_pieces(path: Path, piece_bytes: int, **opts: object) -> tuple[dict, FilePieces]:
    """Every piece's records, concatenated, and the FilePieces (closed) that read them."""
    got: dict = {"ids": [], "texts": [], "lines": [], "starts": [], "ends": [], "skipped": 0}
    with FilePieces(plan_inputs([str(path)])[0], piece_bytes=piece_bytes, **opts) as fp:
        for c in fp:
            src = c.sources[0]
            got["ids"] += list(c.ids)
            got["texts"] += [c.texts[i] for i in range(len(c))]
            got["lines"] += src.lines.tolist()
            got["starts"] += src.starts.tolist()
            got["ends"] += src.ends.tolist()
            got["skipped"] += c.skipped
            c.close()
    return got, fp


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=_clean_file(), bom=st.booleans(), pick=st.data())
def test_pieces_hold_the_whole_files_records(tmp_path, data, bom, pick) -> None:
    """Cut anywhere (a piece of one byte: a line a piece), the pieces' records are the whole
    file's, with its ids, texts, lines and spans, once the later copies of ids repeated
    between pieces are left out (what the whole read skips); and a file of several pieces
    leaves its source, from which ``read_records`` reads any records again."""
    p = tmp_path / "c.jsonl"
    p.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data)
    piece = pick.draw(st.integers(1, len(data) + 8))
    for id_field, generate in ((None, False), ("id", False), (None, True)):
        opts = {"on_error": "skip", "id_field": id_field, "generate_ids": generate}
        whole = read_corpus([str(p)], **opts)
        got, fp = _in_pieces(p, piece, **opts)
        seen: set[str] = set()
        first = []
        for x in got["ids"]:
            first.append(x not in seen)
            seen.add(x)
        assert [x for x, f in zip(got["ids"], first, strict=True) if f] == list(whole.ids)
        assert got["skipped"] + first.count(False) == whole.skipped
        w = whole.sources[0]
        texts = [whole.texts[i] for i in range(len(whole))]
        for key, want in (
            ("texts", texts), ("lines", w.lines.tolist()), ("starts", w.starts.tolist()),
            ("ends", w.ends.tolist()),
        ):  # fmt: skip
            assert [v for v, f in zip(got[key], first, strict=True) if f] == want
        if fp.pieces > 1:
            src = fp.source
            assert src.lines.tolist() == got["lines"] and src.starts.tolist() == got["starts"]
            assert rereadable(src)
            lo = pick.draw(st.integers(0, src.count))
            hi = pick.draw(st.integers(lo, src.count))
            again = read_records(src, lo, hi, **opts)
            assert list(again.ids) == got["ids"][lo:hi]  # a repeat between pieces is read too
            assert [again.texts[i] for i in range(len(again))] == got["texts"][lo:hi]


def test_non_ascii_field_names_are_read_by_the_line_path(tmp_path: Path) -> None:
    """Fields the mapped reader does not take (non-ASCII names) are read a piece at a time by
    the readers' per-line path: the same records as the whole read."""
    p = tmp_path / "c.jsonl"
    rows = [{"ид": f"d{k}", "текст": f"слово {k} " * (k % 5 + 1)} for k in range(300)]
    p.write_text("".join(json.dumps(r, ensure_ascii=k % 2 == 0) + "\n" for k, r in enumerate(rows)))
    opts = {"text_field": "текст", "id_field": "ид"}
    whole = read_corpus([str(p)], **opts)
    got, fp = _in_pieces(p, 500, **opts)
    assert fp.pieces > 10 and got["ids"] == list(whole.ids) == [r["ид"] for r in rows]
    assert got["texts"] == [r["текст"] for r in rows]
    assert got["starts"] == whole.sources[0].starts.tolist()


def _copies(folder: Path) -> list[Path]:
    return [q for q in folder.iterdir() if q.name.startswith("neardup-input-")]


def test_a_compressed_files_copy_goes_with_what_owns_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several pieces: the copy is there while they are read and after (the source's, for
    the slices), and :meth:`FilePieces.close` removes it, also when the pieces stopped early.
    One piece: its corpus owns the copy, as ``read_corpus``'s would."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    rows = [{"id": f"d{k}", "text": f"some words {k}"} for k in range(400)]
    p = tmp_path / "c.jsonl.gz"
    p.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    f = plan_inputs([str(p)])[0]
    fp = FilePieces(f, piece_bytes=1000)
    ids = []
    for c in fp:
        assert len(_copies(temp)) == 1
        ids += list(c.ids)
        c.close()  # a piece does not own the copy
    assert ids == [r["id"] for r in rows] and fp.pieces > 5
    assert fp.source.temp is not None and len(_copies(temp)) == 1
    assert list(read_records(fp.source, 398, 400).ids) == ["d398", "d399"]
    fp.close()
    assert not _copies(temp)
    with FilePieces(f, piece_bytes=1000) as fp:
        next(iter(fp)).close()
    assert not _copies(temp)
    fp = FilePieces(f)  # one piece
    (c,) = list(fp)
    fp.close()
    assert len(_copies(temp)) == 1 and list(c.ids) == ids
    assert c.texts[399] == "some words 399"
    c.close()
    assert not _copies(temp)


def test_only_utf8_jsonl_files_are_read_in_pieces(tmp_path: Path) -> None:
    p = tmp_path / "c.csv"
    p.write_text("id,text\na,alpha\n", encoding="utf-8")
    q = tmp_path / "c.jsonl"
    q.write_text('{"id": "a", "text": "alpha"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="only a JSONL file read as UTF-8"):
        FilePieces(plan_inputs([str(p)])[0])
    with pytest.raises(ConfigError, match="only a JSONL file read as UTF-8"):
        FilePieces(plan_inputs([str(q)])[0], encoding="latin-1")
    with pytest.raises(ConfigError, match="piece_bytes must be at least 1"):
        FilePieces(plan_inputs([str(q)])[0], piece_bytes=0)
