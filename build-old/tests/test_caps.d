build-old/tests/test_caps: tests/unit/test_caps.c \
 tests/unit/../../src/runtime/caps.h tests/unit/tap.h
tests/unit/../../src/runtime/caps.h:
tests/unit/tap.h:
