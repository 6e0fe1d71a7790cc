"""One small scenario on a (possibly secured) sandbox cluster, shared by the security matrix
and the secret-grep test: a topic with records, groups with committed offsets, a registry
file naming them (with a security section), and HIP-30 monitor ACLs for them.

Everything is made as ``admin`` (the super user). The ``monitor`` principal gets exactly
what a HIP-30 monitor holds: Describe on the cluster, on the topic and on the groups; no
Read (a monitor never consumes events) and no DescribeConfigs.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import Where, commit, create_topic, produce

PARTITIONS = 4
RECORDS = 10  # per partition
COMMITTED = 3  # group G, on every partition: lag 7 each, 28 in all


@dataclass
class Scenario:
    cluster: Any  # conftest.Cluster
    topic: str
    group: str  # committed at COMMITTED everywhere (read commands)
    reset_group_admin: str  # offsets reset --execute as admin
    reset_group_monitor: str  # offsets reset --execute as monitor (refused)
    service: str  # a registry principal (acls diff)
    registry: Path
    #: a group on the topic the monitor may not describe (listed, then left out with a note)
    hidden_group: str = ""

    @property
    def total_lag(self) -> int:
        return PARTITIONS * (RECORDS - COMMITTED)

    def args(self, role: str) -> list[str]:
        return list(self.cluster.cli_args(role))


def _where(cluster: Any) -> Where:
    """The test clients' settings: the admin's login on a secured cluster."""
    return cluster.conn("admin").to_librdkafka() if cluster.secured else cluster.bootstrap


def build(cluster: Any, tmp: Path) -> Scenario:
    u = uuid.uuid4().hex[:8]
    s = Scenario(cluster, f"sec_{u}", f"sec-{u}", f"sec-reset-a-{u}", f"sec-reset-m-{u}",
                 f"svc-{u}", tmp / f"registry-{u}.yaml", f"sec-hidden-{u}")
    where = _where(cluster)
    create_topic(where, s.topic, PARTITIONS)
    produce(where, s.topic, dict.fromkeys(range(PARTITIONS), RECORDS))
    for g, at in ((s.group, COMMITTED), (s.reset_group_admin, 5), (s.reset_group_monitor, 5),
                  (s.hidden_group, 1)):
        commit(where, g, {(s.topic, part): at for part in range(PARTITIONS)})
    s.registry.write_text(yaml.safe_dump({
        "topics": [{"name": s.topic, "partitions": PARTITIONS, "retention": "7d"}],
        "groups": [{"name": g, "topics": [s.topic]}
                   for g in (s.group, s.reset_group_admin, s.reset_group_monitor)],
        "security": {"principals": [{"name": s.service, "topics": {s.topic: ["WRITE"]}}]},
    }))
    if cluster.secured:
        from opskit.adapters.acls_admin import AclsAdmin
        from opskit.core.acls import AclEntry, monitor_acls

        with AclsAdmin(cluster.conn("admin"), timeout=15) as a:
            a.create_acls([*monitor_acls("monitor", [s.topic], [s.group, s.reset_group_admin,
                                                                s.reset_group_monitor]),
                           AclEntry(f"User:{s.service}", "TOPIC", s.topic, "WRITE")])
    return s
