#!/usr/bin/env bash
# The main job on a local real cluster: install, start Apache Kafka 3.7 (KRaft,
# HIP-30 layout), create the HIP-30 topics, run live HIP-30 traffic with the six
# consumer groups, then show `opskit lag --group analytics-ingest`.
# Stop it all with: opskit sandbox down --name demo
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install.sh
# opskit lives in the project's virtual environment (.venv)
export PATH="$(cd "${OPSKIT_VENV:-.venv}" && pwd)/bin:$PATH"
PORT=${OPSKIT_DEMO_PORT:-9092}
opskit sandbox up --name demo --port "$PORT"
opskit topics apply --context sandbox-demo --execute
opskit sandbox load --name demo --rate 500 --duration 0 --detach
echo "letting traffic flow for 20 s..."
sleep 20
rc=0
opskit lag --group analytics-ingest --context sandbox-demo || rc=$?
echo
echo "opskit lag exited $rc (0 OK, 1 WARNING, 2 CRITICAL). Try also:"
echo "  opskit lag --all-groups --context sandbox-demo      # billing-agg lags, audit-archive stopped"
echo "  opskit lag --group rpc-billing --context sandbox-demo -o json"
echo "  opskit sandbox down --name demo                     # stops Kafka and the traffic"
