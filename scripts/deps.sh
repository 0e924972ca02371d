#!/bin/sh
# Install the Debian packages Warren needs to build, run and test, when they are missing.
# Usage: scripts/deps.sh [run|test]   (test adds what only the tests and benchmark need)
set -eu
want="build-essential pkg-config libseccomp-dev busybox-static iproute2 libuv1-dev libjansson-dev libyaml-dev libsqlite3-dev libwslay-dev libssl-dev libarchive-dev libcurl4-openssl-dev libpq-dev libldns-dev libmnl-dev libnftnl-dev libnetfilter-conntrack-dev node-llhttp mmdebstrap nftables conntrack runsc"
# `make` builds the web console (console/: Vite and TypeScript, installed by npm), so node and npm
# are build tools: the host's if there are, else Debian's (Node 18 on Debian 12: enough for the
# console's build).
command -v node >/dev/null 2>&1 || want="$want nodejs"
command -v npm >/dev/null 2>&1 || want="$want npm"
if [ "${1:-run}" = test ]; then
    # chromium: the console's end-to-end test drives Debian's headless Chromium
    # (playwright-core, console/test/).
    # postgresql: the multi-host gateway's database in tests/integration/test_cluster.py (pgfix.py).
    want="$want python3 python3-pytest python3-yaml python3-jsonschema python3-mypy clang-format bubblewrap dnsmasq-base openssl openssh-client wrk hyperfine btrfs-progs xfsprogs docker-registry skopeo umoci apache2-utils prometheus gnuplot-nox chromium postgresql"
    # kubectl renders deploy/kubernetes's overlays (make deploy-check): Debian's, unless the
    # host has one (another package's /usr/bin/kubectl would conflict with it).
    command -v kubectl >/dev/null 2>&1 || want="$want kubernetes-client"
    # tests/compat runs the E2B and Novita SDKs, and the console's test playwright-core: they
    # need Node.js 20.18 or later (Debian 12's is too old: install Node 20+ first).
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

# npm ci in $1 (a folder of this tree with a package-lock.json), again only when the lock changes:
# node_modules/.warren-lock keeps the hash of the lock it was installed from.
npm_ci_locked() {
    dir="$(dirname "$0")/../$1"
    stamp=$(sha256sum <"$dir/package-lock.json")
    if [ "$(cat "$dir/node_modules/.warren-lock" 2>/dev/null)" != "$stamp" ]; then
        echo "deps: npm ci in $1"
        (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null)
        echo "$stamp" >"$dir/node_modules/.warren-lock"
    fi
}

if [ "${1:-run}" = test ]; then
    # The pinned SDKs of tests/compat.
    npm_ci_locked tests/compat
    # s3rver, the S3-compatible server tests/unit/test_objstore.c starts on 127.0.0.1.
    npm_ci_locked tests/s3
    # The TypeScript SDK's dev tools (TypeScript).
    npm_ci_locked sdk/typescript
    # The deploy check's packages (kubernetes-models, yaml): make deploy-check.
    npm_ci_locked tests/deploy
fi

# The console's tools (console/package-lock.json: Vite, TypeScript, xterm.js, Preact,
# playwright-core) are installed by `make` itself, keyed by the lock's hash (Makefile: CONSOLE).
