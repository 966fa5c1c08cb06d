"""A store's MinHash plan (``lsh_bands`` / ``lsh_rows``, ``--lsh-bands`` / ``--lsh-rows``):
chosen when the store is created, kept with its data, another refused, and a plan below the
promise said on open."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from neardup.cli.main import main
from neardup.errors import ConfigError
from neardup.online import Deduplicator
from neardup.rules import DedupConfig

TEXTS = [
    "the council approved the new budget for the city library on tuesday evening",
    "the council approved the new budget for the city library on monday evening",
    "a storm closed the coastal road for three days and the ferry stopped running",
]


def test_a_new_store_takes_the_plan_and_keeps_it(tmp_path: Path) -> None:
    with Deduplicator.open(tmp_path, lsh_bands=20, lsh_rows=3) as d:
        assert (d.lsh_plan.bands, d.lsh_plan.rows) == (20, 3)
        assert d.lsh_plan == DedupConfig(lsh_bands=20, lsh_rows=3).lsh_plan()
        first = d.check_and_add({"id": "a", "text": TEXTS[0]})
    with Deduplicator.open(tmp_path) as d:  # no options: the stored plan
        assert (d.lsh_plan.bands, d.lsh_plan.rows) == (20, 3)
        second = d.check_and_add({"id": "b", "text": TEXTS[1]})
        third = d.check_and_add({"id": "c", "text": TEXTS[2]})
    assert first.added and second.duplicate and second.matches[0].id == "a"
    assert third.added
    with Deduplicator.open(tmp_path, lsh_bands=20, lsh_rows=3) as d:  # the stored plan: fine
        assert len(d) == 2


@pytest.mark.parametrize(
    "option", [{"lsh_bands": 79, "lsh_rows": 3}, {"lsh_bands": 20, "lsh_rows": 4}]
)
def test_another_plan_than_the_stored_one_is_refused(tmp_path: Path, option: dict) -> None:
    Deduplicator.open(tmp_path, lsh_bands=20, lsh_rows=3).close()
    with pytest.raises(ConfigError, match=r"20 bands of 3 rows.*Omit it"):
        Deduplicator.open(tmp_path, **option)


def test_a_store_made_on_defaults_refuses_a_plan(tmp_path: Path) -> None:
    Deduplicator.open(tmp_path).close()
    with pytest.raises(ConfigError, match="79 bands of 3 rows"):
        Deduplicator.open(tmp_path, lsh_bands=30, lsh_rows=3)


def test_a_plan_without_band_keys_is_refused() -> None:
    with pytest.raises(ConfigError, match="candidates='simhash'"):
        Deduplicator.open(None, candidates="simhash", lsh_bands=30, lsh_rows=3)
    with pytest.raises(ConfigError, match=r"lsh_rows .* must be an integer in \[1, 512\]"):
        Deduplicator.open(None, lsh_bands=30, lsh_rows=0)
    with pytest.raises(ConfigError, match="given together"):
        Deduplicator.open(None, lsh_bands=30)


def test_a_plan_below_the_promise_is_logged_on_open(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="neardup"):
        Deduplicator.open(None).close()
    assert not [r for r in caplog.records if "below the 0.99" in r.getMessage()]
    with caplog.at_level(logging.WARNING, logger="neardup"):
        Deduplicator.open(None, lsh_bands=30, lsh_rows=3).close()
    said = [r.getMessage() for r in caplog.records if "below the 0.99" in r.getMessage()]
    assert said and "probability 0.828" in said[0] and "30 bands x 3 rows" in said[0]


def test_store_load_creates_the_store_with_the_plan(tmp_path: Path, capsys) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(f'{{"id": "d{i}", "text": "{t}"}}\n' for i, t in enumerate(TEXTS)),
        encoding="utf-8",
    )
    data = tmp_path / "data"
    assert (
        main(["store", "load", str(data), str(src), "--lsh-bands", "20", "--lsh-rows", "3", "-q"])
        == 0
    )
    with Deduplicator.open(data / "namespaces" / "default") as d:
        assert d.lsh_plan.bands == 20 and len(d) == 2
    assert main(["store", "load", str(data), str(src), "--lsh-bands", "0"]) != 0
    assert "--lsh-bands" in capsys.readouterr().err


def test_serve_refuses_half_a_plan_before_it_starts(tmp_path: Path, capsys) -> None:
    args = ["serve", "--data", str(tmp_path / "data"), "--no-auth", "--lsh-bands", "30"]
    assert main(args) == 2
    assert "given together" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()  # refused before anything was made
