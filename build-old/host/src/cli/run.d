build-old/host/src/cli/run.o: src/cli/run.c src/cli/cli.h \
 src/cli/../util/err.h src/cli/../proto/proto.h \
 src/cli/../runtime/runtime.h src/cli/../util/cleanup.h \
 src/cli/../util/fs.h src/cli/../util/parse.h src/cli/../util/xalloc.h
src/cli/cli.h:
src/cli/../util/err.h:
src/cli/../proto/proto.h:
src/cli/../runtime/runtime.h:
src/cli/../util/cleanup.h:
src/cli/../util/fs.h:
src/cli/../util/parse.h:
src/cli/../util/xalloc.h:
