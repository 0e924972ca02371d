build-old/host/src/util/parse.o: src/util/parse.c src/util/parse.h \
 src/util/err.h
src/util/parse.h:
src/util/err.h:
