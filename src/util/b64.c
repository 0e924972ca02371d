/* SPDX-License-Identifier: Apache-2.0 */
/* Base64 (b64.h). */
#include "b64.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t wr_b64_encode(const void *p, size_t n, char *out)
{
    const uint8_t *in = p;
    char *o = out;

    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
        *o++ = i + 2 < n ? alphabet[v & 63] : '=';
    }
    *o = '\0';
    return (size_t)(o - out);
}

/* The 6-bit value of c, or -1 if c is not in the alphabet `mode` accepts. */
static int value_of(unsigned char c, enum wr_b64_mode mode)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || (c == '-' && mode == WR_B64_LENIENT))
        return 62;
    if (c == '/' || (c == '_' && mode == WR_B64_LENIENT))
        return 63;
    return -1;
}

/* The length of the data part of s[0..n) (before the padding), or -1 if the padding is wrong. */
static ssize_t data_len(const char *s, size_t n, enum wr_b64_mode mode)
{
    size_t m = 0;

    if (mode == WR_B64_LENIENT) {
        while (m < n && s[m] != '=')
            m++;
        return m % 4 == 1 ? -1 : (ssize_t)m;
    }
    if (n % 4 != 0)
        return -1;
    m = n;
    while (m > 0 && n - m < 2 && s[m - 1] == '=')
        m--;
    return m % 4 == 1 ? -1 : (ssize_t)m;
}

ssize_t wr_b64_decode(const char *s, size_t n, enum wr_b64_mode mode, uint8_t *out)
{
    ssize_t m = data_len(s, n, mode);
    uint32_t acc = 0;
    size_t o = 0;
    int bits = 0;

    if (m < 0)
        return -1;
    for (ssize_t i = 0; i < m; i++) {
        int v = value_of((unsigned char)s[i], mode);
        if (v < 0)
            return -1;
        acc = (acc << 6 | (uint32_t)v) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    return (ssize_t)o;
}

int wr_b64_decode_buf(const char *s, size_t n, enum wr_b64_mode mode, struct wr_buf *out)
{
    ssize_t len;

    wr_buf_reserve(out, WR_B64_DECODED_MAX(n));
    len = wr_b64_decode(s, n, mode, out->data + out->len);
    if (len < 0)
        return -1;
    out->len += (size_t)len;
    out->data[out->len] = '\0'; /* the buffer's NUL rule (buf.h) */
    return 0;
}
