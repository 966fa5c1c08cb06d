"""``neardup batch-query``: the paper's batch mode. Permuted tables over the query
fingerprints, the stored fingerprints streamed through them in chunks
(:func:`neardup.index.batch_query`); every (stored, query) pair within the distance is
written as ``stored_id,query_id,distance``, sorted by stored then query position.

Fingerprint files: the CSV ``neardup fingerprint -o`` writes (``id,fingerprint`` with 64-bit
hex fingerprints), or a ``.npy`` array of uint64 (ids are the positions)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Annotated, Any

import numpy as np
import typer

#: stored rows read (and probed) at a time
CHUNK_ROWS = 1 << 20


#: hex digit value per byte; 255 for a byte that is not a hex digit
_HEX = np.full(256, 255, np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEX[_c] = 10 + _i


def _hex_column(col: Any) -> np.ndarray | None:
    """The uint64 values of an Arrow string column of 16-digit hex strings (what `neardup
    fingerprint -o` writes), decoded from the column's buffers without a Python object per
    row; ``None`` when any value is null, another width or not hex (the caller then takes the
    per-value path, which names the bad row)."""
    import pyarrow as pa

    if col.null_count or not pa.types.is_string(col.type) or len(col) == 0:
        return None
    offs = np.frombuffer(col.buffers()[1], np.int32)[col.offset : col.offset + len(col) + 1]
    if not np.all(np.diff(offs) == 16):
        return None
    data = np.frombuffer(col.buffers()[2], np.uint8)[offs[0] : offs[-1]].reshape(-1, 16)
    nib = _HEX[data]
    if (nib == 255).any():
        return None
    raw = (nib[:, 0::2] << np.uint8(4)) | nib[:, 1::2]  # (n, 8) bytes, most significant first
    return np.ascontiguousarray(raw).view(">u8").reshape(-1).astype(np.uint64)


def _from_hex(values: list[str], path: str, first_row: int) -> np.ndarray:
    from ..errors import InputError

    try:
        if any(isinstance(v, str) and len(v) > 16 for v in values):  # (a 128-bit file whose
            raise ValueError("longer than 16 hex digits")  # high half is 0 was read as 64-bit)
        arr = np.array([int(v, 16) for v in values], dtype=np.uint64)
    except (ValueError, OverflowError, TypeError) as exc:
        bad = next((i for i, v in enumerate(values) if not isinstance(v, str) or len(v) > 16), None)
        where = f" (row {first_row + bad + 2})" if bad is not None else ""
        value = values[bad] if bad is not None else None
        why = (
            f"got {len(value)} hex digits, a {4 * len(value)}-bit fingerprint: batch-query "
            "compares 64-bit ones (`neardup fingerprint --bits 64`)"
            if isinstance(value, str) and len(value) > 16
            else str(exc)
        )
        raise InputError(
            f"{path}{where}: fingerprints must be 64-bit hex (as `neardup fingerprint -o` "
            f"writes them): {why}"
        ) from exc
    return arr


def read_fingerprints(
    path: str, chunk: int | None = None
) -> Iterator[tuple[list[str], np.ndarray]]:
    """``(ids, fingerprints uint64)`` chunks of a fingerprint file (CSV or ``.npy``); ``.npy``
    chunks hold ``chunk`` (default :data:`CHUNK_ROWS`) rows."""
    chunk = chunk or CHUNK_ROWS
    from ..errors import InputError

    if path.endswith(".npy"):
        try:
            arr = np.load(path, mmap_mode="r")
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read {path}: {exc}") from exc
        if arr.dtype != np.uint64 or arr.ndim != 1:
            raise InputError(f"{path}: expected a 1-d uint64 array, got {arr.dtype} {arr.shape}")
        for s in range(0, arr.size, chunk):
            part = np.asarray(arr[s : s + chunk])
            yield [str(i) for i in range(s, s + part.size)], part
        return
    import pyarrow as pa
    import pyarrow.csv as pcsv

    try:
        reader = pcsv.open_csv(
            path,
            read_options=pcsv.ReadOptions(block_size=64 << 20),
            convert_options=pcsv.ConvertOptions(
                column_types={"id": pa.string(), "fingerprint": pa.string()}
            ),
        )
    except (OSError, pa.ArrowInvalid) as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc
    names = reader.schema.names
    if "id" not in names or "fingerprint" not in names:
        raise InputError(
            f"{path}: expected the columns id,fingerprint (as `neardup fingerprint -o` writes), "
            f"got {','.join(names)}"
        )
    row = 0
    try:
        for batch in reader:
            ids = batch.column("id").to_pylist()
            col = batch.column("fingerprint")
            fast = _hex_column(col)
            yield ids, fast if fast is not None else _from_hex(col.to_pylist(), path, row)
            row += len(ids)
    except pa.ArrowInvalid as exc:
        raise InputError(f"{path}: {exc}") from exc


def batch_query_command(
    stored: Annotated[str, typer.Option("--stored", help="Stored fingerprints (CSV or .npy).")],
    queries: Annotated[str, typer.Option("--queries", help="Query fingerprints (CSV or .npy).")],
    pairs_out: Annotated[
        str, typer.Option("--pairs-out", help="Write stored_id,query_id,distance CSV here.")
    ],
    max_distance: Annotated[
        int, typer.Option("--max-distance", "-k", min=0, max=16, help="Bits apart, at most.")
    ] = 3,
    threads: Annotated[int, typer.Option("--threads", min=1, help="Probe threads.")] = 1,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary.")] = False,
) -> None:
    """Pairs of stored and query fingerprints within k bits (tables over the queries)."""
    import itertools
    import time

    from ..errors import InputError
    from ..index.batch_join import batch_query, batch_tables
    from ..io import atomic_open, check_outputs

    t0 = time.perf_counter()
    for flag, path in (("--stored", stored), ("--queries", queries)):
        if path == "-":
            raise InputError(
                f"{flag} -: fingerprints are read from a file (CSV or .npy), not from standard "
                "input; write them to a file first"
            )
    check_outputs([("--pairs-out", pairs_out)], [stored, queries])  # before anything is read
    q_ids: list[str] = []
    q_parts = []
    for ids, f in read_fingerprints(queries):
        q_ids.extend(ids)
        q_parts.append(f)
    q = np.concatenate(q_parts) if q_parts else np.zeros(0, np.uint64)
    tables = batch_tables(q, max_distance, threads=threads)  # once, for every stored chunk
    n_stored = n_pairs = 0
    # the stored file's first chunk is read before the output is opened: a file that cannot
    # be read leaves no header on stdout (or anywhere)
    chunks = read_fingerprints(stored)
    first = next(chunks, None)
    with atomic_open(pairs_out, "w", encoding="utf-8") as out:
        out.write("stored_id,query_id,distance\n")
        for ids, f in itertools.chain([first] if first is not None else [], chunks):
            s, qi, d = batch_query(f, tables, max_distance, threads=threads)
            n_stored += f.size
            n_pairs += s.size
            out.writelines(
                f"{_csv(ids[a])},{_csv(q_ids[b])},{c}\n"
                for a, b, c in zip(s.tolist(), qi.tolist(), d.tolist(), strict=True)
            )
    elapsed = time.perf_counter() - t0
    if not quiet:
        print(
            f"stored {n_stored:,}  queries {q.size:,}  pairs {n_pairs:,}  elapsed {elapsed:.2f}s",
            file=sys.stderr,
        )


def _csv(value: Any) -> str:
    value = str(value)
    if any(c in value for c in ',"\n\r'):
        return '"' + value.replace('"', '""') + '"'
    return value


def register(app: typer.Typer) -> None:
    """Add ``neardup batch-query`` to the app."""
    app.command("batch-query")(batch_query_command)
