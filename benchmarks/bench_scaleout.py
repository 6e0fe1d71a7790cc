"""Benchmark: the whole local scale-out, ``opskit playbook scale-out --execute``, 1 -> 3 brokers.

Setup: a one-node sandbox (Kafka 3.7.2, static quorum; ``--kafka-version 4.x``: a dynamic
quorum and the add-controller path), the HIP-30 topics created from the registry
(``opskit topics apply --execute``), a few seconds of ``opskit sandbox load`` (so the HIP-30
consumer groups exist and ``__consumer_offsets`` holds offsets), then D MB of
incompressible records (random bytes, no compression) spread over the HIP-30 topics.

Measured, in the same run:

* the wall time of ``opskit playbook scale-out --sandbox N --throttle L --execute`` (a child
  process, from its start to its exit), and each step's duration: the benchmark polls the
  run's journal every 0.1 s and notes when the step in flight changes (the journal's own
  timestamps, whole seconds, are printed beside);
* its physical bounds:
  - copy: the bytes the RF raise must copy, from DescribeLogDirs before the run (every
    partition's size times the replicas it gains), divided by the throttle L. The one old
    broker is the only source and Kafka's leader-side throttle caps what it sends at L in
    all, so the two new brokers together receive at most L;
  - fixed waits: after the run, the benchmark adds as many fresh nodes again, one at a
    time, on the same cluster and machine (format, JVM start, until every broker is
    registered: ``opskit sandbox add-node``'s code, in-process, so no Python start is
    counted; on a dynamic quorum also until the node is a voter) and stops each one. A
    node's fixed wait is the faster of that bare start and the run's own steps for the
    node (``add_node:N`` + ``promote_voter:N``: the same work), because on a shared
    machine the load moves either one by 2x between two moments.

The ratio printed is wall time / (copy bound + the fixed waits): what the playbook's own
work (preflight reads, reassignment submission and polling, ISR checks, leader election,
configs, registry, final health, process start) adds over what the data and the JVMs
cost anyway. A second ratio takes Kafka's quota burst off the copy bound: Kafka measures
a replication rate over at least 10 s (``replication.quota.window.num`` 11 samples of 1
s), so a new copy sends up to 10 s x L before it is throttled, and bytes / L overstates
the copy by up to 10 s.

    python benchmarks/bench_scaleout.py [--kafka-version 3.7|4.x] [--mb 20] [--throttle-mb 2] [--full]

``--full``: 300 MB at 10 MB/s (about 60 s of copying). Not a CI test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
#: Kafka's replication quota rate is measured over at least this many seconds (defaults
#: replication.quota.window.num=11 samples of replication.quota.window.size.seconds=1)
QUOTA_MIN_WINDOW_S = 10.0


def _opskit(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-m", "opskit.cli.main", *args], cwd=ROOT,
                       capture_output=True, text=True, check=False)
    if check and r.returncode != 0:
        raise SystemExit(f"opskit {' '.join(args)} exited {r.returncode}: {r.stderr[-800:]}")
    return r


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _fill(bootstrap: str, topics: dict[str, int], total_bytes: int) -> None:
    """``total_bytes`` of incompressible records, spread over every partition of ``topics``."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all",
                  "batch.size": 1 << 20, "compression.type": "none"})
    parts = [(t, i) for t, n in sorted(topics.items()) for i in range(n)]
    size = 10_000
    failed: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(str(err))

    for i in range(total_bytes // size):
        t, part = parts[i % len(parts)]
        while True:
            try:
                p.produce(t, value=os.urandom(size), partition=part, on_delivery=delivered)
                break
            except BufferError:
                p.poll(0.1)
        if i % 100 == 0:
            p.poll(0)
    if p.flush(600) != 0 or failed:   # flush counts queued records, not failed ones
        raise SystemExit(f"the fill lost records: {failed[:3]}")


def _bytes_to_copy(sb: Any, target_rf: int) -> tuple[int, int]:
    """(bytes of one copy of everything, bytes the RF raise copies) from DescribeLogDirs."""
    from opskit.adapters.kafka.admin.client import KafkaAdmin
    from opskit.adapters.kafka.log_dirs import read_partition_sizes
    from opskit.core.models import TopicPartition

    with KafkaAdmin(sb.connection(), timeout=30.0) as admin:
        meta = admin.metadata()
        leaders = {TopicPartition(t, p.partition): p.leader
                   for t, ps in meta.topics.items() for p in ps if p.leader >= 0}
        got = read_partition_sizes(admin.conn, sorted(meta.topics), leaders, 30.0)
    if got.unavailable:
        raise SystemExit(f"DescribeLogDirs incomplete: {got.unavailable}")
    one = copy = 0
    for t, ps in meta.topics.items():
        for p in ps:
            size = got.sizes.get(TopicPartition(t, p.partition), 0)
            one += size
            copy += size * max(0, target_rf - len(p.replicas))
    return one, copy


def _journal_path(name: str) -> Path:
    from opskit.adapters.files.safe_write import safe_file_name
    from opskit.paths import state_dir

    return state_dir() / "playbooks" / safe_file_name(name) / "journal.json"


def _read_journal(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())["state"]  # type: ignore[no-any-return]
    except (OSError, ValueError, KeyError):
        return {}


def _run_playbook(name: str, throttle: int) -> tuple[float, list[tuple[str, float]], str]:
    """Wall time, [(step, seconds)] from polling the journal, and the command's stderr."""
    path = _journal_path(name)
    cmd = [sys.executable, "-m", "opskit.cli.main", "playbook", "scale-out", "--sandbox", name,
           "--throttle", str(throttle), "--execute"]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    current: str | None = None
    since = t0
    steps: list[tuple[str, float]] = []
    gap = "(before the first step)"   # no step in flight: start-up, between steps, the end
    while proc.poll() is None:
        now = time.monotonic()
        flight = _read_journal(path).get("in_flight")
        if flight != current:
            steps.append((current or gap, now - since))
            if current is not None:
                gap = "(between steps)"
            current, since = flight, now
        time.sleep(0.1)
    wall = time.monotonic() - t0
    steps.append((current or "(after the last step)", wall - (since - t0)))
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"the playbook exited {proc.returncode}: {err[-1500:]}")
    return wall, steps, err


def _journal_durations(state: dict[str, Any]) -> dict[str, float]:
    """Each step's started -> finished, from the journal's own (whole-second) timestamps."""
    started: dict[str, datetime] = {}
    out: dict[str, float] = {}
    for e in state.get("journal", []):
        at = datetime.fromisoformat(e["at"])
        if e["what"] in ("started", "resumed"):
            started[e["step"]] = at
        elif e["what"] == "finished" and e["step"] in started:
            out[e["step"]] = (at - started[e["step"]]).total_seconds()
    return out


def _fixed_waits(sb: Any, count: int, dynamic: bool) -> list[float]:
    """Add ``count`` fresh nodes one at a time (a voter each on a dynamic quorum); the
    seconds each took from the format to registered (and voter), then stop it and
    drop it from the sandbox."""
    from opskit.errors import SandboxError
    from opskit.sandbox.scale import add_node, promote_controller

    waits: list[float] = []
    base = max(n.node_id for n in sb.require().nodes) + 100
    for i in range(count):
        t0 = time.monotonic()
        try:
            node = add_node(sb, "controller" if dynamic else "broker", base + i)
        except SandboxError:
            for log in sorted((sb.root / f"node-{base + i}").glob("*.log")):
                lines = log.read_text(errors="replace").splitlines()
                bad = [ln for ln in lines if "ERROR" in ln or "Exception" in ln or "FATAL" in ln]
                print(f"{log}:", *(bad or lines)[-15:], sep="\n  ", file=sys.stderr)
            raise
        if dynamic:
            promote_controller(sb, node.node_id)
        waits.append(time.monotonic() - t0)
        sb._stop_node(node)      # and out of the sandbox: the next start waits for live nodes only
        st = sb.require()
        st.nodes = [n for n in st.nodes if n.node_id != node.node_id]
        sb.save(st)
    return waits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kafka-version", default="3.7", help="3.7 (static quorum) or 4.x (dynamic)")
    ap.add_argument("--mb", type=int, default=20, help="MB of records before the run")
    ap.add_argument("--throttle-mb", type=float, default=2.0, help="throttle, MB/s (10^6 B)")
    ap.add_argument("--full", action="store_true", help="300 MB at 10 MB/s")
    a = ap.parse_args()
    if a.full:
        a.mb, a.throttle_mb = 300, 10.0
    dynamic = not a.kafka_version.startswith("3.")
    throttle = int(a.throttle_mb * 1_000_000)

    from opskit.sandbox.cluster import Sandbox
    from opskit.sandbox.ports import free_port_block

    name = f"bench-so-{uuid.uuid4().hex[:6]}"
    load_before = _uptime()
    _opskit("sandbox", "up", "--name", name, "--port", str(free_port_block(1)),
            "--kafka-version", a.kafka_version, "--quorum", "dynamic" if dynamic else "static")
    sb = Sandbox(name)
    try:
        st = sb.require()
        ctx = f"sandbox-{name}"
        _opskit("topics", "apply", "--context", ctx, "--execute")
        _opskit("sandbox", "load", "--name", name, "--rate", "200", "--duration", "5",
                check=False)   # exit 1 only tells of the HIP-30 groups' staged errors
        from opskit.adapters.kafka.admin.client import KafkaAdmin

        with KafkaAdmin(sb.connection(), timeout=30.0) as admin:
            topics = {t: len(ps) for t, ps in admin.metadata().topics.items()
                      if not t.startswith("__")}
        _fill(st.bootstrap, topics, a.mb * 1_000_000)
        time.sleep(2)
        one_copy, to_copy = _bytes_to_copy(sb, 3)
        plan = json.loads(_opskit("playbook", "scale-out", "--sandbox", name, "--throttle",
                                  str(throttle), "-o", "json").stdout)["plan"]
        print(f"Kafka {st.version}, {plan['quorum']} quorum; new nodes {plan['new_nodes']} "
              f"({plan['new_node_roles']}); {len(topics)} topics + internal")
        print(f"DescribeLogDirs before the run: one copy {one_copy:,} B; to copy {to_copy:,} B "
              f"(the plan says {plan['bytes_to_copy']:,} B, estimates "
              f"{plan['estimated_seconds']:.0f} s)")
        print(f"load before the run: {load_before}")
        load_at_start = _uptime()
        wall, polled, _ = _run_playbook(name, throttle)
        load_at_end = _uptime()
        state = _read_journal(_journal_path(name))
        if state.get("phase") != "done":
            raise SystemExit(f"the run ended {state.get('phase')}: {state.get('reason')}")
        by_journal = _journal_durations(state)
        waits = _fixed_waits(sb, len(plan["new_nodes"]), dynamic)
    finally:
        _opskit("sandbox", "down", "--name", name, check=False)
        shutil.rmtree(_journal_path(name).parent, ignore_errors=True)

    print(f"load at the run's start: {load_at_start}")
    print(f"load at the run's end:   {load_at_end}")
    print()
    # a step shorter than the 0.1 s poll is never seen in flight: "<0.1"
    seen: dict[str, float] = {}
    for step, secs in polled:
        seen[step] = seen.get(step, 0.0) + secs
    rows = ["(before the first step)", *plan["steps"], "(between steps)",
            "(after the last step)"]
    print(f"{'step':<24}{'polled s':>10}{'journal s':>11}")
    for step in rows:
        p = f"{seen[step]:.1f}" if step in seen else "<0.1"
        j = f"{by_journal[step]:.0f}" if step in by_journal else "-"
        print(f"{step:<24}{p:>10}{j:>11}")
    print()
    # one node's fixed wait: the faster of its bare start after the run and its own steps
    # in the run (the same work: format, JVM start, registration, voter); on a shared
    # machine either one can take twice the other
    in_run = [seen.get(f"add_node:{n}", 0.0) + seen.get(f"promote_voter:{n}", 0.0)
              for n in plan["new_nodes"]]
    fixed = [min(a, b) for a, b in zip(waits, in_run, strict=True)]
    copy_bound = to_copy / throttle
    # Kafka's replication quota measures a rate over at least (samples - 1) windows
    # (replication.quota.window.num 11 x 1 s): a new copy can send 10 s x L at once
    quota_bound = max(0.0, to_copy - QUOTA_MIN_WINDOW_S * throttle) / throttle
    what = "format + start to registered" + (" and voter" if dynamic else "")
    print(f"node {what}: bare, after the run "
          + ", ".join(f"{w:.1f}" for w in waits) + " s; in the run "
          + ", ".join(f"{w:.1f}" for w in in_run) + f" s; fixed waits (the faster) "
          f"{sum(fixed):.1f} s")
    print(f"copy: {to_copy:,} B / {throttle:,} B/s = {copy_bound:.1f} s (with Kafka's "
          f"{QUOTA_MIN_WINDOW_S:.0f} s quota burst: {quota_bound:.1f} s)")
    bound = copy_bound + sum(fixed)
    strict = quota_bound + sum(fixed)
    print(f"physical bounds: bytes/throttle + fixed waits = {bound:.1f} s "
          f"(with the quota burst {strict:.1f} s)")
    print(f"playbook wall time {wall:.1f} s: ratio {wall / bound:.2f}x "
          f"({wall / strict:.2f}x with the quota burst)")

if __name__ == "__main__":
    main()
