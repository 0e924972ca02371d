build-old/host/src/image/registry.o: src/image/registry.c \
 src/image/../util/cleanup.h src/image/../util/fs.h \
 src/image/../util/err.h src/image/../util/xalloc.h src/image/image_int.h \
 src/image/image.h
src/image/../util/cleanup.h:
src/image/../util/fs.h:
src/image/../util/err.h:
src/image/../util/xalloc.h:
src/image/image_int.h:
src/image/image.h:
