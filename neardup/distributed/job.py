"""A distributed dedup job's description (picklable: every task gets it) and its partitions."""

from __future__ import annotations

import hashlib
import json
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
    #: read options, as for neardup.io.read_corpus
    encoding: str = "utf-8"
    on_error: str = "fail"
    generate_ids: bool = False
    #: --input-format, when given (else each file's format came from its name)
    input_format: str | None = None
    #: SHA-256 of the positions the read step leaves out (``exclude.arrow`` in the work
    #: directory: an incremental run's documents dropped for its store), None for none
    exclude: str | None = None
    #: first position of every partition (filled in after the read step)
    starts: tuple[int, ...] = field(default_factory=tuple)

    def dedup_config(self) -> Any:
        from ..rules.config import DedupConfig

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
    """Input files (globs and folders expanded, in order, each file's format from
    ``fmt`` or its name, as :func:`neardup.io.plan_inputs` decides for every front-end) split
    into about ``partitions`` partitions (each file into ``ceil(partitions / files)`` slices;
    default one per file)."""
    from ..io import plan_inputs

    planned = plan_inputs(list(inputs), fmt)
    if any(f.path == "-" for f in planned):
        raise InputError("the distributed engines read files, not stdin; pass a path")
    files = [f.path for f in planned]
    formats = [f.fmt for f in planned]
    if not files:
        raise InputError("no input files")
    if partitions is not None and (isinstance(partitions, bool) or partitions < 1):
        raise ConfigError(f"partitions must be an int >= 1, got {partitions!r}")
    per = max(1, -(-(partitions or len(files)) // len(files)))
    return tuple(
        Partition(i, f, formats[i], s, per) for i, f in enumerate(files) for s in range(per)
    )
