"""The scale-out's cluster-default ``min.insync.replicas`` on a secured Kafka 4.x sandbox.

Kafka 4.x refuses a per-broker ``min.insync.replicas`` while ELR is on (the secured 3.7
path sets per-broker values), and opskit's clients cannot name the cluster default; so
on a secured 4.x sandbox ``set_min_isr`` sets the default with Kafka's own kafka-configs
through the controllers' listener (``--bootstrap-controller``), which a sandbox keeps
plaintext on 127.0.0.1. One secured one-node 4.3.1 sandbox and that part of the step
alone (no scale-out: the rest of the step is the same on every sandbox and tested there).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import cli_sandbox

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.scaleout.local import LocalSteps
from opskit.cli.main import main
from opskit.errors import OpskitError
from opskit.sandbox.security import admin_context_name


@pytest.mark.kafka4
def test_secured_4x_cluster_default_goes_through_the_controllers(uniq: str,
                                                                 tmp_path: Path) -> None:
    name = f"p4{uniq}"
    with cli_sandbox(name, "--kafka-version", "4.x", "--security", "sasl_ssl") as sb:
        st = sb.require()
        assert st.version.startswith("4.")
        with KafkaAdmin(sb.connection()) as admin:
            assert admin.broker_configs([0])[0]["min.insync.replicas"][0] == "1"
            # the control: what the 3.7 path does is refused here
            with pytest.raises(OpskitError):
                admin.alter_broker_configs([0], {"min.insync.replicas": "2"})
            assert admin.broker_configs([0])[0]["min.insync.replicas"][0] == "1"
        steps = LocalSteps(sb, sb.connection(), admin_context_name(name, sb.security(st)),
                           tmp_path, "10MiB", cli=main)
        where = steps._cluster_default("min.insync.replicas", "2")
        assert where == "as the cluster-wide dynamic default (new topics)"
        with KafkaAdmin(sb.connection()) as admin:
            assert admin.broker_configs([0])[0]["min.insync.replicas"][0] == "2"
        # rerunnable (a resumed step sets it again)
        assert steps._cluster_default("min.insync.replicas", "2") == where
