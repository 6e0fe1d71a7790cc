"""``opskit sandbox``: real Apache Kafka clusters (KRaft) on this machine, and traffic."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from opskit.adapters.files.config_file import OpskitConfig
from opskit.cli.common import Output, OutputOpt, TimeoutOpt, emit, stdout
from opskit.core.connection import MECHANISMS, ConnectionConfig
from opskit.errors import KafkaUnavailableError, UsageError
from opskit.sandbox.cluster import Sandbox, SandboxState, list_sandboxes, parse_rack, parse_racks
from opskit.sandbox.dist import DEFAULT_VERSION
from opskit.sandbox.security import ADMIN, context_names, validate_mechanisms, write_contexts

app = typer.Typer(help="Local real Kafka clusters (KRaft, JVM processes on 127.0.0.1).",
                  no_args_is_help=True)

NameOpt = Annotated[str, typer.Option("--name", "-n", help="sandbox name")]


@app.command("up")
def up(
    brokers: Annotated[int | None, typer.Option("--brokers", help="1 or 3 nodes [default: 1, or as existing]", show_default=False)] = None,
    kafka_version: Annotated[str | None, typer.Option("--kafka-version", help=f"3.7 (HIP-30), 4.x, or X.Y.Z [default: {DEFAULT_VERSION}, or as existing]", show_default=False)] = None,
    name: NameOpt = "default",
    port: Annotated[int | None, typer.Option("--port", min=1024, max=64000, help="first broker port (default 9092)")] = None,
    no_context: Annotated[bool, typer.Option("--no-context", help="do not write an opskit context")] = False,
    security: Annotated[str | None, typer.Option(
        "--security", help="plaintext, sasl_plaintext or sasl_ssl (SASL PLAIN + SCRAM-SHA-256/512, "
        "ACLs enforced, admin and monitor contexts) [default: plaintext, or as existing]",
        show_default=False)] = None,
    sasl_mechanism: Annotated[str, typer.Option(
        "--sasl-mechanism", help="mechanism the written contexts use: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
    )] = "PLAIN",
    quorum: Annotated[str | None, typer.Option(
        "--quorum", help="controller quorum: static (controller.quorum.voters, as HIP-30) or "
        "dynamic (formatted --standalone; Kafka 3.9+) [default: static, or as existing]",
        show_default=False)] = None,
    sasl_mechanisms: Annotated[str, typer.Option(
        "--sasl-mechanisms", help="mechanisms the listener enables (new sandbox; PLAIN required)",
    )] = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    racks: Annotated[str | None, typer.Option(
        "--racks", help="broker.rack of the nodes: a,b,c puts node 0 in a, 1 in b, 2 in c, "
        "cycling when there are more nodes than racks (nodes added later continue the cycle); "
        "a,a,b is one rack per node [default: no racks, or as existing]",
        show_default=False)] = None,
    log_dirs: Annotated[int | None, typer.Option(
        "--log-dirs", min=1, max=4, help="log directories per node (JBOD: data, data-1, ...) "
        "[default: 1, or as existing]", show_default=False)] = None,
) -> int:
    """Start a cluster (idempotent). Node 0 is broker+controller; others are brokers."""
    mechanism = sasl_mechanism.upper()
    if mechanism not in MECHANISMS:
        raise UsageError(f"--sasl-mechanism must be one of {', '.join(MECHANISMS)}, not {sasl_mechanism!r}")
    enabled = validate_mechanisms(sasl_mechanisms)
    if mechanism not in enabled:
        raise UsageError(f"--sasl-mechanism {mechanism} is not in --sasl-mechanisms {sasl_mechanisms}")
    sb = Sandbox(name)
    st, what = sb.up(brokers=brokers, version=kafka_version, port=port, security=security,
                     quorum=quorum, sasl_mechanisms=enabled,
                     racks=parse_racks(racks) if racks is not None else None,
                     log_dirs=log_dirs)
    contexts = [] if no_context else write_contexts(sb.name, st.bootstrap, sb.security(st), mechanism)
    stdout().print(f"sandbox {name}: {what}; Kafka {st.version}, {st.brokers} broker(s), "
                   f"{st.security}, {st.quorum} quorum, bootstrap {st.bootstrap}"
                   + (f", racks {_racks_of(st)}" if st.racks else "")
                   + (f", {st.log_dirs} log dirs per node" if st.log_dirs > 1 else "")
                   + (f", context {' and '.join(contexts)}" if contexts else ""))
    return 0


@app.command("status")
def status(name: NameOpt = "default", output: OutputOpt = Output.table) -> int:
    """Show nodes, pids and ports. Exit 0 if all nodes run, 3 otherwise."""
    data = Sandbox(name).status()

    def table(c: Console) -> None:
        c.print(f"sandbox {data['name']}: Kafka {data['kafka_version']}, bootstrap {data['bootstrap']}, "
                f"{'running' if data['running'] else 'NOT running'}")
        for n in data["nodes"]:
            c.print(f"  node {n['node_id']} ({n['roles']})"
                    + (f" rack {n['rack']}" if n["rack"] is not None else "")
                    + f" port {n['port']} pid {n['pid']} {'up' if n['running'] else 'down'}",
                    highlight=False)

    emit(data, output, table)
    return 0 if data["running"] else 3


@app.command("list")
def list_(output: OutputOpt = Output.table) -> int:
    """List sandboxes on this machine."""
    names = list_sandboxes()
    emit(names, output, lambda c: c.print("\n".join(names) or "no sandboxes"))
    return 0


@app.command("down")
def down(
    name: NameOpt = "default",
    keep: Annotated[bool, typer.Option("--keep", help="keep data for the next 'up'")] = False,
) -> int:
    """Stop the sandbox's own processes (by pid) and remove its data unless --keep."""
    from opskit.sandbox.load import stop_detached_load

    stop_detached_load(name)
    what = Sandbox(name).down(keep=keep)
    if not keep:
        cfg = OpskitConfig.load()
        gone = [ctx for ctx in context_names(name) if ctx in cfg.contexts]
        for ctx in gone:
            del cfg.contexts[ctx]
            if cfg.current_context == ctx:
                cfg.current_context = None
        if gone:
            cfg.save()
    stdout().print(f"sandbox {name}: {what}")
    return 0


@app.command("stop-node")
def stop_node(
    node: Annotated[int, typer.Argument(help="node id")],
    name: NameOpt = "default",
    kill: Annotated[bool, typer.Option("--kill", help="SIGKILL instead of a clean shutdown")] = False,
) -> int:
    """Stop one node (failure drills: under-replicated and offline partitions)."""
    Sandbox(name).stop_node(node, kill=kill)
    stdout().print(f"node {node} stopped")
    return 0


@app.command("start-node")
def start_node(node: Annotated[int, typer.Argument(help="node id")], name: NameOpt = "default") -> int:
    """Start a stopped node again."""
    Sandbox(name).start_node(node)
    stdout().print(f"node {node} running")
    return 0


@app.command("set-rack")
def set_rack(
    node: Annotated[int, typer.Argument(help="node id")],
    rack: Annotated[str, typer.Argument(help="its rack (broker.rack)")],
    name: NameOpt = "default",
) -> int:
    """Put a node in a rack: rewrite its broker.rack and restart it (idempotent). One node
    at a time: check 'opskit health' (nothing under-replicated) before the next."""
    wanted = parse_rack(rack)
    changed = Sandbox(name).set_rack(node, wanted)
    stdout().print(f"node {node} in rack {wanted}" + ("" if changed else " already"),
                   highlight=False)
    return 0


@app.command("add-node")
def add_node(
    name: NameOpt = "default",
    role: Annotated[str, typer.Option(
        "--role", help="broker (broker-only node; any quorum) or controller (broker+controller "
        "that joins a dynamic quorum as an observer, then becomes a voter once caught up)")] = "broker",
    node_id: Annotated[int | None, typer.Option(
        "--node-id", min=0, max=2_000_000_000, help="id of the new node [default: highest + 1]; "
        "an existing id is started if down, else left alone", show_default=False)] = None,
    rack: Annotated[str | None, typer.Option(
        "--rack", help="broker.rack of the new node [default: the next of the sandbox's "
        "racks, none without]", show_default=False)] = None,
) -> int:
    """Add a node to a running sandbox (idempotent). A static quorum refuses controllers."""
    from opskit.sandbox.scale import add_node as add
    from opskit.sandbox.scale import promote_controller

    sb = Sandbox(name)
    node = add(sb, role, node_id, rack=parse_rack(rack) if rack is not None else None)
    promoted = role == "controller" and promote_controller(sb, node.node_id)
    stdout().print(f"node {node.node_id} ({node.roles}) running on port {node.port}"
                   + (f" in rack {node.rack}" if node.rack is not None else "")
                   + ("; now a voter" if promoted else ""))
    return 0




@app.command("load")
def load(
    rate: Annotated[float, typer.Option("--rate", min=1, max=100000, help="events per second, all topics")] = 200,
    duration: Annotated[float, typer.Option("--duration", min=0, max=7 * 86400, help="seconds (0 = until stopped; at most 7 days)")] = 30,
    name: NameOpt = "default",
    bootstrap_server: Annotated[str | None, typer.Option("--bootstrap-server", "-b", help="instead of the sandbox")] = None,
    detach: Annotated[bool, typer.Option("--detach", help="run in the background; 'sandbox down' stops it")] = False,
    seed: Annotated[int | None, typer.Option("--seed", help="random seed for reproducible keys")] = None,
    timeout: TimeoutOpt = 10.0,
) -> int:
    """Produce HIP-30 envelope events and run the HIP-30 consumer groups.

    analytics-ingest, llm-metrics and dead-letter-monitor keep up; billing-agg lags
    (30% speed); audit-archive stops after 3 s with committed offsets; rpc-billing
    never commits on odd partitions.
    """
    from opskit.sandbox.load import LoadRunner, start_detached_load

    if bootstrap_server:
        conn = ConnectionConfig(bootstrap_server, client_id="opskit-load")
    else:  # a secured sandbox: its admin (the load produces to and consumes every topic)
        conn = Sandbox(name).connection(ADMIN, client_id="opskit-load")
    _check_reachable(conn, timeout)
    if detach:
        pid = start_detached_load(name, conn.bootstrap, rate, duration,
                                  secured=bootstrap_server is None and conn.password is not None)
        stdout().print(f"load running in the background (pid {pid}); stop it with 'opskit sandbox down'")
        return 0
    stats = LoadRunner(conn.bootstrap, rate, seed=seed, conn=conn).run(duration)
    stdout().print(f"produced: {dict(sorted(stats.produced.items()))}")
    stdout().print(f"consumed: {dict(sorted(stats.consumed.items()))}")
    for e in stats.errors[:5]:
        stdout().print(f"[yellow]{e}[/yellow]")
    if duration > 0 and not any(stats.produced.values()):
        raise KafkaUnavailableError(f"no event was produced to {conn.bootstrap} in {duration:g}s")
    return 0 if not stats.errors else 1


def _racks_of(st: SandboxState) -> str:
    """``0:a 1:b 2:a``: each node's rack."""
    return " ".join(f"{n.node_id}:{n.rack or '-'}" for n in st.nodes)


def _check_reachable(conn: ConnectionConfig, timeout: float) -> None:
    """Fail at once (exit 3) when the cluster does not answer, rather than run a load
    that produces nothing."""
    errs = conn.validate()
    if errs:
        raise UsageError(f"--bootstrap-server: {errs[0]}")
    from opskit.adapters.kafka.admin.client import KafkaAdmin

    with KafkaAdmin(conn, timeout=timeout) as admin:
        admin.metadata()
