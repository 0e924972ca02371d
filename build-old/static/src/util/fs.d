build-old/static/src/util/fs.o: src/util/fs.c src/util/fs.h \
 src/util/err.h src/util/cleanup.h
src/util/fs.h:
src/util/err.h:
src/util/cleanup.h:
