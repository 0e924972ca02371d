build-old/tests/test_seccomp: tests/unit/test_seccomp.c \
 tests/unit/../../src/runtime/seccomp.h \
 tests/unit/../../src/runtime/../util/err.h tests/unit/tap.h
tests/unit/../../src/runtime/seccomp.h:
tests/unit/../../src/runtime/../util/err.h:
tests/unit/tap.h:
