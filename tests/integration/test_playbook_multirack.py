"""``opskit playbook multi-rack`` on a real Kafka 3.7 sandbox (CI; 4.x with
``OPSKIT_TEST_MULTIRACK_KAFKA=4.x`` by hand): three brokers in no rack
(one zone) put in racks a, b, c and every partition spread over them, under an idempotent
acks=all producer and a consumer group, SIGKILLed inside ``set_rack:1`` (node 1 stopped,
its rack not yet written) and inside ``spread`` (moves submitted, Kafka copying under the
throttle), each time resumed with the command ``playbook status`` prints.

At the end, from Metadata and DescribeCluster: every broker reports its rack, every
partition spans min(RF, racks) racks (3 for the RF 3 topics and ``__consumer_offsets``),
the replicas that moved equal the lower bound the dry run printed, no throttle is left,
no acknowledged record is lost and the order per key holds.

Kafka 4.3 runs in CI in test_playbook_multirack_every_step.py: the same playbook and
workload killed at every failpoint of every step in turn (the two kills here are inside a
copy in flight, which that file's failpoints do not reach: it kills at step boundaries).
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient
from multirack_helpers import (
    Journal,
    Workload,
    assert_acceptance,
    assert_nothing_left,
    dry_run,
    end,
    interrupted,
    journal_state,
    launch,
    replicas,
    run_cli,
    sandbox_without_racks,
    setup_topics,
)

from opskit.sandbox.cluster import Sandbox

#: the Kafka version the test runs on: CI runs 3.7 (HIP-30's); ``4.x`` passed by hand
#: (2026-11-27, 324 s at load 13-25)
VERSION = os.environ.get("OPSKIT_TEST_MULTIRACK_KAFKA", "3.7")


@pytest.fixture
def no_racks(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    with sandbox_without_racks(monkeypatch, VERSION) as sb:
        yield sb


def _kill_inside_spread(sb: Sandbox, args: list[str], timeout: float = 900) -> int:
    """Run the playbook and SIGKILL it from outside once the spread's moves are submitted
    and Kafka is copying them (a partition has more replicas than its RF)."""
    journals = Journal(sb.require().cluster_id)

    def events() -> list[str]:
        plans = [d.name for d in journals.root.iterdir()] if journals.root.exists() else []
        return [e["kind"] for p in plans for e in journals.events(p)]

    admin = AdminClient({"bootstrap.servers": sb.require().bootstrap})
    proc = launch(args)
    deadline = time.monotonic() + timeout
    try:
        while True:
            assert proc.poll() is None, f"ended before the spread copied: {end(proc)[-1500:]}"
            assert time.monotonic() < deadline, "the spread was never submitted"
            if journal_state(sb).get("in_flight") == "spread" and "submit" in events():
                reps = replicas(admin)
                if any(len(r) > 2 if t.startswith("mr_pairs") else len(r) > 3
                       for (t, _), r in reps.items()):
                    break
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    kinds = events()
    assert "remove_throttles" not in kinds and "finished" not in kinds, kinds  # mid-move
    return proc.pid


@pytest.mark.timeout(1800)
def test_multi_rack_killed_inside_set_rack_and_spread_then_resumed(no_racks: Sandbox) -> None:
    sb = no_racks
    boot = sb.require().bootstrap
    admin = AdminClient({"bootstrap.servers": boot})
    suffix = uuid.uuid4().hex[:6]
    # 1.5 MB per partition: at 300 KB/s the spread's copy lasts long enough to be killed in
    pairs, triples = setup_topics(sb, suffix, records=1500, value_size=1000)

    base = ["playbook", "multi-rack", "--sandbox", sb.name, "--racks", "0=a,1=b,2=c",
            "--throttle", "300KB"]
    bound = dry_run(sb, base)
    before = replicas(admin)

    with Workload(boot, [pairs, triples], f"mr-group-{suffix}") as load:
        time.sleep(3)
        # 1: inside set_rack:1, node 1 stopped and its file not yet rewritten
        proc = launch([*base, "--execute"], kill_at="stopped:set_rack:1")
        err = end(proc)
        assert proc.returncode == -signal.SIGKILL, err[-1500:]
        assert journal_state(sb)["in_flight"] == "set_rack:1"
        assert not sb.status()["nodes"][1]["running"]
        resume = interrupted(sb, proc.pid)
        assert resume == ["playbook", "resume", "--sandbox", sb.name, "--throttle", "300KB"]
        # a scale-out is refused while this run is unfinished (one run lock, one run)
        so = run_cli("playbook", "scale-out", "--sandbox", sb.name, "--brokers", "4")
        assert so.code == 5 and "multi-rack run" in so.err, so.err
        # 2: the printed command resumes it; killed again inside the spread's copy
        pid = _kill_inside_spread(sb, resume)
        assert journal_state(sb)["in_flight"] == "spread"
        done = set(journal_state(sb)["done"])  # type: ignore[arg-type]
        assert {"set_rack:1", "set_rack:2", "set_rack:0"} <= done
        assert interrupted(sb, pid) == resume
        # 3: resumed to the end
        proc = launch(resume)
        err = end(proc)
        assert proc.returncode == 0, err[-2000:]
        consumed_mid = len(load.consumed)
        time.sleep(3)
        assert len(load.consumed) > consumed_mid  # the group still consumes

    assert_acceptance(sb, before, bound, load)
    assert_nothing_left(base)
