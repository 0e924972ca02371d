build-old/host/src/runtime/net.o: src/runtime/net.c src/runtime/net.h
src/runtime/net.h:
