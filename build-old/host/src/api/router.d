build-old/host/src/api/router.o: src/api/router.c src/api/../util/log.h \
 src/api/../util/xalloc.h src/api/api_int.h src/api/api.h \
 src/api/../core/manager.h src/api/../core/../proto/proto.h \
 src/api/../core/../proto/../util/err.h src/api/../core/../store/store.h \
 src/api/../core/agent.h src/api/http.h
src/api/../util/log.h:
src/api/../util/xalloc.h:
src/api/api_int.h:
src/api/api.h:
src/api/../core/manager.h:
src/api/../core/../proto/proto.h:
src/api/../core/../proto/../util/err.h:
src/api/../core/../store/store.h:
src/api/../core/agent.h:
src/api/http.h:
