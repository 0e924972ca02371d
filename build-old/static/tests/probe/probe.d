build-old/static/tests/probe/probe.o: tests/probe/probe.c
