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

from .auth_options import NO_AUTH, OPEN_READS, READ_TOKEN, TOKEN, TOKEN_FILE

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
    as_json: bool = typer.Option(False, "--json", help="One JSON object per node."),
    token: str | None = _TOKEN,
) -> None:
    """Show every node: up/down, documents, ring share, index settings."""
    from ..cluster.client import ClusterClient

    with ClusterClient(cluster, namespace=namespace, timeout=5.0, token=token) as cc:
        rows = cc.status()
        typer.echo(
            f"epoch {cc.config.epoch}, replicas {cc.replicas}, vnodes {cc.config.vnodes}, "
            f"{len(rows)} nodes"
        )
    for r in rows:
        if as_json:
            typer.echo(json.dumps(r))
            continue
        state = "up  " if r["up"] else "DOWN"
        extra = (
            f"documents {r['documents']:>10}  index {r['index']}" if r["up"] else r.get("error", "")
        )
        typer.echo(
            f"{r['name']:<16} {state} weight {r['weight']:<5g} share {r['share']:6.2%}  {r['url']:<28} {extra}"
        )
    journal = _journal(cluster, None)
    if journal.exists():
        typer.echo(f"a rebalance is in progress ({journal}): run `neardup cluster rebalance`")


def add_node_cmd(
    name: str = typer.Argument(..., help="The new node's name (its ring identity)."),
    url: str = typer.Argument(..., help="Its base URL, e.g. http://10.0.0.4:8080."),
    weight: float = typer.Option(1.0, "--weight", help="Relative capacity (> 0)."),
    cluster: Path = _CLUSTER,
    token: str | None = _TOKEN,
    namespace: str = _NS,
    journal: Path | None = _JOURNAL,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Add a node and move to it the ranges it takes over."""
    from ..cluster.config import ClusterConfig, NodeSpec
    from ..cluster.rebalancing import check_index_settings, rebalance, start_journal

    old = ClusterConfig.load(cluster)
    spec = NodeSpec(name, url, weight)
    new = old.with_node(spec)
    check_index_settings(old, spec, namespace, token=token)
    jpath = _journal(cluster, journal)
    _refuse_if_in_progress(jpath)
    start_journal(jpath, new, old)
    new.save(cluster)
    _report(rebalance(new, journal=jpath, token=token, namespace=namespace), as_json)


def remove_node_cmd(
    name: str = typer.Argument(..., help="The node to remove."),
    cluster: Path = _CLUSTER,
    token: str | None = _TOKEN,
    namespace: str = _NS,
    journal: Path | None = _JOURNAL,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Remove a node: its documents are copied to their new nodes, then deleted from it."""
    from ..cluster.config import ClusterConfig
    from ..cluster.rebalancing import rebalance, start_journal

    old = ClusterConfig.load(cluster)
    new = old.without_node(name)
    jpath = _journal(cluster, journal)
    _refuse_if_in_progress(jpath)
    start_journal(jpath, new, old)
    new.save(cluster)
    _report(rebalance(new, journal=jpath, token=token, namespace=namespace), as_json)


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
    config = ClusterConfig.load(cluster)
    if jpath.exists():
        typer.echo(f"resuming the change recorded in {jpath}", err=True)
    _report(rebalance(config, journal=jpath, token=token, namespace=namespace), as_json)


def router_cmd(
    cluster: Path = _CLUSTER,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind."),
    port: int = typer.Option(8090, "--port", help="Port to bind."),
    token: str | None = TOKEN,
    read_token: str | None = READ_TOKEN,
    token_file: Path | None = TOKEN_FILE,
    open_reads: bool = OPEN_READS,
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
    from ..service.auth import authenticator_for
    from ..service.config import parse_size
    from .auth_options import auth_settings, require_a_token

    token, read_token = auth_settings(token, read_token, token_file, open_reads, no_auth)
    require_a_token(
        any(t is not None for t in (token, read_token, token_file)),
        no_auth,
        "neardup cluster router",
    )
    ClusterConfig.load(cluster)  # a bad file is refused before the port is bound
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


def _refuse_if_in_progress(jpath: Path) -> None:
    from ..errors import ConfigError

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
