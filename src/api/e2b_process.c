/* SPDX-License-Identifier: Apache-2.0 */
/* envd's process service (process.Process): Start and Connect stream a process's events
 * (start, data, end, keepalive); List, SendInput, SendSignal, CloseStdin and Update are unary.
 * Processes are the sandbox's API processes (core/procs.c); E2B's pid is Warren's process id.
 * A process started here is forgotten (released) once it has ended and its end was streamed,
 * as envd forgets its processes. */
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "../util/b64.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "e2b_int.h"

#define STREAM_HIGH    (1u << 20) /* response bytes queued before the process is slowed */
#define MAX_CONNECT_MS (86400000ull * 7)

/* What List reports of a process started here: its config and tag. */
struct e2b_proc_meta {
    struct e2b_proc_meta *next;
    char sb[72];
    uint32_t pid;
    char *tag;
    json_t *config;
};

static void meta_free(struct e2b_proc_meta *m)
{
    free(m->tag);
    json_decref(m->config);
    free(m);
}

void e2b_process_close(struct wr_e2b *e)
{
    for (struct e2b_proc_meta *m = e->procs, *next; m != NULL; m = next) {
        next = m->next;
        meta_free(m);
    }
    e->procs = NULL;
}

static struct e2b_proc_meta *meta_find(struct wr_e2b *e, const char *sb, uint32_t pid)
{
    for (struct e2b_proc_meta *m = e->procs; m != NULL; m = m->next)
        if (m->pid == pid && strcmp(m->sb, sb) == 0)
            return m;
    return NULL;
}

static void meta_remove(struct wr_e2b *e, const char *sb, uint32_t pid)
{
    for (struct e2b_proc_meta **pp = &e->procs; *pp != NULL; pp = &(*pp)->next)
        if ((*pp)->pid == pid && strcmp((*pp)->sb, sb) == 0) {
            struct e2b_proc_meta *m = *pp;
            *pp = m->next;
            meta_free(m);
            return;
        }
}

/* Forget what is known of processes that will not be streamed again: those of sandboxes that
 * are gone, and, in sb, the ones that ended while nobody streamed them (their Start stream had
 * left). */
static void prune(struct wr_api *api, struct wr_live_sb *sb)
{
    for (struct e2b_proc_meta **pp = &api->e2b->procs; *pp != NULL;) {
        struct e2b_proc_meta *m = *pp;
        struct wr_err err;
        struct wr_proc *p = NULL;
        bool gone;

        if (strcmp(m->sb, wr_live_sb_id(sb)) == 0) {
            p = wr_live_sb_proc(sb, m->pid);
            gone = p == NULL || !wr_proc_running(p);
        } else {
            gone = wr_manager_find(api->mgr, NULL, m->sb, &err) == NULL && err.kind == WR_ENOTFOUND;
        }
        if (!gone) {
            pp = &m->next;
            continue;
        }
        if (p != NULL)
            (void)wr_proc_release(p, &err);
        *pp = m->next;
        meta_free(m);
    }
}

/* Forget an ended process on the next loop turn (not from inside its own callbacks). */
struct reaper {
    uv_timer_t timer;
    struct wr_api *api;
    struct wr_live_sb *sb;
    uint32_t pid;
};

static void reaper_closed(uv_handle_t *h)
{
    struct reaper *r = h->data;
    wr_live_sb_unref(r->sb);
    free(r);
}

static void reaper_run(uv_timer_t *t)
{
    struct reaper *r = t->data;
    struct wr_proc *p = wr_live_sb_alive(r->sb) ? wr_live_sb_proc(r->sb, r->pid) : NULL;
    struct wr_err err;

    if (p != NULL && !wr_proc_running(p))
        (void)wr_proc_release(p, &err);
    if (r->api->e2b != NULL)
        meta_remove(r->api->e2b, wr_live_sb_id(r->sb), r->pid);
    uv_close((uv_handle_t *)&r->timer, reaper_closed);
}

static void reap_later(struct wr_api *api, struct wr_live_sb *sb, uint32_t pid)
{
    struct reaper *r = xcalloc(1, sizeof(*r));

    r->api = api;
    r->sb = sb;
    r->pid = pid;
    wr_live_sb_ref(sb);
    uv_timer_init(wr_live_sb_loop(sb), &r->timer);
    r->timer.data = r;
    uv_timer_start(&r->timer, reaper_run, 0, 0);
}

/* The process a ProcessSelector names ({"pid": n} or {"tag": "t"}), or NULL. */
static struct wr_proc *select_proc(struct e2b_envd *ev, json_t *req)
{
    json_t *sel = json_object_get(req, "process");
    json_t *pid = json_object_get(sel, "pid");
    const char *tag = json_string_value(json_object_get(sel, "tag"));
    uint64_t id = 0;

    if (json_is_integer(pid) && json_integer_value(pid) > 0)
        id = (uint64_t)json_integer_value(pid);
    else if (json_is_string(pid)) {
        char *end;
        id = strtoull(json_string_value(pid), &end, 10);
        if (*end != '\0')
            id = 0;
    } else if (tag != NULL) {
        for (struct e2b_proc_meta *m = ev->api->e2b->procs; m != NULL; m = m->next)
            if (m->tag != NULL && strcmp(m->tag, tag) == 0 &&
                strcmp(m->sb, wr_live_sb_id(ev->sb)) == 0)
                id = m->pid;
    }
    if (id == 0 || id > UINT32_MAX)
        return NULL;
    return wr_live_sb_proc(ev->sb, (uint32_t)id);
}

/* ---- Start and Connect: streams of a process's events -------------------------------------- */

struct pstream {
    struct wr_api *api;
    struct wr_http_req *req; /* NULL once the request is over */
    struct wr_live_sb *sb;   /* referenced */
    struct wr_proc_sub sub;
    uv_timer_t keepalive;
    uint32_t pid;
    bool pty, spawn_pending, ended, owner;
    bool close_stdin; /* stdin: false (and no pty): stdin is closed at once */
    char *tag;
    json_t *config;
};

static void pstream_freed(uv_handle_t *h)
{
    struct pstream *s = h->data;
    wr_live_sb_unref(s->sb);
    free(s->tag);
    json_decref(s->config);
    free(s);
}

static void pstream_free(struct pstream *s)
{
    wr_proc_unsubscribe(&s->sub);
    uv_timer_stop(&s->keepalive);
    uv_close((uv_handle_t *)&s->keepalive, pstream_freed);
}

static void pstream_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct pstream *s = data;

    /* A client that leaves does not stop the process (envd keeps it, to Connect to again). */
    s->req = NULL;
    wr_proc_unsubscribe(&s->sub);
    if (!s->spawn_pending)
        pstream_free(s);
}

static void ps_event(struct pstream *s, json_t *event)
{
    size_t queued = connect_stream_msg(s->req, json_pack("{s:o}", "event", event));
    (void)queued;
}

static void on_keepalive(uv_timer_t *t)
{
    struct pstream *s = t->data;

    if (s->req != NULL && !s->ended)
        ps_event(s, json_pack("{s:{}}", "keepalive"));
}

static void ps_drained(struct wr_http_req *req)
{
    struct pstream *s = wr_http_req_data(req);
    if (s != NULL)
        wr_proc_sub_drained(&s->sub);
}

static struct pstream *ps_of(struct wr_proc_sub *sub)
{
    return container_of(sub, struct pstream, sub);
}

static bool ps_output(struct wr_proc_sub *sub, int stream, const uint8_t *p, size_t n)
{
    struct pstream *s = ps_of(sub);
    const char *key = s->pty ? "pty" : (stream & WR_FLAG_STDERR) ? "stderr" : "stdout";

    if (s->req == NULL || s->ended)
        return false;
    ps_event(s, json_pack("{s:{s:o}}", "data", key, api_json_b64(p, n)));
    if (wr_http_resp_pending(s->req) > STREAM_HIGH) {
        wr_http_resp_on_drain(s->req, ps_drained);
        return true;
    }
    return false;
}

/* Go's names of the signals a process usually dies of ("signal: killed"). */
static const char *signal_name(int64_t sig)
{
    switch (sig) {
    case SIGKILL:
        return "killed";
    case SIGTERM:
        return "terminated";
    case SIGINT:
        return "interrupt";
    case SIGHUP:
        return "hangup";
    case SIGQUIT:
        return "quit";
    case SIGPIPE:
        return "broken pipe";
    case SIGSEGV:
        return "segmentation fault";
    case SIGABRT:
        return "aborted";
    default:
        return NULL;
    }
}

static void ps_exit(struct wr_proc_sub *sub, const struct wr_exit *ex, bool timed_out)
{
    struct pstream *s = ps_of(sub);
    char status[64];
    json_t *end;

    if (s->req == NULL || s->ended)
        return;
    s->ended = true;
    if (ex->signal == 0) {
        snprintf(status, sizeof(status), "exit status %" PRId64, ex->exit_code);
        end = json_pack("{s:I,s:b,s:s}", "exitCode", (json_int_t)ex->exit_code, "exited", 1,
                        "status", status);
        if (ex->exit_code != 0)
            json_object_set_new(end, "error", json_string(status));
    } else {
        const char *name = signal_name(ex->signal);
        if (name != NULL)
            snprintf(status, sizeof(status), "signal: %s", name);
        else
            snprintf(status, sizeof(status), "signal: %" PRId64, ex->signal);
        end = json_pack("{s:i,s:b,s:s,s:s}", "exitCode", -1, "exited", 0, "status", status, "error",
                        status);
    }
    /* Not in envd's EndEvent: the SDKs parse with unknown fields ignored, so it costs them
     * nothing, and a client that reads the raw event gets the command's usage. */
    if (ex->has_usage)
        json_object_set_new(end, "usage", api_usage_json(ex, true));
    ps_event(s, json_pack("{s:o}", "end", end));
    if (timed_out)
        connect_stream_end(s->req, "deadline_exceeded",
                           "the process was killed at the end of its Connect-Timeout-Ms");
    else
        connect_stream_end(s->req, NULL, NULL);
    if (s->owner)
        reap_later(s->api, s->sb, s->pid);
}

static void ps_lost(struct wr_proc_sub *sub, const struct wr_err *err)
{
    struct pstream *s = ps_of(sub);

    if (s->req == NULL || s->ended)
        return;
    s->ended = true;
    connect_stream_end(s->req, "unavailable", "%s", err->msg);
}

/* Subscribe and stream from the start event on. */
static void ps_attach(struct pstream *s, struct wr_proc *p, bool replay)
{
    s->pid = wr_proc_id(p);
    s->pty = wr_proc_pty(p);
    connect_stream_start(s->req);
    ps_event(s, json_pack("{s:{s:I}}", "start", "pid", (json_int_t)s->pid));
    s->sub.on_output = ps_output;
    s->sub.on_exit = ps_exit;
    s->sub.on_lost = ps_lost;
    uv_timer_start(&s->keepalive, on_keepalive, e2b_keepalive_ms(s->req), e2b_keepalive_ms(s->req));
    wr_proc_subscribe(p, &s->sub, replay);
}

static struct pstream *ps_new(struct e2b_envd *ev, struct wr_http_req *req)
{
    struct pstream *s = xcalloc(1, sizeof(*s));

    s->api = ev->api;
    s->req = req;
    s->sb = ev->sb;
    wr_live_sb_ref(ev->sb);
    uv_timer_init(wr_live_sb_loop(ev->sb), &s->keepalive);
    s->keepalive.data = s;
    wr_http_req_set_data(req, s, pstream_closed);
    return s;
}

static void started(void *ctx, struct wr_proc *proc, const struct wr_err *err)
{
    struct pstream *s = ctx;
    struct e2b_proc_meta *m;

    s->spawn_pending = false;
    if (s->req == NULL) {
        /* The client left while it started: it runs on, to be found by List or Connect. */
        if (proc != NULL && s->api->e2b != NULL) {
            m = xcalloc(1, sizeof(*m));
            snprintf(m->sb, sizeof(m->sb), "%s", wr_live_sb_id(s->sb));
            m->pid = wr_proc_id(proc);
            m->tag = s->tag, s->tag = NULL;
            m->config = s->config, s->config = NULL;
            m->next = s->api->e2b->procs;
            s->api->e2b->procs = m;
            if (s->close_stdin)
                wr_proc_stdin_close(proc, NULL, NULL);
        }
        pstream_free(s);
        return;
    }
    if (err != NULL) {
        connect_stream_end_err(s->req, err);
        return;
    }
    if (s->api->e2b != NULL) {
        m = xcalloc(1, sizeof(*m));
        snprintf(m->sb, sizeof(m->sb), "%s", wr_live_sb_id(s->sb));
        m->pid = wr_proc_id(proc);
        m->tag = s->tag, s->tag = NULL;
        m->config = json_incref(s->config);
        m->next = s->api->e2b->procs;
        s->api->e2b->procs = m;
    }
    if (s->close_stdin)
        wr_proc_stdin_close(proc, NULL, NULL);
    s->owner = true;
    ps_attach(s, proc, true);
}

static void start(struct e2b_envd *ev, struct wr_http_req *req, json_t *j)
{
    json_t *proc = json_object_get(j, "process");
    json_t *args = json_object_get(proc, "args");
    json_t *envs = json_object_get(proc, "envs");
    json_t *stdin_v = json_object_get(j, "stdin");
    const char *tag = json_string_value(json_object_get(j, "tag"));
    const char *timeout_h = wr_http_req_header(req, "Connect-Timeout-Ms");
    uint64_t timeout_ms = 0;
    struct wr_spawn sp;
    struct wr_err err;
    struct pstream *s;

    if (api_spawn_from_e2b(j, ev->user, &sp, &err) < 0) {
        connect_stream_end(req, "invalid_argument", "%s", err.msg);
        goto out;
    }
    if (timeout_h != NULL) {
        char *end;
        timeout_ms = strtoull(timeout_h, &end, 10);
        if (*timeout_h == '\0' || *end != '\0' || timeout_ms > MAX_CONNECT_MS) {
            connect_stream_end(req, "invalid_argument", "Connect-Timeout-Ms is not valid");
            goto out;
        }
    }
    prune(ev->api, ev->sb);
    s = ps_new(ev, req);
    s->close_stdin = !sp.pty && !json_is_true(stdin_v);
    s->tag = tag ? xstrdup(tag) : NULL;
    s->config = json_pack("{s:s,s:o,s:o}", "cmd", sp.argv[0], "args",
                          json_is_array(args) ? json_incref(args) : json_array(), "envs",
                          json_is_object(envs) ? json_incref(envs) : json_object());
    if (sp.cwd != NULL)
        json_object_set_new(s->config, "cwd", json_string(sp.cwd));
    s->spawn_pending = true;
    wr_live_sb_spawn(ev->sb, &sp, timeout_ms, started, s);
out:
    wr_spawn_fini(&sp);
}

static void connect_proc(struct e2b_envd *ev, struct wr_http_req *req, json_t *j)
{
    struct wr_proc *p = select_proc(ev, j);
    struct pstream *s;

    if (p == NULL) {
        connect_stream_end(req, "not_found", "no such process");
        return;
    }
    s = ps_new(ev, req);
    ps_attach(s, p, false);
}

/* ---- unary calls ----------------------------------------------------------------------------- */

struct list_ctx {
    struct wr_api *api;
    struct wr_live_sb *sb;
    json_t *arr;
};

static void list_proc(struct wr_proc *p, void *ctx)
{
    struct list_ctx *l = ctx;
    struct e2b_proc_meta *m;
    json_t *o, *config;

    if (!wr_proc_running(p))
        return;
    m = meta_find(l->api->e2b, wr_live_sb_id(l->sb), wr_proc_id(p));
    if (m != NULL) {
        config = json_incref(m->config);
    } else {
        char *const *argv = wr_proc_argv(p);
        json_t *args = json_array();
        for (size_t i = 1; argv && argv[0] && argv[i]; i++)
            json_array_append_new(args, api_json_text(argv[i]));
        config = json_pack("{s:o,s:o,s:{}}", "cmd", api_json_text(argv ? argv[0] : NULL), "args",
                           args, "envs");
    }
    o = json_pack("{s:o,s:I}", "config", config, "pid", (json_int_t)wr_proc_id(p));
    if (m != NULL && m->tag != NULL)
        json_object_set_new(o, "tag", json_string(m->tag));
    else if (wr_proc_tag(p) != NULL) /* the template's start command */
        json_object_set_new(o, "tag", json_string(wr_proc_tag(p)));
    json_array_append_new(l->arr, o);
}

/* An answer that comes from warren-init later (signal, stdin close, resize). */
struct uop {
    struct wr_http_req *req; /* NULL once the client left */
};

static void uop_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct uop *u = data;
    u->req = NULL;
}

static void uop_done(void *ctx, const struct wr_err *err)
{
    struct uop *u = ctx;

    if (u->req != NULL) {
        wr_http_req_set_data(u->req, NULL, NULL);
        if (err != NULL)
            connect_unary_err(u->req, err);
        else
            connect_unary_ok(u->req, json_object());
    }
    free(u);
}

static struct uop *uop_new(struct wr_http_req *req)
{
    struct uop *u = xcalloc(1, sizeof(*u));

    u->req = req;
    wr_http_req_set_data(req, u, uop_closed);
    return u;
}

static void list(struct e2b_envd *ev, struct wr_http_req *req, json_t *j)
{
    struct list_ctx l = {.api = ev->api, .sb = ev->sb, .arr = json_array()};

    wr_live_sb_procs_foreach(ev->sb, list_proc, &l);
    connect_unary_ok(req, json_pack("{s:o}", "processes", l.arr));
}

/* The running process j's `process` selects, or NULL having answered not_found. */
static struct wr_proc *running_proc(struct e2b_envd *ev, struct wr_http_req *req, json_t *j)
{
    struct wr_proc *p = select_proc(ev, j);

    if (p == NULL || !wr_proc_running(p)) {
        connect_unary_error(req, "not_found", "no running process matches `process`");
        return NULL;
    }
    return p;
}

static void send_input(struct e2b_envd *ev, struct wr_http_req *req, json_t *j)
{
    struct wr_proc *p = running_proc(ev, req, j);
    json_t *in = json_object_get(j, "input");
    const char *data = e2b_str(in, "stdin", NULL);
    struct wr_buf b;

    if (p == NULL)
        return;
    if (data == NULL)
        data = e2b_str(in, "pty", NULL);
    if (data == NULL) {
        connect_unary_error(req, "invalid_argument", "`input.stdin` or `input.pty` is needed");
        return;
    }
    wr_buf_init(&b);
    if (wr_b64_decode_buf(data, strlen(data), WR_B64_LENIENT, &b) < 0) {
        wr_buf_fini(&b);
        connect_unary_error(req, "invalid_argument", "the input is not base64");
        return;
    }
    wr_proc_stdin(p, b.data, b.len);
    wr_buf_fini(&b);
    connect_unary_ok(req, json_object());
}

static void send_signal(struct e2b_envd *ev, struct wr_http_req *req, json_t *j)
{
    struct wr_proc *p = running_proc(ev, req, j);
    json_t *v = json_object_get(j, "signal");
    int sig = 0;

    if (p == NULL)
        return;
    if (json_is_string(v) && strcmp(json_string_value(v), "SIGNAL_SIGKILL") == 0)
        sig = SIGKILL;
    else if (json_is_string(v) && strcmp(json_string_value(v), "SIGNAL_SIGTERM") == 0)
        sig = SIGTERM;
    else if (json_is_integer(v) &&
             (json_integer_value(v) == SIGKILL || json_integer_value(v) == SIGTERM))
        sig = (int)json_integer_value(v);
    if (sig == 0) {
        connect_unary_error(req, "invalid_argument",
                            "`signal` must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
        return;
    }
    wr_proc_signal(p, sig, uop_done, uop_new(req));
}

static void close_stdin(struct e2b_envd *ev, struct wr_http_req *req, json_t *j)
{
    struct wr_proc *p = running_proc(ev, req, j);

    if (p == NULL)
        return;
    if (wr_proc_pty(p)) {
        connect_unary_error(req, "failed_precondition",
                            "a process on a terminal has no stdin to close");
        return;
    }
    wr_proc_stdin_close(p, uop_done, uop_new(req));
}

static void update(struct e2b_envd *ev, struct wr_http_req *req, json_t *j)
{
    struct wr_proc *p = running_proc(ev, req, j);
    json_t *size = json_object_get(json_object_get(j, "pty"), "size");
    json_t *c = json_object_get(size, "cols"), *r = json_object_get(size, "rows");

    if (p == NULL)
        return;
    if (size == NULL) {
        connect_unary_ok(req, json_object());
        return;
    }
    if (!json_is_integer(c) || !json_is_integer(r) || json_integer_value(c) < 1 ||
        json_integer_value(c) > 65535 || json_integer_value(r) < 1 ||
        json_integer_value(r) > 65535) {
        connect_unary_error(req, "invalid_argument", "`pty.size` needs cols and rows");
        return;
    }
    if (!wr_proc_pty(p)) {
        connect_unary_error(req, "failed_precondition", "the process has no terminal");
        return;
    }
    wr_proc_resize(p, (uint16_t)json_integer_value(r), (uint16_t)json_integer_value(c), uop_done,
                   uop_new(req));
}

/* ---- the service ---------------------------------------------------------------------------- */

static const struct e2b_method methods[] = {
    {"Start", true, start},
    {"Connect", true, connect_proc},
    {"List", false, list},
    {"SendInput", false, send_input},
    {"SendSignal", false, send_signal},
    {"CloseStdin", false, close_stdin},
    {"Update", false, update},
    {NULL, false, NULL},
};

const struct e2b_service e2b_process_service = {"process.Process", methods};
