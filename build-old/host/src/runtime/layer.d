build-old/host/src/runtime/layer.o: src/runtime/layer.c \
 src/runtime/layer.h src/runtime/../util/err.h \
 src/runtime/../util/cleanup.h src/runtime/../util/fs.h \
 src/runtime/../util/xalloc.h
src/runtime/layer.h:
src/runtime/../util/err.h:
src/runtime/../util/cleanup.h:
src/runtime/../util/fs.h:
src/runtime/../util/xalloc.h:
