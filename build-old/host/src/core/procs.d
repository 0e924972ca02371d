build-old/host/src/core/procs.o: src/core/procs.c src/core/../util/log.h \
 src/core/../util/xalloc.h src/core/core_int.h \
 src/core/../runtime/runtime.h src/core/../runtime/../util/err.h \
 src/core/manager.h src/core/../proto/proto.h src/core/../store/store.h \
 src/core/agent.h
src/core/../util/log.h:
src/core/../util/xalloc.h:
src/core/core_int.h:
src/core/../runtime/runtime.h:
src/core/../runtime/../util/err.h:
src/core/manager.h:
src/core/../proto/proto.h:
src/core/../store/store.h:
src/core/agent.h:
