build-old/host/src/cli/common.o: src/cli/common.c src/cli/cli.h \
 src/cli/../util/err.h src/cli/../util/xalloc.h src/cli/client.h
src/cli/cli.h:
src/cli/../util/err.h:
src/cli/../util/xalloc.h:
src/cli/client.h:
