"""encode_texts (numba ASCII runs) equals the per-text reference exactly."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.verify import reference as R
from neardup.verify import tokens as T
from neardup.verify.rule import TokenEncoder, Verifier

ALPHABET = st.sampled_from(
    [*"abcXYZ019 .,!?@#:/\n\t-_'\x1c\x00", "http://t.co/x ", "RT @u: ", "é", "世"]
)
TEXTS = st.lists(st.lists(ALPHABET, max_size=40).map("".join), max_size=30)


@settings(max_examples=150, deadline=None)
@given(
    texts=TEXTS, strip=st.booleans(), prefix=st.lists(st.sampled_from(["abc", "x 1"]), max_size=3)
)
def test_encode_texts_equals_the_reference(texts, strip, prefix):
    v = Verifier(strip_social=strip)
    e1, e2 = TokenEncoder(), TokenEncoder()
    # a shared encoder that already knows some tokens
    R.encode_texts_reference(v, prefix, e1)
    R.encode_texts_reference(v, prefix, e2)
    fast = T.encode_texts(v, texts, e1)
    ref = R.encode_texts_reference(v, texts, e2)
    assert fast == ref
    assert e1._vocab == e2._vocab


def test_runs_split_by_size_and_non_ascii(monkeypatch):
    monkeypatch.setattr(T, "RUN_BYTES", 20)
    v = Verifier()
    texts = ["the cat sat", "on the mat", "中文 the cat", "THE CAT, sat!", "x" * 50, "a b a b"] * 3
    assert T.encode_texts(v, texts) == R.encode_texts_reference(v, texts, TokenEncoder())


def test_vocabulary_limit_falls_back_to_the_reference(monkeypatch):
    monkeypatch.setattr(TokenEncoder, "_LIMIT", 6)
    v = Verifier()
    texts = ["alpha beta gamma", "delta epsilon zeta eta", "theta iota alpha"]
    e1, e2 = TokenEncoder(), TokenEncoder()
    assert T.encode_texts(v, texts, e1) == R.encode_texts_reference(v, texts, e2)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(max_codepoint=127), max_size=30), max_size=20))
def test_content_hash_many_ascii_fast_path_equals_split_join(texts):
    import xxhash

    from neardup.fingerprint.simhash import content_hash_many

    got = content_hash_many(texts)
    for row, t in zip(got.tolist(), texts, strict=True):
        ref = xxhash.xxh3_128_intdigest(" ".join(t.lower().split()).encode("ascii"))
        assert (row[0] << 64) | row[1] == ref


def test_tables_grow_while_encoding():
    # more distinct tokens than the initial table and store hold, and one very long token
    v = Verifier()
    texts = [" ".join(f"w{i * 300 + j}" for j in range(300)) for i in range(400)]
    texts.append("z" * 300_000 + " w5")
    assert T.encode_texts(v, texts) == R.encode_texts_reference(v, texts, TokenEncoder())


def test_span_texts_are_read_as_spans():
    # the kernels read SpanTexts through a protocol (text/ must not import io/): if SpanTexts
    # stopped matching it, every text would silently become a str again
    from neardup.io.texts import SpanTexts
    from neardup.text.token_kernels import SpanSource

    assert isinstance(SpanTexts(), SpanSource)
    assert not isinstance(["a"], SpanSource)
