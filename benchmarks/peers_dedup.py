#!/usr/bin/env python3
"""neardup against its peers at 1 M documents, each system in its own process
(``python benchmarks/bench_dedup.py --peers``; issue 38, "Measure").

Two corpora, built once into ``--workdir`` and reused by later runs:

* ``mix``: the dev set (``../shared/data/dev``, 7,899 documents with labelled pairs) at seeded
  random positions among ``--n`` generated documents (``quality_dedup.mix_corpus``: 20 % ~3.5 KB
  documents, 80 % ~100-character posts, 10 % planted duplicates);
* ``short``: ``--n`` generated short posts (``bench_dedup.generate("short")``, 10 % planted
  duplicates) with short-text edit pairs mixed in at random positions: texts of 6-40 tokens and
  a copy with scattered one-token substitutions at token similarity 0.8
  (``study_short_texts.make_pairs``: en and zh, generated and, when the dev set is there,
  dev-derived windows; ``--edit-pairs`` per language, source and length).

Systems (``--systems``), each run as its own process, one after another, on the same files:

| system | what runs |
|---|---|
| ``neardup`` | ``neardup dedup docs.jsonl`` on defaults (every CPU), with ``--pairs-out``, ``--clusters-out``, ``--summary-json`` |
| ``neardup-w1`` | the same with ``--workers 1`` |
| ``datasketch`` | ``MinHashLSH`` (char 3-grams, threshold 0.5, 128 permutations): insert every text, query every text, write the pairs (``peer_runners.py``) |
| ``datatrove`` | its four-stage MinHash pipeline on a local executor at ``MinhashConfig()`` defaults, input split into one file per CPU (``peer_runners.py``) |
| ``text-dedup`` | ``python -m text_dedup.minhash`` at its defaults (``peer_runners.py``) |

For each run: wall time, CPU time (user + system of the whole process tree: the larger of this
process's ``RUSAGE_CHILDREN`` before and after -- the runs do not overlap -- and the sum over
every process seen in the tree, sampled every 0.2 s, for workers whose parent is killed rather
than waited for), peak RSS (the sum over the
process tree, sampled every 0.2 s with psutil, so pages shared by forked workers count once per
process; and the largest single process), the load average before and after. A run over
``--timeout`` seconds is stopped (its process group killed) and reported with how far it got.

Outputs are mapped to pair decisions (``score``; untimed, after the run):

* neardup: the pairs it reports (``--pairs-out``: exact and verified near pairs), the scoring
  ``quality_dedup.py`` uses, and also its clusters (``--clusters-out``) for comparison;
* datasketch: every pair a query returns (candidates; datasketch does not verify); its kept set
  is the keep-first rule over those pairs (a document is dropped when a pair joins it to an
  earlier kept one: what inserting only the texts whose query came back empty does);
* datatrove and text-dedup: their clusters (connected components of band matches: datatrove's
  ``minhash_cluster_id``, text-dedup's union-find); a pair counts as reported when both
  documents are in one cluster; their kept set is their own output.

Scores: the dev pairs' precision / recall / F1 (``score_reported``: recall over label-1 pairs,
precision over the reported pairs that carry a label), the short-text edit pairs' recall (by
language) and the planted pairs' recall. Targets (issue 38): neardup on defaults >= 10x the
fastest peer's wall time, ``--workers 1`` >= 5x, dev F1 equal to the committed 1 M figure
(``quality_dedup_mix1000000.json``) within 0.001, edit-pair recall >= 0.99.

    python benchmarks/bench_dedup.py --peers --install-peers      # peer venvs in ../peer-venvs
    nice -n 5 python benchmarks/bench_dedup.py --peers --n 1000000 --timeout 1800
    python benchmarks/bench_dedup.py --peers --n 20000 --corpora short --systems neardup,datatrove

Prints the table and writes ``benchmarks/results/bench_dedup_peers.json`` after every run
(``--resume`` keeps the runs already in it for the same ``--n`` and seed).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

SYSTEMS = ("neardup", "neardup-w1", "datasketch", "datatrove", "text-dedup")
PEERS = ("datasketch", "datatrove", "text-dedup")
#: what each peer venv gets (``--install-peers``); text-dedup 0.4.1, the newest, needs Python >= 3.12
PEER_PACKAGES = {
    # datatrove's JsonlReader needs orjson, which its extras leave out
    "datatrove": ["datatrove[processing]==0.10.1", "spacy", "orjson"],
    "text-dedup": ["text-dedup==0.4.0"],
}
EDIT_LENGTHS = (6, 8, 10, 12, 15, 20, 25, 30, 40)


# ---------------------------------------------------------------------------------------------
# the machine


def machine() -> dict[str, Any]:
    """The machine a result came from (cores, CPUs usable, memory, CPU model, load)."""
    mem_kib = 0
    model = ""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            mem_kib = int(fh.readline().split()[1])
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            model = next(
                (ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), ""
            )
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": model,
        "memory_gib": round(mem_kib / (1 << 20), 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


# ---------------------------------------------------------------------------------------------
# corpora


def _write_jsonl(path: Path, ids: list[str], texts: list[str], shards: int) -> None:
    import orjson

    path.parent.mkdir(parents=True, exist_ok=True)
    (path.parent / "shards").mkdir(exist_ok=True)
    bounds = np.linspace(0, len(ids), shards + 1).astype(int).tolist()
    outs = [(path.parent / "shards" / f"part-{k:05d}.jsonl").open("wb") for k in range(shards)]
    with path.open("wb") as fh:
        for k in range(shards):
            for lo in range(bounds[k], bounds[k + 1], 10000):
                hi = min(bounds[k + 1], lo + 10000)
                block = b"".join(
                    orjson.dumps({"id": ids[j], "text": texts[j]}) + b"\n" for j in range(lo, hi)
                )
                fh.write(block)
                outs[k].write(block)
    for o in outs:
        o.close()


def _interleave(
    base_ids: list[str], base_texts: list[str], ids: list[str], texts: list[str], seed: int
) -> tuple[list[str], list[str]]:
    """``ids``/``texts`` at seeded random positions among the base documents (order kept)."""
    rng = np.random.default_rng(seed + 17)
    total = len(base_ids) + len(ids)
    mark = np.zeros(total, bool)
    mark[rng.choice(total, len(ids), replace=False)] = True
    out_ids: list[str] = []
    out_texts: list[str] = []
    bi = xi = 0
    for m in mark.tolist():
        if m:
            out_ids.append(ids[xi])
            out_texts.append(texts[xi])
            xi += 1
        else:
            out_ids.append(base_ids[bi])
            out_texts.append(base_texts[bi])
            bi += 1
    return out_ids, out_texts


def edit_pairs(data: Path, per_cell: int, seed: int) -> list[dict[str, Any]]:
    """Short-text edit pairs at token similarity 0.8: scattered one-token substitutions in texts
    of 6-40 tokens, en and zh, generated and (when the dev set is there) dev-derived."""
    from study_short_texts import make_pairs, token_sources

    rng = np.random.default_rng(seed + 38)
    out = []
    for lang in ("en", "zh"):
        for source in ("generated", "dev"):
            seqs = token_sources(lang, source, data, rng)
            if not seqs:
                continue
            for n in EDIT_LENGTHS:
                for a, b in make_pairs(seqs, n, 0.8, "scattered", per_cell, rng):
                    k = len(out)
                    out.append(
                        {"a": f"e{k}a", "b": f"e{k}b", "text_a": a, "text_b": b,
                         "lang": lang, "source": source, "tokens": n}
                    )  # fmt: skip
    return out


def build_corpus(kind: str, args: argparse.Namespace) -> Path:
    """The corpus ``kind`` at ``args.n`` in ``args.workdir`` (built once; ``meta.json`` last)."""
    d = args.workdir / f"{kind}-{args.n}-s{args.seed}"
    if (d / "meta.json").exists():
        return d
    shutil.rmtree(d, ignore_errors=True)
    t0 = time.perf_counter()
    meta: dict[str, Any] = {"kind": kind, "n_generated": args.n, "seed": args.seed}
    if kind == "mix":
        from quality_dedup import load_docs, mix_corpus

        if not (args.data / "docs.jsonl").exists():
            raise SystemExit(f"the mix corpus needs the dev set at {args.data}")
        dev_ids, dev_texts, _ = load_docs(args.data / "docs.jsonl")
        ids, texts, planted = mix_corpus(dev_ids, dev_texts, args.n, 0.2, args.seed)
        meta["dev_docs"] = len(dev_ids)
        meta["edit_pairs"] = []
    elif kind == "short":
        from bench_dedup import generate

        got: list[tuple[int, int]] = []
        texts = generate("short", args.n, args.seed, 0.1, got)
        ids = [f"g{i}" for i in range(args.n)]
        planted = [(ids[a], ids[b]) for a, b in got]
        pairs = edit_pairs(args.data, args.edit_pairs, args.seed)
        ex_ids = [x for p in pairs for x in (p["a"], p["b"])]
        ex_texts = [x for p in pairs for x in (p["text_a"], p["text_b"])]
        ids, texts = _interleave(ids, texts, ex_ids, ex_texts, args.seed)
        meta["edit_pairs"] = [
            {k: p[k] for k in ("a", "b", "lang", "source", "tokens")} for p in pairs
        ]
    else:
        raise SystemExit(f"unknown corpus {kind!r}: mix or short")
    meta["docs"] = len(ids)
    meta["planted"] = planted
    _write_jsonl(d / "docs.jsonl", ids, texts, args.shards)
    meta["mb"] = round((d / "docs.jsonl").stat().st_size / 1e6, 1)
    meta["build_s"] = round(time.perf_counter() - t0, 1)
    (d / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    print(f"built {kind}: {len(ids):,} documents, {meta['mb']} MB in {meta['build_s']} s")
    return d


# ---------------------------------------------------------------------------------------------
# running one system


def peer_python(system: str, args: argparse.Namespace) -> str:
    """The interpreter a system runs under: this one for neardup and datasketch (both in the
    project's bench extra), the peer's own venv for datatrove and text-dedup."""
    if system in ("datatrove", "text-dedup"):
        return str(args.peer_venvs / system / "bin" / "python")
    return sys.executable


def install_peers(args: argparse.Namespace) -> None:
    for name, pkgs in PEER_PACKAGES.items():
        venv = args.peer_venvs / name
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *pkgs], check=True)


def command(system: str, corpus: Path, out: Path, args: argparse.Namespace) -> list[str]:
    if system.startswith("neardup"):
        cmd = [
            sys.executable, "-m", "neardup", "dedup", str(corpus / "docs.jsonl"),
            "-o", str(out / "kept.jsonl"), "--pairs-out", str(out / "pairs.csv"),
            "--clusters-out", str(out / "clusters.csv"), "--summary-json", str(out / "summary.json"),
            "--quiet",
        ]  # fmt: skip
        return cmd + (["--workers", "1"] if system == "neardup-w1" else [])
    runner = str(BENCH / "peer_runners.py")
    return [peer_python(system, args), runner, "run", system, str(corpus), str(out)]


class TreeSampler:
    """Peak RSS of a process and its descendants (sum, and the largest one), and the CPU time
    of every process seen in the tree (its last sample), every 0.2 s. The CPU sum catches what
    ``RUSAGE_CHILDREN`` cannot: workers whose parent (a fork server, a pool) is killed rather
    than waited for; it misses what a process spends after its last sample."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_sum = 0
        self.peak_one = 0
        self.max_procs = 0
        self.cpu: dict[tuple[int, float], float] = {}  # (pid, start time) -> user + system
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        rss = []
        for p in procs:
            with contextlib.suppress(psutil.Error):
                rss.append(p.memory_info().rss)
                t = p.cpu_times()
                self.cpu[(p.pid, p.create_time())] = t.user + t.system
        self.peak_sum = max(self.peak_sum, sum(rss))
        self.peak_one = max(self.peak_one, max(rss, default=0))
        self.max_procs = max(self.max_procs, len(rss))

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def measure(cmd: list[str], out: Path, timeout: float, env: dict[str, str]) -> dict[str, Any]:
    """Run ``cmd`` (a new session, stdout/stderr to ``out/log.txt``) and measure it."""
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = os.getloadavg()
    with (out / "log.txt").open("wb") as log:
        t0 = time.perf_counter()
        p = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
        sampler = TreeSampler(p.pid)
        timed_out = False
        try:
            rc = p.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(p.pid, signal.SIGKILL)
            rc = p.wait()
        wall = time.perf_counter() - t0
        sampler.stop()
        with contextlib.suppress(ProcessLookupError):  # nothing of the run may outlive it
            os.killpg(p.pid, signal.SIGKILL)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_waited = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    cpu_sampled = sum(sampler.cpu.values())
    res: dict[str, Any] = {
        "command": cmd,
        "rc": rc,
        "timed_out": timed_out,
        "wall_s": round(wall, 2),
        # both are lower bounds (module docstring): the larger is the process tree's CPU time
        "cpu_s": round(max(cpu_waited, cpu_sampled), 2),
        "cpu_waited_s": round(cpu_waited, 2),
        "cpu_sampled_s": round(cpu_sampled, 2),
        "cpu_user_s": round(ru1.ru_utime - ru0.ru_utime, 2),
        "cpu_sys_s": round(ru1.ru_stime - ru0.ru_stime, 2),
        "peak_rss_tree_mb": round(sampler.peak_sum / 1e6, 1),
        "peak_rss_one_mb": round(sampler.peak_one / 1e6, 1),
        "processes": sampler.max_procs,
        "load_before": [round(x, 2) for x in load0],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    if timed_out and (out / "progress.json").exists():
        res["progress"] = json.loads((out / "progress.json").read_text(encoding="utf-8"))
    if rc != 0 and not timed_out:
        res["log_tail"] = (out / "log.txt").read_text(encoding="utf-8", errors="replace")[-3000:]
    return res


def warm_neardup(corpus: Path, args: argparse.Namespace) -> None:
    """An untimed run on the corpus's first 20,000 lines: numba's disk cache holds every kernel
    before the timed runs (a fresh install compiles once; that is measured elsewhere)."""
    head = args.workdir / "warm.jsonl"
    with (corpus / "docs.jsonl").open("rb") as fh, head.open("wb") as fo:
        for _, line in zip(range(20000), fh, strict=False):
            fo.write(line)
    for extra in ([], ["--workers", "1"]):
        subprocess.run(
            [sys.executable, "-m", "neardup", "dedup", str(head), "-o", os.devnull, "-q", *extra],
            check=True,
        )


# ---------------------------------------------------------------------------------------------
# mapping outputs to decisions, and scoring


def _ids_in_order(corpus: Path) -> list[str]:
    import orjson

    with (corpus / "docs.jsonl").open("rb") as fh:
        return [orjson.loads(line)["id"] for line in fh]


def load_output(system: str, corpus: Path, out: Path) -> dict[str, Any]:
    """``kept`` (set of ids), and ``pairs`` (list of id pairs) and/or ``groups`` (id -> group)."""
    res: dict[str, Any] = {"pairs": None, "groups": None}
    if system.startswith("neardup"):
        with (out / "pairs.csv").open(encoding="utf-8", newline="") as fh:
            res["pairs"] = [(r["id_a"], r["id_b"]) for r in csv.DictReader(fh)]
        kept, groups = set(), {}
        with (out / "clusters.csv").open(encoding="utf-8", newline="") as fh:
            for r in csv.DictReader(fh):
                if r["kept"] in ("1", "true", "True"):
                    kept.add(r["id"])
                if int(r["cluster_size"]) > 1:
                    groups[r["id"]] = r["cluster"]
        res["kept"], res["groups"] = kept, groups
        res["mapping"] = (
            "pairs: --pairs-out (exact + verified near pairs); clusters: --clusters-out"
        )
    elif system == "datasketch":
        order = _ids_in_order(corpus)
        pos = {x: i for i, x in enumerate(order)}
        later: dict[int, list[int]] = {}
        pairs = []
        with (out / "pairs.tsv").open(encoding="utf-8") as fh:
            for line in fh:
                a, b = line.rstrip("\n").split("\t")
                pairs.append((a, b))
                i, j = sorted((pos[a], pos[b]))
                later.setdefault(i, []).append(j)
        dropped = np.zeros(len(order), bool)
        for i in range(len(order)):  # keep-first over the candidate pairs
            if not dropped[i]:
                for j in later.get(i, ()):
                    dropped[j] = True
        res["kept"] = {order[i] for i in np.flatnonzero(~dropped).tolist()}
        res["pairs"] = pairs
        res["mapping"] = (
            "pairs: every pair a query returned (unverified candidates); kept: keep-first over them"
        )
    else:
        with (out / "kept.txt").open(encoding="utf-8") as fh:
            res["kept"] = {ln.rstrip("\n") for ln in fh}
        with (out / "groups.tsv").open(encoding="utf-8") as fh:
            res["groups"] = dict(ln.rstrip("\n").split("\t", 1) for ln in fh)
        res["mapping"] = "a pair counts as reported when both ids are in one of its clusters"
    return res


def _found(pairs: list[tuple[str, str]], output: dict[str, Any], how: str) -> np.ndarray:
    if how == "pairs":
        got = {(min(a, b), max(a, b)) for a, b in output["pairs"]}
        return np.array([(min(a, b), max(a, b)) in got for a, b in pairs], bool)
    g = output["groups"]
    return np.array([a in g and g.get(a) == g.get(b) for a, b in pairs], bool)


def score(system: str, corpus: Path, out: Path, dev: dict[str, Any] | None) -> dict[str, Any]:
    from neardup.batch.evaluate import score_reported

    meta = json.loads((corpus / "meta.json").read_text(encoding="utf-8"))
    output = load_output(system, corpus, out)
    res: dict[str, Any] = {
        "mapping": output["mapping"],
        "kept": len(output["kept"]),
        "removed": meta["docs"] - len(output["kept"]),
    }
    hows = [h for h in ("pairs", "groups") if output[h] is not None]
    if output["groups"] is not None:
        sizes: dict[str, int] = {}
        for gid in output["groups"].values():
            sizes[gid] = sizes.get(gid, 0) + 1
        res["clusters"] = len(sizes)
        res["docs_in_clusters"] = len(output["groups"])
        res["largest_cluster"] = max(sizes.values(), default=0)
    if output["pairs"] is not None:
        res["pairs"] = len(output["pairs"])
    for how in hows:
        key = "" if how == hows[0] else f"_{how}"
        if dev is not None:
            labels = dev["labels"]
            if how == "pairs":
                s = score_reported(output["pairs"], labels, dev["langs"], dev["lengths"])
            else:
                keys = list(labels)
                same = _found(keys, output, "groups")
                s = score_reported(
                    [k for k, f in zip(keys, same.tolist(), strict=True) if f],
                    labels, dev["langs"], dev["lengths"],
                )  # fmt: skip
                s.pop("reported", None)
                s.pop("unlabeled", None)
            res[f"dev{key}"] = s
        planted = [tuple(p) for p in meta["planted"]]
        if planted:
            res[f"planted_recall{key}"] = round(float(_found(planted, output, how).mean()), 4)
        if meta["edit_pairs"]:
            ep = meta["edit_pairs"]
            f = _found([(p["a"], p["b"]) for p in ep], output, how)
            by = {}
            for lang in ("en", "zh"):
                sel = np.array([p["lang"] == lang for p in ep])
                by[lang] = round(float(f[sel].mean()), 4) if sel.any() else None
            by_len = {}
            for n in EDIT_LENGTHS:
                sel = np.array([p["tokens"] == n for p in ep])
                by_len[str(n)] = round(float(f[sel].mean()), 4) if sel.any() else None
            res[f"edit_recall{key}"] = {
                "all": round(float(f.mean()), 4),
                **by,
                "by_tokens": by_len,
                "pairs": len(ep),
            }
    return res


def dev_labels(data: Path) -> dict[str, Any]:
    from quality_dedup import load_docs

    from neardup.batch.evaluate import load_labels

    ids, texts, langs = load_docs(data / "docs.jsonl")
    return {
        "labels": load_labels(data / "pairs.csv"),
        "langs": langs,
        "lengths": {i: len(t) for i, t in zip(ids, texts, strict=True)},
    }


# ---------------------------------------------------------------------------------------------
# the table


def _f(x: Any, fmt: str = "{:.4f}") -> str:
    return "-" if x is None else fmt.format(x)


def targets(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Speed-ups against the fastest peer that finished (a peer stopped at the time limit counts
    with its limit: a lower bound on its time; a peer that failed does not count), and the
    quality targets."""
    out: dict[str, Any] = {}
    peers = {
        k: v for k, v in runs.items()
        if k in PEERS and "wall_s" in v and (v.get("rc") == 0 or v.get("timed_out"))
    }  # fmt: skip
    failed = sorted(k for k, v in runs.items() if k in PEERS and k not in peers and "wall_s" in v)
    if failed:
        out["failed_peers"] = failed
    fastest = min(peers.items(), key=lambda kv: kv[1]["wall_s"], default=None)
    if fastest is not None:
        out["fastest_peer"] = fastest[0]
        out["fastest_peer_wall_s"] = fastest[1]["wall_s"]
        out["fastest_peer_timed_out"] = fastest[1]["timed_out"]
        for name, want in (("neardup", 10.0), ("neardup-w1", 5.0)):
            r = runs.get(name)
            if r and r.get("rc") == 0:
                ratio = fastest[1]["wall_s"] / r["wall_s"]
                out[f"{name}_speedup"] = round(ratio, 2)
                out[f"{name}_speedup_target"] = want
                out[f"{name}_speedup_met"] = ratio >= want
                fastest_cpu = min(v["cpu_s"] for v in peers.values())
                out[f"{name}_cpu_ratio"] = round(fastest_cpu / max(r["cpu_s"], 1e-9), 2)
    nd = runs.get("neardup", {})
    if "dev" in nd:
        out["dev_f1"] = nd["dev"]["overall"]["f1"]
        ref = BENCH / "results" / "quality_dedup_mix1000000.json"
        if ref.exists():
            old = json.loads(ref.read_text(encoding="utf-8"))["results"]["neardup (defaults)"]
            out["dev_f1_committed_1m"] = old["overall"]["f1"]
            out["dev_f1_met"] = abs(out["dev_f1"] - old["overall"]["f1"]) <= 0.001
    if "edit_recall" in nd:
        out["edit_recall"] = nd["edit_recall"]["all"]
        out["edit_recall_met"] = nd["edit_recall"]["all"] >= 0.99
    return out


def print_table(doc: dict[str, Any]) -> None:
    hdr = (
        f"{'corpus':<6} {'system':<11} {'wall s':>8} {'CPU s':>8} {'CPU µs/doc':>10} "
        f"{'RSS MB':>8} {'kept':>9} {'dev P':>7} {'dev R':>7} {'dev F1':>7} {'edit R':>7} "
        f"{'planted R':>9} {'x neardup':>9}"
    )
    print(hdr)
    for kind, runs in doc["runs"].items():
        docs = doc["corpora"][kind]["docs"]
        base = runs.get("neardup", {}).get("wall_s")
        for name in SYSTEMS:
            r = runs.get(name)
            if r is None:
                continue
            dev = (r.get("dev") or {}).get("overall", {})
            edit = (r.get("edit_recall") or {}).get("all")
            wall = f"{r['wall_s']:.1f}" + ("+" if r.get("timed_out") else "")
            status = (
                "" if r.get("rc") == 0 or r.get("timed_out") else f"  (failed: rc {r.get('rc')})"
            )
            print(
                f"{kind:<6} {name:<11} {wall:>8} {r['cpu_s']:>8.1f} "
                f"{1e6 * r['cpu_s'] / docs:>10.1f} {r['peak_rss_tree_mb']:>8.0f} "
                f"{_f(r.get('kept'), '{:,}'):>9} {_f(dev.get('precision')):>7} "
                f"{_f(dev.get('recall')):>7} {_f(dev.get('f1')):>7} {_f(edit):>7} "
                f"{_f(r.get('planted_recall')):>9} "
                f"{_f(r['wall_s'] / base if base else None, '{:.1f}'):>9}{status}"
            )
        t = doc.get("targets", {}).get(kind)
        if t:
            print(f"       targets: {json.dumps(t)}")


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="generated documents per corpus")
    ap.add_argument("--corpora", default="mix,short")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--edit-pairs", type=int, default=50, help="per language, source and length")
    ap.add_argument("--shards", type=int, default=os.cpu_count() or 1, help="files for datatrove")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per run")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "dev")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/neardup-peers"))
    ap.add_argument("--peer-venvs", type=Path, default=ROOT.parent / "peer-venvs")
    ap.add_argument("--install-peers", action="store_true", help="make the peer venvs, then stop")
    ap.add_argument("--resume", action="store_true", help="keep the runs already in --out")
    ap.add_argument("--keep-outputs", action="store_true", help="keep each run's output folder")
    ap.add_argument("--out", type=Path, default=BENCH / "results" / "bench_dedup_peers.json")
    args = ap.parse_args(argv)
    if args.install_peers:
        install_peers(args)
        return
    args.workdir.mkdir(parents=True, exist_ok=True)
    systems = [s for s in args.systems.split(",") if s]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        raise SystemExit(f"unknown systems {sorted(unknown)}; choose from {', '.join(SYSTEMS)}")
    doc: dict[str, Any] = {}
    if args.resume and args.out.exists():
        doc = json.loads(args.out.read_text(encoding="utf-8"))
        if doc.get("n") != args.n or doc.get("seed") != args.seed:
            doc = {}
    invocation = "python benchmarks/bench_dedup.py --peers " + " ".join(argv or sys.argv[2:])
    # every invocation whose runs the file holds (--resume adds its runs to the earlier ones')
    earlier = doc.get("commands", [doc["command"]] if "command" in doc else [])
    doc["commands"] = [*earlier, invocation]
    doc.update(
        {
            "command": invocation,
            "n": args.n,
            "seed": args.seed,
            "machine": machine(),
            "peer_versions": peer_versions(args),
            "note": "figures measured on a shared machine: see each run's load_before/after",
        }
    )
    doc.setdefault("corpora", {})
    doc.setdefault("runs", {})
    doc.setdefault("targets", {})
    dev = dev_labels(args.data) if (args.data / "docs.jsonl").exists() else None
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    for kind in args.corpora.split(","):
        corpus = build_corpus(kind, args)
        meta = json.loads((corpus / "meta.json").read_text(encoding="utf-8"))
        doc["corpora"][kind] = {
            k: meta[k] for k in ("docs", "mb", "n_generated", "build_s") if k in meta
        } | {"edit_pairs": len(meta["edit_pairs"]), "planted": len(meta["planted"]),
             "dev_docs": meta.get("dev_docs", 0)}  # fmt: skip
        runs = doc["runs"].setdefault(kind, {})
        if any(s.startswith("neardup") for s in systems):
            warm_neardup(corpus, args)
        for system in systems:
            if args.resume and system in runs and runs[system].get("rc") == 0:
                continue
            out = args.workdir / "runs" / f"{kind}-{system}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            os.sync()  # earlier runs' dirty pages written back now, not during this one
            print(f"{kind}: {system} ...", flush=True)
            r = measure(command(system, corpus, out, args), out, args.timeout, env)
            if r["rc"] == 0 and not r["timed_out"]:
                if system in ("datatrove", "text-dedup"):
                    subprocess.run(
                        [peer_python(system, args), str(BENCH / "peer_runners.py"), "export",
                         system, str(corpus), str(out)],
                        check=True, env=env,
                    )  # fmt: skip
                r.update(score(system, corpus, out, dev if kind == "mix" else None))
                if system.startswith("neardup"):
                    s = json.loads((out / "summary.json").read_text(encoding="utf-8"))
                    r["summary"] = {
                        k: s.get(k)
                        for k in ("elapsed_s", "timings_s", "lsh", "candidates", "verified",
                                  "kernel_compile_s", "warnings", "pairs")
                    }  # fmt: skip
                    r["summary"]["workers"] = s["config"]["workers"]
            r["harness_command"] = invocation
            runs[system] = r
            doc["targets"][kind] = targets(runs)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
            print(
                f"   {system}: wall {r['wall_s']} s, CPU {r['cpu_s']} s, RSS {r['peak_rss_tree_mb']} MB"
                + (" (timed out)" if r["timed_out"] else "")
                + ("" if r["rc"] == 0 or r["timed_out"] else f" FAILED rc {r['rc']}"),
                flush=True,
            )
            if not args.keep_outputs:
                shutil.rmtree(out, ignore_errors=True)
    doc["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print_table(doc)
    print(f"wrote {args.out}")


def peer_versions(args: argparse.Namespace) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name, dist in (("datasketch", "datasketch"), ("datatrove", "datatrove"),
                       ("text-dedup", "text-dedup"), ("neardup", "neardup")):  # fmt: skip
        py = peer_python(name, args)
        try:
            proc = subprocess.run(
                [py, "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            out[name] = proc.stdout.strip() or None
        except OSError:
            out[name] = None
    return out


if __name__ == "__main__":
    main()
