/* SPDX-License-Identifier: Apache-2.0 */
/* Commands: /v1/sandboxes/{id}/exec, /processes/..., /terminal (WebSocket). */
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "../util/b64.h"
#include "../util/cleanup.h"
#include "../util/json_cleanup.h"
#include "../util/log.h"
#include "../util/parse.h"
#include "../util/utf8.h"
#include "../util/xalloc.h"
#include "api_int.h"

#define DEFAULT_MAX_OUT    (10u << 20)
#define EXEC_TIMEOUT_MAX_S (86400 * 365) /* the longest `timeout` a command may ask for */
#define EXEC_OUTPUT_MAX    (1ll << 30)   /* the most `max_output` a command may keep */
#define STREAM_HIGH        (1u << 20)    /* response bytes queued before the process is slowed */
#define STDIN_HIGH         (4u << 20)
#define WS_HIGH            (8u << 20)

/* ---- output encoding ------------------------------------------------------------------------- */

/* Append p to out as valid UTF-8 (invalid bytes become U+FFFD). An incomplete sequence at the
 * end is kept in carry (at most 3 bytes) for the next piece, unless final. */
void api_utf8_append(struct wr_buf *out, uint8_t carry[4], size_t *ncarry, const uint8_t *p,
                     size_t n, bool final)
{
    uint8_t tmp[8];
    size_t i = 0;

    /* Finish a sequence left from the last piece. */
    while (*ncarry > 0 && i < n) {
        int l;
        memcpy(tmp, carry, *ncarry);
        size_t t = *ncarry;
        while (t < 4 && i < n)
            tmp[t++] = p[i++];
        l = wr_utf8_seq(tmp, t);
        if (l > 0) {
            wr_buf_append(out, tmp, (size_t)l);
            i -= t - (size_t)l;
            *ncarry = 0;
        } else if (l < 0 && i == n && !final) {
            memcpy(carry, tmp, t);
            *ncarry = t;
            return;
        } else {
            wr_buf_append(out, "\xef\xbf\xbd", 3);
            i -= t - 1;
            *ncarry = 0;
        }
    }
    while (i < n) {
        int l = wr_utf8_seq(p + i, n - i);
        if (l > 0) {
            wr_buf_append(out, p + i, (size_t)l);
            i += (size_t)l;
        } else if (l < 0 && !final) {
            memcpy(carry, p + i, n - i);
            *ncarry = n - i;
            return;
        } else {
            wr_buf_append(out, "\xef\xbf\xbd", 3);
            i++;
        }
    }
    if (final && *ncarry > 0) {
        wr_buf_append(out, "\xef\xbf\xbd", 3);
        *ncarry = 0;
    }
}

/* ---- processes as JSON ----------------------------------------------------------------------- */

json_t *api_usage_json(const struct wr_exit *ex, bool camel)
{
    if (ex == NULL || !ex->has_usage)
        return NULL;
    return json_pack("{s:f,s:I,s:f,s:s}", camel ? "cpuSeconds" : "cpu_seconds",
                     (double)ex->cpu_ns / 1e9, camel ? "memoryPeakBytes" : "memory_peak_bytes",
                     (json_int_t)ex->maxrss_bytes, camel ? "wallSeconds" : "wall_seconds",
                     (double)ex->wall_ns / 1e9, "source", ex->from_cgroup ? "cgroup" : "rusage");
}

json_t *api_proc_json(struct wr_proc *p)
{
    json_t *cmd = json_array();
    const struct wr_exit *ex = wr_proc_exit(p);

    for (char *const *a = wr_proc_argv(p); a && *a; a++) {
        json_t *s = json_string(*a);
        json_array_append_new(cmd, s ? s : json_string("\xef\xbf\xbd"));
    }
    json_t *o = json_pack("{s:I,s:I,s:o,s:b,s:b,s:o,s:o}", "pid", (json_int_t)wr_proc_id(p),
                          "os_pid", (json_int_t)wr_proc_os_pid(p), "cmd", cmd, "pty",
                          wr_proc_pty(p), "running", wr_proc_running(p), "exit_code",
                          ex && ex->signal == 0 ? json_integer(ex->exit_code) : json_null(),
                          "signal", ex && ex->signal ? json_integer(ex->signal) : json_null());

    if (wr_proc_tag(p) != NULL) /* "start": the template's start command */
        json_object_set_new(o, "tag", json_string(wr_proc_tag(p)));
    if (ex != NULL && ex->has_usage)
        json_object_set_new(o, "usage", api_usage_json(ex, false));
    return o;
}

/* ---- exec and attach ------------------------------------------------------------------------ */

enum exec_mode { MODE_WAIT, MODE_STREAM, MODE_BACKGROUND };

struct exec_st {
    struct wr_api *api;
    struct wr_http_req *req; /* NULL once the request is over */
    struct wr_live_sb *sb;   /* referenced */
    struct wr_proc_sub sub;
    enum exec_mode mode;
    bool sse, b64;
    size_t max_output;
    struct wr_buf out[2];
    bool trunc[2];
    uint8_t carry[2][4];
    size_t ncarry[2];
    struct wr_buf stdin_data;
    bool has_stdin;
    bool spawn_pending;
    bool done;
};

static void exec_free(struct exec_st *e)
{
    wr_proc_unsubscribe(&e->sub);
    wr_buf_fini(&e->out[0]);
    wr_buf_fini(&e->out[1]);
    wr_buf_fini(&e->stdin_data);
    wr_live_sb_unref(e->sb);
    free(e);
}

static void exec_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct exec_st *e = data;

    /* A client that leaves does not stop the command: it runs on as if started in the
     * background, its status stays in the process list. */
    e->req = NULL;
    wr_proc_unsubscribe(&e->sub);
    if (!e->spawn_pending)
        exec_free(e);
}

/* Send one event of a stream. */
static void stream_event(struct exec_st *e, json_t *ev)
{
    char *s = json_dumps(ev, JSON_COMPACT);
    const char *type = json_string_value(json_object_get(ev, "type"));

    if (e->sse) {
        wr_http_resp_write(e->req, "event: ", 7);
        wr_http_resp_write(e->req, type, strlen(type));
        wr_http_resp_write(e->req, "\ndata: ", 7);
        wr_http_resp_write(e->req, s, strlen(s));
        wr_http_resp_write(e->req, "\n\n", 2);
    } else {
        wr_http_resp_write(e->req, s, strlen(s));
        wr_http_resp_write(e->req, "\n", 1);
    }
    free(s);
    json_decref(ev);
}

static json_t *data_json(struct exec_st *e, int idx, const uint8_t *p, size_t n, bool final)
{
    struct wr_buf tmp;
    json_t *j;

    if (e->b64)
        return api_json_b64(p, n);
    wr_buf_init(&tmp);
    api_utf8_append(&tmp, e->carry[idx], &e->ncarry[idx], p, n, final);
    j = json_stringn((const char *)tmp.data, tmp.len);
    wr_buf_fini(&tmp);
    return j ? j : json_string("");
}

static void on_stream_drain(struct wr_http_req *req)
{
    struct exec_st *e = wr_http_req_data(req);
    if (e != NULL)
        wr_proc_sub_drained(&e->sub);
}

static bool exec_output(struct wr_proc_sub *sub, int stream, const uint8_t *p, size_t n)
{
    struct exec_st *e = container_of(sub, struct exec_st, sub);
    int idx = (stream & WR_FLAG_STDERR) ? 1 : 0;

    if (e->req == NULL)
        return false;
    if (e->mode == MODE_WAIT) {
        size_t room = e->max_output > e->out[idx].len ? e->max_output - e->out[idx].len : 0;
        if (n > room) {
            e->trunc[idx] = true;
            n = room;
        }
        wr_buf_append(&e->out[idx], p, n);
        return false;
    }
    stream_event(e, json_pack("{s:s,s:o}", "type", idx ? "stderr" : "stdout", "data",
                              data_json(e, idx, p, n, false)));
    if (wr_http_resp_pending(e->req) > STREAM_HIGH) {
        wr_http_resp_on_drain(e->req, on_stream_drain);
        return true;
    }
    return false;
}

static json_t *exit_fields(json_t *o, const struct wr_exit *ex, bool timed_out)
{
    json_object_set_new(o, "exit_code",
                        ex->signal == 0 ? json_integer(ex->exit_code) : json_null());
    json_object_set_new(o, "signal", ex->signal ? json_integer(ex->signal) : json_null());
    json_object_set_new(o, "timed_out", json_boolean(timed_out));
    if (ex->has_usage)
        json_object_set_new(o, "usage", api_usage_json(ex, false));
    return o;
}

static void exec_exit(struct wr_proc_sub *sub, const struct wr_exit *ex, bool timed_out)
{
    struct exec_st *e = container_of(sub, struct exec_st, sub);
    struct wr_http_req *req = e->req;

    if (req == NULL || e->done)
        return;
    e->done = true;
    if (e->mode == MODE_WAIT) {
        json_t *o = json_pack("{s:I,s:o,s:o,s:b,s:b}", "pid", (json_int_t)wr_proc_id(sub->proc),
                              "stdout", data_json(e, 0, e->out[0].data, e->out[0].len, true),
                              "stderr", data_json(e, 1, e->out[1].data, e->out[1].len, true),
                              "stdout_truncated", e->trunc[0], "stderr_truncated", e->trunc[1]);
        wr_http_respond_json(req, 200, exit_fields(o, ex, timed_out));
        return;
    }
    for (int idx = 0; idx < 2; idx++)
        if (!e->b64 && e->ncarry[idx] > 0)
            stream_event(e, json_pack("{s:s,s:o}", "type", idx ? "stderr" : "stdout", "data",
                                      data_json(e, idx, NULL, 0, true)));
    stream_event(e, exit_fields(json_pack("{s:s}", "type", "exit"), ex, timed_out));
    wr_http_resp_end(req);
}

static void exec_lost(struct wr_proc_sub *sub, const struct wr_err *err)
{
    struct exec_st *e = container_of(sub, struct exec_st, sub);

    if (e->req == NULL || e->done)
        return;
    e->done = true;
    if (!wr_http_resp_started(e->req)) {
        api_error(e->req, err);
        return;
    }
    stream_event(e, json_pack("{s:s,s:s,s:o}", "type", "error", "code", "conflict", "message",
                              api_json_message(err->msg)));
    wr_http_resp_end(e->req);
}

static void start_stream(struct exec_st *e)
{
    e->sse = e->sse || (wr_http_req_header(e->req, "Accept") != NULL &&
                        strstr(wr_http_req_header(e->req, "Accept"), "text/event-stream"));
    wr_http_resp_start(e->req, 200, e->sse ? "text/event-stream" : "application/x-ndjson", -1);
}

static void exec_started(void *ctx, struct wr_proc *proc, const struct wr_err *err)
{
    struct exec_st *e = ctx;

    e->spawn_pending = false;
    if (e->req == NULL) {
        /* The client left while the command was starting: it runs on without a reader. */
        exec_free(e);
        return;
    }
    if (err != NULL) {
        api_error(e->req, err);
        return;
    }
    if (e->mode == MODE_BACKGROUND) {
        if (e->has_stdin) {
            wr_proc_stdin(proc, e->stdin_data.data, e->stdin_data.len);
            wr_proc_stdin_close(proc, NULL, NULL);
        }
        wr_http_respond_json(e->req, 201, api_proc_json(proc));
        return;
    }
    if (e->has_stdin)
        wr_proc_stdin(proc, e->stdin_data.data, e->stdin_data.len);
    /* wait and stream: stdin ends with what the request gave (nothing = EOF at once), so a
     * command reading stdin cannot hang the request. */
    wr_proc_stdin_close(proc, NULL, NULL);
    if (e->mode == MODE_STREAM) {
        start_stream(e);
        stream_event(e, json_pack("{s:s,s:I,s:I}", "type", "start", "pid",
                                  (json_int_t)wr_proc_id(proc), "os_pid",
                                  (json_int_t)wr_proc_os_pid(proc)));
    }
    e->sub.on_output = exec_output;
    e->sub.on_exit = exec_exit;
    e->sub.on_lost = exec_lost;
    wr_proc_subscribe(proc, &e->sub, true);
}

static struct exec_st *exec_new(struct wr_api *api, struct wr_http_req *req, struct wr_live_sb *sb)
{
    struct exec_st *e = xcalloc(1, sizeof(*e));

    e->api = api;
    e->req = req;
    e->sb = sb;
    wr_live_sb_ref(sb);
    wr_buf_init(&e->out[0]);
    wr_buf_init(&e->out[1]);
    wr_buf_init(&e->stdin_data);
    e->max_output = DEFAULT_MAX_OUT;
    return e;
}

/* The request's stdin and stdin_encoding into e. Returns 0, or -1 having answered 400. */
static int exec_stdin(struct wr_http_req *req, struct exec_st *e, json_t *j)
{
    json_t *v;

    if ((v = json_object_get(j, "stdin")) != NULL && !json_is_null(v)) {
        const char *enc = json_string_value(json_object_get(j, "stdin_encoding"));
        if (!json_is_string(v)) {
            api_fail(req, WR_EINVAL, "`stdin` must be a string");
            return -1;
        }
        e->has_stdin = true;
        if (enc != NULL && strcmp(enc, "base64") == 0) {
            if (wr_b64_decode_buf(json_string_value(v), json_string_length(v), WR_B64_STRICT,
                                  &e->stdin_data) < 0) {
                api_fail(req, WR_EINVAL, "`stdin` is not valid base64");
                return -1;
            }
        } else if (enc != NULL && strcmp(enc, "utf8") != 0) {
            api_fail(req, WR_EINVAL, "`stdin_encoding` is utf8 or base64");
            return -1;
        } else {
            wr_buf_append(&e->stdin_data, json_string_value(v), json_string_length(v));
        }
    }
    return 0;
}

/* The request's cpus, memory_mb and usage into lim (docs/usage.md, "Per-command usage"): any
 * of them puts the command in a cgroup of its own. Returns 0, or -1 having answered 400. */
static int exec_limits(struct wr_http_req *req, struct wr_live_sb *sb, json_t *j,
                       struct wr_cmd_limits *lim)
{
    uint32_t sb_cpu;
    uint64_t sb_mem;
    json_t *v;

    wr_live_sb_limits(sb, &sb_cpu, &sb_mem);
    if ((v = json_object_get(j, "cpus")) != NULL && !json_is_null(v)) {
        double cpus = json_number_value(v);
        if (!json_is_number(v) || !(cpus >= 0.01) || cpus > 1024) {
            api_fail(req, WR_EINVAL, "`cpus` must be a number from 0.01 to 1024");
            return -1;
        }
        lim->cpu_millis = (uint32_t)(cpus * 1000 + 0.5);
        lim->cgroup = true;
    }
    if ((v = json_object_get(j, "memory_mb")) != NULL && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 4 || json_integer_value(v) > (1 << 30)) {
            api_fail(req, WR_EINVAL, "`memory_mb` must be an integer >= 4");
            return -1;
        }
        lim->memory_bytes = (uint64_t)json_integer_value(v) << 20;
        lim->cgroup = true;
    }
    if ((v = json_object_get(j, "usage")) != NULL && !json_is_null(v)) {
        const char *s = json_string_value(v);
        if (s == NULL || (strcmp(s, "rusage") != 0 && strcmp(s, "cgroup") != 0)) {
            api_fail(req, WR_EINVAL, "`usage` is rusage or cgroup");
            return -1;
        }
        if (strcmp(s, "cgroup") == 0)
            lim->cgroup = true;
        else if (lim->cgroup) {
            api_fail(req, WR_EINVAL, "`cpus` and `memory_mb` need `usage` cgroup");
            return -1;
        }
    }
    if ((sb_cpu != 0 && lim->cpu_millis > sb_cpu) || (sb_mem != 0 && lim->memory_bytes > sb_mem)) {
        wr_http_respond_error(req, 400, "exceeds_sandbox",
                              "the command asks for more than its sandbox has (cpus %g, "
                              "memory_mb %" PRIu64 ")",
                              sb_cpu / 1000.0, sb_mem >> 20);
        return -1;
    }
    return 0;
}

static void exec_body(struct wr_http_req *req, const char *body, size_t len)
{
    static const char *const allowed[] = {
        "cmd",       "env",   "cwd",     "user", "timeout",  "stdin",      "stdin_encoding",
        "mode",      "pty",   "rows",    "cols", "encoding", "max_output", "cpus",
        "memory_mb", "usage", "service", NULL};
    struct exec_st *e = wr_http_req_data(req);
    _cleanup_json_ json_t *j = NULL;
    struct wr_spawn sp;
    struct wr_cmd_limits lim = {0};
    uint64_t timeout_ms = 0;
    struct wr_err err;
    json_t *v;
    const char *s;

    j = api_parse_object(req, body, len);
    if (j == NULL || api_only_keys(req, j, allowed) < 0)
        return;
    if (api_spawn_from_exec(j, &sp, &err) < 0) {
        api_fail(req, WR_EINVAL, "%s", err.msg);
        goto out;
    }
    if ((v = json_object_get(j, "timeout")) != NULL && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > EXEC_TIMEOUT_MAX_S) {
            api_fail(req, WR_EINVAL, "`timeout` must be seconds >= 0");
            goto out;
        }
        timeout_ms = (uint64_t)json_integer_value(v) * 1000;
    }
    if ((v = json_object_get(j, "mode")) != NULL && !json_is_null(v)) {
        s = json_string_value(v);
        if (s != NULL && strcmp(s, "wait") == 0)
            e->mode = MODE_WAIT;
        else if (s != NULL && strcmp(s, "stream") == 0)
            e->mode = MODE_STREAM;
        else if (s != NULL && strcmp(s, "background") == 0)
            e->mode = MODE_BACKGROUND;
        else {
            api_fail(req, WR_EINVAL, "`mode` is wait, stream or background");
            goto out;
        }
    }
    if ((v = json_object_get(j, "encoding")) != NULL && !json_is_null(v)) {
        s = json_string_value(v);
        if (s == NULL || (strcmp(s, "utf8") != 0 && strcmp(s, "base64") != 0)) {
            api_fail(req, WR_EINVAL, "`encoding` is utf8 or base64");
            goto out;
        }
        e->b64 = strcmp(s, "base64") == 0;
    }
    if ((v = json_object_get(j, "max_output")) != NULL && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > EXEC_OUTPUT_MAX) {
            api_fail(req, WR_EINVAL, "`max_output` must be 0 to 1 GiB");
            goto out;
        }
        e->max_output = (size_t)json_integer_value(v);
    }
    if (exec_stdin(req, e, j) < 0 || exec_limits(req, e->sb, j, &lim) < 0)
        goto out;
    e->spawn_pending = true;
    wr_live_sb_spawn_limited(e->sb, &sp, timeout_ms, &lim, exec_started, e);
out:
    wr_spawn_fini(&sp);
}

/* ---- attach and wait ------------------------------------------------------------------------ */

struct wait_st {
    struct wr_http_req *req;
    struct wr_live_sb *sb;
    struct wr_proc_sub sub;
    uv_timer_t timer;
    bool done;
};

static void wait_timer_closed(uv_handle_t *h)
{
    struct wait_st *w = h->data;
    wr_live_sb_unref(w->sb);
    free(w);
}

static void wait_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct wait_st *w = data;
    wr_proc_unsubscribe(&w->sub);
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, wait_timer_closed);
}

static bool wait_output(struct wr_proc_sub *sub, int stream, const uint8_t *p, size_t n)
{
    return false;
}

static void wait_exit(struct wr_proc_sub *sub, const struct wr_exit *ex, bool timed_out)
{
    struct wait_st *w = container_of(sub, struct wait_st, sub);
    if (w->done)
        return;
    w->done = true;
    wr_http_respond_json(w->req, 200, api_proc_json(sub->proc));
}

static void wait_lost(struct wr_proc_sub *sub, const struct wr_err *err)
{
    struct wait_st *w = container_of(sub, struct wait_st, sub);
    if (w->done)
        return;
    w->done = true;
    api_error(w->req, err);
}

static void wait_timeout(uv_timer_t *t)
{
    struct wait_st *w = t->data;
    if (w->done)
        return;
    w->done = true;
    api_fail(w->req, WR_ETIMEOUT, "the process is still running");
}

void api_proc_wait(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    struct wr_live_sb *sb = c->sb;
    struct wait_st *w = xcalloc(1, sizeof(*w));
    const char *q = wr_http_req_query(req, "timeout");
    uint64_t secs = 0;
    struct wr_err err;

    if (q != NULL && wr_parse_uint(q, 86400 * 365, &secs, &err) < 0) {
        free(w);
        api_fail(req, WR_EINVAL, "`timeout` must be seconds");
        return;
    }
    w->req = req;
    w->sb = sb;
    wr_live_sb_ref(sb);
    uv_timer_init(wr_live_sb_loop(sb), &w->timer);
    w->timer.data = w;
    if (q != NULL)
        uv_timer_start(&w->timer, wait_timeout, secs * 1000, 0);
    w->sub.on_output = wait_output;
    w->sub.on_exit = wait_exit;
    w->sub.on_lost = wait_lost;
    wr_http_req_set_data(req, w, wait_closed);
    wr_proc_subscribe(c->proc, &w->sub, false);
}

void api_proc_attach(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    struct exec_st *e = exec_new(c->api, req, c->sb);
    const char *enc = wr_http_req_query(req, "encoding");

    e->mode = MODE_STREAM;
    e->b64 = enc != NULL && strcmp(enc, "base64") == 0;
    wr_http_req_set_data(req, e, exec_closed);
    start_stream(e);
    e->sub.on_output = exec_output;
    e->sub.on_exit = exec_exit;
    e->sub.on_lost = exec_lost;
    wr_proc_subscribe(c->proc, &e->sub, true);
}

/* ---- stdin (a streamed body), signal, resize ------------------------------------------------- */

struct stdin_st {
    struct wr_http_req *req;
    struct wr_live_sb *sb;
    uint32_t pid;
    uv_timer_t retry;
    bool paused;
};

static void stdin_timer_closed(uv_handle_t *h)
{
    struct stdin_st *s = h->data;
    wr_live_sb_unref(s->sb);
    free(s);
}

static void stdin_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct stdin_st *s = data;
    uv_timer_stop(&s->retry);
    uv_close((uv_handle_t *)&s->retry, stdin_timer_closed);
}

static void stdin_resume(uv_timer_t *t)
{
    struct stdin_st *s = t->data;

    if (wr_live_sb_pending(s->sb) > STDIN_HIGH) {
        uv_timer_start(&s->retry, stdin_resume, 20, 0);
        return;
    }
    s->paused = false;
    wr_http_req_resume_body(s->req);
}

static void stdin_data(struct wr_http_req *req, const char *p, size_t n)
{
    struct stdin_st *s = wr_http_req_data(req);
    struct wr_proc *proc = wr_live_sb_alive(s->sb) ? wr_live_sb_proc(s->sb, s->pid) : NULL;

    if (proc == NULL)
        return;
    for (size_t off = 0; off < n; off += WR_CHUNK_SIZE)
        wr_proc_stdin(proc, p + off, n - off > WR_CHUNK_SIZE ? WR_CHUNK_SIZE : n - off);
    /* Backpressure towards the client: stop reading its body while warren-init is behind. */
    if (wr_live_sb_pending(s->sb) > STDIN_HIGH && !s->paused) {
        s->paused = true;
        wr_http_req_pause_body(req);
        uv_timer_start(&s->retry, stdin_resume, 20, 0);
    }
}

static void stdin_end(struct wr_http_req *req)
{
    struct stdin_st *s = wr_http_req_data(req);
    if (!wr_live_sb_alive(s->sb) || wr_live_sb_proc(s->sb, s->pid) == NULL)
        api_fail(req, WR_ENOTFOUND, "process %u is gone", s->pid);
    else
        wr_http_respond(req, 204, NULL, NULL, 0);
}

struct reply_st {
    struct wr_http_req *req;
};

static void reply_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct reply_st *r = data;
    r->req = NULL;
}

static void reply_done(void *ctx, const struct wr_err *err)
{
    struct reply_st *r = ctx;

    if (r->req != NULL) {
        wr_http_req_set_data(r->req, NULL, NULL);
        if (err != NULL)
            api_error(r->req, err);
        else
            wr_http_respond(r->req, 204, NULL, NULL, 0);
    }
    free(r);
}

static struct reply_st *reply_new(struct wr_http_req *req)
{
    struct reply_st *r = xcalloc(1, sizeof(*r));
    r->req = req;
    wr_http_req_set_data(req, r, reply_closed);
    return r;
}

static int parse_signal(json_t *v)
{
    static const struct {
        const char *name;
        int sig;
    } names[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
                 {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT},
                 {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"ALRM", SIGALRM}, {"WINCH", SIGWINCH}};
    const char *s;

    if (json_is_integer(v))
        return json_integer_value(v) >= 1 && json_integer_value(v) <= 64
                   ? (int)json_integer_value(v)
                   : -1;
    s = json_string_value(v);
    if (s == NULL)
        return -1;
    if (strncmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(s, names[i].name) == 0)
            return names[i].sig;
    return -1;
}

void api_proc_signal(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    json_t *j = api_parse_object(req, c->body, c->len);
    int sig;

    if (j == NULL)
        return;
    sig = parse_signal(json_object_get(j, "signal"));
    if (sig < 0)
        api_fail(req, WR_EINVAL, "`signal` must be a number 1-64 or a name like SIGTERM");
    else
        wr_proc_signal(c->proc, sig, reply_done, reply_new(req));
    json_decref(j);
}

void api_proc_resize(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    json_t *j = api_parse_object(req, c->body, c->len), *r, *c2;

    if (j == NULL)
        return;
    r = json_object_get(j, "rows");
    c2 = json_object_get(j, "cols");
    if (!json_is_integer(r) || !json_is_integer(c2) || json_integer_value(r) < 1 ||
        json_integer_value(r) > 65535 || json_integer_value(c2) < 1 ||
        json_integer_value(c2) > 65535)
        api_fail(req, WR_EINVAL, "`rows` and `cols` must be 1 to 65535");
    else
        wr_proc_resize(c->proc, (uint16_t)json_integer_value(r), (uint16_t)json_integer_value(c2),
                       reply_done, reply_new(req));
    json_decref(j);
}

/* ---- terminal (WebSocket) ------------------------------------------------------------------- */

struct term_st {
    struct wr_live_sb *sb;
    struct wr_ws *ws; /* NULL once closed */
    struct wr_proc *proc;
    struct wr_proc_sub sub;
    struct wr_buf early; /* keystrokes that came before the shell started */
    bool spawn_pending, ended;
};

#define TERM_EARLY_MAX (64u * 1024)

static void term_free(struct term_st *t)
{
    wr_buf_fini(&t->early);
    wr_proc_unsubscribe(&t->sub);
    wr_live_sb_unref(t->sb);
    free(t);
}

static bool term_output(struct wr_proc_sub *sub, int stream, const uint8_t *p, size_t n)
{
    struct term_st *t = container_of(sub, struct term_st, sub);

    /* A terminal's reader is a person: a client this far behind is gone. */
    if (t->ws != NULL && wr_ws_send(t->ws, 2, p, n) > WS_HIGH)
        wr_ws_close(t->ws, 1008, "client too slow");
    return false;
}

static void term_exit(struct wr_proc_sub *sub, const struct wr_exit *ex, bool timed_out)
{
    struct term_st *t = container_of(sub, struct term_st, sub);
    json_t *o;
    char *s;

    t->ended = true;
    if (t->ws == NULL)
        return;
    o = exit_fields(json_pack("{s:s}", "type", "exit"), ex, timed_out);
    s = json_dumps(o, JSON_COMPACT);
    wr_ws_send(t->ws, 1, s, strlen(s));
    free(s);
    json_decref(o);
    wr_ws_close(t->ws, 1000, "exited");
}

static void term_lost(struct wr_proc_sub *sub, const struct wr_err *err)
{
    struct term_st *t = container_of(sub, struct term_st, sub);
    t->ended = true;
    if (t->ws != NULL)
        wr_ws_close(t->ws, 1011, "sandbox gone");
}

static void term_message(struct wr_ws *ws, int opcode, const uint8_t *p, size_t n, void *ctx)
{
    struct term_st *t = ctx;
    json_t *j;

    if (t->ended)
        return;
    if (opcode == 2) {
        if (t->proc != NULL)
            wr_proc_stdin(t->proc, p, n);
        else if (t->early.len + n <= TERM_EARLY_MAX)
            wr_buf_append(&t->early, p, n); /* typed before the shell started */
        return;
    }
    if (t->proc == NULL)
        return;
    j = json_loadb((const char *)p, n, 0, NULL);
    if (json_is_object(j)) {
        const char *type = json_string_value(json_object_get(j, "type"));
        json_int_t r = json_integer_value(json_object_get(j, "rows"));
        json_int_t c = json_integer_value(json_object_get(j, "cols"));
        if (type != NULL && strcmp(type, "resize") == 0 && r > 0 && r < 65536 && c > 0 && c < 65536)
            wr_proc_resize(t->proc, (uint16_t)r, (uint16_t)c, NULL, NULL);
    }
    json_decref(j);
}

static void term_closed(struct wr_ws *ws, void *ctx)
{
    struct term_st *t = ctx;

    t->ws = NULL;
    /* Like a terminal hanging up: the session's processes get SIGHUP. */
    if (t->proc != NULL && !t->ended && wr_live_sb_alive(t->sb))
        wr_proc_signal(t->proc, SIGHUP, NULL, NULL);
    if (!t->spawn_pending)
        term_free(t);
}

static void term_started(void *ctx, struct wr_proc *proc, const struct wr_err *err)
{
    struct term_st *t = ctx;

    t->spawn_pending = false;
    if (t->ws == NULL) {
        if (proc != NULL)
            wr_proc_signal(proc, SIGHUP, NULL, NULL);
        term_free(t);
        return;
    }
    if (err != NULL) {
        char *s = xasprintf("{\"type\":\"error\",\"message\":\"%s\"}", "could not start");
        wr_ws_send(t->ws, 1, s, strlen(s));
        free(s);
        wr_ws_close(t->ws, 1011, "could not start the command");
        return;
    }
    t->proc = proc;
    if (t->early.len > 0)
        wr_proc_stdin(proc, t->early.data, t->early.len);
    wr_buf_fini(&t->early);
    t->sub.on_output = term_output;
    t->sub.on_exit = term_exit;
    t->sub.on_lost = term_lost;
    wr_proc_subscribe(proc, &t->sub, true);
}

void api_terminal(struct api_call *c)
{
    static const struct wr_ws_callbacks cbs = {.on_message = term_message, .on_close = term_closed};
    struct wr_http_req *req = c->req;
    struct wr_live_sb *sb = c->sb;
    struct wr_spawn sp;
    struct wr_err err;
    struct term_st *t;

    if (api_spawn_from_terminal(req, &sp, &err) < 0) {
        api_fail(req, WR_EINVAL, "%s", err.msg);
        goto out;
    }
    t = xcalloc(1, sizeof(*t));
    wr_buf_init(&t->early);
    t->sb = sb;
    wr_live_sb_ref(sb);
    t->ws = wr_http_ws_accept(req, &cbs, t);
    if (t->ws == NULL) {
        wr_live_sb_unref(sb);
        free(t);
        goto out;
    }
    t->spawn_pending = true;
    wr_live_sb_spawn(sb, &sp, 0, term_started, t);
out:
    wr_spawn_fini(&sp);
}

/* ---- exec, processes ------------------------------------------------------------------------ */

void api_exec_start(struct api_call *c)
{
    struct exec_st *e = exec_new(c->api, c->req, c->sb);

    wr_http_req_set_data(c->req, e, exec_closed);
    exec_body(c->req, c->body, c->len);
}

static void list_one(struct wr_proc *p, void *ctx)
{
    json_array_append_new(ctx, api_proc_json(p));
}

void api_procs_list(struct api_call *c)
{
    json_t *arr = json_array();

    wr_live_sb_procs_foreach(c->sb, list_one, arr);
    wr_http_respond_json(c->req, 200, json_pack("{s:o}", "processes", arr));
}

void api_proc_get(struct api_call *c)
{
    wr_http_respond_json(c->req, 200, api_proc_json(c->proc));
}

void api_proc_release(struct api_call *c)
{
    struct wr_err err;

    if (wr_proc_release(c->proc, &err) < 0)
        api_error(c->req, &err);
    else
        wr_http_respond(c->req, 204, NULL, NULL, 0);
}

void api_proc_stdin(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    struct stdin_st *s;

    if (!wr_proc_running(c->proc)) {
        api_fail(req, WR_ECONFLICT, "process %u has ended", (unsigned)c->pid);
        return;
    }
    s = xcalloc(1, sizeof(*s));
    s->req = req;
    s->sb = c->sb;
    s->pid = c->pid;
    wr_live_sb_ref(c->sb);
    uv_timer_init(wr_live_sb_loop(c->sb), &s->retry);
    s->retry.data = s;
    wr_http_req_set_data(req, s, stdin_closed);
    wr_http_req_interactive_body(req); /* a terminal's input: silence is normal */
    wr_http_req_stream_body(req, stdin_data, stdin_end);
}

void api_proc_stdin_close(struct api_call *c)
{
    wr_proc_stdin_close(c->proc, reply_done, reply_new(c->req));
}
