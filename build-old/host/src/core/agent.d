build-old/host/src/core/agent.o: src/core/agent.c src/core/agent.h \
 src/core/../proto/proto.h src/core/../proto/../util/err.h \
 src/core/../util/cleanup.h src/core/../util/xalloc.h
src/core/agent.h:
src/core/../proto/proto.h:
src/core/../proto/../util/err.h:
src/core/../util/cleanup.h:
src/core/../util/xalloc.h:
