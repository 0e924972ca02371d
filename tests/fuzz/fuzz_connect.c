/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the Connect envelope of a server-streaming request (src/api/connectrpc.c):
 * the input is a request body. An accepted body is one message envelope whose payload is exactly
 * the rest of the body; a refused one gets a Connect code and a message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/api/e2b_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a copy of exactly size bytes, so that ASan sees any read past the body */
    char *body = malloc(size ? size : 1);
    const char *payload = NULL, *code = NULL, *msg = NULL;
    size_t n = 0;

    check(body != NULL);
    memcpy(body, data, size);
    if (connect_unwrap(body, size, &payload, &n, &code, &msg) == 0) {
        check(size >= 5 && body[0] == 0 && payload == body + 5 && n == size - 5);
        check(((size_t)data[1] << 24 | (size_t)data[2] << 16 | (size_t)data[3] << 8 | data[4]) ==
              n);
    } else {
        check(code != NULL && msg != NULL && connect_http_status(code) >= 400);
        check(strcmp(code, "invalid_argument") == 0 || strcmp(code, "unimplemented") == 0);
    }
    free(body);
    return 0;
}
