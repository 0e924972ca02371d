/* SPDX-License-Identifier: Apache-2.0 */
/* Files: /v1/sandboxes/{id}/files[/stat|/list|/mkdir|/move|/watch]. Paths resolve inside the
 * sandbox (warren-init does every operation from inside it). Downloads, uploads and watches use a
 * connection of their own to warren-init, so a slow client of one cannot hold up the others. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../core/files.h"
#include "../util/log.h"
#include "../util/parse.h"
#include "../util/xalloc.h"
#include "api_int.h"

#define RESP_HIGH (1u << 20)

static const char *type_name(enum wr_file_type t)
{
    switch (t) {
    case WR_FT_FILE:
        return "file";
    case WR_FT_DIR:
        return "dir";
    case WR_FT_SYMLINK:
        return "symlink";
    case WR_FT_OTHER:
        break;
    }
    return "other";
}

/* FileInfo for st found at `path` (the listed directory for list items). Names, paths and link
 * targets are the sandbox's bytes: not UTF-8, they are shown with U+FFFD. */
static json_t *file_json(const struct wr_stat *st, const char *path)
{
    char mode[8], mtime[32], *full;
    const char *name;
    json_t *j;

    snprintf(mode, sizeof(mode), "%04o", st->mode & 07777);
    api_time(st->mtime_ns / 1000000, mtime);
    if (st->name != NULL)
        full = strcmp(path, "/") == 0 ? xasprintf("/%s", st->name)
                                      : xasprintf("%s/%s", path, st->name);
    else
        full = xstrdup(path);
    name = strrchr(full, '/');
    name = name && name[1] ? name + 1 : full;
    j = json_pack("{s:o,s:o,s:s,s:I,s:s,s:s,s:I,s:I,s:o}", "name", api_json_text(name), "path",
                  api_json_text(full), "type", type_name(st->type), "size", (json_int_t)st->size,
                  "mode", mode, "mtime", mtime, "uid", (json_int_t)st->uid, "gid",
                  (json_int_t)st->gid, "link", st->link ? api_json_text(st->link) : json_null());
    free(full);
    return j;
}

/* p in the root of the Compose service `service` (NULL: the sandbox's own root): its path in
 * the sandbox, in buf. NULL with an answer for a bad name or a path too long. */
static const char *in_service(struct wr_http_req *req, const char *service, const char *p,
                              char *buf, size_t size)
{
    if (service == NULL)
        return p;
    if (!api_service_name_ok(service)) {
        api_fail(req, WR_EINVAL, "`service` must be a service's name");
        return NULL;
    }
    if ((size_t)snprintf(buf, size, "%s/%s%s", WR_SERVICES_DIR, service, p) >= size ||
        strlen(buf) >= WR_MAX_PATH) {
        api_fail(req, WR_EINVAL, "the path is too long");
        return NULL;
    }
    return buf;
}

/* A path parameter: absolute, no NUL, bounded; with a `service` parameter, in that Compose
 * service's root (the answer is in a buffer valid until the next call: every route takes a
 * copy before it returns). NULL with an answer if not. */
static const char *path_param(struct wr_http_req *req, const char *name)
{
    static char buf[WR_MAX_PATH];
    const char *p = wr_http_req_query(req, name);

    if (p == NULL || p[0] != '/' || strlen(p) >= WR_MAX_PATH) {
        api_fail(req, WR_EINVAL, "`%s` must be an absolute path", name);
        return NULL;
    }
    return in_service(req, wr_http_req_query(req, "service"), p, buf, sizeof(buf));
}

static bool bool_param(struct wr_http_req *req, const char *name, bool dflt)
{
    const char *v = wr_http_req_query(req, name);
    if (v == NULL)
        return dflt;
    return strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcmp(v, "yes") == 0;
}

/* ---- small operations on the control connection ---------------------------------------------- */

struct op_st {
    struct wr_http_req *req; /* NULL once closed */
    char *path;
    json_t *entries; /* list */
    int kind;        /* what success looks like */
};

enum { OP_EMPTY, OP_STAT, OP_LIST, OP_CREATED };

static void op_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct op_st *o = data;
    o->req = NULL;
}

static struct op_st *op_new(struct wr_http_req *req, const char *path, int kind)
{
    struct op_st *o = xcalloc(1, sizeof(*o));

    o->req = req;
    o->path = xstrdup(path);
    o->kind = kind;
    o->entries = kind == OP_LIST ? json_array() : NULL;
    return o;
}

static void op_free(struct op_st *o)
{
    json_decref(o->entries);
    free(o->path);
    free(o);
}

/* The operation ended: answer (unless the client left) and free o. */
static void op_done(void *ctx, const struct wr_err *err)
{
    struct op_st *o = ctx;

    if (o->req != NULL) {
        wr_http_req_set_data(o->req, NULL, NULL);
        if (err != NULL)
            api_error(o->req, err);
        else if (o->kind == OP_STAT && o->entries != NULL)
            wr_http_respond_json(o->req, 200, json_incref(o->entries));
        else if (o->kind == OP_LIST)
            wr_http_respond_json(o->req, 200, json_pack("{s:O}", "entries", o->entries));
        else if (o->kind == OP_CREATED)
            wr_http_respond(o->req, 201, NULL, NULL, 0);
        else
            wr_http_respond(o->req, 204, NULL, NULL, 0);
    }
    op_free(o);
}

static void op_entry(void *ctx, const struct wr_stat *st)
{
    struct op_st *o = ctx;

    if (o->req != NULL && json_array_size(o->entries) < 100000)
        json_array_append_new(o->entries, file_json(st, o->path));
}

static void op_stat(void *ctx, const struct wr_stat *st, const struct wr_err *err)
{
    struct op_st *o = ctx;

    if (st != NULL && o->req != NULL)
        o->entries = file_json(st, o->path);
    op_done(o, err);
}

/* rc: what the core call that started o returned; -1 answers its error. */
static void op_started(struct wr_http_req *req, struct op_st *o, int rc, const struct wr_err *err)
{
    if (rc < 0) {
        api_error(req, err);
        op_free(o);
        return;
    }
    wr_http_req_set_data(req, o, op_closed);
}

static void file_remove(struct wr_http_req *req, struct wr_live_sb *sb, const char *path)
{
    struct op_st *o = op_new(req, path, OP_EMPTY);
    struct wr_file_req r;
    struct wr_err err;

    wr_file_req_init(&r);
    r.path = (char *)path;
    r.user = (char *)wr_http_req_query(req, "user");
    r.recursive = bool_param(req, "recursive", false);
    op_started(req, o, wr_live_sb_file_remove(sb, &r, op_done, o, &err), &err);
}

static void file_stat_list(struct wr_http_req *req, struct wr_live_sb *sb, const char *path,
                           bool list)
{
    struct op_st *o = op_new(req, path, list ? OP_LIST : OP_STAT);
    const char *d = wr_http_req_query(req, "depth");
    struct wr_file_req r;
    struct wr_err err;

    wr_file_req_init(&r);
    r.path = (char *)path;
    r.user = (char *)wr_http_req_query(req, "user");
    if (!list) {
        r.nofollow = true;
        op_started(req, o, wr_live_sb_file_stat(sb, &r, op_stat, o, &err), &err);
        return;
    }
    r.depth = 1;
    if (d != NULL && (wr_parse_uint(d, 16, &r.depth, &err) < 0 || r.depth == 0))
        r.depth = 1;
    op_started(req, o, wr_live_sb_file_list(sb, &r, op_entry, op_done, o, &err), &err);
}

/* mkdir and move take JSON bodies. */
struct body_op {
    struct wr_live_sb *sb;
    bool move;
};

static void body_op_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct body_op *b = data;
    wr_live_sb_unref(b->sb);
    free(b);
}

static void body_op(struct wr_http_req *req, const char *body, size_t len)
{
    struct body_op *bo = wr_http_req_data(req);
    struct wr_live_sb *sb = bo->sb;
    bool move = bo->move;
    const char *path, *user, *to = NULL, *service;
    char pbuf[WR_MAX_PATH], tbuf[WR_MAX_PATH];
    struct wr_file_req r;
    struct wr_err err;
    struct op_st *o;
    json_t *j, *v;
    int rc;

    wr_live_sb_ref(sb);
    wr_http_req_set_data(req, NULL, NULL);
    body_op_closed(req, bo, false);
    j = api_parse_object(req, body, len);
    if (j == NULL)
        goto out;
    path = json_string_value(json_object_get(j, move ? "from" : "path"));
    user = json_string_value(json_object_get(j, "user"));
    if (move)
        to = json_string_value(json_object_get(j, "to"));
    if (path == NULL || path[0] != '/' || (move && (to == NULL || to[0] != '/'))) {
        api_fail(req, WR_EINVAL,
                 move ? "`from` and `to` must be absolute paths"
                      : "`path` must be an absolute path");
        goto out;
    }
    service = json_string_value(json_object_get(j, "service"));
    if (service == NULL)
        service = wr_http_req_query(req, "service");
    if ((path = in_service(req, service, path, pbuf, sizeof(pbuf))) == NULL ||
        (move && (to = in_service(req, service, to, tbuf, sizeof(tbuf))) == NULL))
        goto out;
    if (!wr_live_sb_alive(sb)) {
        api_fail(req, WR_ECONFLICT, "the sandbox is not running");
        goto out;
    }
    wr_file_req_init(&r);
    r.path = (char *)path;
    /* the body's user, else the query's */
    r.user = (char *)(user != NULL ? user : wr_http_req_query(req, "user"));
    o = op_new(req, path, move ? OP_EMPTY : OP_CREATED);
    if (move) {
        r.dest = (char *)to;
        rc = wr_live_sb_file_rename(sb, &r, op_done, o, &err);
    } else {
        uint64_t mode = 0755;
        v = json_object_get(j, "parents");
        r.parents = v == NULL || json_is_true(v);
        if (json_is_string(json_object_get(j, "mode"))) {
            char *end;
            mode = strtoull(json_string_value(json_object_get(j, "mode")), &end, 8);
            if (*end != '\0' || mode > 07777)
                mode = 0755;
        }
        r.mode = (uint32_t)mode;
        r.has_mode = true;
        rc = wr_live_sb_file_mkdir(sb, &r, op_done, o, &err);
    }
    op_started(req, o, rc, &err);
out:
    json_decref(j);
    wr_live_sb_unref(sb);
}

/* ---- streams on a connection of their own ---------------------------------------------------- */

enum xfer_kind { XFER_READ, XFER_WRITE, XFER_WATCH };

struct xfer {
    enum xfer_kind kind;
    struct wr_http_req *req; /* NULL once the HTTP side is over */
    struct wr_fconn *fc;
    char *path, *user;
    /* read */
    uint64_t offset;
    int64_t length; /* -1: to the end */
    int64_t suffix; /* bytes=-N */
    bool ranged, started;
    /* write */
    uint64_t mode;
    bool parents, ready, body_done, body_paused, write_failed;
    /* watch */
    bool recursive;
    bool finished;
    /* The native routes: the bytes moved, charged to the caller's `bytes` bucket at the end */
    struct wr_api *api;
    struct wr_caller who;
    uint64_t moved;
};

static void xfer_free(struct xfer *x)
{
    /* The one byte the admission took is in moved. */
    if (x->api != NULL && x->moved > 1)
        api_limits_charge(x->api, &x->who, WR_POL_BYTES, x->moved - 1);
    wr_fconn_close(x->fc);
    free(x->path);
    free(x->user);
    free(x);
}

/* The HTTP request is over (answered, or the client left). */
static void xfer_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct xfer *x = data;
    x->req = NULL;
    xfer_free(x);
}

/* Answer with an error (if the response has not started) and stop. */
static void xfer_fail(struct xfer *x, const struct wr_err *err)
{
    if (x->req == NULL || x->finished)
        return;
    x->finished = true;
    if (!wr_http_resp_started(x->req))
        api_error(x->req, err);
    else
        wr_http_resp_end(x->req); /* the client sees a short body */
}

/* The request of x on its path, as its user. */
static void xfer_file_req(const struct xfer *x, struct wr_file_req *r)
{
    wr_file_req_init(r);
    r->path = x->path;
    r->user = x->user;
}

static void read_drained(struct wr_http_req *req)
{
    struct xfer *x = wr_http_req_data(req);
    if (x != NULL && x->fc != NULL)
        wr_fconn_resume(x->fc);
}

static void read_stat(void *ctx, const struct wr_stat *st)
{
    struct xfer *x = ctx;
    uint64_t size = st->size, first, last;

    if (x->req == NULL || x->finished || x->started)
        return;
    if (!x->ranged) {
        x->started = true;
        wr_http_resp_start(x->req, 200, "application/octet-stream", (int64_t)size);
        if (size == 0) {
            x->finished = true;
            wr_http_resp_end(x->req);
        }
        return;
    }
    first = x->offset;
    last = x->length < 0 ? size - 1 : x->offset + (uint64_t)x->length - 1;
    if (size == 0 || first >= size) {
        char cr[64];
        snprintf(cr, sizeof(cr), "bytes */%" PRIu64, size);
        wr_http_resp_header(x->req, "Content-Range", cr);
        wr_http_respond_error(x->req, 416, wr_err_kind_name(WR_EINVAL),
                              "the range is beyond the file (%" PRIu64 " bytes)", size);
        x->finished = true;
        return;
    }
    if (last >= size)
        last = size - 1;
    {
        char cr[96];
        snprintf(cr, sizeof(cr), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, first, last, size);
        wr_http_resp_header(x->req, "Content-Range", cr);
    }
    x->started = true;
    wr_http_resp_start(x->req, 206, "application/octet-stream", (int64_t)(last - first + 1));
}

static void read_data(void *ctx, const uint8_t *p, size_t n)
{
    struct xfer *x = ctx;

    if (x->req == NULL || x->finished || !x->started)
        return;
    x->moved += n;
    if (wr_http_resp_write(x->req, p, n) > RESP_HIGH) {
        wr_fconn_pause(x->fc);
        wr_http_resp_on_drain(x->req, read_drained);
    }
}

static void read_done(void *ctx, const struct wr_err *err)
{
    struct xfer *x = ctx;

    if (x->req == NULL || x->finished)
        return;
    if (err != NULL) {
        xfer_fail(x, err);
        return;
    }
    if (!x->started) {
        /* Nothing was sent: a ranged read past the end. */
        wr_http_respond_error(x->req, 416, wr_err_kind_name(WR_EINVAL),
                              "the range is beyond the file");
        x->finished = true;
        return;
    }
    x->finished = true;
    wr_http_resp_end(x->req);
}

/* The upload's body, piece by piece, to warren-init with backpressure both ways. */
static void xfer_drained(void *ctx)
{
    struct xfer *x = ctx;
    if (x->req != NULL && x->body_paused) {
        x->body_paused = false;
        wr_http_req_resume_body(x->req);
    }
}

static void write_body_data(struct wr_http_req *req, const char *p, size_t n)
{
    struct xfer *x = wr_http_req_data(req);

    if (x->write_failed || x->fc == NULL)
        return;
    x->moved += n;
    wr_fconn_write_data(x->fc, p, n);
    if (wr_fconn_full(x->fc) && !x->body_paused) {
        x->body_paused = true;
        wr_http_req_pause_body(req);
    }
}

static void write_body_end(struct wr_http_req *req)
{
    struct xfer *x = wr_http_req_data(req);

    x->body_done = true;
    if (!x->write_failed && x->fc != NULL)
        wr_fconn_write_end(x->fc);
}

static void write_stat(void *ctx, const struct wr_stat *st, const struct wr_err *err)
{
    struct xfer *x = ctx;

    if (x->req == NULL || x->finished)
        return;
    if (err != NULL) {
        xfer_fail(x, err);
        return;
    }
    x->finished = true;
    wr_http_respond_json(x->req, 201, file_json(st, x->path));
}

static void write_open(void *ctx)
{
    struct xfer *x = ctx;

    /* warren-init is ready for the data. */
    if (x->req != NULL && !x->ready) {
        x->ready = true;
        wr_http_req_stream_body(x->req, write_body_data, write_body_end);
    }
}

static void write_done(void *ctx, const struct wr_err *err)
{
    struct xfer *x = ctx;
    struct wr_file_req r;
    struct wr_err e2;

    if (x->req == NULL)
        return;
    if (err != NULL) {
        x->write_failed = true;
        if (x->body_paused) {
            x->body_paused = false;
            wr_http_req_resume_body(x->req); /* drain and drop the rest */
        }
        xfer_fail(x, err);
        return;
    }
    /* Written. Answer with the file's stat. */
    xfer_file_req(x, &r);
    if (wr_fconn_stat(x->fc, &r, write_stat, x, &e2) < 0)
        xfer_fail(x, &e2);
}

static void watch_on(void *ctx)
{
    struct xfer *x = ctx;

    if (x->req == NULL || x->finished || x->started)
        return;
    /* The watch is set: stream its events from now on. */
    x->started = true;
    wr_http_resp_start(x->req, 200, "application/x-ndjson", -1);
}

static void watch_event(void *ctx, const struct wr_watch_event *ev)
{
    static const char *const names[] = {"", "create", "write", "remove", "rename", "chmod"};
    struct xfer *x = ctx;
    json_t *o;
    char *s;

    if (x->req == NULL || x->finished)
        return;
    o = json_pack("{s:s,s:o}", "type", ev->op >= 1 && ev->op <= 5 ? names[ev->op] : "other", "name",
                  api_json_text(ev->name));
    s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (s != NULL) {
        wr_http_resp_write(x->req, s, strlen(s));
        wr_http_resp_write(x->req, "\n", 1);
    }
    free(s);
    json_decref(o);
}

static void watch_done(void *ctx, const struct wr_err *err)
{
    struct xfer *x = ctx;

    if (x->req == NULL || x->finished)
        return;
    if (err != NULL) {
        xfer_fail(x, err);
        return;
    }
    x->finished = true;
    wr_http_resp_end(x->req);
}

/* Send x's request on its connection. */
static void xfer_send(struct xfer *x)
{
    static const struct wr_file_read_cbs rd = {read_stat, read_data, read_done};
    static const struct wr_file_write_cbs wr = {write_open, write_done};
    static const struct wr_file_watch_cbs wa = {watch_on, watch_event, watch_done};
    struct wr_file_req r;
    struct wr_err err;
    int rc;

    xfer_file_req(x, &r);
    if (x->kind == XFER_READ) {
        r.offset = x->offset;
        r.length = x->length < 0 ? UINT64_MAX : (uint64_t)x->length;
        rc = wr_fconn_read(x->fc, &r, &rd, x, &err);
    } else if (x->kind == XFER_WRITE) {
        r.mode = (uint32_t)x->mode;
        r.has_mode = true;
        r.flags = WR_WRITE_ATOMIC | (x->parents ? WR_WRITE_MKDIRS : 0);
        rc = wr_fconn_write(x->fc, &r, &wr, x, &err);
    } else {
        r.recursive = x->recursive;
        rc = wr_fconn_watch(x->fc, &r, &wa, x, &err);
    }
    if (rc < 0)
        xfer_fail(x, &err);
}

/* A suffix range needs the size first. */
static void suffix_stat(void *ctx, const struct wr_stat *st, const struct wr_err *err)
{
    struct xfer *x = ctx;
    uint64_t n;

    if (x->req == NULL || x->finished)
        return;
    if (err != NULL) {
        xfer_fail(x, err);
        return;
    }
    n = (uint64_t)x->suffix < st->size ? (uint64_t)x->suffix : st->size;
    x->offset = st->size - n;
    x->length = (int64_t)n;
    x->suffix = 0;
    xfer_send(x);
}

static void xfer_ready(void *ctx, const struct wr_err *err)
{
    struct xfer *x = ctx;
    struct wr_file_req r;
    struct wr_err e2;

    if (x->req == NULL)
        return;
    if (err != NULL) {
        xfer_fail(x, err);
        return;
    }
    if (x->suffix == 0) {
        xfer_send(x);
        return;
    }
    xfer_file_req(x, &r);
    if (wr_fconn_stat(x->fc, &r, suffix_stat, x, &e2) < 0)
        xfer_fail(x, &e2);
}

static void xfer_lost(void *ctx, const struct wr_err *err)
{
    struct xfer *x = ctx;

    if (x->req == NULL || x->finished)
        return;
    xfer_fail(x, err);
}

static void xfer_start(struct wr_http_req *req, struct wr_live_sb *sb, struct xfer *x,
                       const char *user)
{
    static const struct wr_fconn_cbs cbs = {xfer_ready, xfer_lost, xfer_drained};
    struct wr_err err;

    x->req = req;
    if (user != NULL)
        x->user = xstrdup(user);
    wr_http_req_set_data(req, x, xfer_closed);
    if (wr_live_sb_fconn_open(sb, &cbs, x, &x->fc, &err) < 0) {
        x->fc = NULL;
        xfer_fail(x, &err);
    }
}

/* "bytes=a-b", "bytes=a-", "bytes=-n" (one range only). */
static int parse_range(const char *h, struct xfer *x)
{
    unsigned long long a = 0, b = 0;
    char *end;

    if (strncmp(h, "bytes=", 6) != 0 || strchr(h, ',') != NULL)
        return -1;
    h += 6;
    if (*h == '-') {
        b = strtoull(h + 1, &end, 10);
        if (end == h + 1 || *end != '\0' || b == 0)
            return -1;
        x->suffix = (int64_t)b;
        return 0;
    }
    a = strtoull(h, &end, 10);
    if (end == h || *end != '-')
        return -1;
    h = end + 1;
    x->offset = a;
    x->length = -1;
    if (*h != '\0') {
        b = strtoull(h, &end, 10);
        if (*end != '\0' || b < a)
            return -1;
        x->length = (int64_t)(b - a + 1);
    }
    return 0;
}

void api_file_download(struct wr_http_req *req, struct wr_live_sb *sb, const char *path,
                       const char *user)
{
    struct xfer *x = xcalloc(1, sizeof(*x));

    x->kind = XFER_READ;
    x->path = xstrdup(path);
    x->length = -1;
    xfer_start(req, sb, x, user);
}

/* ---- the routes ---------------------------------------------------------------------------- */

void api_file_read(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    const char *path, *range;
    struct xfer *x;

    if ((path = path_param(req, "path")) == NULL)
        return;
    /* A transfer is let in while the team's bytes bucket is not empty; its bytes are charged
     * as it ends (docs/operations.md). */
    if (api_limits_take(c->api, req, &c->who, WR_POL_BYTES, 1) < 0)
        return;
    range = wr_http_req_header(req, "Range");
    x = xcalloc(1, sizeof(*x));
    x->api = c->api;
    x->who = c->who;
    x->kind = XFER_READ;
    x->path = xstrdup(path);
    x->length = -1;
    if (range != NULL) {
        if (parse_range(range, x) < 0) {
            free(x->path);
            free(x);
            wr_http_respond_error(req, 416, wr_err_kind_name(WR_EINVAL), "unsupported Range `%s`",
                                  range);
            return;
        }
        x->ranged = true;
    }
    xfer_start(req, c->sb, x, wr_http_req_query(req, "user"));
}

void api_file_write(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    const char *path, *m;
    char *end = NULL;
    struct xfer *x;

    if ((path = path_param(req, "path")) == NULL)
        return;
    if (api_limits_take(c->api, req, &c->who, WR_POL_BYTES, 1) < 0)
        return;
    m = wr_http_req_query(req, "mode");
    x = xcalloc(1, sizeof(*x));
    x->api = c->api;
    x->who = c->who;
    x->kind = XFER_WRITE;
    x->path = xstrdup(path);
    x->mode = 0644;
    x->parents = bool_param(req, "parents", true);
    if (m != NULL) {
        x->mode = strtoull(m, &end, 8);
        if (*m == '\0' || *end != '\0' || x->mode > 07777) {
            free(x->path);
            free(x);
            api_fail(req, WR_EINVAL, "`mode` must be octal, e.g. 0644");
            return;
        }
    }
    xfer_start(req, c->sb, x, wr_http_req_query(req, "user"));
}

void api_file_remove(struct api_call *c)
{
    const char *path = path_param(c->req, "path");

    if (path != NULL)
        file_remove(c->req, c->sb, path);
}

void api_file_stat(struct api_call *c)
{
    const char *path = path_param(c->req, "path");

    if (path != NULL)
        file_stat_list(c->req, c->sb, path, false);
}

void api_file_list(struct api_call *c)
{
    const char *path = path_param(c->req, "path");

    if (path != NULL)
        file_stat_list(c->req, c->sb, path, true);
}

void api_file_watch(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    const char *path;
    struct xfer *x;

    if ((path = path_param(req, "path")) == NULL)
        return;
    x = xcalloc(1, sizeof(*x));
    x->kind = XFER_WATCH;
    x->path = xstrdup(path);
    x->recursive = bool_param(req, "recursive", false);
    xfer_start(req, c->sb, x, wr_http_req_query(req, "user"));
}

/* mkdir and move: the body the router read goes to body_op. */
static void path_op(struct api_call *c, bool move)
{
    struct body_op *bo = xcalloc(1, sizeof(*bo));

    bo->sb = c->sb;
    wr_live_sb_ref(c->sb);
    bo->move = move;
    wr_http_req_set_data(c->req, bo, body_op_closed);
    body_op(c->req, c->body, c->len);
}

void api_file_mkdir(struct api_call *c)
{
    path_op(c, false);
}

void api_file_move(struct api_call *c)
{
    path_op(c, true);
}
