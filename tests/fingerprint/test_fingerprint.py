"""Fingerprinter: golden vectors, the seeds' worked example, numba == reference, determinism,
bad input, chunked long documents, config round trip, content hashes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

import neardup
from neardup.errors import ConfigError, InputError, InputTypeError
from neardup.fingerprint import simhash as F
from neardup.fingerprint.distance import hamming
from neardup.fingerprint.simhash import (
    FingerprintBatch,
    Fingerprinter,
    content_hash,
    content_hash_many,
)
from neardup.text.normalize import casefold_nfkc, replace_surrogates

TEXTS = {
    "en": "The quick brown fox jumps over the lazy dog.",
    "zh": "美国51区雇员称内部有9架飞碟，曾看见灰色外星人。",
    "mixed": "Hello 世界！ Ｆｕｌｌ-width ÄÖÜ ß 😀 x_y 3.14",
}
CONFIGS = {
    "auto64": dict(),
    "auto128": dict(bits=128),
    "words": dict(features="words"),
    "shingles3": dict(features="shingles", ngram=3),
    "chars3": dict(features="chars", ngram=3),
    "jieba": dict(features="jieba"),
    "jieba_tfidf": dict(features="jieba", weights="tfidf"),
    "keywords": dict(features="jieba", weights="keywords", top_n=5),
    "fnv1a": dict(features="words", hash="fnv1a"),
    "oaat": dict(features="words", hash="jenkins-oaat"),
    "lookup2_128": dict(features="words", hash="jenkins-lookup2", bits=128),
    "md5": dict(features="words", hash="md5"),
    "seed7": dict(features="words", seed=7),
    "stop": dict(features="words", stopwords=True),
}
# Golden fingerprints (hex). Changing any of these changes every stored fingerprint: bump the
# config version and say so in the changelog.
GOLDEN = {
    "auto64": {"en": "593b03225397e4ae", "zh": "8801f609c85b699a", "mixed": "27879e29b81f4f2d"},
    "auto128": {
        "en": "593b03225397e4ae8bd33981f3d02af1",
        "zh": "8801f609c85b699a95b35506f7442dc0",
        "mixed": "27879e29b81f4f2da2e49d2b8416c929",
    },
    "words": {"en": "593b03225397e4ae", "zh": "06583a41c8201018", "mixed": "27879e29b81f4f2d"},
    "shingles3": {"en": "51ea88957f2f62fb", "zh": "69809c847dfc2e14", "mixed": "220c424aad1925b1"},
    "chars3": {"en": "4352aa301919bf8e", "zh": "3e7572045db64459", "mixed": "fce640eec0470959"},
    "jieba": {"en": "593b03225397e4ae", "zh": "0d214118c2fe39c8", "mixed": "2787bc71e8576f3d"},
    "jieba_tfidf": {
        "en": "593b03225397e4ae",
        "zh": "0d35c71ce2ff59da",
        "mixed": "2787bc71e8576f3d",
    },
    "keywords": {"en": "093f13137797648e", "zh": "1db5662ce2fe1a9f", "mixed": "27160479ed1f6cad"},
    "fnv1a": {"en": "cab7991c5475edee", "zh": "0905610842189431", "mixed": "af7abc57b691ebbb"},
    "oaat": {"en": "91a87f74cf7c4058", "zh": "0680054041c79a12", "mixed": "8ed46dda3002af51"},
    "lookup2_128": {
        "en": "5d2dbc95c459fad8e769498797c2be8d",
        "zh": "01009044188210402851000260000260",
        "mixed": "ef58f1129163f0de1585186edfb06932",
    },
    "md5": {"en": "0fd43cf8cd8b66ce", "zh": "023005ba50040004", "mixed": "ea81228e2a0aa67e"},
    "seed7": {"en": "aaacaf28576b211f", "zh": "20282499a4030001", "mixed": "5721701e6b914a48"},
    "stop": {"en": "193001045216a488", "zh": "06583a41c8201018", "mixed": "27879e29b81f4f2d"},
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_golden_vectors(name):
    fp = Fingerprinter(**CONFIGS[name])
    width = fp.bits // 4
    for key, text in TEXTS.items():
        assert f"{fp.fingerprint(text):0{width}x}" == GOLDEN[name][key], (name, key)


# The seeds' worked example: keywords with integer weights 1-5.
SEED_EXAMPLE = [
    ("美国", 4),
    ("51区", 5),
    ("雇员", 3),
    ("称", 1),
    ("内部", 2),
    ("有", 1),
    ("9架", 3),
    ("飞碟", 5),
    ("曾", 1),
    ("看见", 3),
    ("灰色", 4),
    ("外星人", 5),
]


def test_seed_worked_example_features_sums_bits():
    fp = Fingerprinter()
    sums = fp.bit_sums(SEED_EXAMPLE)
    # independent recomputation: xxh64 per feature, +w / -w per bit (MSB first), sign
    expect = [0] * 64
    for feat, w in SEED_EXAMPLE:
        h = xxhash.xxh64_intdigest(feat.encode("utf-8"), 0)
        for i in range(64):
            expect[i] += w if (h >> (63 - i)) & 1 else -w
    assert sums == expect
    assert sums[:8] == [5, -3, -19, -5, 1, -3, -17, 13]  # pinned
    bits = "".join("1" if s > 0 else "0" for s in sums)
    assert fp.fingerprint_features(SEED_EXAMPLE) == int(bits, 2) == 0x89210720E2FF7D54
    assert (
        Fingerprinter(128).fingerprint_features(SEED_EXAMPLE) == 0x89210720E2FF7D54F8D17106FC470FC3
    )


def test_user_callable_features_with_weights():
    fp = Fingerprinter(features=lambda t: SEED_EXAMPLE)
    assert fp.fingerprint("ignored") == 0x89210720E2FF7D54
    with pytest.raises(InputError, match="integer >= 0"):
        Fingerprinter().fingerprint_features([("x", 1.5)])


TEXT_ST = st.text(
    alphabet=st.sampled_from(
        list("abcXYZ019 _-.,!?\n\t\u3000")
        + list("中文字符测试美国飞碟")
        + ["😀", "é", "ß", "Ｆ", "\ufffd", "ﬁ", "\ud800", "™", "½", "İ", "\u0301", "，", "。"]
        # characters that compose with a neighbour under NFKC (prepare_utf8's per-character
        # path must hand these texts to the whole-text path): jamo, compatibility jamo,
        # Tamil two-part vowels, the combining long solidus after "<", final sigma
        + ["\u1100", "\u1161", "\u11a8", "\u3131", "\u314f", "\u0bc6", "\u0bbe", "<", "\u0338"]
        + ["Σ", "’", "—"]
    ),
    max_size=60,
)
MODES = [
    dict(features="words"),
    dict(features="shingles", ngram=2),
    dict(features="shingles", ngram=3),
    dict(features="chars", ngram=1),
    dict(features="chars", ngram=2),
    dict(features="chars", ngram=4),
    dict(features="jieba", ngram=2),
    dict(features="auto", bits=128),
    dict(features="words", hash="jenkins-lookup2"),
    dict(features="shingles", hash="fnv1a", bits=128),
    dict(features="jieba", weights="tfidf", ngram=2),
    dict(features="words", stopwords=True, ngram=2),
]


@given(st.lists(TEXT_ST, min_size=1, max_size=6), st.sampled_from(range(len(MODES))))
def test_numba_equals_reference(texts, mode):
    fp = Fingerprinter(**MODES[mode])
    fast = fp.fingerprint_batch(texts)
    F._FORCE_REFERENCE = True
    try:
        slow = fp.fingerprint_batch(texts)
    finally:
        F._FORCE_REFERENCE = False
    assert np.array_equal(fast.fingerprints, slow.fingerprints)
    assert np.array_equal(fast.n_features, slow.n_features)


def test_shapes_dtypes_and_flags():
    fp = Fingerprinter()
    b = fp.fingerprint_batch(["hello world", "", "   \n", "!!!", "中文"])
    assert isinstance(b, FingerprintBatch) and len(b) == 5
    assert b.fingerprints.dtype == np.uint64 and b.fingerprints.shape == (5,)
    assert b.empty.tolist() == [False, True, True, True, False]
    assert b.n_features.dtype == np.int32 and b.n_features.tolist()[:4] == [2, 0, 0, 0]
    assert b.fingerprints[1] == 0 and fp.fingerprint("") == 0
    f128 = Fingerprinter(128).fingerprint_many(["hello world", ""])
    assert f128.shape == (2, 2) and f128.dtype == np.uint64
    assert fp.fingerprint_many([]).shape == (0,)
    assert Fingerprinter(128).fingerprint_many([]).shape == (0, 2)


def test_128_high_word_is_64_bit_fingerprint():
    texts = [*TEXTS.values(), "a b c d e f g"]
    for kw in (
        dict(),
        dict(features="shingles"),
        dict(features="chars"),
        dict(hash="fnv1a", features="words"),
    ):
        f64 = Fingerprinter(64, **kw).fingerprint_many(texts)
        f128 = Fingerprinter(128, **kw).fingerprint_many(texts)
        assert np.array_equal(f128[:, 0], f64)


def test_single_equals_many():
    fp = Fingerprinter(128)
    texts = list(TEXTS.values())
    many = fp.fingerprint_many(texts)
    for i, t in enumerate(texts):
        assert fp.fingerprint(t) == (int(many[i, 0]) << 64) | int(many[i, 1])


def test_near_duplicates_are_close_and_unrelated_far():
    fp = Fingerprinter()
    a = "The committee approved the new budget for the city parks department on Tuesday evening after a long debate."
    b = "The committee approved the new budget for the city parks department on Tuesday night after a long debate."
    c = "Quantum chromodynamics describes the strong interaction between quarks and gluons inside hadrons."
    assert hamming(fp.fingerprint(a), fp.fingerprint(b)) <= 10
    assert hamming(fp.fingerprint(a), fp.fingerprint(c)) >= 15


def test_workers_give_identical_results():
    rng = np.random.default_rng(0)
    vocab = ["alpha", "beta", "gamma", "中文", "测试", "delta", "飞碟", "x"]
    texts = [" ".join(rng.choice(vocab, size=int(rng.integers(0, 40)))) for _ in range(300)]
    fp = Fingerprinter()
    one = fp.fingerprint_batch(texts, workers=1)
    two = fp.fingerprint_batch(texts, workers=2)
    assert np.array_equal(one.fingerprints, two.fingerprints)
    assert np.array_equal(one.n_features, two.n_features)


def test_determinism_across_processes_and_hash_seeds():
    code = (
        "import neardup, json, sys; fp = neardup.Fingerprinter(128); "
        "print(json.dumps([hex(fp.fingerprint(t)) for t in json.loads(sys.argv[1])]))"
    )
    arg = json.dumps(list(TEXTS.values()))
    outs = set()
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run(
            [sys.executable, "-c", code, arg], env=env, capture_output=True, text=True, check=True
        )
        outs.add(r.stdout.strip())
    assert outs == {json.dumps([hex(int(GOLDEN["auto128"][k], 16)) for k in TEXTS])}


def test_non_str_input_names_position():
    fp = Fingerprinter()
    with pytest.raises(InputTypeError, match=r"texts\[2\] must be str, got bytes"):
        fp.fingerprint_many(["a", "b", b"c"])
    with pytest.raises(InputTypeError, match=r"texts\[0\] must be str, got NoneType"):
        fp.fingerprint_batch([None])
    with pytest.raises(InputTypeError):
        fp.fingerprint(3)  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="not a single str"):
        fp.fingerprint_many("abc")  # type: ignore[arg-type]
    assert issubclass(InputTypeError, TypeError)


def test_surrogates_are_replaced_not_crashing():
    fp = Fingerprinter()
    assert fp.fingerprint("abc \ud800 def") == fp.fingerprint("abc \ufffd def")
    assert content_hash("x\udfff") == content_hash("x\ufffd")


@pytest.mark.parametrize(
    "kw",
    [
        dict(bits=32),
        dict(features="bag"),
        dict(weights="idf"),
        dict(hash="crc"),
        dict(seed=-1),
        dict(ngram=0),
        dict(features="chars", stopwords=True),
        dict(top_n=0),
        dict(zh_threshold=0),
    ],
)
def test_bad_config_is_config_error(kw):
    with pytest.raises(ConfigError):
        Fingerprinter(**kw)
    with pytest.raises(ConfigError, match="workers"):
        Fingerprinter().fingerprint_many(["a"], workers=0)


def test_config_round_trip():
    fp = Fingerprinter(
        128, features="shingles", ngram=3, weights="tfidf", hash="fnv1a", seed=5, stopwords=True
    )
    d = json.loads(json.dumps(fp.config()))
    fp2 = Fingerprinter.from_config(d)
    assert fp2 == fp and fp2.config() == fp.config()
    assert fp2.fingerprint("some text here") == fp.fingerprint("some text here")
    with pytest.raises(ConfigError, match="unknown"):
        Fingerprinter.from_config({**d, "colour": 1})
    with pytest.raises(ConfigError, match="version"):
        Fingerprinter.from_config({**d, "version": 99})
    with pytest.raises(ConfigError, match="callable"):
        Fingerprinter(features=str.split).config()


@pytest.mark.parametrize(
    "kw",
    [
        dict(features="words"),
        dict(features="shingles", ngram=3),
        dict(features="chars", ngram=3),
        dict(features="auto", bits=128),
        dict(features="jieba", ngram=2),
    ],
)
def test_chunked_long_document_equals_unchunked(kw, monkeypatch):
    rng = np.random.default_rng(1)
    vocab = ["alpha", "beta,", "gamma.", "中文", "测试文本", "delta\n", "飞碟", "x", "  "]
    text = "".join(rng.choice(vocab, size=3000))
    fp = Fingerprinter(**kw)
    whole = fp.fingerprint_batch([text])
    monkeypatch.setattr(F, "CHUNK_CHARS", 101)
    chunked = fp.fingerprint_batch([text])
    assert np.array_equal(whole.fingerprints, chunked.fingerprints)
    assert whole.n_features[0] == chunked.n_features[0]


def test_split_long_cuts_at_separators():
    from neardup.fingerprint._numba import split_long

    text = "aaaa bbbb cccc dddd"
    b = split_long(text, 7)
    assert b[0][0] == 0 and b[-1][1] == len(text)
    assert all(text[s] == " " for s, _ in b[1:])
    assert split_long("x" * 10, 4) == [(0, 4), (4, 8), (8, 10)]


def test_large_document_bounded_memory():
    import tracemalloc

    text = "lorem ipsum dolor sit amet consectetur adipiscing elit " * 400_000  # ~22 MB
    fp = Fingerprinter()
    tracemalloc.start()
    fp.fingerprint(text)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 64 * 2**20, peak  # chunks of 4 Mi chars, not the whole 22 MB x several copies


def test_content_hash():
    assert content_hash("Hello  World") == content_hash(" hello world ")
    assert content_hash("Hello  World", normalize=False) != content_hash(
        "hello world", normalize=False
    )
    assert content_hash("abc") == xxhash.xxh3_128_intdigest(b"abc")
    m = content_hash_many(["abc", "x"])
    assert m.shape == (2, 2) and m.dtype == np.uint64
    assert (int(m[0, 0]) << 64) | int(m[0, 1]) == content_hash("abc")
    with pytest.raises(InputTypeError, match=r"texts\[1\]"):
        content_hash_many(["a", 1])  # type: ignore[list-item]


def _content_hash_regex(text: str) -> int:
    # the documented definition, written out with the regex the old implementation used
    import re

    norm = re.sub(r"\s+", " ", casefold_nfkc(text)).strip()
    return xxhash.xxh3_128_intdigest(replace_surrogates(norm).encode("utf-8"))


@given(
    st.lists(
        st.text(max_size=40)
        | st.text(alphabet="aB \t\n\u3000\u00a0\u2028\uff21\u00df\ud800", max_size=20),
        max_size=8,
    )
)
def test_content_hash_many_equals_definition(texts):
    m = content_hash_many(texts)
    raw = content_hash_many(texts, normalize=False)
    assert m.shape == (len(texts), 2) and m.dtype == np.uint64
    for i, t in enumerate(texts):
        h = _content_hash_regex(t)
        assert (int(m[i, 0]) << 64) | int(m[i, 1]) == h == content_hash(t)
        r = xxhash.xxh3_128_intdigest(replace_surrogates(t).encode("utf-8"))
        assert (int(raw[i, 0]) << 64) | int(raw[i, 1]) == r == content_hash(t, normalize=False)


def test_content_hash_golden():
    # pinned values: the definition must never change (stored hashes depend on it)
    assert content_hash("Hello  World") == xxhash.xxh3_128_intdigest(b"hello world")
    assert content_hash("\uff28\u00e9llo\u3000W\u00d6RLD \n") == xxhash.xxh3_128_intdigest(
        "h\u00e9llo w\u00f6rld".encode()
    )
    assert content_hash_many([]).shape == (0, 2)


def test_public_names():
    assert neardup.Fingerprinter is Fingerprinter
    assert neardup.content_hash is content_hash


# ------------------------------------------------------------------ fingerprint_lowered_ascii
ASCII_PIECES = st.sampled_from(
    [*"aZ09 .,!'-_\t\n\r\x00\x7f~@#/", "  ", "The", "QUICK", "fox", "www.", "don't", "x" * 50]
)
ASCII_TEXTS = st.lists(st.lists(ASCII_PIECES, max_size=30).map("".join), max_size=25)
LOWERED_CONFIGS = [
    k for k in CONFIGS if k not in ("md5", "keywords")
]  # the configurations with a kernel path


NO_KERNELS = pytest.mark.skipif(
    F._FORCE_REFERENCE, reason="NEARDUP_REFERENCE=fingerprint: no kernel path"
)


@NO_KERNELS
@pytest.mark.parametrize("name", LOWERED_CONFIGS)
@given(texts=ASCII_TEXTS)
def test_fingerprint_lowered_ascii_equals_fingerprint_batch(name, texts):
    fp = Fingerprinter(**CONFIGS[name])
    assert fp.lowered_ascii_ok()
    ref = fp.fingerprint_batch(texts)
    data = "\x01".join(texts).lower().encode("ascii")  # any separator: spans are exact
    lens = np.fromiter(map(len, texts), np.int64, len(texts))
    ends = np.cumsum(lens + 1) - 1
    starts = ends - lens
    fps = np.zeros((len(texts), fp.bits // 64), np.uint64)
    nfeat = np.zeros(len(texts), np.int64)
    fp.fingerprint_lowered_ascii(np.frombuffer(data, np.uint8), starts, ends, fps, nfeat)
    got = fps[:, 0] if fp.bits == 64 else fps
    assert np.array_equal(got, ref.fingerprints)
    assert np.array_equal(nfeat == 0, ref.empty)
    assert np.array_equal(nfeat, ref.n_features)


@NO_KERNELS
def test_fingerprint_lowered_ascii_subset_of_rows_and_unsupported_configs():
    fp = Fingerprinter()
    texts = ["The cat sat", "", "a dog barks at the moon", "!!"]
    data = np.frombuffer("".join(texts).lower().encode("ascii"), np.uint8)
    lens = np.array([len(t) for t in texts], np.int64)
    starts = np.cumsum(lens) - lens
    sel = np.array([2, 0])
    fps = np.zeros((2, 1), np.uint64)
    nfeat = np.zeros(2, np.int64)
    fp.fingerprint_lowered_ascii(data, starts[sel], starts[sel] + lens[sel], fps, nfeat)
    assert fps[:, 0].tolist() == fp.fingerprint_many([texts[2], texts[0]]).tolist()
    for kw in (CONFIGS["md5"], CONFIGS["keywords"], dict(features=str.split)):
        other = Fingerprinter(**kw)
        assert not other.lowered_ascii_ok()
        with pytest.raises(ConfigError):
            other.fingerprint_lowered_ascii(data, starts, starts + lens, fps, nfeat)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@given(
    text=st.one_of(
        st.text(alphabet=st.characters(max_codepoint=127), max_size=300),
        st.sampled_from(["", " ", "a", "Hello,  World!\n", "x" * 16_384, "y " * 8_193]),
    )
)
def test_one_text_fast_path_equals_the_batch_path(name, text):
    """A single ASCII text (the service's common call) goes through ``_one_ascii``; a batch
    of two through the block path: the same fingerprint, empty flag and feature count."""
    fp = Fingerprinter(**CONFIGS[name])
    one = fp.fingerprint_batch([text])
    two = fp.fingerprint_batch([text, "other text"])
    assert one.fingerprints.tolist() == two.fingerprints[:1].tolist()
    assert one.empty.tolist() == two.empty[:1].tolist()
    assert one.n_features.tolist() == two.n_features[:1].tolist()


def test_one_text_fast_path_leaves_long_texts_to_the_chunked_path(monkeypatch):
    """A text longer than CHUNK_CHARS is streamed in chunks by the batch path (a chunk may cut
    a word); the one-text path must leave it there, whatever CHUNK_CHARS is set to."""
    monkeypatch.setattr(F, "CHUNK_CHARS", 3)
    fp = Fingerprinter()
    one = fp.fingerprint_batch(["aAbC"])
    assert (
        one.fingerprints.tolist() == fp.fingerprint_batch(["aAbC", "x"]).fingerprints[:1].tolist()
    )


_NO_LITERAL_KERNELS = """
import json
import numpy as np
from numba.core.registry import CPUDispatcher
import neardup.fingerprint._numba as K
import neardup.fingerprint.simhash as F
from tests.fingerprint.test_fingerprint import CONFIGS, TEXTS

texts = [*TEXTS.values(), "a", "ab cd", "北京", "word " * 400]
for chunk in (F.CHUNK_CHARS, 101):  # 101: long texts streamed in chunks (simhash_chunk)
    F.CHUNK_CHARS = chunk
    for cfg in CONFIGS.values():
        fp = F.Fingerprinter(**cfg)
        fp.fingerprint_many(texts)
        fp.fingerprint_many([t.encode().decode() for t in texts], workers=2)
import neardup.fingerprint._hashes as H
literal = {
    name: [str(sig) for sig in obj.signatures if "Literal" in str(sig)]
    for name, obj in {**vars(H), **vars(K)}.items()
    if isinstance(obj, CPUDispatcher)
}
print(json.dumps({k: v for k, v in literal.items() if v}))
"""


def test_kernels_are_not_specialised_on_literal_constants():
    """A numba kernel called with a constant argument (``f(buf, 0, ...)``) is compiled once more
    for that ``Literal[int]``: each such copy cost the first run seconds of compilation. In a
    fresh interpreter (other tests call kernels directly), after fingerprinting with every
    configuration, whole and streamed in chunks, no SimHash kernel holds such a signature."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", _NO_LITERAL_KERNELS],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "{}", out.stdout


def test_one_str_is_not_taken_as_its_characters_for_features() -> None:
    """``fingerprint_features("hello")`` (or a features= callable returning a str) used the
    characters as features: refused, as ``fingerprint_batch`` refuses one str. ``bit_sums``
    takes and refuses what ``fingerprint_features`` does."""
    from neardup.errors import InputError, InputTypeError
    from neardup.fingerprint.simhash import Fingerprinter

    fp = Fingerprinter()
    with pytest.raises(InputTypeError, match="not one str"):
        fp.fingerprint_features("hello world")
    with pytest.raises(InputTypeError, match="callable must return"):
        Fingerprinter(features=lambda t: t.lower()).fingerprint("abc")
    with pytest.raises(InputError, match="weight must be an integer >= 0"):
        fp.bit_sums([("a", -3)])
    feats = ["a", ("b", 2), ("c", 0)]
    sums = fp.bit_sums(feats)
    want = sum(1 << (63 - i) for i, v in enumerate(sums) if v > 0)
    assert fp.fingerprint_features(feats) == want
