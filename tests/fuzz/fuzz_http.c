/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the request-target parser of src/api/http.c (http_int.h): the input is a
 * request target as a client sends it. Percent-decoding never yields an embedded NUL and undoes
 * percent-encoding; a target that parses, re-encoded from its decoded path and query, parses to
 * the same path and query. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/api/http_int.h"
#include "../../src/util/xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

/* Append s percent-encoded (every byte but unreserved ones, and '/' when keep_slash) to out at
 * *o; out has room for 3 * strlen(s) more bytes. */
static void encode(char *out, size_t *o, const char *s, int keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";

    for (; *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '.' || ch == '_' || ch == '~' || (ch == '/' && keep_slash)) {
            out[(*o)++] = (char)ch;
        } else {
            out[(*o)++] = '%';
            out[(*o)++] = hex[ch >> 4];
            out[(*o)++] = hex[ch & 15];
        }
    }
}

static void decode_roundtrip(const char *s, size_t n, int plus)
{
    char *d = wr__http_pct_decode(s, n, plus), *e, *d2;
    size_t o = 0;

    if (d == NULL)
        return;
    check(strlen(d) <= n);
    if (memchr(s, '%', n) == NULL && (!plus || memchr(s, '+', n) == NULL))
        check(strlen(d) == n && memcmp(d, s, n) == 0);
    e = xmalloc(3 * strlen(d) + 1);
    encode(e, &o, d, 0);
    d2 = wr__http_pct_decode(e, o, plus);
    check(d2 != NULL && strcmp(d, d2) == 0);
    free(d2);
    free(e);
    free(d);
}

static int strv_eq(char **a, char **b)
{
    size_t i;

    for (i = 0; a[i] != NULL && b[i] != NULL; i++)
        if (strcmp(a[i], b[i]) != 0)
            return 0;
    return a[i] == NULL && b[i] == NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the server's URL buffer is a C string (llhttp refuses NUL in a target) */
    char *target = strndup((const char *)data, size), *path, **query, *path2, **query2, *t;
    const char *msg = NULL;
    size_t len = 0, o = 0;

    check(target != NULL);
    decode_roundtrip(target, strlen(target), 0);
    decode_roundtrip(target, strlen(target), 1);
    if (wr__http_parse_target(target, &path, &query, &msg) < 0) {
        check(msg != NULL);
        free(target);
        return 0;
    }
    check(path[0] == '/');
    len = strlen(path);
    for (size_t i = 0; query[i] != NULL; i++)
        len += strlen(query[i]) + 1;
    t = xmalloc(3 * len + 2);
    encode(t, &o, path, 1);
    for (size_t i = 0; query[i] != NULL; i += 2) {
        t[o++] = i == 0 ? '?' : '&';
        encode(t, &o, query[i], 0);
        t[o++] = '=';
        encode(t, &o, query[i + 1], 0);
    }
    t[o] = '\0';
    check(wr__http_parse_target(t, &path2, &query2, &msg) == 0);
    check(strcmp(path, path2) == 0 && strv_eq(query, query2));
    wr__http_target_free(path2, query2);
    wr__http_target_free(path, query);
    free(t);
    free(target);
    return 0;
}
