build-old/host/src/runtime/cgroup.o: src/runtime/cgroup.c \
 src/runtime/cgroup.h src/runtime/../util/err.h \
 src/runtime/../util/cleanup.h src/runtime/../util/fs.h \
 src/runtime/../util/log.h src/runtime/../util/xalloc.h
src/runtime/cgroup.h:
src/runtime/../util/err.h:
src/runtime/../util/cleanup.h:
src/runtime/../util/fs.h:
src/runtime/../util/log.h:
src/runtime/../util/xalloc.h:
