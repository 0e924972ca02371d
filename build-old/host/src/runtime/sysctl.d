build-old/host/src/runtime/sysctl.o: src/runtime/sysctl.c \
 src/runtime/sysctl.h src/runtime/../util/err.h src/runtime/../util/fs.h \
 src/runtime/../util/log.h
src/runtime/sysctl.h:
src/runtime/../util/err.h:
src/runtime/../util/fs.h:
src/runtime/../util/log.h:
