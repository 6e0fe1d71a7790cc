#!/usr/bin/env bash
# Spark lag-replay (opskit replay, spark_jobs/lag_replay.py): resolve Spark's Kafka
# connector (spark-sql-kafka-0-10_2.13 + spark-token-provider-kafka-0-10_2.13,
# kafka-clients, commons-pool2) for the installed PySpark from Maven Central into
# ~/.cache/opskit/spark-jars/<pyspark version>/ (list in jars.txt), and pyarrow from
# PyPI for the replay benchmark's single-consumer baseline.
# Idempotent: cached jars and installed packages are kept. Needs Java 17 and Maven
# (scripts/install.sh installs them) and the opskit package with pyspark.
# --check: exit 0 when all of it is there already, 1 otherwise (installs nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ "${1:-}" = "--check" ]; then
  exec "$PY" -c 'import sys, pyspark, pyarrow
from opskit.adapters.spark.submit import cached_jars, jars_dir
sys.exit(0 if cached_jars(jars_dir(pyspark.__version__), pyspark.__version__) else 1)'
fi
if ! command -v mvn >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jre-headless maven >/dev/null
fi
"$PY" -c 'import pyspark' 2>/dev/null \
  || "$PY" -m pip install -q --disable-pip-version-check pyspark 2>&1 | grep -v "Running pip as the 'root'" || true
"$PY" -c 'import pyarrow' 2>/dev/null \
  || "$PY" -m pip install -q --disable-pip-version-check pyarrow 2>&1 | grep -v "Running pip as the 'root'" || true
"$PY" -m opskit.adapters.spark.submit resolve
echo "install-spark.sh: done" >&2
