"""``neardup dedup`` end to end through the CLI entry point."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

from doubles import without_compile_notice

from neardup.cli.main import main

DOCS = [
    {
        "id": "a",
        "text": "the council announced a new budget for the river bridge and the public library",
    },
    {
        "id": "b",
        "text": "The council announced a NEW budget for the river bridge and the public library",
    },
    {
        "id": "c",
        "text": "the council announced a large budget for the river bridge and the public library",
    },
    {"id": "d", "text": "mountain weather and airport railways in the summer season were quiet"},
]


def _jsonl(path: Path, docs=DOCS) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return path


def test_dedup_writes_outputs_and_summary(tmp_path, capsys):
    src = _jsonl(tmp_path / "in.jsonl")
    out = tmp_path / "out.jsonl"
    rc = main(
        [
            "dedup", str(src), "--output", str(out),
            "--pairs-out", str(tmp_path / "pairs.csv"),
            "--clusters-out", str(tmp_path / "clusters.csv"),
            "--summary-json", str(tmp_path / "summary.json"),
        ]
    )  # fmt: skip
    assert rc == 0
    printed = capsys.readouterr().out
    for word in (
        "documents",
        "exact duplicates",
        "near duplicates",
        "clusters",
        "elapsed",
        "docs/s",
    ):
        assert word in printed
    kept = [json.loads(x)["id"] for x in out.read_text(encoding="utf-8").splitlines()]
    assert kept == ["a", "d"]
    rows = list(csv.reader((tmp_path / "pairs.csv").open(encoding="utf-8")))
    assert rows[0] == ["id_a", "id_b", "distance", "score", "stage", "rule"]
    assert ["a", "b", "0", "1.0", "exact", "exact"] in rows
    assert any(r[:2] == ["a", "c"] and r[4] == "near" and r[5] == "similarity" for r in rows)
    clusters = {
        r["id"]: r for r in csv.DictReader((tmp_path / "clusters.csv").open(encoding="utf-8"))
    }
    assert clusters["c"]["representative"] == "a" and clusters["c"]["kept"] == "0"
    assert clusters["d"]["cluster_size"] == "1"
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert (
        summary["documents"] == 4
        and summary["exact_duplicates"] == 1
        and summary["near_duplicates"] == 1
    )


def test_sample_command(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["dedup", "--sample"]) == 0
    out = capsys.readouterr().out
    assert "documents" in out and "neardup-out" in out
    for name in ("sample.dedup.jsonl", "pairs.csv", "clusters.csv", "summary.json"):
        assert (tmp_path / "neardup-out" / name).exists()
    summary = json.loads((tmp_path / "neardup-out" / "summary.json").read_text(encoding="utf-8"))
    assert summary["documents"] == 1500 and summary["clusters"] > 300


def test_keep_none_and_csv_output(tmp_path):
    src = tmp_path / "in.csv"
    with src.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["id", "text"])
        w.writeheader()
        w.writerows(DOCS)
    out = tmp_path / "out.csv"
    assert (
        main(["dedup", str(src), "-o", str(out), "--keep", "none", "--id-field", "id", "-q"]) == 0
    )
    assert [r["id"] for r in csv.DictReader(out.open(encoding="utf-8"))] == ["d"]


def test_malformed_record_fails_with_file_line_and_no_output(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "ok"}\n{"text": oops}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    rc = main(["dedup", str(src), "-o", str(out), "--pairs-out", str(tmp_path / "p.csv")])
    assert rc == 3
    assert f"{src}:2: malformed JSON" in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "p.csv").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_on_error_skip_counts(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "ok one"}\n{"text": oops}\n{"body": "x"}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    rc = main(
        [
            "dedup",
            str(src),
            "-o",
            str(out),
            "--on-error",
            "skip",
            "--summary-json",
            str(tmp_path / "s.json"),
        ]
    )
    assert rc == 0
    printed = capsys.readouterr()
    assert "skipped records" in printed.out
    # (stderr may also carry the one-time kernel compile notice: a cold cache)
    warning = without_compile_notice(printed.err).splitlines()
    assert len(warning) == 1 and warning[0].startswith(
        f"neardup: warning: skipped 2 records (first: {src}:2: malformed JSON"
    )
    summary = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    assert summary["skipped_records"] == 2
    assert [(r["path"], r["line"]) for r in summary["skipped_list"]] == [
        (str(src), 2),
        (str(src), 3),
    ]
    assert "no text field 'text'" in summary["skipped_list"][1]["reason"]
    # -q hides the summary, never the warning
    assert main(["dedup", str(src), "-o", str(out), "--on-error", "skip", "-q"]) == 0
    printed = capsys.readouterr()
    assert printed.out == "" and printed.err.splitlines() == warning


def test_refuses_to_overwrite_input(tmp_path, capsys):
    src = _jsonl(tmp_path / "in.jsonl")
    before = src.read_bytes()
    assert main(["dedup", str(src), "-o", str(src)]) == 2
    assert "would overwrite" in capsys.readouterr().err
    assert src.read_bytes() == before


def test_missing_field_and_bad_options(tmp_path, capsys):
    src = _jsonl(tmp_path / "in.jsonl")
    assert main(["dedup", str(src), "-o", str(tmp_path / "o.jsonl"), "--text-field", "body"]) == 3
    assert "no text field 'body'" in capsys.readouterr().err
    assert main(["dedup", str(src), "-o", str(tmp_path / "o.jsonl"), "--keep", "all"]) == 2
    assert main(["dedup", str(src)]) == 2  # --output required
    assert main(["dedup", "--sample", str(src)]) == 2


def test_non_utf8_input_and_encoding_flag(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_bytes('{"text": "café crème"}\n'.encode("latin-1"))
    assert main(["dedup", str(src), "-o", str(tmp_path / "o.jsonl")]) == 3
    assert "--encoding" in capsys.readouterr().err
    assert (
        main(["dedup", str(src), "-o", str(tmp_path / "o.jsonl"), "--encoding", "latin-1", "-q"])
        == 0
    )


def test_stdin_to_stdout_subprocess(tmp_path):
    data = "".join(json.dumps(d) + "\n" for d in DOCS)
    proc = subprocess.run(
        [sys.executable, "-m", "neardup", "dedup", "-", "--output", "-"],
        input=data.encode(),
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    kept = [json.loads(x)["id"] for x in io.StringIO(proc.stdout.decode()).read().splitlines()]
    assert kept == ["a", "d"]
    assert b"documents" in proc.stderr  # summary goes to stderr when stdout carries data


def test_run_warns_when_the_candidate_bound_narrowed_a_pass():
    from neardup.cli.dedup_cmd import _run_warnings, _summary_text

    base = {
        "documents": 10,
        "exact_duplicates": 0,
        "near_duplicates": 0,
        "clusters": 0,
        "kept": 10,
        "dropped": 0,
        "elapsed_s": 1.0,
        "docs_per_s": 10.0,
    }
    full = {"long": {"docs": 5, "distance": 14, "distance_used": 14}}
    assert _run_warnings({**base, "candidate_passes": full}, []) == []
    narrowed = {
        **base,
        "candidate_passes": {
            "long": {"docs": 50_000, "distance": 14, "distance_used": -1},
            "short": {"docs": 9, "distance": 18, "distance_used": 12},
        },
    }
    long_, short = _run_warnings(narrowed, [])
    assert "long candidate pass (50,000 docs)" in long_ and "no near pairs searched" in long_
    assert "distance lowered to 12" in short
    # warnings are not part of the summary (which -q hides): they go to stderr on their own
    assert "candidate pass" not in _summary_text(narrowed)


def test_work_budget_narrowing_is_reported_and_can_be_lifted(tmp_path, capsys):
    """A tiny work budget narrows the passes of --candidates simhash (the summary warns and
    names the budget); --no-candidate-budget searches the full distances and finds the edited
    pair again."""
    import random

    rng = random.Random(5)
    vocab = [f"w{i}" for i in range(3000)]
    docs = [{"id": f"d{i}", "text": " ".join(rng.choices(vocab, k=40))} for i in range(300)]
    words = docs[0]["text"].split()
    for j in range(0, 40, 5):  # 8 of 40 words changed: a near duplicate several bits away
        words[j] = f"x{j}"
    docs.append({"id": "edit", "text": " ".join(words)})
    src = _jsonl(tmp_path / "in.jsonl", docs)

    def run(*extra: str) -> tuple[dict, str]:
        summary = tmp_path / "summary.json"
        rc = main(["dedup", str(src), "--output", str(tmp_path / "out.jsonl"),
                   "--summary-json", str(summary), "--candidates", "simhash", *extra])  # fmt: skip
        assert rc == 0
        return json.loads(summary.read_text(encoding="utf-8")), capsys.readouterr()

    narrow, printed = run("--candidate-work-ns", "1")
    passes = narrow["candidate_passes"]
    assert any(p["distance_used"] < p["distance"] for p in passes.values())
    warning = [x for x in printed.err.splitlines() if x.startswith("neardup: warning: ")]
    assert (
        warning and "candidate work budget" in warning[0] and "--no-candidate-budget" in warning[0]
    )
    assert "warning" not in printed.out  # warnings go to stderr, the summary to stdout
    _, printed = run("--candidate-work-ns", "1", "-q")  # -q hides the summary, not warnings
    assert printed.out == "" and printed.err.splitlines() == warning
    full, printed = run("--no-candidate-budget")
    assert all(p["distance_used"] == p["distance"] for p in full["candidate_passes"].values())
    assert "warning" not in printed.out + printed.err
    assert full["near_duplicates"] >= 1


def test_reading_failure_with_hashing_under_way_fails_cleanly(tmp_path, capsys, monkeypatch):
    """Exact hashes and fingerprints start while reading (dedup_files' ExactFingerprintPass);
    a bad record late in the file still fails with its file and line, no output, no threads
    left behind."""
    import threading

    from neardup.batch import exact
    from neardup.io import jsonl as jsonl_mod

    monkeypatch.setattr(jsonl_mod, "BLOCK", 4096)
    monkeypatch.setattr(exact, "EXACT_CHUNK_BYTES", 2048)
    src = tmp_path / "in.jsonl"
    # distinct texts (the same 40 words with another number are near duplicates)
    lines = [json.dumps({"text": " ".join(f"w{i}x{j}" for j in range(40))}) for i in range(400)]
    lines[350] = '{"text": oops}'
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = threading.active_count()
    out = tmp_path / "out.jsonl"
    rc = main(["dedup", str(src), "-o", str(out), "--workers", "2"])
    assert rc == 3
    assert f"{src}:351: malformed JSON" in capsys.readouterr().err
    assert not out.exists()
    assert threading.active_count() == before
    lines[350] = json.dumps({"text": "fine"})
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["dedup", str(src), "-o", str(out), "--workers", "2", "--quiet"]) == 0
    assert len(out.read_text(encoding="utf-8").splitlines()) == 400
    assert threading.active_count() == before


def test_summary_keeps_docs_per_s_below_one() -> None:
    """A tiny input whose first run waits for numba to compile (91 s for 4 documents in a fresh
    clone) used to lose its docs/s line: the rate rounded to 0.0 and read as absent."""
    from neardup.cli.dedup_cmd import _summary_text

    base = {"documents": 4, "exact_duplicates": 1, "near_duplicates": 1, "clusters": 1}
    text = _summary_text({**base, "kept": 2, "dropped": 2, "elapsed_s": 91.42, "docs_per_s": 0.0})
    assert "docs/s" in text and "0.0438" in text


def test_summary_rate_leaves_the_kernel_compile_out() -> None:
    """A first run's docs/s is the rate of the work, not of the one-time compile (issue 33:
    `docs/s 16` on the first run's summary)."""
    from neardup.cli.dedup_cmd import _summary_text

    base = {"documents": 1000, "exact_duplicates": 0, "near_duplicates": 0, "clusters": 0}
    text = _summary_text({**base, "kept": 1000, "dropped": 0, "elapsed_s": 62.0, "kernel_compile_s": 60.0})  # fmt: skip
    assert "kernel compile        60.00s (first run only)" in text
    assert [ln.split()[-1] for ln in text.splitlines() if ln.startswith("docs/s")] == ["500"]


def test_a_run_counts_only_its_own_compile(tmp_path, monkeypatch) -> None:
    """kernel_compile_s is this run's compile, not the process's: a library caller (or a test
    suite) that compiled before gets its docs/s, not an elapsed time less a larger compile."""
    from neardup import _jit
    from neardup.batch.files import dedup_files

    src = _jsonl(tmp_path / "in.jsonl")
    dedup_files(src, output=tmp_path / "warm.jsonl")  # kernels loaded
    monkeypatch.setattr(_jit._stats, "seconds", _jit._stats.seconds + 1000.0)  # compiled before
    stats = dedup_files(src, output=tmp_path / "out.jsonl").stats
    assert 0.0 <= stats["kernel_compile_s"] < stats["elapsed_s"] < 1000.0
    assert stats["docs_per_s"] is not None and stats["docs_per_s"] > 0


def test_progress_says_a_kernel_is_compiling(monkeypatch) -> None:
    """While a kernel compiles, a running row says so (not a silent 0 %); a finished row and
    a warm cache show no such state."""
    import io

    from rich.console import Console

    from neardup import _jit
    from neardup.cli.progress import StageProgress

    def shown(state):
        monkeypatch.setattr(_jit._stats, "current", state)
        buf = io.StringIO()
        console = Console(file=buf, force_terminal=True, width=200, color_system=None)
        with StageProgress(True, console=console) as p:
            p.begin("fingerprints", total=10)
            p.begin("read", total=3)
            p.end("read", 3)
        return buf.getvalue()

    monkeypatch.setattr(_jit._stats, "count", 7)
    text = shown("simhash_docs")
    frames = re.split(r"[\r\n]", re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text))
    last = {ln.split()[0]: ln for ln in frames if ln.split()}  # each row's last frame
    assert "compiling kernel 7 (simhash_docs), first run only" in last["fingerprints"]
    assert "compiling" not in last["read"]  # a finished stage
    assert "compiling" not in shown(None)


def test_sample_command_names_outputs_moved_by_flags(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    kept = tmp_path / "kept.jsonl"
    assert main(["dedup", "--sample", "--output", str(kept)]) == 0
    out = capsys.readouterr().out
    assert f"kept docs {kept}" in out and f"pairs {Path('neardup-out') / 'pairs.csv'}" in out
    assert kept.exists() and not (tmp_path / "neardup-out" / "sample.dedup.jsonl").exists()


def test_outputs_of_one_run_are_all_or_nothing(tmp_path, capsys):
    """A later output that fails once the run is done (--pairs-out names a folder) leaves no
    kept file, and an existing kept file untouched: the run's outputs are published together
    or not at all."""
    src = _jsonl(tmp_path / "in.jsonl")
    (tmp_path / "adir").mkdir()
    out = tmp_path / "out.jsonl"
    rc = main(["dedup", str(src), "-o", str(out), "--pairs-out", str(tmp_path / "adir")])
    assert rc == 2
    assert "adir" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "in.jsonl"]
    assert list((tmp_path / "adir").iterdir()) == []
    out.write_text("old\n", encoding="utf-8")
    args = ["--clusters-out", str(tmp_path / "c.csv"), "--summary-json", str(tmp_path / "adir")]
    assert main(["dedup", str(src), "-o", str(out), *args]) == 2
    assert out.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "in.jsonl", "out.jsonl"]


def _fake_terminal():
    from rich.console import Console

    buf = io.StringIO()
    return buf, Console(file=buf, force_terminal=True, width=140, color_system=None)


def test_progress_rows_show_counts_rate_percent_and_eta():
    from neardup.cli.progress import StageProgress

    now = [0.0]
    buf, console = _fake_terminal()
    progress = StageProgress(True, console=console, get_time=lambda: now[0])
    with progress:
        progress.begin("read")  # total unknown while reading: a count and a rate
        now[0] = 2.0
        progress.advance("read", 2_000)
        progress._progress.refresh()
        reading = buf.getvalue().splitlines()[-1]
        progress.end("read", 2_500)
        progress.documents = 2_500
        progress("verify", 0, 100)  # a stage with real counts: its own units, % and ETA
        now[0] = 7.0
        progress("verify", 50, 100)
        progress._progress.refresh()
        running = buf.getvalue()
        now[0] = 12.0
        progress("verify", 100, 100)
        progress("cluster", 0, 1)  # a start/end stage: shown in documents
        now[0] = 13.0
        progress("cluster", 1, 1)
    assert "2,000 docs 1,000 docs/s" in reading and "eta" not in reading
    row = [x for x in running.splitlines() if "verify" in x][-1]
    assert "50%" in row and "50/100 pairs" in row and "10 pairs/s" in row and "eta 0:00:05" in row
    final = buf.getvalue()
    assert "2,500/2,500 docs 1,250 docs/s" in final
    assert "100/100 pairs" in final and "2,500/2,500 docs 2,500 docs/s" in final


def test_progress_shows_bytes_as_mb():
    """A store load's first pass (``check``) counts bytes and is shown in MB: its count, rate,
    % and ETA; below 10 MB with a decimal."""
    from neardup.cli.progress import StageProgress

    now = [0.0]
    buf, console = _fake_terminal()
    progress = StageProgress(True, console=console, get_time=lambda: now[0])
    with progress:
        progress("check", 0, 3_000_000_000)
        now[0] = 10.0
        progress("check", 1_000_000_000, 3_000_000_000)
        progress._progress.refresh()
        running = [x for x in buf.getvalue().splitlines() if "check" in x][-1]
        progress("small", 0, 1)
    assert "1,000/3,000 MB" in running and "100 MB/s" in running and "33%" in running
    assert "eta 0:00:20" in running
    progress = StageProgress(True, console=console, get_time=lambda: now[0])
    with progress:
        progress("check", 400_000, 2_500_000)
    assert "0.4/2.5 MB" in buf.getvalue()


def test_progress_only_on_a_terminal_and_without_q(tmp_path, capsys, monkeypatch):
    from neardup.cli import progress as P

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert P.StageProgress.for_stderr(quiet=False).enabled
    assert not P.StageProgress.for_stderr(quiet=True).enabled
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert not P.StageProgress.for_stderr(quiet=False).enabled
    src = _jsonl(tmp_path / "in.jsonl")
    assert main(["dedup", str(src), "-o", str(tmp_path / "o.jsonl")]) == 0
    printed = capsys.readouterr()
    # piped: no progress (stderr may carry a one-time kernel compile notice, nothing else)
    err = without_compile_notice(printed.err)
    assert "\x1b" not in err and "docs/s" not in err
    assert not re.search(r"^(read|exact|fingerprint|candidates|verify|cluster|write) ", err, re.M)
    assert "documents" in printed.out


def test_dedup_shows_every_stage_on_a_terminal(tmp_path, monkeypatch, capsys):
    from neardup.cli import progress as P

    buf, console = _fake_terminal()
    monkeypatch.setattr(
        P.StageProgress, "for_stderr", classmethod(lambda cls, quiet: cls(True, console=console))
    )
    src = _jsonl(tmp_path / "in.jsonl")
    assert main(["dedup", str(src), "-o", str(tmp_path / "o.jsonl")]) == 0
    # every redraw of the rows, as plain lines
    final = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buf.getvalue()).replace("\r", "\n")
    for stage in ("read", "exact", "fingerprint", "candidates", "verify", "cluster"):
        assert re.search(rf"^{stage} .* 100% 4/4 docs .*docs/s", final, re.M), (stage, final)
    assert re.search(r"^write .* 100% 2/2 docs", final, re.M), final


def test_summary_leaves_stdout_to_the_data_when_output_is_dev_stdout(tmp_path):
    """``-o /dev/stdout`` (or a link to it) carries the kept documents: the summary goes to
    stderr, as with ``-o -``, instead of being mixed into them."""
    src = _jsonl(tmp_path / "in.jsonl")
    (tmp_path / "link").symlink_to("/dev/stdout")
    for target in ("/dev/stdout", str(tmp_path / "link")):
        proc = subprocess.run(
            [sys.executable, "-m", "neardup", "dedup", str(src), "-o", target],
            capture_output=True,
            check=False,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        kept = [json.loads(x)["id"] for x in proc.stdout.decode().splitlines()]
        assert kept == ["a", "d"]
        assert b"documents" in proc.stderr


def test_missing_output_folder_is_refused_before_the_run(tmp_path, capsys):
    """A mistyped output folder is reported before the corpus is read (here a malformed
    record would fail the run with exit 3 if it were read), and nothing is created."""
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": oops}\n', encoding="utf-8")
    for option in ("--output", "--pairs-out", "--clusters-out", "--summary-json"):
        args = ["dedup", str(src), "-o", str(tmp_path / "o.jsonl"), option, "typo/x"]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert f"{option}: output directory 'typo' does not exist" in err
        assert "mkdir -p typo" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_dedup_files_writes_what_the_cli_writes(tmp_path, capsys):
    """The library's file-to-file run (``neardup.dedup_files``) is what the CLI runs: the same
    bytes out, the summary as the result's stats, progress for reading and writing too."""
    import pytest

    from neardup import DedupConfig, dedup_files
    from neardup.errors import ConfigError

    src = _jsonl(tmp_path / "in.jsonl")
    names = ("kept.jsonl", "pairs.csv", "clusters.csv", "summary.json")
    cli, lib = tmp_path / "cli", tmp_path / "lib"
    cli.mkdir()
    lib.mkdir()
    flags = ("--output", "--pairs-out", "--clusters-out", "--summary-json")
    args = [x for flag, name in zip(flags, names, strict=True) for x in (flag, str(cli / name))]
    assert main(["dedup", str(src), *args, "--keep", "longest", "-q"]) == 0
    events: list[tuple[str, int, int]] = []
    r = dedup_files(
        src,
        output=lib / "kept.jsonl",
        pairs_out=lib / "pairs.csv",
        clusters_out=lib / "clusters.csv",
        summary_json=lib / "summary.json",
        config=DedupConfig(keep="longest"),
        progress=lambda *e: events.append(e),
    )
    for name in names[:3]:
        assert (lib / name).read_bytes() == (cli / name).read_bytes(), name
    summary = json.loads((lib / "summary.json").read_text(encoding="utf-8"))
    assert set(summary) == set(json.loads((cli / "summary.json").read_text(encoding="utf-8")))
    assert summary["kept"] == r.stats["kept"] == int(r.keep.sum()) == 2
    assert r.stats["skipped_records"] == 0 and r.stats["inputs"] == [str(src)]
    assert events[0] == ("read", 0, 0) and ("read", 4, 4) in events
    assert events[-2:] == [("write", 0, 2), ("write", 2, 2)]
    assert {e[0] for e in events} >= {"exact", "candidates", "verify", "cluster"}
    # keyword overrides as dedup() takes them; refusals come before anything is read
    assert dedup_files([str(src)], output=tmp_path / "k.jsonl", keep="none").stats["kept"] == 1
    with pytest.raises(ConfigError, match="dedup_files"):
        dedup_files(src, output=tmp_path / "x.jsonl", bogus=1)
    with pytest.raises(ConfigError, match="output"):
        dedup_files(src, output=src)
    with pytest.raises(ConfigError, match="--pairs-out"):
        dedup_files(src, output=tmp_path / "y.jsonl", pairs_out=tmp_path / "no" / "p.csv")
    assert not (tmp_path / "y.jsonl").exists()
    capsys.readouterr()


def test_bucket_valve_warns_with_its_estimate_and_the_budget_option(tmp_path, capsys):
    """A template repeated with small changes crowds MinHash buckets: under a band budget of one
    pair per document the valve acts, and the run says how much it gave up and how to lift it;
    the CLI's default budget is the library's."""
    import dataclasses

    from neardup.rules.config import DedupConfig

    field = {f.name: f for f in dataclasses.fields(DedupConfig)}["lsh_band_pairs_per_doc"]
    assert field.default == 16  # the CLI option's default below
    base = "the committee reviewed the annual report on regional water supply and roads"
    docs = [{"id": str(i), "text": f"{base} item {i} of the series"} for i in range(120)]
    src = _jsonl(tmp_path / "in.jsonl", docs)
    out = tmp_path / "out.jsonl"
    summary = tmp_path / "s.json"
    args = ["dedup", str(src), "-o", str(out), "--summary-json", str(summary)]
    assert main([*args, "--lsh-band-pairs-per-doc", "1"]) == 0
    err = capsys.readouterr().err
    lsh = json.loads(summary.read_text())["lsh"]
    assert lsh["valve_bands"] > 0 and lsh["pairs_skipped"] > 0
    assert "bucket valve acted in" in err and "--lsh-band-pairs-per-doc" in err
    assert "estimated candidates given up" in err
    assert main([*args, "--lsh-band-pairs-per-doc", "0"]) == 0  # 0: no valve
    assert "bucket valve" not in capsys.readouterr().err
    assert json.loads(summary.read_text())["lsh"]["valve_bands"] == 0
    # a valve estimated to have given up nothing is the plan working: no warning (a default
    # run on a templated corpus warned that it had lost "0 (0 %)")
    from neardup.cli.dedup_cmd import _run_warnings

    acted = {"valve_bands": 1, "bands": 79, "capped_buckets": 1, "pairs_skipped": 9}
    for lost, warned in ((0, False), (3, True), (None, True)):
        stats = {"lsh": {**acted, "valve_lost_pairs_est": lost}, "documents": 5}
        assert any("bucket valve" in w for w in _run_warnings(stats, [])) is warned


def test_workers_default_is_every_cpu_and_outputs_do_not_depend_on_it(tmp_path):
    """No --workers: every CPU the process may use (the summary says how many); the kept
    documents, pairs and clusters are byte-identical to --workers 1's and --workers 3's."""
    from neardup._threads import default_workers

    docs = DOCS + [
        {"id": f"g{i}", "text": f"generated line {i} about the {i % 7} river bridges and budgets"}
        for i in range(60)
    ]
    src = _jsonl(tmp_path / "in.jsonl", docs)
    outputs = {}
    for name, extra in (
        ("default", []),
        ("one", ["--workers", "1"]),
        ("three", ["--workers", "3"]),
    ):
        d = tmp_path / name
        d.mkdir()
        rc = main(
            ["dedup", str(src), "-o", str(d / "out.jsonl"), "--pairs-out", str(d / "pairs.csv"),
             "--clusters-out", str(d / "clusters.csv"), "--summary-json", str(d / "s.json"),
             "--quiet", *extra]
        )  # fmt: skip
        assert rc == 0
        summary = json.loads((d / "s.json").read_text(encoding="utf-8"))
        want = {"default": default_workers(), "one": 1, "three": 3}[name]
        assert summary["config"]["workers"] == want
        outputs[name] = [(d / f).read_bytes() for f in ("out.jsonl", "pairs.csv", "clusters.csv")]
    assert outputs["default"] == outputs["one"] == outputs["three"]
    assert outputs["one"][1].count(b"\n") > 1  # pairs were found: the comparison means something
