"""Where a load into a store stands, so that one stopped part way (killed, out of memory, the
machine gone) is finished instead of leaving a store half loaded that a rerun refuses: a load in
groups (``neardup store load``, ``neardup serve --seed``: :func:`neardup.incremental.load_files`
with ``resume=True``), and the save of ``neardup dedup NEW --save STORE``
(:func:`neardup.incremental.dedup_against` with ``resume=True``). The journal names which one
stopped (``command``); the other's resume is refused, naming the command that finishes it.

Before each group is decided, the load writes ``LOAD-JOURNAL.json`` into the store's directory
(atomically, synced: :func:`neardup.store.layout.write_json_file`, a CRC-checked JSON body with
its format name and version): the inputs (path, and each local file's size and a digest of its
bytes: :func:`input_identity`), the reading options, where the group starts (input file and
record, in the reader's numbering) and the store's next row id then. Everything before that point is decided: its kept
documents are stored (each group's load is durable before the next group's entry is written).
The file is removed once the load has finished, its final merge included.

A resumed load checks that the inputs and options are the ones written, removes from the store
what the stopped group had loaded already, then loads the documents from the noted point on as a
load of those alone would, into the store as it is: the earlier documents are read again (the
first pass cuts the groups and checks the ids) but not decided again. What is removed is the
stored rows from the noted row id on whose ids are among the documents loaded again (deleted as
``delete_many`` deletes, durably): rows another writer added since (a server opened on the
store before the resume) are the store's, and stay.

``neardup dedup NEW --save STORE`` decides its documents in memory and saves the kept ones at
the end: it writes the journal before that save (``file`` and ``record`` 0: nothing is done
before it) and removes it once its outputs are published. Its resume removes what the stopped
save stored (the same rule) and runs again from the start, so only the inputs and the reading
options must be the stopped run's.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, CorruptFileError, InputError

if TYPE_CHECKING:  # pragma: no cover
    from .stored import Reclaim

__all__ = [
    "DEDUP_SAVE",
    "JOURNAL_NAME",
    "STORE_LOAD",
    "LoadJournal",
    "SaveJournal",
    "input_identity",
    "open_saving",
    "stopped_run",
]

#: the journal's file name in a store's directory
JOURNAL_NAME = "LOAD-JOURNAL.json"
#: what stopped (``LoadJournal.command``): a load in groups, or a dedup run's save
STORE_LOAD = "neardup store load"
DEDUP_SAVE = "neardup dedup --save"
_COMMANDS = (STORE_LOAD, DEDUP_SAVE)
_FORMAT = "neardup-load-journal"
_VERSION = 1


#: bytes read at a time while an input is digested
_DIGEST_BLOCK = 8 << 20


def input_identity(
    files: list[Any], progress: Callable[[str, int, int], None] | None = None
) -> list[dict[str, Any]]:
    """What names each input file (a :class:`neardup.io.InputFile`) for a resumed load: its
    path and, for a local regular file, its size and the 128-bit xxh3 digest of its bytes (a
    file whose bytes changed differs; one restored byte for byte, a new modification time
    and all, is the same); for another local file (a FIFO, a device), its size and
    modification time. The files are read once for it (at several GB/s from the page
    cache; ``progress("identify", bytes done, bytes in all)`` after each file)."""
    import xxhash

    out: list[dict[str, Any]] = []
    stats: list[os.stat_result | None] = []
    for f in files:
        try:
            stats.append(os.stat(f.path))
        except (OSError, ValueError):  # a URL, stdin
            stats.append(None)
    total = sum(st.st_size for st in stats if st is not None and stat.S_ISREG(st.st_mode))
    done = 0
    buf = bytearray(_DIGEST_BLOCK)
    view = memoryview(buf)
    for f, st in zip(files, stats, strict=True):
        entry: dict[str, Any] = {"path": str(f.path)}
        if st is not None and stat.S_ISREG(st.st_mode):
            h = xxhash.xxh3_128()
            size = 0
            try:
                with open(f.path, "rb", buffering=0) as fh:
                    while n := fh.readinto(buf):
                        h.update(view[:n])
                        size += n
            except OSError as exc:
                raise InputError(f"{f.path}: cannot be read ({exc.strerror or exc})") from None
            entry.update(size=size, xxh3_128=h.hexdigest())
            done += st.st_size
            if progress is not None:
                progress("identify", done, total)
        elif st is not None:
            entry.update(size=st.st_size, mtime_ns=st.st_mtime_ns)
        out.append(entry)
    return out


@dataclass(frozen=True)
class LoadJournal:
    """One entry of the journal: which command stopped (:data:`STORE_LOAD`,
    :data:`DEDUP_SAVE`), the load's inputs and options, and where its next group starts
    (``file``: index into the inputs; ``record``: the reader's record number in it) with the
    store's next row id before that group (``rowid``), how many groups were loaded before it
    and how many documents they kept."""

    command: str
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
        if (
            body.get("format") != _FORMAT
            or body.get("version") != _VERSION
            or body.get("command") not in _COMMANDS
        ):
            raise CorruptFileError(
                f"{path}: not a version-{_VERSION} load journal (format "
                f"{body.get('format')!r}, version {body.get('version')!r}, command "
                f"{body.get('command')!r}); remove it to load from the start"
            )
        try:
            return cls(
                command=str(body["command"]), inputs=list(body["inputs"]),
                options=dict(body["options"]),
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

    def said(self) -> str:
        """What stopped, for a message (after "in STORE, ")."""
        if self.command == DEDUP_SAVE:
            return f"a run of {DEDUP_SAVE} stopped while saving its kept documents"
        return (
            f"a load stopped after {self.groups_done:,} groups ({self.loaded:,} documents "
            f"kept), at record {self.record + 1:,} of input {self.file + 1}"
        )

    def as_it_is(self, store: Path) -> str:
        """How to use the store without finishing the stopped run, for a message (after
        "or ")."""
        path = self.path_in(store)
        if self.command == DEDUP_SAVE:
            return (
                f"remove {path} to keep what it stored as it is (a rerun of the same inputs "
                "then refuses the ids it stored)"
            )
        return f"remove {path} to load into the store as it is"

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
                f"--resume: these inputs are not the ones of the run that stopped in "
                f"{store} ({what}); pass the same files, unchanged, or {self.as_it_is(store)}"
            )
        keys = set(options) | set(self.options)
        differ = sorted(k for k in keys if options.get(k) != self.options.get(k))
        if differ:
            said = [f"{k} {self.options.get(k)!r} then, {options.get(k)!r} now" for k in differ]
            raise ConfigError(
                f"--resume: options differ from the run that stopped in {store}: "
                f"{', '.join(said)}; pass the same options"
            )


def stopped_run(
    store: Path,
    command: str,
    *,
    resume: bool,
    holds: int,
    identity: list[dict[str, Any]],
    options: dict[str, Any],
) -> LoadJournal | None:
    """The stopped run that a ``command`` run (:data:`STORE_LOAD`, :data:`DEDUP_SAVE`) into the
    store at ``store`` finishes (None: a run from the start), refusing what cannot be, before
    anything is read: a stopped run without ``resume``; one of the other command (finished by
    that command only); other inputs (``identity``: :func:`input_identity`) or options;
    ``resume`` where nothing stopped and the store holds documents (``holds``)."""
    stopped = LoadJournal.read(store)
    path = LoadJournal.path_in(store)
    if stopped is None:
        if resume and holds:
            more = "load more into it" if command == STORE_LOAD else "save more into it"
            raise InputError(
                f"--resume: no {'load' if command == STORE_LOAD else command} into {store} "
                f"stopped part way (no {path.name}) and it holds {holds:,} documents; drop "
                f"--resume to {more}"
            )
        return None
    if stopped.command != command:
        raise InputError(
            f"in {store}, {stopped.said()}: finish it first with {stopped.command} --resume "
            f"(the same inputs and options), or {stopped.as_it_is(store)}"
        )
    if not resume:
        raise InputError(
            f"in {store}, {stopped.said()}; pass --resume with the same inputs and options to "
            f"finish it, or {stopped.as_it_is(store)}"
        )
    stopped.refuse_other(store, identity, options)
    return stopped


@dataclass
class SaveJournal:
    """The journal of a ``neardup dedup NEW --save STORE`` run (:data:`DEDUP_SAVE`; made by
    :meth:`open`): the stopped run it finishes (``reclaim``: what that run stored, removed by
    :meth:`take_back` once the input's ids are read), the entry written as the kept
    documents are saved (:meth:`saving`) and removed once the outputs are published
    (:meth:`finished`). Input read from stdin has no journal (it cannot be read again):
    ``identity`` None. ``warning``: an ``--against`` run's (read only) word on a store whose
    run stopped part way."""

    root: Path
    identity: list[dict[str, Any]] | None
    options: dict[str, Any]
    reclaim: Reclaim | None = None
    warning: str | None = None
    #: the stopped run's rows :meth:`take_back` removed
    removed: int = 0

    @classmethod
    def open(
        cls, d: Any, files: list[Any], options: dict[str, Any], *, save: bool, resume: bool
    ) -> SaveJournal:
        """Refuse what cannot be (:func:`stopped_run`: a stopped run without ``resume``, a
        stopped load, other inputs or reading ``options``, ``resume`` with nothing to finish
        into a store that holds documents), before any record is read; ``save`` False (an
        ``--against`` run): only warn of a stopped one."""
        from .stored import Reclaim

        root = Path(d.path)
        stdin = any(f.path == "-" for f in files)
        if not save:
            stopped = LoadJournal.read(root)
            said = None
            if stopped is not None:
                said = (
                    f"in {root}, {stopped.said()}: compared with what it holds, which is only "
                    f"part of what that run was storing; finish it with {stopped.command} "
                    "--resume"
                )
            return cls(root, None, options, warning=said)
        # (after the --against case: the digests read every input, and only a save keeps them)
        identity = None if stdin else input_identity(files)
        stopped = stopped_run(
            root, DEDUP_SAVE, resume=resume, holds=0 if stdin else len(d),
            identity=identity or [], options=options,
        )  # fmt: skip
        reclaim = None if stopped is None else Reclaim.since(d, stopped.rowid)
        return cls(root, identity, options, reclaim=reclaim)

    def take_back(self, d: Any, ids: list[str]) -> None:
        """Remove what the stopped run stored (its rows among the input's ``ids``; others are
        refused as any stored id is); how many is said by :meth:`add_to`."""
        from .stored import refuse_stored_ids

        if self.reclaim is None:
            return
        refuse_stored_ids(d, ids, self.reclaim)
        self.removed = self.reclaim.remove(d)

    @contextmanager
    def saving(self, d: Any) -> Iterator[None]:
        """Around the save of the kept documents: where it starts is noted, durably, before
        (the store's next row id); if it raises having stored nothing (the stopped run's rows,
        if any, removed already), there is nothing to finish and the journal goes, else it
        stays, for ``--resume``."""
        at = d.store.next_rowid
        if self.identity is not None:
            LoadJournal(
                command=DEDUP_SAVE, inputs=self.identity, options=self.options, file=0,
                record=0, rowid=at, groups_done=0, loaded=0,
            ).write(self.root)  # fmt: skip
        try:
            yield
        except BaseException:
            if d.store.next_rowid == at:
                self.finished()
            raise

    def add_to(self, stats: dict[str, Any]) -> None:
        """The summary's word on the journal: ``resumed`` (what a resume removed) and, for an
        ``--against`` run, the warning."""
        if self.reclaim is not None:
            stats["resumed"] = {"removed": self.removed}
        if self.warning is not None:
            stats["warnings"] = [*stats.get("warnings", []), self.warning]

    def finished(self) -> None:
        """The run's kept documents are stored and its outputs published: nothing to finish."""
        if self.identity is not None:
            LoadJournal.remove(self.root)


@contextmanager
def open_saving(
    root: Any,
    files: list[Any],
    reading: dict[str, Any],
    input_format: str | None,
    *,
    verifier: Any,
    fingerprinter: Any,
    save: bool,
    resume: bool,
) -> Iterator[tuple[Any, SaveJournal]]:
    """The store of a ``--save`` / ``--against`` run and its :class:`SaveJournal`, on every
    engine: opened with the run's ``verifier`` (None: none) and ``fingerprinter`` (a store
    ``--save`` makes is removed again when the run fails before it holds a document:
    :func:`~neardup.incremental.stored.open_store`), and a run that stopped while saving into
    it refused, or finished (``resume``), before a record is read."""
    from .stored import open_store

    with open_store(
        root,
        verify=verifier if verifier is not None else False,
        fingerprinter=fingerprinter,
    ) as d:
        options = {**reading, "input_format": input_format}
        yield d, SaveJournal.open(d, files, options, save=save, resume=resume)
