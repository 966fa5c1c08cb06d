"""The house rules of docs/architecture.md, read from the source: no import cycles, wings
import only downwards, and private names stay inside their wing."""

from __future__ import annotations

import import_graph as G

# Each wing may import the wings of a lower layer and its own; never a higher one. The order is
# the data flow: text -> features -> fingerprint/signatures -> candidates -> verification ->
# decision -> store/output, with the shells (CLI, service, cluster) on top.
LAYERS: list[set[str]] = [
    {"<top>", "errors", "_jit", "_arrays", "_lazy", "_threads", "_reference"},
    {"text"},
    {"fingerprint"},
    {"index", "verify", "io"},
    {"batch", "store"},
    {"online", "distributed", "review"},
    {"service"},
    {"cluster"},
    {"cli", "__main__"},
]


def _layer(wing: str) -> int:
    for i, wings in enumerate(LAYERS):
        if wing in wings:
            return i
    raise AssertionError(f"wing {wing!r} has no layer in tests/test_imports.py: give it one")


def test_no_import_cycles() -> None:
    assert G.cycles(G.graph()) == []


def test_wings_import_downwards() -> None:
    up = []
    for mod, targets in G.graph().items():
        for t in targets:
            a, b = G.wing(mod), G.wing(t)
            if a != b and _layer(b) > _layer(a) and a != "<top>":
                up.append(f"{mod} -> {t}")
    assert up == []


def test_private_names_stay_in_their_wing() -> None:
    assert G.private_uses() == []
