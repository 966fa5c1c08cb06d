"""``neardup fingerprint FILE...`` and ``neardup idf build CORPUS``: thin shells over
:class:`neardup.Fingerprinter` and :func:`neardup.text.weights.build_idf`.

Input files: ``.jsonl`` / ``.json`` / ``.ndjson`` (one JSON object per line, text in
``--text-field``, id in ``--id-field`` or ``"id"`` when present, else ``path:line``) or plain
text (one document per line, id ``path:line``); ``-`` reads stdin (jsonl). Errors are raised as
:class:`~neardup.errors.NeardupError` subclasses; :mod:`neardup.cli.main` maps them.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import Annotated

import typer

BATCH = 10_000


def _is_jsonl(path: str, fmt: str) -> bool:
    if fmt != "auto":
        return fmt == "jsonl"
    return path == "-" or path.endswith((".jsonl", ".json", ".ndjson", ".jsonl.gz"))


def iter_docs(
    paths: list[str], *, fmt: str = "auto", text_field: str = "text", id_field: str | None = None
) -> Iterator[tuple[str, str]]:
    """Yield ``(id, text)`` from the files; raises RecordError naming file and line."""
    from ..errors import InputError, RecordError

    for path in paths:
        jsonl = _is_jsonl(path, fmt)
        try:
            fh = sys.stdin if path == "-" else open(path, encoding="utf-8", errors="strict")  # noqa: SIM115
        except OSError as exc:
            raise InputError(f"cannot open {path}: {exc.strerror or exc}") from exc
        name = "<stdin>" if path == "-" else path
        try:
            for lineno, line in enumerate(fh, 1):
                line = line.rstrip("\r\n")
                if not jsonl:
                    yield f"{name}:{lineno}", line
                    continue
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise RecordError(f"invalid JSON ({exc.msg})", path=name, line=lineno) from None
                if not isinstance(obj, dict):
                    raise RecordError(
                        f"expected a JSON object, got {type(obj).__name__}", path=name, line=lineno
                    )
                text = obj.get(text_field)
                if not isinstance(text, str):
                    raise RecordError(
                        f"field {text_field!r} must be a string, got {type(text).__name__}; "
                        "choose the field with --text-field",
                        path=name,
                        line=lineno,
                    )
                key = id_field or "id"
                doc_id = obj.get(key)
                if doc_id is None or doc_id == "":
                    if id_field:
                        raise RecordError(
                            f"record has no id field {id_field!r}", path=name, line=lineno
                        )
                    doc_id = f"{name}:{lineno}"
                yield str(doc_id), text
        except UnicodeDecodeError as exc:
            raise RecordError(f"not valid UTF-8 ({exc.reason})", path=name) from None
        finally:
            if fh is not sys.stdin:
                fh.close()


def _batches(it: Iterator[tuple[str, str]], n: int) -> Iterator[tuple[list[str], list[str]]]:
    ids: list[str] = []
    texts: list[str] = []
    for doc_id, text in it:
        ids.append(doc_id)
        texts.append(text)
        if len(ids) >= n:
            yield ids, texts
            ids, texts = [], []
    if ids:
        yield ids, texts


def fingerprint_cmd(
    files: Annotated[list[str], typer.Argument(help="jsonl or text files ('-' = stdin, jsonl)")],
    output: Annotated[
        str | None, typer.Option("--output", "-o", help="write CSV id,fingerprint (hex)")
    ] = None,
    bits: Annotated[int, typer.Option(help="64 or 128")] = 64,
    features: Annotated[str, typer.Option(help="auto|words|shingles|chars|jieba")] = "auto",
    ngram: Annotated[int | None, typer.Option(help="shingle / char n-gram size")] = None,
    weights: Annotated[str, typer.Option(help="tf|tfidf|keywords")] = "tf",
    hash: Annotated[
        str, typer.Option("--hash", help="xxh64|jenkins-lookup2|jenkins-oaat|fnv1a|md5")
    ] = "xxh64",
    seed: Annotated[int, typer.Option(help="feature hash seed")] = 0,
    stopwords: Annotated[
        bool, typer.Option("--stopwords/--no-stopwords", help="drop en/zh stop words")
    ] = False,
    idf: Annotated[str | None, typer.Option(help="IDF table file (tfidf / keywords)")] = None,
    workers: Annotated[int, typer.Option(help="threads")] = 1,
    fmt: Annotated[str, typer.Option("--format", help="auto|jsonl|txt")] = "auto",
    text_field: Annotated[str, typer.Option(help="jsonl text field")] = "text",
    id_field: Annotated[
        str | None, typer.Option(help="jsonl id field (default: 'id' if present)")
    ] = None,
) -> None:
    """Fingerprint documents; print a summary table (and write id,fingerprint with --output)."""

    from ..errors import ConfigError
    from ..fingerprint import Fingerprinter

    if fmt not in ("auto", "jsonl", "txt"):
        raise ConfigError(f"--format must be auto, jsonl or txt, got {fmt!r}")
    fp = Fingerprinter(
        bits,
        features=features,
        ngram=ngram,
        weights=weights,
        hash=hash,
        seed=seed,
        stopwords=stopwords,
        idf=idf,
    )
    width = bits // 4
    out = None
    if output:
        try:
            out = open(output, "w", encoding="utf-8", newline="")  # noqa: SIM115
        except OSError as exc:
            from ..errors import InputError

            raise InputError(f"cannot write {output}: {exc.strerror or exc}") from exc
        out.write("id,fingerprint\n")
    n = n_empty = n_chars = n_feat = 0
    t0 = time.perf_counter()
    try:
        for ids, texts in _batches(
            iter_docs(files, fmt=fmt, text_field=text_field, id_field=id_field), BATCH
        ):
            b = fp.fingerprint_batch(texts, workers=workers)
            n += len(ids)
            n_empty += int(b.empty.sum())
            n_chars += sum(map(len, texts))
            n_feat += int(b.n_features.sum())
            if out is not None:
                f = b.fingerprints
                if bits == 64:
                    hexes = [f"{int(v):0{width}x}" for v in f.tolist()]
                else:
                    hexes = [f"{int(h):016x}{int(lo):016x}" for h, lo in f.tolist()]
                out.writelines(f"{_csv(i)},{h}\n" for i, h in zip(ids, hexes, strict=True))
    finally:
        if out is not None:
            out.close()
    dt = time.perf_counter() - t0
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"neardup fingerprint ({bits}-bit, features={features}, weights={weights}, hash={hash})"
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("documents", f"{n:,}"),
        ("empty (fingerprint 0)", f"{n_empty:,}"),
        ("characters", f"{n_chars:,}"),
        ("features (mean per doc)", f"{n_feat / n:.1f}" if n else "-"),
        ("seconds", f"{dt:.3f}"),
        ("docs/s", f"{n / dt:,.0f}" if dt > 0 else "-"),
    ]
    if output:
        rows.append(("output", output))
    for r in rows:
        table.add_row(*r)
    Console().print(table)


def _csv(value: str) -> str:
    if any(c in value for c in ',"\n\r'):
        return '"' + value.replace('"', '""') + '"'
    return value


def idf_build_cmd(
    corpus: Annotated[list[str], typer.Argument(help="jsonl or text files")],
    output: Annotated[
        str, typer.Option("--output", "-o", help="IDF table to write (token<TAB>idf)")
    ],
    features: Annotated[
        str, typer.Option(help="auto (jieba for Chinese, words otherwise)|words|jieba")
    ] = "auto",
    min_df: Annotated[int, typer.Option(help="drop tokens in fewer documents")] = 1,
    fmt: Annotated[str, typer.Option("--format", help="auto|jsonl|txt")] = "auto",
    text_field: Annotated[str, typer.Option(help="jsonl text field")] = "text",
) -> None:
    """Build an IDF table (idf = ln(N / df), jieba's definition) for --weights tfidf."""
    from ..errors import ConfigError
    from ..text.tokenize import detect_lang, jieba_words, words
    from ..text.weights import build_idf

    if features not in ("auto", "words", "jieba"):
        raise ConfigError(f"--features must be auto, words or jieba, got {features!r}")

    def tokens() -> Iterator[list[str]]:
        for _id, text in iter_docs(corpus, fmt=fmt, text_field=text_field):
            use_jieba = features == "jieba" or (features == "auto" and detect_lang(text) == "zh")
            yield jieba_words(text) if use_jieba else words(text)

    table = build_idf(tokens(), min_df=min_df)
    table.save(output)
    typer.echo(f"wrote {output}: {len(table.idf):,} tokens, median idf {table.default:.3f}")


def register(app: typer.Typer) -> None:
    """Add ``fingerprint`` and ``idf build`` to the neardup CLI."""
    app.command("fingerprint")(fingerprint_cmd)
    idf_app = typer.Typer(help="IDF tables for tf-idf weights.", no_args_is_help=True)
    idf_app.command("build")(idf_build_cmd)
    app.add_typer(idf_app, name="idf")


__all__ = ["fingerprint_cmd", "idf_build_cmd", "iter_docs", "register"]
