"""Where numba kernel caches go (never inside the package: issue 20), and the first-run notice."""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numba
import pytest
from numba.core.dispatcher import Dispatcher

import neardup
from neardup import _jit
from neardup.errors import StorageError

PACKAGE = Path(neardup.__file__).resolve().parent


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (_jit.ENV_CACHE_DIR, "NUMBA_CACHE_DIR")}
    env.update(extra)
    return env


def test_version_key_names_neardup_numba_and_python() -> None:
    key = _jit.version_key()
    py = f"py{sys.version_info.major}{sys.version_info.minor}"
    assert key == f"kernels-{neardup.__version__}-numba{numba.__version__}-{py}"


def test_default_is_the_user_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import platformdirs

    monkeypatch.setattr(platformdirs, "user_cache_dir", lambda app: str(tmp_path / "user" / app))
    loc = _jit.resolve_cache_dir(_env())
    assert loc.source == "user"
    assert loc.path == (tmp_path / "user" / "neardup" / _jit.version_key()).resolve()
    assert loc.path.is_dir()


def test_neardup_cache_dir_wins_over_numba_cache_dir(tmp_path: Path) -> None:
    loc = _jit.resolve_cache_dir(
        _env(NEARDUP_CACHE_DIR=str(tmp_path / "nd"), NUMBA_CACHE_DIR=str(tmp_path / "nb"))
    )
    assert loc.source == "NEARDUP_CACHE_DIR"
    assert loc.path == (tmp_path / "nd" / _jit.version_key()).resolve()


def test_numba_cache_dir_is_respected_as_is(tmp_path: Path) -> None:
    loc = _jit.resolve_cache_dir(_env(NUMBA_CACHE_DIR=str(tmp_path / "nb")))
    assert loc == _jit.CacheLocation((tmp_path / "nb").resolve(), "NUMBA_CACHE_DIR")


def test_unwritable_dir_falls_back_to_temp_then_to_a_process_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"  # a regular file: no folder can be made under it, even as root
    blocker.write_text("")
    monkeypatch.setattr(_jit, "_temp_root", lambda: tmp_path / "tmp")
    loc = _jit.resolve_cache_dir(_env(NEARDUP_CACHE_DIR=str(blocker / "cache")))
    assert loc.source == "temp"
    assert loc.path.is_relative_to(tmp_path / "tmp") and loc.path.name == _jit.version_key()
    assert "not writable" in caplog.text and "NEARDUP_CACHE_DIR" in caplog.text

    monkeypatch.setattr(_jit, "_temp_root", lambda: blocker)
    loc = _jit.resolve_cache_dir(_env(NEARDUP_CACHE_DIR=str(blocker / "cache")))
    assert loc.source == "process"
    assert loc.path.is_dir() and not loc.path.is_relative_to(PACKAGE)
    assert "compile again in every process" in caplog.text

    monkeypatch.setattr(_jit.tempfile, "gettempdir", lambda: str(blocker))
    with pytest.raises(StorageError, match="no writable folder for neardup's kernel cache"):
        _jit.resolve_cache_dir(_env(NEARDUP_CACHE_DIR=str(blocker / "cache")))


def test_locator_claims_neardup_files_only(tmp_path: Path) -> None:
    from neardup.fingerprint import _hashes

    ours = _jit.NeardupCacheLocator.from_function(_hashes.fnv1a64.py_func, _hashes.__file__)
    assert ours is not None
    cache = Path(ours.get_cache_path()).resolve()
    assert cache.is_relative_to(_jit.cache_location().path)
    assert not cache.is_relative_to(PACKAGE)
    assert _jit.NeardupCacheLocator.from_function(_env, __file__) is None  # not neardup's
    assert _jit.NeardupCacheLocator in _jit.caching.CacheImpl._locator_classes


_STALE = """
import sys
from neardup import _jit
_jit._PACKAGE_DIR = sys.argv[1]  # the locator claims the files of this package
sys.path.insert(0, sys.argv[2])
from fakepkg.outer import outer
print(outer(1), sum(outer.stats.cache_hits.values()))
"""


def test_a_kernel_sees_a_change_to_the_function_it_inlines_from_another_module(
    tmp_path: Path,
) -> None:
    """numba keys a cached kernel on its own file only: a kernel inlining a function from
    another module kept the old code after that module changed (wrong answers from the cache).
    neardup's stamp covers every source file of the package, so the changed callee is
    compiled in; an unchanged package still loads from the cache."""
    root = tmp_path / "src"
    pkg = root / "fakepkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    inner = "from neardup._jit import kernel\n\n\n@kernel(inline='always')\ndef inner(x):\n    return x + {}\n"
    (pkg / "inner.py").write_text(inner.format(1))
    (pkg / "outer.py").write_text(
        "from neardup._jit import kernel\n\nfrom .inner import inner\n\n\n"
        "@kernel\ndef outer(x):\n    return inner(x)\n"
    )
    env = _env(NEARDUP_CACHE_DIR=str(tmp_path / "cache"))

    def run() -> list[str]:
        out = subprocess.run(
            [sys.executable, "-c", _STALE, str(pkg), str(root)],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    assert run() == ["2", "0"]  # compiled
    assert run() == ["2", "1"]  # loaded from the cache
    (pkg / "inner.py").write_text(inner.format(2))  # outer.py is untouched
    assert run() == ["3", "0"]  # compiled again, with the new callee


def test_the_source_digest_follows_every_file(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    first = _jit.source_digest(tmp_path)
    assert _jit.source_digest(tmp_path) == first
    (tmp_path / "sub" / "b.py").write_text("y = 3\n")
    second = _jit.source_digest(tmp_path)
    (tmp_path / "c.py").write_text("")
    assert len({first, second, _jit.source_digest(tmp_path)}) == 3
    assert _jit.source_digest() == _jit.source_digest(PACKAGE)


#: numba's decorators that compile (only neardup._jit calls one)
_JIT_NAMES = {"njit", "jit", "generated_jit"}


def _njit_uses(tree: ast.AST) -> list[int]:
    """Lines that import or name numba's ``njit`` / ``jit`` (by any alias)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("numba"):
            if any(a.name in _JIT_NAMES for a in node.names):
                lines.append(node.lineno)
        elif (isinstance(node, ast.Attribute) and node.attr in _JIT_NAMES) or (
            isinstance(node, ast.Name) and node.id in _JIT_NAMES
        ):
            lines.append(node.lineno)
    return lines


def _kernel_modules() -> list[str]:
    """The modules of the package that decorate kernels with ``neardup._jit.kernel``."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(
            isinstance(node, ast.ImportFrom)
            and node.module == "_jit"
            and node.level >= 1
            and any(a.name == "kernel" for a in node.names)
            for node in ast.walk(tree)
        ):
            rel = path.relative_to(PACKAGE.parent).with_suffix("")
            names.append(".".join(rel.parts))
    return names


def test_only_jit_calls_numba_njit() -> None:
    """numba picks the cache locator at decoration time: every kernel goes through
    ``neardup._jit.kernel``, which installs neardup's locator first and always caches."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_jit.py" and path.parent == PACKAGE:
            continue
        lines = _njit_uses(ast.parse(path.read_text(encoding="utf-8")))
        found += [f"{path.relative_to(PACKAGE.parent)}:{n}" for n in lines]
    assert not found, (
        f"{found}: decorate kernels with `from .._jit import kernel` / `@kernel(...)`, never "
        "numba.njit directly (kernel caches outside the package, always)"
    )


def _is_kernel(fn: ast.FunctionDef) -> bool:
    for d in fn.decorator_list:
        f = d.func if isinstance(d, ast.Call) else d
        if isinstance(f, ast.Name) and f.id == "kernel":
            return True
    return False


def _kernel_nodes(tree: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """(kernel, node) of every node inside a kernel of ``tree``."""
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and _is_kernel(fn):
            for node in ast.walk(fn):
                yield fn.name, node


def _slice_assignments(tree: ast.AST) -> list[tuple[str, int]]:
    """(kernel, line) of every ``a[i:j] = x`` in a kernel, x not a constant."""
    out = []
    for name, node in _kernel_nodes(tree):
        if not isinstance(node, ast.Assign) or isinstance(node.value, ast.Constant):
            continue
        for t in node.targets:
            for e in t.elts if isinstance(t, ast.Tuple) else [t]:
                if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Slice):
                    out.append((name, node.lineno))
    return out


def test_no_kernel_assigns_an_array_to_a_slice() -> None:
    """An array assigned to a slice makes numba compile its shape-mismatch error, whose message
    formatting compiles numba's string code: ~2 s of a first run's compile, in the first kernel
    of a process that has one (``benchmarks/bench_compile.py --kernels``). Kernels copy with a
    loop instead (a constant, ``a[:] = 0``, compiles no such path)."""
    assert _slice_assignments(ast.parse("@kernel\ndef f(a, b):\n    a[1:3] = b[0:2]\n")) == [
        ("f", 3)
    ]
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [
            f"{path.relative_to(PACKAGE.parent)}:{n} ({k})" for k, n in _slice_assignments(tree)
        ]
    assert not found, f"{found}: copy into a slice with a loop inside a kernel"


#: kernels that may sort with numba's own sorts, and why: not compiled by a first run of
#: ``neardup dedup --sample`` (``benchmarks/bench_compile.py --kernels``), and on hot paths
#: where numba's quicksort is the measured choice (or a reference for the tests)
_NUMBA_SORTS_ALLOWED = {
    "csr_sort": "a SimHash search's runs of equal (query, distance), any length",
    "_sort_segments": "verification's token ids of every document, each a sort",
    "sort_with_rows_reference": "a reference the tests compare with",
}


def _numba_sorts(tree: ast.AST) -> list[tuple[str, int]]:
    """(kernel, line) of every ``.sort()``, ``np.sort``, ``np.argsort`` in a kernel."""
    return [
        (name, node.lineno)
        for name, node in _kernel_nodes(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("sort", "argsort", "lexsort")
    ]


def test_no_kernel_compiles_numbas_sorts() -> None:
    """A sort inside a kernel compiles numba's quicksort or mergesort into it: about a second
    of a first run's compile for each kernel and array type, paid even where it sorts a rare
    case (``benchmarks/bench_compile.py --kernels``). Kernels sort short runs themselves and
    leave long ones to NumPy (``neardup._arrays.sort_long_runs``) or a heapsort
    (``neardup.verify.tokens._heapsort``); the kernels named in ``_NUMBA_SORTS_ALLOWED`` say why
    they keep theirs."""
    assert _numba_sorts(ast.parse("@kernel\ndef f(a):\n    a[1:3].sort()\n")) == [("f", 3)]
    found, seen = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for k, n in _numba_sorts(ast.parse(path.read_text(encoding="utf-8"))):
            seen.add(k)
            if k not in _NUMBA_SORTS_ALLOWED:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{n} ({k})")
    assert not found, f"{found}: sort short runs in the kernel, long ones after it in NumPy"
    assert seen == set(_NUMBA_SORTS_ALLOWED), "an allowed kernel no longer sorts: take it out"


def test_kernel_always_caches() -> None:
    with pytest.raises(TypeError, match="always caches"):
        _jit.kernel(cache=False)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="always caches"):
        _jit.kernel(cache=True)  # type: ignore[call-overload]


def test_every_kernel_is_cached_outside_the_package() -> None:
    """Every dispatcher of every kernel module caches through NeardupCacheLocator, in the
    cache folder, never inside the package (importing compiles nothing: dispatchers compile at
    their first call, those with a signature excepted)."""
    modules = _kernel_modules()
    assert len(modules) >= 20, modules  # the scan found the kernel modules
    seen = 0
    for name in modules:
        mod = importlib.import_module(name)
        for attr, value in vars(mod).items():
            if not isinstance(value, Dispatcher) or value.py_func.__module__ != name:
                continue
            seen += 1
            locator = value._cache._impl.locator
            assert isinstance(locator, _jit.NeardupCacheLocator), f"{name}.{attr}"
            path = Path(locator.get_cache_path()).resolve()
            assert path.is_relative_to(_jit.cache_location().path), f"{name}.{attr}"
            assert not path.is_relative_to(PACKAGE), f"{name}.{attr}"
    assert seen >= 150, seen


def test_compiles_are_timed_and_announced_once(monkeypatch: pytest.MonkeyPatch) -> None:
    def add_one(x):  # type: ignore[no-untyped-def]
        return x + 1

    add_one.__module__ = "neardup.test_fake"  # counted like a neardup kernel
    notices: list[str] = []
    monkeypatch.setattr(_jit._stats, "count", 0)
    monkeypatch.setattr(_jit._stats, "seconds", 0.0)
    monkeypatch.setattr(_jit._stats, "announce", None)
    _jit.announce_compiles(notices.append)
    kernel = numba.njit(add_one)
    assert kernel(1) == 2 and kernel(1.5) == 2.5  # two signatures: two compiles
    assert _jit.compile_count() == 2
    assert _jit.compile_seconds() > 0
    assert notices == [_jit.compile_notice()]
    assert "compiling kernels on first use" in notices[0]
    assert str(_jit.cache_location().path) in notices[0]


def _files_under(root: Path, pattern: str) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in root.rglob(pattern)}


@pytest.mark.slow
def test_cli_dedup_caches_outside_the_package_and_says_so_once(tmp_path: Path) -> None:
    """A dedup from another folder with a fresh cache folder: kernel caches land there (none
    in the package), the cold run says it is compiling and reports the time, a warm one not."""
    docs = tmp_path / "docs.jsonl"
    base = "the quick brown fox jumps over the lazy dog near the river bank at dawn "
    rows = [{"id": f"d{i}", "text": base * (i % 3 + 1) + f"doc {i}"} for i in range(40)]
    rows.append({"id": "dup", "text": rows[0]["text"] + " again"})
    docs.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cache = tmp_path / "cache"
    before = {**_files_under(PACKAGE, "*.nbi"), **_files_under(PACKAGE, "*.nbc")}

    def run(tag: str) -> tuple[subprocess.CompletedProcess[str], dict]:
        summary = tmp_path / f"{tag}.json"
        cmd = [sys.executable, "-m", "neardup", "dedup", str(docs), "-o", str(tmp_path / tag)]
        proc = subprocess.run(
            [*cmd, "--summary-json", str(summary)],
            cwd=tmp_path,
            env=_env(NEARDUP_CACHE_DIR=str(cache), PYTHONDONTWRITEBYTECODE="1"),
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert proc.returncode == 0, proc.stderr
        return proc, json.loads(summary.read_text(encoding="utf-8"))

    cold, cold_summary = run("cold")
    kernels = cache / _jit.version_key()
    assert list(kernels.rglob("*.nbi")) and list(kernels.rglob("*.nbc"))
    after = {**_files_under(PACKAGE, "*.nbi"), **_files_under(PACKAGE, "*.nbc")}
    assert after == before, "numba cache files were written inside the package"
    assert f"compiling kernels on first use (cached in {kernels.resolve()}" in cold.stderr
    assert cold_summary["kernel_compile_s"] > 0

    warm, warm_summary = run("warm")
    assert "compiling kernels" not in warm.stderr
    assert warm_summary["kernel_compile_s"] == 0
