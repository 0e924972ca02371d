build-old/host/src/cli/main.o: src/cli/main.c src/cli/cli.h \
 src/cli/../util/err.h src/cli/../util/log.h
src/cli/cli.h:
src/cli/../util/err.h:
src/cli/../util/log.h:
