"""``neardup dedup --engine dask|spark`` reads and writes as the local engine does: the same
``--output-format`` (from the output's name), ``--encoding``, ``--on-error`` and
``--generate-ids``, the kept records with every field (the local engine's writer), a folder
output mirroring the inputs, the same refusals before anything runs; without pyarrow, the
install hint (exit code 9) instead of a traceback. The distributed job runs here on its in-process
engine (``run_distributed_cli(engine="local")``, the code path of dask and spark but the
engine adapter)."""

from __future__ import annotations

import csv
import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _distributed_common import sample_slice

from neardup.batch.files import dedup_files
from neardup.errors import ConfigError, InputError
from neardup.rules.config import DedupConfig

pytest.importorskip("pyarrow")
from neardup.distributed.cli import run_distributed_cli


def _rich_slice(tmp: Path, lines: int, parts: int) -> list[str]:
    """The sample's first ``lines`` records with more fields than the distributed steps carry
    (a number, a nested object, a list), in ``parts`` JSONL files."""
    files = sample_slice(tmp, lines, parts)
    for f in files:
        rows = [json.loads(x) for x in Path(f).read_text(encoding="utf-8").splitlines()]
        Path(f).write_text(
            "".join(
                json.dumps({**r, "n": k, "meta": {"src": f"s{k % 3}", "tags": ["a", f"t{k}"]}})
                + "\n"
                for k, r in enumerate(rows)
            )
        )
    return files


def _out(d: Path, out: str) -> str:
    """``out`` under ``d``, a trailing ``/`` kept (it asks for a folder of per-input outputs)."""
    return str(d / out) + ("/" if out.endswith("/") else "")


def _run_dist(d: Path, inputs: list[str], out: str, **read: Any) -> dict[str, Any]:
    return run_distributed_cli(
        engine="local", inputs=inputs, config=DedupConfig(), output=_out(d, out),
        pairs_out=str(d / "pairs.csv"), clusters_out=str(d / "clusters.csv"), summary_json=None,
        input_format=None, text_field="text", id_field=None, scheduler=None, master=None,
        partitions=2, workdir=None, quiet=True, **read,
    )  # fmt: skip


def _run_both(tmp: Path, inputs: list[str], out: str, **read: Any) -> tuple[Any, Any]:
    """The local engine's outputs and stats under ``tmp/local``, the distributed job's under
    ``tmp/dist`` (kept documents as ``out``, pairs, clusters)."""
    (tmp / "local").mkdir()
    (tmp / "dist").mkdir()
    d = tmp / "local"
    local = dedup_files(
        inputs, output=_out(d, out), pairs_out=d / "pairs.csv", clusters_out=d / "clusters.csv",
        config=DedupConfig(), **read,
    ).stats  # fmt: skip
    return local, _run_dist(tmp / "dist", inputs, out, **read)


def _records(path: Path) -> list[dict[str, Any]]:
    name = path.name
    raw = path.read_bytes()
    if name.endswith(".gz"):
        raw = gzip.decompress(raw)
        name = name[:-3]
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        return list(pq.read_table(path).to_pylist())
    text = raw.decode("utf-8")
    if name.endswith((".csv", ".tsv")):
        delim = "\t" if name.endswith(".tsv") else ","
        return list(csv.DictReader(text.splitlines(keepends=True), delimiter=delim))
    if name.endswith(".json"):
        return list(json.loads(text))
    if name.endswith(".txt"):
        return [{"text": x} for x in text.splitlines()]
    return [json.loads(x) for x in text.splitlines()]


@pytest.mark.parametrize(
    "out", ["kept.csv", "kept.parquet", "kept.jsonl.gz", "kept.json", "kept.tsv"]
)
def test_output_format_from_the_name_as_the_local_engine(tmp_path, out):
    inputs = _rich_slice(tmp_path, 200, 2)
    local, dist = _run_both(tmp_path, inputs, out)
    assert dist["kept"] == local["kept"] and dist["output_format"] == local["output_format"]
    got = _records(tmp_path / "dist" / out)
    assert got == _records(tmp_path / "local" / out)
    assert "meta" in got[0] and "n" in got[0]  # every field, not only id and text
    for name in ("pairs.csv", "clusters.csv"):
        assert (tmp_path / "dist" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()


@pytest.mark.parametrize("out", ["kept.jsonl", "kept/"])
def test_kept_records_are_the_local_engines_bytes(tmp_path, out):
    """JSONL records copied byte for byte, and a folder output mirroring the inputs: what the
    local engine writes."""
    inputs = _rich_slice(tmp_path, 240, 3)
    local, dist = _run_both(tmp_path, inputs, out)
    assert dist["kept"] == local["kept"] and dist["output_folder"] == local["output_folder"]
    want = sorted(p.relative_to(tmp_path / "local") for p in (tmp_path / "local").rglob("*.jsonl"))
    got = sorted(p.relative_to(tmp_path / "dist") for p in (tmp_path / "dist").rglob("*.jsonl"))
    assert got == want and len(got) == (3 if out.endswith("/") else 1)
    for rel in want:
        assert (tmp_path / "dist" / rel).read_bytes() == (tmp_path / "local" / rel).read_bytes()


def test_encoding_on_error_and_generated_ids_as_the_local_engine(tmp_path):
    part = Path(sample_slice(tmp_path, 300)[0])
    rows = [json.loads(x) for x in part.read_text(encoding="utf-8").splitlines()]
    rows = [r for r in rows if r["text"].isascii()][:120]
    lines = [json.dumps({**r, "text": r["text"] + " café"}, ensure_ascii=False) for r in rows]
    lines[3] = '{"id": "bad", "text": broken'
    lines[7] = '{"id": null, "text": "null ids are refused, and skipped"}'
    src = tmp_path / "latin.jsonl"
    src.write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    read = {"encoding": "latin-1", "on_error": "skip"}
    local, dist = _run_both(tmp_path, [str(src)], "kept.jsonl", **read)
    assert local["skipped_records"] == dist["skipped_records"] == 2
    assert [x["line"] for x in dist["skipped_list"]] == [4, 8]
    got = _records(tmp_path / "dist" / "kept.jsonl")
    assert got == _records(tmp_path / "local" / "kept.jsonl")
    assert got[0]["text"].endswith(" café")
    again = tmp_path / "again"
    again.mkdir()
    with pytest.raises(InputError, match=r"latin.jsonl:4: malformed JSON"):
        _run_dist(again, [str(src)], "kept.jsonl", encoding="latin-1")
    for name in ("local", "dist"):
        shutil.rmtree(tmp_path / name)
    local, dist = _run_both(tmp_path, [str(src)], "kept.csv", generate_ids=True, **read)
    assert local["skipped_records"] == dist["skipped_records"] == 1  # the null id is fine now
    for name in ("pairs.csv", "clusters.csv"):  # both under the generated ids
        assert (tmp_path / "dist" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
    clusters = list(csv.DictReader((tmp_path / "dist" / "clusters.csv").open()))
    assert clusters and all(r["id"].startswith(f"{src}:") for r in clusters)
    # the kept records as they were read (their own "id" field included), by both engines
    assert _records(tmp_path / "dist" / "kept.csv") == _records(tmp_path / "local" / "kept.csv")


def test_refusals_before_the_engine_starts(tmp_path):
    inputs = sample_slice(tmp_path, 20)
    common: dict[str, Any] = dict(
        engine="local", inputs=inputs, config=DedupConfig(), clusters_out=None,
        summary_json=None, input_format=None, text_field="text", id_field=None,
        scheduler=None, master=None, partitions=None, workdir=None, quiet=True,
    )  # fmt: skip
    with pytest.raises(ConfigError, match="names parquet but --output-format is csv"):
        run_distributed_cli(output="k.parquet", pairs_out=None, output_format="csv", **common)
    with pytest.raises(ConfigError, match="both go to"):
        run_distributed_cli(
            output=str(tmp_path / "k.csv"), pairs_out=str(tmp_path / "k.csv"), **common
        )
    (tmp_path / "part0.csv").write_text("id,text\n1,x\n")
    with pytest.raises(ConfigError, match="mixes formats"):
        run_distributed_cli(
            **{**common, "inputs": [str(tmp_path)]}, output="k.jsonl", pairs_out=None
        )
    assert not list(tmp_path.glob("k*"))


def test_without_pyarrow_the_engines_give_the_install_hint(tmp_path):
    """``pip install .`` (no extras) then ``--engine dask``: exit code 9 and one line naming the
    extra, not a ModuleNotFoundError traceback. pyarrow is hidden by a package of its name on
    PYTHONPATH that fails to import as a missing module does."""
    fake = tmp_path / "hide" / "pyarrow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pyarrow'\", name='pyarrow')\n"
    )
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "text": "some text"}\n')
    script = Path(sys.executable).with_name("neardup")
    cmd = [str(script)] if script.exists() else [shutil.which("neardup") or "neardup"]
    for engine in ("dask", "spark"):
        proc = subprocess.run(
            [*cmd, "dedup", str(src), "-o", str(tmp_path / "k.jsonl"), "--engine", engine],
            env={"PYTHONPATH": str(tmp_path / "hide"), "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert proc.returncode == 9, proc.stderr
        assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
        assert f"pip install 'neardup[{engine}]'" in proc.stderr
