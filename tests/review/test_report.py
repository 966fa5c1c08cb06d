"""The review report: its data (caps, seeded sample, tables that add up), the HTML (self-contained,
every text escaped) and the page as headless Chromium renders it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neardup import dedup
from neardup.errors import FormatError, InputError, UnsupportedVersionError
from neardup.review.report import (
    REVIEW_VERSION,
    build_review,
    load_review,
    render_report,
    save_review,
    write_report,
)

SAMPLE = Path(__file__).resolve().parents[2] / "neardup" / "data" / "sample" / "sample.jsonl"
EVIL = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(2)>',
    "</pre></div><iframe src=javascript:alert(3)></iframe>",
    "<svg onload=alert(4)>",
    "&lt;b&gt; & ' \" </style><style>*{display:none}</style>",
]


def _sample() -> tuple[list[str], list[str]]:
    rows = [json.loads(x) for x in SAMPLE.open(encoding="utf-8")]
    return [r["id"] for r in rows], [r["text"] for r in rows]


def _evil_corpus() -> tuple[list[str], list[str]]:
    """Texts and ids full of markup: every cluster's kept text, dropped texts and ids."""
    words = [
        "council",
        "budget",
        "river",
        "bridge",
        "public",
        "library",
        "winter",
        "market",
        "harbor",
        "museum",
        "school",
        "station",
        "garden",
        "letter",
        "evening",
        "summer",
        "doctor",
        "village",
        "teacher",
        "festival",
    ]
    texts, ids = [], []
    for i, bad in enumerate(EVIL):  # a cluster of three per string, each on its own words
        base = " ".join(np.random.default_rng(i).permutation(words).tolist())
        texts += [f"{bad} {base}", f"{bad} {base} today", f"{bad} {base}!"]
        ids += [f"{bad}-a", f"{bad}-b", f"{bad}-c"]
    return texts, ids


class _Dom(HTMLParser):
    """Tags with their attributes, as a rendered DOM lists them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.stack: list[str] = []
        self.in_svg: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        a["_svg"] = self.stack[-1] if self.stack else ""
        self.tags.append((tag, a))
        if tag == "svg":
            self.stack.append(a.get("id", ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg" and self.stack:
            self.stack.pop()

    def find(
        self, tag: str, cls: str | None = None, svg: str | None = None
    ) -> list[dict[str, str]]:
        return [
            a
            for t, a in self.tags
            if t == tag
            and (cls is None or cls in a.get("class", "").split())
            and (svg is None or a["_svg"] == svg)
        ]


def _dom(html: str) -> _Dom:
    d = _Dom()
    d.feed(html)
    return d


def test_review_data_adds_up_and_is_capped() -> None:
    ids, texts = _sample()
    r = dedup(texts, ids=ids)
    rv = build_review(r, texts, largest=5, random=4, members=2)
    assert rv["format"] == "neardup-review" and rv["version"] == REVIEW_VERSION
    sizes = dict(map(tuple, rv["cluster_sizes"]))
    assert sum(sizes.values()) == r.stats["clusters"]
    rows = rv["by_language_length"]["rows"]
    assert sum(x["documents"] for x in rows) == len(texts)
    assert sum(x["dropped_exact"] + x["dropped_near"] for x in rows) == r.stats["dropped"]
    assert sum(x["dropped_exact"] for x in rows) == r.stats["exact_duplicates"]
    assert {x["lang"] for x in rows} == {"en", "zh"}
    kinds = [c["kind"] for c in rv["clusters"]]
    assert kinds == ["largest"] * 5 + ["random"] * 4
    big = [c["size"] for c in rv["clusters"][:5]]
    assert big == sorted(big, reverse=True) and big[0] == max(sizes)
    for c in rv["clusters"]:
        assert len(c["members"]) <= 2 and len(c["members"]) + c["more"] == c["size"] - 1
        assert c["kept"]["kept"]
        for m in c["members"]:
            assert m["rule"] in ("exact", "similarity", "containment")
            assert m["diff"] is not None
    scores = rv["candidate_scores"]
    assert sum(sum(v) for v in scores["counts"].values()) == r.stats["candidates"]
    assert rv["pair_rules"] == {"similarity": 288, "exact": 171}
    # the random draw is seeded: the same seed, the same clusters; another seed, others
    again = build_review(r, texts, largest=5, random=4, members=2)
    assert json.dumps(again) == json.dumps(rv)
    other = build_review(r, texts, largest=5, random=4, members=2, seed=1)
    assert [c["kept"]["id"] for c in other["clusters"][5:]] != [
        c["kept"]["id"] for c in rv["clusters"][5:]
    ]


def test_keep_none_and_no_clusters() -> None:
    ids, texts = _sample()
    r = dedup(texts[:200], ids=ids[:200], keep="none")
    rv = build_review(r, texts[:200])
    assert all(not c["kept"]["kept"] for c in rv["clusters"])
    assert "none kept" in render_report(rv)
    r = dedup(["alpha beta", "gamma delta"])
    html = render_report(build_review(r, ["alpha beta", "gamma delta"]))
    assert "0 clusters of two or more" in html and "No candidate pairs" in html


def test_html_is_self_contained_and_escapes_every_text() -> None:
    texts, ids = _evil_corpus()
    r = dedup(texts, ids=ids)
    assert r.stats["clusters"] == len(EVIL) and r.stats["dropped"] == 2 * len(EVIL)
    html = render_report(build_review(r, texts))
    for bad in EVIL:  # each id and text is in the page, as text
        assert __import__("html").escape(bad) in html
    low = html.lower()
    assert "<script" not in low and "<iframe" not in low and "<img" not in low
    assert "onerror=" not in low.replace("onerror=alert(2)&gt;", "")  # only as escaped text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "default-src 'none'" in html  # the page may load nothing, run nothing
    d = _dom(html)
    # nothing to fetch: no src, no link, anchors only within the page, no url() in the style
    assert not any("src" in a or t == "link" for t, a in d.tags)
    assert all(a["href"].startswith("#") for a in d.find("a"))
    assert "url(" not in html.split("</style>")[0]
    assert not d.find("script") and not d.find("img") and not d.find("iframe")
    assert len(d.find("style")) == 1  # only the report's own
    assert {t for t, _ in d.tags} <= {
        "html", "head", "meta", "title", "style", "body", "header", "h1", "p", "nav", "a",
        "main", "section", "h2", "h3", "div", "b", "span", "table", "thead", "tbody", "tr",
        "th", "td", "svg", "line", "rect", "text", "i", "code", "article", "pre",
        "details", "summary", "del", "ins",
    }  # fmt: skip


def test_load_and_write_check_the_data(tmp_path: Path) -> None:
    ids, texts = _sample()
    r = dedup(texts[:300], ids=ids[:300])
    rv = build_review(r, texts[:300])
    save_review(rv, tmp_path / "review.json")
    assert load_review(tmp_path) == json.loads(json.dumps(rv))
    n = write_report(tmp_path, tmp_path / "report.html")
    assert n == len(render_report(rv).encode("utf-8"))
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "review.json").write_text(json.dumps({**rv, "version": 2}))
    with pytest.raises(UnsupportedVersionError):
        load_review(tmp_path / "v2")
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(FormatError):
        load_review(tmp_path / "x.json")
    with pytest.raises(InputError, match="--report"):
        load_review(tmp_path / "missing")


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(
        "headless Chromium not found (Debian: apt-get install -y chromium); the report's "
        "rendering is not checked in this run"
    )


def _render(chromium: str, page: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        args = [
            chromium, "--headless", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run",
            f"--user-data-dir={profile}", *extra, page.as_uri(),
        ]  # fmt: skip
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")
        return subprocess.run(args, capture_output=True, text=True, timeout=120, check=True)


def test_the_report_renders_in_chromium(tmp_path: Path) -> None:
    chromium = _chromium()
    ids, texts = _sample()
    texts += _evil_corpus()[0]
    ids += _evil_corpus()[1]
    r = dedup(texts, ids=ids)
    rv = build_review(r, texts)
    page = tmp_path / "report.html"
    page.write_text(render_report(rv), encoding="utf-8")
    dom = _render(chromium, page, "--dump-dom").stdout
    d = _dom(dom)
    # the cluster-size histogram's bars, the score histogram's stacked bars and threshold line
    bars = d.find("rect", "bar", svg="size-histogram")
    assert len(bars) == 10 and sum(int(b["data-count"]) for b in bars) == r.stats["clusters"]
    assert d.find("rect", "similarity", svg="score-histogram")
    assert d.find("line", "threshold", svg="score-histogram")
    # the threshold table (the run's row marked), the language table
    assert len(d.find("tr", "current")) == 1
    assert [a["id"] for _, a in d.tags if a.get("id", "").endswith("-table")] == [
        "threshold-table",
        "language-table",
    ]
    # the sampled clusters, each with its kept text and the diffs of dropped ones
    clusters = d.find("article", "cluster")
    assert len(clusters) == len(rv["clusters"]) == 40
    assert len(d.find("details", "member")) == sum(len(c["members"]) for c in rv["clusters"])
    assert d.find("div", "diff") and (d.find("del") or d.find("ins"))
    # the untrusted texts stayed text: nothing they contain became an element
    assert not d.find("script") and not d.find("img") and not d.find("iframe")
    assert "<script>alert(1)</script>" not in dom
    shot = tmp_path / "shot.png"
    _render(chromium, page, f"--screenshot={shot}", "--window-size=1200,1800")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert np.frombuffer(data[16:24], ">u4").tolist() == [1200, 1800]  # IHDR width, height


def test_report_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    from neardup.cli.main import main

    monkeypatch.chdir(tmp_path)
    assert main(["dedup", "--sample", "--report", "-q"]) == 0
    run = tmp_path / "neardup-out"
    for name in ("report.html", "review.json", "summary.json", "pairs.csv"):
        assert (run / name).is_file(), name
    first = (run / "report.html").read_bytes()
    assert main(["report", str(run), "-o", str(tmp_path / "again.html")]) == 0
    assert (tmp_path / "again.html").read_bytes() == first  # rendered from review.json alone
    assert main(["report", str(run)]) == 0 and (run / "report.html").read_bytes() == first
    # never over the review data it reads (it wrote the page over review.json, the only copy
    # of the dropped texts), and the page alone on stdout (the "wrote" line followed it)
    review = (run / "review.json").read_bytes()
    capsys.readouterr()
    for source in (run, run / "review.json"):
        assert main(["report", str(source), "-o", str(run / "review.json")]) == 2
        assert "would overwrite or write into the input" in capsys.readouterr().err
    assert (run / "review.json").read_bytes() == review
    capsys.readouterr()
    assert main(["report", str(run), "-o", "-"]) == 0
    got = capsys.readouterr()
    assert got.out.rstrip().endswith("</html>") and "wrote - (" in got.err
    # --report PATH; --report without PATH beside --summary-json; refused without a folder
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(
        ["alpha beta gamma delta epsilon", "alpha beta gamma delta epsilon!", "zeta eta"])))  # fmt: skip
    (tmp_path / "out").mkdir()
    args = ["dedup", str(src), "-o", str(tmp_path / "out" / "kept.jsonl"), "-q"]
    assert main([*args, "--report", str(tmp_path / "out" / "r.html")]) == 0
    assert (tmp_path / "out" / "r.html").is_file() and (tmp_path / "out" / "review.json").is_file()
    assert main([*args, "--summary-json", str(tmp_path / "s.json"), "--report"]) == 0
    assert (tmp_path / "report.html").is_file() and (tmp_path / "review.json").is_file()
    capsys.readouterr()
    assert main(["dedup", str(src), "-o", "-", "-q", "--report"]) == 2
    assert "--report PATH" in capsys.readouterr().err
    assert main([*args, "--report", str(tmp_path / "nowhere" / "r.html")]) == 2
    assert main(["report", str(tmp_path / "out" / "kept.jsonl")]) != 0
    assert "--report" in capsys.readouterr().err
    # --report written before the inputs takes the first as its PATH: refused, not overwritten
    # with HTML (a user's data file was), nor read as "no input given"
    data = src.read_bytes()
    other = tmp_path / "other.jsonl"
    other.write_bytes(data)
    for argv in (
        ["dedup", "--report", str(src), str(other), "-o", str(tmp_path / "out" / "k2.jsonl")],
        ["dedup", "--report", str(src), "-o", str(tmp_path / "out" / "k3.jsonl")],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "not named .html" in err and "put --report after the inputs" in err, err
        assert src.read_bytes() == data
    assert not (tmp_path / "out" / "k2.jsonl").exists()
    assert main([*args, "--report", str(tmp_path / "out" / "r.json")]) == 2
    assert "name it PATH.html" in capsys.readouterr().err
    assert main(["dedup", str(other), "-o", str(tmp_path / "out" / "k4.jsonl"), "-q",
                 f"--report={tmp_path / 'out' / 'r2.htm'}"]) == 0  # fmt: skip
    assert (tmp_path / "out" / "r2.htm").is_file()


def test_a_crafted_review_cannot_put_markup_on_the_page() -> None:
    """`neardup report` renders a review.json that may come from elsewhere: every value is
    escaped or formatted as a number (a score or a sample setting was put on the page as it
    was: a meta refresh, a form)."""
    ids, texts = _sample()
    rv = build_review(dedup(texts[:300], ids=ids[:300]), texts[:300])
    evil = '<meta http-equiv="refresh" content="0;url=https://example.invalid">'
    member = next(m for c in rv["clusters"] for m in c["members"] if m["rule"])
    member["score"] = member["distance"] = evil
    rv["clusters"][0]["size"] = rv["clusters"][0]["more"] = evil
    for key in ("seed", "largest", "random", "members", "context", "clusters_in_run"):
        rv["sample"][key] = evil
    html = render_report(rv)
    assert '<meta http-equiv="refresh"' not in html and "&lt;meta http-equiv" in html


def test_bidirectional_controls_in_ids_are_shown_not_obeyed() -> None:
    text = "the harbour bridge reopened this week after the long winter repairs were done"
    r = dedup([text, text], ids=["plain", "\u202eexe.ecioval"])
    html = render_report(build_review(r, [text, text]))
    assert '<span class="ctl">U+202E</span>exe.ecioval' in html
    assert "\u202e" not in html
    assert "unicode-bidi:isolate" in html


def test_long_tokens_keep_the_page_small() -> None:
    """The caps were in tokens: 20 tokens of 20,000 characters made an 8 MB page."""
    rng = np.random.default_rng(5)

    def token() -> str:
        return "".join(rng.choice(list("abcdefghij"), 20_000))

    texts, ids = [], []
    for c in range(3):
        base = [token() for _ in range(20)]
        for m in range(6):
            doc = list(base)
            doc[m] = token()
            texts.append(" ".join(doc))
            ids.append(f"c{c}m{m}")
    r = dedup(texts, ids=ids)
    assert r.stats["dropped"] > 0
    rv = build_review(r, texts)
    html = render_report(rv)
    assert len(html) < 1_000_000 and len(json.dumps(rv)) < 1_000_000
    assert "characters]" in html  # the clipped runs say so


def test_no_verify_and_incremental_runs_say_what_they_did(tmp_path: Path) -> None:
    ids, texts = _sample()
    r = dedup(texts[:300], ids=ids[:300], verify=False)
    html = render_report(build_review(r, texts[:300]))
    assert "off (--no-verify)" in html and "not verified: --no-verify" in html
    # a run against a store: the store's row and card, the run's own documents counted
    from neardup.cli.main import main

    day1, day2 = tmp_path / "day1.jsonl", tmp_path / "day2.jsonl"
    rows = [json.loads(x) for x in SAMPLE.open(encoding="utf-8")][:60]
    day1.write_text("".join(json.dumps(x) + "\n" for x in rows[:40]))
    new = [dict(x, id=f"new-{x['id']}") for x in rows[:3]] + rows[40:41]
    day2.write_text("".join(json.dumps(x) + "\n" for x in new))
    store = tmp_path / "store"
    assert main(["dedup", "-q", str(day1), "-o", str(tmp_path / "o1.jsonl"), "--save", str(store)]) == 0  # fmt: skip
    out = tmp_path / "o2" / "kept.jsonl"
    out.parent.mkdir()
    args = ["dedup", "-q", str(day2), "-o", str(out), "--against", str(store)]
    assert main([*args, "--summary-json", str(out.parent / "s.json"), "--report"]) == 0
    html = (out.parent / "report.html").read_text()
    assert "dropped for stored documents" in html and "3 for stored documents" in html
    assert "checked against" in html
    rv = load_review(out.parent / "review.json")
    assert sum(row["documents"] for row in rv["by_language_length"]["rows"]) == 4
