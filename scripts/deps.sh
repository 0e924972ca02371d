#!/bin/sh
# Install the Debian packages Warren needs to build, run and test, when they are missing.
# Usage: scripts/deps.sh [run|test]   (test adds what only the tests and benchmark need)
set -eu
want="build-essential pkg-config libseccomp-dev busybox-static iproute2 libuv1-dev libjansson-dev libsqlite3-dev libwslay-dev libssl-dev node-llhttp mmdebstrap libarchive-dev libcurl4-openssl-dev"
if [ "${1:-run}" = test ]; then
    want="$want python3 python3-pytest python3-yaml python3-jsonschema clang-format bubblewrap hyperfine btrfs-progs docker-registry skopeo umoci apache2-utils"
fi
missing=""
for p in $want; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
    [ "$(id -u)" = 0 ] || { echo "deps: need root to install:$missing" >&2; exit 1; }
    echo "deps: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    # shellcheck disable=SC2086
    apt-get install -y -q --no-install-recommends $missing >/dev/null
fi
