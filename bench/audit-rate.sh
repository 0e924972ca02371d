#!/bin/sh
# The rate of a state-changing request: POST /v1/sandboxes/{id}/timeout with the admin key over
# TCP, ab -k -c 4, 3 x 10,000, on a daemon of BUILD (no network pool, no warm sandboxes) with one
# busybox sandbox. Compare two builds in the same run (docs/benchmarks.md, "Audit trail").
# Usage: bench/audit-rate.sh BUILD [BUILD2 ...]   (as root; needs ab from apache2-utils)
# PERF=1 records the daemon with perf into /tmp/audit-rate.perf.
set -eu
for B in "$@"; do
echo "== $B"
T=$(mktemp -d /tmp/abt.XXXX); RUN=/run/abt-$$
mkdir -p $T/state/templates/base; ln -s "$(realpath "$B"/images/busybox)" $T/state/templates/base/rootfs
env WARREN_CGROUP_PARENT=abt-$$ WARREN_UID_BASE=1879048192 WARREN_UID_SLOTS=64 $B/warrend --state-dir $T/state --socket $T/s --listen 127.0.0.1:0 \
  --run-dir $RUN --log-level warn --net-pool none --warm 0 >$T/ready 2>$T/log &
P=$!
i=0; while ! grep -q "warrend ready" $T/ready && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
PORT=$(grep -o 'tcp=127.0.0.1:[0-9]*' $T/ready | cut -d: -f2)
KEY=$(cat $T/state/admin.key)
SID=$(curl -s -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d '{"timeout":3600}' http://127.0.0.1:$PORT/v1/sandboxes | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
echo '{"timeout":3600}' > $T/body
[ -n "${PERF:-}" ] && (perf record -q -g -p $P -o /tmp/audit-rate.perf -- sleep 4 >/dev/null 2>&1 &)
for r in 1 2 3; do
ab -q -k -c 4 -n 10000 -H "Authorization: Bearer $KEY" -p $T/body -T application/json http://127.0.0.1:$PORT/v1/sandboxes/$SID/timeout 2>/dev/null | grep -E "Requests per second|Keep-Alive requests|Failed requests|Non-2xx"
done
curl -s -X DELETE -H "Authorization: Bearer $KEY" http://127.0.0.1:$PORT/v1/sandboxes/$SID
kill $P; wait $P || true; rm -rf $T $RUN
for h in /sys/fs/cgroup/*; do rmdir "$h/abt-$$" 2>/dev/null || true; done
done
