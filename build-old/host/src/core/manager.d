build-old/host/src/core/manager.o: src/core/manager.c src/core/manager.h \
 src/core/../proto/proto.h src/core/../proto/../util/err.h \
 src/core/../store/store.h src/core/agent.h src/core/../runtime/layer.h \
 src/core/../runtime/quota.h src/core/../runtime/runtime.h \
 src/core/../util/cleanup.h src/core/../util/log.h \
 src/core/../util/xalloc.h src/core/core_int.h src/core/images.h
src/core/manager.h:
src/core/../proto/proto.h:
src/core/../proto/../util/err.h:
src/core/../store/store.h:
src/core/agent.h:
src/core/../runtime/layer.h:
src/core/../runtime/quota.h:
src/core/../runtime/runtime.h:
src/core/../util/cleanup.h:
src/core/../util/log.h:
src/core/../util/xalloc.h:
src/core/core_int.h:
src/core/images.h:
