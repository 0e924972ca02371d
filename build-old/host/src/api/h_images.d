build-old/host/src/api/h_images.o: src/api/h_images.c \
 src/api/../core/images.h src/api/../core/../store/store.h \
 src/api/../core/../store/../util/err.h src/api/../core/manager.h \
 src/api/../core/../proto/proto.h src/api/../core/agent.h \
 src/api/../util/cleanup.h src/api/../util/xalloc.h src/api/api_int.h \
 src/api/api.h src/api/http.h
src/api/../core/images.h:
src/api/../core/../store/store.h:
src/api/../core/../store/../util/err.h:
src/api/../core/manager.h:
src/api/../core/../proto/proto.h:
src/api/../core/agent.h:
src/api/../util/cleanup.h:
src/api/../util/xalloc.h:
src/api/api_int.h:
src/api/api.h:
src/api/http.h:
