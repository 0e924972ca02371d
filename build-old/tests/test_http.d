build-old/tests/test_http: tests/unit/test_http.c \
 /usr/share/include/llhttp/llhttp.h tests/unit/../../src/api/http.h \
 tests/unit/../../src/api/../util/err.h \
 tests/unit/../../src/util/cleanup.h tests/unit/../../src/util/xalloc.h \
 tests/unit/tap.h
/usr/share/include/llhttp/llhttp.h:
tests/unit/../../src/api/http.h:
tests/unit/../../src/api/../util/err.h:
tests/unit/../../src/util/cleanup.h:
tests/unit/../../src/util/xalloc.h:
tests/unit/tap.h:
