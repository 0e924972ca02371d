/* SPDX-License-Identifier: Apache-2.0 */
/* File operations in a running sandbox (files.h): each turns a wr_file_req into its FILE_*
 * request, and warren-init's replies (STAT, DATA, OK, WATCH_EVENT, ERROR) into typed callbacks.
 * The agent has checked every reply against its request's type before it gets here. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../util/xalloc.h"
#include "agent.h"
#include "core_int.h"
#include "files.h"

struct wr_fconn {
    struct wr_live_sb *sb; /* referenced */
    struct wr_agent *agent;
    struct wr_fconn_cbs cbs;
    void *ctx;
    uint32_t write_id; /* the FILE_WRITE in progress; 0: none */
    bool closed;       /* wr_fconn_close: no callback goes out */
};

/* One request in flight and the callbacks its replies go to. */
struct fop {
    uint16_t type;
    struct wr_fconn *fc; /* NULL: on the control connection */
    void *ctx;
    void (*on_stat)(void *ctx, const struct wr_stat *st); /* LIST entries, READ's stat */
    wr_file_stat_cb stat_cb;                              /* STAT's answer */
    void (*on_data)(void *ctx, const uint8_t *p, size_t n);
    void (*on_open)(void *ctx); /* WRITE ready, WATCH set */
    void (*on_event)(void *ctx, const struct wr_watch_event *ev);
    wr_file_done_cb on_done;
};

/* The final reply (OK, STAT for FILE_STAT, ERROR or a lost connection). o is freed before the
 * callback, which may close the connection. */
static void fop_end(struct fop *o, const struct wr_frame_hdr *h, const uint8_t *p,
                    const struct wr_err *err)
{
    struct fop f = *o;
    struct wr_stat st;
    struct wr_err derr;

    free(o);
    if (f.type == WR_MSG_FILE_WRITE && f.fc != NULL)
        f.fc->write_id = 0;
    if (f.stat_cb == NULL) {
        f.on_done(f.ctx, err);
        return;
    }
    if (err != NULL) {
        f.stat_cb(f.ctx, NULL, err);
        return;
    }
    if (h->type != WR_MSG_STAT || wr_stat_decode(p, h->len, &st, &derr) < 0) {
        if (h->type != WR_MSG_STAT)
            wr_err_set(&derr, WR_EPROTO, 0, "no stat in the answer to a FILE_STAT");
        f.stat_cb(f.ctx, NULL, &derr);
        return;
    }
    f.stat_cb(f.ctx, &st, NULL);
    wr_stat_fini(&st);
}

/* Every reply of a file request. Intermediate ones end with the owner's callback, which may close
 * the connection and with it end (and free) o: nothing is touched after it. */
static void fop_reply(void *ctx, const struct wr_frame_hdr *h, const uint8_t *p, bool final,
                      const struct wr_err *err)
{
    struct fop *o = ctx;
    struct wr_stat st;
    struct wr_watch_event ev;
    struct wr_err derr;

    if (o->fc != NULL && o->fc->closed) {
        if (final)
            free(o);
        return;
    }
    if (final) {
        fop_end(o, h, p, err);
        return;
    }
    switch (h->type) {
    case WR_MSG_STAT:
        if (o->on_stat != NULL && wr_stat_decode(p, h->len, &st, &derr) == 0) {
            o->on_stat(o->ctx, &st);
            wr_stat_fini(&st);
        }
        break;
    case WR_MSG_DATA:
        if (o->on_data != NULL)
            o->on_data(o->ctx, p, h->len);
        break;
    case WR_MSG_OK:
        if (o->on_open != NULL)
            o->on_open(o->ctx);
        break;
    case WR_MSG_WATCH_EVENT:
        if (o->on_event != NULL && wr_watch_event_decode(p, h->len, &ev, &derr) == 0) {
            o->on_event(o->ctx, &ev);
            wr_watch_event_fini(&ev);
        }
        break;
    default:
        break;
    }
}

/* Send o's request of r on agent a. Returns its id, or 0 with err (o freed). */
static uint32_t fop_send(struct wr_agent *a, struct fop *o, const struct wr_file_req *r,
                         struct wr_err *err)
{
    size_t start;
    struct wr_buf *b;
    uint32_t id;

    if (a == NULL || !wr_agent_is_ready(a)) {
        free(o);
        wr_err_set(err, WR_ECONFLICT, 0, "the sandbox's agent is not connected");
        return 0;
    }
    b = wr_agent_begin(a, o->type, &start);
    wr_file_req_put(b, o->type, r);
    id = wr_agent_end(a, start, fop_reply, o, err);
    if (id == 0)
        free(o);
    return id;
}

static struct fop *fop_new(uint16_t type, struct wr_fconn *fc, void *ctx)
{
    struct fop *o = xcalloc(1, sizeof(*o));

    o->type = type;
    o->fc = fc;
    o->ctx = ctx;
    return o;
}

/* ---- on the control connection ------------------------------------------------------------- */

static struct wr_agent *ctl_agent(struct wr_live_sb *sb)
{
    return wr_live_sb_alive(sb) ? wr_live_sb_agent(sb) : NULL;
}

int wr_live_sb_file_stat(struct wr_live_sb *sb, const struct wr_file_req *r, wr_file_stat_cb cb,
                         void *ctx, struct wr_err *err)
{
    struct fop *o = fop_new(WR_MSG_FILE_STAT, NULL, ctx);

    o->stat_cb = cb;
    return fop_send(ctl_agent(sb), o, r, err) == 0 ? -1 : 0;
}

int wr_live_sb_file_list(struct wr_live_sb *sb, const struct wr_file_req *r,
                         void (*on_entry)(void *ctx, const struct wr_stat *st),
                         wr_file_done_cb on_done, void *ctx, struct wr_err *err)
{
    struct fop *o = fop_new(WR_MSG_FILE_LIST, NULL, ctx);

    o->on_stat = on_entry;
    o->on_done = on_done;
    return fop_send(ctl_agent(sb), o, r, err) == 0 ? -1 : 0;
}

static int simple(struct wr_live_sb *sb, uint16_t type, const struct wr_file_req *r,
                  wr_file_done_cb cb, void *ctx, struct wr_err *err)
{
    struct fop *o = fop_new(type, NULL, ctx);

    o->on_done = cb;
    return fop_send(ctl_agent(sb), o, r, err) == 0 ? -1 : 0;
}

int wr_live_sb_file_mkdir(struct wr_live_sb *sb, const struct wr_file_req *r, wr_file_done_cb cb,
                          void *ctx, struct wr_err *err)
{
    return simple(sb, WR_MSG_FILE_MKDIR, r, cb, ctx, err);
}

int wr_live_sb_file_remove(struct wr_live_sb *sb, const struct wr_file_req *r, wr_file_done_cb cb,
                           void *ctx, struct wr_err *err)
{
    return simple(sb, WR_MSG_FILE_REMOVE, r, cb, ctx, err);
}

int wr_live_sb_file_rename(struct wr_live_sb *sb, const struct wr_file_req *r, wr_file_done_cb cb,
                           void *ctx, struct wr_err *err)
{
    return simple(sb, WR_MSG_FILE_RENAME, r, cb, ctx, err);
}

/* ---- on a connection of its own ------------------------------------------------------------ */

static void fc_ready(struct wr_agent *a, const struct wr_err *err, void *ctx)
{
    struct wr_fconn *fc = ctx;

    if (!fc->closed && fc->cbs.on_ready != NULL)
        fc->cbs.on_ready(fc->ctx, err);
}

static void fc_lost(struct wr_agent *a, const struct wr_err *err, void *ctx)
{
    struct wr_fconn *fc = ctx;
    struct wr_err e;

    if (fc->closed || fc->cbs.on_lost == NULL)
        return;
    wr_err_set(&e, WR_EPROTO, 0, "the sandbox's agent closed the connection%s%s", err ? ": " : "",
               err ? err->msg : "");
    fc->cbs.on_lost(fc->ctx, &e);
}

static void fc_drained(struct wr_agent *a, void *ctx)
{
    struct wr_fconn *fc = ctx;

    if (!fc->closed && fc->cbs.on_drain != NULL)
        fc->cbs.on_drain(fc->ctx);
}

int wr_live_sb_fconn_open(struct wr_live_sb *sb, const struct wr_fconn_cbs *cbs, void *ctx,
                          struct wr_fconn **out, struct wr_err *err)
{
    struct wr_fconn *fc;
    struct wr_agent_config ac = {.loop = wr_live_sb_loop(sb),
                                 .fd = -1,
                                 .path = wr_live_sb_ctl_path(sb),
                                 .on_ready = fc_ready,
                                 .on_close = fc_lost};

    if (!wr_live_sb_alive(sb) || ac.path == NULL)
        return wr_err_set(err, WR_ECONFLICT, 0, "the sandbox is not running");
    fc = xcalloc(1, sizeof(*fc));
    fc->sb = sb;
    fc->cbs = *cbs;
    fc->ctx = ctx;
    ac.ctx = fc;
    if (wr_agent_open(&ac, &fc->agent, err) < 0) {
        free(fc);
        return -1;
    }
    wr_live_sb_ref(sb);
    if (cbs->on_drain != NULL)
        wr_agent_on_drain(fc->agent, fc_drained, fc);
    *out = fc;
    return 0;
}

void wr_fconn_close(struct wr_fconn *fc)
{
    if (fc == NULL || fc->closed)
        return;
    fc->closed = true;
    /* Pending operations are ended here, silently (fop_reply sees closed). */
    wr_agent_close(fc->agent);
    wr_live_sb_unref(fc->sb);
    free(fc);
}

int wr_fconn_stat(struct wr_fconn *fc, const struct wr_file_req *r, wr_file_stat_cb cb, void *ctx,
                  struct wr_err *err)
{
    struct fop *o = fop_new(WR_MSG_FILE_STAT, fc, ctx);

    o->stat_cb = cb;
    return fop_send(fc->agent, o, r, err) == 0 ? -1 : 0;
}

int wr_fconn_read(struct wr_fconn *fc, const struct wr_file_req *r,
                  const struct wr_file_read_cbs *cbs, void *ctx, struct wr_err *err)
{
    struct fop *o = fop_new(WR_MSG_FILE_READ, fc, ctx);

    o->on_stat = cbs->on_stat;
    o->on_data = cbs->on_data;
    o->on_done = cbs->on_done;
    return fop_send(fc->agent, o, r, err) == 0 ? -1 : 0;
}

void wr_fconn_pause(struct wr_fconn *fc)
{
    wr_agent_pause(fc->agent);
}

void wr_fconn_resume(struct wr_fconn *fc)
{
    wr_agent_resume(fc->agent);
}

int wr_fconn_write(struct wr_fconn *fc, const struct wr_file_req *r,
                   const struct wr_file_write_cbs *cbs, void *ctx, struct wr_err *err)
{
    struct fop *o;

    if (fc->write_id != 0)
        return wr_err_set(err, WR_EINTERNAL, 0, "write `%s`: another write is in progress",
                          r->path);
    o = fop_new(WR_MSG_FILE_WRITE, fc, ctx);
    o->on_open = cbs->on_open;
    o->on_done = cbs->on_done;
    fc->write_id = fop_send(fc->agent, o, r, err);
    return fc->write_id == 0 ? -1 : 0;
}

void wr_fconn_write_data(struct wr_fconn *fc, const void *p, size_t n)
{
    if (fc->write_id != 0 && n > 0)
        wr_agent_data(fc->agent, fc->write_id, p, n);
}

void wr_fconn_write_end(struct wr_fconn *fc)
{
    if (fc->write_id != 0)
        wr_agent_data_end(fc->agent, fc->write_id);
}

bool wr_fconn_full(const struct wr_fconn *fc)
{
    return wr_agent_pending(fc->agent) >= WR_AGENT_HIGH_WATER;
}

int wr_fconn_watch(struct wr_fconn *fc, const struct wr_file_req *r,
                   const struct wr_file_watch_cbs *cbs, void *ctx, struct wr_err *err)
{
    struct fop *o = fop_new(WR_MSG_FILE_WATCH, fc, ctx);

    o->on_open = cbs->on_watching;
    o->on_event = cbs->on_event;
    o->on_done = cbs->on_done;
    return fop_send(fc->agent, o, r, err) == 0 ? -1 : 0;
}
