build-old/static/src/init/conn.o: src/init/conn.c src/init/../util/log.h \
 src/init/../util/xalloc.h src/init/init.h src/init/../proto/proto.h \
 src/init/../proto/../util/err.h
src/init/../util/log.h:
src/init/../util/xalloc.h:
src/init/init.h:
src/init/../proto/proto.h:
src/init/../proto/../util/err.h:
