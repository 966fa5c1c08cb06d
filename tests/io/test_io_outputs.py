"""Outputs (``neardup.io.atomic``): regular files atomically, devices / FIFOs / descriptors in
place, symlinks through to their target, umask-following permissions, refused missing folders,
and ``staged_outputs`` (all-or-nothing across the outputs of one run)."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from doubles import without_compile_notice
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.errors import ConfigError, StorageError
from neardup.io import (
    atomic_dir,
    atomic_open,
    check_output,
    read_corpus,
    staged_outputs,
    write_kept,
)
from neardup.io import jsonl as jsonl_mod

DOCS = [
    {"id": "a", "text": "the council announced a new budget for the river bridge and the library"},
    {"id": "b", "text": "The council announced a NEW budget for the river bridge and the library"},
    {"id": "c", "text": "mountain weather and airport railways in the summer season were quiet"},
]


def _jsonl(path: Path, docs: list[dict[str, str]] = DOCS) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return path


def _device(folder: Path, name: str, minor: int) -> Path:
    """A character device node like /dev/null (minor 3) or /dev/full (minor 7), made in
    ``folder`` when the process may (root), so a broken writer can only replace this copy;
    else the real one under /dev (which a non-root writer cannot replace)."""
    node = folder / name
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, minor))
        with open(node, "wb") as fh:  # a nodev mount refuses to open it
            fh.write(b"")
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(node)
        return Path("/dev") / name
    return node


@pytest.fixture(autouse=True)
def _never_replace_system_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Some tests write to the real /dev/null and /dev/stdout: should a regression try to
    rename a temporary file over them (as root it could), fail the test instead."""
    real_replace, real_rename = os.replace, os.rename

    def guarded(real):  # type: ignore[no-untyped-def]
        def call(src, dst, *args, **kwargs):  # type: ignore[no-untyped-def]
            if os.path.abspath(os.fspath(dst)).startswith(("/dev/", "/proc/")):
                raise AssertionError(f"an output replaced {dst!r}")
            return real(src, dst, *args, **kwargs)

        return call

    monkeypatch.setattr(os, "replace", guarded(real_replace))
    monkeypatch.setattr(os, "rename", guarded(real_rename))


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _leftovers(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.endswith(".tmp"))


# ------------------------------------------------------------------------------ devices, pipes


def test_cli_output_to_dev_null_writes_to_it(tmp_path):
    from neardup.cli.main import main

    src = _jsonl(tmp_path / "in.jsonl")
    assert main(["dedup", str(src), "-o", "/dev/null", "-q"]) == 0
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)
    assert _leftovers(Path("/dev")) == []


def test_cli_output_to_full_device_fails_and_leaves_nothing(tmp_path, capsys):
    from neardup.cli.main import main

    src = _jsonl(tmp_path / "in.jsonl")
    full = _device(tmp_path, "full", 7)
    before = sorted(os.listdir(full.parent))
    rc = main(["dedup", str(src), "-o", str(full), "-q"])
    assert rc == 7  # StorageError
    err = without_compile_notice(capsys.readouterr().err).strip()  # (a cold cache's notice)
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "No space left on device" in err and str(full) in err
    assert stat.S_ISCHR(os.lstat(full).st_mode)
    assert sorted(os.listdir(full.parent)) == before


@pytest.mark.parametrize("mode", ["w", "wb"])
def test_null_device_is_written_not_replaced(tmp_path, mode):
    null = _device(tmp_path, "null", 3)
    with atomic_open(null, mode) as fh:
        fh.write("x" * 100 if mode == "w" else b"x" * 100)
    assert stat.S_ISCHR(os.lstat(null).st_mode)
    assert _leftovers(null.parent) == []


def test_full_device_write_fails_with_storage_error(tmp_path):
    full = _device(tmp_path, "full", 7)
    with (
        pytest.raises(StorageError, match="No space left on device"),
        atomic_open(full, "wb") as fh,
    ):
        fh.write(b"x" * 10)
    assert stat.S_ISCHR(os.lstat(full).st_mode)
    assert _leftovers(full.parent) == []


def _read_fifo(fifo: Path, got: list[bytes]) -> threading.Thread:
    def reader() -> None:
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    return t


def _finish_reader(t: threading.Thread, alias: Path) -> None:
    t.join(30)
    if t.is_alive():  # the FIFO was replaced: wake the reader through its other name
        os.close(os.open(alias, os.O_WRONLY | os.O_NONBLOCK))
        t.join(30)


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv"])
def test_fifo_output_is_written_in_place(tmp_path, fmt):
    src = _jsonl(tmp_path / "in.jsonl")
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    alias = tmp_path / "alias.fifo"
    os.link(fifo, alias)
    got: list[bytes] = []
    t = _read_fifo(fifo, got)
    try:
        with read_corpus([str(src)]) as corpus:
            n = write_kept(corpus, np.array([True, False, True]), str(fifo), fmt=fmt)
    finally:
        _finish_reader(t, alias)
    assert n == 2
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    text = got[0].decode("utf-8")
    assert "the council" in text and "mountain" in text and "NEW" not in text
    if fmt == "jsonl":
        assert [json.loads(x)["id"] for x in text.splitlines()] == ["a", "c"]
    assert _leftovers(tmp_path) == []


def test_stdout_paths_write_to_the_descriptor(tmp_path, capfd, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for path in ("/dev/stdout", "/proc/self/fd/1", "/dev/fd/1"):
        with atomic_open(path, "wb") as fh:
            fh.write(path.encode() + b"\n")
    assert stat.S_ISLNK(os.lstat("/dev/stdout").st_mode)
    out = capfd.readouterr().out
    assert out.splitlines() == ["/dev/stdout", "/proc/self/fd/1", "/dev/fd/1"]


def test_dash_writes_to_stdout_not_a_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with atomic_open("-", "w", encoding="utf-8") as fh:
        fh.write("text\n")
    with atomic_open("-", "wb") as fh:
        fh.write(b"bytes\n")
    assert capsys.readouterr().out == "text\nbytes\n"
    assert os.listdir(tmp_path) == []


def _source(tmp_path: Path, n: int) -> tuple[object, list[bytes]]:
    docs = [{"id": f"d{i}", "text": f"document number {i} " + "word " * (i % 7)} for i in range(n)]
    src = _jsonl(tmp_path / "many.jsonl", docs)
    lines = [json.dumps(d).encode() + b"\n" for d in docs]
    return src, lines


@pytest.mark.parametrize("direct", [True, False])
def test_copy_records_to_a_pipe_uses_plain_writes(tmp_path, monkeypatch, direct):
    """O_DIRECT (lseek, packet-mode pipes) and copy_file_range are for regular files only."""
    if direct:
        monkeypatch.setattr(jsonl_mod, "DIRECT_MIN_BYTES", 0)
    monkeypatch.setattr(jsonl_mod, "COPY_FILE_RANGE", hasattr(os, "copy_file_range"))
    path, lines = _source(tmp_path, 500)
    keep = np.arange(500) % 3 != 1
    want = b"".join(line for line, k in zip(lines, keep, strict=True) if k)
    r, w = os.pipe()
    got: list[bytes] = []

    def reader() -> None:
        parts = []
        while chunk := os.read(r, 1 << 16):
            parts.append(chunk)
        got.append(b"".join(parts))

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        with read_corpus([str(path)]) as corpus:
            src = corpus.sources[0]
            jsonl_mod.copy_records(
                src, np.flatnonzero(keep), lambda b: None, out_fd=w
            )  # fmt: skip
    finally:
        os.close(w)
        t.join(30)
        os.close(r)
    assert got == [want]


def test_copy_records_to_null_device_with_the_fast_paths(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonl_mod, "DIRECT_MIN_BYTES", 0)
    path, _lines = _source(tmp_path, 200)
    null = _device(tmp_path, "null", 3)
    with read_corpus([str(path)]) as corpus, atomic_open(null, "wb") as fh:
        n = jsonl_mod.copy_records(
            corpus.sources[0], np.arange(0, 200, 2), fh.write, out_fd=fh.fileno()
        )
    assert n == 100 and stat.S_ISCHR(os.lstat(null).st_mode)


def test_block_device_and_directory_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"), atomic_open(tmp_path, "w"):
        pass
    blk = tmp_path / "blk"
    try:
        os.mknod(blk, stat.S_IFBLK | 0o600, os.makedev(7, 200))
    except OSError:
        pytest.skip("cannot make a block device node here")
    with pytest.raises(ConfigError, match="block device"), atomic_open(blk, "wb"):
        pass
    assert stat.S_ISBLK(os.lstat(blk).st_mode)


# ------------------------------------------------------------------------------------ symlinks


def test_symlink_output_updates_the_target_and_keeps_the_link(tmp_path):
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    target = real_dir / "kept.jsonl"
    target.write_text("old\n", encoding="utf-8")
    os.chmod(target, 0o640)
    link = tmp_path / "link.jsonl"
    link.symlink_to(os.path.join("real", "kept.jsonl"))
    with atomic_open(link, "w", encoding="utf-8") as fh:
        fh.write("new\n")
    assert link.is_symlink() and os.readlink(link) == os.path.join("real", "kept.jsonl")
    assert target.read_text(encoding="utf-8") == "new\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert _leftovers(tmp_path) == [] and _leftovers(real_dir) == []


def test_dangling_symlink_creates_its_target(tmp_path, umask):
    link = tmp_path / "link.csv"
    link.symlink_to(tmp_path / "made.csv")
    with atomic_open(link, "w") as fh:
        fh.write("x\n")
    assert link.is_symlink() and (tmp_path / "made.csv").read_text() == "x\n"


def test_symlink_to_a_device_writes_in_place(tmp_path):
    full = _device(tmp_path, "full", 7)
    link = tmp_path / "out"
    link.symlink_to(full)
    with pytest.raises(StorageError, match="No space left"), atomic_open(link, "wb") as fh:
        fh.write(b"x")
    assert link.is_symlink() and stat.S_ISCHR(os.stat(link).st_mode)


def test_symlink_to_an_empty_folder_for_atomic_dir(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "out"
    link.symlink_to(real)
    with atomic_dir(link) as tmp:
        (tmp / "a.txt").write_text("a")
    assert link.is_symlink() and (real / "a.txt").read_text() == "a"


# ---------------------------------------------------------------------------------- permissions


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mask=st.integers(0, 0o777))
def test_new_files_and_folders_follow_the_umask(tmp_path, mask):
    old = os.umask(mask)
    try:
        f = tmp_path / f"f{mask:o}.txt"
        d = tmp_path / f"d{mask:o}"
        with atomic_open(f, "w") as fh:
            fh.write("x")
        with atomic_dir(d) as tmp:
            (tmp / "x").write_text("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o666 & ~mask
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o777 & ~mask


@pytest.mark.parametrize("mask,want", [(0o022, 0o644), (0o077, 0o600)])
def test_cli_outputs_follow_the_umask(tmp_path, mask, want):
    from neardup.cli.main import main

    src = _jsonl(tmp_path / "in.jsonl")
    old = os.umask(mask)
    try:
        rc = main(
            ["dedup", str(src), "-o", str(tmp_path / "out.jsonl"), "-q",
             "--pairs-out", str(tmp_path / "pairs.csv")]
        )  # fmt: skip
    finally:
        os.umask(old)
    assert rc == 0
    for name in ("out.jsonl", "pairs.csv"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == want


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mode=st.integers(0, 0o777))
def test_overwritten_file_keeps_its_mode(tmp_path, mode):
    target = tmp_path / "out.txt"
    target.write_text("old")
    os.chmod(target, mode)
    old = os.umask(0o077)
    try:
        with atomic_open(target, "w") as fh:
            fh.write("new")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(target).st_mode) == mode
    assert target.read_text() == "new"


def test_existing_0640_file_keeps_0640(tmp_path, umask):
    target = tmp_path / "kept.jsonl"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    src = _jsonl(tmp_path / "in.jsonl")
    with read_corpus([str(src)]) as corpus:
        write_kept(corpus, np.ones(3, bool), str(target))
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert len(target.read_text().splitlines()) == 3


# ------------------------------------------------------------------------------ missing folders


def test_missing_parent_folder_is_refused(tmp_path):
    out = tmp_path / "no" / "such" / "out.jsonl"
    want = (
        f"output directory '{out.parent}' does not exist; create it first (mkdir -p {out.parent})"
    )
    with pytest.raises(ConfigError) as info, atomic_open(out, "w"):
        pass
    assert str(info.value).startswith(want)
    with pytest.raises(ConfigError, match="does not exist"), atomic_dir(tmp_path / "no" / "dir"):
        pass
    assert os.listdir(tmp_path) == []


def test_cli_missing_output_folder_is_a_usage_error(tmp_path, capsys):
    from neardup.cli.main import main

    src = _jsonl(tmp_path / "in.jsonl")
    rc = main(["dedup", str(src), "-o", str(tmp_path / "missing" / "out.jsonl"), "-q"])
    assert rc == 2
    assert "does not exist; create it first" in capsys.readouterr().err
    assert not (tmp_path / "missing").exists()


def test_check_output_refuses_up_front(tmp_path):
    with pytest.raises(ConfigError, match=r"^--pairs-out: output directory .* does not exist"):
        check_output(tmp_path / "missing" / "p.csv", option="--pairs-out")
    with pytest.raises(ConfigError, match="is a directory"):
        check_output(tmp_path)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(ConfigError, match="not empty"):
        check_output(tmp_path / "full", directory=True)
    with pytest.raises(ConfigError, match="does not exist"):
        check_output(tmp_path / "missing" / "texts", directory=True)
    for ok in (tmp_path / "new.csv", tmp_path / "full" / "x", "-", "/dev/stdout", "/dev/null"):
        check_output(ok)
    check_output(tmp_path / "empty", directory=True)
    assert sorted(os.listdir(tmp_path)) == ["full"]


def test_create_parents_makes_the_folders(tmp_path, umask):
    out = tmp_path / "a" / "b" / "out.txt"
    with atomic_open(out, "w", create_parents=True) as fh:
        fh.write("x")
    assert out.read_text() == "x"
    assert stat.S_IMODE(os.stat(tmp_path / "a").st_mode) == 0o755
    with atomic_dir(tmp_path / "c" / "d", create_parents=True) as tmp:
        (tmp / "f").write_text("f")
    assert (tmp_path / "c" / "d" / "f").read_text() == "f"


def test_parent_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "out.txt"
    with pytest.raises(ConfigError, match=r"is a file"), atomic_open(out, "w"):
        pass


# ------------------------------------------------------------------------------ staged outputs


def _two_targets(tmp_path: Path) -> tuple[Path, Path]:
    kept = tmp_path / "kept.jsonl"
    kept.write_text("old kept\n")
    pairs = tmp_path / "pairs.csv"  # does not exist yet
    return kept, pairs


def test_staged_outputs_exception_leaves_every_target(tmp_path):
    kept, pairs = _two_targets(tmp_path)
    texts = tmp_path / "texts"
    with pytest.raises(RuntimeError, match="later failure"), staged_outputs():
        with atomic_open(kept, "w") as fh:
            fh.write("new kept\n")
        with atomic_open(pairs, "wb") as fh:
            fh.write(b"a,b\n")
        with atomic_dir(texts) as tmp:
            (tmp / "1.txt").write_text("1")
        assert kept.read_text() == "old kept\n" and not pairs.exists()
        raise RuntimeError("later failure")
    assert kept.read_text() == "old kept\n"
    assert not pairs.exists() and not texts.exists()
    assert sorted(os.listdir(tmp_path)) == ["kept.jsonl"]


def test_staged_outputs_failed_later_output_leaves_the_earlier(tmp_path):
    """The issue's case: the kept file is written, then --pairs-out fails."""
    kept, _pairs = _two_targets(tmp_path)
    src = _jsonl(tmp_path / "in.jsonl")
    with (
        pytest.raises(ConfigError, match="does not exist"),
        staged_outputs(),
        read_corpus([str(src)]) as corpus,
    ):
        write_kept(corpus, np.ones(3, bool), str(kept))
        with atomic_open(tmp_path / "missing" / "pairs.csv", "wb") as fh:
            fh.write(b"x")
    assert kept.read_text() == "old kept\n"
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl", "kept.jsonl"]


def test_staged_outputs_success_publishes_all(tmp_path):
    kept, pairs = _two_targets(tmp_path)
    os.chmod(kept, 0o640)
    with staged_outputs():
        with atomic_open(kept, "w") as fh:
            fh.write("new kept\n")
        with staged_outputs(), atomic_open(pairs, "wb") as fh:  # nested: joins the outer block
            fh.write(b"a,b\n")
        with atomic_dir(tmp_path / "texts") as tmp:
            (tmp / "1.txt").write_text("1")
        assert kept.read_text() == "old kept\n" and not pairs.exists()
    assert kept.read_text() == "new kept\n" and pairs.read_bytes() == b"a,b\n"
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o640
    assert (tmp_path / "texts" / "1.txt").read_text() == "1"
    assert _leftovers(tmp_path) == []


def test_staged_outputs_write_devices_at_once(tmp_path):
    null = _device(tmp_path, "null", 3)
    out = tmp_path / "out.txt"
    with pytest.raises(RuntimeError), staged_outputs():
        with atomic_open(null, "w") as fh:
            fh.write("in place")
        with atomic_open(out, "w") as fh:
            fh.write("staged")
        raise RuntimeError
    assert stat.S_ISCHR(os.lstat(null).st_mode) and not out.exists()


def test_staged_outputs_refuse_two_outputs_to_one_path(tmp_path):
    out = tmp_path / "out.csv"
    with pytest.raises(ConfigError, match="two outputs"), staged_outputs():
        with atomic_open(out, "w") as fh:
            fh.write("1")
        with atomic_open(str(tmp_path / "." / "out.csv"), "w") as fh:
            fh.write("2")
    assert os.listdir(tmp_path) == []


def test_staged_outputs_are_per_thread(tmp_path):
    """Another thread's outputs are not part of this block (a ContextVar, not a global)."""
    other = tmp_path / "other.txt"

    def write_other() -> None:
        with atomic_open(other, "w") as fh:
            fh.write("other")

    with pytest.raises(RuntimeError), staged_outputs():
        t = threading.Thread(target=write_other)
        t.start()
        t.join()
        raise RuntimeError
    assert other.read_text() == "other"


def test_failed_write_inside_atomic_open_leaves_old_file(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(StorageError, match="boom"), atomic_open(target, "w") as fh:
        fh.write("half")
        raise OSError(5, "boom")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["out.txt"]


def test_bad_mode_is_refused(tmp_path):
    with pytest.raises(ValueError, match="mode"), atomic_open(tmp_path / "x", "a"):
        pass


def test_an_output_matched_by_a_glob_input_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``dedup 'data/*.jsonl' -o data/kept.jsonl`` would read its own output on the next run."""
    from neardup.errors import ConfigError
    from neardup.io import check_not_input

    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jsonl").write_text('{"text": "x"}\n')
    with pytest.raises(ConfigError, match="would overwrite or write into the input"):
        check_not_input("data/kept.jsonl", ["data/*.jsonl"], option="--output")  # not there yet
    with pytest.raises(ConfigError):
        check_not_input(str(tmp_path / "data" / "kept.jsonl"), ["data/*.jsonl"], option="--output")
    check_not_input("data/kept.csv", ["data/*.jsonl"], option="--output")  # not matched: fine
    check_not_input("out/kept.jsonl", ["data/*.jsonl"], option="--output")


# -- new_folder: what a failed block created is removed ------------------------------------------
def test_new_folder_removes_what_a_failed_block_made(tmp_path):
    from neardup.io.atomic import new_folder

    deep = tmp_path / "a" / "b" / "c"
    with pytest.raises(RuntimeError), new_folder(deep) as made:
        deep.mkdir(parents=True)
        (deep / "f").write_text("x")
        raise RuntimeError("bad record")
    assert made.made == tmp_path / "a" and not (tmp_path / "a").exists()
    # an empty folder is emptied, not removed; kept when the block says so; a folder that
    # held something is never touched, and nothing is removed on success
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(KeyboardInterrupt), new_folder(empty):
        (empty / "store").mkdir()
        (empty / "x").write_text("x")
        raise KeyboardInterrupt
    assert empty.is_dir() and list(empty.iterdir()) == []
    with pytest.raises(RuntimeError), new_folder(tmp_path / "k") as made:
        (tmp_path / "k").mkdir()
        made.keep = True
        raise RuntimeError
    assert (tmp_path / "k").is_dir()
    full = tmp_path / "full"
    full.mkdir()
    (full / "mine").write_text("x")
    with pytest.raises(RuntimeError), new_folder(full) as made:
        (full / "new").write_text("x")
        raise RuntimeError
    assert made.made is None and (full / "new").exists() and (full / "mine").exists()
    with new_folder(tmp_path / "ok") as made:
        (tmp_path / "ok").mkdir()
    assert (tmp_path / "ok").is_dir()
