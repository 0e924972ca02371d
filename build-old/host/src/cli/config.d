build-old/host/src/cli/config.o: src/cli/config.c src/cli/cli.h \
 src/cli/../util/err.h src/cli/../util/cleanup.h src/cli/../util/fs.h \
 src/cli/../util/xalloc.h src/cli/client.h
src/cli/cli.h:
src/cli/../util/err.h:
src/cli/../util/cleanup.h:
src/cli/../util/fs.h:
src/cli/../util/xalloc.h:
src/cli/client.h:
