"""A store records the MinHash signature scheme its band keys were made with, and one made with
another scheme (or before schemes were recorded) is refused with a clear error instead of being
matched against keys that mean something else."""

from __future__ import annotations

import pytest

from neardup.errors import UnsupportedVersionError
from neardup.fingerprint.minhash import SIGNATURE_SCHEME
from neardup.online import Deduplicator
from neardup.store.layout import read_json_file, write_json_file

TEXT = "the council announced a new budget for the river bridge and the public library today"


def test_the_scheme_is_recorded_and_another_is_refused(tmp_path) -> None:
    path = tmp_path / "store"
    with Deduplicator.open(path) as d:
        d.add({"id": "a", "text": TEXT})
        plan = d.lsh_plan
    cfg = read_json_file(path / "config.json")
    assert cfg["lsh"]["signature"] == SIGNATURE_SCHEME and cfg["lsh"]["bands"] == plan.bands
    with Deduplicator.open(path) as d:  # the same scheme opens, and finds what it stored
        assert d.check({"id": "b", "text": TEXT + " again"}).duplicate
    for old in (None, "bigram-minhash-0"):  # before schemes were recorded; another scheme
        if old is None:
            del cfg["lsh"]["signature"]
        else:
            cfg["lsh"]["signature"] = old
        write_json_file(path / "config.json", cfg)
        with pytest.raises(UnsupportedVersionError) as err:
            Deduplicator.open(path)
        msg = str(err.value)
        assert "config.json" in msg and SIGNATURE_SCHEME in msg and "new data directory" in msg
        assert (old or "an earlier signature scheme") in msg
