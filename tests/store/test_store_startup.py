"""A new process opens a store with segments and checks a document without compiling anything.

numba never caches ``numba.typed.List``'s own Python-side methods, so a store whose segments'
band sections (``neardup.index.section_search.SectionGroup``) and sketch sections
(``neardup.store.sketches.SegmentSketches``) were put in typed lists with ``List([...])``
compiled them again in every process: about a second of every ``Deduplicator.open`` (each
``neardup dedup --save`` run, each service start). The lists are made by cached kernels instead
(``neardup._typed.typed_list``). This test opens the same store in the test process (the kernel
cache warmed) and then in a fresh process, counting numba's ``numba:compile`` events (fired for
real compiles, not cache loads) while the store opens and checks a near copy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from doubles import compiled_names

from neardup.online import Deduplicator

_HERE = Path(__file__).resolve().parent

_WORDS = [
    "river",
    "stone",
    "quiet",
    "market",
    "lantern",
    "copper",
    "meadow",
    "signal",
    "harbor",
    "winter",
]


def _text(i: int) -> str:
    """A sentence of 24 words, distinct for each ``i``."""
    return " ".join(_WORDS[(i * 7 + j * (i % 5 + 1)) % 10] + str((i + j) % 13) for j in range(24))


def _fill(path: Path) -> None:
    """A store in ``lsh`` mode with texts, in two segments (band and sketch sections each)."""
    with Deduplicator.open(path, candidates="lsh", memtable_size=64) as d:
        for lo in (0, 100):
            d.add([{"id": f"d{i}", "text": _text(i)} for i in range(lo, lo + 100)])
            d.flush()


def _work(path: str) -> dict[str, Any]:
    """Open the store, check a near copy of a stored text; what numba compiled meanwhile."""
    with compiled_names() as compiled, Deduplicator.open(path) as d:
        segments = d.store.stats()["segments"]
        words = _text(150).split()
        words[5] = "changed"
        dec = d.check({"id": "q", "text": " ".join(words)})
    return {
        "compiled": compiled,
        "segments": segments,
        "matches": [m.id for m in dec.matches],
    }


def test_a_new_process_opens_a_store_without_compiling(tmp_path: Path) -> None:
    _fill(tmp_path / "s")
    here = _work(str(tmp_path / "s"))  # compiles what is missing into the kernel cache
    code = (
        "import json, sys; sys.path[:0] = sys.argv[1:3]; "
        "import test_store_startup as t; print(json.dumps(t._work(sys.argv[3])))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(_HERE), str(_HERE.parent), str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
        check=True,
    )
    child = json.loads(res.stdout.strip().splitlines()[-1])
    assert child["segments"] >= 2  # the segment paths are the ones under test
    assert child["matches"] == here["matches"]
    assert "d150" in child["matches"]
    assert child["compiled"] == [], child["compiled"]
