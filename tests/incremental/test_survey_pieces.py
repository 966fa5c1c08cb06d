"""The first pass of a store load (:func:`neardup.incremental.survey.survey`) reads a JSONL file
a piece at a time (:mod:`neardup.io.pieces`); against the same pass reading every file whole
(one piece the size of the file), cut anywhere: the same documents to decide, the same counts,
and a refusal with ``on_error="fail"`` where the whole read refuses."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.errors import RecordError
from neardup.incremental.survey import survey
from neardup.io import plan_inputs
from neardup.online import Deduplicator

_ROW = st.tuples(
    st.integers(0, 40),  # the id (a few repeat)
    st.sampled_from(["", "bad", "blank", "nested"]),  # now and then an unusual line
    st.text(alphabet="ab 中", min_size=1, max_size=12),
)


def _file(path: Path, rows: list[tuple[int, str, str]]) -> None:
    lines = []
    for ident, odd, text in rows:
        if odd == "bad":
            lines.append('{"id": "x", "text": ')
        elif odd == "blank":
            lines.append("")
        elif odd == "nested":
            lines.append(json.dumps({"id": f"d{ident}", "text": {"no": text}}))
        else:
            lines.append(json.dumps({"id": f"d{ident}", "text": text}, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _pass(
    paths: list[Path], piece_bytes: int, on_error: str, progress: Any = None
) -> tuple[list[str], int, int]:
    """The ids the pass leaves to decide, in input order, its documents and its skipped."""
    import neardup.io.pieces as nip

    old = nip.PIECE_BYTES
    nip.PIECE_BYTES = piece_bytes
    try:
        reading = dict(
            text_field="text", id_field=None, encoding="utf-8", on_error=on_error,
            generate_ids=False,
        )  # fmt: skip
        with Deduplicator.open(None) as d:
            files = plan_inputs([str(p) for p in paths])
            s = survey(
                d, files, reading, time_field=None, drop_expired=False, chunk_docs=10**6,
                progress=progress,
            )  # fmt: skip
            try:
                used = []
                for c in s.files:
                    for i in range(c.documents):
                        if c.use[i]:
                            used.append(c.record(i, reading)[0])
                return used, s.documents, s.skipped
            finally:
                s.release()
    finally:
        nip.PIECE_BYTES = old


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    files=st.lists(st.lists(_ROW, min_size=0, max_size=25), min_size=1, max_size=3),
    piece=st.integers(1, 400),
)
def test_a_pass_in_pieces_leaves_what_the_whole_read_leaves(tmp_path, files, piece) -> None:
    paths = []
    for k, rows in enumerate(files):
        p = tmp_path / f"part-{k}.jsonl"
        _file(p, rows)
        paths.append(p)
    assert _pass(paths, piece, "skip") == _pass(paths, 1 << 62, "skip")
    whole_fails = pieces_fail = None
    try:
        _pass(paths, 1 << 62, "fail")
    except RecordError as exc:
        whole_fails = exc
    try:
        _pass(paths, piece, "fail")
    except RecordError as exc:
        pieces_fail = exc
    # both refuse, or neither (which record is named may differ: a piece's reader meets a bad
    # record of its own before the pass meets a repeat between pieces, found after the read)
    assert (whole_fails is None) == (pieces_fail is None)


def test_the_pass_in_pieces_refuses_a_repeat_between_pieces(tmp_path: Path) -> None:
    p = tmp_path / "c.jsonl"
    _file(p, [(k, "", "words") for k in range(30)] + [(3, "", "again")])
    with pytest.raises(RecordError, match=r"duplicate id 'd3' \(first seen at .*c.jsonl:4\)"):
        _pass([p], 100, "fail")
    used, documents, skipped = _pass([p], 100, "skip")
    assert used == [f"d{k}" for k in range(30)] and (documents, skipped) == (30, 1)


def _reports(paths: list[Path], piece_bytes: int) -> list[tuple[int, int]]:
    """The pass's ``check`` progress reports, ``(done, total)`` in bytes."""
    seen: list[tuple[int, int]] = []

    def progress(stage: str, done: int, total: int) -> None:
        assert stage == "check"
        seen.append((done, total))

    _pass(paths, piece_bytes, "skip", progress)
    return seen


def test_the_pass_reports_bytes_read_piece_by_piece(tmp_path: Path) -> None:
    """One large file does not sit at 0 % until it is read: the pass reports each piece's share
    of the file's bytes, rising, and reaches its total once, at the end; files count their
    stored size (a compressed file's share follows its uncompressed pieces)."""
    big = tmp_path / "big.jsonl"
    _file(big, [(k, "", "some words here") for k in range(40)])
    small = tmp_path / "small.jsonl"
    _file(small, [(100 + k, "", "other words") for k in range(5)])
    plain = tmp_path / "plain.jsonl"
    shutil.copy(big, plain)
    packed = tmp_path / "packed.jsonl.gz"
    with open(big, "rb") as src, gzip.open(packed, "wb") as dst:
        dst.write(src.read())
    size = big.stat().st_size
    total = size + small.stat().st_size
    seen = _reports([big, small], 200)
    assert all(t == total for _, t in seen)
    done = [d for d, _ in seen]
    assert done == sorted(done) and done[-1] == total and done.count(total) == 1
    inside = [d for d in done if 0 < d < size]  # while the big file was being read
    assert len(inside) >= size // 200 - 1
    assert size in done  # the big file checked, then the small one
    # the same file compressed: the same shares of its stored size
    gz = packed.stat().st_size
    shares = [d for d, _ in _reports([packed], 200)]
    assert shares[-1] == gz and len(shares) == len([d for d, _ in _reports([plain], 200)])
    assert shares == sorted(shares) and 0 < shares[0] < gz


def test_the_pass_reports_once_for_a_file_read_whole(tmp_path: Path) -> None:
    p = tmp_path / "one.jsonl"
    _file(p, [(k, "", "words") for k in range(10)])
    size = p.stat().st_size
    assert _reports([p], 1 << 62) == [(size - 1, size), (size, size)]
