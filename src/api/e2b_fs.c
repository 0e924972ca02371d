/* SPDX-License-Identifier: Apache-2.0 */
/* envd's filesystem service (filesystem.Filesystem): Stat, MakeDir, Move, ListDir and Remove as
 * requests to warren-init on the sandbox's control connection (a short chain of them where envd
 * answers with the entry), WatchDir as a stream and CreateWatcher/GetWatcherEvents/RemoveWatcher
 * as a polled watch, each watch on a connection of its own. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../core/files.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "e2b_int.h"

#define MAX_WATCHERS     256    /* polled watchers in the daemon */
#define MAX_WATCH_EVENTS 100000 /* events a polled watcher keeps between two polls */
#define MAX_LIST_ENTRIES 100000

/* ---- EntryInfo ------------------------------------------------------------------------------- */

static const char *file_type(enum wr_file_type t)
{
    switch (t) {
    case WR_FT_FILE:
        return "FILE_TYPE_FILE";
    case WR_FT_DIR:
        return "FILE_TYPE_DIRECTORY";
    case WR_FT_SYMLINK:
        return "FILE_TYPE_SYMLINK";
    case WR_FT_OTHER:
        break;
    }
    return "FILE_TYPE_UNSPECIFIED";
}

/* The names of the base template's accounts; others by number. */
static void owner_name(int64_t id, char out[24])
{
    if (id == 0)
        snprintf(out, 24, "root");
    else if (id == 1000)
        snprintf(out, 24, "user");
    else
        snprintf(out, 24, "%" PRId64, id);
}

/* EntryInfo of st at path (the listed directory + st->name for list items). Names, paths and
 * link targets that are not UTF-8 are shown with U+FFFD. */
static json_t *entry_json(const struct wr_stat *st, const char *path)
{
    char perms[11], mtime[32], owner[24], group[24], size[24];
    _cleanup_free_ char *full = NULL;
    const char *name;
    json_t *j;

    if (st->name != NULL)
        full = strcmp(path, "/") == 0 ? xasprintf("/%s", st->name)
                                      : xasprintf("%s/%s", path, st->name);
    else
        full = xstrdup(path);
    name = strrchr(full, '/');
    name = name && name[1] ? name + 1 : full;
    perms[0] = st->type == WR_FT_DIR ? 'd' : st->type == WR_FT_SYMLINK ? 'L' : '-';
    for (int i = 0; i < 9; i++)
        perms[1 + i] = (st->mode & (0400u >> i)) ? "rwxrwxrwx"[i] : '-';
    perms[10] = '\0';
    api_time(st->mtime_ns / 1000000, mtime);
    owner_name(st->uid, owner);
    owner_name(st->gid, group);
    snprintf(size, sizeof(size), "%" PRIu64, st->size);
    j = json_pack("{s:o,s:s,s:o,s:s,s:i,s:s,s:s,s:s,s:s}", "name", api_json_text(name), "type",
                  file_type(st->type), "path", api_json_text(full), "size", size, "mode",
                  (int)(st->mode & 0777), "permissions", perms, "owner", owner, "group", group,
                  "modifiedTime", mtime);
    if (st->link != NULL)
        json_object_set_new(j, "symlinkTarget", api_json_text(st->link));
    return j;
}

/* ---- unary operations: chains of requests on the control connection ------------------------- */

enum fs_kind { FS_STAT, FS_LIST, FS_MKDIR, FS_MOVE, FS_REMOVE };
enum fs_step { STEP_PRESTAT, STEP_OP, STEP_POSTSTAT };

struct fsop {
    struct wr_http_req *req; /* NULL once the client left */
    struct wr_live_sb *sb;   /* referenced */
    enum fs_kind kind;
    enum fs_step step;
    char *path, *dest, *user;
    uint64_t depth;
    json_t *result; /* entry, or the list's array */
    bool exists;
};

static void fsop_free(struct fsop *o)
{
    wr_live_sb_unref(o->sb);
    json_decref(o->result);
    free(o->path);
    free(o->dest);
    free(o->user);
    free(o);
}

static void fsop_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct fsop *o = data;
    o->req = NULL;
}

static void fsop_answer_err(struct fsop *o, const struct wr_err *err)
{
    if (o->req == NULL)
        return;
    wr_http_req_set_data(o->req, NULL, NULL);
    connect_unary_err(o->req, err);
    o->req = NULL;
}

static void fsop_answer(struct fsop *o, json_t *msg)
{
    if (o->req == NULL) {
        json_decref(msg);
        return;
    }
    wr_http_req_set_data(o->req, NULL, NULL);
    connect_unary_ok(o->req, msg);
    o->req = NULL;
}

static void fsop_entry(void *ctx, const struct wr_stat *st);
static void fsop_stat(void *ctx, const struct wr_stat *st, const struct wr_err *err);
static void fsop_done(void *ctx, const struct wr_err *err);

/* Send the request of the current step. Returns -1 (answered) if it could not be sent. */
static int fsop_send(struct fsop *o)
{
    struct wr_file_req r;
    struct wr_err err;
    int rc;

    wr_file_req_init(&r);
    r.path = o->kind == FS_MOVE && o->step == STEP_POSTSTAT ? o->dest : o->path;
    r.user = o->user;
    if (o->step != STEP_OP || o->kind == FS_STAT) {
        r.nofollow = true;
        rc = wr_live_sb_file_stat(o->sb, &r, fsop_stat, o, &err);
    } else if (o->kind == FS_LIST) {
        r.depth = o->depth;
        rc = wr_live_sb_file_list(o->sb, &r, fsop_entry, fsop_done, o, &err);
    } else if (o->kind == FS_MKDIR) {
        r.parents = true;
        r.mode = 0755;
        r.has_mode = true;
        rc = wr_live_sb_file_mkdir(o->sb, &r, fsop_done, o, &err);
    } else if (o->kind == FS_MOVE) {
        r.dest = o->dest;
        rc = wr_live_sb_file_rename(o->sb, &r, fsop_done, o, &err);
    } else {
        r.recursive = true;
        rc = wr_live_sb_file_remove(o->sb, &r, fsop_done, o, &err);
    }
    if (rc < 0) {
        if (err.kind == WR_ECONFLICT)
            err.kind = WR_EPROTO; /* not connected: unavailable */
        fsop_answer_err(o, &err);
        return -1;
    }
    return 0;
}

/* The step after `o->step` succeeded; frees o when the chain is over. */
static void fsop_next(struct fsop *o)
{
    if (o->req == NULL)
        goto done;
    switch (o->step) {
    case STEP_PRESTAT:
        if (o->exists) {
            bool dir = json_is_object(o->result) &&
                       strcmp(json_string_value(json_object_get(o->result, "type")),
                              "FILE_TYPE_DIRECTORY") == 0;
            if (dir)
                connect_unary_error(o->req, "already_exists", "directory `%s` already exists",
                                    o->path);
            else
                connect_unary_error(o->req, "invalid_argument",
                                    "`%s` exists and is not a directory", o->path);
            wr_http_req_set_data(o->req, NULL, NULL);
            o->req = NULL;
            goto done;
        }
        o->step = STEP_OP;
        if (fsop_send(o) < 0)
            goto done;
        return;
    case STEP_OP:
        if (o->kind == FS_STAT) {
            fsop_answer(o, json_pack("{s:O}", "entry", o->result));
        } else if (o->kind == FS_LIST) {
            fsop_answer(o, json_pack("{s:O}", "entries", o->result));
        } else if (o->kind == FS_REMOVE) {
            fsop_answer(o, json_object());
        } else {
            o->step = STEP_POSTSTAT;
            json_decref(o->result);
            o->result = NULL;
            if (fsop_send(o) < 0)
                goto done;
            return;
        }
        goto done;
    case STEP_POSTSTAT:
        if (o->result == NULL)
            fsop_answer(o, json_object());
        else
            fsop_answer(o, json_pack("{s:O}", "entry", o->result));
        goto done;
    }
done:
    fsop_free(o);
}

/* The entry of a stat, or of a listed directory. */
static void fsop_entry(void *ctx, const struct wr_stat *st)
{
    struct fsop *o = ctx;
    const char *dir = o->kind == FS_MOVE && o->step == STEP_POSTSTAT ? o->dest : o->path;

    if (o->kind == FS_LIST && o->step == STEP_OP) {
        if (json_array_size(o->result) < MAX_LIST_ENTRIES)
            json_array_append_new(o->result, entry_json(st, dir));
    } else {
        json_decref(o->result);
        o->result = entry_json(st, dir);
    }
}

/* The current step ended. */
static void fsop_done(void *ctx, const struct wr_err *err)
{
    struct fsop *o = ctx;

    if (err != NULL) {
        if (o->step == STEP_PRESTAT && err->sys_errno == ENOENT) {
            o->exists = false;
        } else if (o->kind == FS_REMOVE && err->sys_errno == ENOENT) {
            /* rm -rf: nothing to remove is fine */
        } else {
            fsop_answer_err(o, err);
            fsop_free(o);
            return;
        }
    } else if (o->step == STEP_PRESTAT) {
        o->exists = true;
    }
    fsop_next(o);
}

static void fsop_stat(void *ctx, const struct wr_stat *st, const struct wr_err *err)
{
    if (st != NULL)
        fsop_entry(ctx, st);
    fsop_done(ctx, err);
}

static void fs_unary(struct e2b_envd *ev, struct wr_http_req *req, enum fs_kind kind, json_t *j)
{
    struct fsop *o;
    const char *path = e2b_str(j, "path", NULL);
    json_t *d;

    if (kind == FS_MOVE)
        path = e2b_str(j, "source", NULL);
    o = xcalloc(1, sizeof(*o));
    o->kind = kind;
    o->path = e2b_abs_path(ev->user, path);
    if (kind == FS_MOVE)
        o->dest = e2b_abs_path(ev->user, e2b_str(j, "destination", NULL));
    if (o->path == NULL || (kind == FS_MOVE && o->dest == NULL)) {
        connect_unary_error(req, "invalid_argument",
                            kind == FS_MOVE ? "`source` and `destination` must be paths"
                                            : "`path` must be a path");
        fsop_free(o);
        return;
    }
    o->sb = ev->sb;
    wr_live_sb_ref(ev->sb);
    o->user = ev->user ? xstrdup(ev->user) : NULL;
    o->depth = 1;
    d = json_object_get(j, "depth");
    if (json_is_integer(d) && json_integer_value(d) > 1)
        o->depth = json_integer_value(d) > 16 ? 16 : (uint64_t)json_integer_value(d);
    if (kind == FS_LIST)
        o->result = json_array();
    o->step = kind == FS_MKDIR ? STEP_PRESTAT : STEP_OP;
    o->req = req;
    wr_http_req_set_data(req, o, fsop_closed);
    if (fsop_send(o) < 0)
        fsop_free(o);
}

/* ---- watches --------------------------------------------------------------------------------- */

static const char *event_type(enum wr_watch_op op)
{
    switch (op) {
    case WR_WATCH_CREATE:
        return "EVENT_TYPE_CREATE";
    case WR_WATCH_WRITE:
        return "EVENT_TYPE_WRITE";
    case WR_WATCH_REMOVE:
        return "EVENT_TYPE_REMOVE";
    case WR_WATCH_RENAME:
        return "EVENT_TYPE_RENAME";
    case WR_WATCH_CHMOD:
        return "EVENT_TYPE_CHMOD";
    }
    return "EVENT_TYPE_UNSPECIFIED";
}

/* A watch on a connection of its own: streamed (WatchDir, req set) or polled (a watcher). */
struct e2b_watcher {
    struct e2b_watcher *next; /* wr_e2b.watchers, for polled ones */
    struct wr_e2b *e2b;
    struct wr_http_req *req; /* WatchDir's request; NULL once over, and for a polled watch */
    struct wr_live_sb *sb;
    struct wr_fconn *fc;
    uv_timer_t keepalive;
    char id[32];
    char sb_id[72];
    char *path, *user;
    bool recursive, polled, watching, ended;
    json_t *events; /* polled: the events since the last poll */
    struct wr_err failure;
    bool failed;
    /* a polled watch's CreateWatcher request, until the watch is set */
    struct wr_http_req *create_req;
};

static void watcher_freed(uv_handle_t *h)
{
    struct e2b_watcher *w = h->data;
    wr_live_sb_unref(w->sb);
    json_decref(w->events);
    free(w->path);
    free(w->user);
    free(w);
}

static void watcher_free(struct e2b_watcher *w)
{
    w->ended = true;
    w->create_req = NULL;
    wr_fconn_close(w->fc);
    w->fc = NULL;
    uv_timer_stop(&w->keepalive);
    uv_close((uv_handle_t *)&w->keepalive, watcher_freed);
}

static void watcher_unlink(struct e2b_watcher *w)
{
    if (w->e2b == NULL)
        return;
    for (struct e2b_watcher **pp = &w->e2b->watchers; *pp != NULL; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    w->e2b = NULL;
}

void e2b_fs_close(struct wr_e2b *e)
{
    while (e->watchers != NULL) {
        struct e2b_watcher *w = e->watchers;
        watcher_unlink(w);
        if (w->create_req != NULL)
            wr_http_req_set_data(w->create_req, NULL, NULL);
        watcher_free(w);
    }
}

static void create_answer(struct e2b_watcher *w, const struct wr_err *err)
{
    struct wr_http_req *req = w->create_req;

    if (req == NULL)
        return;
    w->create_req = NULL;
    wr_http_req_set_data(req, NULL, NULL);
    if (err != NULL)
        connect_unary_err(req, err);
    else
        connect_unary_ok(req, json_pack("{s:s}", "watcherId", w->id));
}

/* The watch ended or failed. */
static void watch_fail(struct e2b_watcher *w, const struct wr_err *err)
{
    if (w->ended)
        return;
    w->ended = true;
    if (w->polled) {
        if (w->create_req != NULL) {
            /* The watch was never set: no watcher. */
            create_answer(w, err);
            watcher_unlink(w);
            watcher_free(w);
            return;
        }
        w->failed = true;
        w->failure = *err;
        return;
    }
    if (w->req != NULL)
        connect_stream_end_err(w->req, err);
}

static void watch_on(void *ctx)
{
    struct e2b_watcher *w = ctx;

    if (w->ended || w->watching)
        return;
    w->watching = true;
    if (w->polled)
        create_answer(w, NULL);
    else if (w->req != NULL)
        connect_stream_msg(w->req, json_pack("{s:{}}", "start"));
}

static void watch_event(void *ctx, const struct wr_watch_event *we)
{
    struct e2b_watcher *w = ctx;
    json_t *fe;

    if (w->ended)
        return;
    fe = json_pack("{s:o,s:s}", "name", api_json_text(we->name), "type", event_type(we->op));
    if (w->polled) {
        if (json_array_size(w->events) < MAX_WATCH_EVENTS)
            json_array_append(w->events, fe);
        json_decref(fe);
    } else if (w->req != NULL) {
        connect_stream_msg(w->req, json_pack("{s:o}", "filesystem", fe));
    } else {
        json_decref(fe);
    }
}

static void watch_done(void *ctx, const struct wr_err *err)
{
    struct e2b_watcher *w = ctx;
    struct wr_err e2;

    if (err == NULL)
        wr_err_set(&e2, WR_ECONFLICT, 0, "the watch of `%s` ended", w->path);
    watch_fail(w, err ? err : &e2);
}

static void watch_ready(void *ctx, const struct wr_err *err)
{
    static const struct wr_file_watch_cbs cbs = {watch_on, watch_event, watch_done};
    struct e2b_watcher *w = ctx;
    struct wr_file_req r;
    struct wr_err e2;

    if (err != NULL) {
        watch_fail(w, err);
        return;
    }
    wr_file_req_init(&r);
    r.path = w->path;
    r.user = w->user;
    r.recursive = w->recursive;
    if (wr_fconn_watch(w->fc, &r, &cbs, w, &e2) < 0)
        watch_fail(w, &e2);
}

static void watch_lost(void *ctx, const struct wr_err *err)
{
    watch_fail(ctx, err);
}

static void on_keepalive(uv_timer_t *t)
{
    struct e2b_watcher *w = t->data;

    if (w->req != NULL && !w->ended && w->watching)
        connect_stream_msg(w->req, json_pack("{s:{}}", "keepalive"));
}

static void watchdir_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct e2b_watcher *w = data;

    /* The client is gone: closing the connection ends the watch in warren-init. */
    w->req = NULL;
    watcher_free(w);
}

/* Start a watch of json `j` (WatchDir or CreateWatcher). Returns NULL having answered. */
static struct e2b_watcher *watch_new(struct e2b_envd *ev, struct wr_http_req *req, json_t *j,
                                     bool polled)
{
    struct e2b_watcher *w;
    static const struct wr_fconn_cbs cbs = {.on_ready = watch_ready, .on_lost = watch_lost};
    char *path = e2b_abs_path(ev->user, e2b_str(j, "path", NULL));
    struct wr_err err;

    if (path == NULL) {
        if (polled)
            connect_unary_error(req, "invalid_argument", "`path` must be a path");
        else
            connect_stream_end(req, "invalid_argument", "`path` must be a path");
        free(path);
        return NULL;
    }
    w = xcalloc(1, sizeof(*w));
    w->path = path;
    w->user = ev->user ? xstrdup(ev->user) : NULL;
    w->recursive = json_is_true(json_object_get(j, "recursive"));
    w->polled = polled;
    w->sb = ev->sb;
    wr_live_sb_ref(ev->sb);
    snprintf(w->sb_id, sizeof(w->sb_id), "%s", wr_live_sb_id(ev->sb));
    uv_timer_init(wr_live_sb_loop(ev->sb), &w->keepalive);
    w->keepalive.data = w;
    if (polled) {
        w->events = json_array();
        w->e2b = ev->api->e2b;
        snprintf(w->id, sizeof(w->id), "w%" PRIu64, ++w->e2b->watcher_seq);
        w->next = w->e2b->watchers;
        w->e2b->watchers = w;
        w->create_req = req;
    } else {
        w->req = req;
        wr_http_req_set_data(req, w, watchdir_closed);
    }
    if (wr_live_sb_fconn_open(ev->sb, &cbs, w, &w->fc, &err) < 0) {
        w->fc = NULL;
        watch_fail(w, &err);
        return NULL;
    }
    return w;
}

static void create_req_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct e2b_watcher *w = data;
    /* The watcher stays (it may already be set); RemoveWatcher or the daemon's end frees it. */
    w->create_req = NULL;
}

static struct e2b_watcher *watcher_find(struct wr_e2b *e, const char *id, const char *sb_id)
{
    for (struct e2b_watcher *w = e->watchers; w != NULL; w = w->next)
        if (strcmp(w->id, id) == 0 && strcmp(w->sb_id, sb_id) == 0)
            return w;
    return NULL;
}

static void create_watcher(struct e2b_envd *ev, struct wr_http_req *req, json_t *j)
{
    struct e2b_watcher *w;
    size_t n = 0;

    /* Forget the failed watchers of sandboxes that are gone (nobody polls them). */
    for (struct e2b_watcher **pp = &ev->api->e2b->watchers; *pp != NULL;) {
        w = *pp;
        if (w->failed && !wr_live_sb_alive(w->sb)) {
            *pp = w->next;
            w->e2b = NULL;
            watcher_free(w);
        } else {
            pp = &w->next;
        }
    }
    for (w = ev->api->e2b->watchers; w != NULL; w = w->next)
        n++;
    if (n >= MAX_WATCHERS) {
        connect_unary_error(req, "resource_exhausted", "too many watchers: remove some");
        return;
    }
    w = watch_new(ev, req, j, true);
    if (w != NULL && w->create_req != NULL)
        wr_http_req_set_data(req, w, create_req_closed);
}

/* The watcher j's `watcherId` names in this sandbox, or NULL having answered not_found. */
static struct e2b_watcher *watcher_of(struct e2b_envd *ev, struct wr_http_req *req, json_t *j)
{
    const char *id = e2b_str(j, "watcherId", "watcher_id");
    struct e2b_watcher *w = id ? watcher_find(ev->api->e2b, id, wr_live_sb_id(ev->sb)) : NULL;

    if (w == NULL || w->create_req != NULL) {
        connect_unary_error(req, "not_found", "no watcher `%s`", id ? id : "");
        return NULL;
    }
    return w;
}

static void remove_watcher(struct e2b_envd *ev, struct wr_http_req *req, json_t *j)
{
    struct e2b_watcher *w = watcher_of(ev, req, j);

    if (w == NULL)
        return;
    watcher_unlink(w);
    watcher_free(w);
    connect_unary_ok(req, json_object());
}

static void get_watcher_events(struct e2b_envd *ev, struct wr_http_req *req, json_t *j)
{
    struct e2b_watcher *w = watcher_of(ev, req, j);

    if (w == NULL)
        return;
    if (json_array_size(w->events) == 0 && w->failed) {
        struct wr_err err = w->failure;
        watcher_unlink(w);
        watcher_free(w);
        connect_unary_err(req, &err);
        return;
    }
    connect_unary_ok(req, json_pack("{s:o}", "events", w->events));
    w->events = json_array();
}

/* ---- the service ---------------------------------------------------------------------------- */

static void watch_dir(struct e2b_envd *ev, struct wr_http_req *req, json_t *j)
{
    struct e2b_watcher *w = watch_new(ev, req, j, false);

    if (w != NULL)
        uv_timer_start(&w->keepalive, on_keepalive, e2b_keepalive_ms(req), e2b_keepalive_ms(req));
}

static void stat_call(struct e2b_envd *ev, struct wr_http_req *req, json_t *j)
{
    fs_unary(ev, req, FS_STAT, j);
}

static void make_dir(struct e2b_envd *ev, struct wr_http_req *req, json_t *j)
{
    fs_unary(ev, req, FS_MKDIR, j);
}

static void move(struct e2b_envd *ev, struct wr_http_req *req, json_t *j)
{
    fs_unary(ev, req, FS_MOVE, j);
}

static void list_dir(struct e2b_envd *ev, struct wr_http_req *req, json_t *j)
{
    fs_unary(ev, req, FS_LIST, j);
}

static void remove_call(struct e2b_envd *ev, struct wr_http_req *req, json_t *j)
{
    fs_unary(ev, req, FS_REMOVE, j);
}

static const struct e2b_method methods[] = {
    {"Stat", false, stat_call},
    {"MakeDir", false, make_dir},
    {"Move", false, move},
    {"ListDir", false, list_dir},
    {"Remove", false, remove_call},
    {"WatchDir", true, watch_dir},
    {"CreateWatcher", false, create_watcher},
    {"RemoveWatcher", false, remove_watcher},
    {"GetWatcherEvents", false, get_watcher_events},
    {NULL, false, NULL},
};

const struct e2b_service e2b_fs_service = {"filesystem.Filesystem", methods};
