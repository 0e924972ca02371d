build-old/host/src/store/migrate.o: src/store/migrate.c \
 src/store/store_int.h src/store/../util/cleanup.h src/store/store.h \
 src/store/../util/err.h
src/store/store_int.h:
src/store/../util/cleanup.h:
src/store/store.h:
src/store/../util/err.h:
