build-old/tests/test_cgroup: tests/unit/test_cgroup.c \
 tests/unit/../../src/runtime/cgroup.h \
 tests/unit/../../src/runtime/../util/err.h tests/unit/tap.h
tests/unit/../../src/runtime/cgroup.h:
tests/unit/../../src/runtime/../util/err.h:
tests/unit/tap.h:
