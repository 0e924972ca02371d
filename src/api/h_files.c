/* SPDX-License-Identifier: Apache-2.0 */
/* Files: /v1/sandboxes/{id}/files[/stat|/list|/mkdir|/move|/watch]. Paths resolve inside the
 * sandbox (warren-init does every operation from inside it). Downloads, uploads and watches use a
 * connection of their own to warren-init, so a slow client of one cannot hold up the others. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../util/log.h"
#include "../util/parse.h"
#include "../util/xalloc.h"
#include "api_int.h"

#define RESP_HIGH  (1u << 20)
#define AGENT_HIGH (1u << 20)

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

/* A path parameter: absolute, no NUL, bounded. NULL with an answer if not. */
static const char *path_param(struct wr_http_req *req, const char *name)
{
    const char *p = wr_http_req_query(req, name);

    if (p == NULL || p[0] != '/' || strlen(p) >= WR_MAX_PATH) {
        wr_http_respond_error(req, 400, "invalid", "`%s` must be an absolute path", name);
        return NULL;
    }
    return p;
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

static void op_reply(void *ctx, const struct wr_frame_hdr *h, const uint8_t *p, bool final,
                     const struct wr_err *err)
{
    struct op_st *o = ctx;
    struct wr_stat st;
    struct wr_err derr;

    /* FILE_STAT's answer is one STAT frame (final); FILE_LIST's are STATs then OK. */
    if (err == NULL && h != NULL && h->type == WR_MSG_STAT) {
        if (o->req == NULL || wr_stat_decode(p, h->len, &st, &derr) < 0)
            goto done;
        if (o->kind == OP_STAT && st.name == NULL) {
            json_decref(o->entries);
            o->entries = file_json(&st, o->path);
        } else if (o->kind == OP_LIST && json_array_size(o->entries) < 100000) {
            json_array_append_new(o->entries, file_json(&st, o->path));
        }
        wr_stat_fini(&st);
    done:
        if (!final)
            return;
    }
    if (!final)
        return;
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
    json_decref(o->entries);
    free(o->path);
    free(o);
}

/* Start a request on the control connection; the caller adds fields to *b, then op_send. */
static struct op_st *op_begin(struct wr_http_req *req, struct wr_msb *sb, uint16_t type,
                              const char *path, int kind, struct wr_buf **b, size_t *start)
{
    struct op_st *o;

    if (wr_msb_agent(sb) == NULL || !wr_agent_is_ready(wr_msb_agent(sb))) {
        wr_http_respond_error(req, 409, "conflict", "the sandbox's agent is not connected");
        return NULL;
    }
    o = xcalloc(1, sizeof(*o));
    o->req = req;
    o->path = xstrdup(path);
    o->kind = kind;
    o->entries = kind == OP_LIST ? json_array() : NULL;
    *b = wr_agent_begin(wr_msb_agent(sb), type, start);
    wr_msg_put_str(*b, WR_TAG_PATH, path);
    if (wr_http_req_query(req, "user") != NULL)
        wr_msg_put_str(*b, WR_TAG_USER, wr_http_req_query(req, "user"));
    return o;
}

static void op_send(struct wr_http_req *req, struct wr_msb *sb, struct op_st *o, size_t start)
{
    struct wr_err err;

    wr_http_req_set_data(req, o, op_closed);
    if (wr_agent_end(wr_msb_agent(sb), start, op_reply, o, &err) == 0) {
        wr_http_req_set_data(req, NULL, NULL);
        api_error(req, &err);
        json_decref(o->entries);
        free(o->path);
        free(o);
    }
}

/* mkdir and move take JSON bodies. */
struct body_op {
    struct wr_msb *sb;
    bool move;
};

static void body_op_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct body_op *b = data;
    wr_msb_unref(b->sb);
    free(b);
}

static void body_op(struct wr_http_req *req, const char *body, size_t len)
{
    struct body_op *bo = wr_http_req_data(req);
    struct wr_msb *sb = bo->sb;
    bool move = bo->move;
    const char *path, *user, *to = NULL;
    struct op_st *o;
    struct wr_buf *b;
    size_t start;
    json_t *j, *v;

    wr_msb_ref(sb);
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
        wr_http_respond_error(req, 400, "invalid",
                              move ? "`from` and `to` must be absolute paths"
                                   : "`path` must be an absolute path");
        goto out;
    }
    if (!wr_msb_alive(sb)) {
        wr_http_respond_error(req, 409, "conflict", "the sandbox is not running");
        goto out;
    }
    o = op_begin(req, sb, move ? WR_MSG_FILE_RENAME : WR_MSG_FILE_MKDIR, path,
                 move ? OP_EMPTY : OP_CREATED, &b, &start);
    if (o == NULL)
        goto out;
    if (user != NULL)
        wr_msg_put_str(b, WR_TAG_USER, user);
    if (move) {
        wr_msg_put_str(b, WR_TAG_DEST, to);
    } else {
        uint64_t mode = 0755;
        struct wr_err perr;
        v = json_object_get(j, "parents");
        wr_msg_put_u64(b, WR_TAG_PARENTS, v == NULL || json_is_true(v));
        if (json_is_string(json_object_get(j, "mode"))) {
            char *end;
            mode = strtoull(json_string_value(json_object_get(j, "mode")), &end, 8);
            if (*end != '\0' || mode > 07777) {
                (void)perr;
                mode = 0755;
            }
        }
        wr_msg_put_u64(b, WR_TAG_MODE, mode);
    }
    op_send(req, sb, o, start);
out:
    json_decref(j);
    wr_msb_unref(sb);
}

/* ---- streams on a connection of their own ---------------------------------------------------- */

enum xfer_kind { XFER_READ, XFER_WRITE, XFER_WATCH };

struct xfer {
    enum xfer_kind kind;
    struct wr_http_req *req; /* NULL once the HTTP side is over */
    struct wr_msb *sb;
    struct wr_agent *agent;
    uint32_t req_id;
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
};

static void xfer_free(struct xfer *x)
{
    if (x->agent != NULL) {
        struct wr_agent *a = x->agent;
        x->agent = NULL;
        wr_agent_close(a);
    }
    wr_msb_unref(x->sb);
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

static void read_drained(struct wr_http_req *req)
{
    struct xfer *x = wr_http_req_data(req);
    if (x != NULL && x->agent != NULL)
        wr_agent_resume(x->agent);
}

static void read_reply(void *ctx, const struct wr_frame_hdr *h, const uint8_t *p, bool final,
                       const struct wr_err *err)
{
    struct xfer *x = ctx;
    struct wr_stat st;
    struct wr_err derr;

    if (x->req == NULL || x->finished)
        return;
    if (final) {
        if (err != NULL) {
            xfer_fail(x, err);
            return;
        }
        if (!x->started) {
            /* Nothing was sent: a ranged read past the end. */
            wr_http_respond_error(x->req, 416, "invalid", "the range is beyond the file");
            x->finished = true;
            return;
        }
        x->finished = true;
        wr_http_resp_end(x->req);
        return;
    }
    if (h->type == WR_MSG_STAT && !x->started) {
        uint64_t size, first, last;
        if (wr_stat_decode(p, h->len, &st, &derr) < 0) {
            xfer_fail(x, &derr);
            return;
        }
        size = st.size;
        wr_stat_fini(&st);
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
            wr_http_respond_error(x->req, 416, "invalid",
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
        return;
    }
    if (h->type == WR_MSG_DATA && x->started) {
        if (wr_http_resp_write(x->req, p, h->len) > RESP_HIGH) {
            wr_agent_pause(x->agent);
            wr_http_resp_on_drain(x->req, read_drained);
        }
    }
}

/* The upload's body, piece by piece, to warren-init with backpressure both ways. */
static void write_agent_drained(struct wr_agent *a, void *ctx)
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

    if (x->write_failed || x->agent == NULL)
        return;
    for (size_t off = 0; off < n; off += WR_CHUNK_SIZE)
        wr_agent_data(x->agent, x->req_id, p + off,
                      n - off > WR_CHUNK_SIZE ? WR_CHUNK_SIZE : n - off);
    if (wr_agent_pending(x->agent) > AGENT_HIGH && !x->body_paused) {
        x->body_paused = true;
        wr_http_req_pause_body(req);
    }
}

static void write_body_end(struct wr_http_req *req)
{
    struct xfer *x = wr_http_req_data(req);

    x->body_done = true;
    if (!x->write_failed && x->agent != NULL)
        wr_agent_data_end(x->agent, x->req_id);
}

static void write_stat_reply(void *ctx, const struct wr_frame_hdr *h, const uint8_t *p, bool final,
                             const struct wr_err *err)
{
    struct xfer *x = ctx;
    struct wr_stat st;
    struct wr_err derr;

    if (x->req == NULL || x->finished)
        return;
    if (err == NULL && h != NULL && h->type == WR_MSG_STAT &&
        wr_stat_decode(p, h->len, &st, &derr) == 0) {
        x->finished = true;
        wr_http_respond_json(x->req, 201, file_json(&st, x->path));
        wr_stat_fini(&st);
        return;
    }
    if (final && !x->finished) {
        struct wr_err e2;
        if (err == NULL)
            wr_err_set(&e2, WR_EPROTO, 0, "no stat of the written file");
        xfer_fail(x, err ? err : &e2);
    }
}

static void write_reply(void *ctx, const struct wr_frame_hdr *h, const uint8_t *p, bool final,
                        const struct wr_err *err)
{
    struct xfer *x = ctx;
    struct wr_buf *b;
    struct wr_err e2;
    size_t start;

    if (x->req == NULL)
        return;
    if (!final) {
        /* The first OK: warren-init is ready for the data. */
        if (h->type == WR_MSG_OK && !x->ready) {
            x->ready = true;
            wr_http_req_stream_body(x->req, write_body_data, write_body_end);
        }
        return;
    }
    if (err != NULL) {
        x->write_failed = true;
        if (x->body_paused) {
            x->body_paused = false;
            wr_http_req_resume_body(x->req); /* drain and drop the rest */
        }
        xfer_fail(x, err);
        return;
    }
    /* The final OK: written. Answer with the file's stat. */
    b = wr_agent_begin(x->agent, WR_MSG_FILE_STAT, &start);
    wr_msg_put_str(b, WR_TAG_PATH, x->path);
    if (x->user != NULL)
        wr_msg_put_str(b, WR_TAG_USER, x->user);
    if (wr_agent_end(x->agent, start, write_stat_reply, x, &e2) == 0)
        xfer_fail(x, &e2);
}

static void watch_reply(void *ctx, const struct wr_frame_hdr *h, const uint8_t *p, bool final,
                        const struct wr_err *err)
{
    struct xfer *x = ctx;
    struct wr_watch_event ev;
    struct wr_err derr;

    if (x->req == NULL || x->finished)
        return;
    if (final) {
        if (err != NULL) {
            xfer_fail(x, err);
            return;
        }
        x->finished = true;
        wr_http_resp_end(x->req);
        return;
    }
    if (h->type == WR_MSG_OK && !x->started) {
        /* The watch is set: stream its events from now on. */
        x->started = true;
        wr_http_resp_start(x->req, 200, "application/x-ndjson", -1);
        return;
    }
    if (h->type == WR_MSG_WATCH_EVENT && wr_watch_event_decode(p, h->len, &ev, &derr) == 0) {
        static const char *const names[] = {"", "create", "write", "remove", "rename", "chmod"};
        json_t *o =
            json_pack("{s:s,s:o}", "type", ev.op >= 1 && ev.op <= 5 ? names[ev.op] : "other",
                      "name", api_json_text(ev.name));
        char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (s != NULL) {
            wr_http_resp_write(x->req, s, strlen(s));
            wr_http_resp_write(x->req, "\n", 1);
        }
        free(s);
        json_decref(o);
        wr_watch_event_fini(&ev);
    }
}

static void xfer_ready(struct wr_agent *a, const struct wr_err *err, void *ctx)
{
    struct xfer *x = ctx;
    struct wr_buf *b;
    struct wr_err e2;
    size_t start;
    uint16_t type = x->kind == XFER_READ    ? WR_MSG_FILE_READ
                    : x->kind == XFER_WRITE ? WR_MSG_FILE_WRITE
                                            : WR_MSG_FILE_WATCH;

    if (x->req == NULL)
        return;
    if (err != NULL) {
        xfer_fail(x, err);
        return;
    }
    b = wr_agent_begin(a, type, &start);
    wr_msg_put_str(b, WR_TAG_PATH, x->path);
    if (x->user != NULL)
        wr_msg_put_str(b, WR_TAG_USER, x->user);
    if (x->kind == XFER_READ) {
        if (x->offset > 0)
            wr_msg_put_u64(b, WR_TAG_OFFSET, x->offset);
        if (x->length >= 0)
            wr_msg_put_u64(b, WR_TAG_LENGTH, (uint64_t)x->length);
    } else if (x->kind == XFER_WRITE) {
        wr_msg_put_u64(b, WR_TAG_MODE, x->mode);
        wr_msg_put_u64(b, WR_TAG_FLAGS, WR_WRITE_ATOMIC | (x->parents ? WR_WRITE_MKDIRS : 0));
    } else {
        wr_msg_put_u64(b, WR_TAG_RECURSIVE, x->recursive);
    }
    x->req_id = wr_agent_end(a, start,
                             x->kind == XFER_READ    ? read_reply
                             : x->kind == XFER_WRITE ? write_reply
                                                     : watch_reply,
                             x, &e2);
    if (x->req_id == 0)
        xfer_fail(x, &e2);
}

static void xfer_lost(struct wr_agent *a, const struct wr_err *err, void *ctx)
{
    struct xfer *x = ctx;
    struct wr_err e2;

    if (x->req == NULL || x->finished)
        return;
    wr_err_set(&e2, WR_EPROTO, 0, "the sandbox's agent closed the connection%s%s", err ? ": " : "",
               err ? err->msg : "");
    xfer_fail(x, &e2);
}

static void suffix_ready(struct wr_agent *a, const struct wr_err *err, void *ctx);

static void xfer_start(struct wr_http_req *req, struct wr_msb *sb, struct xfer *x, const char *user)
{
    struct wr_agent_config ac = {.loop = wr_msb_loop(sb),
                                 .fd = -1,
                                 .path = wr_msb_ctl_path(sb),
                                 /* a suffix range needs the file's size first */
                                 .on_ready = x->suffix > 0 ? suffix_ready : xfer_ready,
                                 .on_close = xfer_lost,
                                 .ctx = x};
    struct wr_err err;

    x->req = req;
    x->sb = sb;
    wr_msb_ref(sb);
    if (user != NULL)
        x->user = xstrdup(user);
    wr_http_req_set_data(req, x, xfer_closed);
    if (ac.path == NULL || wr_agent_open(&ac, &x->agent, &err) < 0) {
        if (ac.path == NULL)
            wr_err_set(&err, WR_ECONFLICT, 0, "the sandbox is not running");
        x->agent = NULL;
        xfer_fail(x, &err);
    }
    if (x->kind == XFER_WRITE && x->agent != NULL)
        wr_agent_on_drain(x->agent, write_agent_drained, x);
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

/* A suffix range needs the size first. */
static void suffix_stat_reply(void *ctx, const struct wr_frame_hdr *h, const uint8_t *p, bool final,
                              const struct wr_err *err)
{
    struct xfer *x = ctx;
    struct wr_stat st;
    struct wr_err derr;

    if (x->req == NULL || x->finished)
        return;
    if (err != NULL) {
        xfer_fail(x, err);
        return;
    }
    if (h != NULL && h->type == WR_MSG_STAT && wr_stat_decode(p, h->len, &st, &derr) == 0) {
        uint64_t n = (uint64_t)x->suffix < st.size ? (uint64_t)x->suffix : st.size;
        x->offset = st.size - n;
        x->length = (int64_t)n;
        x->suffix = 0;
        wr_stat_fini(&st);
        if (final)
            xfer_ready(x->agent, NULL, x);
    }
}

static void suffix_ready(struct wr_agent *a, const struct wr_err *err, void *ctx)
{
    struct xfer *x = ctx;
    struct wr_buf *b;
    struct wr_err e2;
    size_t start;

    if (x->req == NULL)
        return;
    if (err != NULL) {
        xfer_fail(x, err);
        return;
    }
    b = wr_agent_begin(a, WR_MSG_FILE_STAT, &start);
    wr_msg_put_str(b, WR_TAG_PATH, x->path);
    if (x->user != NULL)
        wr_msg_put_str(b, WR_TAG_USER, x->user);
    if (wr_agent_end(a, start, suffix_stat_reply, x, &e2) == 0)
        xfer_fail(x, &e2);
}

void api_file_download(struct wr_http_req *req, struct wr_msb *sb, const char *path,
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
    range = wr_http_req_header(req, "Range");
    x = xcalloc(1, sizeof(*x));
    x->kind = XFER_READ;
    x->path = xstrdup(path);
    x->length = -1;
    if (range != NULL) {
        if (parse_range(range, x) < 0) {
            free(x->path);
            free(x);
            wr_http_respond_error(req, 416, "invalid", "unsupported Range `%s`", range);
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
    m = wr_http_req_query(req, "mode");
    x = xcalloc(1, sizeof(*x));
    x->kind = XFER_WRITE;
    x->path = xstrdup(path);
    x->mode = 0644;
    x->parents = bool_param(req, "parents", true);
    if (m != NULL) {
        x->mode = strtoull(m, &end, 8);
        if (*m == '\0' || *end != '\0' || x->mode > 07777) {
            free(x->path);
            free(x);
            wr_http_respond_error(req, 400, "invalid", "`mode` must be octal, e.g. 0644");
            return;
        }
    }
    xfer_start(req, c->sb, x, wr_http_req_query(req, "user"));
}

void api_file_remove(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    const char *path;
    struct op_st *o;
    struct wr_buf *b;
    size_t start;

    if ((path = path_param(req, "path")) == NULL)
        return;
    o = op_begin(req, c->sb, WR_MSG_FILE_REMOVE, path, OP_EMPTY, &b, &start);
    if (o == NULL)
        return;
    wr_msg_put_u64(b, WR_TAG_RECURSIVE, bool_param(req, "recursive", false));
    op_send(req, c->sb, o, start);
}

void api_file_stat(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    const char *path;
    struct op_st *o;
    struct wr_buf *b;
    size_t start;

    if ((path = path_param(req, "path")) == NULL)
        return;
    o = op_begin(req, c->sb, WR_MSG_FILE_STAT, path, OP_STAT, &b, &start);
    if (o == NULL)
        return;
    wr_msg_put_u64(b, WR_TAG_NOFOLLOW, 1);
    op_send(req, c->sb, o, start);
}

void api_file_list(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    const char *path, *d;
    uint64_t depth = 1;
    struct wr_err err;
    struct op_st *o;
    struct wr_buf *b;
    size_t start;

    if ((path = path_param(req, "path")) == NULL)
        return;
    o = op_begin(req, c->sb, WR_MSG_FILE_LIST, path, OP_LIST, &b, &start);
    if (o == NULL)
        return;
    d = wr_http_req_query(req, "depth");
    if (d != NULL && (wr_parse_uint(d, 16, &depth, &err) < 0 || depth == 0))
        depth = 1;
    wr_msg_put_u64(b, WR_TAG_DEPTH, depth);
    op_send(req, c->sb, o, start);
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
    wr_msb_ref(c->sb);
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
