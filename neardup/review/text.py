"""Explanations and alignments as text for a person (``neardup explain``'s output) and the
shortened alignment runs the review report draws."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# (DiffRun and Explanation come from .explain, which imports this module: typed as Any here)
DiffRun = Any
Explanation = Any

__all__ = ["Shown", "explanation_text", "join_tokens", "rule_sentence", "shorten_runs"]


def _cjk(tok: str) -> bool:
    return len(tok) == 1 and unicodedata.east_asian_width(tok) in ("W", "F")


def join_tokens(tokens: Sequence[str]) -> str:
    """Tokens as text: a space between two tokens unless both are single CJK characters (the
    verifier's one-token-per-character scripts read without spaces)."""
    out: list[str] = []
    prev = ""
    for t in tokens:
        if out and not (_cjk(prev) and _cjk(t)):
            out.append(" ")
        out.append(t)
        prev = t
    return "".join(out)


@dataclass(frozen=True)
class Shown:
    """One displayed run: ``op`` as in :class:`~neardup.review.explain.DiffRun`, or ``"gap"``
    for ``skipped`` equal tokens left out; ``a`` / ``b`` the tokens shown (a changed run
    longer than the limit keeps its start, ``cut_a`` / ``cut_b`` tokens are left out)."""

    op: str
    a: tuple[str, ...]
    b: tuple[str, ...]
    skipped: int = 0
    cut_a: int = 0
    cut_b: int = 0


def shorten_runs(runs: Sequence[DiffRun], *, context: int = 6, max_run: int = 40) -> list[Shown]:
    """The runs to show: an equal run longer than ``2 * context`` tokens keeps ``context``
    tokens at each end that touches a change (a gap stands for the rest); a changed run keeps
    ``max_run`` tokens a side."""
    out: list[Shown] = []
    last = len(runs) - 1
    for i, r in enumerate(runs):
        if r.op == "equal":
            toks = r.a
            head = context if i > 0 else 0  # after a change: its context
            tail = context if i < last else 0  # before a change
            if len(toks) <= head + tail + context:
                out.append(Shown("equal", toks, toks))
                continue
            if head:
                out.append(Shown("equal", toks[:head], toks[:head]))
            out.append(Shown("gap", (), (), skipped=len(toks) - head - tail))
            if tail:
                out.append(Shown("equal", toks[-tail:], toks[-tail:]))
        else:
            out.append(
                Shown(
                    r.op,
                    r.a[:max_run],
                    r.b[:max_run],
                    cut_a=max(0, len(r.a) - max_run),
                    cut_b=max(0, len(r.b) - max_run),
                )
            )
    return out


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def rule_sentence(e: Explanation, rule: str | None = None) -> str:
    """The rule that decided the pair, with its numbers, in one line."""
    rule = rule or e.rule
    th = e.thresholds
    sim = e.similarity if e.similarity is not None else e.score
    short = min(e.tokens)
    if rule == "none":
        return "no candidate channel finds the pair, so a run never compares it"
    if rule == "exact":
        return "exact copies: the same text after normalisation (NFKC, case, whitespace)"
    if rule == "similarity":
        return f"similarity {_f(sim)} >= threshold {th['threshold']}"
    if rule == "containment":
        return (
            f"containment {_f(e.containment)} >= {th['containment']} (similarity {_f(sim)} < "
            f"threshold {th['threshold']}; the shorter text has {short} >= "
            f"{th['min_containment_tokens']} tokens)"
        )
    if rule == "trusted":
        return (
            f"trusted: SimHash distance {e.simhash['distance']} <= trust_distance "
            f"{th['trust_distance']} (both texts long)"
        )
    if rule == "unverified":
        return "unverified: a candidate is a duplicate (verify=False)"
    if rule == "bound":
        return (
            f"token-overlap bound {_f(e.score)} below the thresholds (exact similarity "
            f"{_f(e.similarity)}, containment {_f(e.containment)})"
        )
    if min(e.tokens) == 0:
        return "a text has no tokens"
    if th["containment"] > 1.0:
        cont = "containment off"
    elif short < th["min_containment_tokens"]:
        cont = (
            f"containment not considered (the shorter text has {short} < "
            f"{th['min_containment_tokens']} tokens)"
        )
    else:
        cont = f"containment {_f(e.containment)} < {th['containment']}"
    return f"similarity {_f(sim)} < threshold {th['threshold']}; {cont}"


def _channels(e: Explanation) -> list[str]:
    lines = []
    m, s = e.minhash, e.simhash
    if m["mode"] == "lsh" and not e.exact:
        bands = m.get("shared_bands", [])
        shown = ", ".join(map(str, bands[:12])) + (", ..." if len(bands) > 12 else "")
        lines.append(
            f"  minhash: {'finds it' if m['found'] else 'does not find it'}: "
            f"{len(bands)} of {m['bands']} bands shared ({m['bands']} x {m['rows']} rows, planned "
            f"for threshold {m['threshold']})"
            + (f" [{shown}]" if bands else "")
            + f"; {m.get('agreement', 0)} of {m['hashes']} values agree (needs "
            f">= {m['min_agreement']})"
        )
    if not e.exact:
        passes = ", ".join(f"{name} <= {p['distance']}" for name, p in sorted(s["passes"].items()))
        lines.append(
            f"  simhash: {'finds it' if s['found'] else 'does not find it'}: distance "
            f"{s['distance']} of {s['bits']} bits" + (f" (passes: {passes})" if passes else "")
        )
    else:
        lines.append("  exact: the same normalised content hash (copies skip the other channels)")
    return lines


def explanation_text(e: Explanation, *, context: int = 6, max_run: int = 40) -> str:
    """:meth:`Explanation.to_text`."""
    a, b = e.ids
    lines = [
        f"A{'' if a == 'A' else ': ' + a} ({e.chars[0]:,} chars, {e.tokens[0]:,} tokens)",
        f"B{'' if b == 'B' else ': ' + b} ({e.chars[1]:,} chars, {e.tokens[1]:,} tokens)",
        "",
        f"decision: {e.decision}" + (f" ({e.rule})" if e.candidate else ""),
        f"  rule: {rule_sentence(e)}",
    ]
    if not e.candidate:
        lines.append(f"  the verifier alone would say: {e.verdict}: {rule_sentence(e, e.verdict)}")
    k = e.keep
    if e.duplicate:
        if k["dropped"] and k["kept"]:
            who = {"A": a, "B": b}
            lines.append(
                f"  keep={k['policy']}: {who[k['dropped'][0]]} is dropped for {who[k['kept'][0]]}"
            )
        elif not k["kept"]:
            lines.append("  keep=none: both are dropped")
        else:
            lines.append(
                f"  keep={k['policy']}: neither is dropped: length guard (one text is "
                f"{k['length_ratio']}x the other's length, over {k['max_length_ratio']}x: a "
                "longer text is never dropped for an excerpt)"
            )
    lines.append("")
    lines.append(
        "candidate channels: " + (", ".join(e.channels) if e.channels else "none (not compared)")
    )
    lines.extend(_channels(e))
    lines.append(
        f"  fingerprints: A {e.simhash['fingerprints'][0]}  B {e.simhash['fingerprints'][1]}"
    )
    lines.append("")
    if e.alignment is None:
        lines.append("alignment: not computed (see notes)")
    else:
        c = e.counts()
        lines.append(
            f"alignment A -> B: LCS {e.lcs} tokens; {c['equal']} equal, {c['inserted']} "
            f"inserted, {c['deleted']} deleted, {c['replaced_a']} -> {c['replaced_b']} replaced"
        )
        lines.extend(_diff_lines(e.alignment, context=context, max_run=max_run))
    for note in e.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def _diff_lines(runs: Sequence[Any], *, context: int, max_run: int) -> list[str]:
    out = []
    for r in shorten_runs(runs, context=context, max_run=max_run):
        cut = lambda n: f" ... (+{n})" if n else ""  # noqa: E731
        if r.op == "gap":
            out.append(f"    ... {r.skipped} equal tokens ...")
        elif r.op == "equal":
            out.append(f"  = {join_tokens(r.a)}")
        elif r.op == "insert":
            out.append(f"  + {join_tokens(r.b)}{cut(r.cut_b)}")
        elif r.op == "delete":
            out.append(f"  - {join_tokens(r.a)}{cut(r.cut_a)}")
        else:
            out.append(
                f"  ~ {join_tokens(r.a)}{cut(r.cut_a)}  ->  {join_tokens(r.b)}{cut(r.cut_b)}"
            )
    return out
