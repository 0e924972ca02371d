/* SPDX-License-Identifier: Apache-2.0 */
/* The agent client against real sandboxes (as root): processes, output windows, stdin, a second
 * connection by path with LIST/ATTACH/SIGNAL, large file transfers with backpressure, errors,
 * destroying a sandbox under pending requests; then against a hostile "init" played by the test
 * on a socketpair. Sandboxes live under /run/warren-test-agent and cgroup warren-test-agent. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../src/core/agent.h"
#include "../../src/runtime/runtime.h"
#include "../../src/util/xalloc.h"
#include "tap.h"

#define MIB (1024u * 1024)

static uv_loop_t *loop;
static uv_timer_t deadline;
static bool timed_out;
static char init_path[PATH_MAX], image_path[PATH_MAX];

/* ---- loop helpers ---------------------------------------------------------------------------- */

static void on_deadline(uv_timer_t *t)
{
    timed_out = true;
}

/* Run the loop until *flag is set or ms pass. Returns *flag. */
static bool run_until(const bool *flag, unsigned ms)
{
    timed_out = false;
    uv_timer_start(&deadline, on_deadline, ms, 0);
    while (!*flag && !timed_out)
        uv_run(loop, UV_RUN_ONCE);
    uv_timer_stop(&deadline);
    return *flag;
}

/* Run the loop for ms (to see that nothing more happens). */
static void run_for(unsigned ms)
{
    bool never = false;
    (void)run_until(&never, ms);
}

/* ---- agent and process contexts -------------------------------------------------------------- */

struct actx {
    int n_ready, n_close;
    bool ready, closed;
    struct wr_err ready_err, close_err;
    bool ready_ok;
};

static void a_ready(struct wr_agent *a, const struct wr_err *err, void *ctx)
{
    struct actx *c = ctx;
    c->n_ready++;
    c->ready = true;
    c->ready_ok = err == NULL;
    if (err != NULL)
        c->ready_err = *err;
}

static void a_close(struct wr_agent *a, const struct wr_err *err, void *ctx)
{
    struct actx *c = ctx;
    c->n_close++;
    c->closed = true;
    if (err != NULL)
        c->close_err = *err;
}

static struct wr_agent *agent_fd(int fd, struct actx *c)
{
    struct wr_agent_config cfg = {
        .loop = loop, .fd = fd, .on_ready = a_ready, .on_close = a_close, .ctx = c};
    struct wr_agent *a = NULL;
    struct wr_err err;

    if (wr_agent_open(&cfg, &a, &err) < 0) {
        printf("# agent open: %s\n", err.msg);
        return NULL;
    }
    return a;
}

static struct wr_agent *agent_path(const char *path, struct actx *c)
{
    struct wr_agent_config cfg = {
        .loop = loop, .fd = -1, .path = path, .on_ready = a_ready, .on_close = a_close, .ctx = c};
    struct wr_agent *a = NULL;
    struct wr_err err;

    if (wr_agent_open(&cfg, &a, &err) < 0) {
        printf("# agent open: %s\n", err.msg);
        return NULL;
    }
    return a;
}

struct pctx {
    struct wr_agent *a;
    int n_started, n_exit, n_output;
    bool started, exited, start_failed;
    bool output_before_start, event_after_exit;
    uint32_t id;
    int64_t pid;
    struct wr_err err;
    struct wr_exit ex;
    struct wr_buf out[3]; /* by stream; only when store */
    bool store;
    bool nonzero;     /* a byte other than 0 was seen */
    size_t total;     /* output bytes */
    bool ack;         /* acknowledge output at once */
    size_t owed;      /* not yet acknowledged (delayed acks) */
    size_t max_owed;  /* most output held unacknowledged */
    uv_timer_t timer; /* delayed acks */
    bool delay;
};

static void p_started(void *ctx, uint32_t proc_id, int64_t pid, const struct wr_err *err)
{
    struct pctx *p = ctx;
    p->n_started++;
    p->started = true;
    p->id = proc_id;
    p->pid = pid;
    if (err != NULL) {
        p->start_failed = true;
        p->err = *err;
    }
}

static void on_ack_timer(uv_timer_t *t)
{
    struct pctx *p = t->data;
    wr_agent_ack(p->a, p->id, p->owed);
    p->owed = 0;
}

static void p_output(void *ctx, uint32_t proc_id, int stream, const uint8_t *d, size_t n)
{
    struct pctx *p = ctx;

    p->n_output++;
    if (!p->started)
        p->output_before_start = true;
    if (p->exited)
        p->event_after_exit = true;
    if (p->store && stream >= 1 && stream <= 2)
        wr_buf_append(&p->out[stream], d, n);
    for (size_t i = 0; i < n && !p->nonzero; i++)
        p->nonzero = d[i] != 0;
    p->total += n;
    p->owed += n;
    if (p->owed > p->max_owed)
        p->max_owed = p->owed;
    if (p->ack) {
        wr_agent_ack(p->a, proc_id, p->owed);
        p->owed = 0;
    } else if (p->delay && !uv_is_active((uv_handle_t *)&p->timer)) {
        uv_timer_start(&p->timer, on_ack_timer, 20, 0);
    }
}

static void p_exit(void *ctx, uint32_t proc_id, const struct wr_exit *ex)
{
    struct pctx *p = ctx;
    if (p->exited)
        p->event_after_exit = true;
    p->n_exit++;
    p->exited = true;
    p->ex = *ex;
}

static const struct wr_agent_proc_cbs pcbs = {p_started, p_output, p_exit};

static void pctx_init(struct pctx *p, struct wr_agent *a)
{
    memset(p, 0, sizeof(*p));
    p->a = a;
    p->ack = true;
    p->store = true;
    for (int i = 0; i < 3; i++)
        wr_buf_init(&p->out[i]);
    uv_timer_init(loop, &p->timer);
    p->timer.data = p;
}

static void on_timer_closed(uv_handle_t *h)
{
    *(bool *)h->data = true;
}

/* Free the buffers and close the timer, waiting for it (the struct is reused at once). */
static void pctx_fini(struct pctx *p)
{
    bool closed = false;

    for (int i = 0; i < 3; i++)
        wr_buf_fini(&p->out[i]);
    p->timer.data = &closed;
    uv_close((uv_handle_t *)&p->timer, on_timer_closed);
    (void)run_until(&closed, 1000);
}

static bool out_is(const struct pctx *p, int stream, const char *want)
{
    return p->out[stream].len == strlen(want) &&
           memcmp(p->out[stream].data, want, strlen(want)) == 0;
}

static int spawn(struct wr_agent *a, struct pctx *p, const char *const *argv)
{
    struct wr_spawn sp = {.argv = (char **)argv, .uid = -1, .gid = -1};
    struct wr_err err;

    pctx_init(p, a);
    if (wr_agent_spawn(a, &sp, &pcbs, p, &err) < 0) {
        printf("# spawn: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* Spawn and run to the EXIT. */
static bool run_cmd(struct wr_agent *a, struct pctx *p, const char *const *argv)
{
    if (spawn(a, p, argv) < 0)
        return false;
    return run_until(&p->exited, 10000);
}

/* ---- requests -------------------------------------------------------------------------------- */

struct rctx {
    int n_inter, n_final, n_proc, n_stat, n_data, n_ok;
    bool done, failed, inter;
    struct wr_err err;
    uint16_t final_type;
    bool bad_decode, null_on_error;
    uint32_t find_proc; /* LIST: look for this proc id */
    bool found, found_running;
    uint64_t size;      /* first STAT's SIZE */
    struct wr_buf data; /* DATA bytes */
    bool keep_data;
    bool pause_reads; /* FILE_READ: pause every 16th DATA, resume from a timer */
    struct wr_agent *a;
    uv_timer_t *resume_timer;
    int pauses;
};

static void on_resume(uv_timer_t *t)
{
    struct rctx *r = t->data;
    wr_agent_resume(r->a);
}

static void r_reply(void *ctx, const struct wr_frame_hdr *h, const uint8_t *p, bool final,
                    const struct wr_err *err)
{
    struct rctx *r = ctx;

    if (final) {
        r->n_final++;
        r->done = true;
        if (err != NULL) {
            r->failed = true;
            r->err = *err;
            r->null_on_error = h == NULL && p == NULL;
            return;
        }
        r->final_type = h->type;
    } else {
        r->n_inter++;
        r->inter = true;
    }
    if (h == NULL)
        return;
    if (h->type == WR_MSG_OK)
        r->n_ok++;
    if (h->type == WR_MSG_PROC) {
        struct wr_proc_info pi;
        struct wr_err e;
        r->n_proc++;
        if (wr_proc_info_decode(p, h->len, &pi, &e) < 0) {
            r->bad_decode = true;
            return;
        }
        if (pi.proc_id == r->find_proc) {
            r->found = true;
            r->found_running = pi.running;
        }
        wr_proc_info_fini(&pi);
    } else if (h->type == WR_MSG_STAT) {
        struct wr_stat st;
        struct wr_err e;
        if (wr_stat_decode(p, h->len, &st, &e) < 0) {
            r->bad_decode = true;
            return;
        }
        if (r->n_stat++ == 0)
            r->size = st.size;
        wr_stat_fini(&st);
    } else if (h->type == WR_MSG_DATA) {
        r->n_data++;
        if (r->keep_data)
            wr_buf_append(&r->data, p, h->len);
        if (r->pause_reads && r->n_data % 16 == 0) {
            wr_agent_pause(r->a);
            r->pauses++;
            uv_timer_start(r->resume_timer, on_resume, 5, 0);
        }
    }
}

/* A request with a PATH (and an optional PROC_ID/SIGNAL for process requests). */
static uint32_t request(struct wr_agent *a, uint16_t type, const char *path, struct rctx *r)
{
    size_t start;
    struct wr_buf *b = wr_agent_begin(a, type, &start);
    struct wr_err err;
    uint32_t id;

    if (path != NULL)
        wr_msg_put_str(b, WR_TAG_PATH, path);
    id = wr_agent_end(a, start, r_reply, r, &err);
    if (id == 0)
        printf("# request: %s\n", err.msg);
    return id;
}

static uint32_t proc_request(struct wr_agent *a, uint16_t type, uint32_t proc_id, int sig,
                             struct rctx *r)
{
    size_t start;
    struct wr_buf *b = wr_agent_begin(a, type, &start);
    struct wr_err err;

    wr_msg_put_u64(b, WR_TAG_PROC_ID, proc_id);
    if (sig > 0)
        wr_msg_put_u64(b, WR_TAG_SIGNAL, (uint64_t)sig);
    return wr_agent_end(a, start, r_reply, r, &err);
}

/* ---- sandboxes ------------------------------------------------------------------------------- */

static struct wr_sandbox *make_sandbox(struct wr_runtime *rt, const char *id)
{
    const char *layers[] = {image_path};
    struct wr_sandbox_spec spec = {
        .id = id, .layers = layers, .n_layers = 1, .memory_bytes = 512ull * MIB, .pids_max = 256};
    struct wr_sandbox *sb = NULL;
    struct wr_err err;

    if (wr_sandbox_create(rt, &spec, &sb, &err) < 0) {
        printf("# create %s: %s\n", id, err.msg);
        return NULL;
    }
    return sb;
}

static int find_paths(void)
{
    char exe[PATH_MAX], p[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    char *slash;

    if (n < 0)
        return -1;
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0'; /* build/tests */
    snprintf(p, sizeof(p), "%s/../warren-init", exe);
    if (realpath(p, init_path) == NULL)
        return -1;
    snprintf(p, sizeof(p), "%s/../images/busybox", exe);
    if (realpath(p, image_path) == NULL)
        return -1;
    return 0;
}

/* ---- tests on a real sandbox ----------------------------------------------------------------- */

static void test_processes(struct wr_agent *a)
{
    struct pctx p;
    static const char *const echo[] = {"echo", "hi", NULL};
    static const char *const exit7[] = {"sh", "-c", "exit 7", NULL};
    static const char *const kill9[] = {"sh", "-c", "kill -9 $$", NULL};
    static const char *const err[] = {"sh", "-c", "echo oops >&2", NULL};
    static const char *const missing[] = {"/no/such/command", NULL};

    ok(run_cmd(a, &p, echo), "echo hi: exits");
    ok(p.n_started == 1 && !p.start_failed && p.id > 0 && p.pid > 0, "echo: started once, ids");
    ok(out_is(&p, WR_FLAG_STDOUT, "hi\n"), "echo: stdout is \"hi\\n\"");
    ok(p.out[WR_FLAG_STDERR].len == 0, "echo: no stderr");
    ok(p.n_exit == 1 && p.ex.signal == 0 && p.ex.exit_code == 0, "echo: exit 0");
    ok(!p.output_before_start, "echo: no output before on_started");
    pctx_fini(&p);

    ok(run_cmd(a, &p, exit7) && p.ex.exit_code == 7 && p.ex.signal == 0, "sh exit 7: code 7");
    pctx_fini(&p);
    ok(run_cmd(a, &p, kill9) && p.ex.signal == 9, "sh kill -9 $$: signal 9");
    pctx_fini(&p);
    ok(run_cmd(a, &p, err), "stderr: exits");
    ok(out_is(&p, WR_FLAG_STDERR, "oops\n") && p.out[WR_FLAG_STDOUT].len == 0,
       "stderr: \"oops\\n\" on stderr only");
    pctx_fini(&p);

    ok(spawn(a, &p, missing) == 0 && run_until(&p.started, 10000), "missing command: answered");
    ok(p.start_failed && p.err.sys_errno == ENOENT, "missing command: ENOENT (%s)", p.err.msg);
    run_for(100);
    ok(p.n_started == 1 && p.n_output == 0 && p.n_exit == 0, "missing command: nothing else");
    pctx_fini(&p);
}

static void test_window(struct wr_agent *a)
{
    struct pctx p;
    static const char *const big[] = {"head", "-c", "5242880", "/dev/zero", NULL};

    if (spawn(a, &p, big) < 0) {
        ok(0, "5 MiB: spawn");
        return;
    }
    p.ack = false;
    p.delay = true;
    p.store = false;
    ok(run_until(&p.exited, 60000), "5 MiB with delayed ACKs: exits");
    ok(p.total == 5 * MIB, "5 MiB: every byte arrived (%zu)", p.total);
    ok(!p.nonzero, "5 MiB: all zero");
    ok(p.max_owed <= WR_OUTPUT_WINDOW, "5 MiB: never more than the window unacknowledged (%zu)",
       p.max_owed);
    ok(p.max_owed >= WR_OUTPUT_WINDOW / 2, "5 MiB: the window filled while ACKs waited (%zu)",
       p.max_owed);
    ok(p.ex.exit_code == 0 && p.ex.signal == 0, "5 MiB: exit 0");
    pctx_fini(&p);
}

static void test_stdin(struct wr_agent *a)
{
    struct pctx p;
    struct rctx r = {0};
    static const char *const cat[] = {"cat", NULL};
    size_t n = MIB + 12345;
    uint8_t *in = xmalloc(n);

    for (size_t i = 0; i < n; i++)
        in[i] = (uint8_t)(i * 131 + (i >> 11));
    if (spawn(a, &p, cat) < 0 || !run_until(&p.started, 10000)) {
        ok(0, "cat: started");
        free(in);
        return;
    }
    /* More than the stdin window: the agent holds the rest until STDIN_ACKs return, and the
     * close goes out after it. */
    wr_agent_stdin(a, p.id, in, n);
    {
        struct wr_err err;
        ok(wr_agent_stdin_close(a, p.id, r_reply, &r, &err) == 0, "cat: STDIN_CLOSE sent");
    }
    ok(run_until(&p.exited, 30000), "cat: exits after stdin closes");
    ok(r.n_final == 1 && !r.failed, "cat: STDIN_CLOSE answered OK");
    ok(p.out[WR_FLAG_STDOUT].len == n && memcmp(p.out[WR_FLAG_STDOUT].data, in, n) == 0,
       "cat: %zu bytes came back unchanged (%zu)", n, p.out[WR_FLAG_STDOUT].len);
    ok(p.ex.exit_code == 0, "cat: exit 0");
    pctx_fini(&p);
    free(in);
}

static void test_stat_missing(struct wr_agent *a)
{
    struct rctx r = {0};

    ok(request(a, WR_MSG_FILE_STAT, "/no/such/file", &r) != 0, "FILE_STAT missing: sent");
    ok(run_until(&r.done, 10000), "FILE_STAT missing: answered");
    ok(r.failed && r.err.sys_errno == ENOENT && r.err.kind == WR_ENOTFOUND,
       "FILE_STAT missing: ENOENT, not_found (%s)", r.err.msg);
    ok(r.null_on_error && r.n_final == 1 && r.n_inter == 0, "FILE_STAT missing: one final error");
}

/* A second connection by path: HELLO, LIST, ATTACH to a process started on the first, SIGNAL. */
static void test_second_agent(struct wr_sandbox *sb, struct wr_agent *a1, struct pctx *sleeper)
{
    struct actx c2 = {0};
    struct wr_agent *a2 = agent_path(wr_sandbox_ctl_path(sb), &c2);
    struct rctx list = {0}, sig = {0}, flush = {0};
    struct pctx p2;
    struct wr_err err;

    ok(a2 != NULL && run_until(&c2.ready, 10000) && c2.ready_ok, "second agent: HELLO by path");
    if (a2 == NULL || !c2.ready_ok)
        return;
    ok(wr_agent_is_ready(a2), "second agent: ready");
    list.find_proc = sleeper->id;
    ok(request(a2, WR_MSG_LIST, NULL, &list) != 0 && run_until(&list.done, 10000), "LIST answered");
    ok(list.n_proc >= 1 && !list.bad_decode && list.final_type == WR_MSG_OK && list.n_final == 1,
       "LIST: %d PROC frames, then OK", list.n_proc);
    ok(list.found && list.found_running, "LIST: the sleep started on the first agent, running");

    pctx_init(&p2, a2);
    ok(wr_agent_attach(a2, sleeper->id, &pcbs, &p2, &err) == 0 && run_until(&p2.started, 10000),
       "ATTACH answered");
    ok(!p2.start_failed && p2.id == sleeper->id, "ATTACH: OK for the proc id");
    ok(proc_request(a2, WR_MSG_SIGNAL, sleeper->id, SIGTERM, &sig) != 0 &&
           run_until(&sig.done, 10000) && !sig.failed,
       "SIGNAL SIGTERM: OK");
    ok(run_until(&p2.exited, 10000) && p2.ex.signal == SIGTERM,
       "second agent sees EXIT by SIGTERM");
    /* The first agent hears nothing more of the process (a round trip to be sure). */
    ok(request(a1, WR_MSG_FILE_STAT, "/", &flush) != 0 && run_until(&flush.done, 10000),
       "first agent: round trip");
    ok(sleeper->n_exit == 0, "first agent: no EXIT for the process attached elsewhere");
    pctx_fini(&p2);
    wr_agent_close(a2);
    ok(c2.n_close == 0, "wr_agent_close: no on_close");
}

struct writer {
    struct wr_agent *a;
    uint32_t id;
    size_t total, sent;
    bool ready, finished;
    int drains;
    size_t max_pending;
    struct rctx r;
};

static uint8_t pattern(size_t i)
{
    return (uint8_t)(i * 7 + (i >> 13));
}

static void pump(struct writer *w)
{
    uint8_t chunk[WR_CHUNK_SIZE];

    while (w->sent < w->total && wr_agent_pending(w->a) < WR_AGENT_HIGH_WATER) {
        size_t n = w->total - w->sent < sizeof(chunk) ? w->total - w->sent : sizeof(chunk);
        for (size_t i = 0; i < n; i++)
            chunk[i] = pattern(w->sent + i);
        wr_agent_data(w->a, w->id, chunk, n);
        w->sent += n;
        if (wr_agent_pending(w->a) > w->max_pending)
            w->max_pending = wr_agent_pending(w->a);
    }
    if (w->sent == w->total && !w->finished) {
        w->finished = true;
        wr_agent_data_end(w->a, w->id);
    }
}

static void w_drain(struct wr_agent *a, void *ctx)
{
    struct writer *w = ctx;
    w->drains++;
    pump(w);
}

static void w_reply(void *ctx, const struct wr_frame_hdr *h, const uint8_t *p, bool final,
                    const struct wr_err *err)
{
    struct writer *w = ctx;

    r_reply(&w->r, h, p, final, err);
    if (!final && h != NULL && h->type == WR_MSG_OK) {
        w->ready = true;
        pump(w);
    }
}

/* One connection for the large transfer: 8 MiB written with backpressure, read back. */
static void test_files(struct wr_sandbox *sb)
{
    struct actx c = {0};
    struct wr_agent *a = agent_path(wr_sandbox_ctl_path(sb), &c);
    struct writer w = {0};
    struct rctx rd = {0};
    uv_timer_t resume;
    size_t start;
    struct wr_buf *b;
    struct wr_err err;
    bool same;

    if (a == NULL || !run_until(&c.ready, 10000) || !c.ready_ok) {
        ok(0, "files: agent");
        wr_agent_close(a);
        return;
    }
    w.a = a;
    w.total = 8 * MIB;
    wr_agent_on_drain(a, w_drain, &w);
    b = wr_agent_begin(a, WR_MSG_FILE_WRITE, &start);
    wr_msg_put_str(b, WR_TAG_PATH, "/tmp/big");
    wr_msg_put_u64(b, WR_TAG_MODE, 0600);
    w.id = wr_agent_end(a, start, w_reply, &w, &err);
    ok(w.id != 0, "FILE_WRITE sent");
    ok(run_until(&w.r.done, 60000), "FILE_WRITE 8 MiB: answered");
    ok(w.ready && w.r.n_inter == 1 && w.r.n_final == 1 && !w.r.failed &&
           w.r.final_type == WR_MSG_OK,
       "FILE_WRITE: ready OK, then final OK (%s)", w.r.failed ? w.r.err.msg : "");
    ok(w.sent == w.total && w.finished, "FILE_WRITE: every byte sent");
    ok(w.drains >= 1, "FILE_WRITE: backpressure, %d drain callbacks", w.drains);
    ok(w.max_pending >= WR_AGENT_HIGH_WATER &&
           w.max_pending < WR_AGENT_HIGH_WATER + 2 * WR_CHUNK_SIZE,
       "FILE_WRITE: queue bounded near the high mark (%zu)", w.max_pending);
    ok(wr_agent_pending(a) == 0, "FILE_WRITE: queue empty at the end");

    uv_timer_init(loop, &resume);
    resume.data = &rd;
    rd.a = a;
    rd.keep_data = true;
    rd.pause_reads = true;
    rd.resume_timer = &resume;
    ok(request(a, WR_MSG_FILE_READ, "/tmp/big", &rd) != 0, "FILE_READ sent");
    ok(run_until(&rd.done, 60000), "FILE_READ: answered");
    ok(!rd.failed && rd.n_stat == 1 && rd.size == 8 * MIB && rd.final_type == WR_MSG_OK,
       "FILE_READ: STAT of 8 MiB, final OK");
    same = rd.data.len == 8 * MIB;
    for (size_t i = 0; same && i < rd.data.len; i++)
        same = rd.data.data[i] == pattern(i);
    ok(same, "FILE_READ: the bytes written came back (%zu)", rd.data.len);
    ok(rd.pauses >= 4, "FILE_READ: paused and resumed %d times", rd.pauses);
    uv_close((uv_handle_t *)&resume, NULL);
    wr_buf_fini(&rd.data);
    wr_agent_close(a);
}

/* Destroy the sandbox under pending requests: each gets one error; processes hear nothing. */
static void test_destroy(struct wr_sandbox *sb, struct wr_agent *a, struct actx *c,
                         struct pctx *sleeper)
{
    struct rctx w[3] = {{0}}, st[2] = {{0}};
    struct pctx late;
    static const char *const sl[] = {"sleep", "1000", NULL};
    char path[64];
    bool all_opened = true, once = true, errors = true;
    struct wr_err err;

    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "/tmp/pending-%d", i);
        if (request(a, WR_MSG_FILE_WRITE, path, &w[i]) == 0)
            all_opened = false;
    }
    for (int i = 0; i < 3; i++)
        (void)run_until(&w[i].inter, 10000);
    for (int i = 0; i < 3; i++)
        all_opened = all_opened && w[i].n_inter == 1 && w[i].n_final == 0;
    ok(all_opened, "three FILE_WRITEs opened and pending");
    (void)request(a, WR_MSG_FILE_STAT, "/", &st[0]);
    (void)request(a, WR_MSG_FILE_STAT, "/etc", &st[1]);
    ok(spawn(a, &late, sl) == 0, "a spawn pending too");

    ok(wr_sandbox_destroy(sb, &err) == 0, "destroy the sandbox");
    ok(run_until(&c->closed, 10000), "on_close after the sandbox went away");
    ok(c->n_close == 1 && c->close_err.kind == WR_ESYS, "on_close once (%s)", c->close_err.msg);
    for (int i = 0; i < 3; i++) {
        once = once && w[i].n_final == 1;
        errors = errors && w[i].failed;
    }
    for (int i = 0; i < 2; i++)
        once = once && st[i].n_final == 1;
    ok(once, "every pending request: exactly one final callback");
    ok(errors, "the FILE_WRITEs: an error (%s)", w[0].err.msg);
    ok(late.n_started == 1 && (late.start_failed || late.id > 0), "the spawn: answered once");
    run_for(100);
    ok(sleeper->n_exit == 0 && sleeper->n_started == 1, "attached process: nothing after close");
    ok(!wr_agent_is_ready(a), "not ready after the loss");
    {
        static const char *const echo[] = {"echo", NULL};
        struct wr_spawn sp = {.argv = (char **)echo, .uid = -1, .gid = -1};
        struct rctx r = {0};
        size_t start;
        wr_agent_begin(a, WR_MSG_FILE_STAT, &start);
        ok(wr_agent_end(a, start, r_reply, &r, &err) == 0 && err.sys_errno == ENOTCONN,
           "request after the loss: refused");
        ok(wr_agent_spawn(a, &sp, &pcbs, &late, &err) < 0, "spawn after the loss: refused");
        run_for(20);
        ok(r.n_final == 0, "refused request: no callback");
    }
    for (int i = 0; i < 3; i++)
        wr_buf_fini(&w[i].data);
    pctx_fini(&late);
}

/* ---- a hostile init on a socketpair ---------------------------------------------------------- */

struct peer {
    int fd;
    struct wr_reader rd;
};

static void peer_send(struct peer *pp, struct wr_buf *b)
{
    size_t off = 0;

    for (int tries = 0; off < b->len && tries < 20000; tries++) {
        ssize_t n = write(pp->fd, b->data + off, b->len - off);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN)
            break; /* the agent closed */
        uv_run(loop, UV_RUN_NOWAIT);
        usleep(200);
    }
    b->len = 0;
}

/* The next frame from the agent: 1, or 0 (nothing within ~2 s), -1 (EOF or bad). */
static int peer_next(struct peer *pp, struct wr_frame_hdr *h, const uint8_t **p)
{
    uint8_t buf[65536];

    for (int i = 0; i < 2000; i++) {
        int rc = wr_reader_next(&pp->rd, h, p, NULL);
        ssize_t n;
        if (rc != 0)
            return rc;
        uv_run(loop, UV_RUN_NOWAIT);
        n = read(pp->fd, buf, sizeof(buf));
        if (n > 0)
            wr_reader_feed(&pp->rd, buf, (size_t)n);
        else if (n == 0)
            return -1;
        else
            usleep(1000);
    }
    return 0;
}

static struct wr_agent *peer_open(struct peer *pp, struct actx *c)
{
    int sv[2];
    struct wr_agent *a;

    memset(c, 0, sizeof(*c));
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return NULL;
    pp->fd = sv[1];
    (void)fcntl(pp->fd, F_SETFL, O_NONBLOCK);
    wr_reader_init(&pp->rd);
    a = agent_fd(sv[0], c);
    if (a != NULL)
        (void)run_until(&c->ready, 1000);
    return a;
}

static void peer_close(struct peer *pp, struct wr_agent *a)
{
    wr_agent_close(a);
    close(pp->fd);
    wr_reader_fini(&pp->rd);
    run_for(5);
}

/* Read the agent's SPAWN and answer OK with proc id `proc_id`. Returns the request id or 0. */
static uint32_t peer_accept_spawn(struct peer *pp, uint32_t proc_id)
{
    struct wr_frame_hdr h;
    const uint8_t *p;
    struct wr_buf b;
    size_t start;
    uint32_t id;

    if (peer_next(pp, &h, &p) != 1 || h.type != WR_MSG_SPAWN)
        return 0;
    id = h.id;
    wr_buf_init(&b);
    start = wr_msg_begin(&b, WR_MSG_OK, 0, id);
    wr_msg_put_u64(&b, WR_TAG_PROC_ID, proc_id);
    wr_msg_put_u64(&b, WR_TAG_PID, 42);
    (void)wr_msg_end(&b, start);
    peer_send(pp, &b);
    wr_buf_fini(&b);
    return id;
}

static void peer_output(struct peer *pp, uint32_t proc_id, size_t n)
{
    static uint8_t zero[WR_CHUNK_SIZE];
    struct wr_buf b;

    wr_buf_init(&b);
    while (n > 0) {
        size_t k = n < sizeof(zero) ? n : sizeof(zero);
        wr_frame_raw(&b, WR_MSG_OUTPUT, WR_FLAG_STDOUT, proc_id, zero, k);
        peer_send(pp, &b);
        n -= k;
    }
    wr_buf_fini(&b);
}

static void test_hostile_header(void)
{
    struct peer pp;
    struct actx c;
    struct wr_agent *a = peer_open(&pp, &c);
    struct rctx r = {0};
    static const uint8_t bad[12] = {0xff, 0xff, 0xff, 0xff, WR_MSG_OK, 0, 0, 0, 1, 0, 0, 0};
    struct wr_buf b;

    ok(a != NULL && c.ready_ok, "hostile: agent on a socketpair is ready");
    if (a == NULL)
        return;
    ok(request(a, WR_MSG_FILE_STAT, "/x", &r) != 0, "hostile: a request pending");
    wr_buf_init(&b);
    wr_buf_append(&b, bad, sizeof(bad));
    peer_send(&pp, &b);
    wr_buf_fini(&b);
    ok(run_until(&c.closed, 2000) && c.close_err.kind == WR_EPROTO,
       "hostile: a 4 GiB frame header closes with EPROTO (%s)", c.close_err.msg);
    ok(r.n_final == 1 && r.failed && r.err.kind == WR_EPROTO,
       "hostile: the pending request: one error");
    run_for(20);
    ok(c.n_close == 1 && r.n_final == 1, "hostile: nothing more");
    peer_close(&pp, a);
}

/* Unknown ids are dropped; OUTPUT past the window closes. */
static void test_hostile_window(void)
{
    struct peer pp;
    struct actx c;
    struct wr_agent *a = peer_open(&pp, &c);
    struct rctx r = {0};
    struct pctx p;
    struct wr_buf b;
    struct wr_stat st = {.type = WR_FT_FILE, .mode = 0644, .size = 3};
    static const char *const argv[] = {"x", NULL};
    struct wr_frame_hdr h;
    const uint8_t *pl;
    uint32_t id;

    if (a == NULL) {
        ok(0, "hostile window: agent");
        return;
    }
    id = request(a, WR_MSG_FILE_STAT, "/x", &r);
    ok(peer_next(&pp, &h, &pl) == 1 && h.type == WR_MSG_FILE_STAT && h.id == id,
       "hostile: the agent's FILE_STAT arrives with its id");
    peer_output(&pp, 99, 1000); /* a proc this connection does not own */
    wr_buf_init(&b);
    wr_msg_ok(&b, id + 100); /* a request never made */
    wr_exit_encode(&b, 99, &(struct wr_exit){.exit_code = 1});
    wr_stat_encode(&b, id, &st);
    peer_send(&pp, &b);
    ok(run_until(&r.done, 2000) && !r.failed && r.size == 3,
       "hostile: unknown proc and request ids dropped, the real reply delivered");
    ok(!c.closed, "hostile: still open");

    ok(spawn(a, &p, argv) == 0, "hostile: spawn sent");
    p.ack = false;
    p.store = false;
    ok(peer_accept_spawn(&pp, 5) != 0 && run_until(&p.started, 2000) && p.id == 5 && p.pid == 42,
       "hostile: spawn OK routed (proc 5, pid 42)");
    peer_output(&pp, 5, WR_OUTPUT_WINDOW + WR_CHUNK_SIZE);
    ok(run_until(&c.closed, 2000) && c.close_err.kind == WR_EPROTO,
       "hostile: OUTPUT beyond the window closes with EPROTO (%s)", c.close_err.msg);
    ok(p.total == WR_OUTPUT_WINDOW, "hostile: exactly the window was delivered (%zu)", p.total);
    ok(p.n_exit == 0, "hostile: no EXIT after the close");
    wr_buf_fini(&b);
    pctx_fini(&p);
    peer_close(&pp, a);
}

/* Acks come back once the window is returned; detach acks by itself. */
static void test_hostile_detach(void)
{
    struct peer pp;
    struct actx c;
    struct wr_agent *a = peer_open(&pp, &c);
    struct pctx p;
    static const char *const argv[] = {"x", NULL};
    struct wr_frame_hdr h;
    const uint8_t *pl;
    uint64_t acked = 0, v;
    struct wr_buf b;
    int rc;

    if (a == NULL) {
        ok(0, "detach: agent");
        return;
    }
    (void)spawn(a, &p, argv);
    p.ack = false;
    ok(peer_accept_spawn(&pp, 7) != 0 && run_until(&p.started, 2000), "detach: spawned");
    peer_output(&pp, 7, 1000);
    run_for(20);
    ok(p.total == 1000, "detach: output delivered before detach");
    wr_agent_detach(a, 7);
    peer_output(&pp, 7, 2 * WR_OUTPUT_WINDOW);
    wr_buf_init(&b);
    wr_exit_encode(&b, 7, &(struct wr_exit){.exit_code = 3});
    peer_send(&pp, &b);
    wr_buf_fini(&b);
    run_for(50);
    while ((rc = peer_next(&pp, &h, &pl)) == 1 && acked < 2 * WR_OUTPUT_WINDOW + 1000) {
        if (h.type == WR_MSG_ACK && h.id == 7 && wr_msg_get_u64(pl, h.len, WR_TAG_BYTES, &v) == 0)
            acked += v;
    }
    ok(acked == 2 * WR_OUTPUT_WINDOW + 1000, "detach: every byte acknowledged by the agent (%llu)",
       (unsigned long long)acked);
    ok(!c.closed, "detach: output past one window is fine when acknowledged");
    ok(p.total == 1000 && p.n_exit == 0, "detach: no output or EXIT after detach");
    pctx_fini(&p);
    peer_close(&pp, a);
}

/* Malformed payloads of EXIT and ERROR, and a reply that does not fit its request, close. */
static void test_hostile_payloads(void)
{
    for (int k = 0; k < 4; k++) {
        static const char *const what[] = {"EXIT without fields", "ERROR without ERRNO",
                                           "DATA for a FILE_STAT", "OUTPUT with stream 7"};
        static const char *const argv[] = {"x", NULL};
        struct peer pp;
        struct actx c;
        struct wr_agent *a = peer_open(&pp, &c);
        struct rctx r = {0};
        struct pctx p;
        struct wr_buf b;
        uint32_t id;
        size_t start;

        if (a == NULL) {
            ok(0, "hostile payloads: agent");
            continue;
        }
        (void)spawn(a, &p, argv);
        (void)peer_accept_spawn(&pp, 3);
        id = request(a, WR_MSG_FILE_STAT, "/x", &r);
        run_until(&p.started, 2000);
        wr_buf_init(&b);
        if (k == 0) {
            start = wr_msg_begin(&b, WR_MSG_EXIT, 0, 3);
            (void)wr_msg_end(&b, start);
        } else if (k == 1) {
            start = wr_msg_begin(&b, WR_MSG_ERROR, 0, id);
            wr_msg_put_str(&b, WR_TAG_MESSAGE, "no errno");
            (void)wr_msg_end(&b, start);
        } else if (k == 2) {
            wr_frame_raw(&b, WR_MSG_DATA, 0, id, "abc", 3);
        } else {
            wr_frame_raw(&b, WR_MSG_OUTPUT, 7, 3, "abc", 3);
        }
        peer_send(&pp, &b);
        wr_buf_fini(&b);
        ok(run_until(&c.closed, 2000) && c.close_err.kind == WR_EPROTO, "hostile: %s: EPROTO (%s)",
           what[k], c.close_err.msg);
        ok(r.n_final == 1 && r.failed && p.n_exit == 0 && p.n_output == 0,
           "hostile: %s: the request failed once, the process heard nothing", what[k]);
        pctx_fini(&p);
        peer_close(&pp, a);
    }
}

/* A peer reached by path that answers HELLO with another version. */
static void test_hostile_hello(void)
{
    char path[108];
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct actx c = {0};
    struct wr_agent *a;
    struct peer pp;
    struct wr_frame_hdr h;
    const uint8_t *pl;
    struct wr_buf b;
    size_t start;
    uint64_t v = 0;
    int lfd, got;

    snprintf(path, sizeof(path), "/tmp/warren-test-agent-%d.sock", (int)getpid());
    (void)unlink(path);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 4) < 0) {
        ok(0, "hello: listen");
        return;
    }
    a = agent_path(path, &c);
    run_for(50); /* connect completes into the backlog; HELLO is written */
    pp.fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    wr_reader_init(&pp.rd);
    got = peer_next(&pp, &h, &pl);
    if (got == 1)
        (void)wr_msg_get_u64(pl, h.len, WR_TAG_VERSION, &v);
    ok(got == 1 && h.type == WR_MSG_HELLO && v == WR_PROTO_VERSION,
       "hello: the agent sends HELLO v1");
    ok(!c.ready, "hello: not ready before init's HELLO");
    wr_buf_init(&b);
    start = wr_msg_begin(&b, WR_MSG_HELLO, 0, h.id);
    wr_msg_put_u64(&b, WR_TAG_VERSION, 2);
    (void)wr_msg_end(&b, start);
    peer_send(&pp, &b);
    wr_buf_fini(&b);
    ok(run_until(&c.ready, 2000) && !c.ready_ok && c.ready_err.kind == WR_EUNSUPPORTED,
       "hello: version 2 fails on_ready with unsupported (%s)", c.ready_err.msg);
    got = peer_next(&pp, &h, &pl);
    ok(got == 1 && h.type == WR_MSG_ERROR, "hello: the agent says ERROR before closing");
    ok(c.n_close == 0 && !wr_agent_is_ready(a), "hello: no on_close, not ready");
    peer_close(&pp, a);
    close(lfd);
    (void)unlink(path);
}

/* Remove the test's cgroup parent (empty once every sandbox is destroyed) from every hierarchy:
 * /sys/fs/cgroup/<name> on a unified host, /sys/fs/cgroup/<controller>/<name> under v1. */
static void remove_cgroup_parent(const char *name)
{
    char path[PATH_MAX];
    DIR *d = opendir("/sys/fs/cgroup");
    struct dirent *de;

    snprintf(path, sizeof(path), "/sys/fs/cgroup/%s", name);
    (void)rmdir(path);
    while (d != NULL && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/sys/fs/cgroup/%s/%s", de->d_name, name);
        if (rmdir(path) < 0 && errno != ENOENT && errno != ENOTDIR)
            ok(0, "remove the test's cgroup parent %s: %s", path, strerror(errno));
    }
    if (d != NULL)
        closedir(d);
}

int main(void)
{
    struct wr_runtime_config cfg = {.run_dir = "/run/warren-test-agent",
                                    .cgroup_parent = "warren-test-agent"};
    struct wr_runtime *rt = NULL;
    struct wr_sandbox *sb = NULL;
    struct wr_agent *a = NULL;
    struct actx c = {0};
    struct pctx sleeper;
    struct wr_err err;
    char id[64];
    static const char *const sl[] = {"sleep", "1000", NULL};

    if (geteuid() != 0) {
        printf("1..0 # SKIP not root\n");
        return 77;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    loop = uv_default_loop();
    uv_timer_init(loop, &deadline);

    /* The hostile peer first: it needs no sandbox. */
    test_hostile_header();
    test_hostile_window();
    test_hostile_detach();
    test_hostile_payloads();
    test_hostile_hello();

    if (find_paths() < 0) {
        ok(0, "find build/warren-init and build/images/busybox next to the test binary");
        goto out;
    }
    cfg.init_path = init_path;
    if (wr_runtime_open(&cfg, &rt, &err) < 0) {
        ok(0, "runtime open: %s", err.msg);
        goto out;
    }
    (void)wr_runtime_sweep(rt, NULL);
    snprintf(id, sizeof(id), "agent-%d", (int)getpid());
    sb = make_sandbox(rt, id);
    ok(sb != NULL, "sandbox created");
    if (sb == NULL)
        goto out;
    a = agent_fd(fcntl(wr_sandbox_ctl_fd(sb), F_DUPFD_CLOEXEC, 3), &c);
    ok(a != NULL && run_until(&c.ready, 5000) && c.ready_ok && c.n_ready == 1,
       "agent on the sandbox's connection: ready");
    if (a == NULL || !c.ready_ok)
        goto out;

    test_processes(a);
    test_window(a);
    test_stdin(a);
    test_stat_missing(a);
    ok(spawn(a, &sleeper, sl) == 0 && run_until(&sleeper.started, 10000) && !sleeper.start_failed,
       "sleep 1000 started on the first agent");
    test_second_agent(sb, a, &sleeper);
    test_files(sb);
    test_destroy(sb, a, &c, &sleeper);
    sb = NULL;
    pctx_fini(&sleeper);

out:
    wr_agent_close(a);
    if (sb != NULL && wr_sandbox_destroy(sb, &err) < 0)
        ok(0, "destroy: %s", err.msg);
    uv_close((uv_handle_t *)&deadline, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    ok(uv_loop_close(loop) == 0, "every handle closed (nothing left on the loop)");
    wr_runtime_close(rt);
    remove_cgroup_parent(cfg.cgroup_parent);
    return done();
}
