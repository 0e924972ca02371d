/* SPDX-License-Identifier: Apache-2.0 */
/* Compose services supervised by warren-init, end to end (as root): a real sandbox, the agent's
 * SERVICE, SERVICES_START and SERVICE_LIST, then what init does with them: a dependency on a
 * healthy service, restarts on failure with their limit, a failed dependency, an undefined one,
 * a command that cannot start, a service in a chroot with its own users (and a SPAWN in it),
 * the log files, the service's cgroup. Sandboxes live under /run/warren-test-services and cgroup
 * warren-test-services. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static void run_for(unsigned ms)
{
    bool never = false;
    (void)run_until(&never, ms);
}

/* ---- the agent ------------------------------------------------------------------------------- */

struct actx {
    bool ready, ready_ok, closed;
};

static void a_ready(struct wr_agent *a, const struct wr_err *err, void *ctx)
{
    struct actx *c = ctx;
    c->ready = true;
    c->ready_ok = err == NULL;
}

static void a_close(struct wr_agent *a, const struct wr_err *err, void *ctx)
{
    ((struct actx *)ctx)->closed = true;
}

/* A request's answer. */
struct done {
    bool done, failed;
    struct wr_err err;
};

static void on_done(void *ctx, const struct wr_err *err)
{
    struct done *d = ctx;
    d->done = true;
    d->failed = err != NULL;
    if (err != NULL)
        d->err = *err;
}

/* A process: its stdout and exit. */
struct pctx {
    struct wr_agent *a;
    bool started, exited, start_failed;
    struct wr_err err;
    struct wr_exit ex;
    struct wr_buf out;
};

static void p_started(void *ctx, uint32_t proc_id, int64_t pid, const struct wr_err *err)
{
    struct pctx *p = ctx;
    p->started = true;
    if (err != NULL) {
        p->start_failed = true;
        p->err = *err;
    }
}

static void p_output(void *ctx, uint32_t proc_id, int stream, const uint8_t *d, size_t n)
{
    struct pctx *p = ctx;
    wr_buf_append(&p->out, d, n);
    wr_agent_ack(p->a, proc_id, n);
}

static void p_exit(void *ctx, uint32_t proc_id, const struct wr_exit *ex)
{
    struct pctx *p = ctx;
    p->exited = true;
    p->ex = *ex;
}

static const struct wr_agent_proc_cbs pcbs = {p_started, p_output, p_exit};

/* Run argv (in service, or none), env overlaid; its stdout into p->out (NUL-terminated).
 * Returns true once it exited; p says how. */
static bool run_in(struct wr_agent *a, struct pctx *p, const char *service, const char *const *argv,
                   const char *const *env)
{
    struct wr_spawn sp = {.argv = (char **)argv,
                          .env = (char **)env,
                          .uid = -1,
                          .gid = -1,
                          .service = (char *)service};
    struct wr_err err;

    memset(p, 0, sizeof(*p));
    p->a = a;
    wr_buf_init(&p->out);
    if (wr_agent_spawn(a, &sp, &pcbs, p, &err) < 0) {
        printf("# spawn: %s\n", err.msg);
        return false;
    }
    if (!run_until(&p->started, 10000) || p->start_failed)
        return false;
    if (!run_until(&p->exited, 10000))
        return false;
    wr_buf_append(&p->out, "", 1);
    return true;
}

static bool sh(struct wr_agent *a, struct pctx *p, const char *script)
{
    const char *const argv[] = {"/bin/sh", "-c", script, NULL};
    return run_in(a, p, NULL, argv, NULL) && p->ex.signal == 0 && p->ex.exit_code == 0;
}

/* ---- SERVICE_LIST ---------------------------------------------------------------------------- */

struct svc_state {
    char name[64], state[32], message[256];
    int64_t pid;
    uint64_t restarts;
    bool has_exit;
    int64_t exit_code, signal;
};

struct listing {
    bool done, failed;
    size_t n;
    struct svc_state s[WR_SERVICES_MAX];
};

static void on_list(void *ctx, const struct wr_service_info *infos, size_t n,
                    const struct wr_err *err)
{
    struct listing *l = ctx;

    l->done = true;
    l->failed = err != NULL;
    l->n = n;
    for (size_t i = 0; i < n && i < WR_SERVICES_MAX; i++) {
        struct svc_state *s = &l->s[i];
        snprintf(s->name, sizeof(s->name), "%s", infos[i].name);
        snprintf(s->state, sizeof(s->state), "%s", infos[i].state);
        snprintf(s->message, sizeof(s->message), "%s",
                 infos[i].message != NULL ? infos[i].message : "");
        s->pid = infos[i].pid;
        s->restarts = infos[i].restarts;
        s->has_exit = infos[i].has_exit;
        s->exit_code = infos[i].exit_code;
        s->signal = infos[i].signal;
    }
}

static bool list(struct wr_agent *a, struct listing *l)
{
    struct wr_err err;

    memset(l, 0, sizeof(*l));
    if (wr_agent_service_list(a, on_list, l, &err) < 0) {
        printf("# service list: %s\n", err.msg);
        return false;
    }
    return run_until(&l->done, 10000) && !l->failed;
}

static const struct svc_state *find(const struct listing *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->s[i].name, name) == 0)
            return &l->s[i];
    return NULL;
}

/* Poll SERVICE_LIST until service `name` is in `state` (or ms pass). */
static bool wait_state(struct wr_agent *a, const char *name, const char *state, unsigned ms,
                       struct listing *l)
{
    for (unsigned waited = 0;; waited += 50) {
        const struct svc_state *s;
        if (!list(a, l))
            return false;
        s = find(l, name);
        if (s != NULL && strcmp(s->state, state) == 0)
            return true;
        if (waited >= ms) {
            printf("# %s is %s (%s), not %s\n", name, s ? s->state : "missing", s ? s->message : "",
                   state);
            return false;
        }
        run_for(50);
    }
}

/* ---- defining ----------------------------------------------------------------------------------
 */

static int define(struct wr_agent *a, const struct wr_service *s, const int *fds, struct done *d)
{
    struct wr_err err;

    memset(d, 0, sizeof(*d));
    if (wr_agent_service_define(a, s, fds, on_done, d, &err) < 0) {
        printf("# define %s: %s\n", s->name, err.msg);
        return -1;
    }
    return run_until(&d->done, 10000) ? 0 : -1;
}

static bool define_ok(struct wr_agent *a, const struct wr_service *s, const int *fds)
{
    struct done d;

    if (define(a, s, fds, &d) < 0 || d.failed) {
        printf("# define %s: %s\n", s->name, d.err.msg);
        return false;
    }
    return true;
}

/* How many times text is in the service's log file (-1: it cannot be read). */
static int log_count(struct wr_agent *a, const char *name, const char *text)
{
    char path[128];
    const char *const argv[] = {"cat", path, NULL};
    struct pctx p;
    int n = 0;

    snprintf(path, sizeof(path), "/.warren/logs/%s.log", name);
    if (!run_in(a, &p, NULL, argv, NULL) || p.ex.exit_code != 0) {
        wr_buf_fini(&p.out);
        return -1;
    }
    for (const char *at = (const char *)p.out.data; (at = strstr(at, text)) != NULL; at++)
        n++;
    if (n == 0)
        printf("# %s: no \"%s\" in:\n%s\n", path, text, (const char *)p.out.data);
    wr_buf_fini(&p.out);
    return n;
}

static bool log_has(struct wr_agent *a, const char *name, const char *text)
{
    return log_count(a, name, text) > 0;
}

/* ---- the test -------------------------------------------------------------------------------- */

static void test_services(struct wr_runtime *rt, struct wr_sandbox *sb, struct wr_agent *a)
{
    static char *a_argv[] = {"/bin/sh", "-c", "echo up; sleep 1000", NULL};
    static char *a_health[] = {"test", "-e", "/tmp/ok", NULL};
    static char *b_argv[] = {"/bin/sh", "-c", "echo b is up; sleep 1000", NULL};
    static char *b_deps[] = {"a=1", NULL};
    static char *c_argv[] = {"/bin/sh", "-c", "echo crash; exit 3", NULL};
    static char *d_argv[] = {"true", NULL};
    static char *d_deps[] = {"c=2", NULL};
    static char *e_argv[] = {"/bin/sh", "-c", "echo in-root; sleep 1000", NULL};
    static char *e_env[] = {"PATH=/bin", "MARK=svc", NULL};
    static char *f_deps[] = {"nope=0", NULL};
    static char *g_argv[] = {"/no/such/command", NULL};
    static char *h_argv[] = {"/bin/sh", "-c", "echo h; exit 0", NULL};
    static char *t_argv[] = {"sleep", "1000", NULL};
    static char *t_health[] = {"sleep", "10", NULL};
    static char *k_argv[] = {"/bin/sh", "-c", "sleep 0.3; exit 1", NULL};
    static char *k_health[] = {"sleep", "5", NULL};
    struct wr_service sa = {.name = "a",
                            .sp = {.argv = a_argv, .uid = -1, .gid = -1},
                            .health_argv = a_health,
                            .health_interval_ms = 100,
                            .health_timeout_ms = 2000,
                            .health_retries = 2};
    struct wr_service sb_ = {
        .name = "b", .sp = {.argv = b_argv, .uid = -1, .gid = -1}, .depends = b_deps};
    struct wr_service sc = {.name = "c",
                            .sp = {.argv = c_argv, .uid = -1, .gid = -1},
                            .restart = WR_RESTART_ON_FAILURE,
                            .restart_max = 2};
    struct wr_service sd = {
        .name = "d", .sp = {.argv = d_argv, .uid = -1, .gid = -1}, .depends = d_deps};
    struct wr_service se = {
        .name = "e",
        .root = "/srv/r",
        .sp = {.argv = e_argv, .env = e_env, .user = "svcuser", .uid = -1, .gid = -1}};
    struct wr_service sf = {
        .name = "f", .sp = {.argv = d_argv, .uid = -1, .gid = -1}, .depends = f_deps};
    struct wr_service sg = {.name = "g", .sp = {.argv = g_argv, .uid = -1, .gid = -1}};
    struct wr_service sh_ = {
        .name = "h", .sp = {.argv = h_argv, .uid = -1, .gid = -1}, .restart = WR_RESTART_ALWAYS};
    struct wr_service st = {.name = "t",
                            .sp = {.argv = t_argv, .uid = -1, .gid = -1},
                            .health_argv = t_health,
                            .health_interval_ms = 100,
                            .health_timeout_ms = 200,
                            .health_retries = 1};
    struct wr_service sk = {.name = "k",
                            .sp = {.argv = k_argv, .uid = -1, .gid = -1},
                            .health_argv = k_health,
                            .health_interval_ms = 100,
                            .health_timeout_ms = 5000};
    int fds[WR_CMD_CGROUP_FDS];
    size_t nfds = 0;
    bool have_cgroup;
    struct listing l;
    const struct svc_state *s;
    struct pctx p;
    struct done d;
    struct wr_err err;

    /* A tree for e: busybox and a passwd of its own, no /etc/motd (the sandbox's has one). */
    ok(sh(a, &p,
          "set -e; mkdir -p /srv/r/bin /srv/r/etc /srv/r/tmp /srv/r/home/svc; "
          "cp /bin/busybox /srv/r/bin/; "
          "for x in sh id cat test echo sleep env; do ln -s busybox /srv/r/bin/$x; done; "
          "printf 'root:x:0:0::/root:/bin/sh\\nsvcuser:x:1234:1234::/home/svc:/bin/sh\\n' "
          ">/srv/r/etc/passwd; printf 'root:x:0:\\nsvc:x:1234:\\n' >/srv/r/etc/group"),
       "a tree for the chrooted service");
    wr_buf_fini(&p.out);

    /* a's processes (and its healthchecks) go into a cgroup of their own */
    have_cgroup =
        wr_sandbox_cmd_cgroup_create(rt, wr_sandbox_id(sb), "svc-a", 0, 0, fds, &nfds, &err) == 0;
    if (!have_cgroup)
        printf("# no command cgroup: %s\n", err.msg);
    sa.sp.nfds = have_cgroup ? (uint32_t)nfds : 0;
    sa.sp.cgroup = have_cgroup ? "svc-a" : NULL;

    ok(define_ok(a, &sa, have_cgroup ? fds : NULL), "define a (a healthcheck, a cgroup)");
    ok(define_ok(a, &sb_, NULL), "define b (depends on a being healthy)");
    ok(define_ok(a, &sc, NULL), "define c (crashes, on-failure:2)");
    ok(define_ok(a, &sd, NULL), "define d (depends on c completing)");
    ok(define_ok(a, &se, NULL), "define e (in /srv/r)");
    ok(define_ok(a, &sf, NULL), "define f (depends on an undefined service)");
    ok(define_ok(a, &sg, NULL), "define g (a missing command)");
    ok(define_ok(a, &sh_, NULL), "define h (exits 0, restart always)");
    ok(define_ok(a, &st, NULL), "define t (its healthcheck times out)");
    ok(define_ok(a, &sk, NULL), "define k (exits during its healthcheck)");
    ok(define(a, &sb_, NULL, &d) == 0 && d.failed && d.err.sys_errno == EEXIST,
       "define b again: EEXIST (%s)", d.err.msg);

    ok(list(a, &l) && l.n == 10, "SERVICE_LIST before the start: 10 services");
    ok(l.n == 10 && strcmp(l.s[0].name, "a") == 0 && strcmp(l.s[9].name, "k") == 0,
       "SERVICE_LIST: in definition order");
    ok(l.n == 10 && strcmp(l.s[0].state, "waiting") == 0 && l.s[0].pid == 0 && !l.s[0].has_exit,
       "SERVICE_LIST: a waits, no pid, no exit");

    memset(&d, 0, sizeof(d));
    ok(wr_agent_services_start(a, on_done, &d, &err) == 0 && run_until(&d.done, 10000) && !d.failed,
       "SERVICES_START: OK");
    memset(&d, 0, sizeof(d));
    ok(wr_agent_services_start(a, on_done, &d, &err) == 0 && run_until(&d.done, 10000) && !d.failed,
       "SERVICES_START again: EALREADY, a success to the client");
    {
        static char *x_argv[] = {"true", NULL};
        struct wr_service sx = {.name = "x", .sp = {.argv = x_argv, .uid = -1, .gid = -1}};
        ok(define(a, &sx, NULL, &d) == 0 && d.failed && d.err.sys_errno == EALREADY,
           "define after the start: EALREADY (%s)", d.err.msg);
    }

    /* c: three runs (two restarts, after 100 and 200 ms), then failed; d fails with it */
    ok(wait_state(a, "c", "failed", 5000, &l), "c: failed in the end");
    s = find(&l, "c");
    ok(s != NULL && s->restarts == 2 && s->has_exit && s->exit_code == 3 && s->pid == 0 &&
           strcmp(s->message, "exited with code 3") == 0,
       "c: restarted twice, exit code 3 (%llu restarts)",
       s ? (unsigned long long)s->restarts : 0ull);
    ok(wait_state(a, "d", "failed", 2000, &l) &&
           strcmp(find(&l, "d")->message, "dependency c failed") == 0,
       "d: failed, \"dependency c failed\"");
    s = find(&l, "f");
    ok(s != NULL && strcmp(s->state, "failed") == 0 &&
           strcmp(s->message, "dependency nope is not defined") == 0,
       "f: failed, \"%s\"", s ? s->message : "");
    s = find(&l, "g");
    ok(s != NULL && strcmp(s->state, "failed") == 0 &&
           strcmp(s->message, "exec `/no/such/command`: No such file or directory") == 0 &&
           s->has_exit && s->exit_code == 127,
       "g: failed, \"%s\", code 127", s ? s->message : "");
    s = find(&l, "h");
    ok(s != NULL && s->restarts >= 1 &&
           (strcmp(s->state, "running") == 0 || strcmp(s->state, "restarting") == 0),
       "h: restarted (%s, %llu restarts)", s ? s->state : "",
       s ? (unsigned long long)s->restarts : 0ull);

    /* t's check outlives its timeout: killed, a failure; k's check dies with k */
    ok(wait_state(a, "t", "unhealthy", 3000, &l), "t: unhealthy (its check timed out)");
    ok(wait_state(a, "k", "failed", 3000, &l), "k: failed (exit 1, no restart)");
    run_for(100);
    ok(sh(a, &p, "ps | grep -q '[s]leep 1000$'"), "ps shows t's own process");
    wr_buf_fini(&p.out);
    ok(sh(a, &p, "! ps | grep -q '[s]leep 5$'"), "k's running healthcheck was killed with it");
    wr_buf_fini(&p.out);
    /* unhealthy within 3 s of a 10 s check: the first was killed at 200 ms (and its reap
     * counted); the next is the only one */
    ok(sh(a, &p, "test $(ps | grep -c '[s]leep 10$') -le 1"), "t: one healthcheck at a time");
    wr_buf_fini(&p.out);

    /* a has no /tmp/ok: unhealthy after two failed checks; b waits for it */
    ok(wait_state(a, "a", "unhealthy", 3000, &l), "a: unhealthy without /tmp/ok");
    s = find(&l, "a");
    ok(s != NULL && s->pid > 0, "a: running, pid %lld", s ? (long long)s->pid : 0ll);
    s = find(&l, "b");
    ok(s != NULL && strcmp(s->state, "waiting") == 0 &&
           strcmp(s->message, "waiting for a to be healthy") == 0 && s->pid == 0,
       "b: waiting, \"%s\"", s ? s->message : "");
    ok(sh(a, &p, "touch /tmp/ok"), "touch /tmp/ok");
    wr_buf_fini(&p.out);
    ok(wait_state(a, "a", "healthy", 3000, &l), "a: healthy");
    ok(wait_state(a, "b", "running", 3000, &l), "b: running once a is healthy");
    s = find(&l, "b");
    ok(s != NULL && s->pid > 0 && s->message[0] == '\0', "b: a pid, no message");

    /* e runs in its root, as its user */
    ok(wait_state(a, "e", "running", 3000, &l), "e: running");
    {
        const char *const argv[] = {"sh", "-c",
                                    "id -u; echo $MARK $OTHER $HOME; pwd; "
                                    "test -e /etc/motd && echo leaked || echo chrooted",
                                    NULL};
        const char *const env[] = {"OTHER=req", NULL};
        ok(run_in(a, &p, "e", argv, env) && p.ex.exit_code == 0, "SPAWN in e: exits 0");
        ok(p.out.len > 0 && strcmp((const char *)p.out.data,
                                   "1234\nsvc req /home/svc\n/home/svc\nchrooted\n") == 0,
           "SPAWN in e: its user, its environment, chrooted (%s)",
           p.out.len > 0 ? (const char *)p.out.data : "");
        wr_buf_fini(&p.out);
    }
    {
        const char *const argv[] = {"true", NULL};
        struct wr_spawn sp = {.argv = (char **)argv, .uid = -1, .gid = -1, .service = "nope"};
        memset(&p, 0, sizeof(p));
        p.a = a;
        wr_buf_init(&p.out);
        ok(wr_agent_spawn(a, &sp, &pcbs, &p, &err) == 0 && run_until(&p.started, 10000) &&
               p.start_failed && p.err.sys_errno == ENOENT &&
               strstr(p.err.msg, "no service `nope`") != NULL,
           "SPAWN in an undefined service: ENOENT (%s)", p.err.msg);
        wr_buf_fini(&p.out);
    }

    /* the logs: the processes' output and init's notes */
    ok(log_has(a, "a", "up\n"), "a.log: the output");
    ok(log_has(a, "b", "b is up\n"), "b.log: the output");
    ok(log_count(a, "c", "crash\n") == 3, "c.log: three runs");
    ok(log_has(a, "c", "warren-init: exited with code 3; restarting in 100 ms\n") &&
           log_has(a, "c", "warren-init: exited with code 3; restarting in 200 ms\n") &&
           log_has(a, "c", "warren-init: exited with code 3\n"),
       "c.log: init's notes of the restarts and the end");
    ok(log_has(a, "e", "in-root\n"), "e.log: the output of the chrooted service");
    ok(log_has(a, "g", "warren-init: exec `/no/such/command`: No such file or directory\n"),
       "g.log: the exec failure");
    ok(log_has(a, "a", "warren-init: unhealthy") && log_has(a, "a", "healthy again"),
       "a.log: unhealthy, then healthy again");

    if (have_cgroup) {
        uint64_t cpu_ns = 0, peak = 0;
        ok(wr_sandbox_cmd_cgroup_end(rt, wr_sandbox_id(sb), "svc-a", &cpu_ns, &peak, &err) == 0 &&
               (cpu_ns > 0 || peak > 0),
           "a's cgroup was used (%llu ns, %llu bytes)", (unsigned long long)cpu_ns,
           (unsigned long long)peak);
    }
}

/* ---- setup ----------------------------------------------------------------------------------- */

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
    *slash = '\0';
    snprintf(p, sizeof(p), "%s/../warren-init", exe);
    if (realpath(p, init_path) == NULL)
        return -1;
    snprintf(p, sizeof(p), "%s/../images/busybox", exe);
    if (realpath(p, image_path) == NULL)
        return -1;
    return 0;
}

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
    struct wr_runtime_config cfg = {.run_dir = "/run/warren-test-services",
                                    .cgroup_parent = "warren-test-services"};
    struct wr_runtime *rt = NULL;
    struct wr_sandbox *sb = NULL;
    struct wr_agent *a = NULL;
    struct actx c = {0};
    struct wr_err err;
    char id[64];

    if (geteuid() != 0) {
        printf("1..0 # SKIP not root\n");
        return 77;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    loop = uv_default_loop();
    uv_timer_init(loop, &deadline);

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
    snprintf(id, sizeof(id), "services-%d", (int)getpid());
    {
        const char *layers[] = {image_path};
        struct wr_sandbox_spec spec = {.id = id,
                                       .layers = layers,
                                       .n_layers = 1,
                                       .memory_bytes = 512ull * MIB,
                                       .pids_max = 256};
        if (wr_sandbox_create(rt, &spec, &sb, &err) < 0)
            printf("# create %s: %s\n", id, err.msg);
    }
    ok(sb != NULL, "sandbox created");
    if (sb == NULL)
        goto out;
    {
        struct wr_agent_config acfg = {.loop = loop,
                                       .fd = fcntl(wr_sandbox_ctl_fd(sb), F_DUPFD_CLOEXEC, 3),
                                       .on_ready = a_ready,
                                       .on_close = a_close,
                                       .ctx = &c};
        if (wr_agent_open(&acfg, &a, &err) < 0)
            printf("# agent open: %s\n", err.msg);
    }
    ok(a != NULL && run_until(&c.ready, 5000) && c.ready_ok, "agent ready");
    if (a == NULL || !c.ready_ok)
        goto out;

    test_services(rt, sb, a);
    ok(!c.closed, "the connection stayed up");

out:
    wr_agent_close(a);
    if (sb != NULL && wr_sandbox_destroy(sb, &err) < 0)
        ok(0, "destroy: %s", err.msg);
    uv_close((uv_handle_t *)&deadline, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    ok(uv_loop_close(loop) == 0, "every handle closed");
    wr_runtime_close(rt);
    remove_cgroup_parent(cfg.cgroup_parent);
    return done();
}
