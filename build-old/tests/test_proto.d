build-old/tests/test_proto: tests/unit/test_proto.c \
 tests/unit/../../src/proto/proto.h \
 tests/unit/../../src/proto/../util/err.h \
 tests/unit/../../src/util/xalloc.h tests/unit/tap.h
tests/unit/../../src/proto/proto.h:
tests/unit/../../src/proto/../util/err.h:
tests/unit/../../src/util/xalloc.h:
tests/unit/tap.h:
