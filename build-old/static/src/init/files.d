build-old/static/src/init/files.o: src/init/files.c \
 src/init/../util/cleanup.h src/init/../util/fs.h src/init/../util/err.h \
 src/init/../util/log.h src/init/../util/xalloc.h src/init/files.h \
 src/init/init.h src/init/../proto/proto.h
src/init/../util/cleanup.h:
src/init/../util/fs.h:
src/init/../util/err.h:
src/init/../util/log.h:
src/init/../util/xalloc.h:
src/init/files.h:
src/init/init.h:
src/init/../proto/proto.h:
