"""``neardup dedup`` as a data engineer runs it (issue 33): folders of shards, output formats
from the output's name, every output refusal before the first record, ids, plain-text files,
empty inputs, encodings and format hints. Through ``main()`` (as the other CLI tests), and
through the installed console script where the process matters (stdout, tracebacks)."""

from __future__ import annotations

import csv
import gzip
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from doubles import without_compile_notice

from neardup.cli.main import main

_WORDS = [f"{a}{b}" for a in ("river", "bridge", "harbour", "crane", "valley", "orchard",
          "engine", "signal", "ledger", "meadow") for b in range(40)]  # fmt: skip
_RNG = random.Random(33)
SHARD_DOCS = [
    [
        {"id": f"s{s}-{i}", "text": " ".join(_RNG.sample(_WORDS, 14)), "lang": "en", "n": i}
        for i in range(4)
    ]
    for s in range(4)
]


def _console_script() -> list[str]:
    script = Path(sys.executable).with_name("neardup")
    if script.exists():
        return [str(script)]
    found = shutil.which("neardup")
    return [found] if found else [sys.executable, "-m", "neardup"]


def run(*args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*_console_script(), *args],
        cwd=cwd,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        timeout=300,
        check=False,
    )


def _write_jsonl(path: Path, docs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return path


def _shards(folder: Path, ext: str = ".jsonl") -> Path:
    folder.mkdir()
    for s, docs in enumerate(SHARD_DOCS):
        data = "".join(json.dumps(d) + "\n" for d in docs).encode()
        (folder / f"part-{s}{ext}").write_bytes(gzip.compress(data) if ext.endswith("gz") else data)
    return folder


def _jsonl_ids(path: Path) -> list[str]:
    return [json.loads(x)["id"] for x in path.read_text(encoding="utf-8").splitlines()]


ALL_IDS = [d["id"] for docs in SHARD_DOCS for d in docs]


# --- item 1 and 2: folders


@pytest.mark.parametrize("ext", [".jsonl", ".jsonl.gz"])
def test_folder_of_jsonl_shards_is_read_record_by_record(tmp_path, capsys, ext):
    """A folder of JSONL shards (plain or gzipped) is 16 records, not 4 text documents."""
    shards = _shards(tmp_path / "shards", ext)
    out = tmp_path / "kept.jsonl"
    assert (
        main(["dedup", str(shards), "-o", str(out), "--summary-json", str(tmp_path / "s.json")])
        == 0
    )
    assert _jsonl_ids(out) == ALL_IDS
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["documents"] == 16 and summary["formats"] == {"jsonl": 4}
    assert "documents                   16" in capsys.readouterr().out


def test_folder_output_mirrors_the_input_tree(tmp_path):
    shards = _shards(tmp_path / "shards", ".jsonl.gz")
    (shards / "sub").mkdir()
    _write_jsonl(shards / "sub" / "more.jsonl", [{"id": "x", "text": SHARD_DOCS[0][0]["text"]}])
    (shards / "_SUCCESS").write_text("")  # markers and hidden files are left out
    (shards / ".part-0.crc").write_text("crc")
    out = tmp_path / "out"
    assert main(["dedup", str(shards), "-o", f"{out}/", "-q"]) == 0
    names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert names == [f"part-{s}.jsonl.gz" for s in range(4)] + ["sub/more.jsonl"]
    assert [
        json.loads(x)["id"]
        for x in gzip.decompress((out / "part-1.jsonl.gz").read_bytes()).splitlines()
    ] == [d["id"] for d in SHARD_DOCS[1]]
    assert (out / "sub" / "more.jsonl").read_text() == ""  # its only record was a copy of s0-0
    # --output-format changes each output's format and name; an existing empty folder works
    pq = pytest.importorskip("pyarrow.parquet")
    out2 = tmp_path / "out2"
    out2.mkdir()
    assert main(["dedup", str(shards), "-o", str(out2), "--output-format", "parquet", "-q"]) == 0
    t = pq.read_table(out2 / "part-2.parquet")
    assert t.column_names == ["id", "text", "lang", "n"] and t.num_rows == 4


def test_folder_that_mixes_formats_or_cannot_be_told_is_refused(tmp_path, capsys):
    shards = _shards(tmp_path / "shards")
    (shards / "notes.csv").write_text("id,text\nq,hello\n")
    assert main(["dedup", str(shards), "-o", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "mixes formats" in err and "notes.csv" in err
    assert "part-0.jsonl" in err and "--input-format" in err
    (shards / "notes.csv").unlink()
    (shards / "README").write_text("about these shards")
    assert main(["dedup", str(shards), "-o", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "cannot tell the format" in err and "README" in err and "--input-format" in err
    assert not (tmp_path / "o.jsonl").exists()


def test_input_format_applies_to_every_file_of_a_folder(tmp_path, capsys):
    """--input-format jsonl (csv) on a folder: no IsADirectoryError traceback; every file is
    read as that format (here JSONL shards named .txt)."""
    folder = tmp_path / "named-txt"
    folder.mkdir()
    for s, docs in enumerate(SHARD_DOCS):
        _write_jsonl(folder / f"part-{s}.txt", docs)
    out = tmp_path / "k.jsonl"
    assert main(["dedup", str(folder), "--input-format", "jsonl", "-o", str(out), "-q"]) == 0
    assert _jsonl_ids(out) == ALL_IDS
    proc = run("dedup", str(folder), "--input-format", "csv", "-o", str(out), cwd=tmp_path)
    err = without_compile_notice(proc.stderr.decode())
    assert proc.returncode == 3 and "Traceback" not in err and err.count("\n") == 1
    assert "looks like JSON" in err and "--input-format jsonl" in err


def test_folder_of_parquet_files(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    folder = tmp_path / "pq"
    folder.mkdir()
    for s, docs in enumerate(SHARD_DOCS):
        pq.write_table(pa.Table.from_pylist(docs), folder / f"part-{s}.parquet")
    out = tmp_path / "k.jsonl"
    assert main(["dedup", str(folder), "-o", str(out), "-q"]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ALL_IDS and rows[5] == SHARD_DOCS[1][1]


# --- item 4: every output refusal before the first record


def _malformed(tmp_path: Path) -> Path:
    """An input whose first record is malformed: reading it fails with exit code 3, so an
    exit code 2 about an output proves the output was refused before any record was read."""
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": oops}\n{"id": "a", "text": "fine"}\n')
    return src


@pytest.mark.parametrize(
    "case",
    ["existing folder", "non-empty output folder", "same path", "parent missing", "stdout twice",
     "inside the output folder", "parquet to stdout", "input as output"],
)  # fmt: skip
def test_output_refusals_come_before_reading(tmp_path, capsys, case):
    src = _malformed(tmp_path)
    (tmp_path / "adir").mkdir()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    args = {
        "existing folder": ["-o", "k.jsonl", "--pairs-out", "adir"],
        "non-empty output folder": ["-o", "full"],
        "same path": ["-o", "k.jsonl", "--clusters-out", "k.jsonl"],
        "parent missing": ["-o", "k.jsonl", "--summary-json", "nope/s.json"],
        "stdout twice": ["-o", "-", "--pairs-out", "/dev/stdout"],
        "inside the output folder": ["-o", "new/", "--pairs-out", "new/pairs.csv"],
        "parquet to stdout": ["-o", "-", "--output-format", "parquet"],
        "input as output": ["-o", "in.jsonl"],
    }[case]
    proc = run("dedup", src.name, *args, cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert err.startswith("neardup: error: ") and err.count("\n") == 1 and "in.jsonl:1" not in err
    assert proc.stdout == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "full", "in.jsonl"]


# --- item 5: output formats


def test_output_format_from_the_extension_keeps_every_field(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    src = _write_jsonl(tmp_path / "in.jsonl", [*SHARD_DOCS[0], {**SHARD_DOCS[0][0], "id": "dup"}])
    kept = [d["id"] for d in SHARD_DOCS[0]]
    assert main(["dedup", str(src), "-o", str(tmp_path / "k.parquet"), "-q"]) == 0
    t = pq.read_table(tmp_path / "k.parquet")
    assert t.column_names == ["id", "text", "lang", "n"] and t.column("id").to_pylist() == kept
    assert main(["dedup", str(src), "-o", str(tmp_path / "k.csv"), "-q"]) == 0
    rows = list(csv.DictReader((tmp_path / "k.csv").open(encoding="utf-8")))
    assert [r["id"] for r in rows] == kept and rows[1] == {
        k: str(v) for k, v in SHARD_DOCS[0][1].items()
    }
    assert main(["dedup", str(src), "-o", str(tmp_path / "k.json.gz"), "-q"]) == 0
    assert json.loads(gzip.decompress((tmp_path / "k.json.gz").read_bytes())) == SHARD_DOCS[0]
    # from Parquet back to JSONL: every column, and the int64 id column used as the id
    assert main(["dedup", str(tmp_path / "k.parquet"), "-o", str(tmp_path / "b.jsonl"), "-q"]) == 0
    assert [json.loads(x) for x in (tmp_path / "b.jsonl").read_text().splitlines()] == SHARD_DOCS[0]
    # --output-format overrides a name without an extension; a disagreeing one is refused
    assert (
        main(["dedup", str(src), "-o", str(tmp_path / "k"), "--output-format", "parquet", "-q"])
        == 0
    )
    assert (tmp_path / "k").read_bytes()[:4] == b"PAR1"


def test_output_format_and_extension_must_agree(tmp_path, capsys):
    src = _write_jsonl(tmp_path / "in.jsonl", SHARD_DOCS[0])
    rc = main(["dedup", str(src), "-o", str(tmp_path / "k.parquet"), "--output-format", "csv"])
    assert rc == 2 and "names parquet but --output-format is csv" in capsys.readouterr().err
    assert main(["dedup", str(src), "-o", str(tmp_path / "k.txt")]) == 2
    assert "--output-format lines" in capsys.readouterr().err
    assert not list(tmp_path.glob("k*"))


# --- item 6: ids


def test_typed_id_columns_and_unusable_ids(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(
        pa.table({"id": pa.array([7, 8], pa.int64()), "text": ["alpha", "beta"]}),
        tmp_path / "t.parquet",
    )
    out = tmp_path / "k.jsonl"
    assert (
        main(
            [
                "dedup",
                str(tmp_path / "t.parquet"),
                "-o",
                str(out),
                "--clusters-out",
                str(tmp_path / "c.csv"),
                "-q",
            ]
        )
        == 0
    )
    assert [r["id"] for r in csv.DictReader((tmp_path / "c.csv").open())] == ["7", "8"]
    for value, what in (
        ("null", "null"),
        ("1.5", "a float"),
        ("true", "a boolean"),
        ('""', "an empty string"),
    ):
        src = tmp_path / "ids.jsonl"
        src.write_text('{"id": "a", "text": "one"}\n{"id": ' + value + ', "text": "two"}\n')
        assert main(["dedup", str(src), "-o", str(out)]) == 3
        err = capsys.readouterr().err
        assert f"ids.jsonl:2: the record's 'id' field (used as its id) is {what}" in err
        assert "--generate-ids" in err and "--id-field" in err
        assert main(["dedup", str(src), "-o", str(out), "--generate-ids", "-q"]) == 0
        assert (
            main(
                [
                    "dedup",
                    str(src),
                    "-o",
                    str(out),
                    "--clusters-out",
                    str(tmp_path / "c.csv"),
                    "--generate-ids",
                    "-q",
                ]
            )
            == 0
        )
        assert [r["id"] for r in csv.DictReader((tmp_path / "c.csv").open())] == [
            f"{src}:1",
            f"{src}:2",
        ]


def test_repeated_ids_name_the_options_that_exist(tmp_path, capsys):
    src = tmp_path / "d.jsonl"
    src.write_text('{"id": "a", "text": "one"}\n{"id": "a", "text": "two"}\n')
    assert main(["dedup", str(src), "-o", str(tmp_path / "k.jsonl")]) == 3
    err = capsys.readouterr().err
    assert "duplicate id 'a'" in err and "--generate-ids" in err and "drop --id-field" not in err
    assert main(["dedup", str(src), "-o", str(tmp_path / "k.jsonl"), "--generate-ids", "-q"]) == 0
    assert main(["dedup", str(src), "-o", "x.jsonl", "--generate-ids", "--id-field", "id"]) == 2


# --- item 7: plain-text files


def test_a_txt_file_is_one_document_unless_lines_is_asked_for(tmp_path):
    src = tmp_path / "lines.txt"
    src.write_text("one line about rivers\nanother line entirely\none line about rivers\n")
    proc = run("dedup", "lines.txt", "-o", "kept.txt", cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 0 and "documents                    1" in proc.stdout.decode()
    assert "--input-format lines" in err and "neardup: warning:" in err
    assert (tmp_path / "kept.txt").is_file() and (
        tmp_path / "kept.txt"
    ).read_bytes() == src.read_bytes()
    proc = run("dedup", "lines.txt", "--input-format", "lines", "-o", "kept2.txt", cwd=tmp_path)
    assert proc.returncode == 0 and "warning" not in proc.stderr.decode()
    assert (tmp_path / "kept2.txt").read_text() == "one line about rivers\nanother line entirely\n"


# --- item 11: empty inputs


def test_empty_input_and_all_skipped_warn(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    proc = run("dedup", "empty.jsonl", "-o", "k.jsonl", "-q", cwd=tmp_path)
    assert proc.returncode == 0 and b"neardup: warning: the input holds no documents" in proc.stderr
    (tmp_path / "bad.jsonl").write_text('{"text": oops}\n{"body": 1}\n')
    proc = run("dedup", "bad.jsonl", "-o", "k.jsonl", "--on-error", "skip", "-q", cwd=tmp_path)
    assert proc.returncode == 0 and b"every record was skipped (2)" in proc.stderr
    assert (tmp_path / "k.jsonl").read_bytes() == b""


# --- item 12


def test_mixed_encodings_are_refused_not_turned_into_mojibake(tmp_path, capsys):
    src = tmp_path / "mixed.jsonl"
    src.write_bytes(b'{"text": "caf\xe9 noir"}\n{"text": "caf\xc3\xa9 au lait"}\n')
    assert main(["dedup", str(src), "-o", str(tmp_path / "k.jsonl"), "--encoding", "latin-1"]) == 3
    err = capsys.readouterr().err
    assert "mixed.jsonl:2: this line is valid UTF-8" in err and "Ã©" in err
    src.write_bytes(b'{"text": "caf\xe9 noir"}\n')  # latin-1 only: read as asked
    assert (
        main(["dedup", str(src), "-o", str(tmp_path / "k.jsonl"), "--encoding", "latin-1", "-q"])
        == 0
    )
    assert json.loads((tmp_path / "k.jsonl").read_text(encoding="utf-8"))["text"] == "café noir"


def test_format_errors_name_input_format(tmp_path):
    proc = run("dedup", "-", "-o", "k.jsonl", cwd=tmp_path, stdin=b"id,text\n1,hello\n")
    assert proc.returncode == 3 and b"<stdin>:1: malformed JSON" in proc.stderr
    assert b"--input-format" in proc.stderr
    (tmp_path / "arr.jsonl").write_text('[\n{"text": "a"}\n]\n')
    proc = run("dedup", "arr.jsonl", "-o", "k.jsonl", cwd=tmp_path)
    assert proc.returncode == 3 and b"--input-format json" in proc.stderr
    (tmp_path / "one.jsonl").write_text('[{"text": "a"}]\n')
    proc = run("dedup", "one.jsonl", "-o", "k.jsonl", cwd=tmp_path)
    assert proc.returncode == 3 and b"--input-format json" in proc.stderr
    (tmp_path / "t.csv").write_text("id\ttext\n1\thello\n")
    proc = run("dedup", "t.csv", "-o", "k.jsonl", cwd=tmp_path)
    assert proc.returncode == 3 and b"--input-format tsv" in proc.stderr
    (tmp_path / "d.json").write_text('{"text": "a"}\n{"text": "b"}\n')
    proc = run("dedup", "d.json", "-o", "k.jsonl", cwd=tmp_path)
    assert proc.returncode == 3 and b"--input-format jsonl" in proc.stderr


def test_summary_says_what_clusters_counts_and_help_has_no_doc_paths(tmp_path, capsys):
    src = _write_jsonl(tmp_path / "in.jsonl", [*SHARD_DOCS[0], {**SHARD_DOCS[0][0], "id": "dup"}])
    assert main(["dedup", str(src), "-o", str(tmp_path / "k.jsonl")]) == 0
    assert "clusters (2+ docs)           1" in capsys.readouterr().out
    for command in (["dedup"], ["eval"], ["fingerprint"], ["batch-query"], ["index", "plan"]):
        assert main([*command, "-h"]) == 0
        assert "docs/" not in capsys.readouterr().out.replace("docs/s", ""), command


def test_options_that_would_be_ignored_are_refused(tmp_path, capsys):
    src = _write_jsonl(tmp_path / "in.jsonl", SHARD_DOCS[0])
    out = str(tmp_path / "k.jsonl")
    assert main(["dedup", str(src), "-o", out, "--no-verify", "--threshold", "0.9"]) == 2
    assert "--no-verify" in capsys.readouterr().err
    for option, value in (
        ("--scheduler", "tcp://h:1"),
        ("--master", "local[2]"),
        ("--partitions", "4"),
        ("--workdir", str(tmp_path)),
    ):
        assert main(["dedup", str(src), "-o", out, option, value]) == 2
        assert f"{option} is an option of --engine" in capsys.readouterr().err
    assert (
        main(["dedup", str(src), "-o", out, "--engine", "spark", "--scheduler", "tcp://h:1"]) == 2
    )
    assert not (tmp_path / "k.jsonl").exists()


def test_pairs_and_clusters_outputs_are_compressed_as_named(tmp_path, capsys):
    """`--pairs-out p.csv.gz` and `--clusters-out c.csv.zst` were written as plain CSV under
    those names (`zcat` failed); they are compressed as `-o` is."""
    import gzip

    import zstandard

    src = tmp_path / "in.jsonl"
    rows = [{"id": str(i), "text": f"the same words about item {i % 3} again"} for i in range(9)]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = ["dedup", str(src), "-o", str(tmp_path / "k.jsonl"), "-q"]
    assert main([*base, "--pairs-out", str(tmp_path / "p.csv"), "--clusters-out", str(tmp_path / "c.csv")]) == 0  # fmt: skip
    assert main([*base, "--pairs-out", str(tmp_path / "p.csv.gz"), "--clusters-out", str(tmp_path / "c.csv.zst")]) == 0  # fmt: skip
    assert (
        gzip.decompress((tmp_path / "p.csv.gz").read_bytes()) == (tmp_path / "p.csv").read_bytes()
    )
    plain = zstandard.ZstdDecompressor().stream_reader((tmp_path / "c.csv.zst").read_bytes()).read()
    assert plain == (tmp_path / "c.csv").read_bytes() and plain.startswith(b"id,cluster")
