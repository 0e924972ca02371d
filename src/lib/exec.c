/* SPDX-License-Identifier: Apache-2.0 */
/* warren_exec: run a command in a sandbox and stream its output (include/warren.h).
 *
 * Two ways, chosen by the input:
 *  - no input, or all of it given at once: one POST exec with mode=stream; the output comes
 *    back as NDJSON events from the first byte (start, stdout, stderr, exit), no race.
 *  - input streamed (on_stdin), or a pty: POST exec with mode=background, then GET .../attach
 *    for the output on the handle's connection; once that stream is open a thread of ours
 *    sends the input, pulled from on_stdin, as a chunked POST .../stdin on a second connection
 *    (then POST .../stdin/close). attach replays the output kept since the start (the last
 *    1 MiB), so nothing between the start and the attach is lost.
 * If the stream ends without an exit event, GET .../wait gives the exit. A background process
 * stays listed until released, so it is deleted once its exit is known. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/b64.h"
#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "lib.h"

#define IO_SIZE         (64 * 1024)
#define NDJSON_LINE_MAX (64u << 20)

struct run {
    warren *w;
    const char *id;
    const warren_exec_opts *o;
    struct wr_buf line; /* an unfinished event line */
    long long pid;
    bool exited, stopped;
    warren_exit how;
    warren_error ev_err; /* an error event's (or a stop's) */
    bool ev_failed;
    /* The input thread (mode=background with on_stdin). */
    bool feed, thread_started;
    pthread_t thread;
    int stop[2];             /* a pipe: written when the input should end (on_stdin's stop_fd) */
    warren_error thread_err; /* why the input failed; the command's exit is what counts */
};

/* ---- events --------------------------------------------------------------------------------- */

static void exit_of(const json_t *j, warren_exit *how)
{
    const json_t *sig = json_object_get(j, "signal"), *code = json_object_get(j, "exit_code");

    how->timed_out = json_is_true(json_object_get(j, "timed_out"));
    how->signal = json_is_integer(sig) ? (int)json_integer_value(sig) : 0;
    how->exit_code = json_is_integer(code) && how->signal == 0 ? (int)json_integer_value(code) : -1;
    const json_t *u = json_object_get(j, "usage");
    how->has_usage = json_is_object(u);
    if (how->has_usage) {
        const char *src = json_string_value(json_object_get(u, "source"));
        how->cpu_seconds = json_number_value(json_object_get(u, "cpu_seconds"));
        how->memory_peak_bytes =
            (long long)json_integer_value(json_object_get(u, "memory_peak_bytes"));
        how->wall_seconds = json_number_value(json_object_get(u, "wall_seconds"));
        how->usage_cgroup = src != NULL && strcmp(src, "cgroup") == 0;
    }
}

static void set_pid(struct run *r, long long pid)
{
    if (pid <= 0 || r->pid == pid)
        return;
    r->pid = pid;
    if (r->o->on_start != NULL)
        r->o->on_start(pid, r->o->ctx);
}

/* One output event: decode its base64 data and hand it to the stream's callback. */
static int output(struct run *r, const char *type, const json_t *data, struct wr_err *err)
{
    warren_output_fn fn = type[3] == 'o' ? r->o->on_stdout : r->o->on_stderr;
    const char *s = json_string_value(data);
    size_t n = json_string_length(data);
    _cleanup_free_ uint8_t *bytes = NULL;
    ssize_t m;

    if (s == NULL)
        return wr_err_set(err, WR_EPROTO, 0, "%s event without data", type);
    if (fn == NULL)
        return 0;
    bytes = xmalloc(WR_B64_DECODED_MAX(n) + 1);
    m = wr_b64_decode(s, n, WR_B64_LENIENT, bytes);
    if (m < 0)
        return wr_err_set(err, WR_EPROTO, 0, "%s event: data is not base64", type);
    if (m > 0 && fn(bytes, (size_t)m, r->o->ctx) != 0) {
        r->stopped = true;
        return wr_err_set(err, WR_EINTERNAL, 0, "stopped by a callback");
    }
    return 0;
}

static int on_event(struct run *r, const char *line, size_t len, struct wr_err *err)
{
    json_error_t je;
    json_t *j = json_loadb(line, len, 0, &je);
    const char *type = json_string_value(json_object_get(j, "type"));
    int ret = 0;

    if (j == NULL || type == NULL) {
        json_decref(j);
        return wr_err_set(err, WR_EPROTO, 0, "bad event from warrend: %s", j ? "no type" : je.text);
    }
    if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
        ret = output(r, type, json_object_get(j, "data"), err);
    } else if (strcmp(type, "start") == 0) {
        set_pid(r, (long long)json_integer_value(json_object_get(j, "pid")));
    } else if (strcmp(type, "exit") == 0) {
        r->exited = true;
        exit_of(j, &r->how);
    } else if (strcmp(type, "error") == 0) {
        const char *code = json_string_value(json_object_get(j, "code"));
        const char *msg = json_string_value(json_object_get(j, "message"));
        struct wr_err e;
        wr_err_set(&e, wl_http_kind_of(code, 0), 0, "%s (%s)", msg ? msg : "error",
                   code ? code : "error");
        wl_fail(&r->ev_err, &e, 0, code);
        r->ev_failed = true;
        *err = e;
        ret = -1;
    }
    json_decref(j);
    return ret;
}

/* NDJSON as it arrives: each complete non-empty line is an event. */
static int on_body(const char *data, size_t len, void *ctx, struct wr_err *err)
{
    struct run *r = ctx;
    const char *nl;

    while (len > 0 && (nl = memchr(data, '\n', len)) != NULL) {
        size_t n = (size_t)(nl - data);
        int ret = 0;
        if (r->line.len > 0) {
            wr_buf_append(&r->line, data, n);
            ret = on_event(r, wr_buf_str(&r->line), r->line.len, err);
            r->line.len = 0;
        } else if (n > 0) {
            ret = on_event(r, data, n, err);
        }
        if (ret < 0)
            return -1;
        len -= n + 1;
        data = nl + 1;
    }
    if (r->line.len + len > NDJSON_LINE_MAX)
        return wr_err_set(err, WR_EPROTO, 0, "event line longer than %u bytes", NDJSON_LINE_MAX);
    wr_buf_append(&r->line, data, len);
    return 0;
}

/* ---- input ---------------------------------------------------------------------------------- */

/* Send everything on_stdin gives as the process's stdin, then close it. */
static void *feed_thread(void *arg)
{
    struct run *r = arg;
    _cleanup_free_ char *target = xasprintf("/v1/sandboxes/%s/processes/%lld/stdin", r->id, r->pid);
    _cleanup_free_ char *close_target = xasprintf("%s/close", target);
    _cleanup_free_ char *buf = xmalloc(IO_SIZE);
    struct wl_http_req req = {.method = "POST",
                              .target = target,
                              .content_type = "application/octet-stream",
                              .body_kind = WL_BODY_STREAM};
    struct wl_http_resp resp = {0};
    struct wl_http *c = NULL;
    struct wr_err e;
    json_t *none = NULL;

    if (wl_http_again(r->w, &c, &r->thread_err) < 0)
        goto fail;
    if (r->o->on_stdin != NULL) {
        if (wl_http_begin(c, &req, &e) < 0)
            goto fail_e;
        for (;;) {
            long n = r->o->on_stdin(buf, IO_SIZE, r->stop[0], r->o->ctx);
            if (n <= 0)
                break;
            if (wl_http_chunk(c, buf, (size_t)(n > IO_SIZE ? IO_SIZE : n), &e) < 0)
                break; /* the answer, read below, says why */
        }
        (void)wl_http_end(c, &e);
        if (wl_http_response(c, &req, &resp, &e) < 0)
            goto fail_e;
        /* 409: the command has ended; its exit is on its way through attach. */
        if ((resp.status < 200 || resp.status > 299) && resp.status != 409) {
            wl_fail_resp(&r->thread_err, &resp);
            goto fail;
        }
        wl_http_resp_fini(&resp);
    }
    {
        struct warren tmp = {.http = c}; /* wl_api on this thread's own connection */
        if (wl_api(&tmp, "POST", close_target, NULL, NULL, &none, &r->thread_err) < 0 &&
            r->thread_err.code != WARREN_ECONFLICT && r->thread_err.code != WARREN_ENOTFOUND)
            goto fail;
        json_decref(none);
    }
    wl_http_close(c);
    return NULL;
fail_e:
    wl_fail(&r->thread_err, &e, 0, NULL);
fail:
    wl_http_resp_fini(&resp);
    wl_http_close(c);
    return NULL;
}

static void start_feed(struct run *r)
{
    if (!r->feed || r->thread_started)
        return;
    if (pipe2(r->stop, O_CLOEXEC) < 0) {
        r->stop[0] = r->stop[1] = -1;
        r->feed = false; /* no input then: the command's stdin stays open until it ends */
        return;
    }
    /* The thread takes no signals: they stay the caller's threads' to handle. */
    sigset_t all, old;
    int rc;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&r->thread, NULL, feed_thread, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0) {
        r->thread_started = true;
        return;
    }
    wr_closep(&r->stop[0]);
    wr_closep(&r->stop[1]);
    r->feed = false;
}

/* Tell on_stdin to end (its stop_fd becomes readable) and wait for the input thread. */
static void stop_feed(struct run *r)
{
    if (!r->thread_started)
        return;
    (void)!write(r->stop[1], "", 1);
    pthread_join(r->thread, NULL);
    r->thread_started = false;
    wr_closep(&r->stop[0]);
    wr_closep(&r->stop[1]);
}

static int on_headers(const struct wl_http_resp *resp, void *ctx, struct wr_err *err)
{
    if (resp->status >= 200 && resp->status <= 299)
        start_feed(ctx);
    return 0;
}

/* ---- the request ---------------------------------------------------------------------------- */

/* The exec request's body. Returns 0 with *body, or -1 with err. */
int wl_exec_body(const warren_exec_opts *o, const char *mode, json_t **body, warren_error *err)
{
    json_t *b = json_object(), *env;

    *body = b;
    if (o->argv != NULL) {
        json_t *a = json_array();
        for (const char *const *p = o->argv; *p; p++)
            json_array_append_new(a, json_string(*p));
        json_object_set_new(b, "cmd", a);
        if (json_array_size(a) == 0)
            return wl_failf(err, WR_EINVAL, 0, "exec: an empty command");
    } else if (o->shell != NULL) {
        json_object_set_new(b, "cmd", json_string(o->shell));
    } else {
        return wl_failf(err, WR_EINVAL, 0, "exec: no command (argv or shell)");
    }
    env = json_object();
    if (wl_kv_object("env", o->env, env, err) < 0) {
        json_decref(env);
        return -1;
    }
    if (json_object_size(env))
        json_object_set(b, "env", env);
    json_decref(env);
    if (o->cwd)
        json_object_set_new(b, "cwd", json_string(o->cwd));
    if (o->user)
        json_object_set_new(b, "user", json_string(o->user));
    if (o->timeout_s > 0)
        json_object_set_new(b, "timeout", json_integer((json_int_t)o->timeout_s));
    if (o->cpu_millis > 0)
        json_object_set_new(b, "cpus", json_real(o->cpu_millis / 1000.0));
    if (o->memory_mb > 0)
        json_object_set_new(b, "memory_mb", json_integer((json_int_t)o->memory_mb));
    if (o->usage_cgroup)
        json_object_set_new(b, "usage", json_string("cgroup"));
    if (o->service)
        json_object_set_new(b, "service", json_string(o->service));
    json_object_set_new(b, "mode", json_string(mode));
    json_object_set_new(b, "encoding", json_string("base64"));
    if (o->pty) {
        json_object_set_new(b, "pty", json_true());
        json_object_set_new(b, "rows", json_integer(o->rows ? o->rows : 24));
        json_object_set_new(b, "cols", json_integer(o->cols ? o->cols : 80));
    }
    if (o->on_stdin == NULL && o->stdin_data != NULL && o->stdin_len > 0) {
        _cleanup_free_ char *in64 = xmalloc(WR_B64_ENCODED_LEN(o->stdin_len) + 1);
        (void)wr_b64_encode(o->stdin_data, o->stdin_len, in64);
        json_object_set_new(b, "stdin", json_string(in64));
        json_object_set_new(b, "stdin_encoding", json_string("base64"));
    }
    return 0;
}

/* Run req and feed its NDJSON answer to r. Returns 0 (r->exited says whether the end came), or
 * -1 with err. */
static int stream(struct run *r, struct wl_http_req *req, warren_error *err)
{
    struct wl_http_resp resp;
    struct wr_err e;
    int ret = 0;

    req->accept = "application/x-ndjson";
    req->on_body = on_body;
    req->on_headers = on_headers;
    req->ctx = r;
    if (wl_http_request(r->w->http, req, &resp, &e) < 0)
        ret = r->ev_failed ? (*err = r->ev_err, -1) : wl_fail(err, &e, 0, NULL);
    else if (resp.status < 200 || resp.status > 299)
        ret = wl_fail_resp(err, &resp);
    else if (r->line.len > 0 && !r->exited &&
             on_event(r, wr_buf_str(&r->line), r->line.len, &e) < 0)
        ret = r->ev_failed ? (*err = r->ev_err, -1) : wl_fail(err, &e, 0, NULL);
    wl_http_resp_fini(&resp);
    wr_buf_fini(&r->line);
    return ret;
}

/* After a stream that ended without an exit event: wait for the command itself. */
static int wait_exit(struct run *r, warren_error *err)
{
    _cleanup_free_ char *t = xasprintf("/v1/sandboxes/%s/processes/%lld/wait", r->id, r->pid);
    json_t *p = NULL;

    if (wl_api(r->w, "GET", t, NULL, NULL, &p, err) < 0)
        return -1;
    r->exited = true;
    exit_of(p, &r->how);
    json_decref(p);
    return 0;
}

static int run_stream(struct run *r, const char *target, warren_error *err)
{
    json_t *body = NULL;
    _cleanup_free_ char *text = NULL;

    if (wl_exec_body(r->o, "stream", &body, err) < 0) {
        json_decref(body);
        return -1;
    }
    text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    struct wl_http_req req = {.method = "POST",
                              .target = target,
                              .content_type = "application/json",
                              .body_kind = WL_BODY_MEM,
                              .body = text,
                              .body_len = strlen(text)};
    if (stream(r, &req, err) < 0)
        return -1;
    if (!r->exited && r->pid > 0 && wait_exit(r, err) < 0)
        return -1;
    if (!r->exited)
        return wl_failf(err, WR_EPROTO, 0, "the output stream ended without the command's exit");
    return 0;
}

static int run_background(struct run *r, const char *target, warren_error *err)
{
    json_t *body = NULL, *proc = NULL;
    _cleanup_free_ char *attach = NULL, *release = NULL;
    warren_error ignored;
    int ret;

    if (wl_exec_body(r->o, "background", &body, err) < 0) {
        json_decref(body);
        return -1;
    }
    ret = wl_api(r->w, "POST", target, body, NULL, &proc, err);
    json_decref(body);
    if (ret < 0)
        return -1;
    set_pid(r, (long long)json_integer_value(json_object_get(proc, "pid")));
    json_decref(proc);
    if (r->pid <= 0)
        return wl_failf(err, WR_EPROTO, 0, "warrend answered without a process id");
    r->feed = true; /* with or without on_stdin: the thread closes stdin at least */

    /* attach takes its own encoding; the exec request's does not carry over. */
    attach = xasprintf("/v1/sandboxes/%s/processes/%lld/attach?encoding=base64", r->id, r->pid);
    struct wl_http_req req = {.method = "GET", .target = attach};
    ret = stream(r, &req, err);
    if (ret < 0 && (r->stopped || r->ev_failed ||
                    (err->code != WARREN_ENOTFOUND && err->code != WARREN_ECONFLICT &&
                     err->code != WARREN_EPROTO)))
        goto out;
    ret = 0;
    start_feed(r); /* attach failed (the command may be gone): its stdin still gets EOF */
    if (!r->exited && wait_exit(r, err) < 0)
        ret = -1;
out:
    stop_feed(r);
    release = xasprintf("/v1/sandboxes/%s/processes/%lld", r->id, r->pid);
    if (r->exited)
        (void)wl_api(r->w, "DELETE", release, NULL, NULL, NULL, &ignored);
    return ret;
}

int warren_exec(warren *w, const char *id, const warren_exec_opts *opts, warren_exit *how,
                warren_error *err)
{
    _cleanup_free_ char *target = NULL;
    warren_error local;
    struct run r = {.w = w, .id = id, .o = opts, .how = {.exit_code = -1}, .stop = {-1, -1}};
    int ret;

    if (err == NULL)
        err = &local;
    if (opts == NULL)
        return wl_failf(err, WR_EINVAL, 0, "exec: no options (a command is needed)");
    if (wl_check_id(id, err) < 0)
        return -1;
    target = xasprintf("/v1/sandboxes/%s/exec", id);
    if (opts->on_stdin == NULL && !opts->pty)
        ret = run_stream(&r, target, err);
    else
        ret = run_background(&r, target, err);
    wr_buf_fini(&r.line);
    if (ret < 0)
        return -1;
    wl_ok(err);
    if (how != NULL)
        *how = r.how;
    if (opts->on_exit != NULL)
        opts->on_exit(&r.how, opts->ctx);
    return 0;
}

/* POST /v1/sandboxes/ID/processes/PID/<verb> with body (taken). */
static int proc_post(warren *w, const char *id, long long pid, const char *verb, json_t *body,
                     warren_error *err)
{
    _cleanup_free_ char *t = NULL;
    int r;

    if (wl_check_id(id, err) < 0) {
        json_decref(body);
        return -1;
    }
    t = xasprintf("/v1/sandboxes/%s/processes/%lld/%s", id, pid, verb);
    r = wl_api(w, "POST", t, body, NULL, NULL, err);
    json_decref(body);
    return r < 0 ? -1 : 0;
}

int warren_signal(warren *w, const char *id, long long pid, int sig, warren_error *err)
{
    return proc_post(w, id, pid, "signal", json_pack("{s:i}", "signal", sig), err);
}

int warren_resize(warren *w, const char *id, long long pid, unsigned rows, unsigned cols,
                  warren_error *err)
{
    return proc_post(w, id, pid, "resize",
                     json_pack("{s:I, s:I}", "rows", (json_int_t)rows, "cols", (json_int_t)cols),
                     err);
}
