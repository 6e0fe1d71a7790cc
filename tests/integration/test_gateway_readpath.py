"""The read path on the REAL Hanzo Stream gateway, with HIP-30's six topics and groups.

One gateway (nats-server + the gateway binary, ``opskit.sandbox.compat``) for the
module; skipped when the binaries are not installed (scripts/install-compat.sh).
The scenario is produced and committed here, so every number is checked against
what the test wrote:

* the gateway answers an OffsetFetch naming two or more topics in a form
  librdkafka cannot parse (a per-topic error code Kafka's format lacks): ``lag``,
  ``offsets export``, ``offsets reset`` and ``exporter --once`` ask one topic per
  request and give the true numbers;
* it advertises DescribeConfigs and never answers it: ``health`` and ``exporter
  --once`` wait for it once per run, not once per read;
* it answers every ListOffsets by timestamp with offset 0: ``offsets reset
  --to-datetime`` verifies the answer against the records and refuses (exit 3).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from compat_fixtures import create_topics, require_binaries
from helpers import commit, produce, run_cli

from opskit.cli import exits
from opskit.sandbox import compat

#: HIP-30's topics and partition counts (small), and records produced per partition
TOPICS = {"events_plugin_ingestion": 3, "llm_usage": 2, "audit_log": 2, "agent_rpc_metering": 2,
          "billing_events": 1, "dead_letter": 1}
#: HIP-30's groups (opskit.sandbox.load.HIP30_GROUPS), some reading two topics
GROUPS = {"analytics-ingest": ["events_plugin_ingestion"],
          "billing-agg": ["llm_usage", "billing_events"],
          "llm-metrics": ["llm_usage"],
          "audit-archive": ["audit_log", "agent_rpc_metering", "dead_letter"],
          "rpc-billing": ["agent_rpc_metering"],
          "dead-letter-monitor": ["dead_letter"]}
#: records older than T_SPLIT on every partition, then newer ones
OLD_TS_MS = int(time.time() * 1000) - 7_200_000
NEW_TS_MS = OLD_TS_MS + 3_600_000


def records(topic: str, partition: int) -> tuple[int, int]:
    """(old, new) records produced on a partition: different everywhere."""
    i = sorted(TOPICS).index(topic)
    return 5 + i + 2 * partition, 3 + partition


def committed(group: str, topic: str, partition: int) -> int:
    return 1 + (sorted(GROUPS).index(group) + partition) % 5


@dataclass
class Gateway:
    bootstrap: str
    broker: compat.CompatBroker
    expected: dict[str, dict[tuple[str, int], tuple[int, int]]] = field(default_factory=dict)

    def args(self, timeout: float = 5.0) -> list[str]:
        return ["--bootstrap-server", self.bootstrap, "--timeout", f"{timeout:g}"]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    require_binaries("hanzo-stream")
    broker = compat.start_hanzo_stream(Path(tmp_path_factory.mktemp("gateway")))
    try:
        gw = Gateway(broker.bootstrap, broker)
        create_topics(gw.bootstrap, TOPICS)
        for t, n in TOPICS.items():
            produce(gw.bootstrap, t, {p: records(t, p)[0] for p in range(n)}, timestamp_ms=OLD_TS_MS)
            produce(gw.bootstrap, t, {p: records(t, p)[1] for p in range(n)}, timestamp_ms=NEW_TS_MS)
        for g, topics in GROUPS.items():
            offs = {(t, p): committed(g, t, p) for t in topics for p in range(TOPICS[t])}
            commit(gw.bootstrap, g, offs)
            gw.expected[g] = {tp: (o, sum(records(*tp))) for tp, o in offs.items()}
        yield gw
    finally:
        broker.stop()


def _rows(data: dict[str, object], group: str) -> dict[tuple[str, int], dict[str, object]]:
    [g] = [g for g in data["groups"] if g["group"] == group]  # type: ignore[attr-defined,index]
    return {(p["topic"], p["partition"]): p for p in g["partitions"]}


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_lag_gives_the_true_numbers(gateway: Gateway, group: str) -> None:
    """Before: exit 6 'failed to parse response ... Read underflow' on every group (the
    no-DescribeGroups path names every topic of the cluster in one OffsetFetch)."""
    r = run_cli("lag", "--group", group, "-o", "json", *gateway.args())
    assert r.code == exits.OK, r.out + r.err
    data = r.json()
    rows = _rows(data, group)
    want = gateway.expected[group]
    assert set(rows) == set(want), (sorted(rows), sorted(want))
    for tp, (off, end) in want.items():
        row = rows[tp]
        assert (row["committed_offset"], row["log_start_offset"], row["log_end_offset"],
                row["lag"]) == (off, 0, end, end - off), (tp, row)
        # the first unconsumed record is an old one: its age is at least 2 h
        assert row["lag_seconds"] is not None and row["lag_seconds"] >= 7000, (tp, row)
    [g] = data["groups"]
    assert g["state"] == "Unknown" and g["members"] is None and "DescribeGroups" in g["state_note"]


def test_lag_no_time_and_table(gateway: Gateway) -> None:
    group = "audit-archive"  # three topics
    want = gateway.expected[group]
    r = run_cli("lag", "--group", group, "--no-time", "-o", "json", *gateway.args())
    assert r.code == exits.OK, r.out + r.err
    rows = _rows(r.json(), group)
    assert {tp: (row["committed_offset"], row["log_end_offset"]) for tp, row in rows.items()} \
        == {tp: v for tp, v in want.items()}
    r = run_cli("lag", "--group", group, *gateway.args())
    assert r.code == exits.OK, r.out + r.err
    total = sum(end - off for off, end in want.values())
    assert f"lag={total}" in r.out.replace(",", ""), r.out


def test_offsets_export(gateway: Gateway) -> None:
    group = "billing-agg"
    r = run_cli("offsets", "export", "--group", group, *gateway.args())
    assert r.code == exits.OK, r.out + r.err
    got = {(t, int(p)): int(o) for t, p, o in (ln.split(",") for ln in r.out.split())}
    assert got == {tp: off for tp, (off, _end) in gateway.expected[group].items()}


@pytest.mark.parametrize("execute", [False, True])
def test_offsets_reset_plans_the_true_numbers(gateway: Gateway, execute: bool) -> None:
    """The plan is right (current offsets from the named partitions, targets from
    ListOffsets); the reset itself is refused (exit 5) on either run, since without
    DescribeGroups opskit cannot check that no consumer is active. Nothing changes."""
    group = "audit-archive"
    want = gateway.expected[group]
    extra = ["--execute", "--yes"] if execute else []
    r = run_cli("offsets", "reset", "--group", group, "--to-latest", "--all-topics", "-o", "json",
                *extra, *gateway.args())
    assert r.code == exits.REFUSED, r.out + r.err
    [plan] = r.json()["groups"]
    rows = {(p["topic"], p["partition"]): p for p in plan["rows"]}
    assert {tp: (row["current_offset"], row["target_offset"]) for tp, row in rows.items()} == \
        {tp: (off, end) for tp, (off, end) in want.items()}, rows
    assert plan["refusal"] and "Unknown" in plan["refusal"]
    r = run_cli("offsets", "export", "--group", group, *gateway.args())
    got = {(t, int(p)): int(o) for t, p, o in (ln.split(",") for ln in r.out.split())}
    assert got == {tp: off for tp, (off, _end) in want.items()}  # unchanged


def _metrics(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def test_exporter_once_gives_the_true_numbers(gateway: Gateway) -> None:
    groups = ["billing-agg", "audit-archive"]
    allow = [a for g in groups for a in ("--group-allow", g)]
    r = run_cli("exporter", "--once", *allow, *gateway.args())
    # exit 3: the families the gateway cannot give (configs, log dirs, quorum) are named
    # as not collected; the group series are there
    assert r.code in (exits.OK, exits.UNKNOWN), r.err[-2000:]
    assert "offsets" not in r.err and "groups could not" not in r.err, r.err[-2000:]
    m = _metrics(r.out)
    for g in groups:
        per_topic: dict[str, int] = {}
        for (t, _p), (off, end) in gateway.expected[g].items():
            per_topic[t] = per_topic.get(t, 0) + end - off
        for t, lag in per_topic.items():
            assert m[f'kafka_consumergroup_lag_sum{{consumergroup="{g}",topic="{t}"}}'] == lag


def test_an_unanswered_describe_configs_is_waited_for_once(gateway: Gateway) -> None:
    """The gateway advertises DescribeConfigs and never answers it. Before: every read
    waited out its timeout again (health 13 s, exporter --once 27 s at --timeout 10)."""
    from opskit.adapters.kafka.admin.client import KafkaAdmin
    from opskit.core.connection import ConnectionConfig
    from opskit.errors import UnsupportedError

    with KafkaAdmin(ConnectionConfig(gateway.bootstrap), timeout=2.0) as admin:
        with pytest.raises(UnsupportedError, match="answers ApiVersions but not DescribeConfigs"):
            admin.topic_configs(["llm_usage"])
        for _ in range(2):  # remembered: refused at once, saying what was seen
            with pytest.raises(UnsupportedError, match="advertises but does not serve "
                               "DescribeConfigs .no answer within 2s"):
                admin.topic_configs(["audit_log"])
        with pytest.raises(UnsupportedError, match="advertises but does not serve"):
            admin.broker_configs([1])
        assert "DescribeConfigs" in admin.quirks.to_dict()["apis_not_served"]  # type: ignore[operator]
    r = run_cli("health", "-o", "json", *gateway.args(timeout=2.0))
    assert r.code == exits.UNKNOWN, r.out + r.err  # (no quorum, no reassignments to read)
    isr = [f for f in r.json()["findings"] if f["check"] == "under_min_isr"]
    assert isr and "not readable" in isr[0]["message"] and "DescribeConfigs" in isr[0]["message"]


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def test_reset_by_time_refuses_the_gateways_answers(gateway: Gateway) -> None:
    """The gateway answers every lookup by time with offset 0. Between the old and the new
    records Kafka would answer the first new one; the gateway's 0 is disproved by the
    record there and the reset by time is refused (exit 3, one line). Before: a plan that
    replays every old record (only the refusal for the unknown group state stopped it)."""
    group = "billing-agg"
    between = _iso(OLD_TS_MS + 1_800_000)
    for extra in ([], ["--execute", "--yes"]):
        r = run_cli("offsets", "reset", "--group", group, "--all-topics", "--to-datetime",
                    between, *extra, *gateway.args())
        assert r.code == exits.UNKNOWN, r.out + r.err
        errors = [ln for ln in r.err.splitlines() if ln.startswith("opskit: error:")]
        assert len(errors) == 1 and "cannot be trusted with offsets by time" in errors[0], r.err
        assert "record at offset 0 is older" in errors[0], errors
    r = run_cli("offsets", "export", "--group", group, *gateway.args())
    got = {(t, int(p)): int(o) for t, p, o in (ln.split(",") for ln in r.out.split())}
    assert got == {tp: off for tp, (off, _end) in gateway.expected[group].items()}  # unchanged


def test_reset_by_time_before_every_record_is_planned(gateway: Gateway) -> None:
    """Before every record, offset 0 is Kafka's answer too: the record there is newer,
    nothing disproves it, and the plan goes to the log start (then the usual refusal for
    a group whose state cannot be read)."""
    group = "billing-agg"
    r = run_cli("offsets", "reset", "--group", group, "--all-topics", "--to-datetime",
                _iso(OLD_TS_MS - 60_000), "-o", "json", *gateway.args())
    assert r.code == exits.REFUSED, r.out + r.err
    [plan] = r.json()["groups"]
    assert {(p["topic"], p["partition"]): p["target_offset"] for p in plan["rows"]} == \
        dict.fromkeys(gateway.expected[group], 0)
