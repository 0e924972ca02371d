build-old/host/src/runtime/uidpool.o: src/runtime/uidpool.c \
 src/runtime/uidpool.h src/runtime/../util/err.h \
 src/runtime/../util/cleanup.h src/runtime/../util/fs.h \
 src/runtime/../util/xalloc.h
src/runtime/uidpool.h:
src/runtime/../util/err.h:
src/runtime/../util/cleanup.h:
src/runtime/../util/fs.h:
src/runtime/../util/xalloc.h:
