build-old/host/src/cli/sandbox.o: src/cli/sandbox.c src/cli/cli.h \
 src/cli/../util/err.h src/cli/../util/cleanup.h src/cli/../util/parse.h \
 src/cli/../util/xalloc.h src/cli/client.h
src/cli/cli.h:
src/cli/../util/err.h:
src/cli/../util/cleanup.h:
src/cli/../util/parse.h:
src/cli/../util/xalloc.h:
src/cli/client.h:
