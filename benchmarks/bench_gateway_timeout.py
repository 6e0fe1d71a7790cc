"""How long `health` and `exporter --once` take on the real Hanzo Stream gateway, against
the bound issue 21 sets (`--timeout` + 2 s).

The gateway advertises DescribeConfigs (and others) but never answers them: each run pays
the timeout once for it (then remembers it for the rest of the run), and must not pay it
again per API or per topic. Starts the vendored gateway (``scripts/install-compat.sh``
installs it), creates HIP-30's six topics with records and its six groups' commits, then
runs each command as a user would (a new process each time)::

    python benchmarks/bench_gateway_timeout.py [--runs 3] [--timeouts 3,10]

Prints each run's wall time, the bound and the ratio time / bound (<= 1.00 meets it), and
the load average before and after (2 shared cores: rerun when it is high).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from opskit.sandbox import compat
from tests.compat_fixtures import create_topics
from tests.helpers import commit, produce

TOPICS = {"events_plugin_ingestion": 3, "llm_usage": 2, "audit_log": 2, "agent_rpc_metering": 2,
          "billing_events": 1, "dead_letter": 1}
GROUPS = {"analytics-ingest": ["events_plugin_ingestion"],
          "billing-agg": ["llm_usage", "billing_events"],
          "audit-archive": ["audit_log", "agent_rpc_metering", "dead_letter"]}
COMMANDS = (("health",), ("exporter", "--once"))


def run(cmd: tuple[str, ...], bootstrap: str, timeout: float, env: dict[str, str]) -> tuple[float, int]:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "opskit.cli.main", *cmd, "-b", bootstrap,
                        "--timeout", f"{timeout:g}"], capture_output=True, text=True, env=env,
                       stdin=subprocess.DEVNULL, timeout=timeout * 10 + 60, check=False)
    return time.monotonic() - t0, p.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeouts", default="3,10")
    args = ap.parse_args()
    timeouts = [float(x) for x in args.timeouts.split(",")]
    print(f"load before: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, OPSKIT_CONFIG=f"{tmp}/config.yaml", OPSKIT_STATE=f"{tmp}/state",
                   PYTHONWARNINGS="ignore")
        broker = compat.start_hanzo_stream(Path(tmp) / "gateway")
        try:
            bs = broker.bootstrap
            create_topics(bs, TOPICS)
            for t, n in TOPICS.items():
                produce(bs, t, {p: 5 + p for p in range(n)})
            for g, topics in GROUPS.items():
                commit(bs, g, {(t, p): 2 for t in topics for p in range(TOPICS[t])})
            print(f"{'command':<18} {'--timeout':>9} {'bound':>6} {'median':>7} {'max':>6} "
                  f"{'max/bound':>9}  exits")
            worst = 0.0
            for cmd in COMMANDS:
                for to in timeouts:
                    got = [run(cmd, bs, to, env) for _ in range(args.runs)]
                    secs = [s for s, _ in got]
                    bound = to + 2
                    worst = max(worst, max(secs) / bound)
                    print(f"{' '.join(cmd):<18} {to:>9g} {bound:>6g} {statistics.median(secs):>7.1f} "
                          f"{max(secs):>6.1f} {max(secs) / bound:>9.2f}  "
                          f"{sorted({c for _, c in got})}")
        finally:
            broker.stop()
    print(f"load after: {os.getloadavg()[0]:.1f}")
    print(f"worst run / bound: {worst:.2f} ({'met' if worst <= 1 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
