"""``opskit topics diff|apply``: the topic registry as code."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from opskit.adapters.files.registry_file import load_registry
from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.cli import exits
from opskit.cli.common import (
    BootstrapOpt,
    ContextOpt,
    ExecuteOpt,
    Output,
    OutputOpt,
    RegistryArg,
    TimeoutOpt,
    connect,
    emit,
    stderr,
)
from opskit.core.registry import ActualTopic, ChangeKind, Registry, TopicPlan, plan_topic_changes
from opskit.errors import InvisibleError, NotAuthorisedError, RefusedError, UnsupportedError

app = typer.Typer(help="Compare and reconcile topics with a registry (HIP-30 by default).",
                  no_args_is_help=True)



def read_actual(admin: KafkaAdmin, registry: Registry, notes: list[str] | None = None
                ) -> dict[str, ActualTopic]:
    """The cluster's side of the registry's topics. A registry topic the principal may not
    describe is UNKNOWN (InvisibleError, naming the ACL), never "missing"; configs it may
    not describe are not compared (a line in ``notes`` says so)."""
    md = admin.metadata()
    absent = [t.name for t in registry.topics if t.name not in md.topics]
    if absent:
        hidden = [t for t in absent if t in admin.metadata(t).denied_topics]
        if hidden:
            raise InvisibleError(
                f"topic {hidden[0]!r} is not visible to {admin.conn.principal}"
                f"{f' (nor {len(hidden) - 1} more)' if len(hidden) > 1 else ''}: it needs the "
                "Describe ACL on the registry's topics; missing or not cannot be told")
    wanted = [t.name for t in registry.topics if t.name in md.topics]
    try:
        configs = admin.topic_configs(wanted)
    except NotAuthorisedError:
        if notes is not None:
            notes.append(f"config drift not judged: {admin.conn.principal} has no DescribeConfigs "
                         "ACL on the topics (partitions and replication factor still are)")
        return {name: ActualTopic(name, len(parts), len(parts[0].replicas) if parts else 0,
                                  configs_known=False)
                for name, parts in md.topics.items()}
    silent = sorted(t for t in wanted if not configs.get(t))
    if silent:
        # Apache Kafka reports every config (defaults included); an empty answer means the
        # broker does not report topic configs (Tansu 0.6): drift cannot be judged
        where = admin.capabilities.broker or admin.conn.bootstrap
        raise UnsupportedError(
            f"the broker at {where} answered DescribeConfigs for topic {silent[0]!r} without any "
            "config entries: it does not report topic configs, so config drift cannot be judged")
    out = {}
    for name, parts in md.topics.items():
        rf = len(parts[0].replicas) if parts else 0
        out[name] = ActualTopic(name, len(parts), rf, configs.get(name, {}))
    return out


def render(console: Console, plan: TopicPlan, executed: bool | None) -> None:
    if plan.in_sync:
        console.print("[green]in sync with the registry[/green]")
        return
    t = Table(box=None, header_style="bold")
    for column in ("TOPIC", "CHANGE", "DETAIL", "APPLY"):
        t.add_column(column)
    for c in plan.changes:
        if c.kind.applicable:
            action = "applied" if executed else ("would apply" if executed is False else "yes")
        elif c.kind is ChangeKind.REFUSED_REDUCE_PARTITIONS:
            action = "[red]refused[/red]"
        else:
            action = "report only"
        t.add_row(c.topic, c.kind.value, c.detail, action)
    console.print(t)


def diff(
    registry: RegistryArg = None,
    output: OutputOpt = Output.table,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 10.0,
) -> int:
    """Show drift between the cluster and the registry. Exit 0 in sync, 1 drift."""
    reg = load_registry(registry)
    notes: list[str] = []
    with connect(bootstrap_server, context, timeout) as admin:
        plan = plan_topic_changes(reg, read_actual(admin, reg, notes))
    emit({"in_sync": plan.in_sync, "changes": [c.to_dict() for c in plan.changes],
          "notes": notes}, output, lambda con: render(con, plan, None))
    for note in notes:
        stderr().print(f"note: {note}", highlight=False)
    return exits.OK if plan.in_sync else exits.WARNING


def apply(
    registry: RegistryArg = None,
    execute: ExecuteOpt = False,
    output: OutputOpt = Output.table,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 30.0,
) -> int:
    """Create missing topics, add partitions and fix configs. Dry run unless --execute.

    Never reduces partitions or deletes topics. Exit 5 if a change was refused.
    """
    reg = load_registry(registry)
    notes: list[str] = []
    with connect(bootstrap_server, context, timeout) as admin:
        plan = plan_topic_changes(reg, read_actual(admin, reg, notes))
        if execute:
            creates: list[tuple[str, int, int, dict[str, str]]] = []
            parts: dict[str, int] = {}
            cfgs: dict[str, dict[str, str]] = {}
            for c in plan.applicable:
                spec = reg.topic(c.topic)
                assert spec is not None
                if c.kind is ChangeKind.CREATE:
                    creates.append((spec.name, spec.partitions, spec.replication_factor,
                                    spec.desired_configs()))
                elif c.kind is ChangeKind.ADD_PARTITIONS:
                    parts[spec.name] = spec.partitions
                elif c.kind is ChangeKind.SET_CONFIG and c.config and c.desired is not None:
                    cfgs.setdefault(spec.name, {})[c.config] = c.desired
            from opskit.adapters.acls.check import require_topic_changes

            require_topic_changes(admin, creates, parts, cfgs)   # before the first change
            admin.create_topics(creates)
            admin.create_partitions(parts)
            admin.alter_topic_configs(cfgs)
    emit({"executed": execute, "in_sync": plan.in_sync,
          "changes": [c.to_dict() for c in plan.changes], "notes": notes}, output,
         lambda con: render(con, plan, execute))
    if plan.refused:  # one error line; the plan above shows every refused change
        more = f" (and {len(plan.refused) - 1} more refused)" if len(plan.refused) > 1 else ""
        done = ("dry run: nothing changed" if not execute else
                "the other changes were made" if plan.applicable else "nothing changed")
        raise RefusedError(f"topic {plan.refused[0].topic}: {plan.refused[0].detail}{more}; "
                           f"{done}")
    for note in notes:
        stderr().print(f"note: {note}", highlight=False)
    if not execute and plan.applicable:
        stderr().print("dry run: nothing changed; rerun with --execute to apply")
    return exits.OK


app.command("diff")(diff)
app.command("apply")(apply)
