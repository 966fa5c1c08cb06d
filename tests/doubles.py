"""Test doubles for the online store: a small, pure-Python fingerprinter; for the start-up and
warm-up tests, :func:`compiled_names` (what numba compiles while a block runs),
:func:`loaded_kernels` (the kernels a process has loaded so far), :func:`output_of` (a
script run in a fresh interpreter that imports this module) and :func:`compiled_in_a_process`
(the kernels a fresh interpreter compiles); :func:`benchmark_module` (a
script of ``benchmarks/`` imported, for the tests of a benchmark's own logic);
:func:`mappings_of` and :func:`mapped_kib` (a file's mappings in this process, and how much of
it they hold resident: the tests of read-ahead advice and of what an open leaves resident); and :func:`without_compile_notice` (a CLI run's stderr without the one-time line a cold kernel
cache prints, so that a test counting lines passes on a cold cache too).

:class:`SimpleFingerprinter` follows the fingerprinter contract the
:class:`neardup.online.Deduplicator` takes (``fingerprint_batch``, ``config`` /
``from_config``, ``bits``), so store tests run without numba's kernels and with fingerprints
that are easy to reason about. Pass it explicitly (``fingerprinter=SimpleFingerprinter()``),
also when reopening a store it created.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash
from numba.core import event

__all__ = [
    "SimpleFingerprinter",
    "benchmark_module",
    "compiled_names",
    "content_hash_many",
    "loaded_kernels",
    "mapped_kib",
    "mappings_of",
    "normalize",
    "output_of",
    "without_compile_notice",
]

_WS = re.compile(r"\s+")
_TOKEN = re.compile(r"[\u3400-\u9fff]|\w+")


def normalize(text: str) -> str:
    """NFKC + casefold + whitespace collapse."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def content_hash_many(texts: list[str]) -> npt.NDArray[np.uint64]:
    """xxh3_128 of normalized texts as uint64 (n, 2), high word first."""
    out = np.zeros((len(texts), 2), dtype=np.uint64)
    for i, t in enumerate(texts):
        v = xxhash.xxh3_128_intdigest(normalize(t).encode("utf-8", "surrogatepass"))
        out[i, 0] = v >> 64
        out[i, 1] = v & 0xFFFFFFFFFFFFFFFF
    return out


@dataclass
class _Batch:
    fingerprints: npt.NDArray[np.uint64]
    empty: npt.NDArray[np.bool_]


class SimpleFingerprinter:
    """64-bit SimHash over word 3-shingles (CJK: character 3-shingles), term-frequency weights."""

    bits = 64

    def __init__(self, bits: int = 64) -> None:
        if bits != 64:
            raise ValueError("SimpleFingerprinter only makes 64-bit fingerprints")

    def config(self) -> dict[str, Any]:
        return {"kind": "tests.doubles.SimpleFingerprinter", "bits": 64}

    @classmethod
    def from_config(cls, d: dict[str, Any]) -> SimpleFingerprinter:
        return cls()

    def _one(self, text: str) -> int:
        toks = _TOKEN.findall(normalize(text))
        if not toks:
            return 0
        shingles = ["\x1f".join(toks[i : i + 3]) for i in range(max(1, len(toks) - 2))]
        hs = np.array(
            [xxhash.xxh64_intdigest(s.encode("utf-8", "surrogatepass")) for s in shingles],
            dtype=np.uint64,
        )
        bits = (hs[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
        votes = bits.sum(axis=0).astype(np.int64) * 2 - len(hs)
        return int(sum(1 << i for i in range(64) if votes[i] > 0))

    def fingerprint(self, text: str) -> int:
        return self._one(text)

    def fingerprint_batch(self, texts: list[str], workers: int = 1) -> _Batch:
        fps = np.array([self._one(t) for t in texts], dtype=np.uint64)
        empty = np.array([not _TOKEN.search(t) for t in texts], dtype=bool)
        return _Batch(fps, empty)


class _Compiles(event.Listener):
    """The names of the functions numba compiles while registered."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def on_start(self, ev: event.Event) -> None:
        self.names.append(ev.data["dispatcher"].py_func.__qualname__)

    def on_end(self, ev: event.Event) -> None:
        pass


@contextmanager
def compiled_names() -> Iterator[list[str]]:
    """The names of the functions numba compiles inside the ``with`` block (its
    ``numba:compile`` events fire for real compiles, not for cache loads), filled as they come."""
    listener = _Compiles()
    event.register("numba:compile", listener)
    try:
        yield listener.names
    finally:
        event.unregister("numba:compile", listener)


def loaded_kernels() -> dict[str, int]:
    """``module.name`` -> signatures, of every neardup numba kernel this process has compiled or
    loaded from the cache so far: two readings differ by what ran between them."""
    from numba.core.dispatcher import Dispatcher

    return {
        f"{name}.{k}": len(v.signatures)
        for name, mod in list(sys.modules.items())
        if name.startswith("neardup")
        for k, v in list(vars(mod).items())
        if isinstance(v, Dispatcher)
    }


def output_of(script: str, timeout: float = 600) -> str:
    """Run ``script`` in a fresh interpreter (which can ``import doubles``): what it printed,
    stripped; a failed run fails the test with its stderr."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "PYTHONPATH": path},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


# a fresh interpreter's outermost compiles of neardup kernels, by name, printed as JSON at exit
_LISTEN = """
import atexit, json, sys
from numba.core import event as ev
names = []
class L(ev.Listener):
    depth = 0
    def on_start(self, e):
        L.depth += 1
        d = e.data.get("dispatcher")
        f = getattr(d, "py_func", None)
        if L.depth == 1 and f is not None and f.__module__.startswith("neardup"):
            names.append(f.__module__ + "." + f.__qualname__)
    def on_end(self, e):
        L.depth -= 1
ev.register("numba:compile", L())
atexit.register(lambda: print("COMPILED " + json.dumps(names)))
"""


def compiled_in_a_process(code: str, cache: str | os.PathLike[str], **env: str) -> list[str]:
    """``module.qualname`` of every neardup kernel a fresh interpreter running ``code``
    compiled (outermost compiles), with the kernel cache at ``cache`` and compile helpers off
    (``env`` adds to its environment); a failed run fails the test with its stderr."""
    e = {**os.environ, "NEARDUP_CACHE_DIR": str(cache), "NEARDUP_NO_WARM": "1", **env}
    e.pop("NUMBA_CACHE_DIR", None)
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", _LISTEN + code], env=e, cwd=root, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("COMPILED "))
    return list(json.loads(line[len("COMPILED ") :]))


@contextmanager
def benchmark_module(name: str) -> Iterator[ModuleType]:
    """``benchmarks/NAME.py`` imported as a module, with ``benchmarks/`` on ``sys.path`` inside
    the block (the scripts import each other, some of them on first use)."""
    folder = str(Path(__file__).resolve().parents[1] / "benchmarks")
    sys.path.insert(0, folder)
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(folder)


def without_compile_notice(err: str) -> str:
    """``err`` (a CLI run's stderr) without the line the CLI prints when its run starts
    compiling kernels (``neardup._jit.compile_notice``: a cold kernel cache, whatever ``-q``
    says), so that a test that counts the lines of stderr holds on a cold cache as on a warm
    one."""
    from neardup import _jit

    notice = _jit.compile_notice()
    return "".join(x for x in err.splitlines(keepends=True) if x.rstrip("\n") != notice)


#: where :func:`mapped_kib` reads the mappings (Linux only)
SMAPS = Path("/proc/self/smaps")


def mappings_of(path: str | os.PathLike[str]) -> list[tuple[int, dict[str, str]]]:
    """Each mapping of the file ``path`` in this process, from ``/proc/self/smaps`` (Linux
    only): its offset in the file and its fields (``"Rss"``, ``"VmFlags"``, ...: the rest of
    the field's line)."""
    name = os.path.realpath(path)
    out: list[tuple[int, dict[str, str]]] = []
    fields: dict[str, str] | None = None
    for line in SMAPS.read_text().splitlines():
        head = line.split(maxsplit=1)
        if not head:
            continue
        if not head[0].endswith(":"):  # a mapping's own line: range, perms, offset, ..., path
            fields = None
            if line.rstrip().endswith(" " + name):
                fields = {}
                out.append((int(line.split()[2], 16), fields))
        elif fields is not None:
            fields[head[0][:-1]] = head[1] if len(head) > 1 else ""
    return out


def mapped_kib(path: str | os.PathLike[str]) -> int:
    """KiB of the file ``path`` this process holds resident through its mappings of it (their
    ``Rss``; Linux only): what a file's open leaves in the process's resident set, apart from
    the page cache."""
    return sum(int(f["Rss"].split()[0]) for _, f in mappings_of(path))


def as_after_a_reboot(store: str | os.PathLike[str]) -> None:
    """Leave a store's directory as if the machine had restarted since its metadata database
    last passed SQLite's ``quick_check`` and its segments their checksums (the manifest's
    records name another boot), so that the next default open checks them again
    (``neardup.store.boot``): what a test that damages the database from outside models."""
    from neardup.store.layout import read_json_file, write_json_file
    from neardup.store.recovery import META_CHECKED

    path = Path(store) / "MANIFEST.json"
    body = read_json_file(path)
    assert META_CHECKED in body, f"{path}: no passing quick_check recorded"
    body[META_CHECKED] = {**body[META_CHECKED], "boot_id": "another-boot"}
    for entry in body["segments"]:  # and its segments' checks
        if "checked" in entry:
            entry["checked"] = {**entry["checked"], "boot_id": "another-boot"}
    write_json_file(path, body)
