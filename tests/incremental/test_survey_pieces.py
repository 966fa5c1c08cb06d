"""The first pass of a store load (:func:`neardup.incremental.survey.survey`) reads a JSONL file
a piece at a time (:mod:`neardup.io.pieces`); against the same pass reading every file whole
(one piece the size of the file), cut anywhere: the same documents to decide, the same counts,
and a refusal with ``on_error="fail"`` where the whole read refuses."""

from __future__ import annotations

import json
from pathlib import Path

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


def _pass(paths: list[Path], piece_bytes: int, on_error: str) -> tuple[list[str], int, int]:
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
                d, files, reading, time_field=None, drop_expired=False, chunk_docs=10**6
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
