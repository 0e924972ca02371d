build-old/static/src/init/list.o: src/init/list.c \
 src/init/../util/cleanup.h src/init/../util/xalloc.h src/init/files.h \
 src/init/init.h src/init/../proto/proto.h \
 src/init/../proto/../util/err.h
src/init/../util/cleanup.h:
src/init/../util/xalloc.h:
src/init/files.h:
src/init/init.h:
src/init/../proto/proto.h:
src/init/../proto/../util/err.h:
