"""``opskit reassign plan|execute|status|cancel|verify``: partition reassignment.

The plan file is kafka-reassign-partitions' JSON format
(``{"version": 1, "partitions": [{"topic", "partition", "replicas", "log_dirs"?}]}``)
so either tool can run the other's plan; opskit adds an ``"opskit"`` key of its own
(the assignment the plan was made from, for compare-and-set) that Kafka's tool ignores.

``plan`` lives in :mod:`opskit.cli.reassign_plan`, ``execute`` in
:mod:`opskit.cli.reassign_exec`; ``status``, ``cancel``, ``uncordon`` and ``verify`` in
:mod:`opskit.cli.reassign_control`. Each module adds its commands to ``app`` through its
``register`` function, in help order.
"""

from __future__ import annotations

import typer

from opskit.cli import reassign_control, reassign_exec, reassign_plan

app = typer.Typer(help="Move partition replicas: plan (minimal movement), execute (throttled, "
                       "resumable), status, cancel, verify.", no_args_is_help=True)

reassign_plan.register(app)
reassign_exec.register(app)
reassign_control.register(app)
