/* SPDX-License-Identifier: Apache-2.0 */
/* Growable byte buffers (buf.h). */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

void wr_buf_init(struct wr_buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void wr_buf_fini(struct wr_buf *b)
{
    free(b->data);
    wr_buf_init(b);
}

void wr_buf_reserve(struct wr_buf *b, size_t extra)
{
    size_t need, cap;

    if (extra >= SIZE_MAX - b->len)
        abort(); /* a caller bug: nothing real is this large */
    need = b->len + extra + 1;
    if (need <= b->cap)
        return;
    cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void wr_buf_append(struct wr_buf *b, const void *p, size_t n)
{
    if (n == 0 && b->data == NULL)
        return;
    wr_buf_reserve(b, n);
    if (n > 0)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void wr_buf_puts(struct wr_buf *b, const char *s)
{
    wr_buf_append(b, s, strlen(s));
}

void wr_buf_printf(struct wr_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    wr_buf_reserve(b, (size_t)n);
    va_start(ap, fmt);
    (void)vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void wr_buf_consume(struct wr_buf *b, size_t n)
{
    if (b->data == NULL)
        return;
    if (n >= b->len) {
        b->len = 0;
    } else {
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
    }
    b->data[b->len] = '\0';
}

const char *wr_buf_str(const struct wr_buf *b)
{
    return b->data ? (const char *)b->data : "";
}

char *wr_buf_steal_str(struct wr_buf *b)
{
    char *s = b->data ? (char *)b->data : xstrdup("");

    wr_buf_init(b);
    return s;
}
