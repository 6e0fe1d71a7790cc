#!/usr/bin/env bash
# The main job on a local real cluster: install what the demo needs (scripts/install.sh: a JDK,
# the .venv with opskit's core dependencies, Kafka 3.7's jars; nothing for the tests), start
# Apache Kafka 3.7 (KRaft, HIP-30 layout), create the HIP-30 topics, run live HIP-30 traffic
# with the six consumer groups, then show `opskit lag --group analytics-ingest`.
# Stop it all with: opskit sandbox down --name demo
# Environment: OPSKIT_DEMO_PORT (default 9092), OPSKIT_DEMO_WAIT (seconds of traffic before
# the lag table, default 20), and install.sh's OPSKIT_VENV, OPSKIT_CACHE, PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."
T0=$SECONDS
./scripts/install.sh
# opskit lives in the project's virtual environment (.venv)
export PATH="$(cd "${OPSKIT_VENV:-.venv}" && pwd)/bin:$PATH"
PORT=${OPSKIT_DEMO_PORT:-9092}
WAIT=${OPSKIT_DEMO_WAIT:-20}
opskit sandbox up --name demo --port "$PORT"
opskit topics apply --context sandbox-demo --execute
opskit sandbox load --name demo --rate 500 --duration 0 --detach
echo "letting traffic flow for $WAIT s..."
sleep "$WAIT"
# a slow machine may need longer before the group's first commit: wait for it (up to 120 s
# more) rather than show "group not found"
for _ in $(seq 60); do
  rc=0
  opskit lag --group analytics-ingest --context sandbox-demo -o json >/dev/null 2>&1 || rc=$?
  if [ "$rc" -le 2 ]; then break; fi
  sleep 2
done
rc=0
opskit lag --group analytics-ingest --context sandbox-demo || rc=$?
echo
echo "opskit lag exited $rc (0 OK, 1 WARNING, 2 CRITICAL) after $((SECONDS - T0)) s. Try also:"
echo "  opskit lag --all-groups --context sandbox-demo      # billing-agg lags, audit-archive stopped"
echo "  opskit lag --group rpc-billing --context sandbox-demo -o json"
echo "  opskit sandbox down --name demo                     # stops Kafka and the traffic"
