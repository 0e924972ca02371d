build-old/host/src/runtime/quota.o: src/runtime/quota.c \
 src/runtime/quota.h src/runtime/../util/err.h \
 src/runtime/../util/cleanup.h
src/runtime/quota.h:
src/runtime/../util/err.h:
src/runtime/../util/cleanup.h:
