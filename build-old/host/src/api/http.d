build-old/host/src/api/http.o: src/api/http.c src/api/http.h \
 src/api/../util/err.h /usr/share/include/llhttp/llhttp.h \
 src/api/../util/cleanup.h src/api/../util/log.h src/api/../util/xalloc.h
src/api/http.h:
src/api/../util/err.h:
/usr/share/include/llhttp/llhttp.h:
src/api/../util/cleanup.h:
src/api/../util/log.h:
src/api/../util/xalloc.h:
