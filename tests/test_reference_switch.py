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
def test_use_reference_reads_the_switch_and_the_old_names(
    part: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = {
        "fingerprint": "NEARDUP_FORCE_REFERENCE",
        "index": "NEARDUP_INDEX_REFERENCE",
        "io": "NEARDUP_IO_REFERENCE",
        "store": "NEARDUP_STORE_BRUTE",
    }[part]
    for name in ("NEARDUP_REFERENCE", old):
        monkeypatch.delenv(name, raising=False)
    assert not use_reference(part)
    monkeypatch.setenv("NEARDUP_REFERENCE", part)
    assert use_reference(part)
    assert not any(use_reference(p) for p in PARTS if p != part)
    monkeypatch.delenv("NEARDUP_REFERENCE")
    monkeypatch.setenv(old, "1")
    assert use_reference(part)
    with pytest.raises(ValueError, match="unknown reference part"):
        use_reference("nope")
