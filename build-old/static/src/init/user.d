build-old/static/src/init/user.o: src/init/user.c \
 src/init/../util/cleanup.h src/init/../util/xalloc.h src/init/init.h \
 src/init/../proto/proto.h src/init/../proto/../util/err.h
src/init/../util/cleanup.h:
src/init/../util/xalloc.h:
src/init/init.h:
src/init/../proto/proto.h:
src/init/../proto/../util/err.h:
