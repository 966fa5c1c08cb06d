"""The batch-mode probe kernel (neardup/index/_batch_kernels.py): equal to its pure
Python twin and to brute force (neardup/index/reference.py), on any chunking and thread count."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.errors import ConfigError
from neardup.index import batch_query
from neardup.index._batch_kernels import block_layout, build_tables, probe
from neardup.index.reference import probe_reference, search_reference


def _sets(seed: int, nq: int, ns: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 2**64, nq, dtype=np.uint64)
    # few distinct high bits too, so blocks collide and runs are long
    q[: nq // 3] &= np.uint64(0x00FF00FF00FF00FF)
    s = rng.integers(0, 2**64, ns, dtype=np.uint64)
    if nq:
        near = q[rng.integers(0, nq, ns)]
        for _ in range(int(rng.integers(0, 5))):
            near ^= np.uint64(1) << rng.integers(0, 64, ns).astype(np.uint64)
        s = np.where(rng.random(ns) < 0.6, near, s)
    return s, q


def _brute(s: np.ndarray, q: np.ndarray, k: int, base: int = 0) -> list[tuple[int, int, int]]:
    lims, ids, d = search_reference(q, np.arange(q.size), s, k)
    return sorted(
        (i + base, int(ids[j]), int(d[j]))
        for i in range(s.size)
        for j in range(lims[i], lims[i + 1])
    )


def _rows(r: tuple[np.ndarray, ...]) -> list[tuple[int, int, int]]:
    return sorted(zip(*(x.tolist() for x in r), strict=True))


@pytest.mark.parametrize("k", range(17))
def test_blocks_cover_all_bits_once(k: int) -> None:
    shifts, masks = block_layout(k)
    assert len(shifts) == k + 1
    cover = 0
    for sh, m in zip(shifts.tolist(), masks.tolist(), strict=True):
        bits = m << sh
        assert cover & bits == 0
        cover |= bits
    assert cover == 2**64 - 1


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    nq=st.integers(0, 80),
    ns=st.integers(0, 150),
    k=st.integers(0, 16),
    base=st.integers(0, 2**40),
)
def test_kernel_equals_twin_and_brute_force(seed: int, nq: int, ns: int, k: int, base: int) -> None:
    s, q = _sets(seed, nq, ns)
    tables = build_tables(q, k)
    got = _rows(probe(s, tables, base))
    assert got == _rows(probe_reference(s, tables, base))
    assert got == _brute(s, q, k, base)
    assert len(set((a, b) for a, b, _ in got)) == len(got)  # each pair once


def test_output_overflow_is_retried_not_lost() -> None:
    # every stored fingerprint matches every query: far more pairs than the first output size
    q = np.zeros(300, np.uint64)
    s = np.ones(500, np.uint64)
    a, _, d = probe(s, build_tables(q, 3))
    assert a.size == 500 * 300 and set(d.tolist()) == {1}


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), threads=st.integers(1, 4), chunk=st.integers(1, 9000))
def test_batch_query_threads_and_chunks_change_nothing(seed: int, threads: int, chunk: int) -> None:
    s, q = _sets(seed, 400, 9000)
    want = batch_query(s, q, 3, threads=1, chunk=1 << 20)
    got = batch_query(s, q, 3, threads=threads, chunk=chunk)
    for x, y in zip(want, got, strict=True):
        assert np.array_equal(x, y)
    assert list(zip(*(x.tolist() for x in want), strict=True)) == _brute(s, q, 3)


@pytest.mark.parametrize(
    ("kw", "msg"),
    [({"chunk": 0}, "chunk"), ({"threads": 0}, "threads"), ({"max_distance": 17}, "max_distance")],
)
def test_bad_settings_are_named(kw: dict[str, int], msg: str) -> None:
    args = {"max_distance": 3, **kw}
    with pytest.raises(ConfigError, match=msg):
        batch_query(np.zeros(3, np.uint64), np.zeros(3, np.uint64), **args)  # type: ignore[arg-type]


def test_prebuilt_tables_equal_building_them_and_check_k() -> None:
    from neardup.index.batch_join import batch_tables

    s, q = _sets(5, 200, 3000)
    tables = batch_tables(q, 2)
    for x, y in zip(batch_query(s, q, 2), batch_query(s, tables, 2), strict=True):
        assert np.array_equal(x, y)
    with pytest.raises(ConfigError, match="built for max_distance 2"):
        batch_query(s, tables, 3)


def test_cli_builds_tables_once_over_several_stored_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neardup.cli import batch_cmd
    from neardup.cli.main import main
    from neardup.index import _batch_kernels

    s, q = _sets(9, 100, 2500)
    np.save(f"{tmp_path}/q.npy", q)
    np.save(f"{tmp_path}/s.npy", s)
    builds = []
    real = _batch_kernels.build_tables
    monkeypatch.setattr(batch_cmd, "CHUNK_ROWS", 1000)  # three stored chunks
    monkeypatch.setattr(
        "neardup.index.batch_join.build_tables", lambda *a: builds.append(1) or real(*a)
    )
    out = f"{tmp_path}/pairs.csv"
    args = ["batch-query", "--queries", f"{tmp_path}/q.npy", "--stored", f"{tmp_path}/s.npy"]
    assert main([*args, "--pairs-out", out, "-k", "3", "-q"]) == 0
    assert len(builds) == 1
    rows = Path(out).read_text().splitlines()[1:]
    got = [tuple(int(v) for v in r.split(",")) for r in rows]
    assert got == _brute(s, q, 3)


def test_hex_column_decodes_like_int_and_defers_bad_values() -> None:
    import pyarrow as pa

    from neardup.cli.batch_cmd import _hex_column

    rng = np.random.default_rng(2)
    a = rng.integers(0, 2**64, 1000, dtype=np.uint64)
    vals = [f"{int(x):016x}" for x in a]
    vals[3] = vals[3].upper()
    got = _hex_column(pa.array(vals))
    assert got is not None and got.dtype == np.uint64
    assert got.tolist() == [int(v, 16) for v in vals]
    sliced = _hex_column(pa.array(vals).slice(10, 5))
    assert sliced is not None and sliced.tolist() == a[10:15].tolist()
    for bad in (["abc"], ["000000000000000g"], [None], ["0" * 17]):
        assert _hex_column(pa.array(bad, pa.string())) is None


def test_cli_names_the_row_of_a_bad_fingerprint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from neardup.cli.main import main

    np.save(tmp_path / "q.npy", np.zeros(2, np.uint64))
    (tmp_path / "s.csv").write_text(
        "id,fingerprint\na,0000000000000001\nb,00000000000000zz\nc,0000000000000003\n"
    )
    args = ["batch-query", "--queries", str(tmp_path / "q.npy"), "--stored"]
    out = str(tmp_path / "p.csv")
    assert main([*args, str(tmp_path / "s.csv"), "--pairs-out", out]) != 0
    err = capsys.readouterr().err
    assert "s.csv" in err and "64-bit hex" in err
    # a 128-bit file (`fingerprint --bits 128 -o`): named as such, not "Python int too large"
    (tmp_path / "wide.csv").write_text("id,fingerprint\na," + "0" * 31 + "1\n")
    assert main([*args, str(tmp_path / "wide.csv"), "--pairs-out", out]) == 3
    err = capsys.readouterr().err
    assert "(row 2)" in err and "32 hex digits, a 128-bit fingerprint" in err
    assert "too large" not in err
    (tmp_path / "short.csv").write_text("id,fingerprint\na,1\nb,ff\n")  # short hex: slow path
    assert main([*args, str(tmp_path / "short.csv"), "--pairs-out", out, "-k", "8", "-q"]) == 0
    assert Path(out).read_text() == "stored_id,query_id,distance\na,0,1\na,1,1\nb,0,8\nb,1,8\n"


def test_cli_refuses_standard_input_and_writes_nothing_before_a_bad_stored_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from neardup.cli.main import main

    np.save(tmp_path / "q.npy", np.zeros(2, np.uint64))
    q = ["batch-query", "--queries", str(tmp_path / "q.npy")]
    assert main([*q, "--stored", "-", "--pairs-out", "-"]) == 3
    got = capsys.readouterr()
    assert got.out == "" and "--stored -" in got.err and "not from standard input" in got.err
    (tmp_path / "bad.csv").write_text("name,value\na,1\n")
    assert main([*q, "--stored", str(tmp_path / "bad.csv"), "--pairs-out", "-"]) == 3
    got = capsys.readouterr()
    assert got.out == "" and "expected the columns id,fingerprint" in got.err


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), nq=st.integers(0, 80), k=st.integers(0, 16))
def test_index_method_equals_blocks_and_brute_force(seed: int, nq: int, k: int) -> None:
    s, q = _sets(seed, nq, 120)
    want = _brute(s, q, k, 7)
    for method in ("index", "blocks", "auto"):
        got = batch_query(s, q, k, method=method, stored_offset=7)  # type: ignore[arg-type]
        assert list(zip(*(x.tolist() for x in got), strict=True)) == want


def test_choose_method_takes_the_index_only_for_short_blocks() -> None:
    from neardup.index.batch_join import IndexTables, batch_tables, choose_method

    assert [choose_method(1_000_000, k) for k in (0, 3, 5, 6, 8)] == [
        "blocks", "blocks", "blocks", "index", "index"
    ]  # fmt: skip
    assert choose_method(1000, 8) == "blocks"
    assert isinstance(batch_tables(np.zeros(3, np.uint64), 3, method="index"), IndexTables)
    with pytest.raises(ConfigError, match="method"):
        batch_tables(np.zeros(3, np.uint64), 3, method="fast")  # type: ignore[arg-type]
