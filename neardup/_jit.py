"""Where neardup's numba kernels are cached, and how long compiling them took.

numba's own cache (``@njit(cache=True)``) is written next to the source, into the installed
package's ``__pycache__`` folders. That broke the README's Quickstart: a later
``pip install -e .`` over a ``pip install .`` removes the old copy by its file list, leaves the
cache folders behind without ``__init__.py``, and they shadow the editable package. So
neardup's kernels are cached in a user cache directory, one per (neardup, numba, Python)
version, never inside the package:

1. ``$NEARDUP_CACHE_DIR/<version>/`` when NEARDUP_CACHE_DIR is set;
2. ``$NUMBA_CACHE_DIR`` when that is set (numba's own setting, used as numba would);
3. ``platformdirs.user_cache_dir("neardup")/<version>/`` otherwise;

and when the chosen directory is not writable, a per-user folder under the temp directory,
then a folder for this process only (compiled again next time, but never the package).

A cached kernel is keyed by numba on its own source file's time and size, but a kernel that
inlines a function from another module (``inline="always"``, or a jitted callee numba compiles
into it) carries that function's code too, and numba would keep loading the old code after
the other module changed: wrong answers from a stale cache, not a slower start. So the stamp
:class:`NeardupCacheLocator` gives every neardup kernel is its file's time and size plus a
digest of every source file of the package (:func:`source_digest`): any change to neardup's
sources compiles every kernel again, once.

numba picks a cache locator when a dispatcher is created (at decoration time), so every
neardup kernel is decorated with :func:`kernel`, defined here: importing it installs the
locator first, and it always caches. No other module calls ``numba.njit``
(``tests/test_jit_cache.py`` checks that). The locator installed here claims neardup's own
source files only: other packages' numba caches stay where numba puts them.

Kernel primitives every wing shares live here too: :data:`popcount64` and :data:`load_u32`
(intrinsics: nothing here is a dispatcher, so importing this module decorates no kernel and
reads no source file; the typed-list kernels live in :mod:`neardup._typed`).

Compiles are timed through numba's event API (``numba:compile`` events fire for real compiles,
not for cache loads): :func:`compile_seconds` is the time this process spent compiling
neardup's kernels, and :func:`announce_compiles` lets the CLI say so when the first one starts.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict, TypeVar, overload

import numba
from numba import types
from numba.core import caching
from numba.core import event as nb_event
from numba.extending import intrinsic

from . import __version__

if TYPE_CHECKING:  # pragma: no cover - for type checkers only
    from numba.core.dispatcher import Dispatcher
    from typing_extensions import Unpack

log = logging.getLogger("neardup")

#: environment variable that overrides where neardup's kernels are cached
ENV_CACHE_DIR = "NEARDUP_CACHE_DIR"
#: numba's own cache directory setting (respected when ours is not set)
ENV_NUMBA_CACHE_DIR = "NUMBA_CACHE_DIR"

_PACKAGE_DIR = os.path.dirname(os.path.realpath(__file__))


def version_key() -> str:
    """The cache folder name for this neardup, numba and Python, e.g.
    ``kernels-0.1.0-numba0.68.1-py311``: a new version of any of them starts a fresh folder
    (and leaves the old one whole for the version that wrote it)."""
    py = f"{sys.version_info.major}{sys.version_info.minor}"
    return f"kernels-{__version__}-numba{numba.__version__}-py{py}"


@dataclass(frozen=True)
class CacheLocation:
    """Where kernels are cached: ``path``, and ``source``, which setting chose it
    (``NEARDUP_CACHE_DIR``, ``NUMBA_CACHE_DIR``, ``user``, ``temp`` or ``process``)."""

    path: Path
    source: str


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def _temp_root() -> Path:
    return Path(tempfile.gettempdir())


def _process_dir() -> Path:
    """A fresh folder for this process's kernels, removed at exit (the last resort)."""
    try:
        path = Path(tempfile.mkdtemp(prefix="neardup-kernels-"))
    except OSError as e:
        from .errors import StorageError

        raise StorageError(
            f"no writable folder for neardup's kernel cache ({e}); set {ENV_CACHE_DIR} to a "
            "writable folder"
        ) from e
    atexit.register(shutil.rmtree, path, True)
    return path


def resolve_cache_dir(env: Mapping[str, str] | None = None) -> CacheLocation:
    """The first writable of: ``$NEARDUP_CACHE_DIR/<version>``, ``$NUMBA_CACHE_DIR``,
    ``user_cache_dir("neardup")/<version>``, then ``<tmp>/neardup-<user>/<version>``, then a
    folder for this process only. Creates the folder it returns; logs a warning when the
    folder asked for (by a variable or the default) is not writable; raises StorageError
    when no folder at all is writable."""
    env = os.environ if env is None else env
    candidates: list[tuple[Path, str]] = []
    if env.get(ENV_CACHE_DIR):
        candidates.append((Path(env[ENV_CACHE_DIR]).expanduser() / version_key(), ENV_CACHE_DIR))
    elif env.get(ENV_NUMBA_CACHE_DIR):
        candidates.append((Path(env[ENV_NUMBA_CACHE_DIR]).expanduser(), ENV_NUMBA_CACHE_DIR))
    else:
        import platformdirs

        candidates.append((Path(platformdirs.user_cache_dir("neardup")) / version_key(), "user"))
    user = str(os.getuid()) if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    candidates.append((_temp_root() / f"neardup-{user}" / version_key(), "temp"))
    for path, source in candidates:
        if _writable(path):
            if source == "temp":
                log.warning(
                    "neardup: kernel cache folder %s is not writable; caching in %s instead "
                    "(set %s to a writable folder)",
                    candidates[0][0],
                    path,
                    ENV_CACHE_DIR,
                )
            return CacheLocation(path.resolve(), source)
    path = _process_dir()
    log.warning(
        "neardup: no writable kernel cache folder (tried %s); kernels compile again in every "
        "process (set %s to a writable folder)",
        ", ".join(str(p) for p, _ in candidates),
        ENV_CACHE_DIR,
    )
    return CacheLocation(path, "process")


_location: CacheLocation | None = None
_location_lock = threading.Lock()


def cache_location() -> CacheLocation:
    """Where this process caches neardup's kernels (resolved once, on first use)."""
    global _location
    with _location_lock:
        if _location is None:
            _location = resolve_cache_dir()
        return _location


_digest: str | None = None
_digest_lock = threading.Lock()


def source_digest(root: str | os.PathLike[str] | None = None) -> str:
    """A digest of every ``.py`` file under ``root`` (default: this package; computed once a
    process for it): their paths relative to ``root`` and their bytes."""
    global _digest
    if root is None:
        with _digest_lock:
            if _digest is None:
                _digest = source_digest(_PACKAGE_DIR)
            return _digest
    base = Path(root)
    h = hashlib.blake2b(digest_size=16)
    for path in sorted(base.rglob("*.py")):
        h.update(path.relative_to(base).as_posix().encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def _is_ours(py_file: str) -> bool:
    path = os.path.realpath(py_file)
    return os.path.commonpath([path, _PACKAGE_DIR]) == _PACKAGE_DIR


class NeardupCacheLocator(caching.UserProvidedCacheLocator):
    """numba cache locator for neardup's own source files: :func:`cache_location`, under
    numba's usual sub-folder per source folder (so two installs never share entries)."""

    def __init__(self, py_func: Any, py_file: str, root: Path | None = None) -> None:
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        root = cache_location().path if root is None else root
        self._cache_path = os.path.join(root, self.get_suitable_cache_subpath(py_file))

    def get_source_stamp(self) -> Any:
        """numba's stamp (the file's time and size) and the package's :func:`source_digest`:
        a kernel's cache entry is stale when any of neardup's sources changed, not only its
        own file (the module docs)."""
        return (super().get_source_stamp(), source_digest())

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> NeardupCacheLocator | None:
        if not _is_ours(py_file) or not os.path.exists(py_file):
            return None  # not neardup's: numba's own locators decide
        self = cls(py_func, py_file)
        try:
            self.ensure_cache_path()
        except OSError:  # became unwritable since it was resolved: never fall back in-tree
            self = cls(py_func, py_file, root=_process_dir())
            self.ensure_cache_path()
        return self


def install() -> None:
    """Put :class:`NeardupCacheLocator` first in numba's locator list (idempotent). Called on
    import; kernels decorated before it would be cached inside the package."""
    # numba names the class CacheImpl, older releases _CacheImpl
    impl = vars(caching).get("CacheImpl") or vars(caching)["_CacheImpl"]
    classes = impl._locator_classes
    if NeardupCacheLocator not in classes:
        classes.insert(0, NeardupCacheLocator)


# ------------------------------------------------------------------------------ compile timing
@dataclass
class _CompileStats:
    seconds: float = 0.0
    count: int = 0
    announce: Callable[[str], None] | None = None
    announce_kind: str = "run"  # (a key of COMPILE_NOTES)
    current: str | None = None  # the kernel compiling now (outermost), for progress displays


_stats = _CompileStats()
_depth = threading.local()


def _neardup_dispatcher(ev: Any) -> bool:
    disp = ev.data.get("dispatcher") if isinstance(ev.data, dict) else None
    module = getattr(getattr(disp, "py_func", None), "__module__", "") or ""
    return module == "neardup" or module.startswith("neardup.")


class _CompileListener(nb_event.Listener):
    """Sums the outermost compiles of neardup kernels (a kernel's callees compile inside
    its event; numba's compiler lock serialises compiles, so the sum is wall time)."""

    def on_start(self, event: Any) -> None:
        stack = getattr(_depth, "stack", None)
        if stack is None:
            stack = _depth.stack = []
        if not stack and _neardup_dispatcher(event):
            stack.append(time.perf_counter())
            disp = event.data.get("dispatcher")
            _stats.current = getattr(getattr(disp, "py_func", None), "__name__", None) or "kernel"
            announce = _stats.announce
            if announce is not None:  # the first compile since announce_compiles: said once
                _stats.announce = None
                with contextlib.suppress(Exception):  # a notice must never break a compile
                    announce(compile_notice(_stats.announce_kind))
            _stats.count += 1
        else:
            stack.append(None)

    def on_end(self, event: Any) -> None:
        stack = getattr(_depth, "stack", None)
        if not stack:
            return
        t0 = stack.pop()
        if t0 is not None:
            _stats.seconds += time.perf_counter() - t0
            _stats.current = None


#: what :func:`compile_notice` says a compile takes and means, by what compiles: a batch run
#: (``neardup dedup``), a server's start (``neardup serve``, which compiles what every
#: request path needs before it answers: docs/service.md) and a bulk load into a store
#: (``neardup store load``: the batch's kernels and the store's)
COMPILE_NOTES = {
    "run": "about 10-15 s on an idle 2-core machine, once per neardup, numba and Python "
    "version; the summary's docs/s leaves the compile out",
    "serve": "about half a minute on an idle 2-core machine with its helper process (a minute "
    "without: NEARDUP_NO_WARM=1), once per neardup, numba and Python version; the server "
    "answers when it is done",
    "load": "up to a minute on an idle 2-core machine, once per neardup, numba and Python version",
}


def compile_notice(kind: str = "run") -> str:
    """The line printed when a process starts compiling kernels (a cold cache): ``kind`` is
    a key of :data:`COMPILE_NOTES`."""
    return (
        f"neardup: compiling kernels on first use (cached in {cache_location().path}): "
        f"{COMPILE_NOTES[kind]}"
    )


def compiling_now() -> tuple[str, int] | None:
    """``(kernel name, kernels compiled so far)`` while a neardup kernel compiles in this
    process, else None: what a progress display shows instead of a row frozen at 0 %."""
    name = _stats.current
    return None if name is None else (name, _stats.count)


def announce_compiles(callback: Callable[[str], None] | None, kind: str = "run") -> None:
    """Call ``callback(compile_notice(kind))`` when the next neardup kernel compile of this
    process starts, once (not at all when every kernel loads from the cache); None turns it
    off. (A server seeded on a cold cache says so for the seed, then for its warm-up.)"""
    if kind not in COMPILE_NOTES:
        raise ValueError(f"kind must be one of {sorted(COMPILE_NOTES)}, got {kind!r}")
    _stats.announce = callback
    _stats.announce_kind = kind


def compile_seconds() -> float:
    """Seconds this process has spent compiling neardup kernels (0.0 on a warm cache)."""
    return _stats.seconds


def compile_count() -> int:
    """How many neardup kernel compiles (outermost, one per kernel and signature) ran."""
    return _stats.count


#: environment variable that turns compile helpers off (also set inside a helper)
NO_WARM_ENV = "NEARDUP_NO_WARM"


def helper_command(module: str, *args: str) -> list[str]:
    """A compile helper's command line: this interpreter, ``-P`` (the working folder is not
    put on ``sys.path``: in a source checkout with neardup installed from it, ``-m`` would
    import the checkout's copy, whose kernels are other files to numba's cache, and the
    helper's compile would be lost to the process it helps), ``-m module`` and ``args``."""
    return [sys.executable, "-P", "-m", module, *args]


def helper_env() -> dict[str, str]:
    """A compile helper's environment: this one, helpers turned off inside it, and the folder
    this process imported neardup from first on ``PYTHONPATH`` (it imports the same files)."""
    home = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rest = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        NO_WARM_ENV: "1",
        "PYTHONPATH": home if not rest else home + os.pathsep + rest,
    }


@dataclass
class Helper:
    """A compile helper started by :func:`start_helper`: its process, and the scratch folder
    it works in (``scratch``, where asked for), removed when it is stopped."""

    process: subprocess.Popen[bytes]
    scratch: str | None = None


def start_helper(module: str, *args: str, scratch: str | None = None) -> Helper | None:
    """Start a process that compiles kernels into the shared cache while this one compiles
    others (``python -P -m module args``: :func:`helper_command`), stopped when this process
    exits; None where there is no one to share with (``NEARDUP_NO_WARM=1``, inside a helper,
    a cache of this process only) or it cannot start (this process then compiles everything
    itself, as without it). Nothing is shared but the cache: numba writes its entries
    atomically, and a kernel the helper has cached loads instead of compiling.

    ``scratch``: the prefix of a folder made in the temporary directory for the helper to work
    in, passed as its last argument. This process removes it when it stops the helper (a
    stopped helper cannot: it is terminated), and the helper should remove it when it ends on
    its own (this process may be gone by then)."""
    if os.environ.get(NO_WARM_ENV) == "1" or cache_location().source == "process":
        return None
    folder = tempfile.mkdtemp(prefix=scratch) if scratch is not None else None
    try:
        process = subprocess.Popen(
            helper_command(module, *args, *([folder] if folder is not None else [])),
            env=helper_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        return None
    helper = Helper(process, folder)
    atexit.register(stop_helper, helper)
    return helper


def stop_helper(helper: Helper | None) -> None:
    """Stop a helper from :func:`start_helper` that is still compiling (what it cached stays;
    one that does not end within 2 s of being asked is killed) and remove its scratch folder."""
    if helper is None:
        return
    process = helper.process
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=2.0)
    if helper.scratch is not None:
        shutil.rmtree(helper.scratch, ignore_errors=True)


def compiled_or_cached(dispatcher: Any) -> bool:
    """Whether calling ``dispatcher`` (a kernel) loads compiled code rather than compiling:
    it has run in this process, or the kernel cache holds an entry made from its current
    source. A path that has a slower way needing no compile can take it while this is False
    and the work is small (a first run's compile is seconds). numba's cache index is private
    to numba: where reading it fails, True (the caller takes the kernel, as without this)."""
    if dispatcher.signatures:
        return True
    try:
        return bool(dispatcher._cache._cache_file._load_index())
    except Exception:  # (numba's internals changed: behave as before)
        return True


install()
nb_event.register("numba:compile", _CompileListener())


# ---------------------------------------------------------------------------------- kernels
_F = TypeVar("_F", bound=Callable[..., object])


class KernelOptions(TypedDict, total=False):
    """The ``numba.njit`` options a :func:`kernel` may set: every one but ``cache``."""

    nogil: bool
    parallel: bool
    inline: Literal["never", "always"]
    fastmath: bool | set[str]
    error_model: Literal["python", "numpy"]
    boundscheck: bool | None
    looplift: bool
    forceinline: bool
    debug: bool
    locals: Mapping[str, Any]


@overload
def kernel(function: _F, /) -> Dispatcher[_F]: ...
@overload
def kernel(
    signature: str | Any | None = None, /, **options: Unpack[KernelOptions]
) -> Callable[[_F], Dispatcher[_F]]: ...
def kernel(signature_or_function: Any = None, /, **options: Any) -> Any:
    """``numba.njit`` with ``cache=True`` always on: the one decorator of neardup's kernels.

    Used as ``@kernel`` or ``@kernel(...)`` with ``numba.njit``'s positional signature and
    keyword options (``nogil``, ``parallel``, ``inline``, ``fastmath``, ...), and returns
    numba's own dispatcher: kernels call other kernels, which needs real dispatchers, not a
    proxy. Without a signature the dispatcher compiles (or loads from the cache) at its first
    call; with one, numba does it at decoration time, as ``njit`` does.

    Why one decorator: numba picks a kernel's cache locator when the dispatcher is created, so
    :class:`NeardupCacheLocator` must be installed before the first kernel of any module is
    decorated, or that module's kernels are cached inside the installed package again. ``kernel`` lives in this module, so using it imports this module (and installs the
    locator) first: no side-effect import to remember, no ordering to keep. And every kernel is
    cached: ``cache`` cannot be passed (a cache turned off would recompile it in every
    process), a ``TypeError`` when it is. In a kernel module::

        from .._jit import kernel

        @kernel(nogil=True, inline="always")
        def _twice(x):
            return 2 * x
    """
    if "cache" in options:
        raise TypeError(
            "kernel() always caches (in neardup's kernel cache folder, never the package): "
            "drop the cache argument"
        )
    return numba.njit(signature_or_function, cache=True, **options)


# ------------------------------------------------------------------------------- intrinsics
def _popcount64(typingctx: Any, x: Any) -> tuple[Any, Any]:
    """Typing and LLVM code of :data:`popcount64`."""
    sig = types.uint64(types.uint64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.ctpop(args[0])

    return sig, codegen


#: ``popcount64(x)``: the set bits of a uint64 as a uint64 (LLVM ``ctpop``: one POPCNT
#: instruction where the CPU has it): the one popcount of neardup's kernels (Hamming
#: distances, the LCS bit vectors). A numba intrinsic, typed Any: called from kernels only
popcount64: Any = intrinsic(_popcount64)


def _load_u32(typingctx: Any, arr: Any, at: Any) -> tuple[Any, Any] | None:
    """Typing and LLVM code of :data:`load_u32`."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.uint8 and arr.ndim == 1):
        return None
    if not isinstance(at, types.Integer):
        return None
    sig = types.uint32(arr, at)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        from llvmlite import ir

        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.gep(ary.data, [args[1]])
        word = builder.bitcast(ptr, ir.IntType(32).as_pointer())
        return builder.load(word, align=1)

    return sig, codegen


#: ``load_u32(bytes_u8, at)``: the 4 bytes of a 1-D uint8 array from byte ``at`` as a uint32,
#: in the machine's order (little-endian on every platform neardup's formats are read on), in
#: one unaligned load: a packed field is read as one word, shifted and masked, instead of byte
#: by byte (an indexed load and a shift each). No bounds check: the caller guarantees
#: ``at + 4`` bytes are readable (packed arrays keep slack after their end).
load_u32: Any = intrinsic(_load_u32)


def _emit_prefetch(context: Any, builder: Any, signature: Any, args: Any) -> Any:
    """LLVM code of a prefetch of ``args[0][args[1:]]``: a read, kept in every cache level."""
    from llvmlite import ir
    from numba.core import cgutils

    aryty, *idx_tys = signature.args
    ary = context.make_array(aryty)(context, builder, args[0])
    idx = [context.cast(builder, v, t, types.intp) for v, t in zip(args[1:], idx_tys, strict=True)]
    # (no wraparound, no bounds check: a prefetch of any address is harmless)
    ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx)
    i8p = ir.IntType(8).as_pointer()
    i32 = ir.IntType(32)
    fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
    fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
    # read (0), high temporal locality (3), data cache (1)
    builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
    return context.get_dummy_value()


def _prefetch(typingctx: Any, arr: Any, at: Any) -> tuple[Any, Any] | None:
    """Typing of :data:`prefetch`."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1 and isinstance(at, types.Integer)):
        return None
    return types.void(arr, at), _emit_prefetch


def _prefetch2d(typingctx: Any, arr: Any, i: Any, j: Any) -> tuple[Any, Any] | None:
    """Typing of :data:`prefetch2d`."""
    if not (isinstance(arr, types.Array) and arr.ndim == 2):
        return None
    if not (isinstance(i, types.Integer) and isinstance(j, types.Integer)):
        return None
    return types.void(arr, i, j), _emit_prefetch


#: ``prefetch(array, i)``: ask the CPU to bring element ``i`` of a 1-D array into cache, without
#: waiting for it (LLVM ``llvm.prefetch``: a PREFETCHT0 on x86); no effect on results. Never
#: faults, so ``i`` may lie outside the array. For searches run in lockstep: one pass asks for
#: every search's next line, the next pass reads them, and their misses overlap
#: (``neardup.index.section_search``). Called from kernels only.
prefetch: Any = intrinsic(_prefetch)
#: ``prefetch2d(array, i, j)``: :data:`prefetch` of ``array[i, j]`` (the SimHash tables' probes)
prefetch2d: Any = intrinsic(_prefetch2d)
