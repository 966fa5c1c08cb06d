"""Reliability of the real server process (``python -m neardup serve``), at CI sizes.

* SIGKILL during sustained inserts, restart, every acknowledged insert is there (several cycles),
  and SIGTERM during inserts drains, flushes and exits 0;
* bytes flipped in the log (tail and middle) and in a segment: recovered, or refused with a
  clear message (non-zero exit, file named on stderr, no traceback);
* 1,000 concurrent near-duplicate pairs: exactly one kept per pair;
* garbage on the socket and unauthenticated writes: refused, server stays up.

Set ``NEARDUP_RELIABILITY_CYCLES`` to run more kill cycles than the CI default.
"""

from __future__ import annotations

import os
import random
import socket
import string
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from neardup.service.testing import ServerProcess  # noqa: E402

CYCLES = int(os.environ.get("NEARDUP_RELIABILITY_CYCLES", "3"))
TOKEN = "reliability-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module", autouse=True)
def _warm_jit_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Compile (or load) the numba kernels once here, so server processes start from the cache.

    Exercises the paths a server uses: fingerprints, memtable and segment search, flush.
    """
    from neardup.online.deduplicator import Deduplicator

    rng = random.Random(0)
    with Deduplicator.open(tmp_path_factory.mktemp("warm")) as d:
        docs = [{"id": f"w{i}", "text": random_text(rng)} for i in range(64)]
        d.check_and_add(docs)
        d.check(docs[:8])
        d.flush()
        d.check(docs[:8])
        d.check({"id": "zh", "text": "预热 中文 文本"})


@pytest.fixture(autouse=True)
def _no_server_left_behind(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Kill every server a test started, also when the test fails."""
    started: list[ServerProcess] = []
    original = ServerProcess.start

    def tracking_start(self: ServerProcess, *args: Any, **kwargs: Any) -> float:
        started.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ServerProcess, "start", tracking_start)
    yield
    for srv in started:
        srv.kill()


def random_text(rng: random.Random, n: int = 30) -> str:
    return " ".join(
        "".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 10))) for _ in range(n)
    )


class Writer(threading.Thread):
    """Posts batches to /v1/check-and-insert until stopped or the server goes away."""

    def __init__(self, url: str, seed: int, batch: int = 8) -> None:
        super().__init__(daemon=True)
        self.url, self.rng, self.batch = url, random.Random(seed), batch
        self.prefix = f"w{seed}-"
        self.acked: dict[str, str] = {}  # id -> text, added and acknowledged
        self.unknown: dict[str, str] = {}  # sent, no answer (server killed mid-request)
        self.stop_flag = threading.Event()
        self.n = 0

    def run(self) -> None:
        with httpx.Client(base_url=self.url, headers=AUTH, timeout=30) as c:
            while not self.stop_flag.is_set():
                docs = []
                for _ in range(self.batch):
                    self.n += 1
                    docs.append({"id": f"{self.prefix}{self.n}", "text": random_text(self.rng)})
                try:
                    r = c.post("/v1/check-and-insert", json={"documents": docs})
                except httpx.TransportError:
                    self.unknown.update((d["id"], d["text"]) for d in docs)
                    return
                assert r.status_code == 200, r.text
                texts = {d["id"]: d["text"] for d in docs}
                for res in r.json()["results"]:
                    if res["added"]:
                        self.acked[res["id"]] = texts[res["id"]]


def assert_all_present(url: str, acked: dict[str, str], unknown: dict[str, str]) -> None:
    """Every acknowledged document is found by a check on its own text (and by GET)."""
    items = list(acked.items())
    with httpx.Client(base_url=url, headers=AUTH, timeout=60) as c:
        for i in range(0, len(items), 500):
            chunk = items[i : i + 500]
            r = c.post("/v1/check", json={"documents": [{"id": k, "text": t} for k, t in chunk]})
            assert r.status_code == 200, r.text
            for (doc_id, _), res in zip(chunk, r.json()["results"], strict=True):
                assert any(m["id"] == doc_id for m in res["matches"]), f"acknowledged {doc_id} lost"
        for doc_id, text in random.Random(0).sample(items, min(25, len(items))):
            got = c.get(f"/v1/docs/{doc_id}")
            assert got.status_code == 200 and got.json()["text"] == text, doc_id
        count = c.get("/healthz").json()["documents"]
    assert len(acked) <= count <= len(acked) + len(unknown), (count, len(acked), len(unknown))


def run_writers(url: str, seeds: list[int]) -> list[Writer]:
    writers = [Writer(url, s) for s in seeds]
    for w in writers:
        w.start()
    return writers


def test_sigkill_cycles_lose_no_acknowledged_insert(tmp_path: Path) -> None:
    rng = random.Random(1234)
    srv = ServerProcess(tmp_path / "data", env={"NEARDUP_TOKEN": TOKEN})
    acked: dict[str, str] = {}
    unknown: dict[str, str] = {}
    for cycle in range(CYCLES):
        srv.start()
        if acked:
            assert_all_present(srv.url, acked, unknown)
        writers = run_writers(srv.url, [cycle * 10 + 1, cycle * 10 + 2])
        # kill mid-stream: once inserts are being acknowledged (a loaded machine can take a
        # while for the first one), then at a random moment
        wait_until = time.monotonic() + 30
        while not any(w.acked for w in writers) and time.monotonic() < wait_until:
            time.sleep(0.02)
        time.sleep(rng.uniform(0.05, 0.6))
        srv.kill()
        for w in writers:
            w.stop_flag.set()
            w.join(30)
            acked.update(w.acked)
            unknown.update(w.unknown)
        assert "Traceback" not in srv.last_stderr, srv.last_stderr
    assert len(acked) > 0
    # a last cycle with SIGTERM: in-flight requests drain, stores flush, exit code 0
    srv.start()
    writers = run_writers(srv.url, [999])
    time.sleep(0.5)
    rc = srv.stop()
    for w in writers:
        w.stop_flag.set()
        w.join(30)
        acked.update(w.acked)
        unknown.update(w.unknown)
    assert rc == 0, srv.last_stderr
    srv.start()
    assert_all_present(srv.url, acked, unknown)
    srv.stop()


def _records_end(path: Path) -> int:
    """Where a killed server's log records end (the zeros after them are preallocated space,
    see neardup/store/wal.py)."""
    return len(path.read_bytes().rstrip(b"\x00"))


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def _fill(srv: ServerProcess, n_batches: int, seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    out: dict[str, str] = {}
    with httpx.Client(base_url=srv.url, headers=AUTH, timeout=30) as c:
        for b in range(n_batches):
            docs = [{"id": f"f{seed}-{b}-{i}", "text": random_text(rng)} for i in range(5)]
            r = c.post("/v1/check-and-insert", json={"documents": docs})
            assert r.status_code == 200
            out.update((d["id"], d["text"]) for d in docs)
    return out


def _clear_refusal(srv: ServerProcess, needle: str) -> None:
    rc = srv.wait(180)
    assert rc == 6, f"a damaged store must be refused with exit code 6 (bad format), got {rc}"
    err = srv.last_stderr
    assert "Traceback" not in err, err
    assert "neardup: error:" in err and needle in err, err


def test_flipped_log_bytes_are_detected(tmp_path: Path) -> None:
    data = tmp_path / "data"
    srv = ServerProcess(data, env={"NEARDUP_TOKEN": TOKEN})
    srv.start()
    docs = _fill(srv, 20, seed=7)
    ns = data / "namespaces" / "default"
    # SQLite's applier runs behind the acknowledgements: wait until it holds every row (the
    # repair below must keep them), or a loaded machine kills it with only the log's copy
    _wait_applied(ns, len(docs))
    srv.kill()  # leave everything in the log (no flush to segments)
    (wal,) = sorted(ns.glob("wal-*.log"))
    size = _records_end(wal)
    assert size > 1000

    # damage in the middle of the log (valid records follow) that SQLite had not applied yet
    # (its applier lags: simulated by lowering the applied position): refused, file named
    held = _set_applied(ns, 0)
    _flip(wal, size // 2)
    srv.start(wait=False)
    _clear_refusal(srv, wal.name)
    # the operator can choose to repair: the log is cut at the damage, every row SQLite still
    # holds is kept, the server comes up
    repaired = ServerProcess(data, env={"NEARDUP_TOKEN": TOKEN}, args=["--repair"], port=srv.port)
    repaired.start()
    with httpx.Client(base_url=repaired.url, headers=AUTH) as c:
        kept = c.get("/healthz").json()["documents"]
        assert held <= kept <= len(docs) and kept > len(docs) // 2
    _fill(repaired, 3, seed=8)
    repaired.kill()

    # damage in the very last record: restored from SQLite when SQLite had applied it (it was
    # acknowledged), else a torn tail, truncated; either way the server comes up
    (wal,) = sorted(ns.glob("wal-*.log"))
    _flip(wal, _records_end(wal) - 3)
    srv.start()
    with httpx.Client(base_url=srv.url, headers=AUTH) as c:
        h = c.get("/healthz").json()
        assert h["status"] == "ok" and kept + 10 <= h["documents"] <= kept + 15
    srv.stop()


def _wait_applied(ns: Path, n: int, timeout: float = 60.0) -> None:
    """Wait until SQLite holds ``n`` rows (read-only, beside the running server)."""
    import sqlite3

    deadline = time.monotonic() + timeout
    while True:
        db = sqlite3.connect(f"file:{ns / 'meta.sqlite3'}?mode=ro", uri=True)
        try:
            (held,) = db.execute("SELECT count(*) FROM docs").fetchone()
        finally:
            db.close()
        if held >= n or time.monotonic() > deadline:
            assert held >= n, f"SQLite applied {held} of {n} rows in {timeout} s"
            return
        time.sleep(0.05)


def _set_applied(ns: Path, offset: int) -> int:
    """Lower SQLite's record of how far it applied the log (as if its applier lagged); returns
    the rows SQLite holds."""
    import sqlite3

    db = sqlite3.connect(str(ns / "meta.sqlite3"))
    db.execute("UPDATE wal_applied SET offset = ?", (offset,))
    (held,) = db.execute("SELECT count(*) FROM docs").fetchone()
    db.commit()
    db.close()
    return int(held)


def test_flipped_segment_byte_is_refused(tmp_path: Path) -> None:
    import numpy as np

    from neardup.online.deduplicator import Deduplicator

    data = tmp_path / "data"
    ns = data / "namespaces" / "default"
    ns.mkdir(parents=True)
    rng = np.random.default_rng(0)
    with Deduplicator.open(ns) as d:
        d.bulk_load([f"b{i}" for i in range(2000)], rng.integers(0, 2**63, 2000, dtype=np.uint64))
    srv = ServerProcess(data)
    (seg,) = sorted(ns.glob("seg-*.nds"))
    _flip(seg, seg.stat().st_size // 2)
    srv.start(wait=False)
    _clear_refusal(srv, seg.name)


def _pair_texts(n: int, seed: int) -> list[tuple[str, str]]:
    """Near-duplicate pairs: a case/whitespace variant, or one word changed in a long text."""
    from neardup import Fingerprinter
    from neardup.fingerprint.distance import hamming
    from neardup.verify.rule import Verifier

    fp, ver = Fingerprinter(), Verifier()
    rng = random.Random(seed)
    pairs: list[tuple[str, str]] = []
    while len(pairs) < n:
        a = random_text(rng, 120)
        if len(pairs) % 2 == 0:
            b = "  " + a.upper().replace(" ", "   ") + " "
        else:
            words = a.split()
            words[rng.randrange(len(words))] = "changed"
            b = " ".join(words)
            dist = int(hamming(fp.fingerprint(a), fp.fingerprint(b)))
            if dist > 3 or not ver.verify(a, b, dist)[0]:
                continue
        pairs.append((a, b))
    return pairs


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One server (token from the environment) shared by the tests below."""
    srv = ServerProcess(tmp_path_factory.mktemp("live"), env={"NEARDUP_TOKEN": TOKEN})
    srv.start()
    yield srv
    assert srv.stop() == 0
    assert "Traceback" not in srv.last_stderr, srv.last_stderr


def test_concurrent_near_duplicate_pairs_keep_exactly_one(live: ServerProcess) -> None:
    pairs = _pair_texts(1000, seed=42)
    srv = live
    with httpx.Client(
        base_url=srv.url, headers=AUTH, timeout=60, limits=httpx.Limits(max_connections=32)
    ) as c:
        # unauthenticated writes and reads are refused
        anon = c.post("/v1/insert", json={"id": "x", "text": "t"}, headers={"Authorization": ""})
        assert anon.status_code == 401
        anon = c.post("/v1/check", json={"id": "x", "text": "t"}, headers={"Authorization": ""})
        assert anon.status_code == 401

        jobs = [
            (f"p{i}-{side}", t)
            for i, (a, b) in enumerate(pairs)
            for side, t in (("a", a), ("b", b))
        ]

        def send(job: tuple[str, str]) -> dict[str, Any]:
            r = c.post("/v1/check-and-insert", json={"id": job[0], "text": job[1]})
            assert r.status_code == 200, r.text
            return dict(r.json())

        with ThreadPoolExecutor(32) as pool:
            results = {res["id"]: res for res in pool.map(send, jobs)}
    for i in range(len(pairs)):
        a, b = results[f"p{i}-a"], results[f"p{i}-b"]
        assert a["added"] + b["added"] == 1, (i, a, b)
        kept, dup = (a, b) if a["added"] else (b, a)
        assert dup["duplicate"] and kept["id"] in {m["id"] for m in dup["matches"]}, (i, dup)
    with httpx.Client(base_url=srv.url, headers=AUTH) as c:
        assert c.get("/healthz").json()["documents"] == len(pairs)


def test_garbage_on_the_socket_does_not_take_the_server_down(live: ServerProcess) -> None:
    srv = live
    rng = random.Random(5)
    payloads = [
        b"\x00\xff" * 50,
        b"GET / HTTP/9.9\r\n\r\n",
        b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n{}",
        b"POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{",  # short body, then close
        *[bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300))) for _ in range(30)],
    ]
    for p in payloads:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
            s.sendall(p)
            s.shutdown(socket.SHUT_WR)
            try:
                reply = s.recv(4096)
            except OSError:
                reply = b""
            assert not reply.startswith(b"HTTP/1.1 5"), (p, reply)
    with httpx.Client(base_url=srv.url, headers=AUTH) as c:
        assert c.get("/healthz").json()["status"] == "ok"
        r = c.post("/v1/check", json={"id": "a", "text": "still serving"})
        assert r.status_code == 200


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--port", "99999"], "port must be an integer"),
        (["--retention", "banana"], "retention must be a duration"),
        (["--namespace", "Bad Name"], "is not a valid name"),
    ],
)
def test_bad_serve_options_exit_2_with_a_message(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "neardup", "serve", "--data", str(tmp_path / "d"), "--no-auth"]
    out = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr, (
        out.stderr
    )


_LAGGING_WRITER = r"""
import random, sys, time
from neardup.online import Deduplicator

path, seed = sys.argv[1], int(sys.argv[2])
d = Deduplicator.open(path, verify=False, memtable_size=1500)
meta = d.store._state.meta
real = meta.apply

def slow_apply(records, positions=()):
    time.sleep(0.15)  # SQLite falls behind the acknowledged log
    return real(records, positions)

meta.apply = slow_apply
rng = random.Random(seed)
n = 0
while True:
    docs = []
    for _ in range(rng.randint(1, 40)):
        n += 1
        words = " ".join(
            "".join(rng.choices("abcdefghijklmnop", k=rng.randint(3, 9))) for _ in range(25)
        )
        docs.append({"id": f"k{seed}-{n}", "text": words})
    for dec in d.check_and_add(docs):
        if dec.added:
            print("A", dec.id, flush=True)
    if rng.random() < 0.3:
        victim = docs[0]["id"]
        print("d", victim, flush=True)  # intent: a kill now may or may not keep the delete
        d.delete(victim)
        print("D", victim, flush=True)
"""


@pytest.mark.parametrize("seed", [1, 2])
def test_sigkill_while_metadata_lags_loses_nothing(tmp_path: Path, seed: int) -> None:
    """SQLite is written behind the log (a background applier); SIGKILL while it lags far
    behind — some groups applied, many only in the log, one flush to segments on the way —
    then reopen: every acknowledged insert is found (check, get), every acknowledged delete
    stays deleted, and the count matches."""
    import subprocess
    import sys

    from neardup.online.deduplicator import Deduplicator

    data = tmp_path / "d"
    proc = subprocess.Popen(
        [sys.executable, "-c", _LAGGING_WRITER, str(data), str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    deadline = time.monotonic() + 60
    while sum(1 for x in list(lines) if x.startswith("A")) < 2500 and time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    time.sleep(random.Random(seed).uniform(0.0, 0.3))
    proc.kill()
    proc.wait(30)
    reader.join(30)
    assert proc.returncode == -9, proc.stderr.read() if proc.stderr else ""
    added: dict[str, None] = {}
    deleted: set[str] = set()
    maybe: set[str] = set()  # delete sent, not acknowledged before the kill
    for line in lines:
        if not line.endswith("\n"):
            continue  # cut mid-line by the kill: not known to be acknowledged
        kind, doc_id = line.split()
        if kind == "A":
            added[doc_id] = None
        elif kind == "d":
            maybe.add(doc_id)
        else:
            deleted.add(doc_id)
            maybe.discard(doc_id)
    alive = [i for i in added if i not in deleted and i not in maybe]
    assert len(alive) >= 300 and deleted
    with Deduplicator.open(data, verify=False) as d:
        assert d.stats()["flushes"] + d.stats()["segments"] >= 1 or len(alive) < 1500
        for doc_id in alive:
            assert doc_id in d, f"acknowledged {doc_id} lost"
        for doc_id in deleted:
            assert doc_id not in d, f"acknowledged delete of {doc_id} undone"
        # at most the one unacknowledged group in flight at the kill can add more, and an
        # unacknowledged delete may or may not have happened
        assert len(alive) <= len(d) <= len(alive) + len(maybe) + 40
        got = d.get(alive[-1])
        assert got["id"] == alive[-1]
