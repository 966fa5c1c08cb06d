"""SQLite writes in a child process: the store's metadata applier without the interpreter lock.

The applier (:class:`neardup.store.engine._Applier`) writes committed log records to SQLite in
the background. In the server's process that work holds the interpreter lock for ~6-10 µs per
row (statement binding, and every re-take of the lock after SQLite's step releases it), which
the writer, the event loop and the request threads then wait for. With
``Store(meta_applier="process")`` the applier thread hands each transaction to a child process
instead: it sends the records *as framed in the log* (the bytes :func:`~neardup.store.wal.
frame_records` already made for the log write, so nothing is encoded twice) and waits for the
answer without holding the lock. The child decodes them and calls :meth:`MetaDB.apply
<neardup.store.meta.MetaDB.apply>` on its own connection to the same database: the same
statements, transaction and recorded log position as in-process.

Protocol on the child's stdin / stdout (little-endian)::

    request : u32 length | u32 n positions | n x (i64 generation, i64 offset) | framed records
    answer  : u32 length | UTF-8 error message (empty: committed)

Failure handling stays the applier's: an error message or a dead child raises
:class:`~neardup.errors.StorageError`, the applier keeps the records (they are in the log and
the pending overlay) and retries with back-off; a dead child is started again on the next try.
Re-applying a transaction the child committed before dying is harmless (idempotent, see
:mod:`neardup.store.meta`). The child exits when its stdin closes, so a server killed with
SIGKILL leaves no writer behind for long (it finishes the transaction it is in).
"""

from __future__ import annotations

import logging
import os
import struct
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterable
from pathlib import Path

from ..errors import StorageError
from .wal import AddRecord, DeleteRecord, decode_payload

__all__ = ["MetaApplyProcess", "decode_frames", "serve"]

log = logging.getLogger("neardup.store")

_U32 = struct.Struct("<I")
_FRAME = struct.Struct("<II")  # length, crc32 (as in the log)
_POS = struct.Struct("<qq")
#: seconds the child gets to finish after its stdin closes before it is killed
_CLOSE_TIMEOUT_S = 30.0


def decode_frames(data: bytes | memoryview) -> list[AddRecord | DeleteRecord]:
    """The records of concatenated log frames (``frame_records`` output); a frame whose CRC
    does not match raises :class:`ValueError` (the bytes were damaged on the way)."""
    out: list[AddRecord | DeleteRecord] = []
    mv = memoryview(data)
    pos, n = 0, len(mv)
    while pos < n:
        if pos + _FRAME.size > n:
            raise ValueError(f"truncated frame header at byte {pos}")
        length, crc = _FRAME.unpack_from(mv, pos)
        start = pos + _FRAME.size
        end = start + length
        if end > n:
            raise ValueError(f"frame at byte {pos} runs past the end ({end} > {n})")
        payload = bytes(mv[start:end])
        if zlib.crc32(payload) != crc:
            raise ValueError(f"frame at byte {pos}: CRC mismatch")
        out.append(decode_payload(payload))
        pos = end
    return out


def _read_exact(f: object, n: int) -> bytes:
    read = f.read  # type: ignore[attr-defined]
    buf = read(n)
    if len(buf) == n:
        return bytes(buf)
    parts = [buf]
    got = len(buf)
    while got < n:
        b = read(n - got)
        if not b:
            raise EOFError("stream closed")
        parts.append(b)
        got += len(b)
    return b"".join(parts)


class MetaApplyProcess:
    """The parent's side: a child process applying transactions to the SQLite file ``path``.

    :meth:`apply` is called by one thread at a time (the store's applier thread).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._start()

    def _start(self) -> None:
        env = dict(os.environ)
        # the child must import this same neardup, wherever it was imported from
        pkg_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH", "")) if p)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "neardup.store._apply_child", str(self.path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            env=env,
        )
        self.starts += 1

    def apply(self, framed: bytes | Iterable[bytes], positions: Iterable[tuple[int, int]]) -> None:
        """Apply the framed records (one bytes or several, in order) and record ``positions``,
        in one transaction of the child; :class:`StorageError` when it did not commit."""
        pos = list(positions)
        chunks = [framed] if isinstance(framed, bytes) else list(framed)
        head = _U32.pack(len(pos)) + b"".join(_POS.pack(int(g), int(o)) for g, o in pos)
        length = len(head) + sum(len(c) for c in chunks)
        with self._lock:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                if proc is not None:
                    log.warning(
                        "metadata applier process exited (%s); starting it again", proc.returncode
                    )
                self._start()
                proc = self._proc
            assert proc is not None and proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(_U32.pack(length) + head)
                for c in chunks:
                    proc.stdin.write(c)
                proc.stdin.flush()
                (n,) = _U32.unpack(_read_exact(proc.stdout, 4))
                err = _read_exact(proc.stdout, n).decode("utf-8", "replace") if n else ""
            except (OSError, EOFError, ValueError) as exc:
                self._kill()
                raise StorageError(
                    f"metadata applier process for {self.path} failed ({exc}); the log still "
                    "holds every acknowledged row"
                ) from exc
        if err:
            raise StorageError(f"{self.path}: applying log records to SQLite failed: {err}")

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.kill()
            proc.wait(timeout=_CLOSE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for f in (proc.stdin, proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass

    def close(self) -> None:
        """Close the child's stdin and wait for it to exit (killed after a timeout)."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=_CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log.warning("metadata applier process did not exit; killing it")
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def serve(path: str) -> int:
    """The child: apply each request to the SQLite file ``path`` until stdin closes."""
    import signal

    from .meta import MetaDB

    # the parent decides when this ends (it closes stdin once its applier is drained): a
    # Ctrl+C or a SIGTERM sent to the whole process group must not cut a transaction short
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    db = MetaDB(Path(path))
    try:
        while True:
            try:
                (length,) = _U32.unpack(_read_exact(stdin, 4))
                msg = _read_exact(stdin, length)
            except EOFError:
                return 0
            try:
                (n,) = _U32.unpack_from(msg, 0)
                off = _U32.size
                positions = [_POS.unpack_from(msg, off + i * _POS.size) for i in range(n)]
                records = decode_frames(memoryview(msg)[off + n * _POS.size :])
                db.apply(records, positions)
                answer = b""
            except Exception as exc:  # reported to the parent, which retries
                answer = f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")[:65536]
            stdout.write(_U32.pack(len(answer)) + answer)
            stdout.flush()
    finally:
        db.close()
