#!/bin/sh
# What limits, metering and the audit trail cost (issue 18's benchmark): the same requests
# against a daemon with them on (the defaults, with team buckets too large to refuse anything,
# so each request still takes from them) and one with `--limits off --audit off --metering off`,
# alternating, ROUNDS times each, in one run. Every request is a team's (a key over TCP): the
# admin is exempt from limits. Reported per round and as the ratio on/off of the medians:
#   1. GET /v1/sandboxes/{id}           ab -k -c 4 -n NREQ (a read: buckets, headers, metrics)
#   2. POST /v1/sandboxes/{id}/timeout  ab -k -c 4 -n NREQ (state-changing: also audited)
#   3. create -> delete                 NCREATE times one after the other (bench/ops-create.py):
#                                       create latency, with the ledger's intervals and events
# Usage: bench/ops-overhead.sh [BUILD_DIR]   (as root; ab from apache2-utils)
# ROUNDS (3), NREQ (10000), NCREATE (200) from the environment.
set -eu
BUILD=${1:-build}
ROUNDS=${ROUNDS:-3}
NREQ=${NREQ:-10000}
NCREATE=${NCREATE:-200}
command -v ab >/dev/null || { echo "bench: apt-get install apache2-utils" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "bench: run as root (warrend needs it)" >&2; exit 1; }
HERE=$(dirname "$0")
ON="--team-rate-requests 1000000/s:1000000 --team-rate-creates 100000/s:100000 --team-max-sandboxes 1000"
OFF="--limits off --audit off --metering off"
RES=$(mktemp -d /tmp/ops-overhead.XXXXXX)
T= P= RUN=
stop() {
    set +e
    if [ -n "$P" ]; then
        kill "$P" 2>/dev/null
        wait "$P" 2>/dev/null
    fi
    [ -n "$T" ] && rm -rf "$T"
    [ -n "$RUN" ] && rm -rf "$RUN"
    for h in /sys/fs/cgroup/*; do rmdir "$h/opsb-$$" 2>/dev/null; done
    T= P= RUN=
}
trap 'stop; rm -rf "$RES"' EXIT INT TERM

# one round: MODE (on|off) FLAGS...
round() {
    mode=$1
    shift
    T=$(mktemp -d /tmp/opsb.XXXXXX)
    RUN=/run/opsb-$$
    mkdir -p "$T/state/templates/base"
    ln -s "$(realpath "$BUILD/images/busybox")" "$T/state/templates/base/rootfs"
    : >"$T/ready"
    # shellcheck disable=SC2086 # the flags are words
    env WARREN_CGROUP_PARENT=opsb-$$ WARREN_UID_BASE=1879048192 WARREN_UID_SLOTS=64 \
        "$BUILD/warrend" --state-dir "$T/state" --socket "$T/s" --listen 127.0.0.1:0 \
        --run-dir "$RUN" --log-level warn --net-pool none "$@" >"$T/ready" 2>"$T/log" &
    P=$!
    i=0
    while ! grep -q "warrend ready" "$T/ready" && [ $i -lt 100 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    port=$(grep -o 'tcp=127.0.0.1:[0-9]*' "$T/ready" | cut -d: -f2)
    url=http://127.0.0.1:$port
    key=$(curl -s --unix-socket "$T/s" -H 'Content-Type: application/json' \
        -d '{"team":"bench","name":"ops"}' http://x/v1/keys | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
    sid=$(curl -s -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
        -d '{"timeout":3600}' "$url/v1/sandboxes" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
    echo '{"timeout":3600}' >"$T/body"
    get=$(ab -q -k -c 4 -n "$NREQ" -H "Authorization: Bearer $key" "$url/v1/sandboxes/$sid" 2>/dev/null |
        awk '/Requests per second/ {print $4} /Non-2xx/ {print "NON2XX", $3 > "/dev/stderr"}')
    post=$(ab -q -k -c 4 -n "$NREQ" -H "Authorization: Bearer $key" -p "$T/body" -T application/json \
        "$url/v1/sandboxes/$sid/timeout" 2>/dev/null |
        awk '/Requests per second/ {print $4} /Non-2xx/ {print "NON2XX", $3 > "/dev/stderr"}')
    create=$(python3 "$HERE/ops-create.py" "$url" "$key" "$NCREATE")
    curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $key" "$url/v1/sandboxes/$sid"
    echo "$mode $get $post $create" >>"$RES/rounds"
    printf '  %-3s  GET %9s req/s   POST timeout %9s req/s   create %s\n' "$mode" "$get" "$post" "$create"
    stop
}

echo "== $(nproc) cpus, kernel $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ); $ROUNDS rounds each, alternating"
echo "   on:  defaults + $ON"
echo "   off: $OFF"
r=0
while [ $r -lt "$ROUNDS" ]; do
    # shellcheck disable=SC2086
    round on $ON
    # shellcheck disable=SC2086
    round off $OFF
    r=$((r + 1))
done
python3 - "$RES/rounds" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
def med(mode, i):
    return statistics.median(float(r[i]) for r in rows if r[0] == mode)
print("== medians of the rounds (on / off; the issue's bound: within 5 %)")
for name, i, better in (("GET /v1/sandboxes/{id} req/s", 1, "higher"),
                        ("POST .../timeout req/s", 2, "higher"),
                        ("create p50 ms", 3, "lower"), ("create p99 ms", 4, "lower")):
    on, off = med("on", i), med("off", i)
    print("  %-30s on %9.2f  off %9.2f  on/off %.3f  (%s is better)" % (name, on, off, on / off, better))
EOF
