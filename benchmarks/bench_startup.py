"""Start-up cost: CPU time of ``opskit --help``, ``--version``, a mistyped command and a
completion request, against ``opskit lag --group G`` on a real one-node Kafka.

Each command runs ``--runs`` times as its own process; the CPU time (user + system) of
each process comes from ``os.wait4``, so other load on the machine does not count (wall
time does, and is shown for reference only). The median is reported, with the load.

    python benchmarks/bench_startup.py [--runs 15] [--bootstrap HOST:PORT --group G]
                                       [--baseline-tree DIR]

Without ``--bootstrap`` a one-node sandbox (Kafka 3.7) is started on a free port with a
topic and a committed group, and removed afterwards. ``--baseline-tree`` runs the same
commands from another checkout too (e.g. the commit before lazy loading).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu_of(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, exit status) of one run of ``argv``."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, time.monotonic() - t0, proc.returncode


def measure(tree: Path, cases: dict[str, tuple[list[str], dict[str, str]]],
            runs: int) -> dict[str, tuple[float, float, int]]:
    out = {}
    for name, (args, extra_env) in cases.items():
        env = dict(os.environ) | {"PYTHONPATH": str(tree)} | extra_env
        # -P: the working directory is not put first on sys.path (the tree given is used)
        argv = [sys.executable, "-P", "-c", "from opskit.cli.main import run; run()", *args]
        samples = [cpu_of(argv, env) for _ in range(runs)]
        out[name] = (statistics.median(s[0] for s in samples),
                     statistics.median(s[1] for s in samples), samples[-1][2])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--bootstrap")
    ap.add_argument("--group")
    ap.add_argument("--baseline-tree", type=Path)
    a = ap.parse_args()

    sandbox = None
    bootstrap, group = a.bootstrap, a.group
    if bootstrap is None:
        sys.path.insert(0, str(ROOT))
        from confluent_kafka import Consumer, TopicPartition
        from confluent_kafka.admin import AdminClient, NewTopic

        from opskit.sandbox.cluster import Sandbox
        from opskit.sandbox.ports import free_port_block

        sandbox = Sandbox(f"bench-startup-{uuid.uuid4().hex[:6]}")
        st, _ = sandbox.up(brokers=1, version="3.7", port=free_port_block(1))
        bootstrap, group = st.bootstrap, "bench-startup"
        AdminClient({"bootstrap.servers": bootstrap}).create_topics(
            [NewTopic("bench_startup", 3, 1)])["bench_startup"].result(60)
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        c.commit(offsets=[TopicPartition("bench_startup", p, 0) for p in range(3)],
                 asynchronous=False)
        c.close()
    try:
        complete = {"_OPSKIT_COMPLETE": "bash", "_OPSKIT_COMPLETE_ARGS": "opskit "}
        cases = {
            "opskit --help": (["--help"], {}),
            "opskit --version": (["--version"], {}),
            "opskit lgg (unknown)": (["lgg"], {}),
            "completion: opskit <TAB>": ([], complete),
            "opskit lag --group G": (["lag", "--group", str(group), "-b", str(bootstrap)], {}),
        }
        load0 = os.getloadavg()
        ours = measure(ROOT, cases, a.runs)
        base = measure(a.baseline_tree, cases, a.runs) if a.baseline_tree else None
        load1 = os.getloadavg()
    finally:
        if sandbox is not None:
            sandbox.down()
    print(f"runs per command: {a.runs}; load average before {load0[0]:.1f}, after {load1[0]:.1f}")
    head = f"{'command':28} {'CPU s':>7} {'wall s':>7} {'exit':>4}"
    if base:
        head += f" {'baseline CPU s':>15}"
    print(head)
    for name, (cpu, wall, rc) in ours.items():
        line = f"{name:28} {cpu:7.3f} {wall:7.3f} {rc:4d}"
        if base:
            line += f" {base[name][0]:15.3f}"
        print(line)
    lag_cpu = ours["opskit lag --group G"][0]
    help_cpu = ours["opskit --help"][0]
    print(f"--help / lag CPU: {help_cpu / lag_cpu:.2f} (target: at most 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
