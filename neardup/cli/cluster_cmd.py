"""``neardup cluster``: status, add-node, remove-node and rebalance of a cluster file.

* ``neardup cluster status --cluster FILE`` lists every node: up or down, documents, ring
  share, index settings.
* ``neardup cluster add-node NAME URL [--weight W] --cluster FILE`` refuses a node whose index
  settings differ, records the change in a journal, saves the new cluster file with the epoch
  + 1, tells every node the new membership (a router still on the old ring is then refused
  and reloads the file) and moves the ranges the new node takes (copies, then drops).
* ``neardup cluster remove-node NAME --cluster FILE`` likewise; the removed node is read from
  until its documents are on their new nodes.
* ``neardup cluster router --cluster FILE --port 8090`` serves the single-node HTTP API in
  front of the cluster (``neardup.Client`` works against it unchanged).
* ``neardup cluster rebalance --cluster FILE`` resumes an interrupted change (the journal next
  to the cluster file), or else puts every document on exactly its R nodes (a repair after
  writes that went elsewhere while a node was down).

See docs/cluster.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from .auth_options import (
    NO_AUTH,
    ROUTER_READS,
    TOKEN,
    TOKEN_FILE,
    open_reads_option,
    read_token_option,
)

__all__ = ["register"]

_CLUSTER = typer.Option(..., "--cluster", "-c", help="The cluster file (TOML, or .json).")
_TOKEN = typer.Option(
    None, "--token", envvar="NEARDUP_TOKEN", help="Write token of the nodes (prefer the env var)."
)
_NS = typer.Option("default", "--namespace", "-n", help="Namespace to act on.")
_JOURNAL = typer.Option(
    None, "--journal", help="Journal file (default: the cluster file + .rebalance.journal)."
)


def _journal(cluster: Path, journal: Path | None) -> Path:
    return (
        journal if journal is not None else cluster.with_name(cluster.name + ".rebalance.journal")
    )


def _report(report: object, as_json: bool) -> None:
    d = report.to_dict()  # type: ignore[attr-defined]
    if as_json:
        typer.echo(json.dumps(d))
        return
    typer.echo(
        f"documents {d['documents']}, copies written {d['copied']}, copies deleted {d['deleted']}"
        + (
            ""
            if d["complete"]
            else f"; INCOMPLETE (unreachable: {', '.join(d['skipped_nodes']) or 'a target'}): run `neardup cluster rebalance` again"
        )
    )
    if not d["complete"]:
        raise typer.Exit(8)


def status_cmd(
    cluster: Path = _CLUSTER,
    namespace: str = _NS,
    as_json: bool = typer.Option(
        False, "--json", help="One JSON object: the cluster's epoch, replicas, vnodes, nodes."
    ),
    token: str | None = _TOKEN,
) -> None:
    """Show every node: up/down, epoch, documents, ring share, index settings (read only).
    Exit 8 when a node does not answer, 4 when every node answers and one lacks the
    namespace."""
    from ..cluster.client import ClusterClient
    from ..cluster.config import ClusterConfig
    from ..cluster.rebalancing import check_current

    config = ClusterConfig.load(cluster)
    # read only: a stale file is refused, a token the nodes refuse is their error (exit 10),
    # and no node is told this file's membership (status pushed it, a same-epoch edit too)
    epochs = check_current(config, token=token, timeout=5.0)
    with ClusterClient(config, namespace=namespace, timeout=5.0, token=token, join=False) as cc:
        rows = cc.status()
    for r in rows:
        r["epoch"] = epochs.get(r["name"])
    journal = _journal(cluster, None)
    in_progress = str(journal) if journal.exists() else None
    if as_json:
        typer.echo(json.dumps({
            "epoch": config.epoch, "replicas": config.replicas, "vnodes": config.vnodes,
            "nodes": rows, "rebalance_journal": in_progress,
        }))  # fmt: skip
    else:
        typer.echo(
            f"epoch {config.epoch}, replicas {config.replicas}, vnodes {config.vnodes}, "
            f"{len(rows)} nodes"
        )
        for r in rows:
            state = "up  " if r["up"] else "DOWN"
            if r["up"] and not r["namespace"]:
                extra = f"documents {r['documents']:>10}  no namespace {namespace!r}"
            elif r["up"]:
                index = ", ".join(f"{k} {v}" for k, v in r["index"].items())
                behind = "" if r["epoch"] == config.epoch else f" (node at epoch {r['epoch']})"
                extra = f"documents {r['documents']:>10}  index {index}{behind}"
            else:
                extra = r.get("error", "")
            typer.echo(
                f"{r['name']:<16} {state} weight {r['weight']:<5g} share {r['share']:6.2%}  "
                f"{r['url']:<28} {extra}"
            )
        if in_progress:
            typer.echo(f"a rebalance is in progress ({journal}): run `neardup cluster rebalance`")
    if not all(r["up"] for r in rows):
        raise typer.Exit(8)
    if not all(r["namespace"] for r in rows):  # every node answered; a namespace is missing
        raise typer.Exit(4)


def add_node_cmd(
    name: str = typer.Argument(
        ..., help="The new node's name (its ring identity).", metavar="NAME"
    ),
    url: str = typer.Argument(..., help="Its base URL, e.g. http://10.0.0.4:8080.", metavar="URL"),
    weight: float = typer.Option(1.0, "--weight", help="Relative capacity (> 0)."),
    cluster: Path = _CLUSTER,
    token: str | None = _TOKEN,
    namespace: str = _NS,
    journal: Path | None = _JOURNAL,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Add a node and move to it the ranges it takes over."""
    from ..cluster.config import ClusterConfig, NodeSpec
    from ..cluster.rebalancing import (
        check_current,
        check_index_settings,
        rebalance,
        start_journal,
    )

    old = ClusterConfig.load(cluster)
    spec = NodeSpec(name, url, weight)
    new = old.with_node(spec)
    jpath = _journal(cluster, journal)
    _refuse_if_in_progress(jpath)
    check_current(old, token=token)  # (a stale file: refused before it is rewritten)
    check_index_settings(old, spec, namespace, token=token)
    start_journal(jpath, new, old)
    new.save(cluster)
    report = rebalance(new, previous=old, journal=jpath, token=token, namespace=namespace)
    _report(report, as_json)


def remove_node_cmd(
    name: str = typer.Argument(..., help="The node to remove.", metavar="NAME"),
    cluster: Path = _CLUSTER,
    token: str | None = _TOKEN,
    namespace: str = _NS,
    journal: Path | None = _JOURNAL,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Remove a node: its documents are copied to their new nodes, then deleted from it."""
    from ..cluster.config import ClusterConfig
    from ..cluster.rebalancing import check_current, rebalance, start_journal

    old = ClusterConfig.load(cluster)
    new = old.without_node(name)
    jpath = _journal(cluster, journal)
    _refuse_if_in_progress(jpath)
    check_current(old, token=token)  # (a stale file: refused before it is rewritten)
    start_journal(jpath, new, old)
    new.save(cluster)
    report = rebalance(new, previous=old, journal=jpath, token=token, namespace=namespace)
    _report(report, as_json)


def rebalance_cmd(
    cluster: Path = _CLUSTER,
    token: str | None = _TOKEN,
    namespace: str = _NS,
    journal: Path | None = _JOURNAL,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Resume an interrupted change, or put every document on exactly its R nodes."""
    from ..cluster.config import ClusterConfig
    from ..cluster.rebalancing import rebalance

    jpath = _journal(cluster, journal)
    _check_journal_path(jpath)
    config = ClusterConfig.load(cluster)
    if jpath.exists():
        typer.echo(f"resuming the change recorded in {jpath}", err=True)
    _report(rebalance(config, journal=jpath, token=token, namespace=namespace), as_json)


def router_cmd(
    cluster: Path = _CLUSTER,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind."),
    port: int = typer.Option(8090, "--port", help="Port to bind."),
    token: str | None = TOKEN,
    read_token: str | None = read_token_option(ROUTER_READS),
    token_file: Path | None = TOKEN_FILE,
    open_reads: bool = open_reads_option(ROUTER_READS),
    no_auth: bool = NO_AUTH,
    node_token: str | None = typer.Option(
        None,
        "--node-token",
        envvar="NEARDUP_NODE_TOKEN",
        show_envvar=True,
        help="The token the router sends to the nodes (one that may write every namespace "
        "there); default: --token.",
    ),
    timeout: float = typer.Option(
        5.0, "--timeout", help="Seconds a request to one node may take before the node is down."
    ),
    slow_after: float = typer.Option(
        0.25,
        "--slow-after",
        help="Seconds without an answer after which a node is routed around (hints kept).",
    ),
    min_copies: int | None = typer.Option(
        None, "--min-copies", help="Copies fsynced before a write is acknowledged (default R)."
    ),
    lease_ttl: float = typer.Option(
        10.0, "--lease-ttl", help="Seconds the namespace write lease outlives the last write."
    ),
    max_body_bytes: str = typer.Option(
        "32MiB", "--max-body-bytes", help="Larger bodies are answered 413 while being read."
    ),
    max_batch: int = typer.Option(10_000, "--max-batch", help="More documents: 413."),
    max_namespaces: int = typer.Option(
        1024, "--max-namespaces", help="Namespace clients kept (least recently used dropped)."
    ),
    log_level: str = typer.Option("info", "--log-level"),
) -> None:
    """Serve the single-node HTTP API in front of the cluster (one writer per namespace)."""
    import socket

    import uvicorn

    from ..cluster.config import ClusterConfig
    from ..cluster.router import create_router
    from ..errors import ConfigError
    from ..service.auth import authenticator_for
    from ..service.config import parse_size
    from ..service.server import LOG_LEVELS
    from .auth_options import auth_settings, require_a_token

    token, read_token = auth_settings(token, read_token, token_file, open_reads, no_auth)
    require_a_token(
        any(t is not None for t in (token, read_token, token_file)),
        no_auth,
        "neardup cluster router",
    )
    ClusterConfig.load(cluster)  # a bad file is refused before the port is bound
    if not 0 <= port <= 65535:  # (as neardup serve refuses them; uvicorn took 70000 mod 2**16)
        raise ConfigError(f"port must be an integer in [0, 65535], got {port!r}")
    if log_level.lower() not in LOG_LEVELS:
        raise ConfigError(f"--log-level must be debug, info, warning or error, got {log_level!r}")
    log_level = log_level.lower()
    if no_auth:
        import logging

        logging.getLogger("neardup.cluster").warning(
            "--no-auth: the router serves reads and writes without authentication on %s:%d",
            host,
            port,
        )
    app = create_router(
        cluster,
        auth=authenticator_for(token, read_token, token_file, open_reads=open_reads),
        node_token=node_token or token,
        timeout=timeout,
        slow_after=slow_after,
        min_copies=min_copies,
        lease_ttl=lease_ttl,
        max_body_bytes=parse_size(max_body_bytes),
        max_batch=max_batch,
        max_namespaces=max_namespaces,
        writer_id=f"router@{socket.gethostname()}:{port}",
    )
    uvicorn.run(app, host=host, port=port, log_level=log_level)


def _check_journal_path(jpath: Path) -> None:
    """A journal path that cannot be a file is refused before anything is changed (a missing
    folder was a traceback; a folder read as "a rebalance is in progress")."""
    from ..errors import ConfigError

    if jpath.is_dir():
        raise ConfigError(f"--journal {jpath}: a folder; pass a file path (it is made)")
    if not jpath.parent.is_dir():
        raise ConfigError(
            f"--journal {jpath}: the folder {jpath.parent} does not exist; create it first"
        )


def _refuse_if_in_progress(jpath: Path) -> None:
    from ..errors import ConfigError

    _check_journal_path(jpath)
    if jpath.exists():
        raise ConfigError(
            f"a rebalance is in progress ({jpath}); finish it with `neardup cluster rebalance` first"
        )


def register(app: typer.Typer) -> None:
    """Add the ``cluster`` command group to the main app."""
    group = typer.Typer(
        help="Several `neardup serve` nodes on a consistent-hash ring (docs/cluster.md).",
        no_args_is_help=True,
    )
    group.command("status")(status_cmd)
    group.command("add-node")(add_node_cmd)
    group.command("remove-node")(remove_node_cmd)
    group.command("rebalance")(rebalance_cmd)
    group.command("router")(router_cmd)
    app.add_typer(group, name="cluster")
