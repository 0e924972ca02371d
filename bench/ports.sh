#!/bin/sh
# The exposed-ports benchmark (docs/benchmarks.md, "Exposed ports"). Not a test: it reports
# wrk's figures and their ratio to a peer measured in the same run.
# Usage: bench/ports.sh [BUILD_DIR]
#
# It starts its own warrend (unix socket and a loopback port) with the Debian `base` template
# (WARREN_BASE_TEMPLATE, default the test suite's), makes one sandbox with as many CPUs as the
# host, and copies into it a small static HTTP/1.1 server (bench/httpd.c: keep-alive, 13-byte
# answers) and the host's own wrk with its libraries (run through their dynamic loader), so the
# same client and the same server are measured every time:
#   inside:  wrk in the sandbox -> 127.0.0.1:8080 on the sandbox's loopback (the peer)
#   host:    wrk on the host -> warrend (Host: 8080-<id>.bench.test) -> the sandbox's port
#   path:    wrk on the host -> warrend (/v1/sandboxes/<id>/ports/8080/, API key) -> the port
#   health:  wrk on the host -> warrend's GET /v1/health (no sandbox: the HTTP server's ceiling)
#   slot:    as host, to a second sandbox with a network slot (its own pool and nft table, internet
#            off): warrend connects to the slot address, the kernel's path
#   veth:    wrk on the host straight to the slot address (no daemon: the kernel's path alone)
# each with -t1 -c16 (throughput) and -t1 -c1 (latency of one request at a time). The first
# sandbox has no network slot, so warrend reaches its port through warren-init's PORT_OPEN (the
# socket passed back, then relayed by warrend alone, with no hop in the sandbox).
# Environment: SECS (each run, default 5).
set -eu
BUILD=${1:-build}
SECS=${SECS:-5}
BASE=${WARREN_BASE_TEMPLATE:-/var/cache/warren/test-templates/base}
OUT=${BENCH_OUT:-$BUILD/bench}
[ "$(id -u)" = 0 ] || { echo "bench: run as root (warrend needs it)" >&2; exit 1; }
command -v wrk >/dev/null || { echo "bench: apt-get install wrk" >&2; exit 1; }
[ -x "$BASE/rootfs/bin/bash" ] || { echo "bench: no base template in $BASE (scripts/build-base.sh)" >&2; exit 1; }

[ -x "$BUILD/warrend" ] && [ -x "$BUILD/warren" ] || { echo "bench: build first (make)" >&2; exit 1; }
mkdir -p "$OUT"
cc -O2 -static -D_GNU_SOURCE -o "$OUT/httpd" bench/httpd.c

TMP=$(mktemp -d)
RUN=/run/warren-bench-ports-$$
PID=
NET_TABLE=wbp$$
cleanup() {
    [ -z "${ID:-}" ] || "$BUILD/warren" rm "$ID" >/dev/null 2>&1 || true
    [ -z "${NID:-}" ] || "$BUILD/warren" rm "$NID" >/dev/null 2>&1 || true
    [ -z "$PID" ] || { kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null || true; }
    # the network slots outlive a daemon on purpose: the benchmark's go with it
    for s in "$RUN"/net/"$NET_TABLE"/*; do [ -e "$s" ] && umount -l "$s"; done
    nft delete table inet "$NET_TABLE" 2>/dev/null || true
    rm -rf "$TMP" "$RUN"
}
trap cleanup EXIT
mkdir -p "$TMP/state/templates/base"
ln -s "$(cd "$BASE" && pwd)/rootfs" "$TMP/state/templates/base/rootfs"
cp "$BASE/config.json" "$TMP/state/templates/base/"
# Networking: a pool and table of the benchmark's own, internet off and DNS to loopback's
# discard port: nothing leaves the machine.
"$BUILD/warrend" --state-dir "$TMP/state" --socket "$TMP/sock" --listen 127.0.0.1:0 \
    --run-dir "$RUN" --net-pool 10.252.0.0/24 --net-table "$NET_TABLE" --net-default off \
    --net-ready 1 --dns-upstream 127.0.0.1:9 >"$TMP/out" 2>"$TMP/log" &
PID=$!
i=0
while ! grep -q 'tcp=' "$TMP/out" 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 100 ] || { cat "$TMP/log" >&2; exit 1; }
    sleep 0.1
done
PORT=$(sed -n 's/.*tcp=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$TMP/out" | head -n1)
KEY=$(cat "$TMP/state/admin.key")
export WARREN_API_URL="unix://$TMP/sock"
W=$BUILD/warren

ID=$("$W" create --cpus "$(nproc)" --memory 1G --timeout 3600)
NID=$("$W" create --cpus "$(nproc)" --memory 1G --timeout 3600 --no-internet)
"$W" cp "$OUT/httpd" "$ID:/tmp/httpd" >/dev/null
"$W" cp "$OUT/httpd" "$NID:/tmp/httpd" >/dev/null
"$W" exec "$NID" -- sh -c 'chmod +x /tmp/httpd; setsid /tmp/httpd 0.0.0.0 8080 </dev/null >/dev/null 2>&1 &'
NADDR=$("$W" info "$NID" -o json | sed -n 's/.*"address": *"\([0-9.]*\)".*/\1/p' | head -n1)
[ -n "$NADDR" ] || { echo "bench: the networked sandbox has no address" >&2; exit 1; }
WRK=$(command -v wrk)
"$W" exec "$ID" -- mkdir -p /tmp/wrk
for f in "$WRK" $(ldd "$WRK" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
    "$W" cp "$f" "$ID:/tmp/wrk/$(basename "$f")" >/dev/null
done
LDSO=$(ldd "$WRK" | awk '$1 ~ /^\// { print $1 }' | head -n1)
"$W" exec "$ID" -- sh -c 'chmod +x /tmp/httpd /tmp/wrk/*; setsid /tmp/httpd 0.0.0.0 8080 </dev/null >/dev/null 2>&1 &'
i=0
while ! "$W" ports "$ID" | grep -q '^8080 '; do
    i=$((i + 1)); [ $i -lt 100 ] || { echo "bench: the server did not start" >&2; exit 1; }
    sleep 0.1
done

rps() { awk '/^Requests\/sec:/ { print $2 }'; }
lat() { awk '$1 == "Latency" { print $2 }'; }
inside() {
    "$W" exec "$ID" -- "/tmp/wrk/$(basename "$LDSO")" --library-path /tmp/wrk /tmp/wrk/wrk "$@" \
        http://127.0.0.1:8080/
}
host() { wrk "$@" -H "Host: 8080-$ID.bench.test" "http://127.0.0.1:$PORT/"; }
path() { wrk "$@" -H "Authorization: Bearer $KEY" "http://127.0.0.1:$PORT/v1/sandboxes/$ID/ports/8080/"; }
health() { wrk "$@" "http://127.0.0.1:$PORT/v1/health"; }
slot() { wrk "$@" -H "Host: 8080-$NID.bench.test" "http://127.0.0.1:$PORT/"; }
veth() { wrk "$@" "http://$NADDR:8080/"; }

i=0
while ! "$W" ports "$NID" | grep -q '^8080 '; do
    i=$((i + 1)); [ $i -lt 100 ] || { echo "bench: the server did not start" >&2; exit 1; }
    sleep 0.1
done
echo "== exposed ports: wrk -t1 -c16 -d${SECS}s and -t1 -c1, $(nproc) CPUs, sandbox $ID (init path), $NID (slot $NADDR)"
inside -t1 -c16 -d1s >/dev/null # warm-up
for how in inside host path slot veth health; do
    $how -t1 -c16 -d"${SECS}s" >"$TMP/$how.16"
    $how -t1 -c1 -d"${SECS}s" >"$TMP/$how.1"
    errs=$(grep -h 'Non-2xx\|Socket errors' "$TMP/$how.16" "$TMP/$how.1" || true)
    [ -z "$errs" ] || { echo "bench: $how: $errs" >&2; exit 1; }
done
IN16=$(rps <"$TMP/inside.16")
printf '%-50s %12s %8s %14s\n' path "req/s (-c16)" ratio "latency (-c1)"
for how in inside host path slot veth health; do
    r=$(rps <"$TMP/$how.16")
    case $how in
    inside) what="wrk inside the sandbox, its loopback (peer)" ;;
    host) what="host -> warrend (Host routing) -> sandbox" ;;
    path) what="host -> warrend (/v1/.../ports/8080) -> sandbox" ;;
    slot) what="host -> warrend (Host) -> slot address" ;;
    veth) what="host -> slot address (no daemon)" ;;
    health) what="host -> warrend GET /v1/health (no sandbox)" ;;
    esac
    printf '%-50s %12s %7s%% %14s\n' "$what" "$r" "$(awk -v a="$r" -v b="$IN16" 'BEGIN { printf "%.0f", 100 * a / b }')" \
        "$(lat <"$TMP/$how.1")"
done
