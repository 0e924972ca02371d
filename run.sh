#!/bin/sh
# Run Warren: install what it needs, build, prepare the default image, then run a command in a
# sandbox (default: a short tour). Usage: ./run.sh [CMD [ARG...]]
set -eu
cd "$(dirname "$0")"
sh scripts/deps.sh run
make -s -j"$(nproc)" all
if [ $# -eq 0 ]; then
    set -- /bin/sh -c 'echo "hello from sandbox $(hostname)"; id; cat /proc/self/uid_map; ps'
fi
exec ./build/warren run -- "$@"
