#!/usr/bin/env bash
# Build the exporters opskit's exporter benchmark compares against, through the
# Go module proxy only:
#
#   kafka_exporter  github.com/danielqsj/kafka_exporter   (the de-facto Kafka exporter)
#   kminion         github.com/redpanda-data/kminion/v2, else github.com/cloudhut/kminion/v2
#
# Usage: scripts/install-exporters.sh [--force] [--strict] [kafka_exporter|kminion|all]...
#
# Binaries go to ${OPSKIT_CACHE:-$HOME/.cache/opskit}/compat/bin; what happened to
# each one is written to .../compat/exporters.status (read by
# benchmarks/bench_exporter.py, which reports a missing exporter and carries on).
# Idempotent: a working binary is kept unless --force.
# Exit status: 0, even when a build fails (the benchmark then says so), unless
# --strict is given: then 1 if any requested exporter is missing.
#
# Environment:
#   OPSKIT_CACHE             cache root (default: $HOME/.cache/opskit)
#   KAFKA_EXPORTER_VERSION   module version (default: v1.9.0)
#   KMINION_VERSION          module version (default: latest)
set -euo pipefail

CACHE_ROOT="${OPSKIT_CACHE:-$HOME/.cache/opskit}"
COMPAT_DIR="$CACHE_ROOT/compat"
BIN_DIR="$COMPAT_DIR/bin"
STATUS="$COMPAT_DIR/exporters.status"
KAFKA_EXPORTER_VERSION="${KAFKA_EXPORTER_VERSION:-v1.9.0}"
KMINION_VERSION="${KMINION_VERSION:-latest}"

FORCE=0
STRICT=0
WANT_KE=0
WANT_KM=0
say() { printf 'install-exporters: %s\n' "$*"; }
warn() { printf 'install-exporters: WARNING: %s\n' "$*" >&2; }

for arg in "$@"; do
    case "$arg" in
        --force) FORCE=1 ;;
        --strict) STRICT=1 ;;
        kafka_exporter|kafka-exporter) WANT_KE=1 ;;
        kminion) WANT_KM=1 ;;
        all) WANT_KE=1; WANT_KM=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
        *) warn "unknown argument: $arg (use --help)"; exit 2 ;;
    esac
done
if [[ $WANT_KE -eq 0 && $WANT_KM -eq 0 ]]; then WANT_KE=1; WANT_KM=1; fi

mkdir -p "$BIN_DIR"
touch "$STATUS"
TMP_ROOT="$(mktemp -d "${TMPDIR:-/tmp}/opskit-exporters.XXXXXX")"
trap 'rm -rf "$TMP_ROOT"' EXIT

set_status() {  # name, line
    grep -v "^$1 " "$STATUS" >"$TMP_ROOT/status" || true
    printf '%s %s\n' "$1" "$2" >>"$TMP_ROOT/status"
    mv -f "$TMP_ROOT/status" "$STATUS"
}

# go install MODULE@VERSION, binary NAME -> $BIN_DIR/DEST; returns 0 on success
go_build() {
    local module="$1" version="$2" name="$3" dest="$4"
    local gobin="$TMP_ROOT/gobin-$dest"
    mkdir -p "$gobin"
    say "$dest: go install $module@$version (Go module proxy)"
    if GOTOOLCHAIN="${GOTOOLCHAIN:-auto}" GOFLAGS=-mod=mod GOBIN="$gobin" CGO_ENABLED=0 \
            go install -trimpath "$module@$version" >"$TMP_ROOT/$dest.log" 2>&1 \
            && [[ -x "$gobin/$name" ]]; then
        mv -f "$gobin/$name" "$BIN_DIR/$dest"
        set_status "$dest" "ok $module@$version"
        say "$dest: installed $BIN_DIR/$dest"
        return 0
    fi
    local why
    why="$(grep -m 1 -v '^go: downloading' "$TMP_ROOT/$dest.log" | tr -d '\n' || true)"
    warn "$dest: go install $module@$version failed: ${why:-no output}"
    set_status "$dest" "failed $module@$version: ${why:-no output}"
    return 1
}

ensure() {  # dest, then "module version binary" triples to try in order
    local dest="$1"; shift
    if [[ $FORCE -eq 0 && -x "$BIN_DIR/$dest" ]] && "$BIN_DIR/$dest" --help >/dev/null 2>&1; then
        say "$dest: already installed at $BIN_DIR/$dest"
        return 0
    fi
    if ! command -v go >/dev/null 2>&1; then
        warn "$dest: the Go toolchain ('go') is not on PATH (Debian: apt-get install golang-go)"
        set_status "$dest" "failed: no Go toolchain"
        return 1
    fi
    while [[ $# -ge 3 ]]; do
        if go_build "$1" "$2" "$3" "$dest"; then return 0; fi
        shift 3
    done
    return 1
}

RC=0
if [[ $WANT_KE -eq 1 ]]; then
    ensure kafka_exporter \
        github.com/danielqsj/kafka_exporter "$KAFKA_EXPORTER_VERSION" kafka_exporter \
        github.com/danielqsj/kafka_exporter latest kafka_exporter || RC=1
fi
if [[ $WANT_KM -eq 1 ]]; then
    ensure kminion \
        github.com/redpanda-data/kminion/v2 "$KMINION_VERSION" kminion \
        github.com/cloudhut/kminion/v2 "$KMINION_VERSION" kminion || RC=1
fi
if [[ $STRICT -eq 1 ]]; then exit $RC; fi
exit 0
