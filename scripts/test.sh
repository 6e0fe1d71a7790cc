#!/usr/bin/env bash
# Install what the tests need (scripts/install.sh --all: the demo layer plus the test and
# replay extras, Kafka 4.x, Spark's connector jars, Prometheus, the Kafka-compatible brokers
# and a kube-apiserver; each piece cached), then run all of them (unit + integration against
# real Kafka brokers that the tests start themselves). Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install.sh --all
# everything runs from the project's virtual environment that install.sh made
VENV=$(cd "${OPSKIT_VENV:-.venv}" && pwd)
export PATH="$VENV/bin:$PATH"
# static checks first, a few seconds each: type errors (mypy strict on the package, config in
# pyproject.toml) or lint findings fail the run before the long tests start
"$VENV/bin/python" -m mypy
"$VENV/bin/ruff" check opskit tests benchmarks spark_jobs scripts
# The whole-cluster scale-out tests (each starts, grows, restarts and kills its own 3-node
# cluster for minutes while mostly waiting on Kafka), the demo, and the other long tests that
# start their own clusters (reassignment under kill -9, Spark standalone, Kubernetes) run in
# two more pytest processes beside the rest: the run takes about the time of the longest
# third instead of their sum. History on 2 cores: two processes, 53 min here and 70.6 min on
# CI's machine (2026-11-27, CI failed for a flaky test and was over the hour); four processes
# tried the same day: about 40 minutes, but load 15-25 made whole scale-outs and reassignment
# tests miss their deadlines (their final health check waited up to 300 s for Kafka's own
# leader rebalance after the rolling restart; the playbook now elects preferred leaders after
# each restart: one scale-out test went from 541 to 223 s). Three processes now, with Kafka's
# JVMs on C1 and the serial collector (tests/conftest.py), which halves a node's start-up
# CPU. Each process has its own
# state directory and picks free ports below the ephemeral range (tests/conftest.py); the
# session fixtures (clusters, Spark, kube-apiserver) start in each process that uses them.
# The shard reports are printed after the first; the exit status is the first failure.
# Each report ends with its slowest tests (--durations): what to look at when the run grows.
# OPSKIT_TEST_SERIAL=1 runs everything in one process.
I=tests/integration
SHARDS=(
  "$I/test_playbook_local.py $I/test_runbook_scaleout.py $I/test_playbook_secured4.py
   $I/test_racks_set_rack.py $I/test_secured_reassign_replay.py $I/test_alerting_e2e.py
   $I/test_sandbox_scale.py $I/test_racks_reassign.py $I/test_playbook_multirack.py
   $I/test_playbook_multirack_k8s.py $I/test_playbook_multirack_every_step.py"
  "$I/test_playbook_quorum.py $I/test_playbook_safety.py $I/test_demo_script.py
   $I/test_racks_playbook_status.py $I/test_playbook_k8s.py $I/test_reassign_exec.py
   $I/test_replay_standalone.py $I/test_replay_killed_standalone.py $I/test_replay_spark.py
   $I/test_broker_faults.py $I/test_playbook_multirack_k8s_4x.py"
)
if [ "${OPSKIT_TEST_SERIAL:-0}" = 1 ]; then
  exec "$VENV/bin/python" -m pytest tests "$@"
fi
ignores=()
logs=()
pids=()
trap 'rm -f "${logs[@]}"' EXIT
for shard in "${SHARDS[@]}"; do
  read -r -a files <<<"$(echo $shard)"
  for t in "${files[@]}"; do ignores+=("--ignore=$t"); done
  log=$(mktemp "${TMPDIR:-/tmp}/opskit-shard.XXXXXX")
  logs+=("$log")
  "$VENV/bin/python" -m pytest "${files[@]}" --durations=15 "$@" >"$log" 2>&1 </dev/null &
  pids+=($!)
done
echo "test.sh: ${#SHARDS[@]} shards of test files run beside this one; their reports follow" >&2
set +e
"$VENV/bin/python" -m pytest tests "${ignores[@]}" --durations=40 "$@"
rc=$?
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"
  shard_rc=$?
  echo "== shard $((i + 1)): $(echo ${SHARDS[$i]}) =="
  cat "${logs[$i]}"
  if [ "$rc" -eq 0 ] && [ "$shard_rc" -ne 0 ]; then rc=$shard_rc; fi
done
set -e
exit "$rc"
