"""Helpers to run a cluster of real processes in tests and benchmarks, and to check its history.

* :class:`RouterProcess` -- ``python -m neardup cluster router`` in a child process.
* :class:`LocalCluster` -- N ``neardup serve`` processes (:class:`~neardup.service.testing.
  ServerProcess`) on loopback, a cluster file and a router; kill (SIGKILL), pause (SIGSTOP),
  resume and restart nodes; the router's threads, memory and descriptors.
* :class:`Workload` -- writers through the router: near-duplicate pairs in one batch (B = A
  with ~8 % of its words replaced; long, short and Chinese), batches of new documents, deletes
  of acknowledged ones; every acknowledgement and latency is recorded in a :class:`History`.
* :func:`check_history` -- what the nodes hold afterwards against what was acknowledged:
  inserts lost, deletes back (on any node or through the router), pairs with both kept.

Used by tests/cluster/test_cluster_faults.py (CI) and benchmarks/faults_cluster.py.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import NeardupError, NotFoundError, ServiceUnavailableError
from ..service.testing import ServerProcess, free_port, wait_healthy
from .config import ClusterConfig, NodeSpec

__all__ = ["History", "LocalCluster", "RouterProcess", "Workload", "check_history", "proc_stats"]

_WORDS = [f"{a}{b}" for a in ("ka", "lo", "mi", "ne", "su", "ta", "vo", "ri") for b in range(500)]
_HAN = [chr(0x4E00 + k) for k in range(2000)]


def proc_stats(pid: int) -> dict[str, int]:
    """Threads, resident bytes and open descriptors of a process (Linux /proc)."""
    out = {"threads": 0, "rss_bytes": 0, "fds": 0}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Threads:"):
                    out["threads"] = int(line.split()[1])
                elif line.startswith("VmRSS:"):
                    out["rss_bytes"] = int(line.split()[1]) * 1024
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, ValueError):
        pass
    return out


class RouterProcess:
    """``python -m neardup cluster router`` in a child process on a free loopback port."""

    def __init__(
        self,
        cluster_file: Path,
        *,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.cluster_file = Path(cluster_file)
        self.args = list(args or [])
        self.env = dict(env or {})
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> None:
        cmd = [
            sys.executable, "-m", "neardup", "cluster", "router", "-c", str(self.cluster_file),
            "--port", str(self.port), "--log-level", "warning", *self.args,
        ]  # fmt: skip
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, **self.env}
        )
        atexit.register(_kill, self.proc)
        try:
            wait_healthy(self.url, timeout, proc=self.proc)
        except ServiceUnavailableError as exc:
            self.stop()
            raise ServiceUnavailableError(f"{exc}; router log:\n{self.log()}") from None

    def log(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return str(self._log.read().decode("utf-8", "replace"))

    def stats(self) -> dict[str, int]:
        return proc_stats(self.proc.pid) if self.proc is not None else {}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.wait(10)


class LocalCluster:
    """``n`` nodes and a router on loopback, in ``root`` (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        n: int = 3,
        *,
        replicas: int = 2,
        token: str = "cluster-faults",
        node_args: list[str] | None = None,
        router_args: list[str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.token = token
        env = {"NEARDUP_TOKEN": token}
        self.nodes = [
            ServerProcess(self.root / f"n{i}", args=node_args or [], env=env) for i in range(n)
        ]
        self.config = ClusterConfig(
            tuple(NodeSpec(f"n{i}", p.url) for i, p in enumerate(self.nodes)), replicas=replicas
        )
        self.cluster_file = self.root / "cluster.toml"
        self.router = RouterProcess(self.cluster_file, args=router_args, env=env)
        self.paused: set[int] = set()

    def start(self, timeout: float = 180.0) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.config.save(self.cluster_file)
        for p in self.nodes:
            p.start(wait=False)
        for p in self.nodes:
            assert p.proc is not None
            wait_healthy(p.url, timeout, proc=p.proc)
        self.router.start(timeout)

    def kill(self, i: int) -> None:
        self.nodes[i].kill()

    def restart(self, i: int, timeout: float = 180.0) -> float:
        return self.nodes[i].start(timeout)

    def pause(self, i: int) -> None:
        proc = self.nodes[i].proc
        assert proc is not None
        proc.send_signal(signal.SIGSTOP)
        self.paused.add(i)

    def resume(self, i: int) -> None:
        proc = self.nodes[i].proc
        assert proc is not None
        proc.send_signal(signal.SIGCONT)
        self.paused.discard(i)

    def health(self) -> dict[str, Any]:
        import httpx

        try:
            auth = {"Authorization": f"Bearer {self.token}"}
            return dict(httpx.get(self.router.url + "/healthz", headers=auth, timeout=10).json())
        except (httpx.HTTPError, ValueError):
            return {}

    def wait_settled(self, timeout: float = 60.0) -> bool:
        """Until the router uses every node again and holds no hints."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            h = self.health()
            if h and all(s == "closed" for s in h.get("nodes", {}).values()) and not h["hints"]:
                return True
            time.sleep(0.2)
        return False

    def exports(self) -> list[dict[str, dict[str, Any]]]:
        """Every node's stored documents (id -> record), through their export pages."""
        import httpx

        out = []
        for p in self.nodes:
            docs: dict[str, dict[str, Any]] = {}
            after = ""
            with httpx.Client(
                base_url=p.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=60
            ) as h:
                while True:
                    page = h.get("/v1/export", params={"after": after, "limit": 10000}).json()
                    docs.update({d["id"]: d for d in page["documents"]})
                    if page["next"] is None:
                        break
                    after = page["next"]
            out.append(docs)
        return out

    def close(self) -> None:
        for i in list(self.paused):
            self.resume(i)
        self.router.stop()
        for p in self.nodes:
            p.kill()


# -- the workload --------------------------------------------------------------------------------
def _text(rng: random.Random, kind: str) -> tuple[list[str], str]:
    if kind == "zh":
        return [rng.choice(_HAN) for _ in range(80)], ""
    n = 12 if kind == "short" else 60
    return [rng.choice(_WORDS) for _ in range(n)], " "


def _edited(rng: random.Random, toks: list[str], kind: str) -> list[str]:
    pool = _HAN if kind == "zh" else _WORDS
    out = list(toks)
    for k in rng.sample(range(len(out)), max(1, round(0.08 * len(out)))):
        out[k] = rng.choice(pool)
    return out


@dataclass
class History:
    """What the router acknowledged, and how long each write took."""

    inserted: set[str] = field(default_factory=set)  # acknowledged and kept
    decided: int = 0  # documents of acknowledged writes (kept or reported duplicate)
    deleted: set[str] = field(default_factory=set)  # acknowledged deletes
    uncertain: set[str] = field(default_factory=set)  # a write that failed: either outcome
    pairs: list[tuple[str, str, bool, bool]] = field(default_factory=list)  # ids, added flags
    writes: list[tuple[float, float, str]] = field(default_factory=list)  # (start, s, kind)
    errors: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def acknowledged(self) -> int:
        """Acknowledged operations: every decided document of a write, and every delete."""
        return self.decided + len(self.deleted)

    def latencies(self, since: float, until: float) -> list[float]:
        """Seconds of the writes that were in flight at some point in [since, until]."""
        return [s for t, s, _ in self.writes if t <= until and t + s >= since]


class Workload:
    """``threads`` writers through the router until :meth:`stop` (see the module docstring).

    Each round: a near-duplicate pair in one ``check-and-insert`` batch (exactly one must be
    kept), a batch of ``batch`` new documents, and now and then a delete of an acknowledged
    document.
    """

    def __init__(
        self, url: str, token: str, *, threads: int = 2, batch: int = 8, seed: int = 1
    ) -> None:
        self.url = url
        self.token = token
        self.history = History()
        self.batch = batch
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(seed + k, k), daemon=True)
            for k in range(threads)
        ]
        self._deletable: list[str] = []

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> History:
        self._stop.set()
        for t in self._threads:
            t.join(120)
        return self.history

    def _timed(self, kind: str, fn: Any) -> Any:
        t = time.time()
        p = time.perf_counter()
        try:
            return fn()
        finally:
            with self.history.lock:
                self.history.writes.append((t, time.perf_counter() - p, kind))

    def _run(self, seed: int, k: int) -> None:
        from ..service.client import Client

        rng = random.Random(seed)
        h = self.history
        n = 0
        with Client(self.url, token=self.token, timeout=60.0) as c:
            while not self._stop.is_set():
                n += 1
                kind = ("long", "short", "zh")[n % 3]
                a, sep = _text(rng, kind)
                ids = [f"p{k}-{n}-a", f"p{k}-{n}-b"]
                pair = [
                    {"id": ids[0], "text": sep.join(a)},
                    {"id": ids[1], "text": sep.join(_edited(rng, a, kind))},
                ]
                try:
                    got = self._timed("pair", lambda pair=pair: c.check_and_insert(pair))
                except NeardupError as exc:
                    self._failed(ids, exc)
                else:
                    with h.lock:
                        h.pairs.append((ids[0], ids[1], got[0].added, got[1].added))
                        h.decided += 2
                        h.inserted.update(d.id for d in got if d.added)
                docs = []
                for j in range(self.batch):
                    toks, sep = _text(rng, ("long", "short", "zh")[(n + j) % 3])
                    docs.append({"id": f"s{k}-{n}-{j}", "text": sep.join(toks)})
                try:
                    got = self._timed("batch", lambda docs=docs: c.check_and_insert(docs))
                except NeardupError as exc:
                    self._failed([d["id"] for d in docs], exc)
                else:
                    with h.lock:
                        h.decided += len(got)
                        for d in got:
                            if d.added:
                                h.inserted.add(d.id)
                                self._deletable.append(d.id)
                if n % 3 == 0:
                    with h.lock:
                        victim = (
                            self._deletable.pop(rng.randrange(len(self._deletable)))
                            if self._deletable
                            else None
                        )
                    if victim is None:
                        continue
                    try:
                        self._timed("delete", lambda v=victim: c.delete(v))
                    except NotFoundError:
                        with h.lock:
                            h.errors["delete_not_found"] += 1
                    except NeardupError as exc:
                        self._failed([victim], exc)
                    else:
                        with h.lock:
                            h.deleted.add(victim)

    def _failed(self, ids: list[str], exc: Exception) -> None:
        with self.history.lock:
            self.history.errors[type(exc).__name__] += 1
            self.history.uncertain.update(ids)


def check_history(cluster: LocalCluster, history: History) -> dict[str, Any]:
    """Compare what the nodes hold (after the cluster settled) with what was acknowledged."""
    from ..service.client import Client

    held = cluster.exports()
    anywhere: set[str] = set().union(*held)
    settled = history.inserted - history.deleted - history.uncertain
    lost = sorted(i for i in settled if i not in anywhere)
    deleted = history.deleted - history.uncertain
    back_on_nodes = sorted(i for i in deleted if i in anywhere)
    back_routed = []
    with Client(cluster.router.url, token=cluster.token, timeout=60.0) as c:
        for i in sorted(deleted):
            try:
                c.get(i)
            except NotFoundError:
                continue
            back_routed.append(i)
    both_answered = sum(a and b for _, _, a, b in history.pairs)
    both_stored = sum(a in anywhere and b in anywhere for a, b, _, _ in history.pairs)
    none_kept = sum(not a and not b for _, _, a, b in history.pairs)
    under = sum(
        sum(i in node for node in held) < cluster.config.replicas for i in settled if i in anywhere
    )
    return {
        "acknowledged_operations": history.acknowledged,
        "acknowledged_inserts": len(settled),
        "inserts_found": len(settled) - len(lost),
        "inserts_lost": len(lost),
        "lost_examples": lost[:5],
        "acknowledged_deletes": len(deleted),
        "deletes_back_on_a_node": len(back_on_nodes),
        "deletes_back_through_router": len(back_routed),
        "back_examples": (back_on_nodes + back_routed)[:5],
        "pairs": len(history.pairs),
        "pairs_kept_both_answered": both_answered,
        "pairs_kept_both_stored": both_stored,
        "pairs_kept_none": none_kept,
        "documents_under_replicated": under,
        "failed_writes": dict(history.errors),
    }
