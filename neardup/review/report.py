"""The review report of a run: what a person reads to judge a dedup run.

:func:`build_review` gathers, at the end of a run (texts still at hand), everything the report
shows into one JSON document (``review.json``, :data:`REVIEW_FORMAT` version
:data:`REVIEW_VERSION`): the run's summary, the cluster sizes, the verified candidates' scores by
rule (``stats["candidate_scores"]``), the dropped documents by language and length, and a sample
of clusters (the largest, then random ones drawn with a fixed seed), each with its kept document
and the alignment of every dropped one against it (:func:`neardup.review.explain.align`, the
verifier's tokens). :func:`render_report` turns it into one self-contained HTML file
(:mod:`.report_html`); :func:`write_report` does both ends for a run folder.

Caps (so a report of a 10 M-document run stays a few MB): ``largest`` + ``random`` clusters
(default 20 + 20), ``members`` dropped documents shown per cluster (10), ``text_chars`` characters
of a kept text (2,000), and each alignment shortened to ``context`` tokens around every change
and at most ``diff_tokens`` tokens shown (400), a run's text at most ``diff_chars`` characters
(600) and a diff's at most ten times that (long tokens: URLs, base64).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._arrays import find_sorted
from ..errors import FormatError, InputError, UnsupportedVersionError

__all__ = [
    "LENGTH_EDGES",
    "REVIEW_FORMAT",
    "REVIEW_NAME",
    "REVIEW_VERSION",
    "build_review",
    "load_review",
    "render_report",
    "review_writer",
    "save_review",
    "write_report",
]

REVIEW_FORMAT = "neardup-review"
#: version of ``review.json``; nothing is released, so a change stays version 1
REVIEW_VERSION = 1
#: the review data's file name in a run folder
REVIEW_NAME = "review.json"
#: length buckets (characters) of the language x length table; the last is open
LENGTH_EDGES = (0, 100, 200, 500, 1_000, 2_000, 5_000, 10_000)
#: summary keys left out of the review (long lists that say nothing to a reviewer)
_SUMMARY_SKIP = {"skipped_list", "candidate_scores"}


def _lengths(texts: Sequence[str]) -> npt.NDArray[np.int64]:
    from ..io.texts import SpanTexts

    if isinstance(texts, SpanTexts):
        return texts.lengths()
    return np.fromiter(map(len, texts), np.int64, len(texts))


def _languages(texts: Sequence[str]) -> tuple[list[str], npt.NDArray[np.int64]]:
    """(language names, code per text): ``neardup.text.detect_lang`` (ASCII: en, without
    decoding a span)."""
    from ..io.texts import SpanTexts
    from ..text.tokenize import detect_lang

    n = len(texts)
    if isinstance(texts, SpanTexts):
        ascii_ = texts.ascii_mask()
    else:
        ascii_ = np.fromiter((t.isascii() for t in texts), np.bool_, n)
    names = ["en", "zh", "other"]
    code = np.zeros(n, np.int64)
    for i in np.flatnonzero(~ascii_).tolist():
        code[i] = names.index(detect_lang(texts[i]))
    return names, code


def _pair_lookup(result: Any) -> tuple[npt.NDArray[np.int64], int]:
    """Codes ``a * n + b`` of the result's pairs (sorted: pairs are sorted by (a, b))."""
    n = max(len(result.ids), 1)
    p = result.pairs
    return p.a * n + p.b, n


def _clipped(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and a mark of how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [+{len(text) - limit:,} characters]"


def build_review(
    result: Any,
    texts: Sequence[str],
    summary: dict[str, Any] | None = None,
    *,
    seed: int = 0,
    largest: int = 20,
    random: int = 20,
    members: int = 10,
    text_chars: int = 2_000,
    context: int = 6,
    diff_tokens: int = 400,
    diff_chars: int = 600,
) -> dict[str, Any]:
    """The review data of a run (JSON types): ``result`` (a :class:`neardup.DedupResult`) over
    ``texts`` (the texts it was run on); ``summary`` the run's summary (default
    ``result.stats``). Caps in the module documentation; the random clusters are drawn with
    ``numpy.random.default_rng(seed)`` from the clusters not among the largest."""
    from ..verify.rule import RULE_NAMES, Verifier
    from .explain import align
    from .text import join_tokens, shorten_runs

    stats = dict(summary if summary is not None else result.stats)
    n = len(result.ids)
    if len(texts) != n:
        raise InputError(f"build_review() got {len(texts)} texts for a run over {n} documents")
    root = np.asarray(result.root, np.int64)
    keep = np.asarray(result.keep, bool)
    sizes = np.bincount(root, minlength=n) if n else np.zeros(0, np.int64)
    roots = np.flatnonzero(sizes > 1)
    size_hist = np.unique(sizes[roots], return_counts=True)
    codes, m = _pair_lookup(result)
    p = result.pairs

    def pair_of(x: int, y: int) -> int | None:
        lo, hi = min(x, y), max(x, y)
        k = int(np.searchsorted(codes, lo * m + hi))
        return k if k < codes.size and codes[k] == lo * m + hi else None

    # dropped documents: exact copies of their root, or near duplicates (incl. unlisted pairs)
    dropped = np.flatnonzero(~keep)
    lo, hi = np.minimum(dropped, root[dropped]), np.maximum(dropped, root[dropped])
    k_ok, listed = find_sorted(codes, lo * m + hi)
    exact = np.zeros(n, bool)
    exact[dropped[listed]] = p.stage[k_ok[listed]] == 0
    near = ~keep & ~exact
    lengths = _lengths(texts)
    names, lang = _languages(texts)
    bucket = np.searchsorted(np.asarray(LENGTH_EDGES[1:]), lengths, side="right")
    rows = []
    # the run's own documents (an incremental run's view puts the stored documents that
    # dropped something first: shown in clusters, not counted as the run's)
    own = np.arange(n) >= int(getattr(result, "stored", 0))
    for li, name in enumerate(names):
        for bi in range(len(LENGTH_EDGES)):
            sel = (lang == li) & (bucket == bi) & own
            docs = int(sel.sum())
            if docs:
                rows.append(
                    {
                        "lang": name,
                        "bucket": bi,
                        "documents": docs,
                        "dropped_exact": int((sel & exact).sum()),
                        "dropped_near": int((sel & near).sum()),
                    }
                )
    verifier = Verifier.from_config((stats.get("config") or {}).get("verifier") or {})

    # the sample: largest clusters first (ties: earlier root), then random ones
    order = roots[np.lexsort((roots, -sizes[roots]))]
    big = order[:largest]
    rest = np.sort(order[largest:])
    rng = np.random.default_rng(seed)
    rand = (
        np.sort(rng.choice(rest, size=min(random, rest.size), replace=False)) if rest.size else rest
    )
    chosen = np.concatenate([big, rand])
    member_pos = np.flatnonzero(np.isin(root, chosen) & (root != np.arange(n)))
    by_root: dict[int, list[int]] = {}
    for x in member_pos.tolist():
        by_root.setdefault(int(root[x]), []).append(x)

    def member(r: int, x: int) -> dict[str, Any]:
        k = pair_of(r, x)
        al = align(verifier, texts[r], texts[x])
        shown: list[list[Any]] = []  # [op, A text, B text, equal tokens skipped, cut A, cut B]
        budget = diff_tokens
        chars = 10 * diff_chars  # the diff's characters, whatever its tokens' lengths
        if al.runs is not None:
            for s in shorten_runs(al.runs, context=context, max_run=min(40, diff_tokens)):
                if budget <= 0 or chars <= 0:  # the rest of the alignment is not shown
                    shown.append(["more", "", "", 0, 0, 0])
                    break
                budget -= len(s.a) + (len(s.b) if s.op != "equal" else 0)
                # an equal run's B text is its A text (kept once); a run's text is capped in
                # characters too, so long tokens (URLs, base64) keep the page small
                a_text = _clipped(join_tokens(s.a), diff_chars)
                b_text = "" if s.op == "equal" else _clipped(join_tokens(s.b), diff_chars)
                chars -= len(a_text) + len(b_text)
                shown.append([s.op, a_text, b_text, s.skipped, s.cut_a, s.cut_b])
        return {
            "id": result.ids[x],
            "chars": int(lengths[x]),
            "rule": None if k is None else RULE_NAMES[int(p.rule[k])],
            "score": None if k is None else round(float(p.score[k]), 4),
            "distance": None if k is None else int(p.distance[k]),
            "tokens": [len(al.tokens_a), len(al.tokens_b)],
            "lcs": al.lcs,
            "counts": al.counts() if al.runs is not None else None,
            "diff": shown if al.runs is not None else None,
        }

    clusters = []
    for kind, group in (("largest", big), ("random", rand)):
        for r in group.tolist():
            mem = by_root.get(r, [])
            text = texts[r]
            clusters.append(
                {
                    "kind": kind,
                    "size": int(sizes[r]),
                    "kept": {
                        "id": result.ids[r],
                        "kept": bool(keep[r]),
                        "chars": int(lengths[r]),
                        "text": text[:text_chars],
                        "cut": max(0, len(text) - text_chars),
                    },
                    "members": [member(r, x) for x in mem[:members]],
                    "more": max(0, len(mem) - members),
                }
            )
    rule_counts = np.bincount(p.rule, minlength=len(RULE_NAMES)) if len(p) else None
    return {
        "format": REVIEW_FORMAT,
        "version": REVIEW_VERSION,
        "summary": {k: v for k, v in stats.items() if k not in _SUMMARY_SKIP},
        "candidate_scores": stats.get("candidate_scores") or result.stats.get("candidate_scores"),
        "pair_rules": {}
        if rule_counts is None
        else {RULE_NAMES[i]: int(c) for i, c in enumerate(rule_counts.tolist()) if c},
        "cluster_sizes": [[int(s), int(c)] for s, c in zip(*size_hist, strict=True)],
        "by_language_length": {"length_edges": list(LENGTH_EDGES), "rows": rows},
        "clusters": clusters,
        "sample": {
            "seed": seed,
            "largest": largest,
            "random": random,
            "members": members,
            "text_chars": text_chars,
            "context": context,
            "diff_tokens": diff_tokens,
            "diff_chars": diff_chars,
            "clusters_in_run": int(roots.size),
        },
    }


def save_review(review: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Write the review data as JSON at ``path`` (atomically; ``neardup.io.atomic_open``)."""
    from ..io import atomic_open

    with atomic_open(os.fspath(path), "w", encoding="utf-8") as fh:
        json.dump(review, fh, ensure_ascii=False, separators=(",", ":"))
        fh.write("\n")


def load_review(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read review data (a run folder's ``review.json``, or the file); checks its format and
    version."""
    p = Path(path)
    if p.is_dir():
        p = p / REVIEW_NAME
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(
            f"no review data at {p}: run neardup dedup with --report (it writes {REVIEW_NAME} "
            "beside the report), then neardup report on that folder"
        ) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"{p}: not readable review data ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != REVIEW_FORMAT:
        raise FormatError(f"{p}: not neardup review data (no format {REVIEW_FORMAT!r})")
    if data.get("version") != REVIEW_VERSION:
        raise UnsupportedVersionError(
            f"{p}: review data version {data.get('version')!r}; this build reads version "
            f"{REVIEW_VERSION} (rerun neardup dedup --report)"
        )
    return data


def render_report(review: dict[str, Any]) -> str:
    """The review report as one self-contained HTML page (inline CSS and SVG; no script, no
    network): every text from the data is escaped."""
    from .report_html import render

    return render(review)


def write_report(run: str | os.PathLike[str], output: str | os.PathLike[str]) -> int:
    """``neardup report RUN -o OUTPUT``: render the review data of a run folder (or a
    ``review.json``) to ``output`` (atomically); returns the bytes written."""
    from ..io import atomic_open

    html = render_report(load_review(run)).encode("utf-8")
    with atomic_open(os.fspath(output), "wb") as fh:
        fh.write(html)
    return len(html)


def review_writer(
    report: str | os.PathLike[str], review: str | os.PathLike[str]
) -> Callable[[Any, Sequence[str], dict[str, Any]], None]:
    """The ``extra_outputs`` of :func:`neardup.batch.files.dedup_files` that ``neardup dedup
    --report`` passes: at the end of the run, the review data to ``review`` and its page to
    ``report`` (both through ``atomic_open``: published with the run's other outputs)."""

    def write(result: Any, texts: Sequence[str], summary: dict[str, Any]) -> None:
        from ..io import atomic_open

        data = build_review(result, texts, summary)
        save_review(data, review)
        with atomic_open(os.fspath(report), "wb") as fh:
            fh.write(render_report(data).encode("utf-8"))

    return write
