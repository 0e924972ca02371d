#!/bin/sh
# Run every test: install what the tests need, build with -Werror, check formatting, layering,
# headers and banned calls, type-check the Python SDK, then unit tests, fuzz-corpus replay and
# the integration suite against real sandboxes; then all of it again under ASan+UBSan.
set -eu
cd "$(dirname "$0")"
sh scripts/deps.sh test
# A test build: the fault hooks the integration tests drive are compiled in (Makefile: TESTING).
export TESTING=1
make -s -j"$(nproc)" all
make -s format-check check-layers check-headers check-calls
(cd sdk/python && /usr/bin/python3 -m mypy warren)
# The base template (Debian) for tests/integration/test_base_template.py: built once, reused
# until scripts/build-base.sh changes. Not under build/: the Makefile includes every `*.d` there,
# and a rootfs is full of /etc/*.d directories.
export WARREN_BASE_TEMPLATE="${WARREN_BASE_TEMPLATE:-/var/cache/warren/test-templates/base}"
stamp=$(sha256sum <scripts/build-base.sh)
if [ ! -e "$WARREN_BASE_TEMPLATE/rootfs/bin/bash" ] ||
    [ "$(cat "$WARREN_BASE_TEMPLATE/.built-by" 2>/dev/null)" != "$stamp" ]; then
    sh scripts/build-base.sh "$WARREN_BASE_TEMPLATE"
    echo "$stamp" >"$WARREN_BASE_TEMPLATE/.built-by"
fi
make test
make asan
