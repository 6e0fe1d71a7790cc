"""Each Burrow-style status reproduced once on a real broker (Kafka 3.7).

STALL and OK are in test_watch_throughput_snapshot.py. Here: WARN, REWIND,
STOP and both ways to ERR (records lost; a stopped partition in a critical
group). WARN and ERR (records lost) go through `opskit lag --window`;
REWIND, STOP and ERR (critical) use the sampler API that `--window` runs
(:func:`opskit.adapters.lag.sampler.sample_lag` with the real collector), because:

* STOP needs a committed offset unchanged for *longer than the window spans*,
  which one `--window W` run (samples from 0 to W) can never see: the sampler
  runs longer than its policy window here, as `--watch` does over 10 minutes;
* REWIND is triggered between two given samples (from the round callback),
  so the test does not depend on how long the CLI takes to start.

Windows are seconds long so the file runs in well under two minutes.
"""

from __future__ import annotations

import threading
from typing import Self

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTP
from confluent_kafka.admin import AdminClient
from helpers import commit, create_topic, produce, run_cli

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.lag.sampler import Sampling, judge_groups, sample_lag
from opskit.adapters.lag.timed.collect import collect_timed_lag
from opskit.cli import exits
from opskit.core.connection import ConnectionConfig
from opskit.core.models import LagThresholds
from opskit.core.status.window import StatusPolicy


class SlowConsumer:
    """Every ``step`` seconds: commit ``commit_by`` more, then produce ``produce_n`` more.

    Lag grows by produce_n - commit_by per step and, read at any instant, never
    falls between two reads a second apart: a consumer slower than its producers.
    """

    def __init__(self, bs: str, topic: str, group: str, start: int,
                 commit_by: int = 2, produce_n: int = 10, step: float = 0.25) -> None:
        self.c = Consumer({"bootstrap.servers": bs, "group.id": group,
                           "enable.auto.commit": False})
        self.p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
        self.topic, self.pos, self.commit_by, self.produce_n, self.step = (
            topic, start, commit_by, produce_n, step)
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            while not self.stop.wait(self.step):
                self.pos += self.commit_by
                self.c.commit(offsets=[CkTP(self.topic, 0, self.pos)], asynchronous=False)
                for _ in range(self.produce_n):
                    self.p.produce(self.topic, b"w" * 50, partition=0)
                self.p.flush(10)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.errors.append(e)

    def __enter__(self) -> Self:
        self.t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.t.join(15)
        self.c.close()


def test_warn_consumer_slower_than_producers(kafka, uniq):  # type: ignore[no-untyped-def]
    bs, t, g = kafka.bootstrap, f"warn_{uniq}", f"warn-{uniq}"
    create_topic(bs, t, 1)
    produce(bs, t, {0: 50})
    commit(bs, g, {(t, 0): 10})
    with SlowConsumer(bs, t, g, start=10) as sc:
        r = run_cli("lag", "-g", g, "-b", bs, "--window", "5s", "--interval", "1s",
                    "--no-time", "-o", "json")
    assert not sc.errors, sc.errors
    [grp] = r.json()["groups"]
    assert grp["status"] == "WARN", grp["reasons"]
    assert r.code == exits.WARNING
    [p] = grp["partitions"]
    assert p["status"] == "WARN" and "consumer slower than producers" in p["explanation"]
    # both offsets really moved: the producers faster than the commits
    assert grp["consume_rate"] > 0 and grp["produce_rate"] > grp["consume_rate"]
    assert grp["catch_up"]["state"] == "falling_behind"


def test_err_when_retention_deleted_unread_records(kafka, uniq):  # type: ignore[no-untyped-def]
    bs, t, g = kafka.bootstrap, f"errlost_{uniq}", f"errlost-{uniq}"
    create_topic(bs, t, 1)
    produce(bs, t, {0: 30})
    commit(bs, g, {(t, 0): 5})
    # delete records 0..19: what retention does; the group never read 5..19
    admin = AdminClient({"bootstrap.servers": bs})
    [fut] = admin.delete_records([CkTP(t, 0, 20)], request_timeout=15).values()
    assert fut.result(30).low_watermark == 20
    r = run_cli("lag", "-g", g, "-b", bs, "--window", "2s", "--interval", "1s", "-o", "json")
    [grp] = r.json()["groups"]
    assert grp["status"] == "ERR", grp["reasons"]
    assert r.code == exits.CRITICAL
    [p] = grp["partitions"]
    assert p["records_lost"] == 15 and "records lost" in p["explanation"]


def _sampler(bs: str, groups: list[str], policy: StatusPolicy, window_s: float,
             thresholds: dict[str, LagThresholds] | None = None,
             on_round=None) -> Sampling:  # type: ignore[no-untyped-def]
    admin = KafkaAdmin(ConnectionConfig(bs), timeout=10)
    th = thresholds or {}

    def collect():  # type: ignore[no-untyped-def]
        return collect_timed_lag(admin, False, groups,
                                 thresholds=lambda gid: th.get(gid, LagThresholds()))

    return sample_lag(collect, policy, interval_s=0.5, window_s=window_s, on_round=on_round)


def test_rewind_when_offsets_reset_backwards(kafka, uniq):  # type: ignore[no-untyped-def]
    bs, t, g = kafka.bootstrap, f"rewind_{uniq}", f"rewind-{uniq}"
    create_topic(bs, t, 1)
    produce(bs, t, {0: 100})
    commit(bs, g, {(t, 0): 80})

    def rewind_after_second_round(st: Sampling) -> None:
        if st.rounds == 2:
            commit(bs, g, {(t, 0): 20})  # an offset reset to an earlier position

    policy = StatusPolicy(window_ms=10_000, min_span_ms=1_000)
    st = _sampler(bs, [g], policy, window_s=2.0, on_round=rewind_after_second_round)
    [j] = judge_groups(st)
    assert j.status.status.value == "REWIND", j.status.reasons
    [p] = j.status.partitions
    assert "went back from 80 to 20" in p.explanation and p.lag == 80
    assert j.status.severity.nagios_code == exits.WARNING


def test_stop_and_err_for_a_stopped_critical_group(kafka, uniq):  # type: ignore[no-untyped-def]
    """A group that committed, stopped below the head, and has not committed for longer
    than the window is STOP; the same in a group above its critical threshold is ERR."""
    bs, t = kafka.bootstrap, f"stop_{uniq}"
    g_stop, g_crit = f"stop-{uniq}", f"stopcrit-{uniq}"
    create_topic(bs, t, 1)
    produce(bs, t, {0: 20})
    commit(bs, g_stop, {(t, 0): 15})  # lag 5, under the default thresholds
    commit(bs, g_crit, {(t, 0): 5})  # lag 15, above crit=10 below
    # window 2 s, sampled for 4.5 s: offsets unchanged for longer than the window spans
    policy = StatusPolicy(window_ms=2_000, min_span_ms=1_000)
    st = _sampler(bs, [g_stop, g_crit], policy, window_s=4.5,
                  thresholds={g_crit: LagThresholds(warn=1, crit=10)})
    verdicts = {j.status.group_id: j.status for j in judge_groups(st)}
    stop = verdicts[g_stop]
    assert stop.status.value == "STOP", stop.reasons
    [p] = stop.partitions
    assert p.lag == 5 and "unchanged for" in p.explanation and "not moving" in p.explanation
    assert stop.severity.nagios_code == exits.WARNING

    crit = verdicts[g_crit]
    assert crit.status.value == "ERR", crit.reasons
    [p] = crit.partitions
    assert p.lag == 15 and "the group is critical" in p.explanation
    assert crit.severity.nagios_code == exits.CRITICAL
