build-old/host/src/runtime/mount.o: src/runtime/mount.c \
 src/runtime/mount.h src/runtime/../util/err.h src/runtime/runtime.h \
 src/runtime/../util/cleanup.h src/runtime/../util/xalloc.h
src/runtime/mount.h:
src/runtime/../util/err.h:
src/runtime/runtime.h:
src/runtime/../util/cleanup.h:
src/runtime/../util/xalloc.h:
