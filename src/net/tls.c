/* SPDX-License-Identifier: Apache-2.0 */
/* RFC 8446 §4.1.2 (ClientHello), §5.1 (records), RFC 6066 §3 (server_name). */
#include "tls.h"

#include <string.h>

enum { REC_HANDSHAKE = 22, HS_CLIENT_HELLO = 1, EXT_SERVER_NAME = 0, NAME_HOST = 0 };

/* A bounds-checked reader over the handshake message. */
struct rd {
    const uint8_t *p;
    size_t n;
    int bad;
};

static uint32_t get(struct rd *r, size_t k)
{
    uint32_t v = 0;

    if (r->bad || r->n < k) {
        r->bad = 1;
        return 0;
    }
    for (size_t i = 0; i < k; i++)
        v = v << 8 | r->p[i];
    r->p += k;
    r->n -= k;
    return v;
}

/* A sub-reader over the next k bytes. */
static struct rd sub(struct rd *r, size_t k)
{
    struct rd s = {r->p, k, 0};

    if (r->bad || r->n < k) {
        r->bad = 1;
        s.bad = 1;
        return s;
    }
    r->p += k;
    r->n -= k;
    return s;
}

static enum wr_sni_result server_name(struct rd ext, char out[WR_NET_NAME_BUF])
{
    struct rd list = sub(&ext, get(&ext, 2));

    if (ext.bad || ext.n != 0)
        return WR_SNI_BAD;
    while (list.n > 0) {
        uint32_t type = get(&list, 1);
        struct rd name = sub(&list, get(&list, 2));
        if (list.bad)
            return WR_SNI_BAD;
        if (type != NAME_HOST)
            continue;
        size_t n = name.n;
        if (n > 0 && name.p[n - 1] == '.')
            n--;
        if (n == 0 || n > WR_NET_NAME_MAX)
            return WR_SNI_BAD;
        for (size_t i = 0; i < n; i++) {
            uint8_t c = name.p[i];
            if (c >= 'A' && c <= 'Z')
                c = (uint8_t)(c - 'A' + 'a');
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                  c == '.'))
                return WR_SNI_BAD;
            if (c == '.' && (i == 0 || out[i - 1] == '.'))
                return WR_SNI_BAD; /* an empty label */
            out[i] = (char)c;
        }
        if (out[n - 1] == '.')
            return WR_SNI_BAD; /* "name.." */
        out[n] = '\0';
        return WR_SNI_NAME;
    }
    return WR_SNI_NONE;
}

static enum wr_sni_result client_hello(struct rd r, char out[WR_NET_NAME_BUF])
{
    (void)get(&r, 2);  /* legacy_version */
    (void)get(&r, 32); /* random */
    uint32_t sid = get(&r, 1);
    if (sid > 32)
        return WR_SNI_BAD;
    (void)sub(&r, sid);
    uint32_t suites = get(&r, 2);
    if (suites < 2 || suites % 2 != 0)
        return WR_SNI_BAD;
    (void)sub(&r, suites);
    uint32_t comp = get(&r, 1);
    if (comp < 1)
        return WR_SNI_BAD;
    (void)sub(&r, comp);
    if (r.bad)
        return WR_SNI_BAD;
    if (r.n == 0)
        return WR_SNI_NONE; /* no extensions at all (SSL 3.0-style hello) */
    struct rd exts = sub(&r, get(&r, 2));
    if (r.bad || r.n != 0)
        return WR_SNI_BAD;
    while (exts.n > 0) {
        uint32_t type = get(&exts, 2);
        struct rd ext = sub(&exts, get(&exts, 2));
        if (exts.bad)
            return WR_SNI_BAD;
        if (type == EXT_SERVER_NAME)
            return server_name(ext, out);
    }
    return WR_SNI_NONE;
}

enum wr_sni_result wr_tls_sni(const uint8_t *buf, size_t len, char out[WR_NET_NAME_BUF])
{
    uint8_t hs[4 + WR_TLS_HELLO_MAX];
    size_t have = 0, need = 4, off = 0;

    if (len > WR_TLS_PEEK_MAX)
        len = WR_TLS_PEEK_MAX;
    /* Gather the handshake message from consecutive handshake records. */
    for (;;) {
        if (len - off < 5) {
            /* judge a partial header by what it has: the content type and the major version */
            if (len - off >= 1 && buf[off] != REC_HANDSHAKE)
                return WR_SNI_BAD;
            if (len - off >= 2 && buf[off + 1] != 3)
                return WR_SNI_BAD;
            return len >= WR_TLS_PEEK_MAX ? WR_SNI_BAD : WR_SNI_MORE;
        }
        const uint8_t *h = buf + off;
        size_t rlen = (size_t)h[3] << 8 | h[4];
        if (h[0] != REC_HANDSHAKE || h[1] != 3 || rlen == 0 || rlen > 16384)
            return WR_SNI_BAD;
        off += 5;
        size_t avail = len - off < rlen ? len - off : rlen;
        size_t take = avail < need - have ? avail : need - have;
        memcpy(hs + have, buf + off, take);
        have += take;
        if (have >= 4 && need == 4) {
            if (hs[0] != HS_CLIENT_HELLO)
                return WR_SNI_BAD;
            size_t body = (size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3];
            if (body > WR_TLS_HELLO_MAX || body < 38)
                return WR_SNI_BAD;
            need = 4 + body;
            size_t more = avail - take < need - have ? avail - take : need - have;
            memcpy(hs + have, buf + off + take, more);
            have += more;
            take += more;
        }
        if (have == need)
            break;
        if (avail < rlen)
            return len >= WR_TLS_PEEK_MAX ? WR_SNI_BAD : WR_SNI_MORE;
        if (take < rlen)
            return WR_SNI_BAD; /* the record holds more than the handshake message */
        off += rlen;
    }
    return client_hello((struct rd){hs + 4, need - 4, 0}, out);
}
