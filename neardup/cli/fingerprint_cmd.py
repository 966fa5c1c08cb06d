"""``neardup fingerprint FILE...`` and ``neardup idf build CORPUS``: thin shells over
:class:`neardup.Fingerprinter` and :func:`neardup.text.weights.build_idf`.

Inputs are read by :func:`neardup.io.read_corpus`, exactly as ``neardup dedup`` reads them:
the same formats (``--input-format``, else told from the extension), compressed files, globs,
fsspec URLs, dotted ``--text-field``, and the same ids, so ``fingerprint`` and ``dedup``
fingerprint the same documents under the same ids. Errors are raised as
:class:`~neardup.errors.NeardupError` subclasses; :mod:`neardup.cli.main` maps them.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import IO, Annotated

import typer

from .._threads import default_workers

BATCH = 10_000

_FORMAT_HELP = (
    "Read every input file (a folder's too) as: jsonl, json, csv, tsv, parquet, text (a file "
    "is one document: the default for .txt/.md) or lines (a line is one document). Default: "
    "each file's extension; stdin: jsonl."
)

# the input arguments and options of both commands (read as ``neardup dedup`` reads its inputs)
_Inputs = Annotated[
    list[str],
    typer.Argument(
        help="Input files, folders, globs, URLs, or - for stdin. A folder's files are read by "
        "their own extensions (one format per folder, else refused).",
        show_default=False,
        metavar="INPUT",
    ),
]
_InputFormat = Annotated[
    str | None, typer.Option("--input-format", help=_FORMAT_HELP, show_default=False)
]
_TextField = Annotated[str, typer.Option(help="Field/column holding the text (dotted: meta.text).")]
_Encoding = Annotated[str, typer.Option(help="Input text encoding.")]


def iter_docs(
    paths: list[str],
    *,
    fmt: str | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    encoding: str = "utf-8",
) -> Iterator[tuple[str, str]]:
    """Yield ``(id, text)`` as :func:`neardup.io.read_corpus` reads them (``fmt``: one of
    ``neardup.io.FORMATS``, or None to tell each input's format from its name)."""
    from ..io import read_corpus

    with read_corpus(
        paths, fmt=fmt, text_field=text_field, id_field=id_field, encoding=encoding
    ) as corpus:
        yield from zip(corpus.ids, corpus.texts, strict=True)


def fingerprint_cmd(
    files: _Inputs,
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", help="Write CSV id,fingerprint (hex); - for stdout."),
    ] = None,
    bits: Annotated[int, typer.Option(help="64 or 128")] = 64,
    features: Annotated[str, typer.Option(help="auto|words|shingles|chars|jieba")] = "auto",
    ngram: Annotated[int | None, typer.Option(help="shingle / char n-gram size")] = None,
    weights: Annotated[str, typer.Option(help="tf|tfidf|keywords|textrank")] = "tf",
    hash: Annotated[
        str, typer.Option("--hash", help="xxh64|jenkins-lookup2|jenkins-oaat|fnv1a|md5")
    ] = "xxh64",
    seed: Annotated[int, typer.Option(help="feature hash seed")] = 0,
    stopwords: Annotated[
        bool, typer.Option("--stopwords/--no-stopwords", help="drop en/zh stop words")
    ] = False,
    idf: Annotated[str | None, typer.Option(help="IDF table file (tfidf / keywords)")] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help=f"threads (default: every CPU this process may use, {default_workers()} here)",
            show_default=False,
        ),
    ] = None,
    input_fmt: _InputFormat = None,
    text_field: _TextField = "text",
    id_field: Annotated[
        str | None,
        typer.Option(
            help="Field/column holding a unique id (default: an 'id' field if present, "
            "else path:line).",
            show_default=False,
        ),
    ] = None,
    encoding: _Encoding = "utf-8",
) -> None:
    """Fingerprint documents; print a summary table (and write id,fingerprint with --output)."""
    from ..errors import ConfigError
    from ..fingerprint.simhash import Fingerprinter
    from ..io import check_outputs, read_corpus
    from ..io.csvout import csv_fields
    from .dedup_cmd import warn

    idf_weights = ("tfidf", "keywords")
    if idf is not None and weights not in idf_weights:  # (it was read by nothing, silently)
        raise ConfigError(
            f"--idf is read by --weights tfidf or keywords only, not {weights}; pass one of "
            "them, or drop --idf"
        )
    if idf is None and weights in idf_weights:
        warn(
            f"--weights {weights} without --idf uses the shipped Chinese IDF table (jieba's): "
            "tokens it lacks, English words among them, all get its median weight (as tf "
            "gives); build a table for your corpus with `neardup idf build`"
        )
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
    check_outputs([("--output", output)], files)  # before anything is read
    width = bits // 4
    n = n_empty = n_chars = n_feat = 0
    t0 = time.perf_counter()
    with (
        read_corpus(
            files, fmt=input_fmt, text_field=text_field, id_field=id_field, encoding=encoding
        ) as corpus,
        _csv_output(output) as out,
    ):
        ids_all, texts_all = corpus.ids, corpus.texts
        if out is not None:
            out.write("id,fingerprint\n")
        for lo in range(0, len(texts_all), BATCH):
            ids = ids_all[lo : lo + BATCH]
            texts = texts_all[lo : lo + BATCH]
            b = fp.fingerprint_batch(
                texts, workers=default_workers() if workers is None else workers
            )
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
                out.writelines(f"{i},{h}\n" for i, h in zip(csv_fields(ids), hexes, strict=True))
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
        rows.append(("output", "<stdout>" if output == "-" else output))
    for r in rows:
        table.add_row(*r)
    from .dedup_cmd import _is_stdout

    # stdout carries the CSV with -o - (or /dev/stdout, or the file stdout was sent to)
    Console(stderr=output is not None and _is_stdout(output)).print(table)


@contextlib.contextmanager
def _csv_output(output: str | None) -> Iterator[IO[str] | None]:
    """The CSV output: None without ``--output``, stdout for ``-``, else an atomic file."""
    if not output:
        yield None
        return
    if output == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    from ..io import atomic_open

    with atomic_open(output, "w", encoding="utf-8", newline="") as fh:
        yield fh


def idf_build_cmd(
    corpus: _Inputs,
    output: Annotated[
        str, typer.Option("--output", "-o", help="IDF table to write (token<TAB>idf)")
    ],
    features: Annotated[
        str, typer.Option(help="auto (jieba for Chinese, words otherwise)|words|jieba")
    ] = "auto",
    min_df: Annotated[int, typer.Option(help="drop tokens in fewer documents")] = 1,
    input_fmt: _InputFormat = None,
    text_field: _TextField = "text",
    encoding: _Encoding = "utf-8",
) -> None:
    """Build an IDF table (idf = ln(N / df), jieba's definition) for --weights tfidf."""
    from ..errors import ConfigError
    from ..text.tokenize import detect_lang, jieba_words, words
    from ..text.weights import build_idf

    if features not in ("auto", "words", "jieba"):
        raise ConfigError(f"--features must be auto, words or jieba, got {features!r}")
    from ..io import check_outputs

    check_outputs([("--output", output)], corpus)  # before anything is read

    def tokens() -> Iterator[list[str]]:
        for _id, text in iter_docs(corpus, fmt=input_fmt, text_field=text_field, encoding=encoding):
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
