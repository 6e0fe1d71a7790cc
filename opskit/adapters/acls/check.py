"""Before a mutation: does the principal hold the ACLs the change needs?

Kafka tells a client which operations it may perform on the cluster, a topic or a
group (the authorized operations of DescribeCluster, DescribeTopics and
DescribeGroups, KIP-430). A command that is about to change something asks first,
compares with its needs (:data:`opskit.core.acl_needs.COMMAND_NEEDS`) and refuses
with one line naming every missing ACL (exit 6), before it writes a backup or sends
the first change, instead of a backup followed by Kafka's refusal.

Topic creation is the exception: Kafka allows it with Create on the cluster *or* on
the topic (a prefixed ACL), and a topic that does not exist yet has no authorized
operations to ask for, so it is asked with a validate-only CreateTopics (which Kafka
authorizes like the real one and then discards).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from opskit.adapters.kafka import confluent as ck
from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.kafka.admin.errors import error_name
from opskit.core.acl_needs import missing_acls
from opskit.errors import NotAuthorisedError, OpskitError, UnsupportedError

log = logging.getLogger(__name__)

Ops = frozenset[str] | None


@dataclass(frozen=True)
class AuthorizedOps:
    """What the cluster says the principal may do (None: not told, not judged; an empty
    set: may not even describe it)."""

    cluster: Ops
    topics: dict[str, Ops]
    groups: dict[str, Ops]


def _names(ops: Iterable[Any] | None) -> Ops:
    return None if ops is None else frozenset(o.name for o in ops)


def authorized_operations(admin: KafkaAdmin, topics: Iterable[str] = (),
                          groups: Iterable[str] = ()) -> AuthorizedOps:
    a = admin
    cluster: Ops
    try:
        res = a._result(a._admin.describe_cluster(include_authorized_operations=True,
                                                  request_timeout=a.timeout),
                        "describing the cluster's authorized operations")
        cluster = _names(res.authorized_operations)
    except (UnsupportedError, NotAuthorisedError):
        cluster = None           # the broker does not tell (or the principal may not ask)
    topic_ops: dict[str, Ops] = {}
    names = sorted(set(topics))
    if names:
        futs = a._admin.describe_topics(ck.TopicCollection(names),
                                        include_authorized_operations=True,
                                        request_timeout=a.timeout)
        for name, fut in futs.items():
            try:
                topic_ops[name] = _names(a._result(fut, f"describing topic {name}")
                                         .authorized_operations)
            except (NotAuthorisedError, UnsupportedError):
                topic_ops[name] = frozenset()     # no Describe on it: lacks everything
            except OpskitError as e:
                log.debug("authorized operations of topic %s unknown: %s", name, e)
    group_ops: dict[str, Ops] = {}
    gids = sorted(set(groups))
    if gids:
        gfuts = a._admin.describe_consumer_groups(gids, include_authorized_operations=True,
                                                  request_timeout=a.timeout)
        for gid, gfut in gfuts.items():
            try:
                group_ops[gid] = _names(a._result(gfut, f"describing group {gid}")
                                        .authorized_operations)
            except NotAuthorisedError:
                group_ops[gid] = frozenset()
            except OpskitError as e:
                log.debug("authorized operations of group %s unknown: %s", gid, e)
    return AuthorizedOps(cluster, topic_ops, group_ops)


def refuse(admin: KafkaAdmin, command: str, missing: list[str],
           label: str | None = None) -> None:
    """NotAuthorisedError (exit 6) naming every ACL in ``missing``; nothing when empty.
    ``label``: the command as the user typed it (default: ``command``'s name)."""
    if missing:
        raise NotAuthorisedError(
            f"{label or command.split(' --')[0].removesuffix(' (dry run)')} refused before "
            "any change: "
            f"{admin.conn.principal} "
            f"lacks {', '.join(missing)} (grant them, or run as an admin principal); "
            "nothing changed")


def require_acls(admin: KafkaAdmin, command: str, topics: Iterable[str] = (),
                 groups: Iterable[str] = (),
                 only: frozenset[tuple[str, str]] | None = None,
                 label: str | None = None) -> None:
    """Refuse (exit 6, one line naming each missing ACL) unless the principal holds every
    required ACL of ``command`` (``only``: just these needs) on the cluster, ``topics``
    and ``groups``."""
    ops = authorized_operations(admin, topics, groups)
    refuse(admin, command, missing_acls(command, ops.cluster, ops.topics, ops.groups,
                                        only=only), label)


def create_refused(admin: KafkaAdmin,
                   topics: Iterable[tuple[str, int, int, Mapping[str, str]]]) -> list[str]:
    """The topics a validate-only CreateTopics says the principal may not create (no
    Create on the cluster nor on the topic). Other errors are left to the real request."""
    new = [ck.NewTopic(name, partitions, rf, config=dict(cfg))
           for name, partitions, rf, cfg in topics]
    if not new:
        return []
    futs = admin._admin.create_topics(new, validate_only=True,
                                      request_timeout=admin.timeout,
                                      operation_timeout=admin.timeout)
    out: list[str] = []
    for name, fut in futs.items():
        try:
            fut.result(timeout=admin.timeout + 2)
        except Exception as e:  # noqa: BLE001 - only the authorization failures matter here
            if error_name(e) in ("TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"):
                out.append(name)
            else:
                log.debug("validate-only creation of %s: %s", name, e)
    return sorted(out)


def require_topic_changes(admin: KafkaAdmin,
                          creates: list[tuple[str, int, int, dict[str, str]]],
                          partitions: Iterable[str], configs: Iterable[str]) -> None:
    """``topics apply --execute``: refuse (exit 6, each missing ACL named) unless the
    principal may create ``creates``, add partitions to ``partitions`` (Alter) and set
    configs of ``configs`` (AlterConfigs)."""
    parts, cfgs = set(partitions), set(configs)
    if not (creates or parts or cfgs):
        return
    command = "topics apply --execute"
    ops = authorized_operations(admin, parts | cfgs)
    missing = missing_acls(command, ops.cluster, {t: ops.topics.get(t) for t in parts},
                           only=frozenset({("topic", "ALTER")}))
    missing += missing_acls(command, ops.cluster, {t: ops.topics.get(t) for t in cfgs},
                            only=frozenset({("topic", "ALTER_CONFIGS")}))
    if creates and (ops.cluster is None or "CREATE" not in ops.cluster):
        missing += [f"Create on the cluster or on topic {t}"
                    for t in create_refused(admin, creates)]
    refuse(admin, command, missing)


def require_dr_restore(admin: KafkaAdmin,
                       creates: list[tuple[str, int, int, dict[str, str]]],
                       partitions: Iterable[str], configs: Iterable[str], acls: bool,
                       commits: Mapping[str, Iterable[str]]) -> None:
    """``dr restore --execute``: refuse (exit 6, each missing ACL named) unless the
    principal may do all of the plan: create ``creates``, add ``partitions``, set
    ``configs``, create ACLs (``acls``: Alter on the cluster) and commit the offsets of
    each group of ``commits`` (group -> its topics: Read on both), so that a principal
    without the rights does not leave a half-restored cluster."""
    command = "dr restore --execute"
    parts, cfgs = set(partitions), set(configs)
    read_topics = {t for ts in commits.values() for t in ts}
    ops = authorized_operations(admin, parts | cfgs | read_topics, commits)
    missing = missing_acls(command, ops.cluster, {t: ops.topics.get(t) for t in parts},
                           only=frozenset({("topic", "ALTER")}))
    missing += missing_acls(command, ops.cluster, {t: ops.topics.get(t) for t in cfgs},
                            only=frozenset({("topic", "ALTER_CONFIGS")}))
    if acls:
        missing += missing_acls(command, ops.cluster, {}, only=frozenset({("cluster", "ALTER")}))
    missing += missing_acls(command, None, {}, ops.groups, only=frozenset({("group", "READ")}))
    missing += missing_acls(command, None, {t: ops.topics.get(t) for t in read_topics},
                            only=frozenset({("topic", "READ")}))
    if creates and (ops.cluster is None or "CREATE" not in ops.cluster):
        missing += [f"Create on the cluster or on topic {t}"
                    for t in create_refused(admin, creates)]
    refuse(admin, command, missing)
