/* SPDX-License-Identifier: Apache-2.0 */
/* main() for fuzz targets outside libFuzzer: runs LLVMFuzzerTestOneInput over each file named on
 * the command line, so `make test` replays the committed corpus and crashers. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Read a whole file into a new buffer (*out, caller frees). Returns 0, or -1 with errno set. */
static int read_file(const char *path, uint8_t **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0;

    if (f == NULL)
        return -1;
    for (;;) {
        if (n == cap) {
            uint8_t *nb;
            cap = cap ? cap * 2 : 4096;
            nb = realloc(buf, cap);
            if (nb == NULL) {
                free(buf);
                (void)fclose(f);
                errno = ENOMEM;
                return -1;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        int saved = errno ? errno : EIO;
        free(buf);
        (void)fclose(f);
        errno = saved;
        return -1;
    }
    (void)fclose(f);
    *out = buf;
    *len = n;
    return 0;
}

int main(int argc, char **argv)
{
    int n = 0;

    for (int i = 1; i < argc; i++) {
        uint8_t *data = NULL;
        size_t len = 0;
        if (read_file(argv[i], &data, &len) < 0) {
            fprintf(stderr, "fuzz replay: %s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        (void)LLVMFuzzerTestOneInput(data, len);
        free(data);
        n++;
    }
    printf("fuzz replay: %d files ok\n", n);
    return 0;
}
