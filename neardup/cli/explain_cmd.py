"""``neardup explain A B``: a thin shell over :func:`neardup.review.explain.explain` (two texts,
two ids of a corpus, or two ids of an online store). Errors are NeardupError subclasses;
``cli.main`` maps them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer


def explain_command(
    a: Annotated[str, typer.Argument(help="Text A (an id with --corpus or --store).", metavar="A")],
    b: Annotated[str, typer.Argument(help="Text B (an id with --corpus or --store).", metavar="B")],
    corpus: Annotated[
        list[str] | None,
        typer.Option(
            "--corpus",
            help="Read A and B as ids of this corpus (files, globs; as neardup dedup reads them).",
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option("--store", help="Read A and B as ids of this online store (data directory)."),
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option(help="The store's namespace (a served data directory; default: default)."),
    ] = None,
    run: Annotated[
        str | None,
        typer.Option(
            "--run",
            help="Use a dedup run's settings (its summary.json, or the folder holding it).",
        ),
    ] = None,
    threshold: Annotated[
        float | None, typer.Option(help="As neardup dedup --threshold (overrides --run's).")
    ] = None,
    keep: Annotated[
        Literal["first", "longest", "none"] | None,
        typer.Option(help="As neardup dedup --keep (overrides --run's)."),
    ] = None,
    input_format: Annotated[str | None, typer.Option(help="--corpus's format.")] = None,
    text_field: Annotated[str, typer.Option(help="--corpus's text field.")] = "text",
    id_field: Annotated[str | None, typer.Option(help="--corpus's id field.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Explain a pair: the decision and the rule that made it, the candidate channels, the keep
    policy and the token alignment."""
    from ..errors import ConfigError
    from ..review.explain import config_from_summary, explain, explain_in_corpus
    from ..rules.config import DedupConfig

    if corpus and store:
        raise ConfigError("pass --corpus or --store, not both")
    if namespace is not None and not store:
        raise ConfigError("--namespace needs --store")
    overrides: dict[str, Any] = {}
    if threshold is not None:
        overrides["threshold"] = threshold
    if keep is not None:
        overrides["keep"] = keep
    config: DedupConfig | None = None
    if run is not None:
        config = config_from_summary(_read_summary(run))
    if store:
        if run is not None:
            raise ConfigError("--store explains with the store's own settings; drop --run")
        result = _explain_stored(store, namespace, a, b, overrides)
    elif corpus:
        result = explain_in_corpus(
            corpus, a, b, config=config, fmt=input_format, text_field=text_field,
            id_field=id_field, **overrides,
        )  # fmt: skip
    else:
        result = explain(a, b, config=config, **overrides)
    if as_json:
        json.dump(result.to_dict(), sys.stdout, ensure_ascii=False, indent=2)
        sys.stdout.write("\n")
    else:
        print(result.to_text())


def _read_summary(path: str) -> dict[str, Any]:
    from ..errors import InputError

    p = Path(path)
    if p.is_dir():
        p = p / "summary.json"
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(
            f"--run: no summary at {p}; pass the --summary-json file of a neardup dedup run "
            "(or the folder holding summary.json)"
        ) from None
    except (OSError, ValueError) as exc:
        raise InputError(f"--run: cannot read {p}: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"--run: {p} is not a dedup summary (a JSON object)")
    return data


def _explain_stored(
    data: str, namespace: str | None, id_a: str, id_b: str, overrides: dict[str, Any]
) -> Any:
    """The two stored documents through the store's public API (opened, read with ``get``,
    closed; nothing is written by this command), explained with the store's settings."""
    from ..errors import IndexStateError, NotFoundError
    from ..online import Deduplicator
    from ..review.explain import explain_with_store

    root = Path(data)
    nsdir = root / "namespaces"
    if nsdir.is_dir():  # a served data directory: one store per namespace
        path = nsdir / (namespace or "default")
        if not path.is_dir():
            raise NotFoundError(f"namespace {namespace or 'default'!r} not found in {nsdir}")
    elif namespace is not None:
        raise NotFoundError(f"{root} has no namespaces/ folder; drop --namespace")
    else:
        path = root
    if not (path / "config.json").exists():
        raise NotFoundError(f"no store at {path} (no config.json); check --store")
    try:
        d = Deduplicator.open(str(path), verify_meta=False)
    except IndexStateError as exc:  # a running server holds it: it explains itself
        raise IndexStateError(f"{exc}; a served store answers POST /v1/explain") from None
    with d:
        return explain_with_store(d, {"id": id_a}, {"id": id_b}, **overrides)


def register(app: typer.Typer) -> None:
    """Add ``neardup explain`` to the app."""
    app.command("explain")(explain_command)
