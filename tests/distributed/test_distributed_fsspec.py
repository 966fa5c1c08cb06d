"""fsspec URLs as inputs of the distributed steps: ``file://`` and ``memory://`` URLs give the
same results as the plain paths (the work directory stays a local or shared file system path:
docs/distributed.md)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from _distributed_common import assert_same, distributed, sample_slice, single_machine

from neardup.distributed import run_dedup
from neardup.errors import InputError
from neardup.rules.config import DedupConfig


def test_file_urls_equal_plain_paths(tmp_path: Path) -> None:
    inputs = sample_slice(tmp_path, 300, 2)
    want = single_machine(inputs, DedupConfig())
    urls = [Path(p).resolve().as_uri() for p in inputs]
    assert all(u.startswith("file://") for u in urls)
    res = run_dedup(urls, str(tmp_path / "work"), partitions=3)
    assert_same(distributed(res), want)


def test_memory_urls_and_url_globs(tmp_path: Path) -> None:
    fsspec = pytest.importorskip("fsspec")
    inputs = sample_slice(tmp_path, 300, 2)
    want = single_machine(inputs, DedupConfig())
    fs = fsspec.filesystem("memory")
    root = f"/nd-{uuid.uuid4().hex}"
    try:
        for i, p in enumerate(inputs):
            fs.pipe(f"{root}/part{i}.jsonl", Path(p).read_bytes())
        res = run_dedup([f"memory://{root}/part*.jsonl"], str(tmp_path / "work"), partitions=4)
        assert_same(distributed(res), want)
    finally:
        fs.rm(root, recursive=True)


def test_missing_url_names_it(tmp_path: Path) -> None:
    url = f"memory:///nd-{uuid.uuid4().hex}/absent.jsonl"
    with pytest.raises(InputError, match="absent"):
        run_dedup([url], str(tmp_path / "work"))
