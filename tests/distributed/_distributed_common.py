"""Helpers shared by the distributed-engine tests: the single-machine answer to compare with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neardup.batch.run import dedup
from neardup.io import read_corpus
from neardup.rules.config import STAGE_NAMES, DedupConfig

SAMPLE = Path(__file__).resolve().parents[2] / "neardup" / "data" / "sample" / "sample.jsonl"


def sample_slice(tmp: Path, lines: int | None, parts: int = 1) -> list[str]:
    """The sample's first ``lines`` lines (all when None), cut into ``parts`` JSONL files."""
    rows = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:lines]
    out = []
    for p in range(parts):
        f = tmp / f"part{p}.jsonl"
        f.write_text("".join(rows[p * len(rows) // parts : (p + 1) * len(rows) // parts]))
        out.append(str(f))
    return out


def single_machine(inputs: list[str], config: DedupConfig) -> dict[str, Any]:
    """Kept ids, pair rows and each document's root id from :func:`neardup.dedup`."""
    with read_corpus(inputs) as c:
        ids, texts = list(c.ids), list(c.texts)
    r = dedup(texts, ids=ids, config=config)
    return {
        "kept": [ids[i] for i in r.kept_indices().tolist()],
        "pairs": r.pair_rows(),
        "rules": r.pairs.rule.tolist(),
        "roots": [ids[x] for x in r.root.tolist()],
        "stats": r.stats,
    }


def distributed(res: Any) -> dict[str, Any]:
    """The same views of a :class:`neardup.distributed.DistributedResult`."""
    p = res.read("pairs_out")
    pairs = [
        (a, b, int(d), round(float(s), 4), STAGE_NAMES[st])
        for a, b, d, s, st in zip(
            p["id_a"].to_pylist(), p["id_b"].to_pylist(), p["distance"].to_pylist(),
            p["score"].to_pylist(), p["stage"].to_pylist(), strict=True,
        )
    ]  # fmt: skip
    return {
        "kept": res.read("kept")["id"].to_pylist(),
        "pairs": pairs,
        "rules": p["rule"].to_pylist(),
        "roots": res.read("clusters")["root_id"].to_pylist(),
        "stats": res.stats,
    }


def assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got["kept"] == want["kept"]
    assert got["pairs"] == want["pairs"]
    assert got["rules"] == want["rules"]  # the rule that decided each pair, in the same order
    assert got["roots"] == want["roots"]
    for k in ("documents", "exact_duplicates", "near_duplicates", "clusters", "kept", "dropped"):
        assert got["stats"][k] == want["stats"][k], k


def incremental_runs_keep_one_runs(tmp: Path, days: list[str], engine: str) -> None:
    """``neardup dedup DAY --save STORE --engine ENGINE``, day after day: the kept documents of
    the runs are those of one keep-first run over the days together (issue 37)."""
    from neardup.cli.main import main

    together = tmp / "together.jsonl"
    together.write_text("".join(Path(d).read_text(encoding="utf-8") for d in days), encoding="utf-8")  # fmt: skip
    assert main(["dedup", str(together), "-o", str(tmp / "all.jsonl"), "-q"]) == 0
    kept = ""
    for i, day in enumerate(days):
        out = tmp / f"k{i}.jsonl"
        args = ["dedup", day, "-o", str(out), "--save", str(tmp / "store"), "-q"]
        assert main([*args, "--engine", engine, "--partitions", "2"]) == 0
        kept += out.read_text(encoding="utf-8")
    assert kept == (tmp / "all.jsonl").read_text(encoding="utf-8")
