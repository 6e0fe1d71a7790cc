"""Reads what the reassignment of a playbook step (its plan file in the run directory)
left about replication throttles, from that reassignment's own journal
(:mod:`opskit.adapters.reassign.journal`): the exit line of a run stopped inside the
scale-out's ``raise_rf`` or the multi-rack ``spread`` says only what this finds."""

from __future__ import annotations

from pathlib import Path

from opskit.core.scaleout.throttles import Throttles, throttles_of
from opskit.errors import OpskitError

#: the RF raise's plan file in the scale-out's run directory (written by
#: ``KafkaSteps.raise_rf``; tests/unit/test_playbook_throttle_note.py checks the name)
RAISE_RF_PLAN = "raise-rf.json"


def step_throttles(plan_file: Path, cluster_id: str | None,
                   state_root: Path | None = None) -> Throttles:
    """NONE when the step wrote no plan file (it stopped before planning: ``reassign
    execute`` never ran) or its execution never saved a state; else what that
    execution's journal says. UNKNOWN when the cluster id is unknown or a file cannot
    be read: the exit line then says the throttles *may* stay set."""
    from opskit.adapters.files.safe_read import read_text
    from opskit.adapters.reassign.journal import Journal
    from opskit.core.reassign.plan_input import parse_plan, plan_id

    try:
        if not plan_file.exists():
            return Throttles.NONE
        if cluster_id is None:
            return Throttles.UNKNOWN
        pid = plan_id(parse_plan(read_text(plan_file, "plan file"), source=str(plan_file)))
        journal = Journal(cluster_id, state_root)
        if not (journal.dir(pid) / "state.json").exists():
            return Throttles.NONE
        state = journal.load(pid)
        return throttles_of(state.phase.value if state is not None else None,
                            journal.events(pid))
    except (OpskitError, OSError, ValueError):
        return Throttles.UNKNOWN
