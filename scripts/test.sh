#!/usr/bin/env bash
# Install what the tests need, then run all of them (unit + integration against
# real Kafka brokers that the tests start themselves). Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install.sh
exec "${PYTHON:-python3}" -m pytest tests "$@"
