build-old/host/src/cli/template_oci.o: src/cli/template_oci.c \
 src/cli/../util/cleanup.h src/cli/../util/xalloc.h src/cli/cli.h \
 src/cli/../util/err.h src/cli/client.h
src/cli/../util/cleanup.h:
src/cli/../util/xalloc.h:
src/cli/cli.h:
src/cli/../util/err.h:
src/cli/client.h:
