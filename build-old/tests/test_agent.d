build-old/tests/test_agent: tests/unit/test_agent.c \
 tests/unit/../../src/core/agent.h \
 tests/unit/../../src/core/../proto/proto.h \
 tests/unit/../../src/core/../proto/../util/err.h \
 tests/unit/../../src/runtime/runtime.h \
 tests/unit/../../src/util/xalloc.h tests/unit/tap.h
tests/unit/../../src/core/agent.h:
tests/unit/../../src/core/../proto/proto.h:
tests/unit/../../src/core/../proto/../util/err.h:
tests/unit/../../src/runtime/runtime.h:
tests/unit/../../src/util/xalloc.h:
tests/unit/tap.h:
