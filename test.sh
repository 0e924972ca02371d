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
# The Debian templates the tests use: `base` (tests/integration/test_base_template.py,
# tests/compat) and the profiles of scripts/templates/ built on it (code-interpreter-v1, desktop).
# The tests' own profiles (tests/templates/: compose-test, with PostgreSQL and Redis for
# test_compose.py) are built the same way. Each is built once into $WARREN_TEST_TEMPLATES/<name>
# and reused until its scripts change. Not
# under build/: the Makefile includes every `*.d` there, and a rootfs is full of /etc/*.d
# directories.
export WARREN_TEST_TEMPLATES="${WARREN_TEST_TEMPLATES:-/var/cache/warren/test-templates}"
export WARREN_BASE_TEMPLATE="${WARREN_BASE_TEMPLATE:-$WARREN_TEST_TEMPLATES/base}"
for profile in base $(ls -- scripts/templates/*.sh tests/templates/*.sh 2>/dev/null); do
    if [ "$profile" = base ]; then
        out=$WARREN_BASE_TEMPLATE stamp=$(sha256sum <scripts/build-base.sh)
    else
        out=$WARREN_TEST_TEMPLATES/$(basename "$profile" .sh)
        case $profile in scripts/*) profile=$(basename "$profile" .sh) ;; esac
        file=$profile
        case $file in */*) ;; *) file=scripts/templates/$file.sh ;; esac
        # A profile's `# stamp: PATH...` line names the files of the tree it puts in the template.
        # shellcheck disable=SC2046
        stamp=$(cat scripts/build-base.sh "$file" $(
            sed -n 's/^# stamp: //p' "$file" | xargs -r -n1 -I{} find {} -type f | sort
        ) | sha256sum)
    fi
    if [ ! -e "$out/rootfs/bin/bash" ] || [ "$(cat "$out/.built-by" 2>/dev/null)" != "$stamp" ]; then
        sh scripts/build-base.sh "$out" "$profile"
        echo "$stamp" >"$out/.built-by"
    fi
done
make test
make asan
