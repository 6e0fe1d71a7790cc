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
# cluster for minutes while mostly waiting on Kafka) run in a second pytest process beside the
# others: the run takes about the time of the longer half instead of their sum. Each process
# has its own state directory and picks free ports at random (tests/conftest.py). Its report
# is printed after the first one's; the exit status is the first failure of the two.
# OPSKIT_TEST_SERIAL=1 runs everything in one process.
SCALE_TESTS=(tests/integration/test_playbook_local.py tests/integration/test_playbook_quorum.py
             tests/integration/test_playbook_safety.py tests/integration/test_playbook_secured4.py
             tests/integration/test_runbook_scaleout.py)
if [ "${OPSKIT_TEST_SERIAL:-0}" = 1 ]; then
  exec "$VENV/bin/python" -m pytest tests "$@"
fi
ignores=()
for t in "${SCALE_TESTS[@]}"; do ignores+=("--ignore=$t"); done
scale_log=$(mktemp "${TMPDIR:-/tmp}/opskit-scale-tests.XXXXXX")
trap 'rm -f "$scale_log"' EXIT
echo "test.sh: the scale-out tests (${#SCALE_TESTS[@]} files) run beside the others; their report follows" >&2
"$VENV/bin/python" -m pytest "${SCALE_TESTS[@]}" "$@" >"$scale_log" 2>&1 </dev/null &
scale_pid=$!
set +e
"$VENV/bin/python" -m pytest tests "${ignores[@]}" "$@"
rc_rest=$?
wait "$scale_pid"
rc_scale=$?
set -e
echo "== scale-out tests (${SCALE_TESTS[*]}) =="
cat "$scale_log"
if [ "$rc_rest" -ne 0 ]; then exit "$rc_rest"; fi
exit "$rc_scale"
