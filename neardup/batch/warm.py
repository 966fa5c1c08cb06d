"""A first run's kernel compile on two processes.

A run compiles its kernels as it reaches them, stage by stage, one at a time (numba's compiler
lock), and a cold cache makes the compile most of a small run's time. When ``neardup dedup``
starts compiling (:func:`neardup._jit.announce_compiles`) it starts :func:`start_warming`: a
helper process that compiles the kernels of the *last* stages -- verification, exact groups and
the keep rule, the candidate joins -- into the same cache, in reverse stage order, while the run
compiles those of its first stages (reading, fingerprints, signatures). When the run reaches a
kernel the helper has cached it loads it instead of compiling it. Nothing is shared but the
cache (numba writes its entries atomically); a helper still compiling when the run ends is
stopped (what it cached stays). ``NEARDUP_NO_WARM=1`` turns it off.

:func:`warm_kernels` runs the stages on a small built-in corpus with the argument types a run
passes (texts as :class:`~neardup.io.texts.SpanTexts`: ASCII spans of a read-only buffer and
``str`` for the rest), so the helper compiles the same specialisations
(``tests/batch/test_warm.py`` checks that a run after it compiles none of them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _jit

__all__ = ["NO_WARM_ENV", "helper_command", "helper_env", "start_warming", "warm_kernels"]

#: environment variable that turns the helper off (also set in the helper itself)
NO_WARM_ENV = _jit.NO_WARM_ENV

_helper: _jit.Helper | None = None


def _corpus() -> Any:
    """Near duplicates in English (ASCII spans) and Chinese (``str``), an exact copy, a
    containment pair and unrelated texts."""
    from ..io.texts import SpanTexts

    words = [
        "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "while", "cold", "wind",
        "blows", "across", "open", "field", "farmer", "counts", "his", "sheep", "before",
        "long", "winter", "night", "falls", "on", "valley",
    ]  # fmt: skip
    rng = np.random.default_rng(7)
    en: list[str] = []
    for k in range(24):
        base = [words[int(i)] for i in rng.integers(0, len(words), 40 + 8 * k)]
        edited = list(base)
        edited[int(rng.integers(0, len(edited)))] = "changed"
        en += [" ".join(base), " ".join(edited)]
    en.append(en[0])  # an exact copy
    en.append(" ".join(en[2].split()[:20]))  # an excerpt (containment)
    zh = [
        "今天天气很好我们一起去公园散步然后吃午饭",
        "今天天气很好我们一起去公园散步然后吃晚饭",
    ] * 3
    joined = "\n".join(en).encode("ascii")
    texts = SpanTexts()
    b = texts.add_buffer(np.frombuffer(joined, np.uint8))
    ends = np.cumsum([len(t) for t in en]) + np.arange(len(en))
    starts = ends - np.array([len(t) for t in en])
    texts.extend_spans(b, starts.astype(np.int64), ends.astype(np.int64))
    for t in zh:
        texts.append(t)
    return texts


def warm_kernels() -> None:
    """Compile (or load from the cache) the kernels of a run's last stages, the last first."""
    from ..fingerprint.minhash import minhash_signatures
    from ..rules.config import DedupConfig
    from ..rules.groups import ExactGroups, stage_expand
    from ..rules.keep import stage_representatives
    from ..rules.lsh import lsh_pairs
    from ..rules.passes import planned_pairs
    from ..rules.verify import stage_verify_rules

    cfg = DedupConfig()
    verifier = cfg.make_verifier()
    texts = _corpus()
    # the MinHash signatures first: a run reaches them right after its reading, fingerprint and
    # exact-group kernels (which it compiles itself), sooner than the helper would in stage order
    minhash_signatures(verifier, texts, cfg.lsh_plan().hashes)
    # the candidate joins (the band self-join, the SimHash pass's tables), at a size that takes
    # the paths a run of a few thousand documents takes (the order measured best: a run reaches
    # them before the verification, whose compile is the largest) ...
    rng = np.random.default_rng(8)
    m = 2000
    fps = rng.integers(0, 2**63, m, dtype=np.uint64)
    fps[1::2] = fps[::2] ^ np.uint64(5)
    plan = cfg.lsh_plan()
    sig = rng.integers(0, 2**16, (m, plan.hashes), dtype=np.uint16)
    sig[1::2] = sig[::2]
    lsh_pairs(sig, np.ones(m, bool), plan)
    planned_pairs(fps, 3, work_ns_per_doc=None, max_pairs=64 * m)
    # ... verification ...
    n = len(texts)
    a = np.arange(0, n - 1, 2, dtype=np.int64)
    b = a + 1
    d = np.zeros(a.size, np.int32)
    ok, score, rule = stage_verify_rules(verifier, texts, a, b, d)
    # ... the near pairs repeated over exact groups and the keep rule (a run compiles the
    # exact groups' own pairs early, right after reading: not worth a helper's time)
    first = np.arange(n, dtype=np.int64)
    first[48] = 0  # the exact copy
    groups = ExactGroups.from_first(first)
    stage_expand(groups, a[ok], b[ok], d[ok], score[ok], cfg.expand_pairs, rule[ok])
    tokens = np.full(n, 10, np.int64)
    stage_representatives(
        first, a[ok], b[ok], texts.lengths(), cfg.keep, verifier.threshold, tokens
    )


def helper_command() -> list[str]:
    """The helper's command line (:func:`neardup._jit.helper_command`)."""
    return _jit.helper_command("neardup.batch.warm")


def helper_env() -> dict[str, str]:
    """The helper's environment (:func:`neardup._jit.helper_env`)."""
    return _jit.helper_env()


def start_warming() -> None:
    """Start the helper process (once per process; not inside the helper, nor with
    ``NEARDUP_NO_WARM=1``, nor when the kernels are cached for this process only); it is
    stopped when this process exits."""
    global _helper
    if _helper is None:
        _helper = _jit.start_helper("neardup.batch.warm")


if __name__ == "__main__":  # pragma: no cover - the helper process
    warm_kernels()
