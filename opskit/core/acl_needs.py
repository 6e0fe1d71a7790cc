"""The Kafka ACLs each opskit command needs, and what it does without the optional ones
(pure data; the README table and ``opskit acls monitor-principal`` are made from it).

Checked on a secured sandbox (StandardAuthorizer, ``allow.everyone.if.no.acl.found=false``)
by ``tests/integration/test_security_matrix.py`` for a HIP-30 monitor (Describe on the
cluster, topics and groups; no Read, no DescribeConfigs): it gets the admin's numbers and
each optional ACL it lacks gives the note listed here. The "without it" of a cluster
Describe is what the code does, not part of that matrix.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Need:
    resource: str  # "cluster", "topic", "group"
    operation: str  # Kafka operation, upper case
    why: str
    #: without it: None when the command cannot run (refused, exit code in ``why``),
    #: else what the command does instead
    without: str | None = None

    @property
    def optional(self) -> bool:
        return self.without is not None


_NO_TIME = "lag in time is omitted (marked read_denied), never reported as 0"

#: command -> ACLs it asks for. Read-only commands first; a monitor holds their required ones.
COMMAND_NEEDS: dict[str, tuple[Need, ...]] = {
    "lag": (
        Need("topic", "DESCRIBE", "metadata, log offsets, committed offsets of the topic"),
        Need("group", "DESCRIBE", "find the coordinator, describe the group, read its offsets"),
        Need("topic", "READ", "lag in time (the record at the committed offset)", _NO_TIME),
        Need("topic", "DESCRIBE_CONFIGS", "retention headroom",
             "retention headroom is omitted with a note"),
    ),
    "health": (
        Need("cluster", "DESCRIBE", "KRaft quorum and reassignments in progress",
             "those checks are UNKNOWN, naming the ACL"),
        Need("topic", "DESCRIBE", "partitions, leaders, replicas, ISR"),
        Need("topic", "DESCRIBE_CONFIGS", "min.insync.replicas per topic",
             "the broker default is used, with a note"),
    ),
    "throughput": (
        Need("topic", "DESCRIBE", "log end offsets"),
        Need("cluster", "DESCRIBE", "bytes/s (DescribeLogDirs)", "bytes/s omitted"),
    ),
    "snapshot": (
        Need("topic", "DESCRIBE", "as lag and health"),
        Need("group", "DESCRIBE", "as lag"),
        Need("cluster", "DESCRIBE", "as health", "as health"),
    ),
    "exporter": (
        Need("topic", "DESCRIBE", "as lag"),
        Need("group", "DESCRIBE", "as lag"),
        Need("cluster", "DESCRIBE", "quorum, log dir sizes", "those series are omitted"),
        Need("topic", "READ", "opskit_consumergroup_lag_seconds", "the lag seconds series is "
             "omitted for those partitions (never exported as 0)"),
        Need("topic", "DESCRIBE_CONFIGS", "retention headroom series", "omitted"),
    ),
    "topics diff": (
        Need("topic", "DESCRIBE", "partitions and replication factor"),
        Need("topic", "DESCRIBE_CONFIGS", "config drift",
             "config drift is not judged, with a note (exit from partitions alone)"),
    ),
    "acls diff": (
        Need("cluster", "DESCRIBE", "read every ACL binding"),
    ),
    "topics apply --execute": (
        Need("cluster", "CREATE", "create missing topics"),
        Need("topic", "ALTER", "add partitions"),
        Need("topic", "ALTER_CONFIGS", "fix configs"),
    ),
    "acls apply --execute": (
        Need("cluster", "DESCRIBE", "read the current ACLs (and back them up)"),
        Need("cluster", "ALTER", "create and delete ACLs (checked first: refused with exit "
             "6 before the backup, nothing changed)"),
    ),
    "acls restore --execute": (
        Need("cluster", "DESCRIBE", "read the current ACLs (and back them up)"),
        Need("cluster", "ALTER", "create and delete ACLs (checked first, as acls apply)"),
    ),
    "offsets reset (dry run)": (
        Need("topic", "DESCRIBE", "log offsets"),
        Need("group", "DESCRIBE", "group state and committed offsets"),
    ),
    "offsets reset --execute": (
        Need("group", "READ", "commit the new offsets (checked first: refused with exit 6 "
             "before the backup, nothing committed)"),
        Need("topic", "READ", "commit the new offsets"),
    ),
    "dr snapshot": (
        Need("topic", "DESCRIBE", "topics and offsets"),
        Need("topic", "DESCRIBE_CONFIGS", "topic overrides"),
        Need("group", "DESCRIBE", "committed offsets"),
        Need("cluster", "DESCRIBE", "ACLs", "ACLs not recorded, with a note"),
        Need("topic", "READ", "record timestamps at the committed offsets (refused: exit 6, "
             "nothing written)"),
    ),
    "dr restore (dry run)": (
        Need("topic", "DESCRIBE", "topics and log offsets on the target"),
        Need("topic", "DESCRIBE_CONFIGS", "topic overrides on the target (refused: exit 6)"),
        Need("group", "DESCRIBE", "group states on the target"),
        Need("cluster", "DESCRIBE", "the target's ACLs, when the snapshot has some"),
    ),
    "dr restore --execute": (
        Need("cluster", "CREATE", "create topics"),
        Need("topic", "ALTER", "add partitions"),
        Need("topic", "ALTER_CONFIGS", "set topic overrides"),
        Need("group", "READ", "set group offsets"),
        Need("topic", "READ", "set group offsets (on the groups' topics)"),
        Need("cluster", "ALTER", "create the recorded ACLs (all checked first: refused with "
             "exit 6 before any change)"),
    ),
    "reassign plan": (
        Need("topic", "DESCRIBE", "partitions and replicas"),
        Need("topic", "DESCRIBE_CONFIGS", "min.insync.replicas of the topics (refused: exit 6)"),
    ),
    "reassign status": (
        Need("cluster", "DESCRIBE", "ListPartitionReassignments"),
        Need("cluster", "DESCRIBE_CONFIGS", "throttle rates set on the brokers",
             "broker throttles are not shown, with a note"),
    ),
    "reassign verify": (
        Need("cluster", "DESCRIBE", "ListPartitionReassignments"),
        Need("cluster", "DESCRIBE_CONFIGS", "throttle rates left on the brokers"),
        Need("topic", "DESCRIBE_CONFIGS", "throttled replica lists left on the topics"),
    ),
    "reassign execute --execute": (
        Need("cluster", "DESCRIBE", "ListPartitionReassignments"),
        Need("cluster", "ALTER", "AlterPartitionReassignments and the preferred leader election "
             "(checked first: refused with exit 6, nothing changed)"),
        Need("cluster", "DESCRIBE_CONFIGS", "the throttle values to restore afterwards"),
        Need("cluster", "ALTER_CONFIGS", "throttle rates on the brokers"),
        Need("topic", "DESCRIBE_CONFIGS", "min.insync.replicas, throttled replica lists"),
        Need("topic", "ALTER_CONFIGS", "throttled replica lists"),
    ),
    "reassign cancel --execute": (
        Need("cluster", "DESCRIBE", "ListPartitionReassignments"),
        Need("cluster", "ALTER", "AlterPartitionReassignments (checked first: refused with "
             "exit 6, nothing changed)"),
    ),
}

#: the commands a read-only monitor runs (``opskit acls monitor-principal``)
MONITOR_COMMANDS = ("lag", "health", "throughput", "snapshot", "exporter", "topics diff")


_OP_NAMES = {"DESCRIBE": "Describe", "ALTER": "Alter", "DESCRIBE_CONFIGS": "DescribeConfigs",
             "ALTER_CONFIGS": "AlterConfigs", "READ": "Read", "CREATE": "Create"}


def missing_acls(command: str, cluster_ops: frozenset[str] | None,
                 topic_ops: dict[str, frozenset[str] | None],
                 group_ops: dict[str, frozenset[str] | None] | None = None, *,
                 only: frozenset[tuple[str, str]] | None = None) -> list[str]:
    """The required ACLs of ``command`` the principal lacks, as "Alter on the cluster",
    "AlterConfigs on topic T", "Read on group G", from the operations the cluster says it
    may perform (DescribeCluster / DescribeTopics / DescribeGroups authorized operations;
    None: not told, not judged). ``only``: just these (resource, operation) needs (the
    ones the change at hand uses)."""
    out: list[str] = []
    for need in COMMAND_NEEDS[command]:
        if need.optional or (only is not None and (need.resource, need.operation) not in only):
            continue
        op = _OP_NAMES.get(need.operation, need.operation)
        if need.resource == "cluster":
            if cluster_ops is not None and need.operation not in cluster_ops:
                out.append(f"{op} on the cluster")
        else:
            named = topic_ops if need.resource == "topic" else (group_ops or {})
            out += [f"{op} on {need.resource} {n}" for n, ops in sorted(named.items())
                    if ops is not None and need.operation not in ops]
    return out
