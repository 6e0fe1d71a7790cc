#!/usr/bin/env bash
# A real Kubernetes API server for opskit's tests (no kubelet, no scheduler):
# kube-apiserver built from the Go module proxy (k8s.io/kubernetes required as a
# module dependency; its staging modules k8s.io/api, k8s.io/client-go, ... mapped by
# `replace` lines to their published versions), and etcd built the same way from
# go.etcd.io/etcd/server/v3. Nothing else is downloaded; both binaries are cached in
# ${OPSKIT_CACHE:-~/.cache/opskit}/k8s/<version>/bin and kept across runs.
#
# Building kube-apiserver takes about 4-6 minutes on 2 cores the first time.
# Usage: scripts/install-k8s.sh            (prints the bin directory on stdout)
#        scripts/install-k8s.sh --check    (exit 0 when both are built, 1 otherwise)
# Env:   OPSKIT_K8S_VERSION (default 1.36.3), OPSKIT_ETCD_VERSION (default 3.6.5)
set -euo pipefail
K8S_VERSION=${OPSKIT_K8S_VERSION:-1.36.3}
ETCD_VERSION=${OPSKIT_ETCD_VERSION:-3.6.5}
CACHE_ROOT=${OPSKIT_CACHE:-$HOME/.cache/opskit}
DIR="$CACHE_ROOT/k8s/$K8S_VERSION-etcd$ETCD_VERSION"
BIN="$DIR/bin"
say() { printf 'install-k8s: %s\n' "$*" >&2; }

if [ "${1:-}" = "--check" ]; then [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/etcd" ]; exit; fi
if [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/etcd" ]; then
  say "kube-apiserver $K8S_VERSION and etcd $ETCD_VERSION already built in $BIN"
  echo "$BIN"; exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  say "installing Go from Debian (golang-go)"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq golang-go >/dev/null
fi
export GOFLAGS=-buildvcs=false CGO_ENABLED=0
mkdir -p "$BIN"
BUILD=$(mktemp -d "${TMPDIR:-/tmp}/opskit-k8s-build.XXXXXX")
trap 'rm -rf "$BUILD"' EXIT

# --- kube-apiserver ---------------------------------------------------------
if [ ! -x "$BIN/kube-apiserver" ]; then
  say "building kube-apiserver $K8S_VERSION (a few minutes on 2 cores)"
  mkdir -p "$BUILD/apiserver"; cd "$BUILD/apiserver"
  modjson=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION")
  gomod=$(printf '%s' "$modjson" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  [ -f "$gomod" ] || { say "the Go module proxy did not serve k8s.io/kubernetes@v$K8S_VERSION"; exit 1; }
  staging_version="v0.${K8S_VERSION#1.}"
  {
    echo "module opskit.test/kube-apiserver"
    echo
    sed -n 's/^go \(.*\)$/go \1/p' "$gomod" | head -1
    echo
    echo "require k8s.io/kubernetes v$K8S_VERSION"
    echo
    echo "replace ("
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/k8s.io/.*$#\t\1 => \1 '"$staging_version"'#p' "$gomod"
    echo ")"
  } > go.mod
  printf 'package main\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver/app"\n\nfunc main() {}\n' > deps.go
  go mod tidy >/dev/null 2>&1 || go mod tidy
  go build -trimpath -ldflags="-s -w" -o "$BIN/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
  mv "$BIN/kube-apiserver.tmp" "$BIN/kube-apiserver"
fi

# --- etcd --------------------------------------------------------------------
if [ ! -x "$BIN/etcd" ]; then
  say "building etcd $ETCD_VERSION"
  mkdir -p "$BUILD/etcd"; cd "$BUILD/etcd"
  cat > go.mod <<MOD
module opskit.test/etcd

go 1.24

require go.etcd.io/etcd/server/v3 v$ETCD_VERSION
MOD
  # our own two-line entry point into etcd's published main package
  printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' > main.go
  go mod tidy >/dev/null 2>&1 || go mod tidy
  go build -trimpath -ldflags="-s -w" -o "$BIN/etcd.tmp" .
  mv "$BIN/etcd.tmp" "$BIN/etcd"
fi
say "done: $BIN"
echo "$BIN"
