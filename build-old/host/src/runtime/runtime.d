build-old/host/src/runtime/runtime.o: src/runtime/runtime.c \
 src/runtime/runtime_int.h src/runtime/runtime.h \
 src/runtime/../util/err.h src/runtime/cgroup.h src/runtime/seccomp.h \
 src/runtime/../util/cleanup.h src/runtime/../util/fs.h \
 src/runtime/../util/log.h src/runtime/../util/xalloc.h \
 src/runtime/sysctl.h src/runtime/uidpool.h
src/runtime/runtime_int.h:
src/runtime/runtime.h:
src/runtime/../util/err.h:
src/runtime/cgroup.h:
src/runtime/seccomp.h:
src/runtime/../util/cleanup.h:
src/runtime/../util/fs.h:
src/runtime/../util/log.h:
src/runtime/../util/xalloc.h:
src/runtime/sysctl.h:
src/runtime/uidpool.h:
