"""``opskit reassign plan|execute|status|cancel|verify``: partition reassignment.

The plan file is kafka-reassign-partitions' JSON format
(``{"version": 1, "partitions": [{"topic", "partition", "replicas", "log_dirs"?}]}``)
so either tool can run the other's plan; opskit adds an ``"opskit"`` key of its own
(the assignment the plan was made from, for compare-and-set) that Kafka's tool ignores.

``plan`` lives in :mod:`opskit.cli.reassign.plan`, ``execute`` in
:mod:`opskit.cli.reassign.execute`; ``status``, ``cancel``, ``uncordon`` and ``verify`` in
:mod:`opskit.cli.reassign.control`. Each module adds its commands to ``app`` through its
``register`` function, in help order: ``plan`` on import, the others when :func:`load_for`
is asked for any command but ``plan`` (``opskit.cli.main`` asks it for the command on
the line): ``opskit reassign plan`` does not import execute's state machine and the
control commands' reads (about 0.15 s of its start-up).
"""

from __future__ import annotations

import typer

from opskit.cli.reassign import plan

app = typer.Typer(help="Move partition replicas: plan (minimal movement), execute (throttled, "
                       "resumable), status, cancel, verify.", no_args_is_help=True)

plan.register(app)
_all_loaded = False


def load_for(command: str | None) -> bool:
    """Register what ``opskit reassign COMMAND`` needs (None: the group's own help, every
    command): ``plan`` is always there; any other name registers the rest, after it.
    Returns whether commands were added."""
    global _all_loaded
    if command == "plan" or _all_loaded:
        return False
    from opskit.cli.reassign import control, execute

    execute.register(app)
    control.register(app)
    _all_loaded = True
    return True
