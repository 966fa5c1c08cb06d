"""The review report's HTML: one self-contained page from the review data
(:func:`neardup.review.report.build_review`).

Everything is inline (CSS, SVG charts); the page has no script and loads nothing (its
Content-Security-Policy says so: ``default-src 'none'``). Every string from the data (ids,
texts, tokens, paths) goes through :func:`html.escape` (texts are untrusted input), numbers are
formatted from numbers.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

__all__ = ["render"]

_CSS = """
:root{--ink:#1d232b;--mute:#5b6573;--line:#d9dee5;--bg:#fff;--soft:#f4f6f9;--acc:#2f6fb0;
--ok:#2e8b57;--cont:#17807e;--rej:#9aa3ad;--bound:#c9ced4;--del:#fbe3e3;--delt:#8c1c1c;
--ins:#e0f3e5;--inst:#185c2c}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","Noto Sans CJK SC",
sans-serif;color:var(--ink);background:var(--bg);margin:0}
header{background:#1d2b3a;color:#fff;padding:18px 28px}
header h1{margin:0;font-size:22px}header p{margin:4px 0 0;color:#c5d0dc;font-size:13px}
nav{padding:8px 28px;border-bottom:1px solid var(--line);background:var(--soft)}
nav a{margin-right:16px;color:var(--acc);text-decoration:none}
main{padding:0 28px 40px;max-width:1200px}
h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
p.note{color:var(--mute);font-size:12.5px;margin:4px 0 10px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
th,td{padding:3px 10px;border-bottom:1px solid var(--line);text-align:right}
th{background:var(--soft);font-weight:600}
td.l,th.l{text-align:left}
tr.current td{background:#fff6d6;font-weight:600}
.kv td:first-child{text-align:left;color:var(--mute)}
.kv td{text-align:left}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.card{border:1px solid var(--line);border-radius:6px;padding:8px 14px;min-width:120px}
.card b{display:block;font-size:20px}.card span{color:var(--mute);font-size:12px}
svg.chart{display:block;margin:6px 0;max-width:100%;height:auto}
svg text{font:11px system-ui,sans-serif;fill:var(--mute)}
.bar{fill:var(--acc)}.bar.similarity{fill:var(--ok)}.bar.containment{fill:var(--cont)}
.bar.trusted,.bar.unverified{fill:var(--acc)}.bar.below{fill:var(--rej)}.bar.bound{fill:var(--bound)}
.threshold{stroke:#c0392b;stroke-width:2;stroke-dasharray:4 3}
.legend span{display:inline-block;margin-right:14px;font-size:12px;color:var(--mute)}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px}
.meter{display:inline-block;height:9px;background:var(--acc);vertical-align:middle}
article.cluster{border:1px solid var(--line);border-radius:8px;margin:14px 0;padding:10px 14px}
article.cluster h3{margin-top:2px}
.kept pre{white-space:pre-wrap;word-break:break-word;background:var(--soft);padding:8px;
border-radius:4px;margin:4px 0;max-height:18em;overflow:auto;font-size:12.5px}
details.member{border-top:1px dashed var(--line);padding:6px 0}
details.member summary{cursor:pointer;color:var(--ink)}
.tag{display:inline-block;border-radius:3px;padding:0 6px;font-size:12px;background:var(--soft);
border:1px solid var(--line);margin-left:4px}
.diff{white-space:pre-wrap;word-break:break-word;font:12.5px/1.6 ui-monospace,Menlo,Consolas,
"Noto Sans Mono CJK SC",monospace;background:#fcfcfd;border:1px solid var(--line);
padding:6px 8px;border-radius:4px;margin:6px 0}
.diff del{background:var(--del);color:var(--delt);text-decoration:line-through}
.diff ins{background:var(--ins);color:var(--inst);text-decoration:none}
.diff .gap{color:var(--mute);font-style:italic}
.muted{color:var(--mute)}
code,pre,.diff,.tag{unicode-bidi:isolate}
code{overflow-wrap:anywhere}
.ctl{font-size:10px;color:var(--delt);border:1px solid var(--line);border-radius:2px;padding:0 2px}
"""

_RULE_COLOURS = ("similarity", "containment", "trusted", "unverified", "below", "bound")


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


#: bidirectional controls: in an id, shown as what they are (they would reorder the id on the
#: page: U+202E made "\u202eexe.ecioval" read "lavoice.exe")
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _id(x: Any) -> str:
    """An id, escaped, its bidirectional controls shown as ``U+202E`` marks."""
    text = str(x)
    if text.isascii() or not _BIDI.intersection(text):
        return _e(text)
    return "".join(
        f'<span class="ctl">U+{ord(c):04X}</span>' if c in _BIDI else _e(c) for c in text
    )


def _n(x: Any) -> str:
    if isinstance(x, bool) or x is None:
        return _e(x)
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        return f"{x:,.4g}" if abs(x) < 1e6 else f"{x:,.0f}"
    return _e(x)


def _int(x: Any) -> int:
    """``x`` when it is an int (a count of the summary), else 0."""
    return x if isinstance(x, int) and not isinstance(x, bool) else 0


def _count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _table(
    head: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    cls: str = "",
    left: int = 1,
    current: Sequence[bool] | None = None,
    ident: str = "",
) -> str:
    """An HTML table; ``head`` and ``rows`` are already-escaped HTML cells."""
    out = [
        f"<table{f' id={chr(34)}{ident}{chr(34)}' if ident else ''}"
        f"{f' class={chr(34)}{cls}{chr(34)}' if cls else ''}><thead><tr>"
    ]
    out += [f"<th{' class=l' if i < left else ''}>{h}</th>" for i, h in enumerate(head)]
    out.append("</tr></thead><tbody>")
    for r, row in enumerate(rows):
        mark = ' class="current"' if current is not None and current[r] else ""
        out.append(f"<tr{mark}>")
        out += [f"<td{' class=l' if i < left else ''}>{c}</td>" for i, c in enumerate(row)]
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _summary(rv: dict[str, Any]) -> str:
    s = rv.get("summary", {})
    cfg = s.get("config") or {}
    ver = cfg.get("verifier") or {}
    lsh = s.get("lsh") or {}
    verified = bool(cfg.get("verify", True))
    cards = [
        ("documents", s.get("documents")),
        ("kept", s.get("kept")),
        ("dropped", s.get("dropped")),
        ("exact duplicates", s.get("exact_duplicates")),
        ("near duplicates", s.get("near_duplicates")),
    ]
    if "dropped_for_store" in s:  # an incremental run (--against / --save)
        cards.append(("dropped for stored documents", s.get("dropped_for_store")))
    cards += [
        ("clusters", s.get("clusters")),
        ("pairs reported", s.get("pairs")),
        ("candidate pairs", s.get("candidates")),
        ("pairs verified", s.get("verified", 0) if verified else "off"),
    ]
    out = ['<div class="cards" id="summary-cards">']
    out += [f'<div class="card"><b>{_n(v)}</b><span>{_e(k)}</span></div>' for k, v in cards]
    out.append("</div>")
    rows = [
        ("inputs", ", ".join(map(str, s.get("inputs") or [])) or "(in memory)"),
        ("kept documents written to", s.get("output", "")),
        *(
            [
                (
                    "store",
                    f"{s.get('store')} ({'saved into' if s.get('saved') else 'checked against'}; "
                    f"{s.get('store_documents_before', 0):,} documents before, "
                    f"{s.get('store_documents_after', 0):,} after)",
                )
            ]
            if "store" in s
            else []
        ),
        ("keep policy", cfg.get("keep", "first")),
        ("candidates", cfg.get("candidates", "lsh")),
        (
            "verification",
            "on"
            if verified
            else "off (--no-verify): candidate pairs are accepted unverified; the threshold "
            "below only planned the MinHash channel",
        ),
        ("threshold (verifier)", ver.get("threshold")),
        (
            "containment",
            f"{ver.get('containment')} (shorter text >= "
            f"{ver.get('min_containment_tokens')} tokens)",
        ),
        (
            "MinHash plan",
            f"{lsh.get('bands', '?')} bands x {lsh.get('rows', '?')} rows, "
            f"planned for similarity {lsh.get('threshold', '?')}"
            if lsh
            else f"(SimHash only: distance {cfg.get('max_distance') or 'by length'})",
        ),
        ("elapsed", f"{s.get('elapsed_s', 0):.2f} s"),
        ("skipped records", s.get("skipped_records", 0)),
    ]
    if lsh.get("valve_bands"):
        rows.append(
            (
                "bucket valve",
                f"acted in {lsh['valve_bands']} bands: "
                f"{lsh.get('pairs_skipped', 0):,} pairs not compared",
            )
        )
    out.append(_table(["", ""], [[_e(k), _e(v)] for k, v in rows], cls="kv"))
    rules = rv.get("pair_rules") or {}
    if rules:
        out.append(
            '<p class="note">Reported pairs by the rule that decided them: '
            + ", ".join(f"{_e(k)} {_n(v)}" for k, v in rules.items())
            + ".</p>"
        )
    return "".join(out)


_SIZE_BUCKETS = (
    (2, 2),
    (3, 3),
    (4, 4),
    (5, 5),
    (6, 10),
    (11, 20),
    (21, 50),
    (51, 100),
    (101, 1000),
    (1001, None),
)


def _bars_svg(ident: str, labels: list[str], values: list[int], title: str) -> str:
    w, h, pad, top = 640, 200, 40, 18
    n = max(len(values), 1)
    slot = (w - pad - 10) / n
    peak = max([*values, 1])
    out = [
        f'<svg class="chart" id="{ident}" viewBox="0 0 {w} {h + 36}" width="{w}" '
        f'height="{h + 36}" role="img" aria-label="{_e(title)}">'
    ]
    out.append(f'<line x1="{pad}" y1="{h}" x2="{w - 10}" y2="{h}" stroke="#999"/>')
    for i, (lab, v) in enumerate(zip(labels, values, strict=True)):
        bh = 0 if v == 0 else max(1.0, (h - top) * v / peak)
        x = pad + i * slot + slot * 0.12
        out.append(
            f'<rect class="bar" x="{x:.1f}" y="{h - bh:.1f}" width="{slot * 0.76:.1f}" '
            f'height="{bh:.1f}" data-label="{_e(lab)}" data-count="{v}">'
            f"<title>{_e(lab)}: {v:,}</title></rect>"
        )
        out.append(
            f'<text x="{x + slot * 0.38:.1f}" y="{h - bh - 4:.1f}" '
            f'text-anchor="middle">{v:,}</text>'
        )
        out.append(
            f'<text x="{x + slot * 0.38:.1f}" y="{h + 16}" text-anchor="middle">{_e(lab)}</text>'
        )
    out.append(f'<text x="{pad}" y="{h + 30}">{_e(title)}</text></svg>')
    return "".join(out)


def _sizes(rv: dict[str, Any]) -> str:
    pairs = rv.get("cluster_sizes") or []
    labels, values = [], []
    for lo, hi in _SIZE_BUCKETS:
        labels.append(str(lo) if hi == lo else (f"{lo}-{hi}" if hi else f"{lo}+"))
        values.append(sum(c for s, c in pairs if s >= lo and (hi is None or s <= hi)))
    biggest = max((s for s, _ in pairs), default=0)
    return (
        _bars_svg("size-histogram", labels, values, "documents per cluster (kept + dropped)")
        + f'<p class="note">{_count(sum(c for _, c in pairs), "cluster")} of two or more; '
        f"the largest has {biggest:,} documents.</p>"
    )


def _scores(rv: dict[str, Any]) -> str:
    cs = rv.get("candidate_scores") or {}
    counts: dict[str, list[int]] = cs.get("counts") or {}
    bins = int(cs.get("bins") or 100)
    s = rv.get("summary", {})
    t_run = float(((s.get("config") or {}).get("verifier") or {}).get("threshold", 0.675))
    if not counts:
        return '<p class="note">No candidate pairs were verified in this run.</p>'
    # the chart: 20 bins of 0.05, stacked by rule
    step = max(1, bins // 20)
    groups = list(range(0, bins, step))
    w, h, pad, top = 640, 210, 40, 10
    slot = (w - pad - 10) / len(groups)
    stacks = [
        {r: sum(counts.get(r, [0] * bins)[g : g + step]) for r in _RULE_COLOURS} for g in groups
    ]
    peak = max([sum(x.values()) for x in stacks] + [1])
    out = [
        f'<svg class="chart" id="score-histogram" viewBox="0 0 {w} {h + 36}" width="{w}" '
        f'height="{h + 36}" role="img" aria-label="candidate pairs by score">'
    ]
    out.append(f'<line x1="{pad}" y1="{h}" x2="{w - 10}" y2="{h}" stroke="#999"/>')
    for i, (g, st) in enumerate(zip(groups, stacks, strict=True)):
        x, y = pad + i * slot + slot * 0.1, float(h)
        lo, hi = g / bins, (g + step) / bins
        for rule in _RULE_COLOURS:
            v = st[rule]
            if not v:
                continue
            bh = max(1.0, (h - top) * v / peak)
            y -= bh
            out.append(
                f'<rect class="bar {rule}" x="{x:.1f}" y="{y:.1f}" '
                f'width="{slot * 0.8:.1f}" height="{bh:.1f}" data-count="{v}">'
                f"<title>{rule}, score {lo:.2f}-{hi:.2f}: {v:,}</title></rect>"
            )
        if i % 2 == 0:
            out.append(f'<text x="{x:.1f}" y="{h + 14}">{lo:.1f}</text>')
    tx = pad + (t_run * bins / step) * slot
    out.append(
        f'<line class="threshold" x1="{tx:.1f}" y1="{top}" x2="{tx:.1f}" y2="{h}">'
        f"<title>threshold {t_run}</title></line>"
    )
    # the label beside the line, on its left when the line is near the right edge
    anchor = (f"{tx - 4:.1f}", "end") if tx > w - 100 else (f"{tx + 4:.1f}", "start")
    out.append(
        f'<text x="{anchor[0]}" y="{top + 10}" text-anchor="{anchor[1]}">threshold {t_run}</text>'
    )
    verified = bool((s.get("config") or {}).get("verify", True))
    caption = (
        "score of each verified candidate pair"
        if verified
        else "score of each candidate pair (not verified: --no-verify)"
    )
    out.append(f'<text x="{pad}" y="{h + 30}">{caption}</text></svg>')
    out.append(f'<div class="legend">{_legend(counts)}</div>')

    def at_least(rule: str, t: float) -> int:
        k = round(t * bins)
        return sum(counts.get(rule, [0] * bins)[k:])

    def below(rule: str, t: float) -> int:
        k = round(t * bins)
        return sum(counts.get(rule, [0] * bins)[:k])

    # grid thresholds are bin edges (exact counts); the run's own row is exact by definition
    grid = sorted({round(0.5 + 0.05 * i, 2) for i in range(10)} | {t_run})
    total = sum(counts.get("similarity", []))
    rows, cur = [], []
    for t in grid:
        if t == t_run:
            row = [total, 0, 0, 0]
        else:
            row = [at_least("similarity", t), below("similarity", t),
                   at_least("below", t) if t < t_run else 0,
                   at_least("bound", t) if t < t_run else 0]  # fmt: skip
        rows.append([f"{t:g}", *map(_n, row)])
        cur.append(t == t_run)
    out.append(
        _table(
            [
                "threshold",
                "similarity pairs kept",
                "similarity pairs dropped",
                "rejected pairs that would pass",
                "bound-rejected pairs that might pass",
            ],
            rows,
            current=cur,
            ident="threshold-table",
        )
    )
    other = {r: sum(counts.get(r, [])) for r in ("containment", "trusted", "unverified")}
    exact = (rv.get("pair_rules") or {}).get("exact", 0)
    out.append(
        '<p class="note">What moving <code>--threshold</code> does to this run\'s verified '
        "candidate pairs (first copies; exact copies and their repeats are not counted). The "
        "highlighted row is the run's threshold. Raising it drops the similarity pairs below "
        "it (unless their containment holds: the containment rule does not depend on the "
        "threshold); lowering it accepts the rejected pairs above it (a bound-rejected pair's "
        "score is an upper bound, so at most those). A lower threshold also plans the MinHash "
        "channel for less similar pairs, so a new run can find candidates this one did not. "
        "Unaffected: "
        + ", ".join(f"{k} {v:,}" for k, v in other.items() if v)
        + (", " if any(other.values()) else "")
        + f"exact {exact:,}; skipped (never verified) {cs.get('skipped', 0):,}.</p>"
    )
    return "".join(out)


def _legend(counts: dict[str, list[int]]) -> str:
    colours = {
        "similarity": "#2e8b57",
        "containment": "#17807e",
        "trusted": "#2f6fb0",
        "unverified": "#2f6fb0",
        "below": "#9aa3ad",
        "bound": "#c9ced4",
    }
    return "".join(
        f'<span><i style="background:{colours[r]}"></i>{_e(r)}</span>'
        for r in _RULE_COLOURS
        if any(counts.get(r, []))
    )


def _languages(rv: dict[str, Any]) -> str:
    data = rv.get("by_language_length") or {}
    edges = data.get("length_edges") or []
    rows = data.get("rows") or []
    if not rows:
        return '<p class="note">No documents.</p>'

    def label(b: int) -> str:
        lo = edges[b]
        return f"{lo:,}+" if b + 1 >= len(edges) else f"{lo:,}-{edges[b + 1] - 1:,}"

    out_rows = []
    for r in rows:
        dropped = r["dropped_exact"] + r["dropped_near"]
        share = dropped / r["documents"] if r["documents"] else 0.0
        out_rows.append(
            [
                _e(r["lang"]),
                _e(label(int(r["bucket"]))),
                _n(r["documents"]),
                _n(r["dropped_exact"]),
                _n(r["dropped_near"]),
                f"{100 * share:.1f} %",
                f'<span class="meter" style="width:{round(120 * share)}px"></span>',
            ]
        )
    return _table(
        [
            "language",
            "length (chars)",
            "documents",
            "dropped: a copy of its kept",
            "dropped: other",
            "dropped",
            "",
        ],
        out_rows,
        left=2,
        ident="language-table",
    ) + (
        '<p class="note">Language by script (<code>neardup.text.detect_lang</code>: Han share '
        ">= 0.3 is zh, mostly ASCII letters en, else other). A dropped document is counted in "
        "the first column when it is an exact copy of the document kept for its cluster, in "
        "the second otherwise: the summary's exact duplicates also count a copy of another "
        "dropped document, so the two splits can differ.</p>"
    )


def _diff_html(diff: list[list[Any]] | None) -> str:
    if diff is None:
        return '<p class="note">No alignment: the pair is over the verifier\'s LCS cap.</p>'
    out = ['<div class="diff">']
    for op, a, b, skipped, cut_a, cut_b in diff:
        more_a = f'<span class="gap"> [+{cut_a} tokens]</span>' if cut_a else ""
        more_b = f'<span class="gap"> [+{cut_b} tokens]</span>' if cut_b else ""
        if op == "equal":
            out.append(f'<span class="eq">{_e(a)}</span> ')
        elif op == "gap":
            out.append(f'<span class="gap">[... {int(skipped):,} equal tokens ...]</span> ')
        elif op == "insert":
            out.append(f"<ins>{_e(b)}</ins>{more_b} ")
        elif op == "delete":
            out.append(f"<del>{_e(a)}</del>{more_a} ")
        elif op == "replace":
            out.append(f"<del>{_e(a)}</del>{more_a} <ins>{_e(b)}</ins>{more_b} ")
        else:
            out.append('<span class="gap">[... rest of the alignment not shown ...]</span>')
    out.append("</div>")
    return "".join(out)


def _clusters(rv: dict[str, Any]) -> str:
    sample = rv.get("sample") or {}
    clusters = rv.get("clusters") or []
    out = [
        f'<p class="note">{_n(len(clusters))} of {_n(sample.get("clusters_in_run", 0))} '
        f"clusters: the {_n(sample.get('largest', 0))} largest, then "
        f"{_n(sample.get('random', 0))} drawn at random (seed {_n(sample.get('seed', 0))}); up "
        f"to {_n(sample.get('members', 0))} dropped documents each. Each diff aligns the "
        "verifier's tokens of the kept text (struck out: only in the kept text) with the "
        "dropped one (green: only in the dropped text); equal runs are shortened to "
        f"{_n(sample.get('context', 0))} tokens around each change.</p>"
    ]
    for kind, title in (("largest", "Largest clusters"), ("random", "Random clusters")):
        group = [c for c in clusters if c["kind"] == kind]
        if not group:
            continue
        out.append(f"<h3>{_e(title)}</h3>")
        for i, c in enumerate(group):
            k = c["kept"]
            who = "kept" if k.get("kept") else "first member (keep=none: none kept)"
            cut = (
                f' <span class="muted">[+{_n(k["cut"])} characters not shown]</span>'
                if k.get("cut")
                else ""
            )
            out.append(
                f'<article class="cluster {kind}" id="{kind}-{i + 1}">'
                f"<h3>{_n(c['size'])} documents: {who} <code>{_id(k['id'])}</code> "
                f'<span class="muted">({_n(k["chars"])} chars)</span></h3>'
                f'<div class="kept"><pre>{_e(k["text"])}</pre>{cut}</div>'
            )
            for j, m in enumerate(c["members"]):
                rule = (
                    f'<span class="tag">{_e(m["rule"])} {_n(m["score"])}</span>'
                    f'<span class="tag">SimHash {_n(m["distance"])}</span>'
                    if m.get("rule")
                    else '<span class="tag">pair not listed</span>'
                )
                out.append(
                    f'<details class="member"{" open" if j < 3 else ""}><summary>dropped '
                    f'<code>{_id(m["id"])}</code> <span class="muted">({_n(m["chars"])} chars, '
                    f"{_n(m['tokens'][1])} tokens)</span>{rule}</summary>{_diff_html(m['diff'])}"
                    "</details>"
                )
            if c.get("more"):
                out.append(f'<p class="note">... and {_n(c["more"])} more dropped documents.</p>')
            out.append("</article>")
    return "".join(out)


def render(rv: dict[str, Any]) -> str:
    """The report page for review data ``rv``."""
    s = rv.get("summary", {})
    title = "neardup review report"
    parts = [f"{_n(s.get('exact_duplicates', 0))} exact", f"{_n(s.get('near_duplicates', 0))} near"]
    if s.get("dropped_for_store"):
        parts.append(f"{_n(s['dropped_for_store'])} for stored documents")
    other = _int(s.get("dropped")) - sum(
        _int(s.get(k)) for k in ("exact_duplicates", "near_duplicates", "dropped_for_store")
    )
    if other > 0 and ((s.get("config") or {}).get("keep") == "none"):
        parts.append(f"{_n(other)} first members (--keep none)")
    clusters = s.get("clusters", 0)
    sub = (
        f"{_n(s.get('documents', 0))} documents, {_n(s.get('dropped', 0))} dropped "
        f"({', '.join(parts)}) in {_n(clusters)} cluster{'' if clusters == 1 else 's'}"
    )
    sections = [
        ("summary", "Run summary", _summary(rv)),
        ("sizes", "Cluster sizes", _sizes(rv)),
        ("similarity", "Pairs by similarity", _scores(rv)),
        ("languages", "Duplicates by language and length", _languages(rv)),
        ("clusters", "Sample of clusters", _clusters(rv)),
    ]
    nav = "".join(f'<a href="#{k}">{_e(t)}</a>' for k, t, _ in sections)
    body = "".join(f'<section id="{k}"><h2>{_e(t)}</h2>{h}</section>' for k, t, h in sections)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\">"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>{_e(title)}</h1><p>{sub}</p></header><nav>{nav}</nav>"
        f"<main>{body}</main></body></html>\n"
    )
