"""The exporter against real Kafka: every family with known values, a deleted
group's series gone, brokers stopped and restarted under a running exporter."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition as CkTP
from confluent_kafka.admin import AdminClient
from prometheus_client.parser import text_string_to_metric_families

from opskit.core.connection import ConnectionConfig
from opskit.exporter import names
from opskit.exporter.collector import KafkaSource
from opskit.exporter.engine import Exporter
from opskit.exporter.options import ExporterOptions, NameFilter
from opskit.exporter.server import ExporterHTTPServer, WebConfig, serve_in_thread
from tests.helpers import ActiveMember, commit, create_topic, produce, stop_process

ROOT = Path(__file__).resolve().parents[2]
Values = dict[str, dict[tuple[tuple[str, str], ...], float]]


def parse(body: bytes) -> Values:
    out: Values = {}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, b""  # not listening (yet), or no answer within the timeout


def L(**kw: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(kw.items()))


@pytest.fixture
def engine_for() -> Iterator:  # type: ignore[no-untyped-def]
    made: list[tuple[Exporter, ExporterHTTPServer]] = []

    def make(bootstrap: str, uniq: str, **kw: object) -> tuple[Exporter, str]:
        opts = ExporterOptions(**{
            "interval_s": 3600, "collection_timeout_s": 60, "kafka_timeout_s": 10,
            "groups": NameFilter.of([f".*{uniq}.*"], None, "group"),
            "topics": NameFilter.of([f".*{uniq}.*"], None, "topic"), **kw})
        ex = Exporter(KafkaSource(ConnectionConfig(bootstrap), opts), opts)
        srv = ExporterHTTPServer(ex, WebConfig("127.0.0.1", 0))
        serve_in_thread(srv)
        made.append((ex, srv))
        return ex, f"http://127.0.0.1:{srv.port}/metrics"

    yield make
    for ex, srv in made:
        srv.shutdown()
        srv.server_close()
        ex.source.close()


def test_every_family_with_known_values_then_rates_then_deleted_group(any_kafka, uniq, engine_for):
    """On Kafka 3.7 and 4.x."""
    bs = any_kafka.bootstrap
    t, lost_t = f"exp_{uniq}", f"exp_lost_{uniq}"
    ga, gb, gc = f"exp-a-{uniq}", f"exp-b-{uniq}", f"exp-c-{uniq}"
    create_topic(bs, t, 3, config={"retention.ms": "3600000"})
    create_topic(bs, lost_t, 1)
    ts0 = int(time.time() * 1000) - 120_000
    produce(bs, t, {0: 10, 1: 5}, timestamp_ms=ts0)
    produce(bs, lost_t, {0: 10})
    commit(bs, ga, {(t, 0): 4, (t, 1): 5})
    commit(bs, gc, {(lost_t, 0): 2})
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.delete_records([CkTP(lost_t, 0, 6)]).values():
        f.result(30)

    ex, url = engine_for(bs, uniq)
    with ActiveMember(bs, gb, [t], commit_offsets={(t, 0): 10, (t, 1): 5, (t, 2): 0}):
        ex.run_cycle()
        code, body = get(url)
    assert code == 200
    v = parse(body)
    assert v["opskit_kafka_up"][()] == 1
    # --- kafka_exporter-compatible families
    assert v["kafka_brokers"][()] == 1
    assert list(v["kafka_broker_info"]) == [L(address=bs, id="0")]
    assert v["kafka_topic_partitions"] == {L(topic=t): 3, L(topic=lost_t): 1}  # filter: only ours
    p = {i: L(topic=t, partition=str(i)) for i in range(3)}
    assert [v["kafka_topic_partition_current_offset"][p[i]] for i in range(3)] == [10, 5, 0]
    assert v["kafka_topic_partition_oldest_offset"][p[0]] == 0
    assert v["kafka_topic_partition_oldest_offset"][L(topic=lost_t, partition="0")] == 6
    for fam, want in (("in_sync_replica", 1), ("leader", 0), ("leader_is_preferred", 1),
                      ("replicas", 1), ("under_replicated_partition", 0)):
        assert v[f"kafka_topic_partition_{fam}"][p[0]] == want, fam
    a = {i: L(consumergroup=ga, topic=t, partition=str(i)) for i in range(3)}
    assert v["kafka_consumergroup_current_offset"][a[0]] == 4
    assert v["kafka_consumergroup_lag"][a[0]] == 6
    assert v["kafka_consumergroup_lag"][a[1]] == 0
    assert a[2] not in v["kafka_consumergroup_lag"]  # never committed: absent, not negative
    assert v["kafka_consumergroup_lag_sum"][L(consumergroup=ga, topic=t)] == 6
    assert v["kafka_consumergroup_current_offset_sum"][L(consumergroup=ga, topic=t)] == 9
    assert v["kafka_consumergroup_members"][L(consumergroup=ga)] == 0
    assert v["kafka_consumergroup_members"][L(consumergroup=gb)] == 1
    # --- opskit families
    secs = v["opskit_consumergroup_lag_seconds"]
    assert 120 <= secs[a[0]] <= 180  # the record at offset 4 was stamped 120 s before the cycle
    assert secs[a[1]] == 0
    assert v["opskit_consumergroup_lag_seconds_max"][L(consumergroup=ga, topic=t)] == secs[a[0]]
    headroom = v["opskit_consumergroup_retention_headroom_seconds"][L(consumergroup=ga, topic=t)]
    assert headroom == pytest.approx(3600 - secs[a[0]], abs=1)
    assert v["opskit_consumergroup_records_lost"][L(consumergroup=gc, topic=lost_t)] == 4
    assert v["opskit_consumergroup_anomalies"][L(consumergroup=gc, kind="committed_below_log_start")] == 1
    assert v["opskit_consumergroup_anomalies"][L(consumergroup=ga, kind="no_committed_offset")] == 1
    assert v["opskit_consumergroup_state"][L(consumergroup=ga, state="Empty")] == 1
    assert v["opskit_consumergroup_state"][L(consumergroup=gb, state="Stable")] == 1
    assert v["opskit_consumergroup_status"][L(consumergroup=ga, status="OK")] == 1
    assert v["opskit_consumergroup_severity"][L(consumergroup=ga)] == 0
    assert v["opskit_topic_retention_ms"][L(topic=t)] == 3_600_000
    assert v["opskit_topic_size_bytes"][L(topic=t)] > 0
    for fam in ("under_replicated_partitions", "under_min_isr_partitions", "offline_partitions",
                "reassignments_in_progress"):
        assert v[f"opskit_cluster_{fam}"][()] == 0, fam
    assert v["opskit_cluster_controller_id"][()] == 0
    assert v["opskit_kraft_quorum_leader_id"][()] == 0
    assert v["opskit_kraft_quorum_voters"][()] == 1

    # --- second cycle: rates and catch-up from the history
    t1 = v["opskit_exporter_last_success_timestamp_seconds"][()]
    produce(bs, t, {0: 30})
    commit(bs, ga, {(t, 0): 10, (t, 1): 5})
    ex.run_cycle()
    v2 = parse(get(url)[1])
    dt = v2["opskit_exporter_last_success_timestamp_seconds"][()] - t1
    assert dt > 0
    assert v2["opskit_topic_messages_in_per_second"][L(topic=t)] == pytest.approx(30 / dt, rel=1e-3)
    assert v2["opskit_consumergroup_consume_rate"][L(consumergroup=ga, topic=t)] == pytest.approx(6 / dt, rel=1e-3)
    # produced 30, consumed 6: falling behind, so no ETA
    assert v2["opskit_consumergroup_falling_behind"][L(consumergroup=ga, topic=t)] == 1
    assert L(consumergroup=ga, topic=t) not in v2.get("opskit_consumergroup_catchup_eta_seconds", {})
    assert v2["opskit_topic_bytes_in_per_second"][L(topic=t)] > 0
    # every family of the contract has appeared in one of the two scrapes, except the
    # ones this single-broker scenario cannot produce
    seen = set(v) | set(v2)
    # (no ETA while falling behind: see the next test; a single voter has no followers)
    # (replication throttles: set and removed in test_exporter_throttles_live.py)
    # (the scrape period: only once a regular scraper was seen, which two scrapes are not;
    # test_cli_exporter_aligns_its_cycles_to_a_regular_scraper checks it)
    not_here = {"opskit_consumergroup_catchup_eta_seconds", "opskit_kraft_quorum_follower_lag",
                "opskit_broker_replication_throttle_bytes_per_second",
                "opskit_topic_throttled_replicas", "opskit_exporter_scrape_period_seconds"}
    assert names.exported_names() - not_here <= seen

    # --- a deleted group's series are gone at the next cycle
    for f in admin.delete_consumer_groups([ga]).values():
        f.result(30)
    ex.run_cycle()
    body3 = get(url)[1].decode()
    assert f'consumergroup="{ga}"' not in body3
    assert f'consumergroup="{gc}"' in body3


def test_catch_up_eta_when_consumer_is_faster(kafka, uniq, engine_for):
    bs = kafka.bootstrap
    t, g = f"exp_eta_{uniq}", f"exp-eta-{uniq}"
    create_topic(bs, t, 1)
    produce(bs, t, {0: 100})
    commit(bs, g, {(t, 0): 0})
    ex, url = engine_for(bs, uniq, lag_time=False, log_dirs=False)
    ex.run_cycle()
    t1 = parse(get(url)[1])["opskit_exporter_last_success_timestamp_seconds"][()]
    produce(bs, t, {0: 10})
    commit(bs, g, {(t, 0): 50})
    ex.run_cycle()
    v = parse(get(url)[1])
    dt = v["opskit_exporter_last_success_timestamp_seconds"][()] - t1
    net = (50 - 10) / dt
    assert v["opskit_consumergroup_catchup_eta_seconds"][L(consumergroup=g, topic=t)] == pytest.approx(60 / net, rel=1e-3)
    assert v["opskit_consumergroup_falling_behind"][L(consumergroup=g, topic=t)] == 0


@pytest.mark.three_brokers
def test_one_broker_down_of_three(kafka3, uniq):
    bs = kafka3.bootstrap
    t = f"exp_rf3_{uniq}"
    create_topic(bs, t, 3, rf=3, config={"min.insync.replicas": "2"})
    opts = ExporterOptions(interval_s=3600, collection_timeout_s=60, kafka_timeout_s=10,
                           topics=NameFilter.of([t], None, "topic"), expected_brokers=3)
    src = KafkaSource(ConnectionConfig(bs), opts)
    ex = Exporter(src, opts)
    try:
        ex.run_cycle()
        v = parse(ex.scrape())
        assert v["kafka_brokers"][()] == 3 and v["opskit_cluster_under_replicated_partitions"][()] == 0
        kafka3.sandbox.stop_node(2)
        try:
            deadline = time.time() + 60
            while True:  # the controller fences the stopped broker within seconds
                ex.run_cycle()
                v = parse(ex.scrape())
                if v.get("kafka_brokers", {}).get(()) == 2 and v["opskit_cluster_under_replicated_partitions"][()] == 3:
                    break
                assert time.time() < deadline, v.get("opskit_cluster_under_replicated_partitions")
                time.sleep(1)
            assert v["opskit_kafka_up"][()] == 1  # one broker down is not Kafka down
            assert v["opskit_cluster_brokers_expected"][()] == 3
            assert all(v["kafka_topic_partition_under_replicated_partition"][L(topic=t, partition=str(i))] == 1
                       for i in range(3))
            assert all(v["kafka_topic_partition_in_sync_replica"][L(topic=t, partition=str(i))] == 2
                       for i in range(3))
            assert v["opskit_cluster_at_min_isr_partitions"][()] == 3
        finally:
            kafka3.sandbox.start_node(2)
        deadline = time.time() + 90
        while True:
            ex.run_cycle()
            v = parse(ex.scrape())
            if v.get("kafka_brokers", {}).get(()) == 3 and v["opskit_cluster_under_replicated_partitions"][()] == 0:
                break
            assert time.time() < deadline
            time.sleep(1)
    finally:
        src.close()


def _free_port() -> int:
    from opskit.sandbox.ports import free_port_block  # below the ephemeral range

    return free_port_block(1)


def _wait(pred, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_cli_exporter_survives_all_brokers_down_and_recovers(tmp_path: Path):
    """The real command, as Prometheus would run against it: the only broker is
    stopped and restarted; every scrape answers; data goes stale, then comes back."""
    from opskit.sandbox.cluster import Sandbox
    from opskit.sandbox.ports import free_port_block

    sb = Sandbox(f"exp-down-{uuid.uuid4().hex[:6]}")
    st, _ = sb.up(brokers=1, port=free_port_block(1))
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "opskit.cli.main", "exporter", "--bootstrap", st.bootstrap,
         "--port", str(port), "--listen", "127.0.0.1", "--interval", "1s", "--timeout", "2",
         "--stale-after", "4s"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        def scrape() -> Values:
            code, body = get(base + "/metrics")  # a blocked scrape fails here after 5 s
            assert code == 200
            return parse(body)

        _wait(lambda: get(base + "/ready")[0] == 200 if proc.poll() is None else
              pytest.fail(proc.stderr.read().decode()), 60, "/ready")  # type: ignore[union-attr]
        _wait(lambda: scrape().get("opskit_kafka_up", {}).get(()) == 1, 30, "kafka up")
        sb.stop_node(0)
        v = _wait(lambda: (x := scrape())["opskit_kafka_up"][()] == 0 and x, 60, "kafka down")
        assert v["opskit_exporter_collection_errors_total"][L(kind="unreachable")] >= 1
        v = _wait(lambda: "kafka_brokers" not in (x := scrape()) and x, 60, "stale data dropped")
        assert "kafka_consumergroup_lag" not in v and v["opskit_kafka_up"][()] == 0
        assert get(base + "/healthz")[0] == 200  # Kafka down is not a reason to restart us
        assert get(base + "/ready")[0] == 200
        sb.start_node(0)
        v = _wait(lambda: (x := scrape())["opskit_kafka_up"][()] == 1 and "kafka_brokers" in x and x,
                  90, "recovery")
        assert v["kafka_brokers"][()] == 1
        assert proc.poll() is None  # never crashed
    finally:
        rc = stop_process(proc, grace=20)
        sb.down()
    assert rc == 0, proc.stderr.read().decode()[-2000:] if proc.stderr else ""


def test_served_engine_reads_slow_families_beside_its_cycles(kafka, uniq):
    """The running exporter: metadata, groups and offsets every cycle; configs, sizes,
    record times and the quorum on a thread of their own, on their own schedules, each
    served with its age. Numbers as in a single cycle."""
    bs = kafka.bootstrap
    t, g = f"exp_bg_{uniq}", f"exp-bg-{uniq}"
    create_topic(bs, t, 2, config={"retention.ms": "3600000"})
    produce(bs, t, {0: 10, 1: 5}, timestamp_ms=int(time.time() * 1000) - 60_000)
    commit(bs, g, {(t, 0): 4, (t, 1): 5})
    opts = ExporterOptions(interval_s=1, collection_timeout_s=60, kafka_timeout_s=10,
                           groups=NameFilter.of([g], None, "group"),
                           topics=NameFilter.of([t], None, "topic"))
    src = KafkaSource(ConnectionConfig(bs), opts)
    ex = Exporter(src, opts)
    ex.start()
    try:
        def ready() -> Values | None:
            v = parse(ex.scrape())
            secs = v.get("opskit_consumergroup_lag_seconds", {})
            ok = v.get("opskit_exporter_collections_total", {}).get((), 0) >= 4 and \
                L(consumergroup=g, topic=t, partition="0") in secs and \
                all(x == 1 for x in v["opskit_exporter_family_up"].values())
            return v if ok else None

        # (a slow family is 0 until its first read, beside the first cycles)
        v = _wait(ready, 120, "four cycles, every family read, lag in seconds from the "
                  "background reads")
    finally:
        ex.stop()
        src.close()
    assert v["opskit_kafka_up"][()] == 1
    assert v["kafka_consumergroup_lag"][L(consumergroup=g, topic=t, partition="0")] == 6
    assert v["opskit_consumergroup_lag_seconds"][L(consumergroup=g, topic=t, partition="0")] >= 60
    assert v["opskit_topic_retention_ms"][L(topic=t)] == 3_600_000
    refresh = v["opskit_exporter_family_refresh_seconds"]
    assert refresh[L(family="groups")] == 1 and refresh[L(family="topic_configs")] == 20
    assert refresh[L(family="log_dirs")] == 4
    age = v["opskit_exporter_data_age_seconds"]
    # configs were read once, at the start; groups in the latest cycle
    assert age[L(family="topic_configs")] > age[L(family="groups")]


def test_cli_exporter_aligns_its_cycles_to_a_regular_scraper(kafka, uniq):
    """The real command (collector process) scraped every P seconds at a fixed phase, as
    Prometheus does: the schedule becomes aligned to the scrapes, with their period, at
    most one cycle per scrape, and the data a scrape gets is younger than a fixed schedule
    of the same period serves on average (half a period plus the cycle's own time)."""
    bs = kafka.bootstrap
    t, g = f"exp_align_{uniq}", f"exp-align-{uniq}"
    create_topic(bs, t, 2)
    produce(bs, t, {0: 5, 1: 5})
    commit(bs, g, {(t, 0): 2, (t, 1): 5})
    period = 5.0
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "opskit.cli.main", "exporter", "--bootstrap", bs,
         "--port", str(port), "--listen", "127.0.0.1", "--interval", f"{period:g}s",
         "--group-allow", g, "--topic-allow", t],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait(lambda: get(base + "/ready")[1].startswith(b"kafka up") if proc.poll() is None else
              pytest.fail(proc.stderr.read().decode()), 90, "/ready")  # type: ignore[union-attr]
        seen: list[Values] = []
        t0 = time.monotonic()
        for i in range(10):  # one scraper, fixed phase: t0 + i * period
            time.sleep(max(0.0, t0 + i * period - time.monotonic()))
            code, body = get(base + "/metrics", timeout=period)
            assert code == 200
            seen.append(parse(body))
    finally:
        rc = stop_process(proc, grace=20)
    assert rc == 0, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
    last = seen[-1]
    assert last["opskit_exporter_schedule_aligned"][()] == 1
    assert abs(last["opskit_exporter_scrape_period_seconds"][()] - period) <= 0.1 * period
    assert last["kafka_consumergroup_lag"][L(consumergroup=g, topic=t, partition="0")] == 3
    aligned = [v for v in seen if v["opskit_exporter_schedule_aligned"][()] == 1]
    assert len(aligned) >= 4, [v["opskit_exporter_schedule_aligned"][()] for v in seen]
    ages = sorted(v["opskit_exporter_snapshot_age_seconds"][()] for v in aligned)
    cycles = sorted(v["opskit_exporter_collection_duration_seconds"][()] for v in aligned)
    median_age, median_cycle = ages[len(ages) // 2], cycles[len(cycles) // 2]
    assert median_age < period / 2 + median_cycle, (ages, cycles)
    # at most one cycle per scrape while aligned (CPU per minute does not rise)
    runs = [v["opskit_exporter_collections_total"][()] for v in aligned]
    assert runs[-1] - runs[0] <= len(aligned), runs
