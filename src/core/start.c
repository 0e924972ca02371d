/* SPDX-License-Identifier: Apache-2.0 */
/* A template's start command and its readiness check (see start.h). One timer drives a run:
 * every WR_START_POLL_MS it looks at the agent, the start process and the check in flight, and
 * starts the next check; so every step is nonblocking and bounded by the run's deadline. */
#include "start.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../util/log.h"
#include "../util/strv.h"
#include "../util/xalloc.h"
#include "core_int.h"
#include "ports.h"

#define HTTP_ATTEMPT_MS 2000 /* one HTTP check: its answer's status line, or the next try */
#define READY_CMD_MS    5000 /* one ready command: killed after this long */
#define TAIL_BYTES      320  /* of the start command's output, in an error */

/* ---- the config ------------------------------------------------------------------------------ */

void wr__start_cfg_free(struct wr_start_cfg *c)
{
    if (c == NULL)
        return;
    free(c->services);
    free(c->cmd);
    free(c->user);
    free(c->cwd);
    wr_strv_free(c->env);
    free(c->path);
    free(c->ready_cmd);
    free(c);
}

void wr__start_cfg_add_services(struct wr_start_cfg **cfg, const char *compose_json)
{
    if (compose_json == NULL)
        return;
    if (*cfg == NULL) {
        *cfg = xcalloc(1, sizeof(**cfg));
        (*cfg)->timeout_s = WR_START_TIMEOUT_DEFAULT_S;
    }
    free((*cfg)->services);
    (*cfg)->services = xstrdup(compose_json);
}

static int opt_str(json_t *o, const char *key, char **out, const char *tname, struct wr_err *err)
{
    json_t *v = json_object_get(o, key);

    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_string(v) || json_string_length(v) == 0)
        return wr_err_set(err, WR_EINVAL, 0, "template `%s`: start.%s must be a non-empty string",
                          tname, key);
    *out = xstrdup(json_string_value(v));
    return 0;
}

int wr__start_cfg_parse(const void *config, const char *tname, struct wr_start_cfg **out,
                        struct wr_err *err)
{
    json_t *s = json_object_get((json_t *)config, "start"), *ready, *env, *v;
    struct wr_start_cfg *c;
    const char *k;
    size_t n = 0;

    *out = NULL;
    if (s == NULL || json_is_null(s))
        return 0;
    if (!json_is_object(s))
        return wr_err_set(err, WR_EINVAL, 0, "template `%s`: start must be an object", tname);
    c = xcalloc(1, sizeof(*c));
    c->timeout_s = WR_START_TIMEOUT_DEFAULT_S;
    if (opt_str(s, "cmd", &c->cmd, tname, err) < 0 ||
        opt_str(s, "user", &c->user, tname, err) < 0 || opt_str(s, "cwd", &c->cwd, tname, err) < 0)
        goto bad;
    if (c->cmd == NULL) {
        wr_err_set(err, WR_EINVAL, 0, "template `%s`: start.cmd is missing", tname);
        goto bad;
    }
    env = json_object_get(s, "env");
    if (env != NULL && !json_is_object(env)) {
        wr_err_set(err, WR_EINVAL, 0, "template `%s`: start.env must be an object", tname);
        goto bad;
    }
    c->env = xcalloc(json_object_size(env) + 1, sizeof(char *));
    json_object_foreach(env, k, v)
    {
        if (!json_is_string(v) || *k == '\0' || strchr(k, '=') != NULL) {
            wr_err_set(err, WR_EINVAL, 0, "template `%s`: start.env.%s must be a string", tname, k);
            goto bad;
        }
        c->env[n++] = xasprintf("%s=%s", k, json_string_value(v));
    }
    ready = json_object_get(s, "ready");
    if (ready != NULL && !json_is_null(ready)) {
        json_t *port = json_object_get(ready, "port"), *to = json_object_get(ready, "timeout_s");
        if (!json_is_object(ready)) {
            wr_err_set(err, WR_EINVAL, 0, "template `%s`: start.ready must be an object", tname);
            goto bad;
        }
        if (port != NULL && (!json_is_integer(port) || json_integer_value(port) < 1 ||
                             json_integer_value(port) > 65535)) {
            wr_err_set(err, WR_EINVAL, 0, "template `%s`: start.ready.port must be 1-65535", tname);
            goto bad;
        }
        c->port = port ? (uint16_t)json_integer_value(port) : 0;
        if (opt_str(ready, "path", &c->path, tname, err) < 0 ||
            opt_str(ready, "cmd", &c->ready_cmd, tname, err) < 0)
            goto bad;
        if ((c->port != 0) == (c->ready_cmd != NULL)) {
            wr_err_set(err, WR_EINVAL, 0, "template `%s`: start.ready needs one of port and cmd",
                       tname);
            goto bad;
        }
        if (c->path != NULL && (c->port == 0 || c->path[0] != '/' || strpbrk(c->path, " \r\n"))) {
            wr_err_set(err, WR_EINVAL, 0,
                       "template `%s`: start.ready.path must be an absolute path, with port",
                       tname);
            goto bad;
        }
        if (to != NULL && (!json_is_integer(to) || json_integer_value(to) < 1 ||
                           json_integer_value(to) > WR_START_TIMEOUT_MAX_S)) {
            wr_err_set(err, WR_EINVAL, 0, "template `%s`: start.ready.timeout_s must be 1-%d",
                       tname, WR_START_TIMEOUT_MAX_S);
            goto bad;
        }
        if (to != NULL)
            c->timeout_s = (uint32_t)json_integer_value(to);
    }
    *out = c;
    return 0;
bad:
    wr__start_cfg_free(c);
    return -1;
}

int wr__start_cfg_of_image(const char *image_json, const char *tname, struct wr_start_cfg **out,
                           struct wr_err *err)
{
    json_t *img = image_json ? json_loads(image_json, 0, NULL) : NULL;
    int rc = wr__start_cfg_parse(json_object_get(img, "config"), tname, out, err);

    json_decref(img);
    return rc;
}

/* ---- a run ------------------------------------------------------------------------------------
 */

struct run {
    struct wr_live_sb *sb; /* referenced */
    struct wr_manager *m;
    struct wr_start_cfg *cfg;
    char *tname;
    wr_start_cb cb;
    void *ctx;
    int refs;              /* the run's own, one per spawn in flight, the timer's */
    bool done;             /* cb has been called */
    bool connected_here;   /* the run opened sb's agent */
    uint64_t t0, deadline; /* uv_now */
    uv_timer_t timer;
    /* the Compose services, first */
    bool svc_busy;
    bool svc_done;
    /* the start command */
    bool spawning;
    bool spawned;
    uint32_t proc_id; /* found again by id: a process is freed with its sandbox's table */
    /* the check in flight */
    struct wr_port_req *preq;
    int http_fd;
    struct http_watch *http_w; /* wakes the run when the answer comes */
    uint64_t http_until;
    char http_buf[16];
    size_t http_n;
    bool rspawning;
    bool rproc_on;
    uint32_t rproc_id;
    int attempts;
};

/* A poll handle on the HTTP check's socket: closed (and the socket with it) on its own, so a
 * run never waits for it. */
struct http_watch {
    uv_poll_t h;
    int fd;
    struct run *r; /* NULL once the run let go */
};

static void http_watch_closed(uv_handle_t *h)
{
    struct http_watch *w = h->data;

    (void)close(w->fd);
    free(w);
}

/* Stop the HTTP check in flight: its socket goes. */
static void http_stop(struct run *r)
{
    if (r->http_w != NULL) {
        r->http_w->r = NULL;
        uv_close((uv_handle_t *)&r->http_w->h, http_watch_closed);
        r->http_w = NULL;
    } else if (r->http_fd >= 0) {
        (void)close(r->http_fd);
    }
    r->http_fd = -1;
}

static void run_unref(struct run *r)
{
    if (--r->refs > 0)
        return;
    wr_live_sb_unref(r->sb);
    wr__start_cfg_free(r->cfg);
    free(r->tname);
    free(r);
}

static void timer_closed(uv_handle_t *h)
{
    run_unref(h->data);
}

/* The start command's last output, as one line: lines joined with " | ", at most TAIL_BYTES. */
static void tail_of(struct run *r, char *out, size_t cap)
{
    struct wr_proc *p = r->spawned ? wr_live_sb_proc(r->sb, r->proc_id) : NULL;
    char raw[TAIL_BYTES];
    size_t n = p ? wr__proc_tail(p, raw, sizeof(raw)) : 0, o = 0;

    while (n > 0 && (raw[n - 1] == '\n' || raw[n - 1] == '\r' || raw[n - 1] == ' '))
        n--;
    if (n == 0) {
        snprintf(out, cap, "(no output)");
        return;
    }
    for (size_t i = 0; i < n && o + 4 < cap; i++) {
        char ch = raw[i];
        if (ch == '\r')
            continue;
        if (ch == '\n') {
            memcpy(out + o, " | ", 3);
            o += 3;
        } else {
            out[o++] = (ch == '\t' || (unsigned char)ch >= 0x20) ? ch : '?';
        }
    }
    out[o] = '\0';
}

static void finish(struct run *r, enum wr_err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Answer once: ready (fmt NULL) or the error, with the start command's last output when it is
 * kind WR_ESTARTFAILED. */
static void finish(struct run *r, enum wr_err_kind kind, const char *fmt, ...)
{
    struct wr_err err;
    struct wr_manager *m = r->m;

    if (r->done)
        return;
    r->done = true;
    uv_timer_stop(&r->timer);
    wr_port_req_cancel(r->preq);
    r->preq = NULL;
    http_stop(r);
    if (fmt == NULL) {
        uv_update_time(m->loop);
        log_info("sandbox %s: template `%s`: started and ready in %" PRIu64 " ms (%d checks)",
                 r->sb->id, r->tname, uv_now(m->loop) - r->t0, r->attempts);
        r->cb(r->ctx, NULL);
    } else {
        char why[256], tail[TAIL_BYTES + 64];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        if (kind == WR_ESTARTFAILED) {
            tail_of(r, tail, sizeof(tail));
            wr_err_set(&err, kind, 0, "template `%s`: %s; its last output: %s", r->tname, why,
                       tail);
        } else {
            wr_err_set(&err, kind, 0, "template `%s`: %s", r->tname, why);
        }
        log_warn("sandbox %s: %s", r->sb->id, err.msg);
        r->cb(r->ctx, &err);
    }
    uv_close((uv_handle_t *)&r->timer, timer_closed);
    run_unref(r);
    wr__work_done(m);
}

static void tick(uv_timer_t *t);

static void started(void *ctx, struct wr_proc *p, const struct wr_err *err)
{
    struct run *r = ctx;

    r->spawning = false;
    if (p != NULL) {
        wr__proc_set_tag(p, WR_START_TAG);
        r->proc_id = wr_proc_id(p);
        r->spawned = true;
        uv_update_time(r->m->loop);
        log_debug("sandbox %s: start command is process %u (%" PRIu64 " ms)", r->sb->id, r->proc_id,
                  uv_now(r->m->loop) - r->t0);
        if (!r->done) /* the first check now, then every WR_START_POLL_MS */
            uv_timer_start(&r->timer, tick, 0, WR_START_POLL_MS);
    }
    if (!r->done && err != NULL)
        finish(r, WR_ESTARTFAILED, "start command: %s", err->msg);
    run_unref(r);
}

static void ready_spawned(void *ctx, struct wr_proc *p, const struct wr_err *err)
{
    struct run *r = ctx;

    r->rspawning = false;
    if (p != NULL) {
        r->rproc_on = true;
        r->rproc_id = wr_proc_id(p);
    }
    if (!r->done && err != NULL)
        finish(r, WR_ESTARTFAILED, "ready command: %s", err->msg);
    run_unref(r);
}

static void check(struct run *r);

/* The answer (or its start) is there: look at once rather than at the next tick. */
static void http_readable(uv_poll_t *h, int status, int events)
{
    struct http_watch *w = h->data;

    if (w->r != NULL && !w->r->done)
        check(w->r);
}

static void port_opened(void *arg, int fd, const struct wr_err *err)
{
    struct run *r = arg;
    char req[600];
    int n;

    r->preq = NULL;
    if (fd < 0) { /* not yet: the next tick tries again */
        if (r->attempts == 1 || r->attempts % 50 == 0)
            log_debug("sandbox %s: ready check %d: %s", r->sb->id, r->attempts,
                      err ? err->msg : "no socket");
        return;
    }
    if (r->cfg->path == NULL) {
        (void)close(fd);
        finish(r, WR_EOK, NULL);
        return;
    }
    n = snprintf(req, sizeof(req),
                 "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nUser-Agent: warren-ready\r\n"
                 "Connection: close\r\n\r\n",
                 r->cfg->path, (unsigned)r->cfg->port);
    if (n < 0 || (size_t)n >= sizeof(req) ||
        send(fd, req, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n) {
        (void)close(fd);
        return;
    }
    r->http_fd = fd;
    r->http_n = 0;
    r->http_until = uv_now(r->m->loop) + HTTP_ATTEMPT_MS;
    r->http_w = xcalloc(1, sizeof(*r->http_w));
    r->http_w->fd = fd;
    r->http_w->r = r;
    r->http_w->h.data = r->http_w;
    if (uv_poll_init(r->m->loop, &r->http_w->h, fd) < 0) {
        free(r->http_w); /* the ticks read it instead */
        r->http_w = NULL;
        return;
    }
    (void)uv_poll_start(&r->http_w->h, UV_READABLE, http_readable);
}

/* The HTTP check in flight: 1 answered 2xx, 0 still waiting, -1 this try failed. */
static int http_poll(struct run *r)
{
    ssize_t k;

    while (r->http_n < 12) {
        k = recv(r->http_fd, r->http_buf + r->http_n, 12 - r->http_n, MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return uv_now(r->m->loop) > r->http_until ? -1 : 0;
        if (k <= 0)
            return -1;
        r->http_n += (size_t)k;
    }
    /* "HTTP/1.x NNN" */
    if (memcmp(r->http_buf, "HTTP/1.", 7) != 0 || r->http_buf[8] != ' ')
        return -1;
    return r->http_buf[9] == '2' ? 1 : -1;
}

static void check(struct run *r)
{
    struct wr_err err;

    if (r->cfg->port != 0) {
        if (r->http_fd >= 0) {
            int h = http_poll(r);
            if (h == 0)
                return;
            http_stop(r);
            if (h > 0)
                finish(r, WR_EOK, NULL);
            return;
        }
        if (r->preq != NULL)
            return;
        r->attempts++;
        r->preq = wr_live_sb_port_open(r->sb, r->cfg->port, port_opened, r, &err);
        if (r->preq == NULL)
            finish(r, WR_ESTARTFAILED, "ready check: %s", err.msg);
        return;
    }
    if (r->rspawning)
        return;
    if (r->rproc_on) {
        struct wr_proc *p = wr_live_sb_proc(r->sb, r->rproc_id);
        const struct wr_exit *ex = p ? wr_proc_exit(p) : NULL;
        if (p != NULL && wr_proc_running(p))
            return;
        r->rproc_on = false;
        if (p != NULL)
            (void)wr_proc_release(p, &err);
        if (ex != NULL && ex->signal == 0 && ex->exit_code == 0) {
            finish(r, WR_EOK, NULL);
            return;
        }
    }
    {
        char *argv[] = {(char *)"/bin/sh", (char *)"-c", r->cfg->ready_cmd, NULL};
        struct wr_spawn sp = {.argv = argv,
                              .env = r->cfg->env,
                              .cwd = r->cfg->cwd,
                              .user = r->cfg->user,
                              .uid = -1,
                              .gid = -1};
        uint64_t now = uv_now(r->m->loop), left = r->deadline > now ? r->deadline - now : 0;
        r->attempts++;
        r->rspawning = true;
        r->refs++;
        wr_live_sb_spawn(r->sb, &sp, left < READY_CMD_MS ? left + 1 : READY_CMD_MS, ready_spawned,
                         r);
    }
}

static void services_started(void *ctx, const struct wr_err *err)
{
    struct run *r = ctx;

    r->svc_busy = false;
    if (err != NULL)
        finish(r, WR_ESTARTFAILED, "its services: %s", err->msg);
    else
        r->svc_done = true;
    run_unref(r);
}

static void tick(uv_timer_t *t)
{
    struct run *r = t->data;
    struct wr_live_sb *sb = r->sb;
    struct pollfd pfd = {.fd = sb->rt ? wr_sandbox_pidfd(sb->rt) : -1, .events = POLLIN};

    if (r->m->closing) {
        finish(r, WR_ECONFLICT, "the daemon is shutting down");
        return;
    }
    if (sb->pending_end.due || sb->state == LIVE_SB_ENDING) {
        finish(r, WR_ECONFLICT, "sandbox `%s` was deleted while its start command ran", sb->id);
        return;
    }
    if (sb->rt == NULL || poll(&pfd, 1, 0) != 0) {
        finish(r, WR_ESTARTFAILED, "the sandbox's init process exited");
        return;
    }
    if (r->spawned) {
        struct wr_proc *p = wr_live_sb_proc(sb, r->proc_id);
        const struct wr_exit *ex = p ? wr_proc_exit(p) : NULL;
        if (p == NULL || ex != NULL) {
            if (ex != NULL && ex->signal != 0)
                finish(r, WR_ESTARTFAILED, "start command was killed by signal %d",
                       (int)ex->signal);
            else
                finish(r, WR_ESTARTFAILED, "start command exited with code %d",
                       ex ? (int)ex->exit_code : -1);
            return;
        }
    }
    if (uv_now(r->m->loop) >= r->deadline) {
        finish(r, WR_ESTARTFAILED, "not ready after %u s (%d checks)", r->cfg->timeout_s,
               r->attempts);
        return;
    }
    if (sb->agent == NULL) {
        if (r->connected_here || r->spawned || r->spawning || r->svc_busy || r->svc_done) {
            finish(r, WR_ESTARTFAILED, "the connection to the sandbox's init process closed");
            return;
        }
        r->connected_here = true;
        wr__live_sb_connect(sb, false);
        if (sb->agent == NULL) {
            finish(r, WR_ESTARTFAILED, "no connection to the sandbox's init process");
            return;
        }
    }
    if (!wr_agent_is_ready(sb->agent))
        return;
    if (r->cfg->services != NULL && !r->svc_done) {
        if (!r->svc_busy) {
            r->svc_busy = true;
            r->refs++;
            wr__services_start(sb, r->cfg->services, services_started, r);
        }
        return;
    }
    if (r->cfg->cmd == NULL) {
        finish(r, WR_EOK, NULL);
        return;
    }
    if (!r->spawned && !r->spawning) {
        char *argv[] = {(char *)"/bin/sh", (char *)"-c", r->cfg->cmd, NULL};
        struct wr_spawn sp = {.argv = argv,
                              .env = r->cfg->env,
                              .cwd = r->cfg->cwd,
                              .user = r->cfg->user,
                              .uid = -1,
                              .gid = -1};
        r->spawning = true;
        r->refs++;
        wr_live_sb_spawn(sb, &sp, 0, started, r);
        return;
    }
    if (!r->spawned)
        return;
    if (r->cfg->port == 0 && r->cfg->ready_cmd == NULL) {
        finish(r, WR_EOK, NULL);
        return;
    }
    check(r);
}

void wr__start_run(struct wr_live_sb *sb, struct wr_start_cfg *cfg, const char *tname,
                   wr_start_cb cb, void *ctx)
{
    struct wr_manager *m = sb->m;
    struct run *r = xcalloc(1, sizeof(*r));

    r->sb = sb;
    wr_live_sb_ref(sb);
    r->m = m;
    r->cfg = cfg;
    r->tname = xstrdup(tname);
    r->cb = cb;
    r->ctx = ctx;
    r->http_fd = -1;
    r->refs = 2; /* the run's, the timer's */
    m->inflight++;
    uv_update_time(m->loop);
    r->t0 = uv_now(m->loop);
    r->deadline = r->t0 + (uint64_t)cfg->timeout_s * 1000;
    uv_timer_init(m->loop, &r->timer);
    r->timer.data = r;
    /* The first tick on the next turn (the callback never runs inside this call), then every
     * WR_START_POLL_MS. */
    uv_timer_start(&r->timer, tick, 0, WR_START_POLL_MS);
}

void wr__start_forget(struct wr_live_sb *sb, const struct wr_err *why)
{
    wr__procs_lost(sb, why);
    wr__procs_free(sb);
    if (sb->agent != NULL) {
        wr_agent_close(sb->agent);
        sb->agent = NULL;
    }
}
