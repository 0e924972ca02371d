build-old/tests/test_store: tests/unit/test_store.c \
 tests/unit/../../src/store/store.h \
 tests/unit/../../src/store/../util/err.h \
 tests/unit/../../src/store/store_int.h \
 tests/unit/../../src/store/../util/cleanup.h \
 tests/unit/../../src/util/xalloc.h tests/unit/tap.h
tests/unit/../../src/store/store.h:
tests/unit/../../src/store/../util/err.h:
tests/unit/../../src/store/store_int.h:
tests/unit/../../src/store/../util/cleanup.h:
tests/unit/../../src/util/xalloc.h:
tests/unit/tap.h:
