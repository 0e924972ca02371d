build-old/bench/sandbox_loop: bench/sandbox_loop.c \
 bench/../src/proto/proto.h bench/../src/proto/../util/err.h \
 bench/../src/runtime/runtime.h bench/../src/util/fs.h
bench/../src/proto/proto.h:
bench/../src/proto/../util/err.h:
bench/../src/runtime/runtime.h:
bench/../src/util/fs.h:
