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
# Templates: `busybox`, the tiny image built by make (refreshed when make rebuilds it), and
# `base`, the default: Debian bookworm built by scripts/build-base.sh on first use (a minute or
# two; `scripts/build-base.sh $STATE/templates/base` rebuilds it). See docs/templates.md.
T=$STATE/templates
if [ -d "$T/base/rootfs" ] && [ ! -e "$T/base/rootfs/bin/bash" ] && [ ! -e "$T/busybox/rootfs" ]; then
    # A `base` without bash is a busybox tree (what `base` held in earlier releases): keep it,
    # as `busybox` (a rename leaves the sandboxes made from it intact).
    mkdir -p "$T/busybox"
    mv "$T/base/rootfs" "$T/busybox/rootfs"
fi
if [ ! -e "$T/busybox/rootfs" ] || [ build/images/busybox/.done -nt "$T/busybox/rootfs" ]; then
    mkdir -p "$T/busybox"
    rm -rf "$T/busybox/rootfs.new"
    cp -a build/images/busybox "$T/busybox/rootfs.new"
    rm -rf "$T/busybox/rootfs"
    mv "$T/busybox/rootfs.new" "$T/busybox/rootfs"
fi
if [ ! -e "$T/base/rootfs/bin/bash" ]; then
    echo "run: building the base template (Debian bookworm) into $T/base; only this once" >&2
    sh scripts/build-base.sh "$T/base"
fi
# The templates built on the base (scripts/templates/): code-interpreter-v1, the default of
# @e2b/code-interpreter, and desktop, of @e2b/desktop; each about a minute and 1.2-1.4 GB, once.
# WARREN_TEMPLATES picks which (default: all of them; "none" builds none).
for name in ${WARREN_TEMPLATES:-$(cd scripts/templates && ls -- *.sh | sed 's/\.sh$//')}; do
    [ "$name" != none ] || break
    [ -e "$T/$name/rootfs/bin/bash" ] && continue
    echo "run: building the $name template into $T/$name; only this once" >&2
    sh scripts/build-base.sh "$T/$name" "$name"
done
echo "warrend: API on unix:///run/warrend/warrend.sock and http://127.0.0.1:7860;" \
     "the admin key is in $STATE/admin.key; try: ./build/warren create" >&2
exec ./build/warrend --state-dir "$STATE" "$@"
