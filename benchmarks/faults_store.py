"""Store fault cycles (issue 21): SIGKILL under mixed load, and a full disk, with every
acknowledged write checked after each restart.

    .venv/bin/python benchmarks/faults_store.py --kills 10 --disk-full 3

* ``--kills N``: a child process writes to a durable ``Deduplicator`` (batches of
  check-and-add, single adds, deletes, an occasional flush; retention 48 h with times inside
  the window) and records each operation *after* it returned (acknowledged). The parent
  SIGKILLs it at a random moment, reopens the store and checks that every acknowledged insert
  is there and every acknowledged delete is gone. Repeated N times on the same directory.
* ``--disk-full N`` (root only: mounts a 48 MiB tmpfs; skipped with the reason otherwise): a
  16 MiB file is put aside, the child writes until the disk is full (``StorageError``), the
  rest of the disk is filled, the store is started 3 times (each either opens or fails with one
  ``StorageError`` line, and none may consume space), then the filler and the 16 MiB are
  removed and the restart must show every acknowledged insert.

Prints one line per cycle and a summary (acknowledged vs found).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, os, random, sys, time
from neardup.online import Deduplicator
from neardup import Fingerprinter
from neardup.errors import StorageError
path, ack_path, seed, until_full = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
rng = random.Random(seed)
ack = open(ack_path, "a", buffering=1)
def text():
    return " ".join(f"w{rng.randrange(10**6)}" for _ in range(30))
with Deduplicator.open(path, retention="48h", verify=False, fingerprinter=Fingerprinter(),
                  memtable_size=5000) as d:
    ack.write(json.dumps(["ready"]) + "\n")
    mine = []
    n = 0
    while True:
        r = rng.random()
        try:
            if r < 0.5:
                docs = [{"id": f"s{seed}-{n + i}", "text": text(),
                         "time": time.time() - rng.random() * 40 * 3600,
                         "metadata": {"n": n + i, "big": 2**70 + n}} for i in range(20)]
                res = d.check_and_add(docs)
                ids = [x.id for x in res if x.added]
                ack.write(json.dumps(["add", ids]) + "\n")
                mine += ids
                n += 20
            elif r < 0.8:
                x = d.add({"id": f"s{seed}-{n}", "text": text()})
                n += 1
                ack.write(json.dumps(["add", [x.id]]) + "\n")
                mine.append(x.id)
            elif r < 0.95 and mine:
                victim = mine.pop(rng.randrange(len(mine)))
                d.delete(victim)
                ack.write(json.dumps(["del", [victim]]) + "\n")
            elif r >= 0.995:
                d.flush()
        except StorageError as exc:
            ack.write(json.dumps(["full", str(exc)]) + "\n")
            if until_full:
                break
            time.sleep(0.01)
"""


def _read_acks(path: Path) -> tuple[set[str], set[str], bool]:
    added: set[str] = set()
    deleted: set[str] = set()
    full = False
    if not path.exists():
        return added, deleted, full
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:  # the last line may be cut by the kill
            continue
        if rec[0] == "add":
            added.update(rec[1])
            deleted.difference_update(rec[1])
        elif rec[0] == "del":
            deleted.update(rec[1])
            added.difference_update(rec[1])
        elif rec[0] == "full":
            full = True
    return added, deleted, full


def _check(path: Path, added: set[str], deleted: set[str]) -> tuple[int, int, int]:
    from neardup import Fingerprinter
    from neardup.online.deduplicator import Deduplicator

    with Deduplicator.open(path, verify=False, fingerprinter=Fingerprinter()) as d:
        found = sum(1 for i in added if i in d)
        resurrected = sum(1 for i in deleted if i in d)
        return found, resurrected, len(d)


def _child(path: Path, ack: Path, seed: int, until_full: bool) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(ack), str(seed), "1" if until_full else "0"],
        stderr=open(str(ack) + ".stderr", "wb"),
    )


def _wait_ready(
    ack: Path, proc: subprocess.Popen[bytes], starts: int, timeout: float = 120
) -> None:
    """Wait until the child has opened the store (its ``starts``-th "ready" line)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if ack.exists() and ack.read_text().count('"ready"') >= starts:
            return
        if proc.poll() is not None:
            raise SystemExit(f"child exited with {proc.returncode} before it was ready")
        time.sleep(0.05)
    raise SystemExit("child did not start")


def kill_cycles(n: int, seed: int) -> bool:
    rng = random.Random(seed)
    work = Path(tempfile.mkdtemp(prefix="faults-store-"))
    store, ack = work / "store", work / "acks.jsonl"
    ok = True
    try:
        for c in range(n):
            proc = _child(store, ack, seed * 1000 + c, until_full=False)
            _wait_ready(ack, proc, c + 1)
            time.sleep(rng.uniform(0.5, 3.0))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            added, deleted, _ = _read_acks(ack)
            t0 = time.perf_counter()
            found, back, total = _check(store, added, deleted)
            took = time.perf_counter() - t0
            good = found == len(added) and back == 0
            ok &= good
            print(
                f"kill {c + 1}/{n}: acknowledged inserts {len(added)}, found {found}; "
                f"acknowledged deletes {len(deleted)}, back {back}; documents {total}; "
                f"reopen+check {took:.2f} s {'OK' if good else 'LOST'}",
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return ok


def disk_full_cycles(n: int, seed: int) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        print("disk-full cycles skipped: mounting a tmpfs needs root")
        return True
    from neardup.errors import StorageError

    ok = True
    for c in range(n):
        work = Path(tempfile.mkdtemp(prefix="faults-store-full-"))
        mnt = work / "mnt"
        mnt.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mnt)]).returncode:
            print("disk-full cycles skipped: cannot mount a tmpfs here")
            return True
        try:
            store, ack = mnt / "store", work / "acks.jsonl"
            # space an operator frees later (the store itself fills the rest)
            reserve = mnt / "reserve"
            with open(reserve, "wb") as f:
                f.write(b"\xff" * (16 << 20))
            proc = _child(store, ack, seed * 7000 + c, until_full=True)
            proc.wait(600)
            added, deleted, full = _read_acks(ack)
            if not full:
                err = Path(str(ack) + ".stderr").read_text().strip().splitlines()
                print(f"child exited with {proc.returncode}: {err[-1] if err else ''}")
            filler = mnt / "filler"
            fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\xff" * 65536)
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\xff" * 512)
            os.close(fd)
            free0 = shutil.disk_usage(mnt).free
            refusals = []
            for _ in range(3):
                try:
                    _check(store, added, deleted)
                    refusals.append("opened")
                except StorageError as exc:
                    refusals.append(str(exc).splitlines()[0][:80])
            free1 = shutil.disk_usage(mnt).free
            filler.unlink()
            reserve.unlink()
            found, back, _ = _check(store, added, deleted)
            good = full and found == len(added) and back == 0 and free1 >= free0
            ok &= good
            print(
                f"disk full {c + 1}/{n}: refused writes seen {full}; starts on the full disk: "
                f"{refusals[0]!r} x{len(refusals)}, free bytes {free0} -> {free1}; after freeing: "
                f"acknowledged inserts {len(added)}, found {found}, deletes back {back} "
                f"{'OK' if good else 'FAILED'}",
                flush=True,
            )
        finally:
            subprocess.run(["umount", "-l", str(mnt)], check=False)
            shutil.rmtree(work, ignore_errors=True)
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--disk-full", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    t0 = time.perf_counter()
    ok = kill_cycles(a.kills, a.seed) if a.kills else True
    ok &= disk_full_cycles(a.disk_full, a.seed) if a.disk_full else True
    print(
        f"{'all acknowledged writes found' if ok else 'FAILURES'} in {time.perf_counter() - t0:.0f} s"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
