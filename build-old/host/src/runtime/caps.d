build-old/host/src/runtime/caps.o: src/runtime/caps.c src/runtime/caps.h
src/runtime/caps.h:
