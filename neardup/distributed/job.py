"""A distributed dedup job's description (picklable: every task gets it) and its partitions."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ConfigError, InputError

__all__ = ["Job", "Partition", "plan_partitions"]

#: positions are ``file_index << POS_SHIFT | row``: increasing in input order without a counting
#: pass, so every task knows its documents' global order from its own input
POS_SHIFT = 40


@dataclass(frozen=True)
class Partition:
    """Rows ``[slice * rows // slices, (slice + 1) * rows // slices)`` of input file ``file``."""

    file: int
    path: str
    fmt: str | None
    slice: int
    slices: int


@dataclass(frozen=True)
class Job:
    """Everything a task needs: where the work goes, the inputs and the dedup settings."""

    workdir: str
    partitions: tuple[Partition, ...]
    config: dict[str, Any]
    buckets: int
    text_field: str = "text"
    id_field: str | None = None
    #: first position of every partition (filled in after the read step)
    starts: tuple[int, ...] = field(default_factory=tuple)

    def dedup_config(self) -> Any:
        from ..batch.config import DedupConfig

        return DedupConfig(**self.config)

    def fingerprint(self) -> str:
        """What makes two runs the same job (a rerun may reuse the work directory)."""
        from ..fingerprint.minhash import SIGNATURE_SCHEME

        d = asdict(self)
        d.pop("workdir")
        d.pop("starts")
        d["signature"] = SIGNATURE_SCHEME  # the stored signatures' meaning
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()


def plan_partitions(
    inputs: list[str], partitions: int | None, fmt: str | None = None
) -> tuple[Partition, ...]:
    """Input files (globs and directories of ``.jsonl``/``.parquet`` files expanded, in order)
    split into about ``partitions`` partitions (each file into ``ceil(partitions / files)``
    slices; default one per file)."""
    from ..io.remote import expand_inputs, is_url

    files: list[str] = []
    for p in expand_inputs(list(inputs)):
        if p == "-":
            raise InputError("the distributed engines read files, not stdin; pass a path")
        if not is_url(p) and os.path.isdir(p):
            found = sorted(
                os.path.join(root, f)
                for root, _, names in os.walk(p)
                for f in names
                if not f.startswith(".") and f.endswith((".jsonl", ".parquet", ".jsonl.gz"))
            )
            if not found:
                raise InputError(f"directory {p!r} holds no .jsonl or .parquet files")
            files.extend(found)
        else:
            files.append(p)
    if not files:
        raise InputError("no input files")
    if partitions is not None and (isinstance(partitions, bool) or partitions < 1):
        raise ConfigError(f"partitions must be an int >= 1, got {partitions!r}")
    per = max(1, -(-(partitions or len(files)) // len(files)))
    return tuple(Partition(i, f, fmt, s, per) for i, f in enumerate(files) for s in range(per))
