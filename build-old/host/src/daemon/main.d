build-old/host/src/daemon/main.o: src/daemon/main.c \
 src/daemon/../api/api.h src/daemon/../api/../core/manager.h \
 src/daemon/../api/../core/../proto/proto.h \
 src/daemon/../api/../core/../proto/../util/err.h \
 src/daemon/../api/../core/../store/store.h \
 src/daemon/../api/../core/agent.h src/daemon/../api/http.h \
 src/daemon/../core/images.h src/daemon/../runtime/runtime.h \
 src/daemon/../util/cleanup.h src/daemon/../util/fs.h \
 src/daemon/../util/log.h src/daemon/../util/parse.h \
 src/daemon/../util/xalloc.h
src/daemon/../api/api.h:
src/daemon/../api/../core/manager.h:
src/daemon/../api/../core/../proto/proto.h:
src/daemon/../api/../core/../proto/../util/err.h:
src/daemon/../api/../core/../store/store.h:
src/daemon/../api/../core/agent.h:
src/daemon/../api/http.h:
src/daemon/../core/images.h:
src/daemon/../runtime/runtime.h:
src/daemon/../util/cleanup.h:
src/daemon/../util/fs.h:
src/daemon/../util/log.h:
src/daemon/../util/parse.h:
src/daemon/../util/xalloc.h:
