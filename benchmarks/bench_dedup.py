#!/usr/bin/env python3
"""End-to-end dedup throughput vs fingerprint-only throughput, with peak memory.

Two generated corpora (no third-party text; :class:`TopicCorpus`, a topic mixture over a
200,000-word made-up lexicon), each with planted near-duplicates:

* ``long``:  ~3.5 KB English-like documents (600 words: 40 % function words, a main and a
  second topic, a general background; sentences of 4-30 words);
* ``short``: ~90-character posts (12-22 words; 60 % function words, one topic -- raised so that
  short posts are no more spread out than the dev set's short English texts).

Calibration is printed and saved: the percentiles of the random-pair SimHash distance
(default fingerprints) of a 20,000-document sample of the generated corpus next to the dev
set's (``../shared/data/dev``, when present). The generator is tuned to be *no more* spread out
than the dev text at p10/p50 (less spread = more candidate pairs = a harder benchmark).
(i.i.d. words from one Zipf law, the previous generator, put all long documents within ~5
bits of each other; real long English text is ~21 bits apart at the median.)

A fraction ``--dup-rate`` of documents are copies of an earlier one, half exact, half with ~3 %
of the words substituted and sometimes a sentence dropped. For each corpus a child process

1. writes it as JSONL,
2. times ``Fingerprinter().fingerprint_many`` over the texts (fingerprint-only docs/s),
3. runs the whole ``neardup dedup`` path (read JSONL, dedup on defaults, write the kept
   documents and the pairs CSV) twice and times the second run — end-to-end docs/s (the
   first run, which compiles the numba kernels a fresh install has not cached yet, is
   reported apart as ``end_to_end_first_run_s``),
4. times the floor of any pipeline over the file: the reader alone (``read_corpus``: no
   hashing, no fingerprints; ``read_only_s``) and copying every line out (``write_all_s``),
5. with ``--max-distances 0,2,3``, times one more run per distance with the candidate distance
   forced (``--max-distance``), with its planted recall: the speed/recall trade-off,

and reports the end-to-end phase's peak memory (``peak MB``: resident, including the pages of
the memory-mapped input; ``anon MB``: the process's own memory; see :class:`RssSampler`). The
target is end-to-end >= 0.5x fingerprint-only throughput.

    python benchmarks/bench_dedup.py                  # --n 200000 (fits the shared 2-core box)
    python benchmarks/bench_dedup.py --n 1000000      # the full-size run
    python benchmarks/bench_dedup.py --kinds short --n 50000 --workers 2
    python benchmarks/bench_dedup.py --kinds short --n 1000000 --workers 2 --max-distances 0,1,2,3
    python benchmarks/bench_dedup.py --inprocess-peers --kinds short,long --n 20000  # datasketch
    python benchmarks/bench_dedup.py --peers --n 1000000  # peers in their own processes:
                                                          # benchmarks/peers_dedup.py

Prints a table and writes ``benchmarks/results/bench_dedup.json``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


# ---------------------------------------------------------------------------------------------
# the generated corpus: a topic mixture

N_FUNCTION = 150  # function words ("the", "of", ...): short, shared by every document
N_LEXICON = 200_000  # content words
N_TOPICS = 400
TOPIC_WORDS = 2_000  # each topic's own vocabulary, Zipfian over it
#: token shares: function words, the document's main topic, a second topic, general background
#: (calibrated so random-pair SimHash distances are *no more* spread out than the dev set's)
MIX = {"long": (0.40, 0.40, 0.10), "short": (0.60, 0.40, 0.0)}
WORDS = {
    "long": (450, 700),
    "short": (12, 22),
}  # words per document (uniform); ~3.5 KB / ~100 chars


def _made_up_words(rng: np.random.Generator, n: int, lo: int, hi: int) -> list[str]:
    """``n`` pronounceable made-up words of ``lo..hi`` letters (alternating consonants/vowels)."""
    cons = np.array([ord(c) for c in "bcdfghjklmnprstvwyz"], np.uint32)
    vow = np.array([ord(c) for c in "aeiou"], np.uint32)
    lens = rng.integers(lo, hi + 1, n)
    pos = np.arange(hi)
    is_v = (pos[None, :] % 2 == 1) ^ (rng.random(n) < 0.3)[:, None]
    chars = np.where(
        is_v, vow[rng.integers(0, vow.size, (n, hi))], cons[rng.integers(0, cons.size, (n, hi))]
    )
    chars[pos[None, :] >= lens[:, None]] = 0
    return np.ascontiguousarray(chars).view(f"<U{hi}").ravel().tolist()


def _zipf_ranks(rng: np.random.Generator, size: int, n: int, s: float) -> np.ndarray:
    """Ranks 0..n-1 from the continuous Zipf law ``p(x) ~ x^-s`` on [1, n + 1) (inverse CDF)."""
    u = rng.random(size)
    if abs(s - 1.0) < 1e-9:
        x = np.exp(u * np.log(n + 1.0))
    else:
        x = (1.0 + u * ((n + 1.0) ** (1.0 - s) - 1.0)) ** (1.0 / (1.0 - s))
    return np.minimum(x.astype(np.int64) - 1, n - 1)


class TopicCorpus:
    """English-like made-up text: a mixture of topics over a large lexicon.

    Models: Zipfian function words shared by every document (~40 % of tokens, top word ~7 %,
    like "the"), a main topic per document (topic popularity Zipfian over 400 topics, each
    topic a Zipfian vocabulary of 2,000 words drawn from a 200,000-word lexicon), a second
    topic, a general Zipfian background, sentences of 4-30 words (capitalised, full stops).
    Does not model: grammar or word order (tokens are independent given the topics), real
    morphology, numbers/names/markup, boilerplate shared across pages, languages other than
    English-like text. Near-duplicates are planted by :func:`generate`.
    """

    def __init__(self, seed: int = 12345) -> None:
        rng = np.random.default_rng(seed)
        words = _made_up_words(rng, N_FUNCTION, 1, 4) + _made_up_words(rng, N_LEXICON, 3, 11)
        self.lexicon = words
        self.v = len(words)
        variants = [
            words,
            [w + "." for w in words],
            [w.capitalize() for w in words],
            [w.capitalize() + "." for w in words],
        ]
        enc = [(w + " ").encode("ascii") for vs in variants for w in vs]
        self.plen = np.fromiter((len(b) for b in enc), np.int64, len(enc))
        self.pstart = np.zeros(len(enc), np.int64)
        np.cumsum(self.plen[:-1], out=self.pstart[1:])
        self.pool = np.frombuffer(b"".join(enc), np.uint8)
        # each topic's vocabulary: random lexicon words (topics may share words)
        self.topic_words = N_FUNCTION + rng.integers(0, N_LEXICON, (N_TOPICS, TOPIC_WORDS))

    def docs(self, rng: np.random.Generator, m: int, kind: str) -> list[str]:
        """``m`` new documents of ``kind`` ("long" or "short")."""
        lo, hi = WORDS[kind]
        p_func, p_main, p_second = MIX[kind]
        lens = rng.integers(lo, hi + 1, m)
        total = int(lens.sum())
        doc_of = np.repeat(np.arange(m), lens)
        t1 = _zipf_ranks(rng, m, N_TOPICS, 0.8)
        t2 = _zipf_ranks(rng, m, N_TOPICS, 0.8)
        u = rng.random(total)
        ids = np.empty(total, np.int64)
        f = u < p_func
        ids[f] = _zipf_ranks(rng, int(f.sum()), N_FUNCTION, 1.0)
        for tt, sel in (
            (t1, (u >= p_func) & (u < p_func + p_main)),
            (t2, (u >= p_func + p_main) & (u < p_func + p_main + p_second)),
        ):
            rank = _zipf_ranks(rng, int(sel.sum()), TOPIC_WORDS, 1.0)
            ids[sel] = self.topic_words[tt[doc_of[sel]], rank]
        bg = u >= p_func + p_main + p_second
        ids[bg] = N_FUNCTION + _zipf_ranks(rng, int(bg.sum()), N_LEXICON, 1.05)
        # sentences of 4..30 words; the last word of a document ends one
        ends = np.zeros(total, bool)
        ce = np.cumsum(rng.integers(4, 31, total // 4 + 8)) - 1
        ends[ce[ce < total]] = True
        doc_end = np.cumsum(lens) - 1
        ends[doc_end] = True
        starts = np.zeros(total, bool)
        starts[0] = True
        starts[1:] = ends[:-1]
        ids += self.v * (ends.astype(np.int64) + 2 * starts.astype(np.int64))
        # render: gather every token's bytes (with its trailing space) in one go
        tl = self.plen[ids]
        cum = np.cumsum(tl)
        ps = self.pstart[ids]
        step = np.ones(int(cum[-1]), np.int64)  # +1 inside a token, a jump at each token start
        step[0] = ps[0]
        step[cum[:-1]] = ps[1:] - (ps[:-1] + tl[:-1] - 1)
        buf = self.pool[np.cumsum(step)].tobytes()
        bounds = np.concatenate([[0], cum[doc_end]]).tolist()
        return [buf[bounds[i] : bounds[i + 1] - 1].decode("ascii") for i in range(m)]


def _edit(rng: np.random.Generator, text: str, lexicon: list[str]) -> str:
    """A near-duplicate: ~3 % of the words substituted, and for a third a sentence dropped."""
    w = text.split(" ")
    for _ in range(max(1, len(w) // 33)):
        w[int(rng.integers(0, len(w)))] = lexicon[int(rng.integers(N_FUNCTION, len(lexicon)))]
    out = " ".join(w)
    if rng.random() < 1 / 3:
        sents = out.split(". ")
        if len(sents) > 4:
            del sents[int(rng.integers(0, len(sents)))]
            out = ". ".join(sents)
    return out


def generate(
    kind: str, n: int, seed: int, dup_rate: float, planted: list[tuple[int, int]] | None = None
) -> list[str]:
    """``n`` documents of ``kind`` ("long": ~3.5 KB, "short": ~100 chars) from
    :class:`TopicCorpus`; a fraction ``dup_rate`` are copies of an earlier document, half of
    them exact, half edited (:func:`_edit`). Deterministic in ``seed``. ``planted`` collects
    ``(source, copy)`` positions of the edited copies."""
    if kind not in WORDS:
        raise SystemExit(f"unknown kind {kind!r}; use long or short")
    model = TopicCorpus()
    rng = np.random.default_rng(seed)
    texts: list[str] = []
    block = 500 if kind == "long" else 20000
    while len(texts) < n:
        m = min(block, n - len(texts))
        fresh = model.docs(rng, m, kind)
        dup = rng.random(m) < dup_rate
        dup[0] = dup[0] and bool(texts)
        exact = rng.random(m) < 0.5
        src = rng.random(m)
        for i in range(m):
            if dup[i]:
                j = int(src[i] * len(texts))
                t = texts[j] if texts else fresh[i]
                if not exact[i] and planted is not None and texts:
                    planted.append((j, len(texts)))
                texts.append(t if exact[i] else _edit(rng, t, model.lexicon))
            else:
                texts.append(fresh[i])
    return texts


def random_pair_distances(texts: list[str], pairs: int = 200_000, seed: int = 1) -> dict:
    """Percentiles of the default-fingerprint Hamming distance between random pairs of texts."""
    from neardup import Fingerprinter, hamming_many

    fp = Fingerprinter().fingerprint_many(texts)
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, len(texts), pairs), rng.integers(0, len(texts), pairs)
    keep = a != b
    d = hamming_many(fp[a[keep]], fp[b[keep]])
    q = np.percentile(d, [0.1, 1, 10, 50])
    return {
        "docs": len(texts),
        "p0.1": int(q[0]),
        "p1": int(q[1]),
        "p10": int(q[2]),
        "p50": int(q[3]),
        "frac_le_6": float(np.mean(d <= 6)),
        "frac_le_14": float(np.mean(d <= 14)),
        "frac_le_18": float(np.mean(d <= 18)),
    }


def dev_distances() -> dict:
    """The same percentiles on the dev set (``../shared/data/dev``), when it exists."""
    path = ROOT.parent / "shared" / "data" / "dev" / "docs.jsonl"
    if not path.exists():
        return {}
    docs = [json.loads(line) for line in path.open(encoding="utf-8")]
    out = {}
    for name, lang, lo, hi in (
        ("dev en < 200 chars", "en", 0, 200),
        ("dev en >= 200", "en", 200, 1 << 40),
        ("dev en >= 1000", "en", 1000, 1 << 40),
    ):
        t = [d["text"] for d in docs if d["lang"] == lang and lo <= len(d["text"]) < hi]
        out[name] = random_pair_distances(t)
    return out


def bigram_df() -> dict:
    """How concentrated texts are on frequent token bigrams (the MinHash shingles, over
    ``Verifier.tokens``): the share of texts holding the top bigrams, how many bigrams are in
    >= 1 % of texts, and the sum of the top 50 shares squared (buckets keyed by a frequent
    bigram hold ~N * share documents). Dev set slices next to generated posts and documents."""
    from collections import Counter

    from neardup.verify.rule import Verifier

    v = Verifier()
    sets: dict[str, list[str]] = {}
    path = ROOT.parent / "shared" / "data" / "dev" / "docs.jsonl"
    if path.exists():
        docs = [json.loads(line) for line in path.open(encoding="utf-8")]
        for lang in ("en", "zh"):
            sets[f"dev {lang} < 200 chars"] = [
                d["text"] for d in docs if d["lang"] == lang and len(d["text"]) < 200
            ]
            sets[f"dev {lang} >= 1000 chars"] = [
                d["text"] for d in docs if d["lang"] == lang and len(d["text"]) >= 1000
            ]
    sets["generated short"] = generate("short", 20_000, 0, 0.0)
    sets["generated long"] = generate("long", 3_000, 0, 0.0)
    out = {}
    for name, texts in sets.items():
        df: Counter[tuple[str, str]] = Counter()
        for t in texts:
            tok = v.tokens(t)
            df.update(set(itertools.pairwise(tok)))
        share = np.array(sorted(df.values(), reverse=True), np.float64) / max(1, len(texts))
        out[name] = {
            "texts": len(texts),
            "top": [(" ".join(k), round(c / len(texts), 3)) for k, c in df.most_common(5)],
            "bigrams_in_1pct": int((share >= 0.01).sum()),
            "sum_df2_top50": round(float((share[:50] ** 2).sum()), 4),
        }
    return out


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def proc_memory(keys: tuple[str, ...] = ("VmRSS", "RssAnon", "RssFile")) -> dict[str, int]:
    """This process's memory now, in kB, from ``/proc/self/status``: ``VmRSS`` (all),
    ``RssAnon`` (heap, not file pages), ``RssFile`` (mapped file pages, which the kernel can
    drop); empty where the file cannot be read (not Linux)."""
    out: dict[str, int] = {}
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                key = line.split(":", 1)[0]
                if key in keys:
                    out[key] = int(line.split()[1])
    except OSError:
        pass
    return out


class RssSampler:
    """Peak resident memory of this process while a phase runs, sampled from
    ``/proc/self/status`` every ``interval`` seconds (:func:`proc_memory`, kB): by default
    ``VmRSS`` (all) and ``RssAnon`` (heap, not file pages).

    The child's lifetime maximum (``ru_maxrss``) also covers generating the corpus and the
    fingerprint-only run, whose freed texts the allocator may keep; and ``neardup dedup`` reads
    JSONL through a memory map, whose file pages count in RSS without being the process's own
    memory (the kernel can drop them). So the end-to-end phase is reported on its own, both
    ways."""

    def __init__(
        self, keys: tuple[str, ...] = ("VmRSS", "RssAnon"), interval: float = 0.02
    ) -> None:
        import threading

        self.peak = dict.fromkeys(keys, 0)
        self._keys = keys
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _read(self) -> None:
        for key, kb in proc_memory(self._keys).items():
            self.peak[key] = max(self.peak[key], kb)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._read()

    def __enter__(self) -> RssSampler:
        self._read()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._read()


def _planted_recall(pairs_csv: Path, planted: list[tuple[int, int]]) -> float | None:
    found = set()
    with pairs_csv.open(encoding="utf-8") as fh:
        next(fh, None)
        for line in fh:
            a, b = line.split(",", 2)[:2]
            found.add((int(a[1:]), int(b[1:])))
    hit = sum((min(x, y), max(x, y)) in found for x, y in planted)
    return round(hit / len(planted), 4) if planted else None


def _ratio(x: float | None, y: float | None) -> float | None:
    return None if x is None or not y else round(x / y, 3)


def write_corpus(
    src: Path, kind: str, n: int, seed: int, dup_rate: float
) -> tuple[list[tuple[int, int]], dict, list[str]]:
    """Generate the corpus and write it as JSONL: (planted pairs, random-pair distances, texts)."""
    import orjson

    planted: list[tuple[int, int]] = []
    texts = generate(kind, n, seed, dup_rate, planted)
    sample = np.random.default_rng(7).choice(n, size=min(n, 20000), replace=False)
    spread = random_pair_distances([texts[i] for i in sample.tolist()])
    with src.open("wb") as fh:
        for i in range(0, n, 10000):
            fh.write(
                b"".join(
                    orjson.dumps({"id": f"d{j}", "text": texts[j]}) + b"\n"
                    for j in range(i, min(n, i + 10000))
                )
            )
    return planted, spread, texts


def child(
    kind: str,
    n: int,
    seed: int,
    dup_rate: float,
    workers: int,
    distances: list[int],
    once: bool = False,
    low_memory: bool = False,
) -> dict:
    from neardup import Fingerprinter
    from neardup.cli.main import run as cli_main  # as the console script runs
    from neardup.io import read_corpus, write_kept

    Fingerprinter().fingerprint_many(["warm up the kernels"], workers=workers)
    with tempfile.TemporaryDirectory(prefix="neardup-bench-") as tmp:
        src = Path(tmp) / "docs.jsonl"
        t0 = time.perf_counter()
        if low_memory:  # generated and written by a process that exits: its texts are freed
            subprocess.run(
                [sys.executable, __file__, "--gen-only", tmp, "--kinds", kind, "--n", str(n),
                 "--seed", str(seed), "--dup-rate", str(dup_rate)],
                check=True,
            )  # fmt: skip
            meta = json.loads((Path(tmp) / "gen.json").read_text())
            planted = [tuple(p) for p in meta["planted"]]
            spread = meta["spread"]
            fp_s = None  # fingerprint-only needs the texts in memory
        else:
            planted, spread, texts = write_corpus(src, kind, n, seed, dup_rate)
        gen_s = time.perf_counter() - t0
        mb = src.stat().st_size / 1e6
        os.sync()  # the input's dirty pages written back now, not during the timed runs
        if not low_memory:
            t0 = time.perf_counter()
            Fingerprinter().fingerprint_many(texts, workers=workers)
            fp_s = time.perf_counter() - t0
            del texts
        summary = Path(tmp) / "summary.json"

        def dedup(extra: list[str]) -> float:
            for name in ("out.jsonl", "pairs.csv"):  # gone and written back: no writeback
                (Path(tmp) / name).unlink(missing_ok=True)  # during a timed run
            os.sync()
            t0 = time.perf_counter()
            rc = cli_main(
                [
                    "dedup", str(src), "--output", str(Path(tmp) / "out.jsonl"),
                    "--pairs-out", str(Path(tmp) / "pairs.csv"), "--summary-json", str(summary),
                    "--workers", str(workers), "--quiet", *extra,
                ]
            )  # fmt: skip
            if rc != 0:
                raise SystemExit(f"neardup dedup failed with exit code {rc}")
            return time.perf_counter() - t0

        # twice: the first run compiles whatever numba kernels the disk cache lacks (a fresh
        # install: tens of seconds); the second, timed as end-to-end, is the steady state
        # that fingerprint-only (warmed above) is compared with
        first_s = None if once else dedup([])  # --once: the numba cache is warm already
        with RssSampler() as rss:
            e2e_s = dedup([])
        stats = json.loads(summary.read_text(encoding="utf-8"))
        recall = _planted_recall(Path(tmp) / "pairs.csv", planted)
        # the floor of any pipeline over this file: the reader alone (no hashing, no
        # fingerprints), then copying every line out
        t0 = time.perf_counter()
        corpus = read_corpus([str(src)])
        read_s = time.perf_counter() - t0
        (Path(tmp) / "all.jsonl").unlink(missing_ok=True)
        t0 = time.perf_counter()
        write_kept(corpus, np.ones(len(corpus), bool), str(Path(tmp) / "all.jsonl"))
        write_s = time.perf_counter() - t0
        corpus.close()
        (Path(tmp) / "all.jsonl").unlink()
        # the trade-off: the same run with the candidate distance forced (--max-distance)
        tradeoff = []
        for k in distances:
            s = dedup(["--max-distance", str(k)])
            st = json.loads(summary.read_text(encoding="utf-8"))
            tradeoff.append(
                {
                    "max_distance": k,
                    "end_to_end_s": round(s, 2),
                    "ratio_e2e_to_fingerprint": _ratio(fp_s, s),
                    "candidates": st.get("candidates"),
                    "planted_recall": _planted_recall(Path(tmp) / "pairs.csv", planted),
                    "timings_s": st.get("timings_s"),
                }
            )
    return {
        "kind": kind,
        "n": n,
        "input_mb": round(mb, 1),
        "workers": workers,
        "generate_s": round(gen_s, 2),
        "fingerprint_s": None if fp_s is None else round(fp_s, 2),
        "fingerprint_docs_per_s": _ratio(n, fp_s),
        "end_to_end_s": round(e2e_s, 2),
        "end_to_end_first_run_s": None if first_s is None else round(first_s, 2),
        "end_to_end_docs_per_s": round(n / e2e_s, 1),
        "ratio_e2e_to_fingerprint": _ratio(fp_s, e2e_s),
        "timings_s": stats.get("timings_s"),
        "candidates": stats.get("candidates"),
        "candidate_passes": stats.get("candidate_passes"),
        "lsh": stats.get("lsh"),
        "verified": stats.get("verified"),
        "random_pair_distances": spread,
        "planted_edited_pairs": len(planted),
        "planted_recall": recall,
        "read_only_s": round(read_s, 3),
        "write_all_s": round(write_s, 3),
        "ratio_read_only_to_fingerprint": _ratio(fp_s, read_s),
        "forced_distances": tradeoff,
        "exact_duplicates": stats.get("exact_duplicates"),
        "near_duplicates": stats.get("near_duplicates"),
        "clusters": stats.get("clusters"),
        "peak_rss_mb": round(rss.peak["VmRSS"] / 1024.0, 1),
        "peak_anon_mb": round(rss.peak["RssAnon"] / 1024.0, 1),
        "peak_rss_process_mb": round(peak_rss_mb(), 1),
    }


def _char3(text: str) -> list[bytes]:
    """datasketch's input: character 3-grams of the lower-cased, whitespace-collapsed text."""
    c = " ".join(text.lower().split())
    if len(c) < 3:
        return [c.encode()] if c else []
    return list({c[i : i + 3].encode() for i in range(len(c) - 2)})


def datasketch_pairs(texts: list[str], threshold: float = 0.5, num_perm: int = 128) -> set:
    """The peer's pipeline as its README shows it: a MinHash (char 3-grams) per text, inserted
    into MinHashLSH, then every text queried; pairs (a < b) of positions."""
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    sigs = []
    for i, t in enumerate(texts):
        m = MinHash(num_perm=num_perm)
        m.update_batch(_char3(t))
        lsh.insert(i, m)
        sigs.append(m)
    pairs = set()
    for i, m in enumerate(sigs):
        for j in lsh.query(m):
            if j != i:
                pairs.add((min(i, j), max(i, j)))
    return pairs


def gaoya_pairs(texts: list[str], workers: int, threshold: float = 0.5) -> set:
    """gaoya 0.2 ``MinHashStringIndex`` as its README shows it, set up like the datasketch peer:
    char 3-grams (lower-cased), Jaccard threshold 0.5, 128 hashes (32 bands x 4 rows, 32-bit),
    bulk insert then bulk query of every text (Rust threads); pairs ``(i, j)``, ``i < j``."""
    import gaoya

    index = gaoya.minhash.MinHashStringIndex(
        hash_size=32,
        jaccard_threshold=threshold,
        num_bands=32,
        band_size=4,
        analyzer="char",
        lowercase=True,
        ngram_range=(3, 3),
        id_container="vec",
    )
    ids = list(range(len(texts)))
    index.par_bulk_insert_docs(ids, texts)
    out = set()
    for i, found in enumerate(index.par_bulk_query(texts)):
        out.update((min(i, j), max(i, j)) for j in found if j != i)
    return out


def peers(
    kind: str, n: int, seed: int, workers: int, skip: set[str], valve_modes: list[str] | None = None
) -> dict:
    """neardup.dedup (in-process; the second of two runs is timed, with its peak memory),
    datasketch MinHashLSH and gaoya's MinHash index on the same generated texts: wall time and
    planted-pair recall (a pair counts when reported)."""
    from neardup import dedup

    planted: list[tuple[int, int]] = []
    texts = generate(kind, n, seed, 0.1, planted)
    out: dict = {"kind": kind, "n": n, "workers": workers, "planted": len(planted)}
    t0 = time.perf_counter()
    dedup(texts, workers=workers)  # the first run compiles what the numba cache lacks
    out["neardup_first_run_s"] = round(time.perf_counter() - t0, 2)
    import gc

    gc.collect()
    base = proc_memory()  # the texts (and what the first run left to the allocator)
    with RssSampler() as rss:
        t0 = time.perf_counter()
        r = dedup(texts, workers=workers)  # timed: the second run
        el = time.perf_counter() - t0
    got = set(zip(r.pairs.a.tolist(), r.pairs.b.tolist(), strict=True))
    out["neardup"] = {
        "wall_s": round(el, 2),
        "kept": int(r.keep.sum()),
        "pairs": len(r.pairs),
        "planted_recall": round(sum(p in got for p in planted) / max(1, len(planted)), 4),
        "timings_s": r.stats["timings_s"],
        "lsh": r.stats.get("lsh"),
        "peak_rss_mb": round(rss.peak["VmRSS"] / 1024, 1),
        "rss_before_mb": round(base.get("VmRSS", 0) / 1024, 1),
        "text_mb": round(sum(map(len, texts)) / 1e6, 1),
        # the run's own growth over the resident texts, per document
        "dedup_bytes_per_doc": round(1024 * (rss.peak["VmRSS"] - base.get("VmRSS", 0)) / n, 1),
    }
    del r, got
    for mode in [m for m in (valve_modes or []) if m]:
        budget = {"off": None, "fixed": 1}[mode]
        t0 = time.perf_counter()
        r = dedup(texts, workers=workers, lsh_band_pairs_per_doc=budget)
        el = time.perf_counter() - t0
        got = set(zip(r.pairs.a.tolist(), r.pairs.b.tolist(), strict=True))
        out[f"neardup_valve_{mode}"] = {
            "wall_s": round(el, 2),
            "lsh_band_pairs_per_doc": budget,
            "planted_recall": round(sum(p in got for p in planted) / max(1, len(planted)), 4),
            "kept": int(r.keep.sum()),
            "pairs": len(r.pairs),
            "timings_s": r.stats["timings_s"],
            "lsh": r.stats.get("lsh"),
        }
        del r, got
    if "gaoya" not in skip:
        try:
            t0 = time.perf_counter()
            got = gaoya_pairs(texts, workers)
            el = time.perf_counter() - t0
            out["gaoya"] = {
                "wall_s": round(el, 2),
                "planted_recall": round(sum(p in got for p in planted) / max(1, len(planted)), 4),
                "pairs": len(got),
            }
        except ImportError:
            out["gaoya"] = "not installed (pip install gaoya)"
    if "datasketch" not in skip:
        try:
            t0 = time.perf_counter()
            got = datasketch_pairs(texts)
            el = time.perf_counter() - t0
            out["datasketch"] = {
                "wall_s": round(el, 2),
                "planted_recall": round(sum(p in got for p in planted) / max(1, len(planted)), 4),
                "pairs": len(got),
            }
        except ImportError:
            out["datasketch"] = "not installed (pip install datasketch==2.0.0)"
    return out


def machine(load_average: bool = False) -> dict:
    """The machine a result came from (with ``load_average``, the load average now too)."""
    import platform

    mem_kib = 0
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            mem_kib = int(fh.readline().split()[1])
    except OSError:
        pass
    out = {
        "cpus": os.cpu_count(),
        "memory_gib": round(mem_kib / (1 << 20), 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    if load_average:
        out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return out


def write_results(path: Path, out: dict) -> None:
    """Write a benchmark's JSON ``out`` to ``path`` (its folder made), and say where."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path}")


def write_run(path: Path, name: str, script: str, argv: list[str] | None, fields: dict) -> None:
    """:func:`write_results` of a benchmark run: ``{"benchmark": name, "command": the command
    that ran it (``script``, a benchmark's ``__file__``, and ``argv``, default the process's
    arguments), **fields, "machine": the machine with the load average}``."""
    args = argv if argv is not None else sys.argv[1:]
    command = f"python benchmarks/{Path(script).name} " + " ".join(args)
    write_results(
        path,
        {"benchmark": name, "command": command, **fields, "machine": machine(load_average=True)},
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200000)
    ap.add_argument("--kinds", default="short,long")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dup-rate", type=float, default=0.1)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument(
        "--max-distances",
        default="",
        help="also time runs with the candidate distance forced to each of these "
        "(comma-separated, e.g. 0,2,3): the speed/recall trade-off",
    )
    ap.add_argument(
        "--peers",
        action="store_true",
        help="instead: neardup against datasketch, datatrove and text-dedup, each in its own "
        "process, at 1 M documents (benchmarks/peers_dedup.py; its own options: --peers -h)",
    )
    ap.add_argument(
        "--inprocess-peers",
        action="store_true",
        help="instead: time neardup.dedup against datasketch MinHashLSH and gaoya (char 3-grams, "
        "t=0.5, 128 perms) on the same generated texts, in process (writes "
        "bench_dedup_inprocess_peers.json, or --out)",
    )
    ap.add_argument("--skip", default="", help="with --inprocess-peers: systems to leave out")
    ap.add_argument(
        "--once",
        action="store_true",
        help="run neardup dedup once (timed) instead of twice: for sizes where the untimed "
        "first run costs minutes and the numba cache is warm (end_to_end_first_run_s: null)",
    )
    ap.add_argument(
        "--valve-modes",
        default="",
        help="with --inprocess-peers: also run dedup() with the bucket valve off (every bucket paired "
        "in full: lsh_band_pairs_per_doc=None) and/or the fixed cap of 32 it replaced "
        "(lsh_band_pairs_per_doc=1), e.g. off,fixed: candidates, pairs, kept, planted recall",
    )
    ap.add_argument(
        "--bigram-df",
        action="store_true",
        help="instead: how concentrated dev and generated texts are on frequent token bigrams "
        "(why MinHash band buckets crowd; docs/dedup.md, the bucket valve)",
    )
    ap.add_argument(
        "--low-memory",
        action="store_true",
        help="generate and write the corpus in a process that exits before neardup dedup runs "
        "(its texts are not resident during the timed run); no fingerprint-only timing",
    )
    ap.add_argument("--gen-only", help=argparse.SUPPRESS)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_dedup.json"
    )
    if "--peers" in sys.argv[1:]:  # the separate-process harness, with its own options
        from peers_dedup import main as peers_main

        peers_main([a for a in sys.argv[1:] if a != "--peers"])
        return
    args = ap.parse_args()
    if args.gen_only:  # (--low-memory's generating process)
        planted, spread, _ = write_corpus(
            Path(args.gen_only) / "docs.jsonl", args.kinds, args.n, args.seed, args.dup_rate
        )
        meta = {"planted": planted, "spread": spread}
        (Path(args.gen_only) / "gen.json").write_text(json.dumps(meta))
        return
    if args.bigram_df:
        doc = {
            "command": "python benchmarks/bench_dedup.py " + " ".join(sys.argv[1:]),
            "machine": machine(),
            "bigram_df": bigram_df(),
        }
        print(json.dumps(doc["bigram_df"], indent=1, ensure_ascii=False))
        out = args.out
        if out == ap.get_default("out"):
            out = out.with_name("bench_dedup_bigram_df.json")
        out.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {out}")
        return
    if args.inprocess_peers:
        res = [
            peers(
                kind,
                args.n,
                args.seed,
                args.workers,
                set(args.skip.split(",")),
                args.valve_modes.split(","),
            )
            for kind in args.kinds.split(",")
        ]
        for r in res:
            print(json.dumps(r))
        default = ap.get_default("out")
        out = (
            args.out.with_name("bench_dedup_inprocess_peers.json")
            if args.out == default
            else args.out
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "machine": machine(),
            "command": "python benchmarks/bench_dedup.py " + " ".join(sys.argv[1:]),
            "load_average": os.getloadavg(),
            "results": res,
        }
        out.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {out}")
        return
    if args.child:
        distances = [int(k) for k in args.max_distances.split(",") if k.strip()]
        out = child(
            args.child,
            args.n,
            args.seed,
            args.dup_rate,
            args.workers,
            distances,
            args.once,
            args.low_memory,
        )
        print(json.dumps(out))
        return
    rows = []
    dev = dev_distances()
    for kind in args.kinds.split(","):
        cmd = [
            sys.executable,
            __file__,
            "--child",
            kind,
            "--n",
            str(args.n),
            "--seed",
            str(args.seed),
        ]
        cmd += ["--dup-rate", str(args.dup_rate), "--workers", str(args.workers)]
        cmd += ["--max-distances", args.max_distances] + (["--once"] if args.once else [])
        cmd += ["--low-memory"] if args.low_memory else []
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            raise SystemExit(f"{kind} benchmark failed")
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    hdr = f"{'kind':<6} {'n':>9} {'MB':>7} {'fp docs/s':>11} {'e2e docs/s':>11} {'e2e/fp':>7} {'cands':>10} {'peak MB':>8} {'anon MB':>8} {'recall':>7}"
    print(hdr)
    for r in rows:
        print(
            f"{r['kind']:<6} {r['n']:>9} {r['input_mb']:>7} {r['fingerprint_docs_per_s'] or 0:>11,.0f} "
            f"{r['end_to_end_docs_per_s']:>11,.0f} {r['ratio_e2e_to_fingerprint'] or 0:>7.2f} "
            f"{r['candidates']:>10} {r['peak_rss_mb']:>8.0f} {r.get('peak_anon_mb', 0):>8.0f} "
            f"{r['planted_recall'] or 0:>7.3f}"
        )
        print(
            f"       stage timings: {r['timings_s']}; first run (compiling on an empty "
            f"numba cache, if any) {r['end_to_end_first_run_s']} s"
        )
        print(
            f"       floor: reading the file alone (no hashing, no fingerprints) "
            f"{r['read_only_s']} s = {r['ratio_read_only_to_fingerprint'] or 0:.2f}x fingerprint-only "
            f"throughput; writing every line {r['write_all_s']} s"
        )
        for t in r.get("forced_distances") or []:
            print(
                f"       --max-distance {t['max_distance']}: e2e {t['end_to_end_s']} s = "
                f"{t['ratio_e2e_to_fingerprint'] or 0:.2f}x, {t['candidates']} candidates, "
                f"planted recall {t['planted_recall'] or 0:.3f}; stages {t['timings_s']}"
            )
        for name, p in (r.get("candidate_passes") or {}).items():
            print(
                f"       pass {name}: {p.get('docs', 0):,} docs, distance {p.get('distance')} -> "
                f"{p.get('distance_used')} ({p.get('method')}); {p.get('reason')}"
            )
    print("random-pair SimHash distances (default fingerprints; p0.1/p1/p10/p50, share <= 14):")
    for label, q in [(f"generated {r['kind']}", r["random_pair_distances"]) for r in rows] + list(
        dev.items()
    ):
        print(
            f"  {label:<22} {q['docs']:>7,} docs  {q['p0.1']:>3} {q['p1']:>3} {q['p10']:>3} "
            f"{q['p50']:>3}   {q['frac_le_14']:.4f}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "args": vars(args) | {"out": str(args.out)},
                "load_average": os.getloadavg(),
                "results": rows,
                "dev_random_pair_distances": dev,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
