"""The I/O wing's tests read through the JSONL pre-scan whatever the kernel cache holds."""

from __future__ import annotations

import pytest

from neardup.io import jsonl as jsonl_mod


@pytest.fixture(autouse=True)
def _prescan_always(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process whose pre-scan kernel is neither compiled nor cached (a fresh kernel cache)
    reads its first ``SCAN_COMPILE_BYTES`` of JSONL by the per-line path: these tests compare
    the pre-scan with the reference reader, so they take it from the first byte
    (``test_io_scan.py`` tests the per-line start on its own)."""
    monkeypatch.setattr(jsonl_mod, "SCAN_COMPILE_BYTES", 0)
