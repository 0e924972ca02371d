#!/bin/sh
# The runtime benchmark (issue #2). Not a test: it reports medians and p99s, and ratios against
# Debian's bwrap measured in the same run. Usage: bench/run.sh [BUILD_DIR] [N]
#
#  1. in-process: create → /bin/true → exit → destroy, N times, from one long-lived process:
#     bench/sandbox_loop.c, with each sandbox cloned by warren-zygote (--zygote: the path warrend
#     uses) and by the process itself (the path `warren run` uses); against the isolation floor
#     (--floor) and the floor with a resident PID 1 (--floor-pid1) in the same run
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
echo "== 1. in-process (runtime library), $N sandboxes, cloned as warrend and as \`warren run\` do"
WARREN_INIT=$(realpath "$BUILD/warren-init") "$BUILD/bench/sandbox_loop" \
    --zygote "$(realpath "$BUILD/warren-zygote")" "$(realpath "$IMG")" "$N" | tee "$OUT/inproc.txt"
WARREN_INIT=$(realpath "$BUILD/warren-init") "$BUILD/bench/sandbox_loop" "$(realpath "$IMG")" "$N" |
    tee "$OUT/inproc-run.txt"
echo "== 1b. the in-process peers: the research's nsfloor sequence, same process, same run; and"
echo "   the same with a resident PID 1 that starts /bin/true as its child, as the daemon's path has"
"$BUILD/bench/sandbox_loop" --floor "$(realpath "$IMG")" "$N" | tee -a "$OUT/inproc.txt"
"$BUILD/bench/sandbox_loop" --floor-pid1 "$(realpath "$IMG")" "$N" | tee -a "$OUT/inproc.txt"
python3 - "$OUT/inproc.txt" "$OUT/inproc-run.txt" <<'PY'
import re, sys
def medians(path):
    med = {}
    for line in open(path):
        m = re.match(r"\s+(.+?)\s+median\s+([\d.]+) ms", line)
        if m:
            med[m.group(1).strip()] = float(m.group(2))
    return med
med, run = medians(sys.argv[1]), medians(sys.argv[2])
ours = med["create -> /bin/true exit"]
floor = med["clone -> /bin/true exit -> reaped"]
pid1 = med["clone -> PID 1 runs /bin/true -> reaped"]
# issue #2: in-process create→exit <= 2 ms where the research measured 1.56 ms for the floor
print("  in-process create→exit / floor              %.2f (target %.2f: 2 ms / 1.56 ms)" % (ours / floor, 2 / 1.56))
print("  in-process create→exit / floor with a PID 1 %.2f" % (ours / pid1))
print("  floor with a PID 1 / floor                  %.2f" % (pid1 / floor))
print("  the same, cloned by the process itself / floor %.2f" % (run["create -> /bin/true exit"] / floor))
PY
# the cgroup parent of sandbox_loop's sandboxes, each of which removed its own
for h in /sys/fs/cgroup/*/warren-bench /sys/fs/cgroup/warren-bench; do
    [ ! -d "$h" ] || rmdir "$h" || echo "bench: left behind: $h" >&2
done

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
