"""The package's import graph, read from the source with :mod:`ast` (no imports executed).

Used by ``tests/test_imports.py`` (no cycles, private names stay home) and runnable for the
cross-wing import counts the architecture notes quote::

    python tests/import_graph.py            # wings, edges between them, cycles
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "neardup"


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = mod.split(".")
    if not is_pkg:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(
    include_type_checking: bool = False,
) -> dict[str, list[tuple[str, list[str], int]]]:
    """module -> [(imported module, names taken from it, line)] for neardup's own modules.

    ``from a.b import c`` where ``a.b.c`` is a module counts as an import of ``a.b.c``.
    Imports under ``if TYPE_CHECKING:`` are left out unless asked for (they do not run)."""
    mods = modules()
    out: dict[str, list[tuple[str, list[str], int]]] = {}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip: set[int] = set()
        if not include_type_checking:
            for node in ast.walk(tree):
                if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                    for sub in node.body:
                        for n in ast.walk(sub):
                            skip.add(id(n))
        edges: list[tuple[str, list[str], int]] = []
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "neardup" or a.name.startswith("neardup."):
                        edges.append((a.name, [], node.lineno))
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(mod, path.name == "__init__.py", node)
                if not (target == "neardup" or target.startswith("neardup.")):
                    continue
                plain: list[str] = []
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    if sub in mods:
                        edges.append((sub, [], node.lineno))
                    else:
                        plain.append(a.name)
                if plain or not node.names:
                    edges.append((target, plain, node.lineno))
        out[mod] = edges
    return out


def graph(include_type_checking: bool = False) -> dict[str, set[str]]:
    mods = modules()
    g: dict[str, set[str]] = {m: set() for m in mods}
    for mod, edges in imports(include_type_checking).items():
        for target, _names, _line in edges:
            t = target
            while t not in mods and "." in t:
                t = t.rsplit(".", 1)[0]
            if t in mods and t != mod:
                g[mod].add(t)
    return g


def _parents(mod: str) -> list[str]:
    parts = mod.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative).

    A package's ``__init__`` re-exporting its own submodules is not a cycle: edges from a
    module to one of its parent packages are dropped (importing ``a.b.c`` runs ``a.b``'s
    ``__init__`` first, and that one importing ``a.b.c`` back is the normal re-export)."""
    edges = {m: {t for t in ts if t not in _parents(m)} for m, ts in g.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def wing(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "<top>"


def wing_edges(g: dict[str, set[str]]) -> Counter[tuple[str, str]]:
    c: Counter[tuple[str, str]] = Counter()
    for m, ts in g.items():
        for t in ts:
            a, b = wing(m), wing(t)
            if a != b:
                c[(a, b)] += 1
    return c


def private_uses() -> list[tuple[str, str, str, int]]:
    """(importer, module, private name, line) where a module takes a ``_name`` -- or imports a
    ``_module`` -- that belongs to another wing (``neardup.<wing>``). The package's top-level
    private helpers (``neardup._jit``, ``neardup._arrays``, ...) are shared by every wing."""
    out = []
    for mod, edges in imports(include_type_checking=True).items():
        for target, names, line in edges:
            if wing(target).startswith("_") or wing(target) == wing(mod):
                continue
            for n in names:
                if n.startswith("_") and not n.startswith("__"):
                    out.append((mod, target, n, line))
            if any(p.startswith("_") and not p.startswith("__") for p in target.split(".")[2:]):
                out.append((mod, target, "<module>", line))
    return out


def main() -> None:
    g = graph()
    print(f"{len(g)} modules, {sum(map(len, g.values()))} internal import edges")
    we = wing_edges(g)
    print(f"cross-wing edges: {sum(we.values())} between {len(we)} wing pairs")
    for (a, b), n in sorted(we.items()):
        print(f"  {a:>12} -> {b:<12} {n}")
    cyc = cycles(g)
    print(f"cycles: {len(cyc)}")
    for c in cyc:
        print("  " + " <-> ".join(c))
    pv = private_uses()
    print(f"private names taken from another package: {len(pv)}")
    for row in pv[: int(sys.argv[1]) if len(sys.argv) > 1 else 400]:
        print(f"  {row[0]}:{row[3]} takes {row[2]} from {row[1]}")


if __name__ == "__main__":
    main()
