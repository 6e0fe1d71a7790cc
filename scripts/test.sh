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
exec "$VENV/bin/python" -m pytest tests "$@"
