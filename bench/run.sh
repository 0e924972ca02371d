#!/bin/sh
# The runtime benchmark (issue #2). Not a test: it reports medians and p99s, and ratios against
# Debian's bwrap measured in the same run. Usage: bench/run.sh [BUILD_DIR] [N]
#
#  1. in-process: create → /bin/true → exit → destroy, N times, from one long-lived process
#     (the path the daemon uses): bench/sandbox_loop.c
#  2. `warren run -- /bin/true` against bwrap doing the closest equivalent, N runs each under
#     hyperfine (-N: no shell in between).
set -eu
BUILD=${1:-build}
N=${2:-1000}
IMG=$BUILD/images/busybox
OUT=${BENCH_OUT:-$BUILD/bench}
mkdir -p "$OUT"
command -v hyperfine >/dev/null || { echo "bench: apt-get install hyperfine bubblewrap" >&2; exit 1; }

echo "== machine: $(nproc) cpus, kernel $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ)"
echo "== 1. in-process (runtime library), $N sandboxes"
WARREN_INIT=$(realpath "$BUILD/warren-init") "$BUILD/bench/sandbox_loop" "$(realpath "$IMG")" "$N"
echo "== 1b. the in-process peer: the research's nsfloor sequence, same process, same run"
"$BUILD/bench/sandbox_loop" --floor "$(realpath "$IMG")" "$N"

echo "== 2. CLI, $N runs each (hyperfine -N)"
# bwrap-img: bwrap on the same busybox image, read-only root, same six namespaces.
# bwrap-usr: the research's command (research/perf-namespaces.md, 2a).
hyperfine -N --warmup 20 --runs "$N" --export-json "$OUT/cli.json" \
    -n warren-run "$BUILD/warren run --rootfs $IMG -- /bin/true" \
    -n bwrap-img "bwrap --unshare-user --unshare-pid --unshare-net --unshare-ipc --unshare-uts --ro-bind $IMG / --proc /proc --dev /dev --tmpfs /tmp /bin/true" \
    -n bwrap-usr "bwrap --unshare-user --unshare-pid --unshare-net --unshare-ipc --unshare-uts --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/sbin /sbin --proc /proc --dev /dev --tmpfs /tmp /bin/true" \
    >/dev/null
python3 - "$OUT/cli.json" <<'PY'
import json, statistics, sys
res = json.load(open(sys.argv[1]))["results"]
def p(v, q):
    v = sorted(v); return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]
med = {}
for r in res:
    t = [x * 1000 for x in r["times"]]
    med[r["command"]] = statistics.median(t)
    print("  %-10s median %6.3f ms  p99 %6.3f ms  (n=%d)" % (r["command"], statistics.median(t), p(t, 0.99), len(t)))
for peer in ("bwrap-img", "bwrap-usr"):
    print("  warren-run / %s median ratio: %.2f" % (peer, med["warren-run"] / med[peer]))
PY
