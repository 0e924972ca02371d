#!/bin/sh
# The daemon API benchmark (issue #3). Not a test: it reports medians and p99s, and ratios against
# peers measured in the same run (`warren run`, bwrap, the runtime's in-process loop and floor).
# Usage: bench/run-api.sh [BUILD_DIR] [N]
#
# It starts its own warrend on a temporary state directory (unix socket, no key), and measures:
#  1. create → first byte of `echo hi` → delete, N times one after the other (POST /v1/sandboxes,
#     POST exec mode=stream, DELETE), against `warren run -- echo hi` and bwrap (hyperfine -N)
#     and bench/sandbox_loop (in-process, cloned by warren-zygote as here, and --floor) in the
#     same run;
#  2. exec round trip: 1000 × POST exec mode=wait ["true"] in one running sandbox, keep-alive,
#     against the host's posix_spawn of the same binary and the same spawn sent straight to
#     warren-init (bench/sandbox_loop --spawn);
#  3. file upload and download: 1 GiB of zeros PUT then GET (byte count checked), and 256 MiB of
#     pseudo-random bytes (SHA-256 checked);
#  4. create → exec true → delete throughput with C = 2, 4, 8 concurrent clients, 20 s each,
#     against the same cycle in-process (bench/sandbox_loop --rate, no API), the floor's
#     sequence (--floor --rate) and the floor with a resident PID 1 (--floor-pid1 --rate), two
#     processes each, in the same run.
# The client is bench/api.c (llhttp + jansson), built here with the Makefile's HOST_CFLAGS; its
# own cost is shown (GET /v1/health round trip, client CPU per operation).
set -eu
BUILD=${1:-build}
N=${2:-1000}
NEXEC=${NEXEC:-1000}
CONC_SECS=${CONC_SECS:-20}
FILE_MIB=${FILE_MIB:-1024}
HASH_MIB=${HASH_MIB:-256}
IMG=$BUILD/images/busybox
ZYGOTE=$(realpath "$BUILD/warren-zygote") # the in-process peers clone as warrend does
OUT=${BENCH_OUT:-$BUILD/bench}
command -v hyperfine >/dev/null || { echo "bench: apt-get install hyperfine bubblewrap" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "bench: run as root (warrend needs it)" >&2; exit 1; }

echo "== build"
make -s BUILD="$BUILD" all
mkdir -p "$OUT"
# shellcheck disable=SC2016 # $($*) is make's, not the shell's
mk() { make -s --no-print-directory BUILD="$BUILD" --eval 'print-%: ; @echo $($*)' "print-$1"; }
# shellcheck disable=SC2046
${CC:-gcc} $(mk HOST_CFLAGS) -I"$(mk LLHTTP_INC)" $(mk HOST_LDFLAGS) -o "$OUT/api_bench" \
    bench/api.c "$BUILD"/llhttp/*.o -ljansson -lcrypto
API="$OUT/api_bench"

# ---- our own daemon, removed on any exit ----------------------------------------------------
# WARREN_BENCH_DIR: where the daemon's state directory goes (default /tmp), e.g. a tmpfs or a btrfs
# mount, to see what the filesystem of the writable layers costs.
TMP=$(mktemp -d "${WARREN_BENCH_DIR:-/tmp}/warren-bench-api.XXXXXX")
RUN_DIR=/run/warren-bench-api-$$
NET_TABLE=wbench$$
CG=warren-bench-api-$$
# the daemon's sandboxes get a cgroup parent and uid range of their own (the peers, like
# bench/run.sh, use the defaults)
DENV="WARREN_CGROUP_PARENT=$CG WARREN_UID_BASE=1879048192 WARREN_UID_SLOTS=64"
SOCK=$TMP/warrend.sock
DPID=
cleanup() {
    set +e
    if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
        # warrend leaves sandboxes running on SIGTERM (the next one adopts them): delete them first
        "$API" "$SOCK" reap
        kill -TERM "$DPID"
        i=0
        while kill -0 "$DPID" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
        kill -0 "$DPID" 2>/dev/null && kill -KILL "$DPID"
        wait "$DPID" 2>/dev/null
    fi
    for h in /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG"; do
        [ -d "$h" ] || continue
        i=0 # a killed sandbox's processes exit asynchronously
        while [ $i -lt 50 ]; do
            for d in "$h"/*/; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done
            rmdir "$h" 2>/dev/null && break
            sleep 0.1
            i=$((i + 1))
        done
        [ -d "$h" ] && echo "bench: left behind: $h" >&2
    done
    # the parent the peers' sandboxes (bench/sandbox_loop) were in; each removed its own
    for h in /sys/fs/cgroup/*/warren-bench /sys/fs/cgroup/warren-bench; do
        [ ! -d "$h" ] || rmdir "$h" || echo "bench: left behind: $h" >&2
    done
    # the network slots outlive a daemon on purpose: the benchmark's go with it
    for s in "$RUN_DIR"/net/"$NET_TABLE"/*; do [ -e "$s" ] && umount -l "$s"; done
    nft delete table inet "$NET_TABLE" 2>/dev/null
    rm -rf "$RUN_DIR" "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

mkdir -p "$TMP/state/templates/base"
ln -s "$(realpath "$IMG")" "$TMP/state/templates/base/rootfs"
# shellcheck disable=SC2086 # DENV is three VAR=value words
# Networking (1n): a pool and table of the benchmark's own, DNS to loopback's discard port and
# every create of the benchmark saying its network (nothing leaves the machine: 1n's sandboxes
# have internet off, the others no network of their own), slots made ahead for every create of
# 1n (a released slot rests 3 s before it is ready again). --net-default on puts --pool's
# children into slots too, as a production daemon has them.
env $DENV "$BUILD/warrend" --state-dir "$TMP/state" --socket "$SOCK" --listen 127.0.0.1:0 \
    --run-dir "$RUN_DIR" --log-level warn --net-pool 10.251.0.0/20 --net-table "$NET_TABLE" \
    --net-default on --net-ready "${NET_READY:-1100}" --dns-upstream 127.0.0.1:9 \
    >"$TMP/ready" 2>"$TMP/warrend.log" &
DPID=$!
i=0
while ! grep -q "warrend ready" "$TMP/ready" && kill -0 "$DPID" 2>/dev/null && [ $i -lt 100 ]; do
    sleep 0.1
    i=$((i + 1))
done
READY=$(cat "$TMP/ready")
case "$READY" in
*"warrend ready"*) ;;
*) echo "bench: warrend did not start: $READY" >&2; cat "$TMP/warrend.log" >&2; exit 1 ;;
esac
echo "$DPID" >"$OUT/warrend.pid" # for `perf record -p` from another shell
# the slots of 1n, made before anything is measured (one batch at a time, in the background)
i=0
while [ "$(ls "$RUN_DIR/net/$NET_TABLE" 2>/dev/null | wc -l)" -lt "${NET_READY:-1100}" ] && [ $i -lt 600 ]; do
    sleep 0.1
    i=$((i + 1))
done
sleep 1

LOG=$OUT/api.log
: >"$LOG"
say() { echo "$*" | tee -a "$LOG"; }
# step CMD...: run it, show its output and keep it in the log for the summary
step() {
    "$@" >"$TMP/step.out" || { cat "$TMP/step.out"; return 1; }
    cat "$TMP/step.out"
    cat "$TMP/step.out" >>"$LOG"
}

say "== machine: $(nproc) cpus, kernel $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ), warrend pid $DPID"
say "== 0. the client's own cost: GET /v1/health on one keep-alive connection, 1000 times"
step "$API" "$SOCK" health 1000

say "== 1. create → first stdout of \`echo hi\` → delete over the API, $N times (loopback only)"
step env WARREN_BENCH_CREATE='{"network":{"enabled":false}}' "$API" "$SOCK" cycle "$N"
say "== 1n. the same cycle with a network of its own (a pooled slot: netns, veth, address, rules), $N times"
step env WARREN_BENCH_CREATE='{"network":{"internet":false}}' "$API" "$SOCK" cycle "$N"
export WARREN_BENCH_CREATE='{"network":{"enabled":false}}' # the rest: loopback only, as before
say "== 1b. peers, same run: in-process runtime loop (/bin/true) and the isolation floor, $N each"
step env WARREN_INIT="$(realpath "$BUILD/warren-init")" "$BUILD/bench/sandbox_loop" --zygote "$ZYGOTE" "$(realpath "$IMG")" "$N"
step "$BUILD/bench/sandbox_loop" --floor "$(realpath "$IMG")" "$N"
say "== 1c. peers, same run: warren run and bwrap, \`echo hi\`, $N runs each (hyperfine -N)"
hyperfine -N --warmup 20 --runs "$N" --export-json "$OUT/api-cli.json" \
    -n warren-run "$BUILD/warren run --rootfs $IMG -- echo hi" \
    -n bwrap-img "bwrap --unshare-user --unshare-pid --unshare-net --unshare-ipc --unshare-uts --ro-bind $IMG / --proc /proc --dev /dev --tmpfs /tmp /bin/echo hi" \
    >/dev/null
step python3 - "$OUT/api-cli.json" <<'PY'
import json, statistics, sys
res = json.load(open(sys.argv[1]))["results"]
def p(v, q):
    v = sorted(v); return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]
for r in res:
    t = [x * 1000 for x in r["times"]]
    print("  %-34s median %8.3f ms  p99 %8.3f ms  (n=%d)" % (r["command"], statistics.median(t), p(t, 0.99), len(t)))
PY

say "== 2. exec round trip in one running sandbox, $NEXEC times, keep-alive"
step "$API" "$SOCK" exec "$NEXEC"
say "== 2b. peer, same run: the host starting the image's busybox \`true\` (posix_spawn + waitpid)"
step "$API" "$SOCK" spawn "$NEXEC" "$IMG/bin/busybox"
say "== 2c. peer, same run: the same spawn straight through warren-init's socket (no daemon)"
step env WARREN_INIT="$(realpath "$BUILD/warren-init")" "$BUILD/bench/sandbox_loop" --zygote "$ZYGOTE" --spawn "$(realpath "$IMG")" "$NEXEC"

say "== 3. files: PUT then GET"
step "$API" "$SOCK" files "$FILE_MIB" 0
step "$API" "$SOCK" files "$HASH_MIB" 1

say "== 4. create → exec true (wait) → delete, concurrent clients, ${CONC_SECS} s each"
for c in 2 4 8; do
    step "$API" "$SOCK" conc "$c" "$CONC_SECS"
done
say "== 4b. peers, same run: the same cycle in-process (runtime library, no API), the isolation"
say "   floor's own sequence, and the floor with a resident PID 1; 2 processes (one per core),"
say "   ${CONC_SECS} s each"
step env WARREN_INIT="$(realpath "$BUILD/warren-init")" "$BUILD/bench/sandbox_loop" --zygote "$ZYGOTE" --rate 2 "$CONC_SECS" "$(realpath "$IMG")"
step "$BUILD/bench/sandbox_loop" --floor --rate 2 "$CONC_SECS" "$(realpath "$IMG")"
step "$BUILD/bench/sandbox_loop" --floor-pid1 --rate 2 "$CONC_SECS" "$(realpath "$IMG")"

say "== summary: ratios against peers of this run"
python3 - "$LOG" <<'PY'
import re, sys
med, p99, files, conc, rate = {}, {}, {}, {}, {}
peer = None
section = ""
for line in open(sys.argv[1]):
    m = re.match(r"== (\w+)\.", line)
    if m:
        section = m.group(1)
    m = re.match(r"\s+(.+?)\s+median\s+([\d.]+) ms\s+p99\s+([\d.]+) ms", line)
    if m:
        med[m.group(1).strip()] = float(m.group(2)); p99[m.group(1).strip()] = float(m.group(3))
        # 1 (loopback only) and 1n (a network of its own, the default) print the same names
        med[section + ": " + m.group(1).strip()] = float(m.group(2))
    m = re.match(r"RESULT files mib=(\d+) hash=(\d) put_s=([\d.]+) get_s=([\d.]+)", line)
    if m:
        mib = int(m.group(1)); files[int(m.group(2))] = (mib / float(m.group(3)), mib / float(m.group(4)), float(m.group(3)), float(m.group(4)), mib)
    m = re.match(r"RESULT conc c=(\d+) cycles=(\d+) secs=([\d.]+) rate=([\d.]+) errors=(\d+) limit=(\d+)", line)
    if m:
        conc[int(m.group(1))] = (float(m.group(4)), int(m.group(5)), int(m.group(6)))
    m = re.match(r"(floor|in-process)(.*) throughput, (\d+) processes", line)
    if m:
        peer = m.group(1) + ("-pid1" if "PID 1" in m.group(2) else "")
    m = re.match(r"\s+C=\d+: \d+ cycles in [\d.]+ s = ([\d.]+) /s$", line)
    if m and peer:
        rate[peer] = float(m.group(1)); peer = None
first = med["1n: create → first stdout"]; cyc = med["1: whole cycle"]
first_lo = med["1: create → first stdout"]
floor = med["clone -> /bin/true exit -> reaped"]
ex = med['exec wait ["true"] round trip']
spawn = med["host posix_spawn true + waitpid"]
print("  API create→first stdout / warren run (echo hi)  %.2f" % (first_lo / med["warren-run"]))
print("  API create→first stdout / bwrap (echo hi)       %.2f" % (first_lo / med["bwrap-img"]))
print("  API create→first stdout / in-process create→exit %.2f" % (first_lo / med["create -> /bin/true exit"]))
print("  API whole cycle / in-process full cycle          %.2f" % (cyc / med["full cycle incl. destroy"]))
print("  exec round trip / GET /v1/health round trip      %.2f" % (ex / med["GET /v1/health round trip"]))
print("  spawn through warren-init / host posix_spawn     %.2f" % (med["spawn /bin/true -> its EXIT"] / spawn))
if "floor" in rate and "in-process" in rate:
    best = max(conc.values())[0] if conc else 0
    print("  API best rate / in-process rate (C=2)           %.2f" % (best / rate["in-process"]))
    print("  API best rate / floor rate (C=2)                %.2f" % (best / rate["floor"]))
# The speed targets (issue 19): each a ratio to a peer of this run. The fifth, fork x10 against
# a snapshot, is bench/images.py's.
print("== targets: ratios to peers of this run")
def ratio(name, val, target, ok):
    print("  %-52s %6.2f  (target %s) -> %s" % (name, val, target, "met" if ok else "MISSED"))
r = first / floor
ratio("API create → first output / isolation floor", r, "≤ 1.10", r <= 1.10)
print("    (a network of its own, the default: a child cloned ahead in its slot; without one: %.2f)"
      % (first_lo / floor))
r = med["warren-run"] / med["bwrap-img"]
ratio("warren run → exit / bwrap, same image", r, "≤ 0.95", r <= 0.95)
r = ex / spawn
ratio("exec round trip / host posix_spawn + reap", r, "≤ 1.15", r <= 1.15)
if 2 in conc and "floor-pid1" in rate:
    r = conc[2][0] / rate["floor-pid1"]
    ratio("create+exec+delete /s, 2 clients / floor with PID 1, 2 procs", r, "≥ 0.85", r >= 0.85)
if 0 in files:
    up, down, ts_up, ts_down, mib = files[0]
    print("  %d MiB upload %.2f s (%.0f MiB/s), download %.2f s (%.0f MiB/s)" % (mib, ts_up, up, ts_down, down))
PY
if [ -s "$TMP/warrend.log" ]; then
    echo "== warrend log (warnings and errors): $(wc -l <"$TMP/warrend.log") lines, last ones:"
    tail -n 5 "$TMP/warrend.log"
fi
