build-old/host/src/core/build.o: src/core/build.c \
 src/core/../runtime/layer.h src/core/../runtime/../util/err.h \
 src/core/../util/cleanup.h src/core/../util/fs.h src/core/../util/log.h \
 src/core/../util/xalloc.h src/core/core_int.h \
 src/core/../runtime/runtime.h src/core/manager.h \
 src/core/../proto/proto.h src/core/../store/store.h src/core/agent.h \
 src/core/dockerfile.h src/core/images.h src/core/oci.h
src/core/../runtime/layer.h:
src/core/../runtime/../util/err.h:
src/core/../util/cleanup.h:
src/core/../util/fs.h:
src/core/../util/log.h:
src/core/../util/xalloc.h:
src/core/core_int.h:
src/core/../runtime/runtime.h:
src/core/manager.h:
src/core/../proto/proto.h:
src/core/../store/store.h:
src/core/agent.h:
src/core/dockerfile.h:
src/core/images.h:
src/core/oci.h:
