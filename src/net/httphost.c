/* SPDX-License-Identifier: Apache-2.0 */
#include "httphost.h"

#include <llhttp.h>
#include <string.h>

struct scan {
    char field[8]; /* the current header name, if it may be "host" */
    size_t field_len;
    bool in_host, host_seen, bad, done;
    char host[WR_NET_NAME_BUF + 8]; /* "name:port" before the port is cut */
    size_t host_len;
    char target[WR_NET_NAME_BUF + 16]; /* the start of the request target */
    size_t target_len;
};

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    struct scan *s = p->data;
    size_t room = sizeof(s->target) - 1 - s->target_len;

    if (n > room)
        n = room;
    memcpy(s->target + s->target_len, at, n);
    s->target_len += n;
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    struct scan *s = p->data;

    if (s->in_host) {
        /* a new header begins: the previous value was complete */
        s->in_host = false;
        s->field_len = 0;
    }
    if (s->field_len + n < sizeof(s->field)) {
        memcpy(s->field + s->field_len, at, n);
        s->field_len += n;
    } else {
        s->field_len = sizeof(s->field); /* too long to be "host" */
    }
    return 0;
}

static int on_header_field_complete(llhttp_t *p)
{
    struct scan *s = p->data;

    if (s->field_len == 4 && strncasecmp(s->field, "host", 4) == 0) {
        if (s->host_seen) {
            s->bad = true;
            return HPE_USER;
        }
        s->host_seen = true;
        s->in_host = true;
    }
    s->field_len = 0;
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    struct scan *s = p->data;

    if (!s->in_host)
        return 0;
    if (s->host_len + n >= sizeof(s->host)) {
        s->bad = true;
        return HPE_USER;
    }
    memcpy(s->host + s->host_len, at, n);
    s->host_len += n;
    return 0;
}

static int on_header_value_complete(llhttp_t *p)
{
    struct scan *s = p->data;

    s->in_host = false;
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    struct scan *s = p->data;

    s->done = true;
    return HPE_PAUSED;
}

/* Cut "name[:port]" to a lowercase name without the trailing dot into out; -1 if it is not one. */
static int host_only(const char *h, size_t n, char out[WR_NET_NAME_BUF])
{
    const char *colon;

    while (n > 0 && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--; /* llhttp keeps the trailing whitespace of a value */
    colon = memchr(h, ':', n);

    if (colon != NULL) {
        size_t plen = n - (size_t)(colon - h) - 1;
        if (plen == 0 || plen > 5)
            return -1;
        for (size_t i = 1; i <= plen; i++)
            if (colon[i] < '0' || colon[i] > '9')
                return -1;
        n = (size_t)(colon - h);
    }
    if (n > 0 && h[n - 1] == '.')
        n--;
    if (n == 0 || n > WR_NET_NAME_MAX)
        return -1;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
            return -1;
        if (c == '.' && (i == 0 || out[i - 1] == '.'))
            return -1; /* an empty label */
        out[i] = c;
    }
    if (out[n - 1] == '.')
        return -1; /* "name.." */
    out[n] = '\0';
    return 0;
}

/* An absolute-form target ("http://name:port/path") must name the Host's host: a server takes
 * the target's authority over Host (RFC 9112 §3.2.2). */
static bool target_agrees(const struct scan *s, const char *host)
{
    const char *t = s->target, *sep = memchr(t, ':', s->target_len);
    char name[WR_NET_NAME_BUF];

    if (s->target_len == 0 || t[0] == '/' || (s->target_len == 1 && t[0] == '*'))
        return true;
    if (sep == NULL || (size_t)(sep - t) + 3 > s->target_len || sep[1] != '/' || sep[2] != '/')
        return false; /* authority-form (CONNECT) or something else: not for port 80 */
    const char *a = sep + 3, *end = t + s->target_len;
    const char *slash = memchr(a, '/', (size_t)(end - a)), *q = memchr(a, '?', (size_t)(end - a));
    if (q != NULL && (slash == NULL || q < slash))
        slash = q;
    if (slash == NULL)
        slash = end;
    if (memchr(a, '@', (size_t)(slash - a)) != NULL)
        return false;
    return host_only(a, (size_t)(slash - a), name) == 0 && strcmp(name, host) == 0;
}

enum wr_host_result wr_http_host(const uint8_t *buf, size_t len, char out[WR_NET_NAME_BUF])
{
    llhttp_settings_t settings;
    llhttp_t parser;
    struct scan s = {0};
    enum llhttp_errno rc;
    size_t n = len > WR_HTTP_HEAD_MAX ? WR_HTTP_HEAD_MAX : len;

    llhttp_settings_init(&settings);
    settings.on_url = on_url;
    settings.on_header_field = on_header_field;
    settings.on_header_field_complete = on_header_field_complete;
    settings.on_header_value = on_header_value;
    settings.on_header_value_complete = on_header_value_complete;
    settings.on_headers_complete = on_headers_complete;
    llhttp_init(&parser, HTTP_REQUEST, &settings);
    parser.data = &s;
    rc = llhttp_execute(&parser, (const char *)buf, n);
    if (rc == HPE_OK)
        return len > WR_HTTP_HEAD_MAX ? WR_HOST_BAD : WR_HOST_MORE;
    if (rc != HPE_PAUSED || !s.done || s.bad)
        return WR_HOST_BAD;
    if (parser.http_major != 1)
        return WR_HOST_BAD;
    if (!s.host_seen)
        return s.target_len > 0 && s.target[0] == '/' ? WR_HOST_NONE : WR_HOST_BAD;
    if (host_only(s.host, s.host_len, out) < 0 || !target_agrees(&s, out))
        return WR_HOST_BAD;
    return WR_HOST_NAME;
}
