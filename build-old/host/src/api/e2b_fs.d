build-old/host/src/api/e2b_fs.o: src/api/e2b_fs.c \
 src/api/../util/cleanup.h src/api/../util/log.h src/api/../util/xalloc.h \
 src/api/e2b_int.h src/api/api_int.h src/api/api.h \
 src/api/../core/manager.h src/api/../core/../proto/proto.h \
 src/api/../core/../proto/../util/err.h src/api/../core/../store/store.h \
 src/api/../core/agent.h src/api/http.h
src/api/../util/cleanup.h:
src/api/../util/log.h:
src/api/../util/xalloc.h:
src/api/e2b_int.h:
src/api/api_int.h:
src/api/api.h:
src/api/../core/manager.h:
src/api/../core/../proto/proto.h:
src/api/../core/../proto/../util/err.h:
src/api/../core/../store/store.h:
src/api/../core/agent.h:
src/api/http.h:
