"""NEARDUP_REFERENCE: one switch, read in one place (neardup/_reference.py)."""

from __future__ import annotations

import pytest

from neardup._reference import PARTS, parse, use_reference


def test_parse_values() -> None:
    assert parse(None) == frozenset()
    assert parse("") == parse("0") == frozenset()
    assert parse("1") == parse("all") == frozenset(PARTS)
    assert parse("index, io") == {"index", "io"}
    with pytest.raises(ValueError, match=r"unknown part.*indx"):
        parse("indx")


@pytest.mark.parametrize("part", PARTS)
def test_use_reference_reads_the_one_switch(part: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NEARDUP_REFERENCE", raising=False)
    assert not use_reference(part)
    monkeypatch.setenv("NEARDUP_REFERENCE", part)
    assert use_reference(part)
    assert not any(use_reference(p) for p in PARTS if p != part)
    with pytest.raises(ValueError, match="unknown reference part"):
        use_reference("nope")


@pytest.mark.parametrize(
    "old",
    [
        "NEARDUP_FORCE_REFERENCE",
        "NEARDUP_INDEX_REFERENCE",
        "NEARDUP_IO_REFERENCE",
        "NEARDUP_STORE_BRUTE",
    ],
)
def test_the_retired_per_part_names_do_nothing(old: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing was released: the per-part names of earlier builds are gone, not aliases."""
    monkeypatch.delenv("NEARDUP_REFERENCE", raising=False)
    monkeypatch.setenv(old, "1")
    assert not any(use_reference(p) for p in PARTS)
