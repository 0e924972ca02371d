/* SPDX-License-Identifier: Apache-2.0 */
/* libwarren's HTTP/1.1 client (http.h), which the `warren` command also uses. Requests are written
 * by hand (they are simple and ours); responses are parsed only by llhttp, which also undoes
 * chunked transfer coding. Every socket write uses MSG_NOSIGNAL, so a server that hangs up gives
 * EPIPE, never SIGPIPE. */
#include "http.h"

#include <errno.h>
#include <jansson.h>
#include <llhttp.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/xalloc.h"

#define IO_SIZE      (64 * 1024)
#define ERR_BODY_MAX (64 * 1024)
#define BODY_MAX     (256u << 20) /* a collected (JSON) body larger than this is not ours */
#define HEADERS_MAX  100

struct wl_http {
    char *unix_path;   /* unix:// */
    char *host, *port; /* http:// */
    char *host_hdr;
    char *auth; /* "Bearer KEY" or NULL */
    const char *request_id;
    int fd;
    bool reused;      /* fd has carried a complete exchange before */
    bool send_failed; /* the current request's body could not be sent completely */
    struct wr_err send_err;

    /* Response parsing state. */
    llhttp_t parser;
    const struct wl_http_req *req;
    struct wl_http_resp *resp;
    struct wr_buf field, value;
    bool done, got_bytes;
    struct wr_err *cb_err;
    int cb_failed;
};

/* ---- strings -------------------------------------------------------------------------------- */

void wl_buf_add_escaped(struct wr_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";

    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '_' || ch == '.' || ch == '~' || ch == '/') {
            wr_buf_append(b, s, 1);
        } else {
            char e[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            wr_buf_append(b, e, 3);
        }
    }
}

/* ---- connecting ----------------------------------------------------------------------------- */

static int parse_url(struct wl_http *c, const char *url, struct wr_err *err)
{
    if (strncmp(url, "unix://", 7) == 0) {
        const char *path = url + 7;
        if (path[0] != '/')
            return wr_err_set(err, WR_EINVAL, 0, "endpoint `%s`: want unix:///absolute/path", url);
        if (strlen(path) >= sizeof(((struct sockaddr_un *)NULL)->sun_path))
            return wr_err_set(err, WR_EINVAL, 0, "endpoint `%s`: socket path too long", url);
        c->unix_path = xstrdup(path);
        c->host_hdr = xstrdup("localhost");
        return 0;
    }
    if (strncmp(url, "https://", 8) == 0)
        return wr_err_set(err, WR_EUNSUPPORTED, 0,
                          "endpoint `%s`: TLS is not supported; use http:// over a tunnel", url);
    if (strncmp(url, "http://", 7) != 0)
        return wr_err_set(err, WR_EINVAL, 0, "endpoint `%s`: want unix:///path or http://host:port",
                          url);

    const char *h = url + 7, *end = h + strcspn(h, "/?#"), *colon;
    if (*end != '\0' && strcmp(end, "/") != 0)
        return wr_err_set(err, WR_EINVAL, 0, "endpoint `%s`: no path allowed after host:port", url);
    if (h[0] == '[') { /* [v6]:port */
        const char *rb = memchr(h, ']', (size_t)(end - h));
        if (rb == NULL)
            return wr_err_set(err, WR_EINVAL, 0, "endpoint `%s`: unbalanced `[`", url);
        c->host = xstrndup(h + 1, (size_t)(rb - h - 1));
        colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
        if (colon == NULL && rb + 1 != end)
            return wr_err_set(err, WR_EINVAL, 0, "endpoint `%s`: bad host", url);
    } else {
        colon = memchr(h, ':', (size_t)(end - h));
        c->host = xstrndup(h, (size_t)((colon ? colon : end) - h));
    }
    c->port = colon ? xstrndup(colon + 1, (size_t)(end - colon - 1)) : xstrdup("80");
    if (c->host[0] == '\0' || c->port[0] == '\0' ||
        strspn(c->port, "0123456789") != strlen(c->port))
        return wr_err_set(err, WR_EINVAL, 0, "endpoint `%s`: want http://host:port", url);
    if (strtoul(c->port, NULL, 10) == 0 || strtoul(c->port, NULL, 10) > 65535)
        return wr_err_set(err, WR_EINVAL, 0, "endpoint `%s`: port `%s` is out of range", url,
                          c->port);
    c->host_hdr = xstrndup(h, (size_t)(end - h));
    return 0;
}

static bool ip_literal(const char *host, uint16_t port, struct sockaddr_storage *sa, socklen_t *len)
{
    struct sockaddr_in *v4 = (struct sockaddr_in *)sa;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)sa;

    memset(sa, 0, sizeof(*sa));
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        *len = sizeof(*v4);
        return true;
    }
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        *len = sizeof(*v6);
        return true;
    }
    return false;
}

/* Resolve host to an address: an IP literal, or a name from /etc/hosts ("localhost" included).
 * the `warren` command is linked statically, and glibc's getaddrinfo would need the NSS shared
 * libraries of the exact glibc it was built with at run time; so no DNS here (docs/cli.md). The
 * shared library behaves the same, so that both resolve a name alike. */
static int resolve(const char *host, const char *port_s, struct sockaddr_storage *sa,
                   socklen_t *len, struct wr_err *err)
{
    unsigned long port = strtoul(port_s, NULL, 10);
    _cleanup_fclose_ FILE *f = NULL;
    char line[1024];

    if (port == 0 || port > 65535)
        return wr_err_set(err, WR_EINVAL, 0, "port `%s` is out of range", port_s);
    if (ip_literal(host, (uint16_t)port, sa, len))
        return 0;
    f = fopen("/etc/hosts", "re");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        char *save = NULL, *addr, *name;
        line[strcspn(line, "#")] = '\0';
        addr = strtok_r(line, " \t\r\n", &save);
        while (addr != NULL && (name = strtok_r(NULL, " \t\r\n", &save)) != NULL)
            if (strcasecmp(name, host) == 0 && ip_literal(addr, (uint16_t)port, sa, len))
                return 0;
    }
    if (strcasecmp(host, "localhost") == 0 && ip_literal("127.0.0.1", (uint16_t)port, sa, len))
        return 0;
    return wr_err_set(err, WR_EINVAL, 0,
                      "cannot resolve `%s`: use an IP address or a name in /etc/hosts (warren "
                      "does no DNS)",
                      host);
}

static int do_connect(struct wl_http *c, struct wr_err *err)
{
    _cleanup_close_ int fd = -1;

    if (c->unix_path) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        memcpy(sa.sun_path, c->unix_path, strlen(c->unix_path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return wr_err_sys(err, "socket");
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
            return wr_err_sys(err, "connect to warrend at unix://%s", c->unix_path);
    } else {
        struct sockaddr_storage sa;
        socklen_t salen;
        if (resolve(c->host, c->port, &sa, &salen, err) < 0)
            return -1;
        fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return wr_err_sys(err, "socket");
        if (connect(fd, (struct sockaddr *)&sa, salen) < 0)
            return wr_err_sys(err, "connect to warrend at http://%s", c->host_hdr);
        int one = 1; /* requests are written in a few pieces; Nagle would delay the last */
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    c->fd = steal_fd(&fd);
    c->reused = false;
    return 0;
}

int wl_http_open(const char *url, const char *key, struct wl_http **out, struct wr_err *err)
{
    struct wl_http *c = xcalloc(1, sizeof(*c));

    c->fd = -1;
    if (parse_url(c, url, err) < 0 || do_connect(c, err) < 0) {
        wl_http_close(c);
        return -1;
    }
    if (key != NULL && key[0] != '\0')
        c->auth = xasprintf("Bearer %s", key);
    *out = c;
    return 0;
}

int wl_http_check_url(const char *url, struct wr_err *err)
{
    struct wl_http c = {.fd = -1};
    int r = parse_url(&c, url, err);

    free(c.unix_path);
    free(c.host);
    free(c.port);
    free(c.host_hdr);
    return r;
}

static void drop_fd(struct wl_http *c)
{
    wr_closep(&c->fd);
    c->fd = -1;
}

void wl_http_abort(struct wl_http *c)
{
    drop_fd(c);
    c->send_failed = false;
}

void wl_http_close(struct wl_http *c)
{
    if (c == NULL)
        return;
    drop_fd(c);
    free(c->unix_path);
    free(c->host);
    free(c->port);
    free(c->host_hdr);
    free(c->auth);
    wr_buf_fini(&c->field);
    wr_buf_fini(&c->value);
    free(c);
}

void wl_http_set_request_id(struct wl_http *c, const char *id)
{
    c->request_id = id;
}

/* ---- sending -------------------------------------------------------------------------------- */

/* Send every byte of the iovecs. Returns 0 or -1 with errno. */
static int send_iov(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* Failed sends are recorded in c->send_err: the server may have answered early (an error
 * before reading the body), and wl_http_response prefers that answer to EPIPE. */
static int send_bytes(struct wl_http *c, const void *p, size_t len)
{
    struct iovec iov = {.iov_base = (void *)p, .iov_len = len};

    if (send_iov(c->fd, &iov, 1) < 0) {
        c->send_failed = true;
        return wr_err_sys(&c->send_err, "send request");
    }
    return 0;
}

static int send_head(struct wl_http *c, const struct wl_http_req *req)
{
    struct wr_buf h = {0};
    int r;

    wr_buf_printf(&h, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: warren\r\nAccept: %s\r\n",
                  req->method, req->target, c->host_hdr,
                  req->accept ? req->accept : "application/json");
    if (c->auth)
        wr_buf_printf(&h, "Authorization: %s\r\n", c->auth);
    if (c->request_id)
        wr_buf_printf(&h, "X-Request-Id: %s\r\n", c->request_id);
    if (req->content_type && req->body_kind != WL_BODY_NONE)
        wr_buf_printf(&h, "Content-Type: %s\r\n", req->content_type);
    for (const char *const *x = req->extra; x && *x; x++)
        wr_buf_printf(&h, "%s\r\n", *x);
    switch (req->body_kind) {
    case WL_BODY_NONE:
        if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0 &&
            strcmp(req->method, "DELETE") != 0)
            wr_buf_puts(&h, "Content-Length: 0\r\n");
        break;
    case WL_BODY_MEM:
        wr_buf_printf(&h, "Content-Length: %zu\r\n", req->body_len);
        break;
    case WL_BODY_FD:
        if (req->body_fd_len >= 0)
            wr_buf_printf(&h, "Content-Length: %lld\r\n", (long long)req->body_fd_len);
        else
            wr_buf_puts(&h, "Transfer-Encoding: chunked\r\n");
        break;
    case WL_BODY_STREAM:
        wr_buf_puts(&h, "Transfer-Encoding: chunked\r\n");
        break;
    }
    wr_buf_puts(&h, "\r\n");
    if (req->body_kind == WL_BODY_MEM && req->body_len > 0 && req->body_len <= 16384) {
        wr_buf_append(&h, req->body, req->body_len); /* one write for a small request */
        r = send_bytes(c, h.data, h.len);
    } else {
        r = send_bytes(c, h.data, h.len);
        if (r == 0 && req->body_kind == WL_BODY_MEM && req->body_len > 0)
            r = send_bytes(c, req->body, req->body_len);
    }
    wr_buf_fini(&h);
    return r;
}

int wl_http_chunk(struct wl_http *c, const void *data, size_t len, struct wr_err *err)
{
    char head[32];
    struct iovec iov[3];

    if (len == 0)
        return 0;
    iov[0].iov_base = head;
    iov[0].iov_len = (size_t)snprintf(head, sizeof(head), "%zx\r\n", len);
    iov[1].iov_base = (void *)data;
    iov[1].iov_len = len;
    iov[2].iov_base = (void *)"\r\n";
    iov[2].iov_len = 2;
    if (send_iov(c->fd, iov, 3) < 0) {
        c->send_failed = true;
        wr_err_sys(&c->send_err, "send request body");
        *err = c->send_err;
        return -1;
    }
    return 0;
}

int wl_http_end(struct wl_http *c, struct wr_err *err)
{
    if (send_bytes(c, "0\r\n\r\n", 5) < 0) {
        *err = c->send_err;
        return -1;
    }
    return 0;
}

/* Stream an fd as the body: Content-Length bytes or chunks until EOF. Errors go to c->send_err;
 * c->send_failed tells a failed send from a failed local read. */
static int send_fd_body(struct wl_http *c, const struct wl_http_req *req)
{
    struct wr_err *err = &c->send_err;
    _cleanup_free_ char *buf = xmalloc(IO_SIZE);
    int64_t left = req->body_fd_len;

    for (;;) {
        size_t want = IO_SIZE;
        if (left >= 0 && (uint64_t)left < want)
            want = (size_t)left;
        if (left == 0)
            break;
        ssize_t n = read(req->body_fd, buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return wr_err_sys(err, "read request body");
        if (n == 0) {
            if (left > 0)
                return wr_err_set(err, WR_ESYS, 0, "request body: file shrank while sending");
            break;
        }
        if (left >= 0) {
            if (send_bytes(c, buf, (size_t)n) < 0)
                return -1;
            left -= n;
        } else if (wl_http_chunk(c, buf, (size_t)n, err) < 0) {
            return -1;
        }
    }
    return left < 0 ? wl_http_end(c, err) : 0;
}

/* ---- receiving ------------------------------------------------------------------------------ */

static struct wl_http *of(llhttp_t *p)
{
    return p->data;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
    wr_buf_append(&of(p)->field, at, len);
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    wr_buf_append(&of(p)->value, at, len);
    return 0;
}

static int on_header_value_complete(llhttp_t *p)
{
    struct wl_http *c = of(p);
    struct wl_http_resp *r = c->resp;

    if (r->n_headers < HEADERS_MAX && c->field.len > 0) {
        r->headers = xrealloc(r->headers, (r->n_headers + 1) * sizeof(*r->headers));
        r->headers[r->n_headers].name = xstrdup(wr_buf_str(&c->field));
        r->headers[r->n_headers].value = xstrdup(c->value.len ? wr_buf_str(&c->value) : "");
        r->n_headers++;
    }
    c->field.len = c->value.len = 0;
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    struct wl_http *c = of(p);

    c->resp->status = llhttp_get_status_code(p);
    if (c->req->on_headers != NULL && c->resp->status >= 200 &&
        c->req->on_headers(c->resp, c->req->ctx, c->cb_err) < 0) {
        c->cb_failed = 1;
        return -1;
    }
    return 0;
}

static bool collecting(const struct wl_http *c)
{
    return c->req->on_body == NULL || c->resp->status < 200 || c->resp->status > 299;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    struct wl_http *c = of(p);
    struct wl_http_resp *r = c->resp;

    if (!collecting(c)) {
        if (c->req->on_body(at, len, c->req->ctx, c->cb_err) < 0) {
            c->cb_failed = 1;
            return HPE_USER;
        }
        return 0;
    }
    size_t cap =
        c->req->on_body == NULL && r->status >= 200 && r->status <= 299 ? BODY_MAX : ERR_BODY_MAX;
    if (r->body_len >= cap) {
        if (cap == BODY_MAX) {
            wr_err_set(c->cb_err, WR_EPROTO, 0, "response body larger than %u bytes", BODY_MAX);
            c->cb_failed = 1;
            return HPE_USER;
        }
        return 0;
    }
    if (len > cap - r->body_len)
        len = cap - r->body_len;
    r->body = xrealloc(r->body, r->body_len + len + 1);
    memcpy(r->body + r->body_len, at, len);
    r->body_len += len;
    r->body[r->body_len] = '\0';
    return 0;
}

static void resp_clear(struct wl_http_resp *r)
{
    for (size_t i = 0; i < r->n_headers; i++) {
        free(r->headers[i].name);
        free(r->headers[i].value);
    }
    free(r->headers);
    free(r->body);
    memset(r, 0, sizeof(*r));
}

static int on_message_complete(llhttp_t *p)
{
    struct wl_http *c = of(p);

    /* An interim 1xx answer (100 Continue) is followed by the real one. */
    if (c->resp->status >= 100 && c->resp->status < 200 && c->resp->status != 101) {
        resp_clear(c->resp);
        return 0;
    }
    c->done = true;
    return HPE_PAUSED;
}

static const llhttp_settings_t settings = {
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

int wl_http_response(struct wl_http *c, const struct wl_http_req *req, struct wl_http_resp *resp,
                     struct wr_err *err)
{
    _cleanup_free_ char *buf = xmalloc(IO_SIZE);

    memset(resp, 0, sizeof(*resp));
    llhttp_init(&c->parser, HTTP_RESPONSE, &settings);
    c->parser.data = c;
    c->req = req;
    c->resp = resp;
    c->field.len = c->value.len = 0;
    c->done = c->got_bytes = false;
    c->cb_err = err;
    c->cb_failed = 0;

    while (!c->done) {
        ssize_t n = read(c->fd, buf, IO_SIZE);
        enum llhttp_errno e;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            if (c->send_failed && !c->got_bytes) {
                *err = c->send_err;
                goto fail;
            }
            wr_err_sys(err, "read response");
            goto fail;
        }
        if (n == 0) {
            e = llhttp_finish(&c->parser);
            if (e == HPE_OK && c->done)
                break;
            if (c->send_failed && !c->got_bytes)
                *err = c->send_err;
            else if (!c->got_bytes)
                wr_err_set(err, WR_EPROTO, 0, "warrend closed the connection without answering");
            else
                wr_err_set(err, WR_EPROTO, 0, "warrend closed the connection mid-response");
            goto fail;
        }
        c->got_bytes = true;
        e = llhttp_execute(&c->parser, buf, (size_t)n);
        if (e == HPE_PAUSED)
            break; /* the message is complete; anything after it is not ours */
        if (c->cb_failed)
            goto fail;
        if (e != HPE_OK) {
            wr_err_set(err, WR_EPROTO, 0, "bad HTTP response: %s",
                       llhttp_get_error_reason(&c->parser));
            goto fail;
        }
    }
    if (c->send_failed || !llhttp_should_keep_alive(&c->parser))
        drop_fd(c);
    else
        c->reused = true;
    c->send_failed = false;
    return 0;
fail:
    drop_fd(c);
    c->send_failed = false;
    return -1;
}

int wl_http_begin(struct wl_http *c, const struct wl_http_req *req, struct wr_err *err)
{
    c->send_failed = false;
    if (c->fd < 0 && do_connect(c, err) < 0)
        return -1;
    if (send_head(c, req) < 0) {
        *err = c->send_err;
        return -1;
    }
    return 0;
}

/* Send the whole request; a failed send is left in c->send_err for wl_http_response. */
static void send_request(struct wl_http *c, const struct wl_http_req *req)
{
    if (send_head(c, req) < 0)
        return;
    /* A failed local read leaves the request half sent: the connection is unusable. */
    if (req->body_kind == WL_BODY_FD && send_fd_body(c, req) < 0 && !c->send_failed)
        drop_fd(c);
}

int wl_http_request(struct wl_http *c, const struct wl_http_req *req, struct wl_http_resp *resp,
                    struct wr_err *err)
{
    for (int attempt = 0;; attempt++) {
        bool reused;

        c->send_failed = false;
        wr_err_clear(&c->send_err);
        if (c->fd < 0 && do_connect(c, err) < 0)
            return -1;
        reused = c->reused;
        send_request(c, req);
        if (c->fd < 0) {
            *err = c->send_err;
            return -1;
        }
        if (wl_http_response(c, req, resp, err) == 0)
            return 0;
        /* A keep-alive connection the server closed while idle: nothing was answered. */
        if (attempt > 0 || !reused || c->got_bytes || req->body_kind == WL_BODY_FD)
            return -1;
        wl_http_resp_fini(resp);
    }
}

const char *wl_http_resp_header(const struct wl_http_resp *resp, const char *name)
{
    for (size_t i = 0; i < resp->n_headers; i++)
        if (strcasecmp(resp->headers[i].name, name) == 0)
            return resp->headers[i].value;
    return NULL;
}

void wl_http_resp_fini(struct wl_http_resp *resp)
{
    resp_clear(resp);
}

enum wr_err_kind wl_http_kind_of(const char *code, int status)
{
    static const struct {
        const char *code;
        enum wr_err_kind kind;
    } map[] = {
#define WL__KIND(k, name, st, connect) {name, WR_E##k},
        WR_ERR_MAP(WL__KIND)
#undef WL__KIND
    };
    static const struct {
        int status;
        enum wr_err_kind kind;
    } by_status[] = {
        {400, WR_EINVAL},   {401, WR_EUNAUTHORIZED}, {403, WR_EFORBIDDEN}, {404, WR_ENOTFOUND},
        {405, WR_EMETHOD},  {409, WR_ECONFLICT},     {413, WR_ETOOBIG},    {422, WR_EBADDATA},
        {429, WR_ELIMIT},   {501, WR_EUNSUPPORTED},  {502, WR_EUPSTREAM},  {503, WR_ELIMIT},
        {504, WR_ETIMEOUT}, {507, WR_ENOSPACE},
    };
    for (size_t i = 1; code && i < WR_ARRAY_SIZE(map); i++) /* [0] is "ok" */
        if (strcmp(code, map[i].code) == 0)
            return map[i].kind;
    for (size_t i = 0; i < WR_ARRAY_SIZE(by_status); i++)
        if (by_status[i].status == status)
            return by_status[i].kind;
    return WR_EINTERNAL;
}

int wl_http_error(const struct wl_http_resp *resp, struct wr_err *err)
{
    const char *retry = wl_http_resp_header(resp, "Retry-After");
    json_t *j = resp->body_len ? json_loadb(resp->body, resp->body_len, 0, NULL) : NULL;
    const char *code = json_string_value(json_object_get(j, "code"));
    const char *msg = json_string_value(json_object_get(j, "message"));
    char retry_note[64] = "";

    if (retry && strspn(retry, "0123456789") == strlen(retry) && retry[0])
        snprintf(retry_note, sizeof(retry_note), "; retry in %s s", retry);
    if (msg != NULL) {
        wr_err_set(err, wl_http_kind_of(code, resp->status), 0, "%s (%s)%s", msg,
                   code ? code : "error", retry_note);
    } else {
        const char *b = resp->body ? resp->body : "";
        int line = (int)strcspn(b, "\r\n");
        if (line > 200)
            line = 200;
        wr_err_set(err, wl_http_kind_of(NULL, resp->status), 0, "HTTP %d%s%.*s%s", resp->status,
                   line ? ": " : "", line, b, retry_note);
    }
    json_decref(j);
    return -1;
}

/* ---- protocol upgrades ------------------------------------------------------------------- */

int wl_http_upgrade(struct wl_http *c, const char *target, const char *key64, int *fd,
                    struct wr_buf *rest, struct wr_err *err)
{
    struct wr_buf out = {0}, in = {0};
    const char *end;
    int status = 0;
    ssize_t n;

    if (c->fd < 0 && do_connect(c, err) < 0)
        return -1;
    wr_buf_printf(&out,
                  "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n",
                  target, c->host_hdr, key64);
    if (c->auth != NULL)
        wr_buf_printf(&out, "Authorization: %s\r\n", c->auth);
    if (c->request_id != NULL)
        wr_buf_printf(&out, "X-Request-Id: %s\r\n", c->request_id);
    wr_buf_puts(&out, "\r\n");
    for (size_t off = 0; off < out.len;) {
        n = send(c->fd, out.data + off, out.len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            wr_buf_fini(&out);
            return wr_err_sys(err, "send to warrend");
        }
        off += (size_t)n;
    }
    wr_buf_fini(&out);
    /* The head, then whatever came with it. */
    while ((end = in.len ? memmem(in.data, in.len, "\r\n\r\n", 4) : NULL) == NULL) {
        char buf[4096];
        if (in.len > HEADERS_MAX * 1024) {
            wr_buf_fini(&in);
            return wr_err_set(err, WR_EPROTO, 0, "warrend: the answer's head is too long");
        }
        n = recv(c->fd, buf, sizeof(buf), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            wr_buf_fini(&in);
            return n < 0 ? wr_err_sys(err, "read from warrend")
                         : wr_err_set(err, WR_EPROTO, 0, "warrend closed the connection");
        }
        wr_buf_append(&in, buf, (size_t)n);
    }
    if (sscanf(wr_buf_str(&in), "HTTP/1.%*d %d", &status) != 1 || status != 101) {
        /* An error answer: its JSON message, if the body came with the head. */
        const char *body = end + 4;
        json_error_t je;
        json_t *j = json_loads(body, JSON_DISABLE_EOF_CHECK, &je);
        const char *msg = json_string_value(json_object_get(j, "message"));
        wr_err_set(err,
                   status == 404   ? WR_ENOTFOUND
                   : status == 400 ? WR_EINVAL
                   : status == 401 ? WR_EUNAUTHORIZED
                   : status == 409 ? WR_ECONFLICT
                                   : WR_EUPSTREAM,
                   0, "%s (HTTP %d)", msg ? msg : "the upgrade was refused", status);
        json_decref(j);
        wr_buf_fini(&in);
        return -1;
    }
    wr_buf_append(rest, end + 4, in.len - (size_t)(end + 4 - (const char *)in.data));
    wr_buf_fini(&in);
    *fd = c->fd;
    c->fd = -1;
    return 0;
}
