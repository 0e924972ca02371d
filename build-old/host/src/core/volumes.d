build-old/host/src/core/volumes.o: src/core/volumes.c \
 src/core/../util/cleanup.h src/core/../util/fs.h src/core/../util/err.h \
 src/core/../util/log.h src/core/../util/xalloc.h src/core/core_int.h \
 src/core/../runtime/runtime.h src/core/manager.h \
 src/core/../proto/proto.h src/core/../store/store.h src/core/agent.h
src/core/../util/cleanup.h:
src/core/../util/fs.h:
src/core/../util/err.h:
src/core/../util/log.h:
src/core/../util/xalloc.h:
src/core/core_int.h:
src/core/../runtime/runtime.h:
src/core/manager.h:
src/core/../proto/proto.h:
src/core/../store/store.h:
src/core/agent.h:
