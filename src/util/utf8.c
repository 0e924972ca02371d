/* SPDX-License-Identifier: Apache-2.0 */
/* UTF-8 checks and repairs (see utf8.h). */
#include <string.h>

#include "utf8.h"
#include "xalloc.h"

int wr_utf8_seq(const uint8_t *p, size_t n)
{
    uint8_t c = p[0];
    uint32_t cp;
    int len;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, cp = c & 0x07;
    else
        return 0;
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n)
            return -1;
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

bool wr_utf8_valid(const char *s)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t n = strlen(s);

    for (size_t i = 0; i < n;) {
        int l = wr_utf8_seq(p + i, n - i);
        if (l <= 0)
            return false;
        i += (size_t)l;
    }
    return true;
}

char *wr_utf8_fix(const char *s, enum wr_utf8_fix how)
{
    static const char hex[] = "0123456789abcdef";
    const uint8_t *p = (const uint8_t *)s;
    size_t n = strlen(s), o = 0;
    char *out;

    if (wr_utf8_valid(s))
        return xstrdup(s);
    out = xmalloc(4 * n + 1); /* an invalid byte takes 3 (U+FFFD) or 4 (\xNN) */
    for (size_t i = 0; i < n;) {
        int l = wr_utf8_seq(p + i, n - i);
        if (l > 0) {
            memcpy(out + o, p + i, (size_t)l);
            o += (size_t)l;
            i += (size_t)l;
        } else if (how == WR_UTF8_REPLACE) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[p[i] >> 4];
            out[o++] = hex[p[i] & 15];
            i++;
        }
    }
    out[o] = '\0';
    return out;
}
