#!/usr/bin/env bash
# Install Prometheus and Alertmanager from Debian (promtool, amtool, prometheus,
# prometheus-alertmanager) for the alerting tests and the end-to-end stack, and
# openssl (the tests' local PagerDuty receiver makes a throw-away TLS certificate).
#
# Idempotent: does nothing when the binaries are already on PATH.
# --check: exit 0 when they are, 1 otherwise (installs nothing).
# The packages' own system services are never left running: the tests start
# their own servers on free ports with their own data dirs, and a packaged
# server on 9090/9093 would only get in the way.
set -euo pipefail

# Debian names the Alertmanager binary prometheus-alertmanager
have_all() {
  for bin in promtool amtool prometheus; do
    command -v "$bin" >/dev/null 2>&1 || return 1
  done
  command -v openssl >/dev/null 2>&1 || return 1
  command -v alertmanager >/dev/null 2>&1 || command -v prometheus-alertmanager >/dev/null 2>&1
}
if [ "${1:-}" = "--check" ]; then have_all; exit; fi
need=0
have_all || need=1
if [ "$need" -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi

# Keep the packages' postinst scripts from starting their services
# (Debian's invoke-rc.d honours policy-rc.d exit status 101 = "not allowed").
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  created_policy=1
fi
cleanup() {
  if [ "$created_policy" -eq 1 ]; then $SUDO rm -f "$policy"; fi
}
trap cleanup EXIT

echo "install-prometheus.sh: installing prometheus, prometheus-alertmanager and openssl from Debian" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
  prometheus prometheus-alertmanager openssl >/dev/null

# Belt and braces: if systemd runs here, make sure the packaged services are
# stopped and stay disabled.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  for svc in prometheus prometheus-alertmanager; do
    $SUDO systemctl disable --now "$svc" >/dev/null 2>&1 || true
  done
fi

have_all || { echo "install-prometheus.sh: a binary is missing after install" >&2; exit 1; }
echo "install-prometheus.sh: done" >&2
