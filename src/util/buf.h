/* SPDX-License-Identifier: Apache-2.0 */
/* A growable byte buffer: protocol frames are built and queued in one, HTTP requests and
 * responses are assembled in one, and base64 decodes into one. It owns its storage; a zeroed
 * struct (or wr_buf_init) is an empty buffer and wr_buf_fini frees it.
 *
 * While data is not NULL, room for one byte past len is always allocated. wr_buf_append,
 * wr_buf_puts, wr_buf_printf and wr_buf_consume write a NUL there, so a buffer filled only through
 * them reads as a C string (wr_buf_str). A caller that writes into data + len itself after
 * wr_buf_reserve owns that byte and must call wr_buf_append(b, "", 0) if it wants a string. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct wr_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
};

void wr_buf_init(struct wr_buf *b);
/* Free the storage and leave b empty. */
void wr_buf_fini(struct wr_buf *b);
/* Make room for extra more bytes (and the NUL after them). Aborts on a size no caller can have. */
void wr_buf_reserve(struct wr_buf *b, size_t extra);
void wr_buf_append(struct wr_buf *b, const void *p, size_t n);
void wr_buf_puts(struct wr_buf *b, const char *s);
void wr_buf_printf(struct wr_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drop the first n bytes (after they were written out). */
void wr_buf_consume(struct wr_buf *b, size_t n);
/* The contents as a C string: "" for a buffer never appended to. See the NUL rule above. */
const char *wr_buf_str(const struct wr_buf *b);
/* Hand the storage to the caller as a NUL-terminated string (never NULL; free it) and leave b
 * empty. */
char *wr_buf_steal_str(struct wr_buf *b);

static inline void wr_buf_finip(struct wr_buf *b)
{
    wr_buf_fini(b);
}
/* A local `_cleanup_buf_ struct wr_buf b = {0};` is freed when it leaves scope. */
#define _cleanup_buf_ __attribute__((cleanup(wr_buf_finip)))
