build-old/host/src/runtime/zygote.o: src/runtime/zygote.c \
 src/runtime/../util/cleanup.h src/runtime/runtime_int.h \
 src/runtime/runtime.h src/runtime/../util/err.h src/runtime/cgroup.h \
 src/runtime/seccomp.h src/runtime/uidpool.h
src/runtime/../util/cleanup.h:
src/runtime/runtime_int.h:
src/runtime/runtime.h:
src/runtime/../util/err.h:
src/runtime/cgroup.h:
src/runtime/seccomp.h:
src/runtime/uidpool.h:
