build-old/host/src/image/unpack.o: src/image/unpack.c \
 src/image/../util/cleanup.h src/image/../util/fs.h \
 src/image/../util/err.h src/image/../util/xalloc.h src/image/image_int.h \
 src/image/image.h
src/image/../util/cleanup.h:
src/image/../util/fs.h:
src/image/../util/err.h:
src/image/../util/xalloc.h:
src/image/image_int.h:
src/image/image.h:
