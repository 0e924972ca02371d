#!/bin/sh
# Run every test: install what the tests need, build with -Werror, check formatting and layering,
# then unit tests, fuzz-corpus replay and the integration suite against real sandboxes.
set -eu
cd "$(dirname "$0")"
sh scripts/deps.sh test
make -s -j"$(nproc)" all
make -s format-check check-layers
make test
