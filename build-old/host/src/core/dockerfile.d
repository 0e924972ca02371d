build-old/host/src/core/dockerfile.o: src/core/dockerfile.c \
 src/core/dockerfile.h src/core/../util/err.h src/core/../util/cleanup.h \
 src/core/../util/xalloc.h
src/core/dockerfile.h:
src/core/../util/err.h:
src/core/../util/cleanup.h:
src/core/../util/xalloc.h:
