# shellcheck shell=sh
# Template `compose-test`, for tests/integration/test_compose.py only: the base plus Debian's
# PostgreSQL 15 and Redis, the stack a web app's Compose file brings beside it. Nothing starts at
# build time (mmdebstrap's chroot has no init); the Compose file runs the servers as services.

PROFILE_PACKAGES=postgresql-15,postgresql-client-15,redis-server,redis-tools

PROFILE_CHECKS='test -x /usr/lib/postgresql/15/bin/postgres
test -x /usr/lib/postgresql/15/bin/initdb
command -v redis-server
command -v redis-cli
command -v psql'
