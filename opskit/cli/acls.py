"""``opskit acls diff|apply|lint|restore|monitor-principal``: HIP-30's ACLs as code.

Exit codes: diff 0 in sync, 1 drift; lint 0 clean, 1 blanket grants; apply and
restore 0 (dry run shown or done); 2 malformed registry or backup; 3 unreachable;
4 file missing; 6 the broker refused (not authorised, no authorizer).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from opskit.adapters.acls.admin import AclsAdmin, load_acl_backup, save_acl_backup
from opskit.adapters.files.registry_file import DEFAULT_REGISTRY, load_registry
from opskit.cli import exits
from opskit.cli.common import (
    BootstrapOpt,
    ContextOpt,
    ExecuteOpt,
    Output,
    OutputOpt,
    TimeoutOpt,
    connect_as,
    emit,
    registry_argument,
    stderr,
)
from opskit.core.acl_needs import COMMAND_NEEDS, MONITOR_COMMANDS
from opskit.core.acls import (
    AclEntry,
    AclPlan,
    SecuritySpec,
    blanket_grants,
    desired_acls,
    monitor_acls,
    plan_acl_changes,
)
from opskit.errors import InvalidInputError

app = typer.Typer(help="HIP-30 ACLs as code: compare, apply, lint; what a monitor needs.",
                  no_args_is_help=True)

RegistryArg = Annotated[Path | None, registry_argument("registry YAML with a security section")]
PruneOpt = Annotated[bool, typer.Option(
    "--prune", help="also delete ALLOW ACLs of the registry's principals that the registry does "
                    "not list (never ACLs of other principals, never DENY ACLs)")]
BackupDirOpt = Annotated[Path | None, typer.Option(
    "--backup-dir", help="where the ACL backup goes (default: <state dir>/acl-backups)",
    show_default=False)]


def _admin(bootstrap: str | None, context: str | None, timeout: float) -> AclsAdmin:
    # kafka-python may confirm an empty DescribeAcls answer
    return connect_as(AclsAdmin, bootstrap, context, timeout, kafka_python=True)


def registry_acls(registry: Path | None) -> tuple[SecuritySpec, tuple[AclEntry, ...]]:
    """The registry file's security section and the ACLs it asks for."""
    reg = load_registry(registry)
    sec = reg.security
    if sec is None:
        raise InvalidInputError(f"registry {registry or DEFAULT_REGISTRY} has no 'security' section")
    return sec, desired_acls(sec, [t.name for t in reg.topics], [g.name for g in reg.groups])


def _render_plan(console: Console, plan: AclPlan, action: dict[str, str]) -> None:
    if plan.in_sync:
        console.print("[green]ACLs in sync with the registry[/green]")
    else:
        t = Table(box=None, header_style="bold")
        for col in ("CHANGE", "ACL", "APPLY", "DETAIL"):
            t.add_column(col)
        for c in plan.changes():
            t.add_row(c.kind.value, escape(c.entry.describe()), action.get(c.kind.value, "report only"),
                      escape(c.detail))
        console.print(t)
    if plan.unmanaged:
        console.print(f"{len(plan.unmanaged)} ACLs of principals the registry does not name "
                      "(unmanaged, never changed; -o json lists them)")


def _change(admin: AclsAdmin, current: tuple[AclEntry, ...], create: tuple[AclEntry, ...],
            delete: tuple[AclEntry, ...], reason: str, backup_dir: Path | None,
            command: str = "acls apply --execute") -> None:
    """Back up every current ACL, then create and delete (nothing to do: no backup). A
    principal without Alter on the cluster is refused first: no backup, nothing sent."""
    if not (create or delete):
        return
    from opskit.adapters.acls.check import require_acls

    require_acls(admin, command)
    saved = save_acl_backup(current, admin.conn.bootstrap, reason, backup_dir)
    stderr().print(f"backup of the {len(current)} current ACLs: {saved.path} "
                   f"(undo: opskit acls restore {saved.path} --execute)")
    admin.create_acls(create)
    admin.delete_acls(delete)


def diff(
    registry: RegistryArg = None,
    output: OutputOpt = Output.table,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 10.0,
) -> int:
    """Compare the cluster's ACLs with the registry's security section. Exit 0 in sync, 1 drift
    (missing or extra ACLs of the registry's principals, or a blanket grant on the cluster)."""
    sec, want = registry_acls(registry)
    with _admin(bootstrap_server, context, timeout) as admin:
        plan = plan_acl_changes(want, admin.acls(), sec.managed_principals)
    emit(plan.to_dict(), output, lambda c: _render_plan(c, plan, {"missing": "yes"}))
    return exits.OK if plan.in_sync else exits.WARNING


def apply(
    registry: RegistryArg = None,
    execute: ExecuteOpt = False,
    prune: PruneOpt = False,
    backup_dir: BackupDirOpt = None,
    output: OutputOpt = Output.table,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 30.0,
) -> int:
    """Create the registry's missing ACLs (and with --prune delete its principals' extra ALLOW
    ACLs). Dry run unless --execute; every current ACL is backed up first."""
    sec, want = registry_acls(registry)
    err = stderr()
    with _admin(bootstrap_server, context, timeout) as admin:
        current = admin.acls()
        plan = plan_acl_changes(want, current, sec.managed_principals)
        delete = plan.prunable() if prune else ()
        if execute:
            _change(admin, current, plan.missing, delete, f"acls apply {registry or DEFAULT_REGISTRY}",
                    backup_dir)
    verb = "created" if execute else "would create"
    action = {"missing": verb}
    if prune:
        action["extra"] = "deleted" if execute else "would delete"
    emit({"executed": execute, "pruned": bool(prune), **plan.to_dict()}, output,
         lambda c: _render_plan(c, plan, action))
    skipped_deny = [e for e in plan.extra if e.permission == "DENY"]
    if prune and skipped_deny:
        err.print(f"{len(skipped_deny)} extra DENY ACLs left in place (deleting one widens access)")
    if not execute and (plan.missing or delete):
        err.print("dry run: nothing changed; rerun with --execute to apply")
    return exits.OK


def restore(
    backup_file: Annotated[Path, typer.Argument(help="ACL backup written by acls apply or dr restore",
                                                show_default=False)],
    execute: ExecuteOpt = False,
    backup_dir: BackupDirOpt = None,
    output: OutputOpt = Output.table,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 30.0,
) -> int:
    """Undo: make the cluster's ACLs exactly those of a backup (creates what is missing,
    deletes what was added since). Dry run unless --execute; the current ACLs are backed up."""
    backup = load_acl_backup(backup_file)
    err = stderr()
    with _admin(bootstrap_server, context, timeout) as admin:
        current = admin.acls()
        every = {e.principal for e in (*backup.entries, *current)}
        plan = plan_acl_changes(backup.entries, current, every)
        if execute:
            _change(admin, current, plan.missing, plan.extra, f"acls restore {backup_file}",
                    backup_dir, "acls restore --execute")
    plan = AclPlan(plan.missing, plan.extra, (), (), source="backup")
    action = {"missing": "created" if execute else "would create",
              "extra": "deleted" if execute else "would delete"}
    emit({"executed": execute, **plan.to_dict()}, output, lambda c: _render_plan(c, plan, action))
    if not execute and not plan.in_sync:
        err.print("dry run: nothing changed; rerun with --execute to apply")
    return exits.OK


def lint(
    registry: RegistryArg = None,
    no_cluster: Annotated[bool, typer.Option(
        "--no-cluster", help="lint the registry only (do not read the cluster's ACLs)")] = False,
    output: OutputOpt = Output.table,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 10.0,
) -> int:
    """Blanket grants (wildcard or empty-prefix topics and groups, operation ALL, User:*) in
    the registry and on the cluster. Exit 0 none, 1 found."""
    _sec, want = registry_acls(registry)
    found = [("registry", b) for b in blanket_grants(want)]
    if not no_cluster:
        with _admin(bootstrap_server, context, timeout) as admin:
            found += [("cluster", b) for b in blanket_grants(admin.acls())]

    def table(console: Console) -> None:
        if not found:
            console.print("[green]no blanket grants[/green]")
            return
        t = Table(box=None, header_style="bold")
        for c in ("WHERE", "ACL", "WHY"):
            t.add_column(c)
        for where, b in found:
            t.add_row(where, escape(b.entry.describe()), b.why)
        console.print(t)

    emit({"blanket": [{"where": w, **b.to_dict()} for w, b in found]}, output, table)
    return exits.WARNING if found else exits.OK


def kafka_acls_command(e: AclEntry, bootstrap: str) -> str:
    return shlex.join(["kafka-acls.sh", "--bootstrap-server", bootstrap, "--command-config",
                       "admin.properties", "--add", *e.kafka_acls_args()])


def monitor_principal(
    name: Annotated[str, typer.Argument(help="the monitor's user name (User:NAME)",
                                        show_default=False)],
    registry: RegistryArg = None,
    describe_configs: Annotated[bool, typer.Option(
        "--describe-configs/--no-describe-configs",
        help="also DescribeConfigs (retention headroom, min.insync.replicas, topics diff)")] = True,
    bootstrap: Annotated[str, typer.Option(
        "--bootstrap", help="bootstrap written into the kafka-acls.sh commands")] = "BROKER:9093",
    output: OutputOpt = Output.table,
) -> int:
    """The ACLs a read-only monitor needs for opskit's read commands on the registry's topics
    and groups (no READ: HIP-30 lets no monitor consume events), and the kafka-acls.sh commands
    that grant them. Prints only; grant them with kafka-acls.sh or a registry principal with
    'monitor: true' and opskit acls apply."""
    reg = load_registry(registry)
    if not name.removeprefix("User:") or "*" in name:
        raise InvalidInputError(f"monitor name {name!r} is not a single user")
    entries = monitor_acls(name.removeprefix("User:"), [t.name for t in reg.topics],
                           [g.name for g in reg.groups], describe_configs)
    needs: list[dict[str, Any]] = [
        {"command": cmd, "resource": n.resource, "operation": n.operation, "why": n.why,
         "granted": n.operation == "DESCRIBE" or (describe_configs and n.operation == "DESCRIBE_CONFIGS"),
         "without": n.without}
        for cmd in MONITOR_COMMANDS for n in COMMAND_NEEDS[cmd]]
    data = {"principal": entries[0].principal, "acls": [e.to_dict() for e in entries],
            "kafka_acls_commands": [kafka_acls_command(e, bootstrap) for e in entries],
            "commands": needs}

    def table(console: Console) -> None:
        t = Table(box=None, header_style="bold", title=f"ACLs for {entries[0].principal}")
        for c in ("COMMAND", "RESOURCE", "OPERATION", "GRANTED", "WITHOUT IT"):
            t.add_column(c)
        for n in needs:
            t.add_row(n["command"], n["resource"], n["operation"], "yes" if n["granted"] else "no",
                      n["without"] or "the command cannot run")
        console.print(t)
        console.print("\n# grant them (run as an admin):")
        for line in data["kafka_acls_commands"]:
            console.print(escape(str(line)), soft_wrap=True, highlight=False)

    emit(data, output, table)
    return exits.OK


app.command("diff")(diff)
app.command("apply")(apply)
app.command("lint")(lint)
app.command("restore")(restore)
app.command("monitor-principal")(monitor_principal)
