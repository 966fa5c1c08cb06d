"""Why two texts are (or are not) near duplicates: :func:`explain`.

Every answer comes from the code that decides in a run, called on the two texts, never from a
second implementation of a rule:

* exact copies: :func:`neardup.batch.exact.stage_exact` (the normalised content hash);
* the candidate channels: :func:`neardup.rules.candidates.stage_candidates_for`, the call
  :func:`neardup.dedup` makes (MinHash bands with their agreement filter, the SimHash passes);
  the bands the two share and their agreement are read from the same signatures and band keys
  (:mod:`neardup.fingerprint.minhash`);
* the decision and the rule that made it:
  :func:`neardup.rules.verify.stage_verify_rules` (the verify stage's bounds, the exact
  LCS, :meth:`Verifier.decide_rules <neardup.verify.Verifier.decide_rules>`, ``trust_distance``);
* which text a run keeps: :func:`neardup.rules.keep.stage_representatives` (the keep policy
  and its length guard).

The alignment is the LCS of the verifier's tokens (:meth:`Verifier.tokens`) as runs of equal,
inserted, deleted and replaced tokens; its LCS is the one the similarity is computed from.

What a pair-local answer cannot know: a run's valves (the MinHash bucket valve, the per-document
pair valve, the SimHash work budget) act on crowded corpora only, and a run's summary says when
they did; such a run may not have compared a pair that :func:`explain` calls a candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..errors import ConfigError, InputTypeError
from ..rules.config import DedupConfig, with_overrides
from ..verify.rule import (
    RULE_BOUND,
    RULE_EXACT,
    RULE_NAMES,
    RULE_UNVERIFIED,
    TokenEncoder,
    Verifier,
)

__all__ = [
    "Alignment",
    "DiffRun",
    "Explanation",
    "align",
    "config_from_summary",
    "explain",
    "explain_with_store",
]

Op = Literal["equal", "insert", "delete", "replace"]


@dataclass(frozen=True)
class DiffRun:
    """One run of the alignment: ``op`` and the tokens of A (``a``) and B (``b``) it covers
    (``equal``: the same tokens on both sides; ``insert``: only ``b``; ``delete``: only ``a``;
    ``replace``: both, different)."""

    op: Op
    a: tuple[str, ...]
    b: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "a": list(self.a), "b": list(self.b)}


@dataclass(frozen=True)
class Alignment:
    """The verifier's tokens of two texts and their LCS alignment (:func:`align`);
    ``runs`` is None when the pair is over the verifier's ``max_lcs_cells`` (the verifier then
    decides on the token overlap, and no alignment is computed)."""

    tokens_a: tuple[str, ...]
    tokens_b: tuple[str, ...]
    runs: tuple[DiffRun, ...] | None
    lcs: int | None

    def counts(self) -> dict[str, int]:
        """Tokens per kind: equal, inserted (B only), deleted (A only), replaced (A side and B
        side of the replaced runs)."""
        out = {"equal": 0, "inserted": 0, "deleted": 0, "replaced_a": 0, "replaced_b": 0}
        for r in self.runs or ():
            if r.op == "equal":
                out["equal"] += len(r.a)
            elif r.op == "insert":
                out["inserted"] += len(r.b)
            elif r.op == "delete":
                out["deleted"] += len(r.a)
            else:
                out["replaced_a"] += len(r.a)
                out["replaced_b"] += len(r.b)
        return out


def align(verifier: Verifier, text_a: str, text_b: str) -> Alignment:
    """The LCS alignment of ``verifier.tokens`` of two texts (rapidfuzz ``LCSseq.opcodes`` on
    the :class:`TokenEncoder` strings the verifier compares), as runs; a deletion next to an
    insertion is one ``replace`` run. The equal runs add up to the LCS."""
    from rapidfuzz.distance import LCSseq

    ta, tb = tuple(verifier.tokens(text_a)), tuple(verifier.tokens(text_b))
    if len(ta) * len(tb) > verifier.max_lcs_cells:
        return Alignment(ta, tb, None, None)
    enc = TokenEncoder()
    ea, eb = enc.encode(list(ta)), enc.encode(list(tb))
    runs: list[DiffRun] = []
    pend_a: list[str] = []
    pend_b: list[str] = []

    def flush() -> None:
        if pend_a or pend_b:
            op: Op = "replace" if pend_a and pend_b else ("delete" if pend_a else "insert")
            runs.append(DiffRun(op, tuple(pend_a), tuple(pend_b)))
            pend_a.clear()
            pend_b.clear()

    lcs = 0
    for o in LCSseq.opcodes(ea, eb):
        if o.tag == "equal":
            flush()
            runs.append(
                DiffRun("equal", ta[o.src_start : o.src_end], tb[o.dest_start : o.dest_end])
            )
            lcs += o.src_end - o.src_start
        else:  # insert / delete (Indel opcodes never replace): gathered between equal runs
            pend_a.extend(ta[o.src_start : o.src_end])
            pend_b.extend(tb[o.dest_start : o.dest_end])
    flush()
    return Alignment(ta, tb, tuple(runs), lcs)


@dataclass(frozen=True)
class Explanation:
    """What :func:`explain` found for texts A and B (A first in input order).

    ``decision`` is what a run reports for the pair: ``"duplicate"`` (a pairs CSV row, with
    ``rule`` ``exact``, ``similarity``, ``containment``, ``trusted`` or ``unverified``),
    ``"not a duplicate"`` (a candidate the verifier rejected: ``below`` or ``bound``) or
    ``"not a candidate"`` (no channel finds the pair, so a run never compares it: ``rule``
    ``none``; ``verdict``, the verifier's rule, then says what it would have said). :meth:`to_dict` gives all of it as JSON
    types; :meth:`to_text` as the command prints it.
    """

    ids: tuple[str, str]
    decision: str
    duplicate: bool
    candidate: bool
    rule: str
    verdict: str
    score: float
    channels: tuple[str, ...]
    exact: bool
    similarity: float | None
    containment: float | None
    lcs: int | None
    tokens: tuple[int, int]
    chars: tuple[int, int]
    measure: str
    thresholds: dict[str, Any]
    keep: dict[str, Any]
    simhash: dict[str, Any]
    minhash: dict[str, Any]
    alignment: tuple[DiffRun, ...] | None
    config: dict[str, Any]
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """The explanation as JSON-serialisable types (``neardup explain --json``)."""
        return {
            "ids": list(self.ids),
            "decision": self.decision,
            "duplicate": self.duplicate,
            "candidate": self.candidate,
            "rule": self.rule,
            "verdict": self.verdict,
            "score": self.score,
            "channels": list(self.channels),
            "exact": self.exact,
            "similarity": self.similarity,
            "containment": self.containment,
            "lcs": self.lcs,
            "tokens": list(self.tokens),
            "chars": list(self.chars),
            "measure": self.measure,
            "thresholds": dict(self.thresholds),
            "keep": dict(self.keep),
            "simhash": dict(self.simhash),
            "minhash": dict(self.minhash),
            "alignment": None if self.alignment is None else [r.to_dict() for r in self.alignment],
            "config": self.config,
            "notes": list(self.notes),
        }

    def counts(self) -> dict[str, int]:
        """The alignment's tokens per kind (:meth:`Alignment.counts`)."""
        return Alignment((), (), self.alignment, self.lcs).counts()

    def to_text(self, *, context: int = 6, max_run: int = 40) -> str:
        """A report for a person: the decision and its rule first, then the channels, the keep
        policy and the alignment (equal runs longer than ``2 * context`` tokens are shortened
        to their ends; changed runs to ``max_run`` tokens a side)."""
        from .text import explanation_text

        return explanation_text(self, context=context, max_run=max_run)


def config_from_summary(summary: dict[str, Any]) -> DedupConfig:
    """The :class:`DedupConfig` of a run from its summary (``summary.json``: ``config`` holds
    the run's options, its verifier and its fingerprinter), so :func:`explain` uses that run's
    band plan, thresholds and keep policy."""
    cfg = summary.get("config") if isinstance(summary, dict) else None
    if not isinstance(cfg, dict):
        raise ConfigError(
            "the summary has no 'config' section; pass the summary.json neardup dedup wrote"
        )
    known = set(DedupConfig().to_dict())
    fields = {k: v for k, v in cfg.items() if k in known}
    verifier = cfg.get("verifier") or fields.get("verifier")
    if isinstance(verifier, dict) and verifier.get("threshold") == fields.get("threshold"):
        # the run's threshold, recorded in its verifier too: left to the top-level one, so a
        # threshold override (`neardup explain --run R --threshold T`) reaches the verifier
        # (the recorded one won, and the override changed nothing)
        verifier = {k: v for k, v in verifier.items() if k != "threshold"}
    fields["verifier"] = verifier
    fields["fingerprinter"] = cfg.get("fingerprinter") or fields.get("fingerprinter")
    fields["workers"] = 1  # (explaining one pair: nothing to share out)
    return DedupConfig(**fields)


def explain(
    text_a: str,
    text_b: str,
    *,
    config: DedupConfig | None = None,
    ids: Sequence[str] = ("A", "B"),
    **overrides: Any,
) -> Explanation:
    """Explain what a run of :func:`neardup.dedup` with ``config`` decides for two texts.

    Parameters
    ----------
    text_a, text_b : str
        The two texts; A comes first in input order (``keep="first"`` keeps it).
    config : DedupConfig, optional
        The run's settings (default ``DedupConfig()``; :func:`config_from_summary` reads a
        run's); keyword ``overrides`` (e.g. ``threshold=0.9``) replace its fields.
    ids : pair of str, default ("A", "B")
        Names for the two texts in the output.

    Returns
    -------
    Explanation

    Raises
    ------
    InputTypeError
        A text is not a str.
    ConfigError
        Invalid settings.

    Examples
    --------
    >>> e = explain("the quick brown fox jumps over the lazy dog today",
    ...             "the quick brown fox jumped over the lazy dog today")
    >>> e.decision, e.rule, e.channels
    ('duplicate', 'similarity', ('minhash',))
    """
    from ..batch.exact import stage_exact
    from ..fingerprint.distance import hamming_many
    from ..rules.candidates import stage_candidates_for
    from ..rules.keep import stage_representatives
    from ..rules.verify import stage_verify_rules

    for pos, t in enumerate((text_a, text_b)):
        if not isinstance(t, str):
            raise InputTypeError(f"explain() text {pos} is {type(t).__name__}, expected str")
    id_list = [str(x) for x in ids]
    if len(id_list) != 2:
        raise ConfigError(f"ids must name the two texts, got {len(id_list)} ids")
    cfg = with_overrides(config, overrides, caller="explain()")
    if cfg.workers != 1:
        cfg = DedupConfig(**{**cfg.to_dict(), "workers": 1})
    verifier = cfg.make_verifier()
    fp = cfg.make_fingerprinter()
    texts = [text_a, text_b]
    lengths = np.array([len(text_a), len(text_b)], np.int64)
    first = stage_exact(texts) if cfg.exact else np.arange(2, dtype=np.int64)
    is_exact = bool(first[1] == 0)
    batch = fp.fingerprint_batch(texts)
    fps, empty = batch.fingerprints, batch.empty
    distance = int(hamming_many(fps[:1], fps[1:])[0])
    bits = 128 if fps.ndim == 2 else 64

    # the candidate channels: the run's own call, on the two texts
    passes: dict[str, Any] = {}
    lsh_info: dict[str, Any] = {}
    ca, _, _ = stage_candidates_for(
        cfg, texts, fps, lengths, ~empty, verifier, passes, lsh_info, {}, None, None
    )
    near_candidate = bool(ca.size)
    channels: list[str] = ["exact"] if is_exact else []  # (copies never reach the others)
    if is_exact:
        pass
    elif cfg.candidates == "lsh":
        if lsh_info.get("pairs", 0):
            channels.append("minhash")
        if lsh_info.get("simhash_pairs", 0):
            channels.append("simhash")
    elif near_candidate:
        channels.append("simhash")
    near_candidate = near_candidate and not is_exact
    candidate = is_exact or near_candidate
    minhash = _minhash_detail(cfg, verifier, texts, bool(lsh_info.get("pairs", 0)))
    simhash = {
        "distance": distance,
        "bits": bits,
        "fingerprints": [_hex(fps[0]), _hex(fps[1])],
        "empty": [bool(empty[0]), bool(empty[1])],
        "passes": {
            name: {
                "distance": p.get("distance_used", p.get("distance")),
                "method": p.get("method"),
            }
            for name, p in passes.items()
        },
        "found": "simhash" in channels,
    }

    # the verifier's decision, as the verify stage makes it (also for a pair no channel finds:
    # what it would have said)
    d = np.array([distance], np.int32)
    a0, b0 = np.zeros(1, np.int64), np.ones(1, np.int64)
    if cfg.verify:
        ok_v, score_v, rule_v = stage_verify_rules(verifier, texts, a0, b0, d)
        v_ok, v_score, v_rule = bool(ok_v[0]), float(score_v[0]), int(rule_v[0])
    else:
        v_ok, v_score, v_rule = True, 1.0 - distance / bits, RULE_UNVERIFIED
    if is_exact:
        rule, score, duplicate = RULE_EXACT, 1.0, True
    else:
        rule, score, duplicate = v_rule, v_score, v_ok and near_candidate
    al = align(verifier, text_a, text_b)
    la, lb = len(al.tokens_a), len(al.tokens_b)
    similarity = containment = None
    if al.lcs is not None and la and lb:
        similarity = 2.0 * al.lcs / (la + lb)
        containment = al.lcs / min(la, lb)
    vcfg = verifier.config()

    # which text a run keeps: the keep policy on the two texts
    keep = _keep_detail(
        cfg, verifier, texts, first, lengths, duplicate, is_exact, stage_representatives
    )
    if is_exact:
        decision = "duplicate"
    elif not near_candidate:
        decision = "not a candidate"
    else:
        decision = "duplicate" if duplicate else "not a duplicate"
    notes = []
    if not near_candidate and not is_exact and v_ok:
        notes.append(
            "the verifier would accept this pair, but no candidate channel finds it, so a run "
            "never compares it"
        )
    if v_rule == RULE_BOUND and not is_exact:  # (exact copies never reach the verifier)
        notes.append(
            "rejected by the token-overlap bound before the exact LCS (the bound's ratio is "
            "the score; the exact similarity is lower or equal)"
        )
    if al.runs is None:
        notes.append(
            f"the pair has {la} x {lb} tokens, over max_lcs_cells ({verifier.max_lcs_cells}): "
            "the verifier decides on the token overlap and no alignment is computed"
        )
    return Explanation(
        ids=(id_list[0], id_list[1]),
        decision=decision,
        duplicate=duplicate,
        candidate=candidate,
        rule=RULE_NAMES[rule] if candidate else "none",
        verdict=RULE_NAMES[v_rule],
        score=round(score, 6),
        channels=tuple(channels),
        exact=is_exact,
        similarity=None if similarity is None else round(similarity, 6),
        containment=None if containment is None else round(containment, 6),
        lcs=al.lcs,
        tokens=(la, lb),
        chars=(len(text_a), len(text_b)),
        measure="lcs" if al.runs is not None else "overlap",
        thresholds={
            "threshold": vcfg["threshold"],
            "containment": vcfg["containment"],
            "min_containment_tokens": vcfg["min_containment_tokens"],
            "trust_distance": vcfg["trust_distance"],
        },
        keep=keep,
        simhash=simhash,
        minhash=minhash,
        alignment=al.runs,
        config={
            **{k: v for k, v in cfg.to_dict().items() if k != "workers"},
            "verifier": vcfg,
            "fingerprinter": fp.config() if hasattr(fp, "config") else None,
        },
        notes=tuple(notes),
    )


def _hex(fp: Any) -> str:
    arr = np.atleast_1d(np.asarray(fp, np.uint64))
    return "".join(f"{int(w):016x}" for w in arr.tolist())


def _minhash_detail(
    cfg: DedupConfig, verifier: Verifier, texts: list[str], found: bool
) -> dict[str, Any]:
    """The MinHash channel for the pair: the run's plan, the bands whose keys the two share
    and how many of their MinHash values agree (the candidate filter's count)."""
    from ..fingerprint.minhash import band_keys, minhash_signatures

    plan = cfg.lsh_plan()
    out: dict[str, Any] = {
        "mode": cfg.candidates,
        "bands": plan.bands,
        "rows": plan.rows,
        "hashes": plan.hashes,
        "min_agreement": plan.min_agreement,
        "threshold": plan.threshold,
        "probability": plan.probability,
        "found": found,
    }
    sig, ntok = minhash_signatures(verifier, texts, plan.hashes)
    if not (ntok > 0).all():
        out.update(shared_bands=[], agreement=0, note="a text without tokens has no signature")
        return out
    shared = [
        band for band in range(plan.bands) if (k := band_keys(sig, band, plan.rows))[0] == k[1]
    ]
    agreement = int((sig[0] == sig[1]).sum())
    out.update(
        shared_bands=shared,
        agreement=agreement,
        jaccard_estimate=round(agreement / plan.hashes, 4),
    )
    return out


def _keep_detail(
    cfg: DedupConfig,
    verifier: Verifier,
    texts: Sequence[str],
    first: Any,
    lengths: Any,
    duplicate: bool,
    is_exact: bool,
    representatives: Any,
) -> dict[str, Any]:
    """What the keep policy does with the pair alone (A first in input order): which text is
    dropped for which, or that the length guard keeps both."""
    from ..verify.tokens import token_counts

    out: dict[str, Any] = {"policy": cfg.keep, "kept": ["A", "B"], "dropped": []}
    t = verifier.threshold
    # the length guard compares token counts (neardup.verify.rule.may_drop), as dedup does
    tokens = token_counts(verifier, texts)
    out["length_ratio"] = round(float(max(tokens) / max(1, min(tokens))), 4)
    out["max_length_ratio"] = round((2.0 - t) / t, 4)
    if not duplicate:
        return out
    if cfg.keep == "none":
        out.update(kept=[], dropped=["A", "B"])
        return out
    pair = np.zeros(0, np.int64) if is_exact else np.zeros(1, np.int64)
    root = representatives(first, pair, pair + 1, lengths, cfg.keep, t, tokens)
    names = ("A", "B")
    kept = [names[i] for i in range(2) if root[i] == i]
    dropped = [names[i] for i in range(2) if root[i] != i]
    out.update(kept=kept, dropped=dropped, length_guard=not dropped)
    return out


def explain_in_corpus(
    inputs: str | Sequence[str],
    id_a: str,
    id_b: str,
    *,
    config: DedupConfig | None = None,
    fmt: str | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    encoding: str = "utf-8",
    **overrides: Any,
) -> Explanation:
    """:func:`explain` for two documents of a corpus, named by id (read as ``neardup dedup``
    reads it: :func:`neardup.io.read_corpus`); A is the one earlier in the corpus (the order a
    run's keep policy sees), whichever order the ids are given in.

    Raises
    ------
    NotFoundError
        An id is not in the corpus.
    """
    from ..errors import NotFoundError
    from ..io import read_corpus

    with read_corpus(
        list(inputs), fmt=fmt, text_field=text_field, id_field=id_field, encoding=encoding
    ) as corpus:
        want = {id_a, id_b}
        pos: dict[str, int] = {}
        for i, x in enumerate(corpus.ids):
            if x in want:
                pos[x] = i
                if len(pos) == len(want):
                    break
        for x in (id_a, id_b):
            if x not in pos:
                raise NotFoundError(
                    f"document {x!r} is not in the corpus ({len(corpus.ids):,} documents read "
                    f"from {', '.join(inputs)}); check the id and --id-field"
                )
        first, second = sorted((id_a, id_b), key=pos.__getitem__)
        ta, tb = corpus.texts[pos[first]], corpus.texts[pos[second]]
    return explain(ta, tb, config=config, ids=(first, second), **overrides)


def config_for_store(
    fingerprinter: dict[str, Any] | None,
    verifier: dict[str, Any] | None,
    candidates: str,
    radius: int,
    lsh_plan: dict[str, Any] | None = None,
) -> DedupConfig:
    """The :class:`DedupConfig` that compares two stored documents as an online store does:
    its fingerprinter and verifier, its candidate mode, the SimHash radius it searches (one pass
    at that distance over every text) and its MinHash plan (bands x rows). The online store
    verifies with the batch's own rule (:func:`stage_verify_rules`)."""
    plan = lsh_plan or {}
    return DedupConfig(
        fingerprinter=fingerprinter,
        verifier=verifier,
        candidates="lsh" if candidates == "lsh" else "simhash",
        max_distance=int(radius),
        threshold=plan.get("threshold"),
        lsh_bands=plan.get("bands"),
        lsh_rows=plan.get("rows"),
        verify=verifier is not None,
    )


def explain_with_store(
    store: Any,
    a: dict[str, str],
    b: dict[str, str],
    **overrides: Any,
) -> Explanation:
    """:func:`explain` as an online store decides: ``a`` and ``b`` are each ``{"id": ...}`` (a
    stored document, read with the store's ``get``) or ``{"text": ...}`` (a text not stored,
    e.g. a document about to be checked), compared with the store's own fingerprinter,
    verifier, candidate mode, radius and MinHash plan (:func:`config_for_store`).

    ``store`` is an open :class:`neardup.online.Deduplicator` (read only: nothing is written).
    A ``threshold`` override is a what-if: it replaces the store's threshold in the verifier and
    the MinHash plan alike, as ``--threshold`` does for a run.
    A is the one a keep-first store would keep: of two stored documents the one stored first
    (whatever their times), a stored document before a new text, two new texts in the order
    given.

    Raises
    ------
    InputError
        A side is not exactly one of ``id`` or ``text`` (a str), or a stored document has no
        text (a store with ``store_text`` off).
    NotFoundError
        A stored id is not in the store's window.
    """
    from ..errors import InputError

    sides: list[tuple[int, float, int, str, str]] = []
    for name, side in (("a", a), ("b", b)):
        if not isinstance(side, dict) or len(side) != 1 or not ({"id", "text"} >= side.keys()):
            raise InputError(f'{name} must be {{"id": ...}} or {{"text": ...}}, got {side!r:.80}')
        ((kind, value),) = side.items()
        if not isinstance(value, str):
            raise InputError(f"{name}.{kind} must be a string, got {type(value).__name__}")
        if kind == "id":
            doc = store.get(value)
            if "text" not in doc:
                raise InputError(
                    f"document {value!r} is stored without its text (store_text off): "
                    "nothing to compare"
                )
            # stored first = the smaller row id (row ids are given in the order rows are
            # stored), not the earlier time: a back-filled document has an older time
            row = store.store.get_row(value)
            order = float(row.rowid) if row is not None else float("inf")
            sides.append((0, order, len(sides), value, doc["text"]))
        else:
            sides.append((1, 0.0, len(sides), f"text {name.upper()}", value))
    sides.sort()  # stored before new, stored ones in the order stored, new texts as given
    verifier = store.verifier.config() if store.verifier is not None else None
    if verifier is not None and overrides.get("threshold") is not None:
        # a what-if threshold means what --threshold means: the verifier's and the plan's
        verifier = {**verifier, "threshold": overrides["threshold"]}
    config = config_for_store(
        store.fingerprinter.config(),
        verifier,
        store.candidates,
        store.radius,
        store.lsh_plan.to_dict() if store.lsh_plan is not None else None,
    )
    (_, _, _, id_a, text_a), (_, _, _, id_b, text_b) = sides
    return explain(text_a, text_b, config=config, ids=(id_a, id_b), **overrides)
