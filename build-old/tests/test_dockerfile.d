build-old/tests/test_dockerfile: tests/unit/test_dockerfile.c \
 tests/unit/../../src/core/dockerfile.h \
 tests/unit/../../src/core/../util/err.h tests/unit/tap.h
tests/unit/../../src/core/dockerfile.h:
tests/unit/../../src/core/../util/err.h:
tests/unit/tap.h:
