"""Shared fixtures. Tests that need ../shared/data/dev skip with a reason where it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
SHARED_DEV = Path(os.environ.get("NEARDUP_DEV_DATA", ROOT.parent / "shared" / "data" / "dev"))

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=200, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def dev_data() -> Path:
    """Path to the shared dev corpus (docs.jsonl, pairs.csv); skips when it is not there."""
    if not (SHARED_DEV / "docs.jsonl").exists():
        pytest.skip(f"dev corpus not found at {SHARED_DEV} (a user's clone has no ../shared)")
    return SHARED_DEV
