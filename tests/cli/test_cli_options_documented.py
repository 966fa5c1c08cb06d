"""Every option of every ``neardup`` command is named in the reference page of that command
(docs are references: an option added without its line there fails here)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neardup.cli.main import command_tree

ROOT = Path(__file__).resolve().parents[2]

#: the page each command's options are documented in (a command's first word, or two words)
PAGES = {
    "fingerprint": "dedup.md",
    "dedup": "dedup.md",
    "eval": "dedup.md",
    "batch-query": "dedup.md",
    "idf": "dedup.md",
    "index": "dedup.md",
    "serve": "service.md",
    "store": "service.md",
    "cluster": "cluster.md",
    "explain": "review.md",
    "report": "review.md",
}


def _commands() -> Iterator[tuple[str, Any]]:
    root = command_tree()

    def walk(c: Any, path: list[str]) -> Iterator[tuple[str, Any]]:
        if hasattr(c, "commands"):  # a group
            for name, sub in c.commands.items():
                yield from walk(sub, [*path, name])
        else:
            yield " ".join(path), c

    yield from walk(root, [])


COMMANDS = dict(_commands())


def test_every_command_has_a_page() -> None:
    assert {name.split()[0] for name in COMMANDS} == set(PAGES)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_is_named_on_the_commands_page(name: str) -> None:
    page = ROOT / "docs" / PAGES[name.split()[0]]
    text = page.read_text(encoding="utf-8")
    options = [
        o
        for p in COMMANDS[name].params
        for o in [*p.opts, *p.secondary_opts]
        if o.startswith("--") and o != "--help"
    ]
    missing = [o for o in options if not re.search(re.escape(o) + r"(?![\w-])", text)]
    assert not missing, f"neardup {name}: {missing} not named in {page.name}"
