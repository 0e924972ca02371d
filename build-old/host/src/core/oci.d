build-old/host/src/core/oci.o: src/core/oci.c src/core/oci.h \
 src/core/../store/store.h src/core/../store/../util/err.h \
 src/core/manager.h src/core/../proto/proto.h src/core/agent.h \
 src/core/../image/image.h src/core/../runtime/layer.h \
 src/core/../util/cleanup.h src/core/../util/log.h \
 src/core/../util/xalloc.h src/core/core_int.h \
 src/core/../runtime/runtime.h src/core/images.h
src/core/oci.h:
src/core/../store/store.h:
src/core/../store/../util/err.h:
src/core/manager.h:
src/core/../proto/proto.h:
src/core/agent.h:
src/core/../image/image.h:
src/core/../runtime/layer.h:
src/core/../util/cleanup.h:
src/core/../util/log.h:
src/core/../util/xalloc.h:
src/core/core_int.h:
src/core/../runtime/runtime.h:
src/core/images.h:
