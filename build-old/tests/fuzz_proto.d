build-old/tests/fuzz_proto: tests/fuzz/replay.c
