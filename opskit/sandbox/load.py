"""Realistic HIP-30 traffic for a sandbox: envelope events and consumer groups.

Producers write HIP-30 envelope events (``schema``, ``id``, ``type``,
``source``, ``timestamp``, ``team_id``/``org_id``, ``data``) to the registry
topics, keyed as HIP-30 says. Consumer groups run with a chosen behaviour so
that the on-call scenarios exist on demand:

- ``healthy``: keeps up, commits every second;
- ``lagging``: processes at a fraction of the produce rate, lag grows;
- ``stopped``: consumes for a few seconds, commits, and leaves (Empty group
  with committed offsets: lag grows while nobody consumes);
- ``partial``: an active member that only ever commits on even partitions, so
  the odd ones have no committed offset.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTP

from opskit.core.connection import ConnectionConfig
from opskit.errors import UsageError

log = logging.getLogger(__name__)

#: share of the total produce rate per topic (HIP-30 volumes: ingestion dominates)
TOPIC_WEIGHTS = {
    "events_plugin_ingestion": 0.50,
    "llm_usage": 0.25,
    "audit_log": 0.10,
    "agent_rpc_metering": 0.10,
    "billing_events": 0.04,
    "dead_letter": 0.01,
}
KEY_FIELD = {
    "events_plugin_ingestion": "team_id", "llm_usage": "team_id", "billing_events": "org_id",
    "audit_log": "org_id", "agent_rpc_metering": "agent_id", "dead_letter": "source_topic",
}
MODES = ("healthy", "lagging", "stopped", "partial")


@dataclass
class GroupPlan:
    group: str
    topics: list[str]
    mode: str = "healthy"
    consumers: int = 1
    #: for lagging: fraction of the topic's produce rate it can process
    speed: float = 0.3
    #: for stopped: seconds of consumption before it leaves
    stop_after: float = 3.0


#: the default HIP-30 scenario: one of each on-call situation
HIP30_GROUPS = [
    GroupPlan("analytics-ingest", ["events_plugin_ingestion"], "healthy", consumers=2),
    GroupPlan("billing-agg", ["llm_usage"], "lagging", speed=0.3),
    GroupPlan("llm-metrics", ["llm_usage"], "healthy"),
    GroupPlan("audit-archive", ["audit_log"], "stopped", stop_after=3.0),
    GroupPlan("rpc-billing", ["agent_rpc_metering"], "partial"),
    GroupPlan("dead-letter-monitor", ["dead_letter"], "healthy"),
]

_B32 = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def event_id(rnd: random.Random, now_ms: int) -> str:
    """A ULID-shaped id: 48-bit time, 80 random bits, Crockford base32."""
    t = "".join(_B32[(now_ms >> (5 * i)) & 31] for i in reversed(range(10)))
    return "evt_" + t + "".join(rnd.choice(_B32) for _ in range(16))


def iso_ms(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.") + \
        f"{int(ts * 1000) % 1000:03d}Z"


def make_event(topic: str, rnd: random.Random, now: float) -> tuple[str, dict[str, Any]]:
    """A HIP-30 envelope for ``topic`` and its partition key."""
    team = f"team_{rnd.randrange(200):04d}"
    org = f"org_{rnd.randrange(40):03d}"
    now_ms = int(now * 1000)
    env: dict[str, Any] = {"schema": "hanzo.stream.v1", "id": event_id(rnd, now_ms),
                           "timestamp": iso_ms(now)}
    if topic == "events_plugin_ingestion":
        env.update(type="insights.event.captured", source="insights-capture", team_id=team, data={
            "event": rnd.choice(["$pageview", "$autocapture", "signup", "$pageleave"]),
            "distinct_id": f"user_{rnd.randrange(10000)}",
            "properties": {"$current_url": "https://hanzo.ai/dashboard", "$browser": "Chrome"},
            "session_id": f"sess_{rnd.randrange(10**6)}"})
    elif topic == "llm_usage":
        p, c = rnd.randrange(10, 2000), rnd.randrange(10, 2000)
        env.update(type="llm.usage.completed", source="llm-gateway", team_id=team, org_id=org, data={
            "request_id": f"req_{rnd.randrange(10**9)}", "model": rnd.choice(["zen-72b", "zen-8b"]),
            "provider": "together", "prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c,
            "latency_ms": rnd.randrange(50, 5000), "cost_usd": round((p + c) * 1e-5, 6),
            "cache_hit": rnd.random() < 0.1, "stream": True})
    elif topic == "billing_events":
        env.update(type="billing.usage.hourly", source="billing-agg", org_id=org, team_id=team,
                   data={"hour": iso_ms(now - now % 3600), "cost_usd": round(rnd.random() * 10, 4)})
    elif topic == "audit_log":
        env.update(type=rnd.choice(["iam.auth.login_success", "iam.auth.login_failed"]), source="iam",
                   org_id=org, data={"user_id": f"user_{rnd.randrange(10000)}", "method": "oauth2"})
    elif topic == "agent_rpc_metering":
        agent = f"agent_{rnd.randrange(500):04d}"
        env.update(type="agent.rpc.metered", source="bot-gateway", team_id=team, data={
            "agent_id": agent, "rpc_calls": rnd.randrange(1, 50), "units": rnd.randrange(1, 1000)})
        return agent, env
    elif topic == "dead_letter":
        src = rnd.choice(list(KEY_FIELD)[:5])
        env.update(type="stream.dead_letter", source="analytics-ingest", data={
            "source_topic": src, "reason": "schema validation failed: missing field 'type'",
            "original": "{\"id\": \"evt_broken\"}"})
        return src, env
    else:
        env.update(type="sandbox.event", source="opskit-load", team_id=team, data={})
    key_field = KEY_FIELD.get(topic, "team_id")
    return str(env.get(key_field, team)), env


@dataclass
class LoadStats:
    produced: dict[str, int] = field(default_factory=dict)
    consumed: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


class LoadRunner:
    """Runs producers and consumer groups in threads until stopped or duration ends."""

    def __init__(self, bootstrap: str, rate: float, topics: dict[str, float] | None = None,
                 groups: list[GroupPlan] | None = None, seed: int | None = None,
                 conn: ConnectionConfig | None = None) -> None:
        if rate <= 0:
            raise UsageError("--rate must be positive")
        self.bootstrap = bootstrap
        #: librdkafka settings of the clients (security included, with a secured sandbox)
        self._client_conf = (conn or ConnectionConfig(bootstrap)).to_librdkafka()
        self._client_conf["bootstrap.servers"] = bootstrap
        self.rate = rate
        self.topics = topics if topics is not None else dict(TOPIC_WEIGHTS)
        self.groups = groups if groups is not None else list(HIP30_GROUPS)
        for g in self.groups:
            if g.mode not in MODES:
                raise UsageError(f"unknown group mode {g.mode!r} (one of {', '.join(MODES)})")
        self.rnd = random.Random(seed)
        self.stop_event = threading.Event()
        self.stats = LoadStats()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def _count(self, d: dict[str, int], k: str, n: int = 1) -> None:
        with self._lock:
            d[k] = d.get(k, 0) + n

    def start(self) -> None:
        t = threading.Thread(target=self._produce, name="producer", daemon=True)
        t.start()
        self._threads.append(t)
        for g in self.groups:
            for i in range(max(1, g.consumers)):
                t = threading.Thread(target=self._consume, args=(g, i), name=f"{g.group}-{i}", daemon=True)
                t.start()
                self._threads.append(t)

    def stop(self, timeout: float = 30.0) -> None:
        self.stop_event.set()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.1, deadline - time.monotonic()))

    def run(self, duration: float) -> LoadStats:
        self.start()
        try:
            self.stop_event.wait(duration if duration > 0 else None)
        except KeyboardInterrupt:
            pass
        self.stop()
        return self.stats

    # ----- producing -----
    def _produce(self) -> None:
        p = Producer({**self._client_conf, "acks": "all", "enable.idempotence": True,
                      "compression.type": "lz4", "linger.ms": 5, "batch.size": 16384,
                      "client.id": "opskit-load", "logger": logging.getLogger("opskit.librdkafka")})
        names = list(self.topics)
        weights = [self.topics[t] for t in names]
        interval = 1.0 / self.rate
        nxt = time.monotonic()
        while not self.stop_event.is_set():
            now = time.monotonic()
            if now < nxt:
                time.sleep(min(nxt - now, 0.05))
                continue
            # catch up in batches when behind schedule, never more than 1 s worth
            burst = min(int((now - nxt) / interval) + 1, max(1, int(self.rate)))
            for _ in range(burst):
                topic = self.rnd.choices(names, weights)[0]
                key, env = make_event(topic, self.rnd, time.time())
                try:
                    p.produce(topic, key=key.encode(), value=json.dumps(env).encode(),
                              on_delivery=self._delivered)
                except BufferError:
                    p.poll(0.1)
            nxt += burst * interval
            p.poll(0)
        p.flush(10)

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            with self._lock:
                if len(self.stats.errors) < 20:
                    self.stats.errors.append(f"produce: {err.str()}")
        else:
            self._count(self.stats.produced, msg.topic())

    # ----- consuming -----
    def _consume(self, plan: GroupPlan, idx: int) -> None:
        manual = plan.mode in ("partial", "stopped")
        c = Consumer({
            **self._client_conf, "group.id": plan.group,
            "client.id": f"{plan.group}-{idx}", "auto.offset.reset": "earliest",
            "enable.auto.commit": not manual, "auto.commit.interval.ms": 1000,
            "session.timeout.ms": 10000, "logger": logging.getLogger("opskit.librdkafka"),
        })
        c.subscribe(plan.topics)
        started = time.monotonic()
        first_record: float | None = None
        topic_rate = sum(self.topics.get(t, 0) for t in plan.topics) * self.rate
        max_rate = plan.speed * topic_rate / max(1, plan.consumers) if plan.mode == "lagging" else None
        processed = 0
        last_commit = time.monotonic()
        try:
            while not self.stop_event.is_set():
                if (plan.mode == "stopped" and first_record is not None
                        and time.monotonic() - first_record > plan.stop_after):
                    break
                msgs = c.consume(num_messages=100, timeout=0.2)
                good = [m for m in msgs if m.error() is None]
                if good:
                    if first_record is None:
                        first_record = time.monotonic()
                    processed += len(good)
                    self._count(self.stats.consumed, plan.group, len(good))
                if max_rate:
                    ahead = processed / max_rate - (time.monotonic() - started)
                    if ahead > 0:
                        c.pause(c.assignment())
                        self.stop_event.wait(min(ahead, 1.0))
                        c.resume(c.assignment())
                if manual and time.monotonic() - last_commit > 1.0:
                    self._manual_commit(c, plan)
                    last_commit = time.monotonic()
            if manual:
                self._manual_commit(c, plan)
        finally:
            c.close()

    @staticmethod
    def _manual_commit(c: Consumer, plan: GroupPlan) -> None:
        try:
            positions = c.position(c.assignment())
        except Exception:  # noqa: BLE001 - a rebalance in progress; try again next round
            return
        offs = [CkTP(tp.topic, tp.partition, tp.offset) for tp in positions if tp.offset >= 0]
        if plan.mode == "partial":
            offs = [tp for tp in offs if tp.partition % 2 == 0]
        if offs:
            try:
                c.commit(offsets=offs, asynchronous=False)
            except Exception as e:  # noqa: BLE001 - best effort; the next round commits again
                log.debug("committing the load's positions failed: %s", e)


# ----- detached mode -----
def load_pid_path(name: str) -> Path:
    from opskit.sandbox.state import sandboxes_root

    return sandboxes_root() / name / "load.pid"


def start_detached_load(name: str, bootstrap: str, rate: float, duration: float,
                        secured: bool = False) -> int:
    """Run the load in a child process. With ``secured`` the child logs in as the
    sandbox's admin, reading the password from the sandbox's file itself (the
    command line carries only the sandbox name)."""
    pid_path = load_pid_path(name)
    stop_detached_load(name)
    pid_path.parent.mkdir(parents=True, exist_ok=True)
    log_path = pid_path.with_suffix(".log")
    extra = [name] if secured else []
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "opskit.sandbox.load", bootstrap, str(rate), str(duration), *extra],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    pid_path.write_text(str(proc.pid))
    return proc.pid


def stop_detached_load(name: str) -> bool:
    pid_path = load_pid_path(name)
    if not pid_path.exists():
        return False
    try:
        pid = int(pid_path.read_text().strip())
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"opskit.sandbox.load" in cmd:
            os.kill(pid, signal.SIGTERM)
            for _ in range(100):
                if not Path(f"/proc/{pid}").exists():
                    break
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
                time.sleep(0.1)
    except (OSError, ValueError):
        pass
    pid_path.unlink(missing_ok=True)
    return True


def _main(argv: list[str]) -> None:
    bootstrap, rate, duration = argv[0], float(argv[1]), float(argv[2])
    conn = None
    if len(argv) > 3:  # a secured sandbox's name: log in as its admin
        from opskit.sandbox.cluster import Sandbox

        conn = Sandbox(argv[3]).connection("admin", client_id="opskit-load")
    runner = LoadRunner(bootstrap, rate, conn=conn)
    signal.signal(signal.SIGTERM, lambda *_: runner.stop_event.set())
    runner.run(duration)


if __name__ == "__main__":
    _main(sys.argv[1:])


