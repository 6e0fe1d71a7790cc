#!/usr/bin/env bash
# Install what the tests need, then run all of them (unit + integration against
# real Kafka brokers that the tests start themselves). Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install.sh
# everything runs from the project's virtual environment that install.sh made
VENV=$(cd "${OPSKIT_VENV:-.venv}" && pwd)
export PATH="$VENV/bin:$PATH"
exec "$VENV/bin/python" -m pytest tests "$@"
