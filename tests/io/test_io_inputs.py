"""The inputs people have (issue 20, item 5; item 7's skipped records): compressed files,
fsspec URLs, globs, Hugging Face datasets, dotted fields."""

from __future__ import annotations

import bz2
import csv
import glob
import gzip
import io
import json
import lzma
import sys
import tempfile
from typing import ClassVar

import numpy as np
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import neardup
from neardup.cli.main import main
from neardup.errors import ConfigError, InputError, MissingDependencyError, RecordError
from neardup.io import read_corpus, write_kept
from neardup.io.formats import MAX_SKIPPED_DETAILS, SkippedRecord

DOCS = [
    {"id": "a", "text": "the city council approved the budget for the new river bridge"},
    {"id": "b", "text": "the city council approved the budget for the new river bridge!"},
    {"id": "c", "text": "mountain railways were quiet during the long hot summer"},
    {"id": "d", "text": "中文文本的近似重复检测需要分词"},
    {"id": "e", "text": "中文文本的近似重复检测需要分词。"},
    {"id": "f", "text": 'a "quoted" text with escapes\nand a newline'},
    {"id": "g", "text": "the city council approved the budget for the new river bridge"},
]


def _jsonl_bytes(docs=DOCS) -> bytes:
    # document c's line ends with CRLF: the output drops the \r, compressed or not
    lines = [json.dumps(d, ensure_ascii=False) + ("\r" if d["id"] == "c" else "") for d in docs]
    return ("\n".join(lines) + "\n").encode("utf-8")


def _zstd(data: bytes) -> bytes:
    # two frames, as parallel compressors write: both must be read
    c = zstandard.ZstdCompressor()
    half = len(data) // 2
    return c.compress(data[:half]) + c.compress(data[half:])


COMPRESS = {
    ".gz": gzip.compress,
    ".zst": _zstd,
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
}


def _decisions(paths, **kw):
    with read_corpus(paths, **kw) as corpus:
        result = neardup.dedup(corpus.texts, ids=corpus.ids)
        return list(corpus.ids), list(corpus.texts), result.keep.tolist(), result.pair_rows()


@pytest.fixture(autouse=True)
def _own_temp_dir(tmp_path_factory, monkeypatch):
    """Each test's temporary files in a folder of its own: ``_no_temp_left`` looks at this
    test's alone, not at another test's copy made meanwhile (``pytest -n``: a test on the
    other worker had its decompressed input in the shared temp folder)."""
    own = tmp_path_factory.mktemp("tmpdir")
    monkeypatch.setattr(tempfile, "tempdir", str(own))
    monkeypatch.setenv("TMPDIR", str(own))


def _no_temp_left():
    left = glob.glob(f"{tempfile.gettempdir()}/neardup-input-*")
    left += glob.glob(f"{tempfile.gettempdir()}/neardup-output-*")
    return left


@pytest.mark.parametrize("ext", sorted(COMPRESS))
def test_compressed_jsonl_same_decisions_and_bytes(tmp_path, ext, capsys):
    plain = tmp_path / "docs.jsonl"
    plain.write_bytes(_jsonl_bytes())
    packed = tmp_path / f"docs.jsonl{ext}"
    packed.write_bytes(COMPRESS[ext](_jsonl_bytes()))
    want = _decisions([str(plain)])
    assert _decisions([str(packed)]) == want
    assert want[2].count(False) >= 2  # the corpus has duplicates to drop
    # JSONL -> JSONL copies the kept records' input bytes: the same for the compressed input
    out_plain, out_packed = tmp_path / "kept-plain.jsonl", tmp_path / "kept-packed.jsonl"
    assert main(["dedup", str(plain), "-o", str(out_plain), "-q"]) == 0
    assert main(["dedup", str(packed), "-o", str(out_packed), "-q"]) == 0
    assert out_packed.read_bytes() == out_plain.read_bytes()
    assert b"\r" not in out_plain.read_bytes()
    if ext != ".gz":  # (the outputs' compression does not depend on the input's: once is enough)
        assert _no_temp_left() == []
        return
    # an output named *.gz / *.zst is compressed
    out_gz, out_zst = tmp_path / "kept.jsonl.gz", tmp_path / "kept.jsonl.zst"
    assert main(["dedup", str(packed), "-o", str(out_gz), "-q"]) == 0
    assert gzip.decompress(out_gz.read_bytes()) == out_plain.read_bytes()
    assert main(["dedup", str(packed), "-o", str(out_zst), "-q"]) == 0
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(out_zst.read_bytes()))
    assert reader.read() == out_plain.read_bytes()
    assert _no_temp_left() == []
    capsys.readouterr()


def test_compressed_csv_same_decisions(tmp_path):
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["id", "text"])
    w.writerows([d["id"], d["text"]] for d in DOCS)
    data = buf.getvalue().encode("utf-8")
    (tmp_path / "docs.csv").write_bytes(data)
    (tmp_path / "docs.csv.bz2").write_bytes(bz2.compress(data))
    (tmp_path / "docs.tsv.gz").write_bytes(gzip.compress(data.replace(b",", b"\t")))
    want = _decisions([str(tmp_path / "docs.csv")])
    assert _decisions([str(tmp_path / "docs.csv.bz2")]) == want
    assert _decisions([str(tmp_path / "docs.tsv.gz")]) == want
    with read_corpus([str(tmp_path / "docs.csv.bz2")]) as corpus:
        keep = np.ones(len(corpus), bool)
        keep[1] = False
        out = tmp_path / "kept.csv"
        write_kept(corpus, keep, str(out))
    assert out.read_text(encoding="utf-8").splitlines()[0] == "id,text"
    assert len(list(csv.reader(out.open(encoding="utf-8", newline="")))) == len(DOCS)


def test_compressed_json_parquet_and_text(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    (tmp_path / "docs.json.xz").write_bytes(lzma.compress(json.dumps(DOCS).encode()))
    pq.write_table(pa.Table.from_pylist(DOCS), tmp_path / "docs.parquet")
    (tmp_path / "docs.parquet.gz").write_bytes(
        gzip.compress((tmp_path / "docs.parquet").read_bytes())
    )
    (tmp_path / "note.txt.gz").write_bytes(gzip.compress(b"one plain text document\n"))
    assert _decisions([str(tmp_path / "docs.json.xz")])[1] == [d["text"] for d in DOCS]
    ids, texts, *_ = _decisions([str(tmp_path / "docs.parquet.gz")], id_field="id")
    assert ids == [d["id"] for d in DOCS] and texts == [d["text"] for d in DOCS]
    with read_corpus([str(tmp_path / "note.txt.gz")]) as corpus:
        assert corpus.ids == ["note.txt"]  # a text file's id: its name (without .gz)
        assert list(corpus.texts) == ["one plain text document\n"]
        out = tmp_path / "kept-text"
        write_kept(corpus, np.ones(1, bool), str(out))
    assert (out / "note.txt").read_text() == "one plain text document\n"


def test_compression_found_by_first_bytes(tmp_path, monkeypatch):
    """A compressed file whose name does not say so, and compressed stdin: decompressed (the
    old error blamed the encoding)."""
    hidden = tmp_path / "docs.jsonl"
    hidden.write_bytes(gzip.compress(_jsonl_bytes()))
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(_jsonl_bytes())
    assert _decisions([str(hidden)]) == _decisions([str(plain)])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(_zstd(_jsonl_bytes()))))
    with read_corpus(["-"]) as corpus:
        assert list(corpus.texts) == [d["text"] for d in DOCS]
        temps = [s.temp for s in corpus.sources]
    assert all(t is not None for t in temps)
    assert _no_temp_left() == []


def test_parquet_from_stdin(tmp_path, monkeypatch):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.Table.from_pylist(DOCS), tmp_path / "d.parquet")
    data = gzip.compress((tmp_path / "d.parquet").read_bytes())
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    with read_corpus(["-"], fmt="parquet", id_field="id") as corpus:
        assert list(corpus.ids) == [d["id"] for d in DOCS]


def test_temporary_copy_removed_without_close(tmp_path):
    import gc

    (tmp_path / "d.jsonl.gz").write_bytes(gzip.compress(_jsonl_bytes()))
    corpus = read_corpus([str(tmp_path / "d.jsonl.gz")])
    temp = corpus.sources[0].temp
    assert temp is not None and _no_temp_left() == [temp]
    del corpus
    gc.collect()
    assert _no_temp_left() == []


def test_corrupt_compressed_input_is_a_clear_error(tmp_path):
    bad = tmp_path / "docs.jsonl.gz"
    bad.write_bytes(gzip.compress(_jsonl_bytes())[:40])
    with pytest.raises(InputError, match=r"docs\.jsonl\.gz: cannot decompress it as gzip"):
        read_corpus([str(bad)])
    wrong = tmp_path / "docs.jsonl.zst"
    wrong.write_bytes(_jsonl_bytes())  # not zstd at all
    with pytest.raises(InputError, match="cannot decompress it as zstd"):
        read_corpus([str(wrong)])
    assert _no_temp_left() == []
    # every format's truncated file is refused, zstd's too (it was read as a shorter file: a
    # cut after the first of two frames, or inside the only one, gave fewer records, exit 0)
    data = _jsonl_bytes() * 50
    first = len(zstandard.ZstdCompressor().compress(data[: len(data) // 2]))
    for ext, compress in COMPRESS.items():
        whole = compress(data)
        cuts = [len(whole) - 3] + ([first + 5, first // 2] if ext == ".zst" else [])
        for cut in cuts:
            part = tmp_path / f"cut{cut}.jsonl{ext}"
            part.write_bytes(whole[:cut])
            with pytest.raises(InputError, match="truncated"):
                read_corpus([str(part)])
    assert _no_temp_left() == []
    with pytest.raises(ConfigError, match=r"extension '\.foo'"):
        read_corpus([str(tmp_path / "x.foo.gz")])


def test_globs(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    parts = [DOCS[:3], DOCS[3:5], DOCS[5:]]
    for i, part in enumerate(parts):
        (data / f"part-{i}.jsonl.gz").write_bytes(gzip.compress(_jsonl_bytes(part)))
    (data / ".hidden.jsonl.gz").write_bytes(b"not read")
    (tmp_path / "all.jsonl").write_bytes(_jsonl_bytes())
    # the matches are read in sorted order: the same documents as the one file
    ids, texts, keep, pairs = _decisions([str(data / "*.jsonl.gz")])
    want = _decisions([str(tmp_path / "all.jsonl")])
    assert (ids, texts, keep, pairs) == want
    with read_corpus([str(tmp_path / "**" / "part-[12].jsonl.gz")]) as corpus:
        assert [s.path for s in corpus.sources] == [
            str(data / "part-1.jsonl.gz"),
            str(data / "part-2.jsonl.gz"),
        ]
    with pytest.raises(InputError, match="no input matches"):
        read_corpus([str(data / "*.parquet")])
    (data / "sub").mkdir()  # a glob matches files: not this folder (nor hidden files)
    (data / "sub" / "x.jsonl").write_bytes(_jsonl_bytes(DOCS[:1]))
    with read_corpus([str(data / "*")]) as corpus:
        assert [s.path for s in corpus.sources] == [
            str(data / f"part-{i}.jsonl.gz") for i in range(3)
        ]
    out = tmp_path / "kept.jsonl"
    assert main(["dedup", str(data / "part-*.jsonl.gz"), "-o", str(out), "-q"]) == 0
    assert out.read_bytes().count(b"\n") == keep.count(True)
    capsys.readouterr()


@pytest.fixture
def memfs():
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    yield fs
    for path in fs.find("/hin-corpus"):
        fs.rm(path)


def test_memory_urls(memfs, tmp_path, capsys):
    """fsspec URLs (the in-process memory:// filesystem: no network), plain, compressed and
    globbed, through read_corpus and the CLI."""
    memfs.pipe("/hin-corpus/a.jsonl", _jsonl_bytes(DOCS[:4]))
    memfs.pipe("/hin-corpus/b.jsonl.gz", gzip.compress(_jsonl_bytes(DOCS[4:])))
    (tmp_path / "all.jsonl").write_bytes(_jsonl_bytes(DOCS[:4]) + _jsonl_bytes(DOCS[4:]))
    want = _decisions([str(tmp_path / "all.jsonl")])
    got = _decisions(["memory://hin-corpus/a.jsonl", "memory://hin-corpus/b.jsonl.gz"])
    assert got == want
    assert _decisions(["memory://hin-corpus/*.jsonl*"]) == want
    with pytest.raises(InputError, match="does not exist"):
        read_corpus(["memory://hin-corpus/missing.jsonl"])
    out = tmp_path / "kept.jsonl"
    assert main(["dedup", "memory://hin-corpus/*", "-o", str(out), "-q"]) == 0
    assert out.read_bytes().count(b"\n") == want[2].count(True)
    assert _no_temp_left() == []
    capsys.readouterr()


def test_missing_protocol_package_names_it(monkeypatch, capsys):
    from fsspec.registry import _registry

    monkeypatch.setitem(sys.modules, "s3fs", None)  # as if not installed
    monkeypatch.delitem(_registry, "s3", raising=False)
    with pytest.raises(MissingDependencyError, match=r"reading s3:// needs s3fs: pip install s3fs"):
        read_corpus(["s3://bucket/prefix/docs.jsonl.gz"])
    with pytest.raises(MissingDependencyError, match="pip install s3fs"):
        read_corpus(["s3://bucket/prefix/*.parquet"])  # a glob lists the bucket first
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    monkeypatch.delitem(_registry, "hf", raising=False)
    assert main(["dedup", "hf://datasets/owner/name/data/train.jsonl", "-o", "-", "-q"]) == 9
    assert "reading hf:// needs huggingface_hub: pip install huggingface_hub" in (
        capsys.readouterr().err
    )
    with pytest.raises(ConfigError, match="unknown protocol nosuch://"):
        read_corpus(["nosuch://x/docs.jsonl"])


def test_hf_urls_go_through_fsspec(monkeypatch, memfs, tmp_path, capsys):
    """hf:// is an fsspec protocol like any other (huggingface_hub provides it; here a memory
    filesystem stands in for the Hub: no network)."""
    import fsspec
    from fsspec.implementations.memory import MemoryFileSystem
    from fsspec.registry import _registry

    class FakeHub(MemoryFileSystem):
        protocol = "hf"
        store: ClassVar[dict] = {}  # its own store, apart from memory://
        pseudo_dirs: ClassVar[list] = [""]

        @classmethod
        def _strip_protocol(cls, path):
            return super()._strip_protocol(str(path).removeprefix("hf://"))

    monkeypatch.setitem(_registry, "hf", FakeHub)
    hub = fsspec.filesystem("hf")
    hub.pipe("/datasets/owner/name/data/train-0.jsonl.zst", _zstd(_jsonl_bytes()))
    out = tmp_path / "kept.jsonl"
    assert main(["dedup", "hf://datasets/owner/name/data/*.jsonl.zst", "-o", str(out), "-q"]) == 0
    (tmp_path / "plain.jsonl").write_bytes(_jsonl_bytes())
    want = tmp_path / "want.jsonl"
    assert main(["dedup", str(tmp_path / "plain.jsonl"), "-o", str(want), "-q"]) == 0
    assert out.read_bytes() == want.read_bytes()
    capsys.readouterr()


# --- dotted fields -----------------------------------------------------------------------------


def test_dotted_fields_jsonl_nested_and_flat(tmp_path, monkeypatch):
    """Nested lines are not what the numba scan accepts: they take the orjson path, with the
    same records as the reference reader; a key literally named meta.text wins."""
    lines = [
        {"meta": {"text": "plain ascii nested text", "id": "n1"}, "x": 1},
        {"meta": {"text": "中文 nested", "id": "n2"}},
        {"meta.text": "a flat key with a dot", "meta.id": "n3"},  # the numba FAST path
        {"meta": {"text": 'escaped "quote"', "id": 4}},
    ]
    p = tmp_path / "nested.jsonl"
    p.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), "utf-8")
    want_texts = [
        "plain ascii nested text",
        "中文 nested",
        "a flat key with a dot",
        'escaped "quote"',
    ]
    for ref in ("", "io"):
        monkeypatch.setenv("NEARDUP_REFERENCE", ref)
        with read_corpus([str(p)], text_field="meta.text", id_field="meta.id") as corpus:
            assert list(corpus.texts) == want_texts
            assert list(corpus.ids) == ["n1", "n2", "n3", "4"]
        with read_corpus([str(p)], text_field="meta.text") as corpus:  # generated ids
            assert list(corpus.ids) == [f"{p}:{i}" for i in range(1, 5)]


json_scalars = st.one_of(
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=12),
    st.text(max_size=6),
    st.integers(-5, 5),
    st.none(),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.fixed_dictionaries(
            {"meta": st.one_of(st.fixed_dictionaries({"body": json_scalars}), json_scalars)},
            optional={"id": json_scalars, "body": json_scalars},
        ),
        min_size=1,
        max_size=8,
    )
)
def test_dotted_fields_fast_path_matches_reference(tmp_path_factory, monkeypatch, records):
    p = tmp_path_factory.mktemp("dot") / "r.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")

    def read(ref: str):
        monkeypatch.setenv("NEARDUP_REFERENCE", ref)
        with read_corpus([str(p)], text_field="meta.body", on_error="skip") as c:
            return list(c.ids), list(c.texts), c.skipped, [str(s) for s in c.skipped_records]

    assert read("") == read("io")


def test_dotted_field_parquet_struct(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [{"doc": {"meta": {"body": d["text"]}, "key": d["id"]}} for d in DOCS]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "s.parquet")
    with read_corpus(
        [str(tmp_path / "s.parquet")], text_field="doc.meta.body", id_field="doc.key"
    ) as corpus:
        assert list(corpus.texts) == [d["text"] for d in DOCS]
        assert list(corpus.ids) == [d["id"] for d in DOCS]
        keep = np.zeros(len(corpus), bool)
        keep[[0, 2]] = True
        write_kept(corpus, keep, str(tmp_path / "kept.parquet"))
    assert pq.read_table(tmp_path / "kept.parquet").to_pylist() == [rows[0], rows[2]]
    with pytest.raises(RecordError, match=r"no text column 'doc\.meta\.nope'.*doc\.meta\.body"):
        read_corpus([str(tmp_path / "s.parquet")], text_field="doc.meta.nope")


def test_missing_dotted_field_names_field_file_and_line(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text(
        '{"meta": {"text": "ok"}}\n{"meta": {"title": "no text"}}\n{"meta": "flat"}\n', "utf-8"
    )
    with pytest.raises(RecordError) as err:
        read_corpus([str(p)], text_field="meta.text")
    msg = str(err.value)
    assert msg.startswith(f"{p}:2: record has no text field 'meta.text'")
    assert "'meta' has fields: title" in msg and "--text-field" in msg
    with read_corpus([str(p)], text_field="meta.text", on_error="skip") as corpus:
        assert corpus.skipped == 2 and list(corpus.texts) == ["ok"]
        assert "'meta' is str, not an object" in corpus.skipped_records[1].reason
    with pytest.raises(RecordError, match=r"m\.jsonl:1: record has no id field 'meta\.id'"):
        read_corpus([str(p)], text_field="meta.text", id_field="meta.id")


# --- skipped records (item 7) ----------------------------------------------------------------


def test_skipped_records_name_file_and_line(tmp_path):
    p = tmp_path / "bad.jsonl.gz"
    raw = (
        b'{"id": "a", "text": "fine"}\n{"id": "b", "text": 5}\nnot json\n{"id": "c", "text": "x"}\n'
    )
    p.write_bytes(gzip.compress(raw))
    q = tmp_path / "bad.csv"
    q.write_text("id,text\n1,ok\n2,too,many\n", encoding="utf-8")
    with read_corpus([str(p), str(q)], on_error="skip") as corpus:
        assert corpus.skipped == 3
        recs = corpus.skipped_records
        assert [(r.path, r.line) for r in recs] == [(str(p), 2), (str(p), 3), (str(q), 3)]
        assert "must be a string" in recs[0].reason and "malformed JSON" in recs[1].reason
        assert str(recs[2]) == f"{q}:3: row has 3 fields, the header has 2"
        assert isinstance(recs[0], SkippedRecord)
        with pytest.raises(AttributeError):
            recs[0].line = 9  # frozen


def test_skipped_records_keep_the_first_details_and_count_all(tmp_path):
    n = MAX_SKIPPED_DETAILS + 25
    p = tmp_path / "many.jsonl"
    p.write_text('{"text": "ok"}\n' + "{}\n" * n, encoding="utf-8")
    with read_corpus([str(p)], on_error="skip") as corpus:
        assert corpus.skipped == n
        assert len(corpus.skipped_records) == MAX_SKIPPED_DETAILS
        assert corpus.skipped_records[-1].line == MAX_SKIPPED_DETAILS + 1


# --- Hugging Face datasets ---------------------------------------------------------------------


def test_dedup_dataset_round_trip():
    datasets = pytest.importorskip("datasets")
    rows = [{"text": d["text"], "key": d["id"], "meta": {"body": d["text"]}} for d in DOCS]
    ds = datasets.Dataset.from_list(rows)
    kept, result = neardup.dedup_dataset(ds, id_field="key")
    assert isinstance(kept, datasets.Dataset)
    want = neardup.dedup([d["text"] for d in DOCS], ids=[d["id"] for d in DOCS])
    assert result.keep.tolist() == want.keep.tolist() and result.pair_rows() == want.pair_rows()
    assert kept.to_list() == [r for r, k in zip(rows, want.keep, strict=True) if k]  # in order
    assert kept.column_names == ds.column_names
    # a selected / shuffled dataset: its row order, a struct field as the text
    shuffled = ds.select([6, 5, 4, 3, 2, 1, 0])
    kept2, result2 = neardup.dedup_dataset(shuffled, text_field="meta.body")
    assert result2.ids == [str(i) for i in range(7)]
    assert kept2["key"] == [
        k for k, keep in zip(shuffled["key"], result2.keep.tolist(), strict=True) if keep
    ]
    assert "g" in kept2["key"] and "a" not in kept2["key"]  # the first of equal texts stays


def test_dedup_dataset_errors(monkeypatch):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_list([{"text": "a"}, {"text": None}])
    with pytest.raises(RecordError, match=r"row 1: field 'text' must be a string, got NoneType"):
        neardup.dedup_dataset(ds)
    with pytest.raises(InputError, match=r"no column 'body' \(columns: text\)"):
        neardup.dedup_dataset(ds, text_field="body")
    with pytest.raises(neardup.InputTypeError, match=r"one split.*ds\['train'\]"):
        neardup.dedup_dataset(datasets.DatasetDict({"train": ds}))
    with pytest.raises(neardup.InputTypeError, match=r"takes a datasets\.Dataset, got list"):
        neardup.dedup_dataset([{"text": "a"}])
    monkeypatch.setitem(sys.modules, "datasets", None)  # as if not installed
    with pytest.raises(MissingDependencyError, match=r"pip install 'neardup\[hf\]'") as err:
        neardup.dedup_dataset(ds)
    assert isinstance(err.value, ImportError)


def test_generate_ids_numbers_text_files_by_their_path(tmp_path):
    """Two folders each holding doc1.txt: their ids (relative paths) repeat, and
    --generate-ids, which the refusal offers as the way out, gave the same ids again."""
    from neardup.errors import RecordError
    from neardup.io import read_corpus

    for name, words in (("ta", "alpha beta gamma"), ("tb", "other words here")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "doc1.txt").write_text(words + "\n", encoding="utf-8")
    folders = [str(tmp_path / "ta"), str(tmp_path / "tb")]
    with pytest.raises(RecordError, match=r"duplicate id 'doc1\.txt'.*--generate-ids"):
        read_corpus(folders)
    with read_corpus(folders, generate_ids=True) as corpus:
        assert list(corpus.ids) == [f"{folders[0]}/doc1.txt:1", f"{folders[1]}/doc1.txt:1"]
