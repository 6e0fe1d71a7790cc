"""``opskit reassign plan --leader-weights FILE``: the rates file read and the plan's leader
bytes-in per broker shown (the weighing itself is :mod:`opskit.core.reassign.leader_weights`)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from opskit.adapters.files.safe_read import read_text
from opskit.cli.common import fmt_bytes
from opskit.core.reassign.leader_weights import LeaderLoad, Rates, parse_rates
from opskit.core.reassign.model import Goal, GoalKind
from opskit.errors import UsageError


def read_rates(path: str | None, goal: Goal) -> Rates | None:
    """The rates of ``--leader-weights FILE`` (None without it)."""
    if path is None:
        return None
    if goal.kind in (GoalKind.REPLICATION_FACTOR, GoalKind.FROM_JSON):
        raise UsageError("--leader-weights goes with --add-brokers, --remove-brokers or "
                         "--rebalance")
    return parse_rates(read_text(path, "leader weights file"), f"--leader-weights {path}")


def leader_lines(console: Console, load: LeaderLoad) -> None:
    """Leader bytes-in per broker before/after (preferred leaders, the staying brokers)."""
    console.print(f"leader bytes-in per broker (--leader-weights), max - min: "
                  f"{fmt_bytes(load.spread(load.before))}/s before, "
                  f"{fmt_bytes(load.spread(load.after))}/s after", highlight=False)
    t = Table("BROKER", "LEADER BYTES IN/S", "AFTER", box=None, pad_edge=False)
    for b in sorted(set(load.before) | set(load.after)):
        t.add_row(str(b), fmt_bytes(load.before.get(b, 0)), fmt_bytes(load.after.get(b, 0)))
    console.print(t)
