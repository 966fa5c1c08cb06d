"""``neardup dedup --engine dask|spark``: the distributed job behind the same command line.

Outputs: ``--output`` gets the kept documents as JSONL (``{"id", "text"}`` per line, input
order) or Parquet (``id``, ``text``) by its extension (other fields of the input records are not
carried through the distributed steps); ``--pairs-out`` and ``--clusters-out`` the same CSVs as
the single-machine run; the summary is the same.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import Any

import numpy as np

__all__ = ["run_distributed_cli"]


def _write_kept(res: Any, output: str) -> None:
    import glob

    import orjson
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..io import atomic_open
    from . import _store

    files = sorted(glob.glob(os.path.join(res.workdir, "kept", "p*.arrow")))
    if output.endswith(".parquet"):
        with atomic_open(output, "wb") as fh:
            schema = pa.schema([("id", pa.string()), ("text", pa.large_string())])
            with pq.ParquetWriter(fh, schema) as w:
                for f in files:
                    w.write_table(_store.read_table(f).select(["id", "text"]).cast(schema))
        return
    with atomic_open(output, "wb", buffering=1 << 20) as fh:
        for f in files:
            t = _store.read_table(f)
            for i, x in zip(t["id"].to_pylist(), t["text"].to_pylist(), strict=True):
                fh.write(orjson.dumps({"id": i, "text": x}) + b"\n")


def _write_pairs(res: Any, path: str) -> None:
    from ..batch.config import STAGE_NAMES
    from ..io import atomic_open
    from ..io.csvout import write_pairs_csv
    from ..verify.rule import RULE_NAMES

    p = res.read("pairs_out")
    m = p.num_rows
    ids = p["id_a"].to_pylist() + p["id_b"].to_pylist()
    ar = np.arange(m, dtype=np.int64)
    with atomic_open(path, "wb", buffering=1 << 20) as fh:
        write_pairs_csv(
            fh, ids, ar, ar + m, p["distance"].to_numpy(), p["score"].to_numpy(),
            p["stage"].to_numpy(), STAGE_NAMES, rule=p["rule"].to_numpy(), rule_names=RULE_NAMES,
        )  # fmt: skip


def _write_clusters(res: Any, path: str) -> None:
    from ..batch.cluster import cluster_ids
    from ..io import atomic_open
    from ..io.csvout import write_clusters_csv

    c = res.read("clusters")
    pos, root = c["pos"].to_numpy(), c["root"].to_numpy()
    root_i = np.searchsorted(pos, root)  # positions -> rows (input order)
    with atomic_open(path, "wb", buffering=1 << 20) as fh:
        write_clusters_csv(
            fh, c["id"].to_pylist(), cluster_ids(root_i), root_i, c["kept"].to_numpy()
        )


def run_distributed_cli(
    *,
    engine: str,
    inputs: list[str],
    config: Any,
    output: str,
    pairs_out: str | None,
    clusters_out: str | None,
    summary_json: str | None,
    input_format: str | None,
    text_field: str,
    id_field: str | None,
    scheduler: str | None,
    master: str | None,
    partitions: int | None,
    workdir: str | None,
    quiet: bool,
) -> dict[str, Any]:
    """Run the job on ``engine``, write the outputs, return the summary's stats."""
    from ..io import atomic_open
    from . import make_engine, run_dedup

    t0 = time.perf_counter()

    def progress(stage: str, done: int, total: int) -> None:
        if not quiet:
            print(f"  {stage:<8} {done}/{total} tasks", file=sys.stderr, flush=True)

    temp = None
    if workdir is None:
        temp = tempfile.TemporaryDirectory(prefix="neardup-dist-")
        workdir = temp.name
    try:
        with make_engine(engine, scheduler=scheduler, master=master, workers=config.workers) as eng:
            t1 = time.perf_counter()
            res = run_dedup(
                inputs, workdir, engine=eng, config=config, partitions=partitions,
                fmt=input_format, text_field=text_field, id_field=id_field, progress=progress,
            )  # fmt: skip
            start_s = t1 - t0
        _write_kept(res, output)
        if pairs_out:
            _write_pairs(res, pairs_out)
        if clusters_out:
            _write_clusters(res, clusters_out)
        stats = dict(res.stats)
        stats["engine_start_s"] = round(start_s, 3)
        stats["elapsed_s"] = round(time.perf_counter() - t0, 3)
        stats["inputs"] = list(inputs)
        stats["output"] = output
        if summary_json:
            with atomic_open(summary_json, "w", encoding="utf-8") as fh:
                json.dump(stats, fh, indent=2, ensure_ascii=False)
                fh.write("\n")
        return stats
    finally:
        if temp is not None:
            temp.cleanup()
