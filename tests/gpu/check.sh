#!/bin/sh
# A GPU sandbox on a host with an NVIDIA GPU and its driver (docs/devices.md, "Testing"): run as
# root from the tree, after `make` (and `sh scripts/build-base.sh` for the Debian base template,
# which has python3). Needs no network and no nvidia-ctk: it writes a CDI spec of its own, without
# hooks, from the host's /dev/nvidia* nodes and driver libraries, then:
#   1. starts a warrend of its own on that spec,
#   2. creates a sandbox with nvidia.com/gpu=0: `nvidia-smi -L` inside lists exactly one GPU, and
#      CUDA's driver API (libcuda.so.1 through python3's ctypes) initialises and counts 1 device,
#   3. a sandbox without the device has no /dev/nvidia*,
#   4. a second create of the GPU while the first holds it answers 503,
#   5. after the delete, the host's GPU runs no process of ours.
# Exit 0 when every check passed; it cleans up after itself either way.
#
# usage: tests/gpu/check.sh [BUILD_DIR] [BASE_TEMPLATE_DIR]
set -eu
BUILD=$(cd "${1:-build}" && pwd)
BASE=${2:-/var/cache/warren/test-templates/base}
TOP=$(mktemp -d /tmp/warren-gpu-XXXXXX)
RUN=/run/warren-gpu-$$
SOCK=$TOP/warrend.sock
PID=
fail() { echo "gpu check: FAILED: $*" >&2; exit 1; }
cleanup() {
    [ -z "$PID" ] || { kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null || true; }
    umount -R "$RUN" 2>/dev/null || true
    rm -rf "$RUN" "$TOP"
}
trap cleanup EXIT INT TERM

command -v nvidia-smi >/dev/null || fail "no nvidia-smi on this host"
nvidia-smi -L >/dev/null || fail "nvidia-smi -L fails on the host"
[ -e /dev/nvidia0 ] || fail "no /dev/nvidia0"
[ -x "$BUILD/warrend" ] || fail "no $BUILD/warrend (run make)"
[ -x "$BASE/rootfs/usr/bin/python3" ] || fail "no Debian base template at $BASE"
echo "host: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"

# The spec: the nodes, and each library at its SONAME path (no create-symlinks hook needed).
lib() { ldconfig -p | awk -v n="$1" '$1 == n && /x86-64/ {print $NF; exit}'; }
SPEC=$TOP/cdi
mkdir -p "$SPEC"
{
    echo '{"cdiVersion": "1.0.0", "kind": "nvidia.com/gpu",'
    echo ' "containerEdits": {"deviceNodes": ['
    sep=
    for n in /dev/nvidiactl /dev/nvidia-uvm /dev/nvidia-uvm-tools /dev/nvidia-modeset; do
        [ -e "$n" ] && { printf '%s{"path": "%s"}' "$sep" "$n"; sep=,; }
    done
    echo '], "mounts": ['
    sep=
    for so in libcuda.so.1 libnvidia-ml.so.1 libnvidia-ptxjitcompiler.so.1 libnvidia-nvvm.so.4; do
        p=$(lib "$so")
        [ -n "$p" ] || continue
        printf '%s{"hostPath": "%s", "containerPath": "/usr/lib/x86_64-linux-gnu/%s"}' \
            "$sep" "$(readlink -f "$p")" "$so"
        sep=,
    done
    printf '%s{"hostPath": "%s", "containerPath": "/usr/bin/nvidia-smi"}' "$sep" \
        "$(readlink -f "$(command -v nvidia-smi)")"
    echo ']},'
    echo ' "devices": [{"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}}]}'
} >"$SPEC/nvidia.json"
chmod 644 "$SPEC/nvidia.json"

mkdir -p "$TOP/state/templates/base"
ln -s "$BASE/rootfs" "$TOP/state/templates/base/rootfs"
cp "$BASE/config.json" "$TOP/state/templates/base/"
"$BUILD/warrend" --state-dir "$TOP/state" --run-dir "$RUN" --socket "$SOCK" --listen "" \
    --net-pool none --cdi-spec-dirs "$SPEC" >"$TOP/warrend.out" 2>"$TOP/warrend.log" &
PID=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
W() { WARREN_API_URL="unix://$SOCK" "$BUILD/warren" "$@"; }
W devices | grep -q 'nvidia.com/gpu=0 ' || fail "the daemon does not list nvidia.com/gpu=0: $(cat "$TOP/warrend.log")"

ID=$(W create --device nvidia.com/gpu=0 --timeout 300)
GPUS=$(W exec "$ID" -- nvidia-smi -L) || fail "nvidia-smi -L inside: $GPUS"
[ "$(echo "$GPUS" | grep -c '^GPU ')" = 1 ] || fail "not exactly one GPU inside: $GPUS"
echo "inside: $GPUS"
CUDA=$(W exec "$ID" -- python3 -c '
import ctypes
c = ctypes.CDLL("libcuda.so.1")
n = ctypes.c_int()
print(c.cuInit(0), c.cuDeviceGetCount(ctypes.byref(n)), n.value)') || fail "CUDA inside: $CUDA"
[ "$CUDA" = "0 0 1" ] || fail "cuInit, cuDeviceGetCount, count: want 0 0 1, got $CUDA"
echo "inside: cuInit 0, 1 device"

OTHER=$(W create --timeout 60)
if W exec "$OTHER" -- sh -c 'ls /dev/nvidia* 2>/dev/null' | grep -q nvidia; then
    fail "a sandbox without the device has /dev/nvidia*"
fi
W rm "$OTHER"

if OUT=$(W create --device nvidia.com/gpu=0 --timeout 60 2>&1); then
    W rm "$OUT"
    fail "a second create of the GPU succeeded"
fi
echo "$OUT" | grep -q "in use" || fail "a second create of the GPU: $OUT"
echo "second create: $OUT"

W rm "$ID"
sleep 1
APPS=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader)
[ -z "$APPS" ] || fail "the GPU still runs processes: $APPS"
echo "gpu check: ok"
