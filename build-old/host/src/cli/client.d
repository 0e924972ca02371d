build-old/host/src/cli/client.o: src/cli/client.c src/cli/client.h \
 src/cli/../util/err.h /usr/share/include/llhttp/llhttp.h \
 src/cli/../util/cleanup.h src/cli/../util/xalloc.h
src/cli/client.h:
src/cli/../util/err.h:
/usr/share/include/llhttp/llhttp.h:
src/cli/../util/cleanup.h:
src/cli/../util/xalloc.h:
