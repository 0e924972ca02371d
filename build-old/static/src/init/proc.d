build-old/static/src/init/proc.o: src/init/proc.c src/init/../util/log.h \
 src/init/../util/xalloc.h src/init/init.h src/init/../proto/proto.h \
 src/init/../proto/../util/err.h
src/init/../util/log.h:
src/init/../util/xalloc.h:
src/init/init.h:
src/init/../proto/proto.h:
src/init/../proto/../util/err.h:
