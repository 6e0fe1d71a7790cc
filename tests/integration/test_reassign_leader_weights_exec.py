"""``reassign plan --leader-weights FILE`` on a real 3-broker cluster (Kafka 3.7): a plan
adding broker 2 with bytes-in rates per partition moves exactly the replicas of the plan
without rates, its leader bytes-in spread is no worse, and after ``reassign execute
--execute`` (which runs the preferred election) Metadata shows every planned partition
led by its planned first replica."""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import produce, run_cli


def _metadata(bootstrap: str) -> dict[tuple[str, int], tuple[list[int], int]]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15)
    return {(t, p.id): (list(p.replicas), p.leader)
            for t, tm in md.topics.items() for p in tm.partitions.values()}


def _create_on(bootstrap: str, topic: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, len(assignment),
                                           replica_assignment=assignment)]).values():
        f.result(30)
    deadline = time.time() + 60
    while time.time() < deadline:
        md = _metadata(bootstrap)
        if all(md.get((topic, p), ([], -1))[1] >= 0 for p in range(len(assignment))):
            return
        time.sleep(0.3)
    raise AssertionError(f"topic {topic} not ready")


def test_weighted_leaders_plan_executes_and_metadata_shows_them(kafka3: Any,
                                                                 tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    hot, cold = f"lw-hot-{tag}", f"lw-cold-{tag}"
    # brokers 0 and 1 only; broker 2 is added: hot partitions 0 and 2 lead on broker 0
    _create_on(kafka3.bootstrap, hot, [[0, 1], [1, 0], [0, 1], [1, 0], [0, 1], [1, 0]])
    _create_on(kafka3.bootstrap, cold, [[p % 2, 1 - p % 2] for p in range(6)])
    for t in (hot, cold):
        produce(kafka3.bootstrap, t, dict.fromkeys(range(6), 10))
    rates = {"version": 1, "partitions": [
        {"topic": hot, "partition": p, "bytes_in_per_second": 5_000_000 if p in (0, 2) else 1000}
        for p in range(6)] + [
        {"topic": cold, "partition": p, "bytes_in_per_second": 200 * (p + 1)} for p in range(6)]}
    weights = tmp_path / "rates.json"
    weights.write_text(json.dumps(rates))

    r = run_cli("reassign", "plan", "-b", kafka3.bootstrap, "--add-brokers", "2", "-o", "json")
    assert r.code == 0, r.err
    plain = json.loads(r.out)
    path = tmp_path / "weighted.json"
    r = run_cli("reassign", "plan", "-b", kafka3.bootstrap, "--add-brokers", "2", "-o", "json",
                "--leader-weights", str(weights), "--write-plan", str(path))
    assert r.code == 0, r.err
    plan = json.loads(r.out)
    est, est0 = plan["opskit"]["estimates"], plain["opskit"]["estimates"]
    # the same replica moves: only the order of the replica lists may differ
    assert est["replicas_moved"] == est0["replicas_moved"] > 0
    sets = {(p["topic"], p["partition"]): sorted(p["replicas"]) for p in plan["partitions"]}
    sets0 = {(p["topic"], p["partition"]): sorted(p["replicas"]) for p in plain["partitions"]}
    assert {k: v for k, v in sets.items() if k in sets0} == sets0
    load = est["leader_bytes_in"]
    assert set(load["after"]) >= {"0", "1", "2"}
    planned = {(p["topic"], p["partition"]): p["replicas"] for p in plan["partitions"]}
    md = _metadata(kafka3.bootstrap)
    after_first = {k: planned.get(k, v[0])[0] for k, v in md.items() if k[0] in (hot, cold)}
    per = {b: 0 for b in (0, 1, 2)}
    for (t, p), b in after_first.items():
        per[b] += next(x["bytes_in_per_second"] for x in rates["partitions"]
                       if x["topic"] == t and x["partition"] == p)
    assert {int(k): v for k, v in load["after"].items()} == per  # the report is the plan's
    plain_first = {(p["topic"], p["partition"]): p["replicas"][0] for p in plain["partitions"]}
    per0 = {b: 0 for b in (0, 1, 2)}
    for (t, p), v in md.items():
        if t in (hot, cold):
            per0[plain_first.get((t, p), v[0][0])] += next(
                x["bytes_in_per_second"] for x in rates["partitions"]
                if x["topic"] == t and x["partition"] == p)
    spread, spread0 = max(per.values()) - min(per.values()), max(per0.values()) - min(per0.values())
    print(f"leader bytes-in per broker: unweighted plan {per0} (max-min {spread0:,}), "
          f"weighted {per} (max-min {spread:,})")
    assert spread <= spread0
    # the two hot partitions are led by two different brokers after the plan
    assert after_first[(hot, 0)] != after_first[(hot, 2)]
    t = run_cli("reassign", "plan", "-b", kafka3.bootstrap, "--add-brokers", "2",
                "--leader-weights", str(weights))
    assert t.code == 0, t.err
    assert "leader bytes-in per broker (--leader-weights), max - min:" in t.out
    assert "LEADER BYTES IN/S" in t.out

    x = run_cli("reassign", "execute", str(path), "-b", kafka3.bootstrap, "--throttle", "50MB",
                "--execute")
    assert x.code == 0, x.out + x.err
    deadline = time.time() + 120
    while True:  # the election ran at the end of execute; Metadata may lag a moment
        md = _metadata(kafka3.bootstrap)
        wrong = {k: (md[k], rs) for k, rs in planned.items()
                 if md[k][0] != rs or md[k][1] != rs[0]}
        if not wrong:
            break
        assert time.time() < deadline, wrong
        time.sleep(1)
