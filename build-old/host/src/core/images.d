build-old/host/src/core/images.o: src/core/images.c src/core/images.h \
 src/core/../store/store.h src/core/../store/../util/err.h \
 src/core/../runtime/layer.h src/core/../runtime/quota.h \
 src/core/../util/cleanup.h src/core/../util/fs.h src/core/../util/log.h \
 src/core/../util/xalloc.h
src/core/images.h:
src/core/../store/store.h:
src/core/../store/../util/err.h:
src/core/../runtime/layer.h:
src/core/../runtime/quota.h:
src/core/../util/cleanup.h:
src/core/../util/fs.h:
src/core/../util/log.h:
src/core/../util/xalloc.h:
