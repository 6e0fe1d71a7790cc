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
# The test files run in four pytest processes side by side: most of their time is spent
# waiting on Kafka, Spark and Kubernetes (load 1-3 with two processes), so the run takes about
# the time of the longest shard instead of the sum (one process: about 100 minutes). Three
# shards are named below (each file's minutes measured in a full run, load 1-10); the fourth
# runs every other file, unit tests included, so a new test file needs no entry. Each
# process has its own state directory and picks free ports at random (tests/conftest.py).
# Their reports are printed one after the other; the exit status is the first failure.
# OPSKIT_TEST_SERIAL=1 runs everything in one process.
I=tests/integration
SHARDS=(
  # whole-cluster scale-outs: about 21 minutes
  "$I/test_playbook_local.py $I/test_playbook_secured4.py"
  # about 24 minutes
  "$I/test_playbook_quorum.py $I/test_playbook_safety.py $I/test_runbook_scaleout.py"
  # Spark, reassignment under kill -9, alerting, Kubernetes, broker faults, the demo: ~24 min
  "$I/test_replay_standalone.py $I/test_replay_spark.py $I/test_replay_killed.py
   $I/test_reassign_exec.py $I/test_alerting_e2e.py $I/test_playbook_k8s.py
   $I/test_secured_reassign_replay.py $I/test_broker_faults.py $I/test_demo_script.py"
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
  "$VENV/bin/python" -m pytest "${files[@]}" "$@" >"$log" 2>&1 </dev/null &
  pids+=($!)
done
echo "test.sh: ${#SHARDS[@]} shards of test files run beside this one; their reports follow" >&2
set +e
"$VENV/bin/python" -m pytest tests "${ignores[@]}" "$@"
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
