"""Start-up cost of ``opskit exporter``: modules, RSS, PSS and CPU of each process
(issue #22 item 4), for this checkout and optionally a baseline checkout, alternated.

    PYTHONPATH=. python benchmarks/bench_exporter_startup.py [--runs 5] [--bootstrap HOST:PORT]
                                                             [--baseline-tree DIR]

Two cases per run, each its own process tree:

* ``--once``: one collection printed; CPU (user + system) and peak RSS from ``os.wait4``;
* served (``--collector process``, the default): measured when every family has been
  read once (``opskit_exporter_family_up`` 1 for all nine, the slow ones by the child's
  background thread included), in each of the two processes: RSS, peak RSS (VmHWM), PSS
  (``smaps_rollup``), CPU since start (``/proc/PID/stat``) and the number of modules
  loaded (a SIGUSR1 handler installed before the exporter starts dumps ``sys.modules``;
  the forked collector inherits it).

CPU time is what load affects least; the load average is printed. Without
``--bootstrap`` a one-node Kafka 3.7 sandbox is started with one topic (4 partitions)
and a group lagging on it, and removed afterwards. ``--baseline-tree``: another
checkout run the same way (e.g. ``git archive`` of the commit before a change).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("metadata", "groups", "offsets", "topic_configs", "broker_configs", "record_times",
            "log_dirs", "quorum", "reassignments")
HARNESS = """
import json, os, signal, sys
def dump(*_):
    path = os.path.join(os.environ["DUMP_DIR"], f"{os.getpid()}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(sorted(sys.modules), f)
    os.replace(path + ".tmp", path)
signal.signal(signal.SIGUSR1, dump)
sys.argv = ["opskit", *sys.argv[1:]]
from opskit.cli.main import run
run()
"""
TICK = os.sysconf("SC_CLK_TCK")


def once(tree: Path, bootstrap: str) -> dict[str, float]:
    env = dict(os.environ) | {"PYTHONPATH": str(tree)}
    proc = subprocess.Popen([sys.executable, "-P", "-c", "from opskit.cli.main import run; run()",
                             "exporter", "--once", "-b", bootstrap],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        raise SystemExit(f"exporter --once exited {rc} ({tree})")
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024}


def proc_figures(pid: int) -> dict[str, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    kb = {k: int(v.split()[0])
          for k, v in re.findall(r"^(VmRSS|VmHWM):\s+(.*)$", status, re.MULTILINE)}
    rollup = re.search(r"^Pss:\s+(\d+)", Path(f"/proc/{pid}/smaps_rollup").read_text(),
                       re.MULTILINE)
    pss = int(rollup.group(1)) if rollup else 0
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(stat[11]) + int(stat[12])) / TICK  # utime, stime
    return {"rss_mb": kb["VmRSS"] / 1024, "peak_rss_mb": kb["VmHWM"] / 1024,
            "pss_mb": pss / 1024, "cpu_s": cpu}


def all_read(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return False
    return all(f'opskit_exporter_family_up{{family="{f}"}} 1.0' in text for f in FAMILIES)


def served(tree: Path, bootstrap: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        dump, err = Path(d), Path(d) / "stderr"
        env = dict(os.environ) | {"PYTHONPATH": str(tree), "DUMP_DIR": d}
        with err.open("w") as f:
            proc = subprocess.Popen(
                [sys.executable, "-P", "-c", HARNESS, "exporter", "-b", bootstrap, "--port", "0",
                 "--listen", "127.0.0.1", "--interval", "30s"],
                env=env, stdout=subprocess.DEVNULL, stderr=f)
        try:
            deadline = time.time() + 180
            url = None
            while time.time() < deadline:
                if proc.poll() is not None:
                    raise SystemExit(f"exporter exited: {err.read_text()[-1000:]}")
                if url is None:
                    m = re.search(r"serving http://127\.0\.0\.1:(\d+)/metrics", err.read_text())
                    url = f"http://127.0.0.1:{m.group(1)}/metrics" if m else None
                elif all_read(url):
                    break
                time.sleep(0.2)
            else:
                raise SystemExit("the exporter did not read every family within 180 s")
            child = int(Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()[0])
            out: dict[str, float] = {}
            for role, pid in (("server", proc.pid), ("collector", child)):
                for k, v in proc_figures(pid).items():
                    out[f"{role} {k}"] = v
                os.kill(pid, signal.SIGUSR1)
            for role, pid in (("server", proc.pid), ("collector", child)):
                path = dump / f"{pid}.json"
                while not path.exists() and time.time() < deadline:
                    time.sleep(0.1)
                out[f"{role} modules"] = len(json.loads(path.read_text()))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    for k in ("rss_mb", "pss_mb", "cpu_s"):
        out[f"sum {k}"] = out[f"server {k}"] + out[f"collector {k}"]
    return out


def setup(bootstrap: str) -> None:
    """One topic of 4 partitions with 10 records each, a group lagging 7 on each."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.create_topics([NewTopic("bench_expstart", 4, 1)])["bench_expstart"].result(60)
    except KafkaException as e:
        if "already exists" not in str(e):
            raise
        return  # set up by an earlier run
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(40):
        p.produce("bench_expstart", b"x", partition=i % 4)
    if p.flush(30):
        raise SystemExit("records not acknowledged")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-expstart"})
    c.commit(offsets=[TopicPartition("bench_expstart", q, 3) for q in range(4)],
             asynchronous=False)
    c.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bootstrap")
    ap.add_argument("--baseline-tree", type=Path)
    a = ap.parse_args()
    sandbox = None
    bootstrap = a.bootstrap
    if bootstrap is None:
        sys.path.insert(0, str(ROOT))
        from opskit.sandbox.cluster import Sandbox
        from opskit.sandbox.ports import free_port_block

        sandbox = Sandbox(f"bench-expstart-{uuid.uuid4().hex[:6]}")
        st, _ = sandbox.up(brokers=1, version="3.7", port=free_port_block(1))
        bootstrap = st.bootstrap
    setup(bootstrap)
    trees = {"this checkout": ROOT} | ({"baseline": a.baseline_tree} if a.baseline_tree else {})
    runs: dict[str, dict[str, list[float]]] = {t: {} for t in trees}
    try:
        load0 = os.getloadavg()
        for i in range(a.runs):
            order = list(trees.items()) if i % 2 == 0 else list(reversed(trees.items()))
            for name, tree in order:
                for case, fn in (("once", once), ("served", served)):
                    for k, v in fn(tree, bootstrap).items():
                        runs[name].setdefault(f"{case}: {k}", []).append(v)
        load1 = os.getloadavg()
    finally:
        if sandbox is not None:
            sandbox.down()
    print(f"runs: {a.runs} per tree (alternated); load average (1 min) before {load0[0]:.1f}, "
          f"after {load1[0]:.1f}")
    names = list(trees)
    print(f"{'median of':34}" + "".join(f"{n:>16}" for n in names)
          + (f"{'ratio':>8}" if len(names) == 2 else ""))
    for key in runs[names[0]]:
        meds = [statistics.median(runs[n][key]) for n in names]
        line = f"{key:34}" + "".join(f"{m:16.2f}" for m in meds)
        if len(meds) == 2 and meds[1]:
            line += f"{meds[0] / meds[1]:8.2f}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
