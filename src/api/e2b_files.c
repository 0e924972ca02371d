/* SPDX-License-Identifier: Apache-2.0 */
/* envd's /files: GET downloads a file; POST uploads one or many, as multipart/form-data (each
 * part named `file`, its filename the destination) or as a raw application/octet-stream body
 * for ?path=, either possibly gzip-encoded (Content-Encoding: gzip) and chunked. The upload is
 * read whole (at most MAX_UPLOAD bytes, inflated), then written file by file, each atomically,
 * through a connection of its own to warren-init, as the user. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "e2b_int.h"

#define MAX_UPLOAD (256u << 20)
#define MAX_FILES  1000
#define AGENT_HIGH (1u << 20)

struct upfile {
    char *path;
    const uint8_t *data; /* into the upload's body */
    size_t len;
};

struct upload {
    struct wr_http_req *req; /* NULL once the client left */
    struct wr_msb *sb;       /* referenced */
    struct wr_agent *agent;
    char *user;
    struct wr_buf body; /* the (inflated) body the files point into */
    struct upfile files[MAX_FILES];
    size_t nfiles, cur, sent;
    uint32_t req_id;
    bool writing, done;
};

static void upload_free(struct upload *u)
{
    if (u->agent != NULL) {
        struct wr_agent *a = u->agent;
        u->agent = NULL;
        wr_agent_close(a);
    }
    for (size_t i = 0; i < u->nfiles; i++)
        free(u->files[i].path);
    wr_buf_fini(&u->body);
    wr_msb_unref(u->sb);
    free(u->user);
    free(u);
}

static void upload_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct upload *u = data;

    /* Closing the agent calls back a pending write with an error: nothing to answer now. */
    u->req = NULL;
    u->done = true;
    upload_free(u);
}

static void upload_fail(struct upload *u, const struct wr_err *err)
{
    if (u->done || u->req == NULL)
        return;
    u->done = true;
    api_error(u->req, err);
}

static void send_next(struct upload *u);

/* Feed the current file's bytes while the connection's queue has room. */
static void feed(struct upload *u)
{
    struct upfile *f = &u->files[u->cur];

    while (u->sent < f->len && wr_agent_pending(u->agent) < AGENT_HIGH) {
        size_t n = f->len - u->sent > WR_CHUNK_SIZE ? WR_CHUNK_SIZE : f->len - u->sent;
        wr_agent_data(u->agent, u->req_id, f->data + u->sent, n);
        u->sent += n;
    }
    if (u->sent == f->len && u->writing) {
        u->writing = false;
        wr_agent_data_end(u->agent, u->req_id);
    }
}

static void drained(struct wr_agent *a, void *ctx)
{
    struct upload *u = ctx;
    if (!u->done && u->writing)
        feed(u);
}

static void write_reply(void *ctx, const struct wr_frame_hdr *h, const uint8_t *p, bool final,
                        const struct wr_err *err)
{
    struct upload *u = ctx;

    if (u->done)
        return;
    if (!final) {
        if (h->type == WR_MSG_OK && !u->writing && u->sent == 0) {
            u->writing = true;
            feed(u);
        }
        return;
    }
    if (err != NULL) {
        upload_fail(u, err);
        return;
    }
    u->cur++;
    send_next(u);
}

static void send_next(struct upload *u)
{
    struct wr_buf *b;
    struct wr_err err;
    size_t start;

    if (u->cur == u->nfiles) {
        json_t *arr = json_array();
        for (size_t i = 0; i < u->nfiles; i++) {
            const char *slash = strrchr(u->files[i].path, '/');
            json_array_append_new(
                arr, json_pack("{s:o,s:s,s:o}", "name",
                               api_json_text(slash && slash[1] ? slash + 1 : u->files[i].path),
                               "type", "file", "path", api_json_text(u->files[i].path)));
        }
        u->done = true;
        wr_http_respond_json(u->req, 200, arr);
        return;
    }
    u->sent = 0;
    u->writing = false;
    b = wr_agent_begin(u->agent, WR_MSG_FILE_WRITE, &start);
    wr_msg_put_str(b, WR_TAG_PATH, u->files[u->cur].path);
    if (u->user != NULL)
        wr_msg_put_str(b, WR_TAG_USER, u->user);
    wr_msg_put_u64(b, WR_TAG_MODE, 0644);
    wr_msg_put_u64(b, WR_TAG_FLAGS, WR_WRITE_ATOMIC | WR_WRITE_MKDIRS);
    u->req_id = wr_agent_end(u->agent, start, write_reply, u, &err);
    if (u->req_id == 0)
        upload_fail(u, &err);
}

static void agent_ready(struct wr_agent *a, const struct wr_err *err, void *ctx)
{
    struct upload *u = ctx;

    if (u->done)
        return;
    if (err != NULL) {
        upload_fail(u, err);
        return;
    }
    wr_agent_on_drain(a, drained, u);
    send_next(u);
}

static void agent_lost(struct wr_agent *a, const struct wr_err *err, void *ctx)
{
    struct upload *u = ctx;
    struct wr_err e2;

    wr_err_set(&e2, WR_EPROTO, 0, "the sandbox's agent closed the connection%s%s", err ? ": " : "",
               err ? err->msg : "");
    upload_fail(u, &e2);
}

/* ---- the body ----------------------------------------------------------------------------------
 */

/* Inflate a gzip (or zlib) body into out. Returns 0, or -1 with err. */
static int inflate_body(const char *p, size_t n, struct wr_buf *out, struct wr_err *err)
{
    z_stream z = {0};
    int rc;

    if (inflateInit2(&z, 15 + 32) != Z_OK)
        return wr_err_set(err, WR_EINTERNAL, 0, "inflateInit2");
    z.next_in = (Bytef *)p;
    z.avail_in = (uInt)n;
    do {
        wr_buf_reserve(out, 256 * 1024);
        z.next_out = out->data + out->len;
        z.avail_out = 256 * 1024;
        rc = inflate(&z, Z_NO_FLUSH);
        out->len += 256 * 1024 - z.avail_out;
        if (out->len > MAX_UPLOAD) {
            inflateEnd(&z);
            return wr_err_set(err, WR_ETOOBIG, 0, "the upload inflates to more than %u MiB",
                              MAX_UPLOAD >> 20);
        }
    } while (rc == Z_OK);
    inflateEnd(&z);
    if (rc != Z_STREAM_END)
        return wr_err_set(err, WR_EINVAL, 0, "the body is not valid gzip");
    return 0;
}

/* A parameter of a Content-Type or Content-Disposition header (quoted or not), copied into a
 * new string; NULL if absent. */
static char *header_param(const char *h, size_t hlen, const char *name)
{
    size_t nl = strlen(name);

    for (size_t i = 0; i + nl < hlen; i++) {
        if ((i == 0 || h[i - 1] == ';' || h[i - 1] == ' ') && strncasecmp(h + i, name, nl) == 0 &&
            h[i + nl] == '=') {
            const char *v = h + i + nl + 1, *end = h + hlen;
            struct wr_buf out;
            char *s;
            wr_buf_init(&out);
            if (v < end && *v == '"') {
                for (v++; v < end && *v != '"'; v++) {
                    if (*v == '\\' && v + 1 < end)
                        v++;
                    wr_buf_append(&out, v, 1);
                }
            } else {
                for (; v < end && *v != ';' && *v != ' ' && *v != '\r'; v++)
                    wr_buf_append(&out, v, 1);
            }
            s = xstrndup((const char *)out.data, out.len);
            wr_buf_fini(&out);
            return s;
        }
    }
    return NULL;
}

/* Split a multipart/form-data body into files: parts named `file`, to their filename (or, for
 * a single part, to query_path). Returns 0, or -1 with err. */
static int parse_multipart(struct upload *u, const char *ctype, const char *query_path,
                           struct wr_err *err)
{
    _cleanup_free_ char *boundary = header_param(ctype, strlen(ctype), "boundary");
    _cleanup_free_ char *delim = NULL;
    const char *p = (const char *)u->body.data, *end = p + u->body.len;
    size_t dl;

    if (boundary == NULL || boundary[0] == '\0' || strlen(boundary) > 200)
        return wr_err_set(err, WR_EINVAL, 0, "multipart/form-data needs a boundary");
    delim = xasprintf("--%s", boundary);
    dl = strlen(delim);
    p = memmem(p, (size_t)(end - p), delim, dl);
    while (p != NULL) {
        const char *hdr, *hend, *data, *next;
        _cleanup_free_ char *name = NULL, *filename = NULL;
        p += dl;
        if (end - p >= 2 && p[0] == '-' && p[1] == '-')
            break; /* the closing delimiter */
        if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
            return wr_err_set(err, WR_EINVAL, 0, "malformed multipart body");
        hdr = p + 2;
        hend = memmem(hdr, (size_t)(end - hdr), "\r\n\r\n", 4);
        if (hend == NULL)
            return wr_err_set(err, WR_EINVAL, 0, "malformed multipart part headers");
        data = hend + 4;
        next = NULL;
        for (const char *q = data; q < end;) {
            const char *c = memmem(q, (size_t)(end - q), "\r\n", 2);
            if (c == NULL)
                break;
            if ((size_t)(end - c - 2) >= dl && memcmp(c + 2, delim, dl) == 0) {
                next = c;
                break;
            }
            q = c + 2;
        }
        if (next == NULL)
            return wr_err_set(err, WR_EINVAL, 0, "the multipart body is not terminated");
        for (const char *l = hdr; l < hend;) {
            const char *le = memmem(l, (size_t)(hend - l), "\r\n", 2);
            size_t ll = le ? (size_t)(le - l) : (size_t)(hend - l);
            if (ll > 20 && strncasecmp(l, "Content-Disposition:", 20) == 0) {
                name = header_param(l, ll, "name");
                filename = header_param(l, ll, "filename");
            }
            l = le ? le + 2 : hend;
        }
        if (name != NULL && strcmp(name, "file") == 0) {
            if (u->nfiles == MAX_FILES)
                return wr_err_set(err, WR_ETOOBIG, 0, "at most %d files in one upload", MAX_FILES);
            u->files[u->nfiles].path = filename ? xstrdup(filename) : NULL;
            u->files[u->nfiles].data = (const uint8_t *)data;
            u->files[u->nfiles].len = (size_t)(next - data);
            u->nfiles++;
        }
        p = next + 2;
    }
    if (u->nfiles == 0)
        return wr_err_set(err, WR_EINVAL, 0, "the multipart body has no part named `file`");
    for (size_t i = 0; i < u->nfiles; i++) {
        const char *dest = u->nfiles == 1 && query_path ? query_path : u->files[i].path;
        char *abs = e2b_abs_path(u->user, dest);
        if (abs == NULL)
            return wr_err_set(err, WR_EINVAL, 0, "part %zu has no destination path", i + 1);
        free(u->files[i].path);
        u->files[i].path = abs;
    }
    return 0;
}

static void upload_body(struct wr_http_req *req, const char *body, size_t len)
{
    struct upload *u = wr_http_req_data(req);
    const char *ctype = wr_http_req_header(req, "Content-Type");
    const char *enc = wr_http_req_header(req, "Content-Encoding");
    const char *qpath = wr_http_req_query(req, "path");
    struct wr_agent_config ac = {.loop = wr_msb_loop(u->sb),
                                 .fd = -1,
                                 .path = wr_msb_ctl_path(u->sb),
                                 .on_ready = agent_ready,
                                 .on_close = agent_lost,
                                 .ctx = u};
    struct wr_err err;

    if (enc != NULL && strcasecmp(enc, "gzip") == 0) {
        if (inflate_body(body, len, &u->body, &err) < 0)
            goto fail;
    } else if (enc != NULL && strcasecmp(enc, "identity") != 0) {
        wr_err_set(&err, WR_EINVAL, 0, "Content-Encoding `%s` is not supported", enc);
        goto fail;
    } else {
        wr_buf_append(&u->body, body, len);
    }
    if (ctype != NULL && strncasecmp(ctype, "multipart/form-data", 19) == 0) {
        if (parse_multipart(u, ctype, qpath, &err) < 0)
            goto fail;
    } else {
        char *abs = e2b_abs_path(u->user, qpath);
        if (abs == NULL) {
            wr_err_set(&err, WR_EINVAL, 0, "`path` is needed for a raw upload");
            goto fail;
        }
        u->files[0].path = abs;
        u->files[0].data = u->body.data;
        u->files[0].len = u->body.len;
        u->nfiles = 1;
    }
    if (!wr_msb_alive(u->sb) || ac.path == NULL) {
        wr_err_set(&err, WR_ECONFLICT, 0, "the sandbox is not running");
        goto fail;
    }
    if (wr_agent_open(&ac, &u->agent, &err) < 0) {
        u->agent = NULL;
        goto fail;
    }
    return;
fail:
    upload_fail(u, &err);
}

void e2b_files(struct e2b_envd *ev, struct wr_http_req *req)
{
    const char *method = wr_http_req_method(req);
    const char *path = wr_http_req_query(req, "path");
    struct upload *u;

    if (strcmp(method, "GET") == 0) {
        _cleanup_free_ char *abs = e2b_abs_path(ev->user, path);
        if (abs == NULL) {
            wr_http_respond_error(req, 400, "invalid", "`path` is needed");
            return;
        }
        api_file_download(req, ev->sb, abs, ev->user);
        return;
    }
    if (strcmp(method, "POST") != 0) {
        wr_http_resp_header(req, "Allow", "GET, POST");
        wr_http_respond_error(req, 405, "method_not_allowed", "use GET or POST");
        return;
    }
    u = xcalloc(1, sizeof(*u));
    u->req = req;
    u->sb = ev->sb;
    wr_msb_ref(ev->sb);
    u->user = ev->user ? xstrdup(ev->user) : NULL;
    wr_buf_init(&u->body);
    wr_http_req_set_data(req, u, upload_closed);
    wr_http_req_read_body(req, MAX_UPLOAD, upload_body);
}
