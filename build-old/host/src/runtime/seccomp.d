build-old/host/src/runtime/seccomp.o: src/runtime/seccomp.c \
 src/runtime/seccomp.h src/runtime/../util/err.h \
 src/runtime/../util/cleanup.h src/runtime/../util/fs.h \
 src/runtime/../util/log.h src/runtime/../util/xalloc.h
src/runtime/seccomp.h:
src/runtime/../util/err.h:
src/runtime/../util/cleanup.h:
src/runtime/../util/fs.h:
src/runtime/../util/log.h:
src/runtime/../util/xalloc.h:
