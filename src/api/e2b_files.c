/* SPDX-License-Identifier: Apache-2.0 */
/* envd's /files: GET downloads a file; POST uploads one or many, as multipart/form-data (each
 * part named `file`, its filename the destination) or as a raw application/octet-stream body
 * for ?path=, either possibly gzip-encoded (Content-Encoding: gzip) and chunked.
 *
 * An upload streams, as the native PUT does: the body is inflated and parsed as it arrives and
 * each file's bytes go on to warren-init (one file at a time, each written atomically, through a
 * connection of the upload's own, as the user) while the rest is still on its way. Nothing is
 * held beyond a window: the piece of body just read, at most WINDOW inflated bytes, a part's
 * headers, and the agent's queue up to its high-water mark. Whenever the upload cannot go on (the
 * next file's FILE_WRITE not yet acknowledged, the previous one not yet written, the agent's
 * queue full: a slow sandbox), it stops reading the HTTP body, and TCP holds the client back. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "../core/files.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "e2b_int.h"

#define MAX_FILES    1000
#define MAX_INFLATED (1ull << 30) /* what a gzip body may inflate to: past it, 413 */
#define MAX_HEADERS  (16u << 10)  /* of one part */
#define WINDOW       (256u << 10) /* inflated bytes held at a time */

enum mp_state {
    MP_PREAMBLE, /* before the first delimiter */
    MP_DELIM,    /* after a delimiter: CRLF (a part follows) or "--" (the end) */
    MP_HEADERS,  /* a part's headers, up to the empty line */
    MP_DATA,     /* a part's content, up to the next delimiter */
    MP_EPILOGUE, /* after the closing delimiter: ignored */
};

enum file_state {
    F_NONE,    /* no file being written */
    F_OPENING, /* FILE_WRITE sent, its first OK (ready) not yet back */
    F_OPEN,    /* its bytes go out as they come */
    F_CLOSING, /* DATA_END sent, the final OK (written) not yet back */
};

struct upload {
    struct wr_http_req *req; /* NULL once the client left */
    struct wr_fconn *fc;
    char *user;
    char *qpath; /* ?path=: the destination of every file, or NULL (multipart: the filename) */
    bool multipart, gzip;
    /* What arrived and is not consumed yet: `in`, the body as sent (at most one piece of it and
     * a delimiter's length); for gzip, `plain`, what it inflated to (at most WINDOW). */
    struct wr_buf in, plain;
    z_stream z;
    bool z_ready, z_end, z_more;
    uint64_t inflated;
    enum mp_state mp;
    char *delim; /* "\r\n--<boundary>"; the first delimiter may come without its CRLF */
    size_t dl;
    struct wr_buf hdrs; /* the current part's headers */
    bool part_is_file;
    enum file_state fs;
    char *paths[MAX_FILES]; /* written, or being written (the last) */
    size_t nfiles;
    bool blocked;     /* waiting for warren-init (the body is paused meanwhile) */
    bool body_paused; /* wr_http_req_pause_body is in effect */
    bool body_done, done;
};

static void upload_free(struct upload *u)
{
    wr_fconn_close(u->fc);
    for (size_t i = 0; i < u->nfiles; i++)
        free(u->paths[i]);
    if (u->z_ready)
        inflateEnd(&u->z);
    wr_buf_fini(&u->in);
    wr_buf_fini(&u->plain);
    wr_buf_fini(&u->hdrs);
    free(u->delim);
    free(u->qpath);
    free(u->user);
    free(u);
}

static void upload_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct upload *u = data;

    /* Closing the connection abandons a write in progress: warren-init removes its temporary
     * file. */
    u->req = NULL;
    u->done = true;
    upload_free(u);
}

/* Answer an error and stop: the file being written is abandoned (the agent's connection closes),
 * the rest of the body is discarded by the server. */
static int upload_fail(struct upload *u, const struct wr_err *err)
{
    if (u->done || u->req == NULL)
        return -1;
    u->done = true;
    wr_fconn_close(u->fc);
    u->fc = NULL;
    if (u->body_paused) {
        u->body_paused = false;
        wr_http_req_resume_body(u->req);
    }
    api_error(u->req, err);
    return -1;
}

static int upload_failf(struct upload *u, enum wr_err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int upload_failf(struct upload *u, enum wr_err_kind kind, const char *fmt, ...)
{
    struct wr_err err;
    char msg[sizeof(err.msg)];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    wr_err_set(&err, kind, 0, "%s", msg);
    return upload_fail(u, &err);
}

static void upload_answer(struct upload *u)
{
    json_t *arr = json_array();

    for (size_t i = 0; i < u->nfiles; i++) {
        const char *slash = strrchr(u->paths[i], '/');
        json_array_append_new(arr,
                              json_pack("{s:o,s:s,s:o}", "name",
                                        api_json_text(slash && slash[1] ? slash + 1 : u->paths[i]),
                                        "type", "file", "path", api_json_text(u->paths[i])));
    }
    u->done = true;
    wr_http_respond_json(u->req, 200, arr);
}

static void pump(struct upload *u);

/* ---- one file at a time, to warren-init ---------------------------------------------------- */

static void file_opened(void *ctx)
{
    struct upload *u = ctx;

    if (u->done)
        return;
    if (u->fs == F_OPENING)
        u->fs = F_OPEN; /* ready for the data */
    pump(u);
}

static void file_written(void *ctx, const struct wr_err *err)
{
    struct upload *u = ctx;

    if (u->done)
        return;
    if (err != NULL) {
        upload_fail(u, err);
        return;
    }
    u->fs = F_NONE;
    pump(u);
}

/* Start writing the next file, to `dest` as the user sees it. */
static int file_open(struct upload *u, const char *dest)
{
    static const struct wr_file_write_cbs cbs = {file_opened, file_written};
    _cleanup_free_ char *abs = e2b_abs_path(u->user, dest);
    struct wr_file_req r;
    struct wr_err err;

    if (abs == NULL)
        return upload_failf(u, WR_EINVAL,
                            "file %zu of the upload has no destination (a part's "
                            "filename, or ?path=)",
                            u->nfiles + 1);
    for (size_t i = 0; i < u->nfiles; i++)
        if (strcmp(u->paths[i], abs) == 0)
            return upload_failf(u, WR_EINVAL,
                                "`%s` is the destination of two files of the upload: only the "
                                "first was written",
                                abs);
    if (u->nfiles == MAX_FILES)
        return upload_failf(u, WR_ETOOBIG, "at most %d files in one upload", MAX_FILES);
    wr_file_req_init(&r);
    r.path = abs;
    r.user = u->user;
    r.mode = 0644;
    r.has_mode = true;
    r.flags = WR_WRITE_ATOMIC | WR_WRITE_MKDIRS;
    if (wr_fconn_write(u->fc, &r, &cbs, u, &err) < 0)
        return upload_fail(u, &err);
    u->paths[u->nfiles++] = steal_pointer(&abs);
    u->fs = F_OPENING;
    return 0;
}

/* Can the current file take bytes now? If not, the upload waits for warren-init. */
static bool file_ready(struct upload *u)
{
    if (u->fs == F_OPEN && !wr_fconn_full(u->fc))
        return true;
    u->blocked = true;
    return false;
}

static void file_data(struct upload *u, const uint8_t *p, size_t n)
{
    wr_fconn_write_data(u->fc, p, n);
}

static void file_end(struct upload *u)
{
    wr_fconn_write_end(u->fc);
    u->fs = F_CLOSING;
    u->blocked = true;
}

/* ---- the body: gzip ------------------------------------------------------------------------ */

/* Inflate from `in` into `plain` while there is input (or output zlib still holds) and room.
 * Returns 0, or -1 (answered). */
static int inflate_some(struct upload *u)
{
    while (u->plain.len < WINDOW && (u->in.len > 0 || u->z_more)) {
        size_t room = WINDOW - u->plain.len, made;
        int rc;

        if (u->z_end) {
            /* Another gzip member follows (concatenated members are one stream, as for gzip
             * and Go's reader); anything else fails to inflate. */
            inflateReset(&u->z);
            u->z_end = false;
        }
        wr_buf_reserve(&u->plain, room);
        u->z.next_in = u->in.data;
        u->z.avail_in = (uInt)u->in.len;
        u->z.next_out = u->plain.data + u->plain.len;
        u->z.avail_out = (uInt)room;
        rc = inflate(&u->z, Z_NO_FLUSH);
        made = room - u->z.avail_out;
        u->plain.len += made;
        u->inflated += made;
        u->z_more = u->z.avail_out == 0; /* it may hold more */
        wr_buf_consume(&u->in, u->in.len - u->z.avail_in);
        if (rc == Z_STREAM_END)
            u->z_end = true, u->z_more = false;
        else if (rc == Z_BUF_ERROR)
            u->z_more = false; /* no progress without more input */
        else if (rc != Z_OK)
            return upload_failf(u, WR_EINVAL, "the body is not valid gzip");
        if (u->inflated > MAX_INFLATED)
            return upload_failf(u, WR_ETOOBIG, "the upload inflates to more than %llu MiB",
                                MAX_INFLATED >> 20);
        if (rc == Z_BUF_ERROR)
            break;
    }
    return 0;
}

/* ---- the body: raw (one file) --------------------------------------------------------------- */

static int raw_consume(struct upload *u, struct wr_buf *src)
{
    if (u->nfiles == 0)
        return file_open(u, u->qpath);
    if (u->fs == F_NONE)
        return 0; /* written: nothing more to do */
    if (!file_ready(u))
        return 0;
    file_data(u, src->data, src->len);
    wr_buf_consume(src, src->len);
    if (u->body_done && (!u->gzip || (u->in.len == 0 && u->z_end)))
        file_end(u);
    return 0;
}

/* ---- the body: multipart/form-data ------------------------------------------------------- */

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

/* Where the next delimiter starts in p[0..n): its offset, or -1 if there is none, with *keep
 * the offset from which the bytes might still begin one (they wait for more input). A
 * delimiter is `delim` followed by "-" or white space (as Go's mime/multipart, which envd uses,
 * reads them: the boundary followed by anything else is data); at the start of the body (first)
 * its leading CRLF may be missing. */
static ssize_t find_delim(const struct upload *u, const uint8_t *p, size_t n, bool first,
                          size_t *keep)
{
    const char *d = first ? u->delim + 2 : u->delim;
    size_t dl = first ? u->dl - 2 : u->dl;
    const uint8_t *q;

    for (size_t i = 0; i < n; i++) {
        size_t m;
        if ((q = memchr(p + i, d[0], n - i)) == NULL)
            break;
        i = (size_t)(q - p);
        m = n - i < dl ? n - i : dl;
        if (memcmp(p + i, d, m) != 0)
            continue;
        if (m < dl || i + dl == n) {
            *keep = i; /* a delimiter, perhaps: the rest has not arrived */
            return -1;
        }
        switch (p[i + dl]) {
        case '-':
        case ' ':
        case '\t':
        case '\r':
        case '\n':
            return (ssize_t)i;
        default:
            break;
        }
    }
    *keep = n;
    return -1;
}

/* The part's headers are complete: who it is for. Returns 0, or -1 (answered). */
static int part_start(struct upload *u)
{
    const char *h = (const char *)u->hdrs.data, *end = h + u->hdrs.len;
    _cleanup_free_ char *name = NULL, *filename = NULL;

    for (const char *l = h; l < end;) {
        const char *le = memmem(l, (size_t)(end - l), "\r\n", 2);
        size_t ll = le ? (size_t)(le - l) : (size_t)(end - l);
        if (ll > 20 && strncasecmp(l, "Content-Disposition:", 20) == 0) {
            free(name);
            free(filename);
            name = header_param(l, ll, "name");
            filename = header_param(l, ll, "filename");
        }
        l = le ? le + 2 : end;
    }
    wr_buf_consume(&u->hdrs, u->hdrs.len);
    u->part_is_file = name != NULL && strcmp(name, "file") == 0;
    u->mp = MP_DATA;
    if (!u->part_is_file)
        return 0;
    return file_open(u, u->qpath ? u->qpath : filename);
}

/* Consume what can be consumed of src. Returns 0, or -1 (answered). */
static int mp_step(struct upload *u, struct wr_buf *src)
{
    const uint8_t *p = src->data;
    size_t n = src->len, keep;
    ssize_t at;

    if (u->fs == F_CLOSING) {
        u->blocked = true; /* one file at a time: the next waits until this one is written */
        return 0;
    }
    if (n == 0)
        return 0;
    switch (u->mp) {
    case MP_PREAMBLE:
        at = find_delim(u, p, n, true, &keep);
        if (at < 0) {
            wr_buf_consume(src, keep);
            return 0;
        }
        wr_buf_consume(src, (size_t)at + u->dl - 2);
        u->mp = MP_DELIM;
        return 0;
    case MP_DELIM:
        while (n > 0 && (p[0] == ' ' || p[0] == '\t'))
            wr_buf_consume(src, 1), n--; /* transport padding */
        if (n < 2)
            return 0;
        if (p[0] == '-' && p[1] == '-') {
            u->mp = MP_EPILOGUE;
        } else if (p[0] == '\r' && p[1] == '\n') {
            u->mp = MP_HEADERS;
        } else if (p[0] == '\n') {
            wr_buf_consume(src, 1); /* a bare LF, as Go's reader takes it */
            u->mp = MP_HEADERS;
            return 0;
        } else {
            return upload_failf(u, WR_EINVAL, "malformed multipart body");
        }
        wr_buf_consume(src, 2);
        return 0;
    case MP_HEADERS: {
        size_t had = u->hdrs.len, take = n, hend;
        const uint8_t *e;
        if (take > MAX_HEADERS + 4 - had)
            take = MAX_HEADERS + 4 - had;
        wr_buf_append(&u->hdrs, p, take);
        if (u->hdrs.len >= 2 && memcmp(u->hdrs.data, "\r\n", 2) == 0) {
            hend = 0, keep = 2; /* no headers */
        } else if ((e = memmem(u->hdrs.data, u->hdrs.len, "\r\n\r\n", 4)) != NULL) {
            hend = (size_t)(e - u->hdrs.data), keep = hend + 4;
        } else {
            if (u->hdrs.len > MAX_HEADERS)
                return upload_failf(u, WR_EINVAL, "a part's headers are over %u KiB",
                                    MAX_HEADERS >> 10);
            wr_buf_consume(src, take);
            return 0;
        }
        wr_buf_consume(src, keep - had);
        u->hdrs.len = hend;
        return part_start(u);
    }
    case MP_DATA:
        if (u->part_is_file && !file_ready(u))
            return 0;
        at = find_delim(u, p, n, false, &keep);
        if (u->part_is_file)
            file_data(u, p, at < 0 ? keep : (size_t)at);
        if (at < 0) {
            wr_buf_consume(src, keep);
            return 0;
        }
        wr_buf_consume(src, (size_t)at + u->dl);
        u->mp = MP_DELIM;
        if (u->part_is_file)
            file_end(u);
        return 0;
    case MP_EPILOGUE:
        wr_buf_consume(src, n);
        return 0;
    }
    return 0;
}

/* The whole body was consumed: is the upload complete? Returns 0, or -1 (answered). */
static int mp_finish(struct upload *u)
{
    if (u->mp != MP_EPILOGUE)
        return upload_failf(u, WR_EINVAL, "the multipart body is not terminated");
    if (u->nfiles == 0)
        return upload_failf(u, WR_EINVAL, "the multipart body has no part named `file`");
    return 0;
}

/* ---- driving it ------------------------------------------------------------------------------ */

/* Consume what arrived as far as warren-init lets it; then read on, or pause the body. */
static void pump(struct upload *u)
{
    struct wr_buf *src = u->gzip ? &u->plain : &u->in;

    for (;;) {
        size_t before = u->in.len + u->plain.len;
        enum mp_state mp = u->mp;
        enum file_state fs = u->fs;

        if (u->done || u->req == NULL)
            return;
        u->blocked = false;
        if (u->gzip && inflate_some(u) < 0)
            return;
        if ((u->multipart ? mp_step(u, src) : raw_consume(u, src)) < 0)
            return;
        if (u->in.len + u->plain.len == before && u->mp == mp && u->fs == fs)
            break; /* no progress: wait for more body, or for warren-init */
    }
    if (u->blocked) {
        if (!u->body_paused && !u->body_done) {
            u->body_paused = true;
            wr_http_req_pause_body(u->req);
        }
        return;
    }
    if (u->body_paused) {
        u->body_paused = false;
        wr_http_req_resume_body(u->req);
    }
    if (!u->body_done)
        return;
    /* The whole body is in, and what is left of it cannot be consumed. */
    if (u->gzip && (!u->z_end || u->in.len > 0)) {
        upload_failf(u, WR_EINVAL, "the body is not valid gzip: it ends early");
        return;
    }
    if (u->multipart && mp_finish(u) < 0)
        return;
    if (u->fs == F_NONE)
        upload_answer(u);
}

static void body_data(struct wr_http_req *req, const char *p, size_t n)
{
    struct upload *u = wr_http_req_data(req);

    if (u->done)
        return;
    wr_buf_append(&u->in, p, n);
    pump(u);
}

static void body_end(struct wr_http_req *req)
{
    struct upload *u = wr_http_req_data(req);

    u->body_done = true;
    pump(u);
}

static void drained(void *ctx)
{
    pump(ctx);
}

static void conn_ready(void *ctx, const struct wr_err *err)
{
    struct upload *u = ctx;

    if (u->done)
        return;
    if (err != NULL) {
        upload_fail(u, err);
        return;
    }
    wr_http_req_stream_body(u->req, body_data, body_end);
}

static void conn_lost(void *ctx, const struct wr_err *err)
{
    upload_fail(ctx, err);
}

/* What the request says of its body: 0, or -1 with err. */
static int upload_setup(struct upload *u, struct wr_http_req *req, struct wr_err *err)
{
    const char *ctype = wr_http_req_header(req, "Content-Type");
    const char *enc = wr_http_req_header(req, "Content-Encoding");
    const char *qpath = wr_http_req_query(req, "path");

    if (qpath != NULL)
        u->qpath = xstrdup(qpath);
    if (enc != NULL && strcasecmp(enc, "gzip") == 0) {
        u->gzip = true;
        if (inflateInit2(&u->z, 15 + 32) != Z_OK)
            return wr_err_set(err, WR_EINTERNAL, 0, "inflateInit2");
        u->z_ready = true;
    } else if (enc != NULL && strcasecmp(enc, "identity") != 0) {
        return wr_err_set(err, WR_EINVAL, 0, "Content-Encoding `%s` is not supported", enc);
    }
    if (ctype != NULL && strncasecmp(ctype, "multipart/form-data", 19) == 0) {
        _cleanup_free_ char *boundary = header_param(ctype, strlen(ctype), "boundary");
        if (boundary == NULL || boundary[0] == '\0' || strlen(boundary) > 200)
            return wr_err_set(err, WR_EINVAL, 0, "multipart/form-data needs a boundary");
        u->multipart = true;
        u->delim = xasprintf("\r\n--%s", boundary);
        u->dl = strlen(u->delim);
    } else {
        _cleanup_free_ char *abs = e2b_abs_path(u->user, qpath);
        if (abs == NULL)
            return wr_err_set(err, WR_EINVAL, 0, "`path` is needed for a raw upload");
    }
    return 0;
}

static void upload_start(struct e2b_envd *ev, struct wr_http_req *req)
{
    static const struct wr_fconn_cbs cbs = {conn_ready, conn_lost, drained};
    struct upload *u = xcalloc(1, sizeof(*u));
    struct wr_err err;

    u->req = req;
    u->user = ev->user ? xstrdup(ev->user) : NULL;
    wr_buf_init(&u->in);
    wr_buf_init(&u->plain);
    wr_buf_init(&u->hdrs);
    wr_http_req_set_data(req, u, upload_closed);
    if (upload_setup(u, req, &err) < 0) {
        upload_fail(u, &err);
        return;
    }
    if (wr_live_sb_fconn_open(ev->sb, &cbs, u, &u->fc, &err) < 0) {
        u->fc = NULL;
        upload_fail(u, &err);
    }
}

void e2b_files(struct e2b_envd *ev, struct wr_http_req *req)
{
    const char *method = wr_http_req_method(req);

    if (strcmp(method, "GET") == 0) {
        _cleanup_free_ char *abs = e2b_abs_path(ev->user, wr_http_req_query(req, "path"));
        if (abs == NULL) {
            api_fail(req, WR_EINVAL, "`path` is needed");
            return;
        }
        api_file_download(req, ev->sb, abs, ev->user);
        return;
    }
    if (strcmp(method, "POST") != 0) {
        wr_http_resp_header(req, "Allow", "GET, POST");
        api_fail(req, WR_EMETHOD, "use GET or POST");
        return;
    }
    upload_start(ev, req);
}
