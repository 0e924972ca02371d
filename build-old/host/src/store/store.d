build-old/host/src/store/store.o: src/store/store.c src/store/store_int.h \
 src/store/../util/cleanup.h src/store/store.h src/store/../util/err.h \
 src/store/../util/xalloc.h
src/store/store_int.h:
src/store/../util/cleanup.h:
src/store/store.h:
src/store/../util/err.h:
src/store/../util/xalloc.h:
