"""Stored texts compressed with the store's trained dictionary (neardup.store.textcodec): every
text reads back exactly as given, through every read (fetch, get, recovery's rows_from, a
reopen, a salvage); the dictionary is trained once, stored with the rows that need it (never
after them), and a damaged dictionary or compressed text is a damaged row, never a changed
text."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.errors import CorruptRecordError
from neardup.store import textcodec
from neardup.store.integrity import verify_store
from neardup.store.meta import MetaDB
from neardup.store.salvage import salvage
from neardup.store.textcodec import TEXT_ZSTD_FLAG, TextCodec, train
from neardup.store.wal import AddRecord

TRAIN = 200  # texts sampled before training, in these tests (the default is 5,000)


@pytest.fixture(autouse=True)
def _small_training(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(textcodec, "TRAIN_MIN_TEXTS", TRAIN)


def _texts(n: int, seed: int = 0) -> list[str]:
    r = random.Random(seed)
    vocab = [f"w{i}" for i in range(400)] + ["新闻", "市场", "今天", "北京", "的", "发展", "🙂"]
    return [" ".join(r.choice(vocab) for _ in range(r.randint(8, 80))) for _ in range(n)]


def _adds(texts: list[str], start: int = 0) -> list[AddRecord]:
    return [
        AddRecord(start + i, 1.0, start + i, 0, b"c" * 16, i % 2, f"id{start + i}", t, None)
        for i, t in enumerate(texts)
    ]


def _stored(db: MetaDB) -> dict[int, tuple[int, object]]:
    rows = db._db.execute("SELECT rid, flags, text FROM docs").fetchall()
    return {rid: (flags, text) for rid, flags, text in rows}


def test_texts_after_training_are_stored_compressed_and_read_back_exactly(tmp_path: Path) -> None:
    path = tmp_path / "meta.sqlite3"
    db = MetaDB(path)
    texts = _texts(3 * TRAIN)
    db.apply(_adds(texts[: TRAIN // 2]))  # fewer than TRAIN sampled: stored as given
    assert db._db.execute("SELECT count(*) FROM text_dict").fetchone()[0] == 0
    db.apply(_adds(texts[TRAIN // 2 :], TRAIN // 2))  # trains, then compresses this batch
    stored = _stored(db)
    plain = [rid for rid, (f, t) in stored.items() if isinstance(t, str)]
    packed = [rid for rid, (f, t) in stored.items() if isinstance(t, bytes)]
    assert plain == list(range(TRAIN // 2))
    assert len(packed) > 2 * TRAIN  # (a text zstd cannot shorten stays plain)
    assert all(stored[r][0] & TEXT_ZSTD_FLAG for r in packed)
    assert not any(stored[r][0] & TEXT_ZSTD_FLAG for r in plain)
    raw = sum(len(texts[r].encode()) for r in packed)
    assert sum(len(stored[r][1]) for r in packed) < 0.7 * raw  # type: ignore[arg-type]

    def check(d: MetaDB) -> None:
        rows = d.fetch(range(len(texts)), with_text=True)
        assert [rows[i].text for i in range(len(texts))] == texts
        assert [rows[i].flags for i in range(len(texts))] == [i % 2 for i in range(len(texts))]
        assert d.get("id7").text == texts[7] and d.get(f"id{len(texts) - 1}").text == texts[-1]
        assert [r.text for r in d.rows_from(0, np.zeros(0, np.int64))] == texts
        no_text = d.fetch([3, 500], with_text=False)
        assert no_text[500].text is None and no_text[500].flags == 0

    check(db)
    assert db.count() == len(texts)
    dict_bytes = db._db.execute("SELECT dict FROM text_dict").fetchone()[0]
    db.close()
    again = MetaDB(path)  # the dictionary is the database's: read back, never trained again
    check(again)
    again.apply(_adds(_texts(TRAIN, seed=9), len(texts)))
    assert again._db.execute("SELECT dict FROM text_dict").fetchone()[0] == dict_bytes
    assert isinstance(_stored(again)[len(texts)][1], bytes)
    again.close()
    assert verify_store(tmp_path).damaged == []


def test_a_codec_at_another_level_is_read_by_the_stores() -> None:
    """``TextCodec(level=...)`` (what bench_textcodec.py compares) compresses at that level,
    and the store's codec (its default level) reads what it wrote: decoding does not depend
    on the level."""
    texts = [t.encode() for t in _texts(600, seed=3)]
    data = train(texts[:400])
    assert data is not None
    store = TextCodec(data)
    for level in (1, 6):
        other = TextCodec(data, level=level)
        for t in texts[400:]:
            z = other.encode(t)
            if z is not None:
                assert store.decode(z) == t
    assert any(
        TextCodec(data, level=1).encode(t) != store.encode(t) for t in texts[400:]
    )  # another level gives other bytes


def test_a_bulk_insert_trains_on_its_first_rows(tmp_path: Path) -> None:
    db = MetaDB(tmp_path / "m.sqlite3")
    texts = _texts(5 * TRAIN, seed=1)
    rows = ((i, f"id{i}", 1.0, b"f" * 16, b"c" * 16, 0, None, t) for i, t in enumerate(texts))
    db.insert_rows(rows, bulk=True)  # a generator, as the bulk loads pass
    stored = _stored(db)
    assert sum(isinstance(t, bytes) for _, t in stored.values()) > 4 * TRAIN  # all of them
    got = db.fetch(range(len(texts)), with_text=True)
    assert [got[i].text for i in range(len(texts))] == texts
    assert db.count() == len(texts)  # the dictionary's row is not a document
    db.close()


def test_a_rolled_back_training_leaves_no_compressed_row(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite3"
    db = MetaDB(path)
    texts = _texts(2 * TRAIN, seed=2)
    bad = _adds(texts)
    bad.append(AddRecord(10**6, 1.0, 1, 0, b"c", 0, None, "x", None))  # type: ignore[arg-type]
    with pytest.raises(Exception, match="NOT NULL"):
        db.apply(bad)  # trains, then fails: neither the dictionary nor a row is written
    assert db._db.execute("SELECT count(*) FROM text_dict").fetchone()[0] == 0
    assert db._codec is None
    db.apply(_adds(texts[:10]))  # sampled again from here: plain until TRAIN more texts
    assert all(isinstance(t, str) for _, t in _stored(db).values())
    db.apply(_adds(texts[10:], 10))
    assert db._db.execute("SELECT count(*) FROM text_dict").fetchone()[0] == 1
    db.close()
    again = MetaDB(path)
    got = again.fetch(range(len(texts)), with_text=True)
    assert [got[i].text for i in range(len(texts))] == texts
    again.close()


def _compressed_store(tmp_path: Path) -> tuple[Path, list[str]]:
    path = tmp_path / "meta.sqlite3"
    db = MetaDB(path)
    texts = _texts(2 * TRAIN, seed=3)
    db.apply(_adds(texts[:50]))  # stored before the dictionary: plain
    db.apply(_adds(texts[50:], 50))
    db.close()
    return path, texts


def test_a_damaged_dictionary_makes_its_rows_damaged_not_changed(tmp_path: Path) -> None:
    path, texts = _compressed_store(tmp_path)
    con = sqlite3.connect(path)
    (data,) = con.execute("SELECT dict FROM text_dict").fetchone()
    flipped = data[:100] + bytes([data[100] ^ 1]) + data[101:]
    con.execute("UPDATE text_dict SET dict = ?", (flipped,))  # checksum left as it was
    con.commit()
    con.close()
    db = MetaDB(path)
    assert db.fetch([0], with_text=True)[0].text == texts[0]  # stored before training: plain
    with pytest.raises(CorruptRecordError, match="dictionary") as exc:
        db.get(f"id{len(texts) - 1}")
    assert exc.value.doc_id == f"id{len(texts) - 1}"
    assert db.fetch([len(texts) - 1], with_text=False)[len(texts) - 1].text is None  # the rest
    db.apply(_adds(_texts(2 * TRAIN, seed=4), len(texts)))  # no new dictionary over it
    assert db._db.execute("SELECT dict FROM text_dict").fetchone()[0] == flipped
    db.close()
    damaged = verify_store(tmp_path).damaged
    assert damaged and all("dictionary fails its checksum" in d.problem for d in damaged)
    assert {d.rowid for d in damaged} >= {len(texts) - 1}
    assert 0 not in {d.rowid for d in damaged}


def test_a_damaged_compressed_text_is_a_damaged_row(tmp_path: Path) -> None:
    path, texts = _compressed_store(tmp_path)
    rid = len(texts) - 1
    con = sqlite3.connect(path)
    (blob,) = con.execute("SELECT text FROM docs WHERE rid = ?", (rid,)).fetchone()
    assert isinstance(blob, bytes)
    con.execute("UPDATE docs SET text = ? WHERE rid = ?", (blob[:-1] + b"\x00", rid))
    con.commit()
    con.close()
    db = MetaDB(path)
    with pytest.raises(CorruptRecordError, match="checksum"):
        db.fetch([rid], with_text=True)
    db.close()
    (d,) = verify_store(tmp_path).damaged
    assert d.rowid == rid and "checksum" in d.problem


def test_salvage_keeps_the_dictionary_with_the_rows(tmp_path: Path) -> None:
    path, texts = _compressed_store(tmp_path)
    out = tmp_path / "salvaged.sqlite3"
    kept, bad = salvage(path, out, max_rowid=len(texts))
    assert (kept, bad) == (len(texts), 0)
    db = MetaDB(out)
    got = db.fetch(range(len(texts)), with_text=True)
    assert [got[i].text for i in range(len(texts))] == texts
    db.close()


def test_texts_zstd_cannot_shorten_stay_plain(tmp_path: Path) -> None:
    db = MetaDB(tmp_path / "m.sqlite3")
    db.apply(_adds(_texts(TRAIN, seed=5)))
    db.apply(_adds(["a", "", "ab"], TRAIN))  # a frame is longer than these
    stored = _stored(db)
    assert [stored[TRAIN + i] for i in range(3)] == [(0, "a"), (1, ""), (0, "ab")]
    assert db.get(f"id{TRAIN}").text == "a" and db.get(f"id{TRAIN + 1}").text == ""
    db.close()


def test_no_dictionary_where_zstd_cannot_train_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(textcodec, "train", lambda samples: calls.append(len(samples)))
    db = MetaDB(tmp_path / "m.sqlite3")
    texts = _texts(3 * TRAIN, seed=6)
    db.apply(_adds(texts[:TRAIN]))
    db.apply(_adds(texts[TRAIN:], TRAIN))  # not tried again: the texts stay plain
    assert calls == [TRAIN]
    assert db._db.execute("SELECT count(*) FROM text_dict").fetchone()[0] == 0
    assert all(isinstance(t, str) for _, t in _stored(db).values())
    assert db.get("id450").text == texts[450]
    db.close()


_CODEC = TextCodec(train([t.encode() for t in _texts(1000, seed=7)]) or b"")


@settings(max_examples=300)
@given(text=st.text(max_size=3000))
def test_any_text_round_trips_through_the_codec(text: str) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    packed = _CODEC.encode(raw)
    assert packed is None or (len(packed) < len(raw) and _CODEC.decode(packed) == raw)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.text(max_size=600), max_size=40), threads=st.sampled_from([1, 2, 3]))
def test_a_batch_is_encoded_as_each_text_alone(texts: list[str], threads: int) -> None:
    """``encode_many`` (a bulk load's texts, compressed on zstd's threads) gives each text the
    bytes ``encode`` gives it alone: None where compressing does not shorten it (empty texts
    among them, which zstd's batch refuses), the same frame elsewhere."""
    raws = [t.encode("utf-8", "surrogatepass") for t in texts] + [
        t.encode() for t in _texts(5, seed=len(texts))
    ]
    assert _CODEC.encode_many(raws, threads) == [_CODEC.encode(r) for r in raws]


def test_a_bulk_insert_stores_the_rows_a_commit_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows of a bulk insert, whose texts are compressed in blocks on zstd's threads, are
    the bytes of inserting them row by row (texts, flags, checksums), in blocks of 64 here, and
    read back as given."""
    from neardup.store import meta

    monkeypatch.setattr(meta, "_ENCODE_BLOCK", 64)
    monkeypatch.setattr(meta, "max_threads", lambda: 2)
    texts = _texts(700, seed=3)
    texts[TRAIN + 10] = ""
    images = []
    for bulk in (True, False):
        db = MetaDB(tmp_path / f"bulk-{bulk}.sqlite3")
        rows = [
            (i, f"id{i}", 1.0, b"f" * 16, b"c" * 16, i % 2, None, t) for i, t in enumerate(texts)
        ]
        db.insert_rows(rows, bulk=bulk)
        images.append(db._db.execute("SELECT * FROM docs ORDER BY rid").fetchall())
        assert [db.get(f"id{i}").text for i in range(0, 700, 50)] == texts[0:700:50]
        db.close()
    assert images[0] == images[1]
    assert sum(1 for r in images[0] if r[5] & TEXT_ZSTD_FLAG) > 400


@pytest.mark.parametrize("failure", ["duplicate id", "the rows' source"])
def test_a_bulk_insert_that_fails_in_a_later_block_inserts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    """A bulk insert compresses its texts a block at a time: a failure several blocks in (a
    duplicate id SQLite refuses, or the rows' own source raising) reaches the caller and
    inserts nothing."""
    from neardup.store import meta

    monkeypatch.setattr(meta, "_ENCODE_BLOCK", 64)
    monkeypatch.setattr(meta, "max_threads", lambda: 2)
    texts = _texts(700, seed=5)
    db = MetaDB(tmp_path / "m.sqlite3")

    def rows():
        for i, t in enumerate(texts):
            if failure == "the rows' source" and i == 500:
                raise ValueError("test: the source failed")
            yield (i, f"id{min(i, 499)}", 1.0, b"f" * 16, b"c" * 16, 0, None, t)

    with pytest.raises(sqlite3.IntegrityError if failure == "duplicate id" else ValueError):
        db.insert_rows(rows(), bulk=True)
    assert db.count() == 0
    assert db._db.execute("SELECT COUNT(*) FROM docs").fetchone() == (0,)
    db.close()
