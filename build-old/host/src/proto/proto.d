build-old/host/src/proto/proto.o: src/proto/proto.c src/proto/proto.h \
 src/proto/../util/err.h src/proto/../util/cleanup.h \
 src/proto/../util/xalloc.h
src/proto/proto.h:
src/proto/../util/err.h:
src/proto/../util/cleanup.h:
src/proto/../util/xalloc.h:
