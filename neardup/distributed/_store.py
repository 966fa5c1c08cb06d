"""The work directory of a distributed job: Arrow IPC files written atomically, success markers
per task, and the file-based shuffle every step uses.

Layout (``workdir/``)::

    job.json                      the job's inputs, partitions and config (a rerun must match)
    <step>/m00003-r00011.arrow    map task 3's rows for reducer bucket 11 (a shuffle)
    <step>/p00003.arrow           task 3's own output (no shuffle)
    <step>/_done/00003            task 3 of <step> finished (written last)

Every file is written to a temporary name, fsynced and renamed, and a task's marker only after
all its files: a task that dies half-way leaves no marker, and its rerun (by the engine, or by
the next run of the job) writes the same names again. Outputs are a function of the inputs and
the config only, so a rerun of a finished task may be skipped and a retried task overwrites
partial files with the same bytes.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._durable import fsync_dir
from ..errors import CorruptFileError, StorageError

__all__ = [
    "by_reference",
    "done",
    "mark_done",
    "owner_of",
    "read_bucket",
    "read_table",
    "shuffle_write",
    "sig_matrix",
    "write_table",
]


def _path(workdir: str, step: str, name: str) -> str:
    return os.path.join(workdir, step, name)


def write_table(path: str, table: Any) -> None:
    """``table`` (a pyarrow.Table) as an Arrow IPC file at ``path``, atomically."""
    import pyarrow as pa

    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
            w.write_table(table)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        fsync_dir(os.path.dirname(path))
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise StorageError(f"cannot write {path}: {exc}") from exc


def read_table(path: str) -> Any:
    """The Arrow IPC file at ``path`` as a pyarrow.Table (memory-mapped)."""
    import pyarrow as pa

    try:
        with pa.memory_map(path) as src:
            return pa.ipc.open_file(src).read_all()
    except (OSError, pa.ArrowInvalid) as exc:
        raise CorruptFileError(
            f"cannot read work file {path}: {exc}; delete the job's work directory to start over"
        ) from exc


def done(workdir: str, step: str, task: int) -> bool:
    """Whether ``task`` of ``step`` has finished (its marker exists)."""
    return os.path.exists(_path(workdir, step, f"_done/{task:05d}"))


def mark_done(workdir: str, step: str, task: int) -> None:
    """Write ``task``'s success marker (after all its files)."""
    path = _path(workdir, step, f"_done/{task:05d}")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        fh.write("ok\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path))


def resumable(step: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for a task ``fn(workdir, task, ...) -> dict``: skipped (returning the result it
    saved) when its marker exists; else run, its result saved beside the marker."""
    import json

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(workdir: str, task: int, *args: Any, **kwargs: Any) -> Any:
            res_path = _path(workdir, step, f"_done/{task:05d}.json")
            if done(workdir, step, task) and os.path.exists(res_path):
                with open(res_path) as fh:
                    return json.load(fh)
            out = fn(workdir, task, *args, **kwargs)
            os.makedirs(os.path.dirname(res_path), exist_ok=True)
            tmp = f"{res_path}.tmp"
            with open(tmp, "w") as fh:
                json.dump(out, fh)
            os.replace(tmp, res_path)
            mark_done(workdir, step, task)
            return out

        run.__name__ = fn.__name__
        run.__doc__ = fn.__doc__
        run.__wrapped__ = fn  # type: ignore[attr-defined]
        return run

    return wrap


def shuffle_write(
    workdir: str, step: str, task: int, table: Any, bucket: npt.NDArray[np.int64]
) -> int:
    """Write ``table``'s rows to one file per reducer bucket (``bucket[i]`` for row ``i``);
    returns the bytes written (the shuffle volume)."""
    if table.num_rows == 0:
        return 0
    # a stable sort of small integers: as 16-bit values numpy sorts them by radix (linear),
    # the same order as the 64-bit merge sort at a fraction of its time
    small = bucket.size and int(bucket.min()) >= 0 and int(bucket.max()) < 1 << 16
    order = np.argsort(bucket.astype(np.uint16) if small else bucket, kind="stable")
    b = bucket[order]
    starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
    ends = np.r_[starts[1:], b.size]
    t = table.take(order)
    size = 0
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        part = t.slice(s, e - s)
        write_table(_path(workdir, step, f"m{task:05d}-r{int(b[s]):05d}.arrow"), part)
        size += part.nbytes
    return size


def read_bucket(workdir: str, step: str, bucket: int, schema: Any) -> Any:
    """Every map task's rows for ``bucket`` of ``step``, concatenated in map-task order."""
    import pyarrow as pa

    files = sorted(glob.glob(_path(workdir, step, f"m*-r{bucket:05d}.arrow")))
    tables = [read_table(f) for f in files]
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables)


def owner_of(pos: npt.NDArray[np.int64], starts: Sequence[int]) -> npt.NDArray[np.int64]:
    """The partition holding each position (``starts``: first position of every partition,
    ascending)."""
    return np.searchsorted(np.asarray(starts, np.int64), pos, side="right").astype(np.int64) - 1


def mix_bucket(keys: npt.NDArray[np.uint64], buckets: int) -> npt.NDArray[np.int64]:
    """Reducer bucket of each key: a 64-bit mix, modulo ``buckets`` (keys spread evenly)."""
    x = keys.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(33)
        x *= np.uint64(0xFF51AFD7ED558CCD)
        x ^= x >> np.uint64(33)
        x *= np.uint64(0xC4CEB9FE1A85EC53)
        x ^= x >> np.uint64(33)
    return (x % np.uint64(buckets)).astype(np.int64)


def sig_matrix(arr: Any, m: int, hashes: int) -> np.ndarray:
    """A FixedSizeBinary column of ``m`` signatures as a ``(m, hashes)`` uint16 view."""
    if m == 0:
        return np.zeros((0, hashes), np.uint16)
    arr = arr.combine_chunks() if hasattr(arr, "combine_chunks") else arr
    buf = np.frombuffer(arr.buffers()[1], "<u2")
    off = arr.offset * hashes
    return buf[off : off + m * hashes].reshape(m, hashes)


def by_reference(
    workdir: str, starts: Any, pos: np.ndarray, hashes: int, texts: np.ndarray
) -> dict[str, Any]:
    """Fingerprints, MinHash signatures (``(n, hashes)`` uint16) and, where ``texts`` (bool) is
    set, the texts of the documents at positions ``pos`` (any partitions), read from the
    partitions' ``docs`` files (memory-mapped: only the rows taken are read); with the bytes
    read."""
    owner = owner_of(pos, starts)
    o = np.argsort(owner, kind="stable")
    fp = np.zeros(pos.size, np.uint64)
    sig = np.zeros((pos.size, hashes), np.uint16)
    text: list[Any] = [None] * pos.size
    nbytes = 0
    bounds: list[int] = []
    if pos.size:
        bounds = np.flatnonzero(np.r_[True, owner[o][1:] != owner[o][:-1], True]).tolist()
    for s, e in itertools.pairwise(bounds):
        rows = o[s:e]
        docs = read_table(f"{workdir}/docs/p{int(owner[rows[0]]):05d}.arrow")
        at = np.searchsorted(docs["pos"].to_numpy(), pos[rows])
        fp[rows] = docs["fp"].to_numpy()[at]
        sig[rows] = sig_matrix(docs["sig"], docs.num_rows, hashes)[at]
        nbytes += rows.size * (8 + 2 * hashes)
        want = rows[texts[rows]]
        if want.size:
            got = docs["text"].take(np.searchsorted(docs["pos"].to_numpy(), pos[want]))
            nbytes += got.nbytes
            for r, t in zip(want.tolist(), got.to_pylist(), strict=True):
                text[r] = t
    return {"fp": fp, "sig": sig, "text": text, "bytes": nbytes}
