#!/bin/sh
# Run Warren: install what it needs, build, prepare the default template, then start the daemon
# in the foreground (Ctrl-C stops it; sandboxes keep running and the next start adopts them).
# Usage: ./run.sh [warrend options...]      e.g. ./run.sh --listen 0.0.0.0:7860
# Without a daemon, `./build/warren run -- CMD` runs one command in a throwaway sandbox.
set -eu
cd "$(dirname "$0")"
sh scripts/deps.sh run
make -s -j"$(nproc)" all
STATE=${WARREN_STATE_DIR:-/var/lib/warren}
# The `base` template, until the images work brings Debian's: the busybox image built by make.
T=$STATE/templates/base
if [ ! -e "$T/rootfs" ] || [ build/images/busybox/.done -nt "$T/rootfs" ]; then
    mkdir -p "$T"
    rm -rf "$T/rootfs.new"
    cp -a build/images/busybox "$T/rootfs.new"
    rm -rf "$T/rootfs"
    mv "$T/rootfs.new" "$T/rootfs"
fi
echo "warrend: API on unix:///run/warrend/warrend.sock and http://127.0.0.1:7860;" \
     "the admin key is in $STATE/admin.key; try: ./build/warren create" >&2
exec ./build/warrend --state-dir "$STATE" "$@"
