"""Score near-duplicate decisions against labelled pairs.

Two ways of scoring, both sliced overall, by language (``en`` / ``zh`` / ``mixed``) and by
length (``short``: the shorter text of the pair has fewer than 200 characters, else ``long``):

*Pairwise sweep* (:func:`sweep`)
    For every labelled pair, its SimHash distance and the verifier's decision; precision,
    recall and F1 of "distance <= k" (SimHash alone) and of "distance <= k and verified", for
    each k of a range. This is the precision/recall-vs-distance curve.
*Retrieval* (:func:`score_reported`)
    The way a user runs it: dedup every document, take every pair the tool *reports*
    (``DedupResult.pairs`` / ``--pairs-out``; pairs implied only by cluster transitivity are not
    counted), then recall = reported label-1 pairs / all label-1 pairs, precision = reported
    label-1 pairs / reported pairs that carry a label. Reported pairs with no label are counted
    separately (``unlabeled``).

Labels: a CSV with ``id_a,id_b,label`` (label 1 near-duplicate, 0 not; other values ignored).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError, RecordError

__all__ = [
    "load_labels",
    "pair_slices",
    "prf",
    "score_reported",
    "sweep",
]

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LETTER = re.compile(r"[^\W\d_]")
SHORT_CHARS = 200


def load_labels(path: str | Path) -> dict[tuple[str, str], int]:
    """Read ``id_a,id_b,label`` rows into ``{(min_id, max_id): label}`` (labels 0 and 1 only).

    ``path`` may be compressed (``.gz``, ``.zst``, ...) or an fsspec URL, as documents may."""
    import io

    from ..io.remote import compression_of, is_url, open_input

    labels: dict[tuple[str, str], int] = {}
    name = str(path)
    if not is_url(name) and compression_of(name) is None and not Path(path).exists():
        raise InputError(f"labels file {name!r} does not exist")
    with (
        open_input(name) as raw,
        io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as fh,  # a BOM skipped
    ):
        reader = csv.DictReader(fh, strict=True)
        try:
            _read_labels(reader, labels, str(path))
        except csv.Error as exc:
            raise RecordError(
                f"malformed CSV: {exc}", path=str(path), line=reader.line_num
            ) from exc
    return labels


def _read_labels(
    reader: csv.DictReader[str], labels: dict[tuple[str, str], int], path: str
) -> None:
    need = {"id_a", "id_b", "label"}
    if reader.fieldnames is None or not need <= set(reader.fieldnames):
        raise RecordError(
            f"labels need a header with id_a,id_b,label; got {reader.fieldnames}",
            path=path,
            line=1,
        )
    for row in reader:
        try:
            label = int(row["label"])
        except (TypeError, ValueError):
            raise RecordError(
                f"label must be 0 or 1, got {row['label']!r}",
                path=path,
                line=reader.line_num,
            ) from None
        if label not in (0, 1):
            continue
        a, b = row["id_a"], row["id_b"]
        key = (a, b) if a <= b else (b, a)
        if labels.get(key, label) != label:  # (the last label would have won, silently)
            raise RecordError(
                f"the pair {a!r}, {b!r} is labelled {label} here and {labels[key]} on an "
                "earlier row; keep one label per pair",
                path=path,
                line=reader.line_num,
            )
        labels[key] = label


def detect_lang(text: str) -> str:
    """``zh`` when at least 30 % of the letters are CJK ideographs, else ``en``."""
    cjk = len(_CJK.findall(text))
    letters = len(_LETTER.findall(text))
    return "zh" if letters and cjk / letters >= 0.3 else "en"


def pair_slices(
    a: str, b: str, langs: Mapping[str, str], lengths: Mapping[str, int]
) -> tuple[str, str]:
    """(language slice, length slice) of a pair."""
    la, lb = langs.get(a, "en"), langs.get(b, "en")
    lang = la if la == lb else "mixed"
    size = "short" if min(lengths.get(a, 0), lengths.get(b, 0)) < SHORT_CHARS else "long"
    return lang, size


def prf(tp: int, fp: int, fn: int) -> dict[str, float | int]:
    """Precision, recall and F1 (1.0 for an empty denominator's precision/recall)."""
    p = tp / (tp + fp) if tp + fp else 1.0
    r = tp / (tp + fn) if tp + fn else 1.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {
        "precision": round(p, 4),
        "recall": round(r, 4),
        "f1": round(f, 4),
        "tp": tp,
        "fp": fp,
        "fn": fn,
    }


def _slices(lang: str, size: str) -> tuple[str, ...]:
    return ("overall", lang, size)


def score_reported(
    reported: Iterable[tuple[str, str]],
    labels: Mapping[tuple[str, str], int],
    langs: Mapping[str, str],
    lengths: Mapping[str, int],
) -> dict[str, Any]:
    """Retrieval scoring of reported pairs (see module docstring).

    Returns ``{"overall": {...}, "en": {...}, "zh": {...}, "short": {...}, "long": {...},
    "unlabeled": int, "reported": int}``; each slice has precision, recall, f1, tp, fp, fn.
    """
    seen: set[tuple[str, str]] = set()
    counts: dict[str, list[int]] = {}
    unlabeled = 0
    for a, b in reported:
        key = (a, b) if a <= b else (b, a)
        if key in seen:
            continue
        seen.add(key)
        label = labels.get(key)
        if label is None:
            unlabeled += 1
            continue
        for s in _slices(*pair_slices(key[0], key[1], langs, lengths)):
            c = counts.setdefault(s, [0, 0, 0])
            c[0 if label == 1 else 1] += 1
    for key, label in labels.items():
        if label == 1 and key not in seen:
            for s in _slices(*pair_slices(key[0], key[1], langs, lengths)):
                counts.setdefault(s, [0, 0, 0])[2] += 1
    out: dict[str, Any] = {s: prf(*c) for s, c in sorted(counts.items())}
    out["reported"] = len(seen)
    out["unlabeled"] = unlabeled
    return out


def sweep(
    labels: Mapping[tuple[str, str], int],
    distances: Mapping[tuple[str, str], int],
    verified: Mapping[tuple[str, str], bool] | None,
    langs: Mapping[str, str],
    lengths: Mapping[str, int],
    thresholds: Sequence[int],
) -> list[dict[str, Any]]:
    """Pairwise precision/recall/F1 of ``distance <= k`` (and ``& verified``) for each ``k``.

    Returns one row per threshold: ``{"k": k, "simhash": {slice: prf}, "verified": {slice: prf}}``.
    """
    keys = [k for k in labels if k in distances]
    if not keys:
        raise InputError("no labelled pair has both documents in the corpus; check the ids")
    y = np.array([labels[k] for k in keys], dtype=bool)
    d = np.array([distances[k] for k in keys], dtype=np.int64)
    v = np.array([verified[k] if verified else True for k in keys], dtype=bool)
    sl = [pair_slices(a, b, langs, lengths) for a, b in keys]
    masks = {"overall": np.ones(len(keys), bool)}
    for name in sorted({x for pair in sl for x in pair}):
        masks[name] = np.array([name in pair for pair in sl])
    rows = []
    for k in thresholds:
        row: dict[str, Any] = {"k": int(k)}
        for label, pred in (("simhash", d <= k), ("verified", (d <= k) & v)):
            row[label] = {
                name: prf(
                    int((pred & y & m).sum()),
                    int((pred & ~y & m).sum()),
                    int((~pred & y & m).sum()),
                )
                for name, m in masks.items()
            }
        rows.append(row)
    return rows


def plot_sweep(rows: Sequence[Mapping[str, Any]], path: str | Path) -> None:
    """Precision and recall vs SimHash distance (overall), with and without verification.

    Needs matplotlib (``pip install 'neardup[plot]'``); written atomically.
    """
    from ..errors import require
    from ..io.atomic import atomic_open

    require("matplotlib", "plot", "eval --plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = [r["k"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for mode, style in (("simhash", "--"), ("verified", "-")):
        for metric, color in (
            ("precision", "tab:blue"),
            ("recall", "tab:orange"),
            ("f1", "tab:green"),
        ):
            ax.plot(
                ks,
                [r[mode]["overall"][metric] for r in rows],
                style,
                color=color,
                label=f"{metric} ({mode})",
            )
    ax.set_xlabel("SimHash candidate distance k (bits)")
    ax.set_ylabel("score")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("neardup: precision / recall vs distance")
    fig.tight_layout()
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=120)
    plt.close(fig)


def run_eval(
    docs: str,
    pairs: str,
    *,
    fmt: str | None = None,
    text_field: str = "text",
    id_field: str = "id",
    encoding: str = "utf-8",
    thresholds: Iterable[int] = range(21),
    retrieval: bool = True,
    workers: int = 1,
) -> dict[str, Any]:
    """Everything ``neardup eval`` prints: the pairwise sweep and (optionally) retrieval scores.

    ``docs`` is read by :func:`neardup.io.read_corpus` (a file, glob or fsspec URL; ``fmt``
    one of ``neardup.io.FORMATS``, by default told from the extension; dotted ``text_field``
    / ``id_field``). Fingerprints and the verifier use their defaults, as
    :func:`neardup.dedup` does.
    """
    from ..fingerprint.distance import hamming_many
    from ..io import read_corpus
    from ..rules.config import DedupConfig
    from ..verify.rule import Verifier
    from .run import dedup

    with read_corpus(
        [docs], fmt=fmt, text_field=text_field, id_field=id_field, encoding=encoding
    ) as corpus:
        ids, texts = list(corpus.ids), list(corpus.texts)
    labels = load_labels(pairs)
    pos = {doc_id: i for i, doc_id in enumerate(ids)}
    langs = {doc_id: detect_lang(t) for doc_id, t in zip(ids, texts, strict=True)}
    lengths = {doc_id: len(t) for doc_id, t in zip(ids, texts, strict=True)}
    keys = [k for k in labels if k[0] in pos and k[1] in pos]
    if not keys:
        raise InputError(
            f"none of the {len(labels)} labelled pairs has both ids in {docs!r}; check --id-field"
        )
    cfg = DedupConfig(workers=workers)
    fp = cfg.make_fingerprinter()
    fps = np.asarray(fp.fingerprint_many(texts, workers=workers), dtype=np.uint64)
    ia = np.array([pos[a] for a, _ in keys], dtype=np.int64)
    ib = np.array([pos[b] for _, b in keys], dtype=np.int64)
    dist = hamming_many(fps[ia], fps[ib])
    verifier = Verifier()
    ok, _ = verifier.verify_many([texts[i] for i in ia], [texts[i] for i in ib], dist)
    distances = {k: int(d) for k, d in zip(keys, dist.tolist(), strict=True)}
    verified = {k: bool(o) for k, o in zip(keys, ok.tolist(), strict=True)}
    sub = {k: labels[k] for k in keys}
    report: dict[str, Any] = {
        "docs": len(ids),
        "labelled": len(sub),
        # labelled pairs left out: an id that is not among the documents read
        "labels_without_docs": len(labels) - len(keys),
        "positives": int(sum(sub.values())),
        "sweep": sweep(sub, distances, verified, langs, lengths, list(thresholds)),
    }
    if retrieval:
        result = dedup(texts, ids=ids, config=cfg)
        reported = [
            (ids[a], ids[b])
            for a, b in zip(result.pairs.a.tolist(), result.pairs.b.tolist(), strict=True)
        ]
        report["retrieval"] = score_reported(reported, sub, langs, lengths)
        report["retrieval"]["elapsed_s"] = result.stats["elapsed_s"]
    return report
