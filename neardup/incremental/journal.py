"""Where a load in groups stands (``neardup store load``, ``neardup serve --seed``), so that one
stopped part way (killed, out of memory, the machine gone) finishes where it stopped instead of
starting again: :func:`neardup.incremental.load_files` with ``resume=True``.

Before each group is decided, the load writes ``LOAD-JOURNAL.json`` into the store's directory
(atomically, synced: :func:`neardup.store.layout.write_json_file`, a CRC-checked JSON body with
its format name and version): the inputs (path, size and modification time of each local
file), the reading options, where the group starts (input file and record, in the reader's
numbering) and the store's next row id then. Everything before that point is decided: its kept
documents are stored (each group's load is durable before the next group's entry is written).
The file is removed once the load has finished, its final merge included.

A resumed load checks that the inputs and options are the ones written, removes from the store
what the stopped group had loaded already (the documents with row ids from the noted one on,
deleted as ``delete_many`` deletes, durably), then loads the documents from the noted point on
as a load of those alone would, into the store as it is: the earlier documents are read again
(the first pass cuts the groups and checks the ids) but not decided again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, CorruptFileError, InputError

__all__ = ["JOURNAL_NAME", "LoadJournal", "input_identity"]

#: the journal's file name in a store's directory
JOURNAL_NAME = "LOAD-JOURNAL.json"
_FORMAT = "neardup-load-journal"
_VERSION = 1


def input_identity(files: list[Any]) -> list[dict[str, Any]]:
    """What names each input file (a :class:`neardup.io.InputFile`) for a resumed load: its
    path and, for a local file, its size and modification time (a file changed since differs)."""
    out: list[dict[str, Any]] = []
    for f in files:
        entry: dict[str, Any] = {"path": str(f.path)}
        try:
            st = os.stat(f.path)
        except (OSError, ValueError):  # a URL, stdin
            pass
        else:
            entry.update(size=st.st_size, mtime_ns=st.st_mtime_ns)
        out.append(entry)
    return out


@dataclass(frozen=True)
class LoadJournal:
    """One entry of the journal: the load's inputs and options, and where its next group
    starts (``file``: index into the inputs; ``record``: the reader's record number in it)
    with the store's next row id before that group (``rowid``), how many groups were loaded
    before it and how many documents they kept."""

    inputs: list[dict[str, Any]]
    options: dict[str, Any]
    file: int
    record: int
    rowid: int
    groups_done: int
    loaded: int

    @staticmethod
    def path_in(store: Path) -> Path:
        return Path(store) / JOURNAL_NAME

    def write(self, store: Path) -> None:
        """Write (replace) the journal of the store at ``store``, synced."""
        from ..store.layout import write_json_file

        body = {"format": _FORMAT, "version": _VERSION, **self.__dict__}
        write_json_file(self.path_in(store), body)

    @classmethod
    def read(cls, store: Path) -> LoadJournal | None:
        """The journal of the store at ``store``, None when there is none; a damaged one, or
        one of another format or version, is refused (:class:`CorruptFileError`), naming it."""
        from ..store.layout import read_json_file

        path = cls.path_in(store)
        if not path.exists():
            return None
        body = read_json_file(path)
        if body.get("format") != _FORMAT or body.get("version") != _VERSION:
            raise CorruptFileError(
                f"{path}: not a version-{_VERSION} load journal (format "
                f"{body.get('format')!r}, version {body.get('version')!r}); remove it to load "
                "from the start"
            )
        try:
            return cls(
                inputs=list(body["inputs"]), options=dict(body["options"]),
                file=int(body["file"]), record=int(body["record"]), rowid=int(body["rowid"]),
                groups_done=int(body["groups_done"]), loaded=int(body["loaded"]),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptFileError(f"{path}: a load journal without {exc}") from None

    @classmethod
    def remove(cls, store: Path) -> None:
        """Remove the journal (the load finished); synced."""
        from .._durable import fsync_dir

        path = cls.path_in(store)
        if path.exists():
            path.unlink()
            fsync_dir(path.parent)

    def refuse_other(
        self, store: Path, inputs: list[dict[str, Any]], options: dict[str, Any]
    ) -> None:
        """Refuse (:class:`InputError`) a resumed load whose inputs or options are not the
        stopped one's, saying which differ."""
        if inputs != self.inputs:
            old = {e["path"]: e for e in self.inputs}
            new = {e["path"]: e for e in inputs}
            gone = [p for p in old if p not in new]
            more = [p for p in new if p not in old]
            changed = [p for p in new if p in old and new[p] != old[p]]
            what = (
                "; ".join(
                    f"{label}: {', '.join(xs[:3])}{' ...' if len(xs) > 3 else ''}"
                    for label, xs in (("missing", gone), ("not in it", more), ("changed", changed))
                    if xs
                )
                or "the files are in another order"
            )
            raise InputError(
                f"--resume: these inputs are not the ones of the load that stopped in "
                f"{store} ({what}); pass the same files, unchanged, or remove "
                f"{self.path_in(store)} to load from the start into the store as it is"
            )
        keys = set(options) | set(self.options)
        differ = sorted(k for k in keys if options.get(k) != self.options.get(k))
        if differ:
            said = [f"{k} {self.options.get(k)!r} then, {options.get(k)!r} now" for k in differ]
            raise ConfigError(
                f"--resume: options differ from the load that stopped in {store}: "
                f"{', '.join(said)}; pass the same options"
            )
