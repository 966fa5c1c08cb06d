"""The benchmark commands the docs cite name options their scripts take.

Docs give each figure with the command that measures it. A script's option can go while a doc
still cites it (docs/store.md cited ``bench_section_search.py --sparse-gaps`` for months after
the option had gone): a reader who runs it meets an argparse error instead of the figure. This
reads every ``python benchmarks/NAME.py ...`` command in backticks in the README and docs/
(not the CHANGELOG: history cites what existed then) and looks each ``--option`` up among the
option strings of the script and of the benchmark modules it imports (``bench_dedup.py
--peers`` hands its options to ``peers_dedup.py``).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"

_COMMAND = re.compile(r"`([^`]*?benchmarks/(\w+)\.py[^`]*)`", re.S)
_OPTION = re.compile(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)")
_LITERAL = re.compile(r"""["'](--[a-z0-9][a-z0-9-]*)["']""")
_IMPORT = re.compile(r"^\s*(?:from (\w+) import|import (\w+))", re.M)


@cache
def script_options(name: str) -> frozenset[str]:
    """The option strings of ``benchmarks/<name>.py`` and of the benchmark modules it imports."""
    src = (BENCH / f"{name}.py").read_text(encoding="utf-8")
    found = set(_LITERAL.findall(src))
    for a, b in _IMPORT.findall(src):
        dep = BENCH / f"{a or b}.py"
        if dep.exists() and dep.stem != name:
            found |= set(_LITERAL.findall(dep.read_text(encoding="utf-8")))
    return frozenset(found)


def cited(text: str) -> list[tuple[str, str]]:
    """(script name, option) of every option in every benchmark command cited in ``text``;
    (script name, "") for a command without options."""
    out: list[tuple[str, str]] = []
    for m in _COMMAND.finditer(text):
        command, name = m.group(1), m.group(2)
        # only what follows the script's path: an option before it belongs to something else
        rest = command[command.index(f"benchmarks/{name}.py") :]
        options = _OPTION.findall(rest)
        out += [(name, o) for o in options] or [(name, "")]
    return out


def _docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_every_benchmark_option_the_docs_cite_exists() -> None:
    wrong = []
    seen = 0
    for doc in _docs():
        for name, option in cited(doc.read_text(encoding="utf-8")):
            seen += 1
            where = doc.relative_to(ROOT)
            if not (BENCH / f"{name}.py").exists():
                wrong.append(f"{where}: benchmarks/{name}.py does not exist")
            elif option and option not in script_options(name):
                wrong.append(f"{where}: benchmarks/{name}.py has no option {option}")
    assert seen > 100  # (the docs cite benchmarks throughout: a broken pattern finds none)
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_a_cited_option_the_script_lacks_is_found() -> None:
    text = (
        "Measured (`python benchmarks/bench_section_search.py --segments 16\n"
        "--no-such-option 3`) and `nice -n 5 python benchmarks/bench_dedup.py --peers "
        "--corpora mix`, `python benchmarks/no_such_bench.py`."
    )
    assert cited(text) == [
        ("bench_section_search", "--segments"),
        ("bench_section_search", "--no-such-option"),
        ("bench_dedup", "--peers"),
        ("bench_dedup", "--corpora"),
        ("no_such_bench", ""),
    ]
    assert "--segments" in script_options("bench_section_search")
    assert "--sparse-gaps" in script_options("bench_section_search")
    assert "--no-such-option" not in script_options("bench_section_search")
    # bench_dedup.py --peers hands its options to peers_dedup.py
    assert "--corpora" in script_options("bench_dedup")
