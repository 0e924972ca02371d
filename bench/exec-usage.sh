#!/bin/sh
# The per-command accounting benchmark (docs/usage.md, "Per-command usage"). Not a test: it
# reports the cost of an exec of `true` (POST .../exec, mode wait, one keep-alive connection
# over the unix socket, the Python SDK's client) each way through a real warrend:
#   rusage:  the default: warren-init's wait4 figures in the exit (no cgroup)
#   cgroup:  "usage": "cgroup": a cgroup of the command's own, made and removed per exec
#   limits:  "cpus" and "memory_mb" (a cgroup with limits written)
# and, with BASE_BUILD=<a build directory of a tree without per-command usage>, the same
# default exec through that daemon, as the baseline. The ways are interleaved in rounds so
# that a change in the machine's load hits them alike.
# Usage: bench/exec-usage.sh [BUILD_DIR]    Environment: N (execs per way and round, 200),
# ROUNDS (5), WARREN_BASE_TEMPLATE (the test suite's base template).
set -eu
BUILD=${1:-build}
N=${N:-200}
ROUNDS=${ROUNDS:-5}
BASE=${WARREN_BASE_TEMPLATE:-/var/cache/warren/test-templates/base}
[ "$(id -u)" = 0 ] || { echo "bench: run as root (warrend needs it)" >&2; exit 1; }
[ -x "$BUILD/warrend" ] || { echo "bench: build first (make)" >&2; exit 1; }
[ -x "$BASE/rootfs/bin/sh" ] || { echo "bench: no base template in $BASE" >&2; exit 1; }

TMP=$(mktemp -d)
PIDS=
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null || true; done
    # the network slots outlive a daemon on purpose: the benchmark's go with it
    for n in new base; do
        for s in /run/warren-bench-$n-$$/net/wbe$n$$/*; do [ -e "$s" ] && umount -l "$s"; done
        nft delete table inet "wbe$n$$" 2>/dev/null || true
        rm -rf "/run/warren-bench-$n-$$"
    done
    rm -rf "$TMP"
}
trap cleanup EXIT

# start NAME BUILD POOL: a daemon of its own (state, socket, run and cgroup directories, and a
# network pool and table, internet off, DNS to loopback's discard port: nothing leaves)
start() {
    mkdir -p "$TMP/$1/state/templates/base"
    ln -s "$(cd "$BASE" && pwd)/rootfs" "$TMP/$1/state/templates/base/rootfs"
    cp "$BASE/config.json" "$TMP/$1/state/templates/base/"
    WARREN_CGROUP_PARENT=warren-bench-$1-$$ "$2/warrend" --state-dir "$TMP/$1/state" \
        --socket "$TMP/$1/sock" --listen 127.0.0.1:0 --run-dir "/run/warren-bench-$1-$$" --net-pool "$3" \
        --net-table "wbe$1$$" --net-default off --net-ready 1 --dns-upstream 127.0.0.1:9 \
        >"$TMP/$1/out" 2>"$TMP/$1/log" &
    PIDS="$PIDS $!"
    i=0
    until [ -S "$TMP/$1/sock" ] && grep -q . "$TMP/$1/out" 2>/dev/null; do
        i=$((i + 1)); [ $i -lt 100 ] || { cat "$TMP/$1/log" >&2; exit 1; }
        sleep 0.1
    done
}

start new "$BUILD" 198.19.240.0/24
WAYS="rusage=$TMP/new/sock cgroup=$TMP/new/sock limits=$TMP/new/sock"
if [ -n "${BASE_BUILD:-}" ]; then
    start base "$BASE_BUILD" 198.19.241.0/24
    WAYS="baseline=$TMP/base/sock $WAYS"
fi

PYTHONPATH="$(dirname "$0")/../sdk/python" python3 - "$N" "$ROUNDS" $WAYS <<'EOF'
import statistics, sys, time
import warren

n, rounds = int(sys.argv[1]), int(sys.argv[2])
ways = [w.split("=", 1) for w in sys.argv[3:]]
extra = {"baseline": {}, "rusage": {}, "cgroup": {"usage": "cgroup"},
         "limits": {"cpus": 0.5, "memory_mb": 256}}
sbs = {}
for name, sock in ways:
    c = warren.Client("unix://" + sock)
    sbs[name] = (c, warren.Sandbox.create(client=c, cpus=1, memory_mb=512, timeout=3600))
times = {name: [] for name, _ in ways}
for r in range(rounds):
    for name, _ in ways:
        c, sb = sbs[name]
        path = "/v1/sandboxes/%s/exec" % sb.sandbox_id
        body = {"cmd": ["true"], "mode": "wait", **extra[name]}
        for _ in range(10):  # warm the connection and the caches
            c.request("POST", path, json_body=body)
        for _ in range(n):
            t0 = time.perf_counter()
            c.request("POST", path, json_body=body)
            times[name].append(time.perf_counter() - t0)
ref = "baseline" if "baseline" in times else "rusage"
m0 = statistics.mean(times[ref])
print("%-9s %8s %8s %8s %8s" % ("way", "mean ms", "p50 ms", "p90 ms", "vs " + ref))
for name, _ in ways:
    t = sorted(times[name])
    print("%-9s %8.3f %8.3f %8.3f %+7.1f%%" % (
        name, statistics.mean(t) * 1e3, t[len(t) // 2] * 1e3, t[int(len(t) * 0.9)] * 1e3,
        (statistics.mean(t) / m0 - 1) * 100))
for name, (c, sb) in sbs.items():
    sb.kill()
EOF
