"""The house rules of docs/architecture.md, read from the source: no import cycles, wings
import only downwards, private names stay inside their wing, and the front-ends are drivers
over neardup.rules that never import each other."""

from __future__ import annotations

import import_graph as G

# Each wing may import the wings of a lower layer and its own; never a higher one. The order is
# the data flow: text -> features -> fingerprint/signatures -> candidates -> verification ->
# decision -> store/output, with the shells (CLI, service, cluster) on top. The decision
# (rules) sits under every front-end that applies it.
LAYERS: list[set[str]] = [
    {
        "<top>",
        "errors",
        "_jit",
        "_typed",
        "_arrays",
        "_gc",
        "_memory",
        "_lazy",
        "_threads",
        "_durable",
        "_reference",
        "_search",
    },
    {"text"},
    {"fingerprint"},
    {"index", "verify", "io"},
    {"rules", "store"},
    {"batch", "online", "distributed"},
    {"review", "incremental"},
    {"service"},
    {"cluster"},
    {"cli", "__main__"},
]

#: the front-ends: drivers over neardup.rules (the candidate plan, the verification rule, the
#: keep rule, the valves, the summary), none of which imports another
DRIVERS = {"batch", "online", "distributed", "cluster"}
#: the drivers a wing above them may import: review explains what the batch decided;
#: incremental composes the batch, or the distributed job on an engine (the new documents), and
#: the online store (those kept before)
READS = {"review": {"batch"}, "incremental": {"batch", "distributed", "online"}}


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


def test_drivers_never_import_each_other() -> None:
    between = sorted(
        f"{mod} -> {t}"
        for mod, targets in G.graph().items()
        for t in targets
        if G.wing(mod) in DRIVERS and G.wing(t) in DRIVERS and G.wing(mod) != G.wing(t)
    )
    assert between == []


def test_read_side_views_import_only_what_they_read() -> None:
    extra = sorted(
        f"{mod} -> {t}"
        for mod, targets in G.graph().items()
        for t in targets
        if G.wing(mod) in READS and G.wing(t) in DRIVERS and G.wing(t) not in READS[G.wing(mod)]
    )
    assert extra == []
