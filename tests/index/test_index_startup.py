"""A new process builds an IndexSet without compiling anything (issue 24: restart time).

numba never caches ``numba.typed.List``'s own Python-side methods (``empty_list``, ``append``,
``len``), so calling them compiled them again in every new process: seconds of a ``neardup
serve`` restart spent in ``IndexSet.__init__``. The set's typed lists are made and filled by
cached kernels instead (``neardup._typed.typed_list_like`` / ``typed_list_append``).
This test warms the kernel cache in the test process, then builds the same sets in a fresh
process and counts numba's ``numba:compile`` events (fired for real compiles, not cache
loads) while the sets are built and searched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from neardup.index import HammingIndex
from neardup.index.multi import IndexSet

_HERE = Path(__file__).resolve().parent
if str(_HERE.parent) not in sys.path:  # run as a script (below): tests/ holds the doubles
    sys.path.insert(0, str(_HERE.parent))

from doubles import compiled_names  # noqa: E402


def _indexes(bits: int) -> tuple[list[HammingIndex], HammingIndex]:
    """Whole indexes (tables, compressed, one with an append buffer) and a sealed one."""
    rng = np.random.default_rng(bits)
    shape: tuple[int, ...] = (3000,) if bits == 64 else (3000, 2)
    fps = rng.integers(0, 2**64, shape, dtype=np.uint64)
    whole = []
    for i, comp in enumerate((False, True, True)):
        ix = HammingIndex(
            bits=bits, max_distance=3, expected_size=1000, compress=comp, layout="tables"
        )
        ix.add(fps[i * 1000 : (i + 1) * 1000 - 1], ids=np.arange(i * 1000, (i + 1) * 1000 - 1))
        ix.optimize()
        whole.append(ix)
    whole[2].add(fps[2999:], ids=[2999])  # an append buffer: searched apart
    sealed = HammingIndex(bits=bits, max_distance=3, buffer_size=64)
    sealed.add(fps[:200] ^ np.uint64(1), ids=np.arange(10**6, 10**6 + 200))
    return whole, sealed


def _work() -> dict[str, Any]:
    """Build and search the sets; the names of what numba compiled meanwhile."""
    out: dict[str, Any] = {}
    for bits in (64, 128):
        whole, sealed = _indexes(bits)
        with compiled_names() as compiled:
            t0 = time.perf_counter()
            sets = [IndexSet(whole, sealed=[sealed]), IndexSet([]), IndexSet(whole[1:2])]
            set_s = time.perf_counter() - t0
            q = np.concatenate([whole[0].get([5, 6]), whole[1].get([1005])]).reshape(3, -1)
            hits = [len(s.search(q if bits == 128 else q[:, 0], 3)[1]) for s in sets]
            whole[1].search(q if bits == 128 else q[:, 0], 3)  # a compressed segment's own list
        out[str(bits)] = {
            "compiled": compiled,
            "segments": [(s.segments, s._n_csegs, len(s._rest)) for s in sets],
            "hits": hits,
            "set_s": set_s,
        }
    return out


def _fresh_process() -> dict[str, Any]:
    """:func:`_work` in a new Python process (same environment, so the same kernel cache)."""
    code = (
        "import json, sys; sys.path[:0] = sys.argv[1:3]; "
        "import test_index_startup as t; print(json.dumps(t._work()))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(_HERE), str(_HERE.parent)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
        check=True,
    )
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def test_a_new_process_builds_an_index_set_without_compiling() -> None:
    here = _work()  # compiles what is missing and writes it to the kernel cache
    child = _fresh_process()
    for bits in ("64", "128"):
        assert child[bits]["compiled"] == [], child[bits]["compiled"]
        assert child[bits]["segments"] == [list(t) for t in here[bits]["segments"]]
        assert child[bits]["hits"] == here[bits]["hits"]
        # every path is covered: table and compressed segments in one set, an index apart
        assert child[bits]["segments"][0] == [2, 1, 1]
        assert min(child[bits]["hits"][0], child[bits]["hits"][2]) > 0


if __name__ == "__main__":
    # ``python tests/index/test_index_startup.py``: seconds to build the three sets of each width in
    # two fresh processes (the kernel cache warmed first), and what they compiled
    _work()
    for _ in range(2):
        r = _fresh_process()
        got = {b: {"set_s": round(v["set_s"], 3), "compiled": v["compiled"]} for b, v in r.items()}
        print(json.dumps(got), "load", os.getloadavg())
