build-old/tests/test_parse: tests/unit/test_parse.c \
 tests/unit/../../src/util/parse.h tests/unit/../../src/util/err.h \
 tests/unit/tap.h
tests/unit/../../src/util/parse.h:
tests/unit/../../src/util/err.h:
tests/unit/tap.h:
