"""Incremental dedup on a distributed engine (``--save`` / ``--against`` with ``--engine``,
issue 37 item 3): the driver checks the store and saves to it, the job deduplicates the rest
with the store's drops left out; the outputs equal the local engine's, byte for byte, run after
run. The job runs here on the in-process engine (the same steps the Dask and Spark adapters
run: ``tests/distributed/test_distributed_dask.py`` runs one through the command line)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from neardup.cli.main import main

pytest.importorskip("pyarrow", reason="the distributed job stores Arrow files")

SAMPLE = Path(__file__).resolve().parents[2] / "neardup" / "data" / "sample" / "sample.jsonl"


def _pairs(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return sorted(csv.reader(fh))


def test_an_engine_run_saves_and_drops_as_the_local_engine(
    tmp_path: Path, batches: list[Path]
) -> None:
    from neardup.incremental import dedup_against

    keys = ("documents", "dropped_for_store", "kept", "dropped", "store_documents_before",
            "store_documents_after", "saved")  # fmt: skip
    for i, day in enumerate(batches):
        got = {
            "local": dedup_against(
                day, tmp_path / "store-local", output=tmp_path / f"local{i}.jsonl",
                pairs_out=tmp_path / f"local{i}.csv", save=True,
            ),
            "engine": _engine_run(
                day, tmp_path / "store-engine", output=tmp_path / f"engine{i}.jsonl",
                pairs_out=tmp_path / f"engine{i}.csv",
            ),
        }  # fmt: skip
        assert {k: got["engine"][k] for k in keys} == {k: got["local"][k] for k in keys}
        assert (tmp_path / f"engine{i}.jsonl").read_bytes() == (tmp_path / f"local{i}.jsonl").read_bytes()  # fmt: skip
        assert _pairs(tmp_path / f"engine{i}.csv") == _pairs(tmp_path / f"local{i}.csv")
    assert got["engine"]["dropped_for_store"] > 0  # the last day met the earlier days
    stored = [r for r in _pairs(tmp_path / "engine2.csv") if r[4] == "stored"]
    assert stored and all(r[5] == "" for r in stored)


def test_an_engine_run_that_stopped_while_saving_is_resumed_as_the_local_engine_would(
    tmp_path: Path, batches: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine's save notes itself as the local one does (``SaveJournal``): stopped after
    its first load of 40, a plain rerun is refused and ``resume`` removes what it stored and
    runs again: the store and output equal an uninterrupted engine run's."""
    import neardup.incremental.stored as stored
    from neardup.errors import InputError
    from neardup.incremental.journal import JOURNAL_NAME
    from neardup.online import Deduplicator

    class Stop(Exception):
        pass

    whole, cut = tmp_path / "whole", tmp_path / "cut"
    for store in (whole, cut):
        _engine_run(batches[0], store, output=tmp_path / "d0.jsonl", pairs_out=tmp_path / "p.csv")
    _engine_run(batches[1], whole, output=tmp_path / "w1.jsonl", pairs_out=tmp_path / "w1.csv")
    real, calls = Deduplicator.load, {"n": 0}

    def load(self: Deduplicator, docs: list) -> int:
        calls["n"] += 1
        if calls["n"] > 1:
            raise Stop
        return real(self, docs)

    with monkeypatch.context() as m:
        m.setattr(stored, "LOAD_CHUNK", 40)
        m.setattr(Deduplicator, "load", load)
        with pytest.raises(Stop):
            _engine_run(batches[1], cut, output=tmp_path / "c1.jsonl", pairs_out=tmp_path / "c1.csv")  # fmt: skip
    assert (cut / JOURNAL_NAME).exists() and not (tmp_path / "c1.jsonl").exists()
    with pytest.raises(InputError, match="--resume"):
        _engine_run(batches[1], cut, output=tmp_path / "c1.jsonl", pairs_out=tmp_path / "c1.csv")
    stats = _engine_run(
        batches[1], cut, output=tmp_path / "c1.jsonl", pairs_out=tmp_path / "c1.csv", resume=True
    )
    assert stats["resumed"] == {"removed": 40} and not (cut / JOURNAL_NAME).exists()
    assert (tmp_path / "c1.jsonl").read_bytes() == (tmp_path / "w1.jsonl").read_bytes()
    from tests.incremental.test_seed import _stored

    kept = {i: r["text"] for i, r in _stored(whole).items()}
    assert {i: r["text"] for i, r in _stored(cut).items()} == kept
    assert len(kept) == stats["store_documents_after"]


def _engine_run(
    day: Path, store: Path, *, output: Path, pairs_out: Path, resume: bool = False
) -> dict:
    """``dedup_against`` with the distributed steps on the in-process engine, in 3 partitions
    (the command line's ``--engine local`` is the single-machine batch, so the module is
    called here)."""
    from neardup.incremental.engine import against_on_engine
    from neardup.rules.config import DedupConfig

    return against_on_engine(
        [str(day)], store, save=True, engine="local", config=DedupConfig(), output=str(output),
        output_format=None, summary_json=None, pairs_out=pairs_out, input_format=None,
        text_field="text", id_field=None, encoding="utf-8", on_error="fail", generate_ids=False,
        scheduler=None, master=None, partitions=3, workdir=None, progress=None, resume=resume,
    )  # fmt: skip


def test_the_job_leaves_out_the_excluded_positions(tmp_path: Path) -> None:
    """``run_dedup(exclude=...)``: the excluded records are not read, not kept and drop
    nothing; the others are decided as a run over the file without them."""
    from neardup.distributed import run_dedup
    from neardup.distributed.job import POS_SHIFT

    rows = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:300]
    full = tmp_path / "full.jsonl"
    full.write_text("".join(rows), encoding="utf-8")
    out = np.arange(0, 300, 7)
    without = tmp_path / "without.jsonl"
    without.write_text("".join(r for i, r in enumerate(rows) if i % 7), encoding="utf-8")
    a = run_dedup([str(full)], str(tmp_path / "wa"), partitions=2, exclude=out)
    b = run_dedup([str(without)], str(tmp_path / "wb"), partitions=2)
    assert a.read("kept")["id"].to_pylist() == b.read("kept")["id"].to_pylist()
    assert a.stats["documents"] == 300 - len(out)
    kept_pos = a.read("kept")["pos"].to_numpy()
    assert not np.isin(kept_pos, out).any() and (kept_pos >> POS_SHIFT == 0).all()
    # a rerun in the work directory with other exclusions is another job: refused
    from neardup.errors import InputError

    with pytest.raises(InputError, match="holds another job"):
        run_dedup([str(full)], str(tmp_path / "wa"), partitions=2, exclude=out[1:])


def test_outputs_an_engine_run_cannot_make_are_refused_first(
    tmp_path: Path, batches: list[Path], capsys
) -> None:
    """``--clusters-out`` / ``--report`` with ``--save`` and an engine are refused before
    anything is read or made."""
    day = batches[0]
    rc = main(["dedup", str(day), "-o", str(tmp_path / "k.jsonl"), "--save", str(tmp_path / "s"), "--engine", "dask", "--clusters-out", str(tmp_path / "c.csv")])  # fmt: skip
    assert rc == 2
    assert "run on the local engine" in capsys.readouterr().err
    assert not (tmp_path / "s").exists() and not (tmp_path / "k.jsonl").exists()
