"""``opskit reassign plan``: a minimal-movement reassignment plan (see opskit.cli.reassign.commands).

Exactly one goal: ``--add-brokers IDS``, ``--remove-brokers IDS``, ``--replication-factor N``
(with ``--topic T``... or ``--all-topics``, ``--include-internal``), ``--rebalance`` or
``--from-json FILE``. Reads the cluster (:mod:`opskit.adapters.reassign.topology`), plans
(:func:`opskit.core.reassign.plan.plan_reassignment`), shows the plan (``-o table``: per
broker before/after and the moves; ``-o json``: the plan file itself) and writes it with
``--write-plan FILE``. Changes nothing in the cluster.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from opskit.adapters.files.safe_read import read_text
from opskit.adapters.files.safe_write import check_writable_target, write_file
from opskit.adapters.reassign.topology import read_topology
from opskit.cli.common import (
    BootstrapOpt,
    ContextOpt,
    Output,
    OutputOpt,
    TimeoutOpt,
    connect,
    emit,
    fmt_bytes,
    fmt_duration,
    stderr,
)
from opskit.cli.reassign.leader_weights import leader_lines, read_rates
from opskit.core.reassign.bytes import (
    DEFAULT_TOLERANCE_PCT,
    ByteReport,
    broker_bytes,
    parse_capacity,
    parse_size,
    parse_tolerance,
)
from opskit.core.reassign.model import (
    Goal,
    GoalKind,
    Plan,
    Policy,
    Topology,
    assignments_from_json,
    refuse_log_dirs,
)
from opskit.core.reassign.plan_input import parse_rate
from opskit.errors import IncompleteError, UsageError

if TYPE_CHECKING:
    from opskit.adapters.kafka.admin.client import ClusterMeta
    from opskit.adapters.reassign.admin import ReassignAdmin
    from opskit.core.connection import ConnectionConfig

#: moves listed in the table (all of them are in -o json and the plan file)
_TABLE_MOVES = 30


def register(app: typer.Typer) -> None:
    """Add ``plan`` to the ``reassign`` command group."""
    app.command("plan")(plan)


def plan(
    add_brokers: Annotated[str | None, typer.Option(
        "--add-brokers", help="balance onto these new (registered) brokers: 3,4,5",
        show_default=False)] = None,
    remove_brokers: Annotated[str | None, typer.Option(
        "--remove-brokers", help="drain these brokers: 2 or 2,5", show_default=False)] = None,
    remove_log_dirs: Annotated[str | None, typer.Option(
        "--remove-log-dirs", help="drain log directories (JBOD disks) into their brokers' other "
        "ones: BROKER:DIR[,BROKER:DIR...]", show_default=False)] = None,
    replication_factor: Annotated[int | None, typer.Option(
        "--replication-factor", min=1, help="raise the replication factor to N (never lowers; "
        "the leader stays first)", show_default=False)] = None,
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", "-t", help="with --replication-factor: a topic (repeatable)",
        show_default=False)] = None,
    all_topics: Annotated[bool, typer.Option(
        "--all-topics", help="with --replication-factor: every topic but the internal ones")] = False,
    include_internal: Annotated[bool, typer.Option(
        "--include-internal", help="with --replication-factor: __consumer_offsets and "
        "__transaction_state too")] = False,
    rebalance: Annotated[bool, typer.Option(
        "--rebalance", help="balance replica and leader counts over all brokers")] = False,
    from_json: Annotated[str | None, typer.Option(
        "--from-json", help="a target in kafka-reassign-partitions' JSON", show_default=False)] = None,
    throttle: Annotated[str | None, typer.Option(
        "--throttle", help="replication throttle for the duration estimate: 50MB, 10MiB, bytes/s",
        show_default=False)] = None,
    write_plan: Annotated[str | None, typer.Option(
        "--write-plan", help="write the plan file (kafka-reassign-partitions' JSON)",
        show_default=False)] = None,
    ignore_racks: Annotated[bool, typer.Option(
        "--ignore-racks", help="plan as if no broker had a rack")] = False,
    balance_bytes: Annotated[bool, typer.Option(
        "--balance-bytes", help="also balance bytes per broker (every replica's size) within "
        "--byte-tolerance of the mean; alone: with --rebalance")] = False,
    byte_tolerance: Annotated[str | None, typer.Option(
        "--byte-tolerance", help=f"with --balance-bytes: percent of the mean each broker may "
        f"be above or below (default {DEFAULT_TOLERANCE_PCT})", show_default=False)] = None,
    capacity: Annotated[str | None, typer.Option(
        "--capacity", help="bytes of replicas each broker may hold: 0=500GB,1=1TB (refuses a "
        "plan that would put one above it; default: the disk DescribeLogDirs reports)",
        show_default=False)] = None,
    capacity_all: Annotated[str | None, typer.Option(
        "--capacity-all", help="the same capacity for every broker not in --capacity: 500GB",
        show_default=False)] = None,
    leader_weights: Annotated[str | None, typer.Option(
        "--leader-weights", help="bytes-in per partition (JSON; or opskit throughput -o json's "
        "per topic): balance preferred leaders by bytes-in too", show_default=False)] = None,
    output: OutputOpt = Output.table,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Plan a reassignment with the fewest replica moves; show it, write it. Changes nothing."""
    if remove_log_dirs is not None:
        from opskit.cli.reassign.execute import reassign_admin
        from opskit.cli.reassign.log_dirs import plan_log_dirs

        return plan_log_dirs(remove_log_dirs, any(x not in (None, False, []) for x in (
            add_brokers, remove_brokers, replication_factor, topic, all_topics, include_internal,
            rebalance, from_json, balance_bytes, byte_tolerance, capacity, capacity_all,
            throttle, leader_weights)), write_plan, output,
            reassign_admin(bootstrap_server, context, timeout))
    if byte_tolerance is not None and not balance_bytes:
        raise UsageError("--byte-tolerance goes with --balance-bytes")
    tolerance = (parse_tolerance(byte_tolerance) if byte_tolerance is not None
                 else float(DEFAULT_TOLERANCE_PCT)) if balance_bytes else None
    given_capacity = parse_capacity(capacity) if capacity is not None else {}
    capacity_rest = parse_size(capacity_all, "--capacity-all") if capacity_all is not None else None
    goal = _goal(add_brokers, remove_brokers, replication_factor, topic or [], all_topics,
                 include_internal, rebalance or (balance_bytes and not any(
                     (add_brokers, remove_brokers, replication_factor, from_json))), from_json)
    if balance_bytes and goal.kind in (GoalKind.REPLICATION_FACTOR, GoalKind.FROM_JSON):
        raise UsageError("--balance-bytes goes with --add-brokers, --remove-brokers or --rebalance")
    rate = parse_rate(throttle) if throttle is not None else None
    rates = read_rates(leader_weights, goal)
    if write_plan is not None:
        check_writable_target(write_plan, "plan file")
    # the planner's own modules load in a thread while the reads wait on the brokers
    threading.Thread(target=_load_planner, name="opskit-planner-import", daemon=True).start()
    with connect(bootstrap_server, context, timeout) as admin:
        look = _CordonLook(admin.conn, goal, timeout)
        read = read_topology(admin, look)  # the cordon look runs alongside the other reads
    notes = [n for n in (read.sizes_unavailable and f"partition sizes unknown, bytes shown as 0: "
                         f"{read.sizes_unavailable}", read.racks_unavailable) if n]
    if look.drain_note is not None:
        notes.append(look.drain_note)
    topology = read.topology
    if goal.kind is not GoalKind.FROM_JSON:
        topology, cordon_notes = _without_cordoned(topology, goal, look)
        notes += cordon_notes
    if read.sizes_unavailable and (balance_bytes or given_capacity or capacity_rest is not None):
        what = "--balance-bytes" if balance_bytes else "--capacity"
        raise IncompleteError(f"{what} needs the partition sizes, which could not be read: "
                              f"{read.sizes_unavailable}")
    disks = {} if read.sizes_unavailable else read.disks
    caps, source, cap_note = _capacity(topology, disks, given_capacity, capacity_rest)
    if cap_note and (balance_bytes or disks):
        notes.append(cap_note)
    if rates is not None:
        notes += rates.weights([p.tp for p in topology.partitions])[1]
    policy = Policy(respect_racks=not ignore_racks, throttle_bytes_per_s=rate,
                    byte_tolerance_pct=tolerance, capacity=caps, capacity_source=source,
                    leader_rates=rates)
    from opskit.core.reassign.plan import plan_reassignment  # (loaded by now, or waited for)

    result = plan_reassignment(topology, goal, policy, datetime.now(UTC))
    bytes_report = result.estimates.bytes_per_broker
    if bytes_report is not None:
        over = [b for b in sorted(bytes_report.capacity)
                if bytes_report.after.get(b, 0) > bytes_report.capacity[b]]
        if over:
            notes.append("warning: broker(s) " + ", ".join(
                f"{b} ({fmt_bytes(bytes_report.after.get(b, 0))} of "
                f"{fmt_bytes(bytes_report.capacity[b])})" for b in over)
                + " stay above their capacity (the plan does not add to them)")
        peak = [b for b in sorted(bytes_report.capacity) if b not in over
                and bytes_report.before.get(b, 0) + result.estimates.broker_bytes_in.get(b, 0)
                > bytes_report.capacity[b]]
        if peak:
            notes.append("warning: broker(s) " + ", ".join(
                f"{b} ({fmt_bytes(bytes_report.before.get(b, 0) + result.estimates.broker_bytes_in.get(b, 0))}"
                f" of {fmt_bytes(bytes_report.capacity[b])})" for b in peak)
                + " go above their capacity while the moves run if every replica arrives before "
                "any leaves (reassign execute --max-moves-per-broker N limits what is in flight)")
        if bytes_report.reached is False:
            notes.append(f"warning: bytes per broker are not all within "
                         f"{bytes_report.tolerance_pct:g}% of the mean after the plan "
                         f"({fmt_bytes(bytes_report.low or 0)} - {fmt_bytes(bytes_report.high or 0)}):"
                         " no further move or swap brings them closer keeping racks, RF and "
                         "capacity (exit 1; the plan is shown and written)")
    err = stderr()
    for note in notes:
        prefix = "" if note.startswith("warning: ") else "note: "
        err.print(f"opskit: {prefix}{note}", highlight=False, soft_wrap=True)
    if write_plan is not None:
        if result.is_empty:
            err.print("opskit: nothing to move: no plan file written", highlight=False)
        else:
            write_file(write_plan, result.to_json(), what="plan file")
            err.print(f"plan written to {write_plan}: run it with "
                      f"opskit reassign execute {write_plan} --throttle RATE --execute",
                      highlight=False)
    emit(result.to_dict(), output, lambda c: _table(c, read.topology, result))
    if bytes_report is not None and bytes_report.reached is False:
        raise typer.Exit(1)


def _load_planner() -> None:
    """Import the planner (in a thread, while the cluster is read). A failure is left to
    the command's own import of it, which reports it."""
    with contextlib.suppress(Exception):  # (reported by the import in the command)
        importlib.import_module("opskit.core.reassign.plan")


def _capacity(topology: Topology, disks: dict[int, tuple[int, int]], given: dict[int, int],
              rest: int | None) -> tuple[dict[int, int], str | None, str | None]:
    """(capacity per broker, where it came from, a note): --capacity / --capacity-all when
    given, else each broker's usable disk space plus the replicas it holds now
    (DescribeLogDirs v4+, Kafka 3.3+)."""
    ids = set(topology.broker_ids)
    unknown = sorted(set(given) - ids)
    if unknown:
        raise UsageError(f"--capacity: broker {unknown[0]} is not registered")
    if given or rest is not None:
        known = {b: given.get(b, rest or 0) for b in sorted(ids) if b in given or rest is not None}
        missing = sorted(ids - set(known))
        note = (f"no capacity given for broker(s) {','.join(map(str, missing))}: not checked"
                if missing else None)
        return known, "given (--capacity/--capacity-all)", note
    held = broker_bytes((p.replicas for p in topology.partitions),
                        [p.size_bytes for p in topology.partitions], ids)
    caps = {b: held.get(b, 0) + disks[b][1] for b in sorted(ids) if b in disks}
    missing = sorted(ids - set(caps))
    if not caps:
        return {}, None, ("disk sizes not reported (DescribeLogDirs v4, Kafka 3.3+): capacity "
                          "not checked; give --capacity BROKER=SIZE or --capacity-all SIZE")
    note = (f"disk size not reported by broker(s) {','.join(map(str, missing))}: their "
            "capacity is not checked" if missing else None)
    return caps, "disk: usable space + replicas held (DescribeLogDirs)", note


class _CordonLook:
    """The cordon reads of a plan (KIP-1066), run by :func:`read_topology` alongside its own
    reads once Metadata named the brokers: what ``reassign execute`` will do about a drain's
    cordon (``--remove-brokers``), and which brokers are fully cordoned (every goal but
    ``--from-json``). One connection for both; a failed look is a note, never an error."""

    def __init__(self, conn: ConnectionConfig, goal: Goal, timeout: float) -> None:
        self.conn, self.goal, self.timeout = conn, goal, timeout
        #: the drain's cordon note (``--remove-brokers`` only)
        self.drain_note: str | None = None
        #: the fully cordoned brokers, or why they could not be read
        self.cordoned: set[int] = set()
        self.failed: str | None = None

    def __call__(self, meta: ClusterMeta) -> None:
        from opskit.adapters.reassign.admin import ReassignAdmin
        from opskit.errors import OpskitError

        registered = {b.node_id for b in meta.brokers}
        with ReassignAdmin(self.conn, timeout=self.timeout) as ra:
            if self.goal.kind is GoalKind.REMOVE_BROKERS:
                self.drain_note = _cordon_note(self.goal.brokers, registered, ra)
            if self.goal.kind is not GoalKind.FROM_JSON:
                try:
                    self.cordoned = ra.fully_cordoned(sorted(registered))
                except OpskitError as e:
                    self.failed = f"could not read which brokers are cordoned (KIP-1066): {e}"


def _without_cordoned(topology: Topology, goal: Goal, look: _CordonLook
                      ) -> tuple[Topology, list[str]]:
    """Leave out the fully cordoned brokers that hold nothing (a finished drain's): no plan
    fills them again. A failed look changes nothing and is a note."""
    from opskit.core.reassign.cordon import leave_out_cordoned

    keep = goal.brokers  # (named by --add-brokers / --remove-brokers: the goal decides)
    if look.failed is not None:
        return topology, [look.failed]
    topology, out, holding = leave_out_cordoned(topology, look.cordoned, keep)
    notes = []
    if out:
        ids = ",".join(map(str, out))
        notes.append(f"broker(s) {ids} are cordoned and hold no replica: left out of the plan "
                     f"(opskit reassign uncordon --brokers {ids} --execute to use them again)")
    if holding:
        notes.append(f"broker(s) {','.join(map(str, holding))} are cordoned but hold replicas: "
                     "the plan may still move replicas onto them")
    return topology, notes


def _cordon_note(drained: tuple[int, ...], registered: set[int], ra: ReassignAdmin) -> str:
    """What ``reassign execute`` will do about the drained brokers' cordon (KIP-1066)."""
    from opskit.core.reassign.cordon import (
        CordonStatus,
        CordonSupport,
        plan_cordon,
        unprotected_line,
    )
    from opskit.errors import OpskitError

    present = [b for b in drained if b in registered]
    support = CordonSupport(True)
    if present:
        try:  # the plan itself needs none of this: a failed look is a note, not an error
            support = ra.cordon_support(present)
        except OpskitError as e:
            return (f"could not tell whether reassign execute can cordon broker(s) "
                    f"{','.join(map(str, present))} (KIP-1066): {e}")
    cordon = plan_cordon(drained, registered, support)
    assert cordon is not None
    if cordon.status is CordonStatus.UNSUPPORTED:
        return "warning: " + unprotected_line(cordon.brokers, cordon.note or "")
    return (f"reassign execute cordons broker(s) {','.join(map(str, cordon.brokers))} before the "
            "first move (KIP-1066: no new replica is placed there) and leaves them cordoned "
            "when the drain ends" + (f"; {cordon.note}" if cordon.note else ""))


def broker_ids(text: str, flag: str) -> tuple[int, ...]:
    """``3,4,5`` -> (3, 4, 5); UsageError naming ``flag`` when malformed."""
    return _ids(text, flag)


def _ids(text: str, flag: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.split(",")]
    if not parts or any(not (p.isascii() and p.isdigit()) for p in parts):
        raise UsageError(f"{flag}: {text!r} is not a list of broker ids like 3,4,5")
    ids = tuple(int(p) for p in parts)
    if len(set(ids)) != len(ids):
        raise UsageError(f"{flag}: a broker id is listed twice in {text!r}")
    if any(i > 2**31 - 1 for i in ids):
        raise UsageError(f"{flag}: broker ids are 32-bit numbers")
    return ids


def _goal(add: str | None, remove: str | None, rf: int | None, topics: list[str],
          all_topics: bool, include_internal: bool, rebalance: bool, from_json: str | None) -> Goal:
    given = [f for f, v in (("--add-brokers", add), ("--remove-brokers", remove),
                            ("--replication-factor", rf), ("--rebalance", rebalance or None),
                            ("--from-json", from_json)) if v is not None]
    if len(given) != 1:
        raise UsageError("give exactly one goal: --add-brokers, --remove-brokers, "
                         "--replication-factor, --rebalance or --from-json"
                         + (f" (got {' and '.join(given)})" if given else ""))
    if rf is None and (topics or all_topics or include_internal):
        raise UsageError("--topic, --all-topics and --include-internal go with --replication-factor")
    if add is not None:
        return Goal(GoalKind.ADD_BROKERS, brokers=_ids(add, "--add-brokers"))
    if remove is not None:
        return Goal(GoalKind.REMOVE_BROKERS, brokers=_ids(remove, "--remove-brokers"))
    if rf is not None:
        if bool(topics) == all_topics:
            raise UsageError("--replication-factor needs --topic T (repeatable) or --all-topics")
        return Goal(GoalKind.REPLICATION_FACTOR, replication_factor=rf,
                    topics=tuple(dict.fromkeys(topics)) if topics else None,
                    include_internal=include_internal)
    if from_json is not None:
        target = assignments_from_json(read_text(from_json, "plan file"))
        refuse_log_dirs(target, f"--from-json {from_json}")
        if not target:
            raise UsageError(f"--from-json: {from_json} lists no partitions")
        return Goal(GoalKind.FROM_JSON, target=target, source=from_json)
    return Goal(GoalKind.REBALANCE)


def _ratio(moved: int, bound: int) -> str:
    if bound == 0:
        return "(lower bound 0)"
    return f"({moved / bound:.2f}x the lower bound {bound:,})"


def _ratio_text(x: float | None) -> str:
    return "n/a (a broker holds 0 B)" if x is None else f"{x:.2f}"


def _bytes_lines(console: Console, per: ByteReport, moved: int) -> None:
    console.print(f"bytes per broker, max/min: {_ratio_text(per.ratio(per.before))} before, "
                  f"{_ratio_text(per.ratio(per.after))} after", highlight=False)
    if per.tolerance_pct is not None:
        state = "reached" if per.reached else "NOT reached"
        console.print(f"byte balance within {per.tolerance_pct:g}% of the mean "
                      f"({fmt_bytes(per.low or 0)} - {fmt_bytes(per.high or 0)} per broker): "
                      f"{state}; it needs {fmt_bytes(per.goal_bytes_lower_bound or 0)} moved at "
                      f"least ({fmt_bytes(moved)} moved)", highlight=False)
        if (per.count_spread_after or 0) > 1:
            console.print(f"replica counts differ by up to {per.count_spread_after} between "
                          "brokers after: the byte balance needed moves beyond count balance",
                          highlight=False)
    if per.capacity_source:
        console.print(f"capacity: {per.capacity_source}", highlight=False)


def _table(console: Console, topology: Topology, plan: Plan) -> None:
    est = plan.estimates
    console.print(f"goal: {plan.goal.describe()}", highlight=False)
    if plan.is_empty:
        console.print("nothing to move: the cluster already meets the goal", highlight=False)
        return
    console.print(f"partitions changed: {len(plan.partitions):,}   leaders changed: "
                  f"{est.leaders_changed:,}", highlight=False)
    console.print(f"replicas moved: {est.replicas_moved:,} "
                  f"{_ratio(est.replicas_moved, est.replicas_lower_bound)}", highlight=False)
    console.print(f"bytes moved: {fmt_bytes(est.bytes_moved)} "
                  f"({fmt_bytes(est.bytes_lower_bound)} at least)", highlight=False)
    if est.rack_replicas_lower_bound is not None:
        console.print(f"rack spread: {est.unspread_before:,} partitions over their rack limit "
                      f"before, {est.unspread_after:,} after; {est.rack_replicas_lower_bound:,} "
                      "replicas must move for it (part of the lower bound)", highlight=False)
    if est.bytes_per_broker is not None:
        _bytes_lines(console, est.bytes_per_broker, est.bytes_moved)
    if est.leader_bytes_in is not None:
        leader_lines(console, est.leader_bytes_in)
    if est.duration_s is not None and est.throttle_bytes_per_s is not None:
        console.print(f"estimated duration at {fmt_bytes(est.throttle_bytes_per_s)}/s per broker: "
                      f"{fmt_duration(est.duration_s)} or more (busiest broker's bytes / throttle; "
                      "writes during the move add to it)", highlight=False)
    else:
        console.print("estimated duration: give --throttle RATE", highlight=False)
    target = {a.tp: a.replicas for a in plan.partitions}
    before: dict[int, list[int]] = {b.id: [0, 0] for b in topology.brokers}
    after: dict[int, list[int]] = {b.id: [0, 0] for b in topology.brokers}
    for p in topology.partitions:
        for counts, reps in ((before, p.replicas), (after, target.get(p.tp, p.replicas))):
            for i, b in enumerate(reps):
                c = counts.setdefault(b, [0, 0])
                c[0] += 1
                c[1] += i == 0
    racks = topology.racks()
    per = est.bytes_per_broker
    t = Table("BROKER", "RACK", "REPLICAS", "AFTER", "LEADERS*", "AFTER", "BYTES", "AFTER",
              "CAPACITY USE", "BYTES IN", "BYTES OUT", box=None, pad_edge=False)
    for b in sorted(set(before) | set(after)):
        held = (fmt_bytes(per.before.get(b, 0)), fmt_bytes(per.after.get(b, 0))) if per else ("-", "-")
        cap = per.capacity.get(b) if per else None
        use = f"{per.after.get(b, 0) / cap:.0%} of {fmt_bytes(cap)}" if per and cap else "-"
        t.add_row(str(b), racks.get(b) or "-", f"{before[b][0]:,}", f"{after[b][0]:,}",
                  f"{before[b][1]:,}", f"{after[b][1]:,}", *held, use,
                  fmt_bytes(est.broker_bytes_in.get(b, 0)), fmt_bytes(est.broker_bytes_out.get(b, 0)))
    console.print(t)
    console.print("* preferred leaders (first replica); the leaders move after a preferred "
                  "election (opskit reassign execute runs one)", highlight=False)
    moves = Table("TOPIC", "PARTITION", "REPLICAS", "->", "TARGET", "SIZE", box=None, pad_edge=False)
    for base, a in list(plan.moves())[:_TABLE_MOVES]:
        moves.add_row(a.topic, str(a.partition), ",".join(map(str, base.replicas)), "->",
                      ",".join(map(str, a.replicas)), fmt_bytes(base.size_bytes))
    console.print(moves)
    if len(plan.partitions) > _TABLE_MOVES:
        console.print(f"... and {len(plan.partitions) - _TABLE_MOVES:,} more partitions "
                      "(-o json or --write-plan FILE for all)", highlight=False)
