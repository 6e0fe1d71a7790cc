"""`opskit lag -o json` must equal Kafka's own kafka-consumer-groups.sh --describe.

Three groups on the same cluster, on both Kafka 3.7 and the newest 4.x:
- an active group whose member was assigned partitions it never committed on;
- an Empty (stopped) group with committed offsets on only some partitions;
- a group with offsets on two topics, one of them fully consumed.
"""

from __future__ import annotations

import pytest

from tests.helpers import ActiveMember, commit, create_topic, parse_describe, produce, run_cli


def test_lag_equals_kafka_consumer_groups_describe(any_kafka, uniq):
    bs = any_kafka.bootstrap
    ta, tb = f"orders_{uniq}", f"audit_{uniq}"
    create_topic(bs, ta, 4)
    create_topic(bs, tb, 2)
    produce(bs, ta, {0: 50, 1: 70, 2: 30, 3: 0})
    produce(bs, tb, {0: 20, 1: 25})
    g_active, g_empty, g_two = f"active-{uniq}", f"stopped-{uniq}", f"two-topics-{uniq}"
    commit(bs, g_empty, {(ta, 0): 10, (ta, 2): 30})
    commit(bs, g_two, {(ta, 0): 50, (ta, 1): 5, (ta, 2): 0, (ta, 3): 0, (tb, 0): 20, (tb, 1): 3})
    with ActiveMember(bs, g_active, [tb], commit_offsets={(tb, 0): 7}, client_id="member-x"):
        groups = [g_active, g_empty, g_two]
        ours = run_cli("lag", *[a for g in groups for a in ("--group", g)], "-o", "json",
                       "--bootstrap-server", bs)
        dist = any_kafka.dist()
        proc = dist.run_tool(dist.consumer_groups_class, "--bootstrap-server", bs, "--describe",
                             *[a for g in groups for a in ("--group", g)])
    assert proc.returncode == 0, proc.stderr
    theirs = parse_describe(proc.stdout)
    assert ours.code == 0, ours.err
    data = ours.json()
    by_key = {(g["group"], p["topic"], p["partition"]): p for g in data["groups"] for p in g["partitions"]}

    # every row Kafka's tool prints is in opskit's output with the same numbers
    assert len(theirs) >= 8, proc.stdout
    for key, row in theirs.items():
        assert key in by_key, f"{key} missing from opskit output"
        p = by_key[key]
        want_committed = None if row["CURRENT-OFFSET"] is None else int(row["CURRENT-OFFSET"])
        assert p["committed_offset"] == want_committed, key
        assert p["log_end_offset"] == int(str(row["LOG-END-OFFSET"])), key
        want_lag = None if row["LAG"] is None else int(row["LAG"])
        assert p["lag"] == want_lag, key
        assert p["consumer_id"] == row["CONSUMER-ID"], key
        assert p["client_id"] == row["CLIENT-ID"], key
        assert (p["host"] or None) == (row["HOST"].lstrip("/") if row["HOST"] else None), key

    # opskit shows more: partitions of a consumed topic that the group never committed on
    # (the tool hides them when no member is assigned to them); they are marked as such
    extra = set(by_key) - set(theirs)
    assert {(g_empty, ta, 1), (g_empty, ta, 3)} <= extra
    for key in extra:
        p = by_key[key]
        assert p["committed_offset"] is None and p["lag"] is None and p["consumer_id"] is None
        assert "no_committed_offset" in p["anomalies"]

    # the active member owns tb:1 without a commit: both tools show it, lag unknown
    assert by_key[(g_active, tb, 1)]["client_id"] == "member-x"
    assert by_key[(g_active, tb, 1)]["lag"] is None
    # totals are the sum of known partition lags
    totals = {g["group"]: g["total_lag"] for g in data["groups"]}
    assert totals[g_empty] == 40 + 0
    assert totals[g_two] == 0 + 65 + 30 + 0 + 0 + 22
    states = {g["group"]: g["state"] for g in data["groups"]}
    assert states[g_active] == "Stable" and states[g_empty] == "Empty"


def _commit_raw(bootstrap: str, group: str, tp: tuple[str, int], offset: int) -> None:
    """Commit ``offset`` as given (kafka-python sends it unchecked; Kafka keeps it)."""
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        c.assign([TopicPartition(*tp)])
        c.commit({TopicPartition(*tp): OffsetAndMetadata(offset, "", -1)})
    finally:
        c.close()


def _delete_group(bs: str, group: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bs})  # (kept: a dropped client never answers)
    admin.delete_consumer_groups([group], request_timeout=30)[group].result(60)


@pytest.mark.parametrize("path", ["protocol", "librdkafka"])
def test_a_negative_commit_is_listed_and_unknown_never_ok(kafka, uniq, path, monkeypatch):
    """Kafka keeps a committed offset of -5 (a client committed it) and its tool lists the
    partition with no offset and no lag. opskit dropped it as "no commit": the group
    showed no partition, lag 0, OK, exit 0. Now the partition is listed, flagged, and
    the group is UNKNOWN (exit 3) on both read paths."""
    bs = kafka.bootstrap
    t, g = f"neg_{uniq}", f"neg-{uniq}"
    create_topic(bs, t, 2)
    produce(bs, t, {0: 10, 1: 4})
    _commit_raw(bs, g, (t, 0), -5)
    try:
        if path == "librdkafka":  # the same broker read through librdkafka (no protocol client)
            monkeypatch.setattr("opskit.adapters.kafka.reader.usable", lambda _c: False)
        dist = kafka.dist()
        proc = dist.run_tool(dist.consumer_groups_class, "--bootstrap-server", bs, "--describe",
                             "--group", g)
        assert proc.returncode == 0, proc.stderr
        theirs = parse_describe(proc.stdout)
        assert theirs[(g, t, 0)]["CURRENT-OFFSET"] is None and theirs[(g, t, 0)]["LAG"] is None

        ours = run_cli("lag", "--group", g, "-o", "json", "--bootstrap-server", bs)
        assert ours.code == 3, (ours.code, ours.out, ours.err)
        (grp,) = ours.json()["groups"]
        assert grp["severity"] == "UNKNOWN", grp
        by_p = {p["partition"]: p for p in grp["partitions"] if p["topic"] == t}
        assert by_p[0]["committed_offset"] is None and by_p[0]["lag"] is None, by_p[0]
        assert by_p[0]["log_end_offset"] == 10
        assert "committed_invalid" in by_p[0]["anomalies"], by_p[0]
        table = run_cli("lag", "--group", g, "--bootstrap-server", bs)
        assert table.code == 3 and "committed_invalid" in table.out, table.out
        # the group's and the topic's totals: the known part is a floor, never a plain "lag 0"
        assert f"{g}  state=Empty  members=0  lag=>=0" in table.out, table.out
        assert (f"total {t}: lag at least 0 over 2 partitions, 1 without commit, 1 unknown"
                in table.out), table.out
        # partitions asked for by name: the one without a commit is "no commit" (librdkafka
        # answers it -1001), the negative one stays flagged
        named = run_cli("lag", "--group", g, "--topic", t, "-o", "json", "--bootstrap-server", bs)
        assert named.code == 3, (named.out, named.err)
        rows = {p["partition"]: p["anomalies"] for g_ in named.json()["groups"]
                for p in g_["partitions"]}
        assert rows == {0: ["committed_invalid"], 1: ["no_committed_offset"]}, rows
    finally:
        # the group keeps its -5 on the shared cluster: every later "lag --all-groups"
        # there would be UNKNOWN (exit 3)
        _delete_group(bs, g)
