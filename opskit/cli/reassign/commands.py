"""``opskit reassign plan|execute|status|cancel|verify``: partition reassignment.

The plan file is kafka-reassign-partitions' JSON format
(``{"version": 1, "partitions": [{"topic", "partition", "replicas", "log_dirs"?}]}``)
so either tool can run the other's plan; opskit adds an ``"opskit"`` key of its own
(the assignment the plan was made from, for compare-and-set) that Kafka's tool ignores.

``plan`` lives in :mod:`opskit.cli.reassign.plan`, ``execute`` in
:mod:`opskit.cli.reassign.execute`; ``status``, ``cancel``, ``uncordon`` and ``verify`` in
:mod:`opskit.cli.reassign.control`. Each module adds its commands to ``app`` through its
``register`` function, in help order.
"""

from __future__ import annotations

import typer

from opskit.cli.reassign import control, execute, plan

app = typer.Typer(help="Move partition replicas: plan (minimal movement), execute (throttled, "
                       "resumable), status, cancel, verify.", no_args_is_help=True)

plan.register(app)
execute.register(app)
control.register(app)
