/* SPDX-License-Identifier: Apache-2.0 */
/* Compose services: warren-init starts each defined service once its dependencies allow, keeps it
 * running under its restart policy (with a backoff), runs its healthcheck, and appends what its
 * process writes, and notes of its own, to /.warren/logs/<name>.log. Processes start through
 * init_exec_start (spawn.c), chrooted into the service's root; nothing here blocks the loop for
 * longer than a child's few syscalls before its exec. Deadlines (restarts, healthchecks and their
 * timeouts) become the epoll timeout of main.c's loop. See docs/design/init.md, "Services". */
#include "service.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"

#define LOG_DIR "/.warren/logs"

#define MS 1000000ull /* ns */

#define BACKOFF_FIRST_MS 100u
#define BACKOFF_MAX_MS   10000u
#define BACKOFF_RESET_NS (10000 * MS) /* a process that ran this long restarts after the first */

#define HEALTH_INTERVAL_MS 30000u
#define HEALTH_TIMEOUT_MS  30000u
#define HEALTH_RETRIES     3u

/* The exit status a start that failed before exec is reported with (a shell's "not found"). */
#define START_FAILED_CODE 127

enum svc_state {
    SVC_WAITING,    /* not started: services not started yet, or dependencies not met */
    SVC_STARTING,   /* running, its healthcheck has not passed yet (nor failed enough) */
    SVC_RUNNING,    /* running, no healthcheck */
    SVC_HEALTHY,    /* running, the last healthcheck passed */
    SVC_UNHEALTHY,  /* running, `retries` healthchecks in a row failed */
    SVC_RESTARTING, /* ended; starts again at restart_at */
    SVC_EXITED,     /* ended with code 0, not restarted */
    SVC_FAILED,     /* ended otherwise, or could not start, or a dependency failed */
};

static const char *const state_names[] = {
    [SVC_WAITING] = "waiting", [SVC_STARTING] = "starting",   [SVC_RUNNING] = "running",
    [SVC_HEALTHY] = "healthy", [SVC_UNHEALTHY] = "unhealthy", [SVC_RESTARTING] = "restarting",
    [SVC_EXITED] = "exited",   [SVC_FAILED] = "failed",
};

struct svc {
    struct wr_service def;
    int cg_fds[WR_SPAWN_FDS_MAX]; /* its cgroup.procs files: every start and healthcheck joins */
    unsigned ncg;
    enum svc_state state;
    char *message; /* why it waits or failed, or NULL */
    pid_t pid;     /* its process, 0 if none */
    uint64_t start_ns;
    bool ever_started; /* a process of it exec'd: a STARTED dependency on it is met */
    uint64_t restarts;
    bool has_exit;
    int status;          /* wait status of the last exit */
    uint32_t backoff_ms; /* the next restart's delay; 0: BACKOFF_FIRST_MS */
    uint64_t restart_at; /* SVC_RESTARTING: when to start again */
    /* healthcheck */
    pid_t hc_pid;         /* running check, 0 if none */
    bool hc_stale;        /* the process it checked has ended: its result is ignored */
    bool hc_killed;       /* timed out and SIGKILLed: a failure once reaped */
    uint64_t hc_deadline; /* hc_pid: its timeout */
    uint64_t hc_next;     /* no check running: when the next starts */
    uint32_t hc_failures; /* in a row, outside the start period */
};

static struct svc *svcs[WR_SERVICES_MAX];
static size_t nsvcs;
static bool started; /* SERVICES_START came */

static struct svc *find_n(const char *name, size_t len)
{
    for (size_t i = 0; i < nsvcs; i++)
        if (strncmp(svcs[i]->def.name, name, len) == 0 && svcs[i]->def.name[len] == '\0')
            return svcs[i];
    return NULL;
}

const struct wr_service *init_service_get(const char *name)
{
    struct svc *sv = find_n(name, strlen(name));
    return sv != NULL ? &sv->def : NULL;
}

static uint64_t interval_ns(const struct svc *sv)
{
    return (sv->def.health_interval_ms ? sv->def.health_interval_ms : HEALTH_INTERVAL_MS) * MS;
}

static uint64_t timeout_ns(const struct svc *sv)
{
    return (sv->def.health_timeout_ms ? sv->def.health_timeout_ms : HEALTH_TIMEOUT_MS) * MS;
}

static uint32_t retries(const struct svc *sv)
{
    return sv->def.health_retries ? sv->def.health_retries : HEALTH_RETRIES;
}

static void set_message(struct svc *sv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Set (fmt) or clear (NULL) the message; unchanged text is not reallocated. */
static void set_message(struct svc *sv, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    if (fmt == NULL) {
        free(sv->message);
        sv->message = NULL;
        return;
    }
    va_start(ap, fmt);
    (void)vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (sv->message != NULL && strcmp(sv->message, buf) == 0)
        return;
    free(sv->message);
    sv->message = xstrdup(buf);
}

/* ---- log files --------------------------------------------------------------------------- */

/* The service's log file, opened to append (LOG_DIR made if missing), or -1 with errno. Only a
 * regular file: opened without blocking (a FIFO put there cannot stall init) or following a
 * symbolic link. */
static int open_log(const struct svc *sv)
{
    char path[sizeof(LOG_DIR) + WR_SERVICE_NAME_MAX + 8];
    struct stat st;
    int fd, fl;

    (void)snprintf(path, sizeof(path), "%s/%s.log", LOG_DIR, sv->def.name);
    if (mkdir("/.warren", 0755) < 0 && errno != EEXIST)
        return -1;
    if (mkdir(LOG_DIR, 0755) < 0 && errno != EEXIST)
        return -1;
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (fl = fcntl(fd, F_GETFL)) < 0 ||
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        (void)close(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
}

static void note(const struct svc *sv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Append "warren-init: <text>\n" to the service's log (and init's own at info). */
static void note(const struct svc *sv, const char *fmt, ...)
{
    char line[1200];
    va_list ap;
    int n = snprintf(line, sizeof(line), "warren-init: ");
    _cleanup_close_ int fd = -1;

    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if ((size_t)n > sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    log_info("service %s: %.*s", sv->def.name, n - 14, line + 13);
    fd = open_log(sv);
    if (fd < 0 || write(fd, line, (size_t)n) < 0)
        log_debug("service %s: log: %s", sv->def.name, strerror(errno));
}

/* "exited with code 1", "killed by signal 9" */
static void describe_exit(int status, char *buf, size_t size)
{
    if (WIFSIGNALED(status))
        (void)snprintf(buf, size, "killed by signal %d", WTERMSIG(status));
    else
        (void)snprintf(buf, size, "exited with code %d", WEXITSTATUS(status));
}

/* ---- starting and ending ------------------------------------------------------------------- */

/* After an exit (or a failed start, success false): restart as the policy says, or end. what is
 * told in the log, followed by the restart's delay. */
static void ended(struct svc *sv, bool success, uint64_t ran_ns, const char *what, uint64_t now)
{
    bool restart = false;
    uint32_t delay;

    switch (sv->def.restart) {
    case WR_RESTART_ALWAYS:
    case WR_RESTART_UNLESS_STOPPED:
        restart = true;
        break;
    case WR_RESTART_ON_FAILURE:
        restart = !success && (sv->def.restart_max == 0 || sv->restarts < sv->def.restart_max);
        break;
    default:
        break;
    }
    if (!restart) {
        sv->state = success ? SVC_EXITED : SVC_FAILED;
        if (success)
            set_message(sv, NULL);
        else
            set_message(sv, "%s", what);
        note(sv, "%s", what);
        return;
    }
    if (ran_ns >= BACKOFF_RESET_NS || sv->backoff_ms == 0)
        sv->backoff_ms = BACKOFF_FIRST_MS;
    delay = sv->backoff_ms;
    sv->backoff_ms = delay >= BACKOFF_MAX_MS / 2 ? BACKOFF_MAX_MS : delay * 2;
    sv->restarts++;
    sv->restart_at = now + delay * MS;
    sv->state = SVC_RESTARTING;
    note(sv, "%s; restarting in %u ms", what, delay);
}

/* A start that could not even clone (or open /dev/null): the sandbox is short of pids or fds for
 * now. Tried again after the backoff whatever the policy; not a restart. */
static void start_later(struct svc *sv, const char *why, uint64_t now)
{
    uint32_t delay;

    if (sv->backoff_ms == 0)
        sv->backoff_ms = BACKOFF_FIRST_MS;
    delay = sv->backoff_ms;
    sv->backoff_ms = delay >= BACKOFF_MAX_MS / 2 ? BACKOFF_MAX_MS : delay * 2;
    sv->restart_at = now + delay * MS;
    sv->state = SVC_RESTARTING;
    set_message(sv, "%s", why);
    note(sv, "%s; trying again in %u ms", why, delay);
}

/* A start that failed before exec (its user, root, cwd or command): an exit with code 127. */
static void start_failed(struct svc *sv, const char *why, uint64_t now)
{
    sv->has_exit = true;
    sv->status = START_FAILED_CODE << 8;
    set_message(sv, "%s", why);
    ended(sv, false, 0, why, now);
}

/* Start a process of sv (its own, or its healthcheck with health) with stdio fds. Returns its
 * pid, -1 (clone failed) or -2 (it failed before exec) with err. */
static pid_t exec_in(struct svc *sv, bool health, const int stdio[3], uint64_t *start_ns,
                     struct wr_err *err)
{
    struct init_user u;
    struct init_exec x = {.argv = health ? sv->def.health_argv : sv->def.sp.argv,
                          .root = sv->def.root,
                          .cwd = sv->def.sp.cwd,
                          .user = &u,
                          .cg_fds = sv->cg_fds,
                          .ncg = sv->ncg};
    pid_t pid;

    if (init_user_resolve_in(sv->def.root, sv->def.sp.user, sv->def.sp.uid, sv->def.sp.gid, NULL,
                             &u, err) < 0)
        return -2;
    x.env = init_env_build(sv->def.sp.env, NULL, &u, INIT_ENV_PATH);
    memcpy(x.stdio, stdio, sizeof(x.stdio));
    pid = init_exec_start(&x, start_ns, err);
    init_env_free(x.env);
    init_user_fini(&u);
    return pid;
}

static void svc_start(struct svc *sv, uint64_t now)
{
    _cleanup_close_ int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    _cleanup_close_ int log = -1;
    struct wr_err err = {0};
    uint64_t start_ns;
    pid_t pid;

    if (null < 0)
        goto no_null;
    log = open_log(sv);
    if (log < 0) {
        log_warn("service %s: %s/%s.log: %s", sv->def.name, LOG_DIR, sv->def.name, strerror(errno));
        log = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (log < 0)
            goto no_null;
    }
    pid = exec_in(sv, false, (const int[3]){null, log, log}, &start_ns, &err);
    if (pid == -1) {
        start_later(sv, err.msg, now);
        return;
    }
    if (pid < 0) {
        start_failed(sv, err.msg, now);
        return;
    }
    sv->pid = pid;
    sv->start_ns = start_ns;
    sv->ever_started = true;
    sv->state = sv->def.health_argv != NULL ? SVC_STARTING : SVC_RUNNING;
    sv->hc_failures = 0;
    sv->hc_next = start_ns + interval_ns(sv);
    set_message(sv, NULL);
    log_debug("service %s: started, pid %d", sv->def.name, (int)pid);
    return;
no_null:
    (void)snprintf(err.msg, sizeof(err.msg), "open /dev/null: %s", strerror(errno));
    start_later(sv, err.msg, now);
}

/* Its process was reaped. */
static void svc_exited(struct svc *sv, int status, uint64_t now)
{
    char what[64];
    bool success = WIFEXITED(status) && WEXITSTATUS(status) == 0;

    sv->pid = 0;
    sv->has_exit = true;
    sv->status = status;
    if (sv->hc_pid > 0) {
        /* Its healthcheck checks nothing any more. */
        if (!sv->hc_killed && kill(-sv->hc_pid, SIGKILL) < 0)
            (void)kill(sv->hc_pid, SIGKILL);
        sv->hc_killed = true;
        sv->hc_stale = true;
    }
    describe_exit(status, what, sizeof(what));
    ended(sv, success, now - sv->start_ns, what, now);
}

/* ---- healthchecks ------------------------------------------------------------------------ */

/* A check passed or failed (Docker's rules: a failure within the start period does not count,
 * a pass always does). */
static void hc_result(struct svc *sv, bool passed, uint64_t now)
{
    sv->hc_next = now + interval_ns(sv);
    if (passed) {
        sv->hc_failures = 0;
        if (sv->state == SVC_UNHEALTHY)
            note(sv, "healthcheck passed: healthy again");
        sv->state = SVC_HEALTHY;
        return;
    }
    if (now - sv->start_ns < sv->def.health_start_period_ms * MS)
        return;
    if (sv->hc_failures < UINT32_MAX)
        sv->hc_failures++;
    if (sv->hc_failures >= retries(sv) && sv->state != SVC_UNHEALTHY) {
        sv->state = SVC_UNHEALTHY;
        note(sv, "unhealthy: %u healthchecks in a row failed", sv->hc_failures);
    }
}

static void hc_start(struct svc *sv, uint64_t now)
{
    _cleanup_close_ int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    struct wr_err err = {0};
    uint64_t start_ns;
    pid_t pid;

    if (null < 0) {
        hc_result(sv, false, now);
        return;
    }
    pid = exec_in(sv, true, (const int[3]){null, null, null}, &start_ns, &err);
    if (pid < 0) {
        log_debug("service %s: healthcheck: %s", sv->def.name, err.msg);
        hc_result(sv, false, now);
        return;
    }
    sv->hc_pid = pid;
    sv->hc_killed = sv->hc_stale = false;
    sv->hc_deadline = start_ns + timeout_ns(sv);
}

static void hc_reaped(struct svc *sv, int status, uint64_t now)
{
    bool passed = !sv->hc_killed && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    bool stale = sv->hc_stale;

    sv->hc_pid = 0;
    sv->hc_killed = sv->hc_stale = false;
    if (stale || sv->pid == 0) {
        sv->hc_next = now + interval_ns(sv);
        return;
    }
    hc_result(sv, passed, now);
}

bool init_services_reaped(pid_t pid, int status)
{
    uint64_t now = init_now_ns();

    for (size_t i = 0; i < nsvcs; i++) {
        struct svc *sv = svcs[i];
        if (sv->pid == pid) {
            svc_exited(sv, status, now);
            return true;
        }
        if (sv->hc_pid == pid) {
            hc_reaped(sv, status, now);
            return true;
        }
    }
    return false;
}

/* ---- dependencies ------------------------------------------------------------------------ */

static void dependency_failed(struct svc *sv, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void dependency_failed(struct svc *sv, const char *fmt, ...)
{
    char buf[256];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    sv->state = SVC_FAILED;
    set_message(sv, "%s", buf);
    note(sv, "%s", buf);
}

/* Whether sv may start: 1 yes, 0 not yet (the message says what it waits for), -1 never (sv is
 * failed). A cycle waits forever: each waits for the other to start. */
static int deps_ready(struct svc *sv)
{
    for (char **d = sv->def.depends; d != NULL && *d != NULL; d++) {
        enum wr_depend cond;
        struct svc *dep;
        size_t len;
        int n;

        if (wr_service_depend_parse(*d, &len, &cond) < 0)
            continue; /* the decoder checked it */
        n = (int)len;
        dep = find_n(*d, len);
        if (dep == NULL) {
            dependency_failed(sv, "dependency %.*s is not defined", n, *d);
            return -1;
        }
        switch (cond) {
        case WR_DEPEND_STARTED:
            if (dep->ever_started)
                continue;
            if (dep->state == SVC_FAILED) {
                dependency_failed(sv, "dependency %.*s failed", n, *d);
                return -1;
            }
            set_message(sv, "waiting for %.*s to start", n, *d);
            return 0;
        case WR_DEPEND_HEALTHY:
            if (dep->state == SVC_HEALTHY)
                continue;
            if (dep->def.health_argv == NULL) {
                dependency_failed(sv, "dependency %.*s has no healthcheck", n, *d);
                return -1;
            }
            if (dep->state == SVC_FAILED || dep->state == SVC_EXITED) {
                dependency_failed(sv, "dependency %.*s %s", n, *d,
                                  dep->state == SVC_FAILED ? "failed" : "exited");
                return -1;
            }
            set_message(sv, "waiting for %.*s to be healthy", n, *d);
            return 0;
        case WR_DEPEND_COMPLETED:
            if (dep->state == SVC_EXITED)
                continue;
            if (dep->state == SVC_FAILED) {
                dependency_failed(sv, "dependency %.*s failed", n, *d);
                return -1;
            }
            set_message(sv, "waiting for %.*s to complete", n, *d);
            return 0;
        }
    }
    return 1;
}

/* ---- the pump ------------------------------------------------------------------------------ */

static void consider(uint64_t *next, uint64_t at)
{
    if (at < *next)
        *next = at;
}

int init_services_pump(void)
{
    uint64_t now, next = UINT64_MAX;
    bool changed;

    if (!started || nsvcs == 0)
        return -1;
    now = init_now_ns();
    for (size_t i = 0; i < nsvcs; i++)
        if (svcs[i]->state == SVC_RESTARTING && now >= svcs[i]->restart_at)
            svc_start(svcs[i], now);
    /* A start can meet (or a failure fail) another's dependency: again until nothing moves.
     * Each round changes at least one of at most WR_SERVICES_MAX services for good. */
    do {
        changed = false;
        for (size_t i = 0; i < nsvcs; i++) {
            struct svc *sv = svcs[i];
            int rc;
            if (sv->state != SVC_WAITING)
                continue;
            rc = deps_ready(sv);
            if (rc > 0)
                svc_start(sv, now);
            changed |= rc != 0;
        }
    } while (changed);

    for (size_t i = 0; i < nsvcs; i++) {
        struct svc *sv = svcs[i];
        if (sv->def.health_argv != NULL && sv->pid > 0 && sv->hc_pid == 0 && now >= sv->hc_next)
            hc_start(sv, now);
        if (sv->hc_pid > 0 && !sv->hc_killed && now >= sv->hc_deadline) {
            /* Timed out: the check and what it started go; the reap counts the failure. */
            if (kill(-sv->hc_pid, SIGKILL) < 0)
                (void)kill(sv->hc_pid, SIGKILL);
            sv->hc_killed = true;
        }
        if (sv->state == SVC_RESTARTING)
            consider(&next, sv->restart_at);
        if (sv->hc_pid > 0 && !sv->hc_killed)
            consider(&next, sv->hc_deadline);
        else if (sv->hc_pid == 0 && sv->pid > 0 && sv->def.health_argv != NULL)
            consider(&next, sv->hc_next);
    }
    if (next == UINT64_MAX)
        return -1;
    if (next <= now)
        return 0;
    /* Rounded up: waking early would find nothing due and spin. */
    return (next - now) / MS >= INT_MAX ? INT_MAX : (int)((next - now + MS - 1) / MS);
}

/* ---- requests ------------------------------------------------------------------------------ */

static void reply_error(struct init_conn *c, uint32_t id, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* An ERROR whose message is fmt alone (no ": strerror"). */
static void reply_error(struct init_conn *c, uint32_t id, int errnum, const char *fmt, ...)
{
    char msg[256];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    wr_msg_error(&c->out, id, errnum, msg);
}

static void define(struct init_conn *c, uint32_t id, const uint8_t *p, size_t n)
{
    struct wr_service def;
    struct wr_err err = {0};
    int fds[WR_SPAWN_FDS_MAX];
    struct svc *sv;

    if (wr_service_decode(p, n, &def, &err) < 0) {
        init_conn_errorf(c, id, EINVAL, "%s", err.msg);
        return;
    }
    /* The fds came with this frame's bytes: take them before anything can fail. */
    if (init_conn_take_fds(c, fds, def.sp.nfds) < 0) {
        reply_error(c, id, EBADF, "service %s: %u cgroup fds announced, fewer came", def.name,
                    def.sp.nfds);
        wr_service_fini(&def);
        return;
    }
    if (started)
        reply_error(c, id, EALREADY, "service %s: services were started already", def.name);
    else if (find_n(def.name, strlen(def.name)) != NULL)
        reply_error(c, id, EEXIST, "service %s is defined already", def.name);
    else if (nsvcs >= WR_SERVICES_MAX)
        reply_error(c, id, ENOSPC, "service %s: a sandbox has at most %d services", def.name,
                    WR_SERVICES_MAX);
    else
        goto ok;
    for (unsigned i = 0; i < def.sp.nfds; i++)
        (void)close(fds[i]);
    wr_service_fini(&def);
    return;
ok:
    sv = xcalloc(1, sizeof(*sv));
    sv->def = def;
    sv->ncg = def.sp.nfds;
    memcpy(sv->cg_fds, fds, sv->ncg * sizeof(int));
    sv->state = SVC_WAITING;
    svcs[nsvcs++] = sv;
    wr_msg_ok(&c->out, id);
    log_debug("service %s defined", def.name);
}

static void list(struct init_conn *c, uint32_t id)
{
    for (size_t i = 0; i < nsvcs; i++) {
        const struct svc *sv = svcs[i];
        struct wr_service_info si = {.name = sv->def.name,
                                     .state = (char *)state_names[sv->state],
                                     .pid = sv->pid,
                                     .restarts = sv->restarts,
                                     .has_exit = sv->has_exit,
                                     .message = sv->message};
        if (sv->has_exit && WIFSIGNALED(sv->status))
            si.signal = WTERMSIG(sv->status);
        else if (sv->has_exit)
            si.exit_code = WEXITSTATUS(sv->status);
        wr_service_info_encode(&c->out, id, &si);
    }
    wr_msg_ok(&c->out, id);
}

/* ---- names ------------------------------------------------------------------------------ */

#define HOSTS_MARK "# warren: the sandbox's services"
#define HOSTS_MAX  (64 * 1024)

/* The whole of a small regular file (at most max bytes, NUL-terminated), or NULL. */
static char *slurp(const char *path, size_t max)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    char *buf;
    ssize_t n;

    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > max)
        return NULL;
    buf = xmalloc((size_t)st.st_size + 1);
    n = read(fd, buf, (size_t)st.st_size);
    if (n < 0) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

/* Replace path by text (a new file renamed over it: a reader sees the old or the new). */
static void replace_file(const char *path, const char *text)
{
    char tmp[PATH_MAX];
    int fd;
    size_t n = strlen(text);

    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.warren-new", path) >= sizeof(tmp))
        return;
    (void)unlink(tmp);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        if (errno != ENOENT) /* no /etc: nothing to name */
            log_warn("%s: %s", tmp, strerror(errno));
        return;
    }
    if (fchmod(fd, 0644) < 0 || write(fd, text, n) != (ssize_t)n || rename(tmp, path) < 0) {
        log_warn("%s: %s", path, strerror(errno));
        (void)unlink(tmp);
    }
    close(fd);
}

/* root's /etc/hosts (root "": the sandbox's own) with every service's name on loopback, in a line
 * of its own that replaces the one an earlier start wrote; its /etc/resolv.conf the sandbox's. */
static void name_services(const char *root, const char *resolv)
{
    _cleanup_free_ char *old = NULL;
    char path[PATH_MAX], host[65] = "";
    struct wr_buf b;

    if ((size_t)snprintf(path, sizeof(path), "%s/etc/hosts", root) >= sizeof(path))
        return;
    wr_buf_init(&b);
    old = slurp(path, HOSTS_MAX);
    if (old == NULL)
        wr_buf_puts(&b, "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
    for (char *line = old, *next; line != NULL && *line != '\0'; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        if (strstr(line, HOSTS_MARK) == NULL) {
            wr_buf_puts(&b, line);
            wr_buf_puts(&b, "\n");
        }
    }
    (void)gethostname(host, sizeof(host) - 1);
    for (int v6 = 0; v6 < 2; v6++) {
        wr_buf_puts(&b, v6 ? "::1\t" : "127.0.0.1\t");
        for (size_t i = 0; i < nsvcs; i++) {
            wr_buf_puts(&b, svcs[i]->def.name);
            wr_buf_puts(&b, " ");
        }
        if (root[0] != '\0' && host[0] != '\0') {
            wr_buf_puts(&b, host);
            wr_buf_puts(&b, " ");
        }
        wr_buf_puts(&b, HOSTS_MARK "\n");
    }
    wr_buf_append(&b, "", 1);
    replace_file(path, (const char *)b.data);
    wr_buf_fini(&b);
    if (root[0] != '\0' && resolv != NULL &&
        (size_t)snprintf(path, sizeof(path), "%s/etc/resolv.conf", root) < sizeof(path)) {
        (void)unlink(path); /* a link into a resolver's runtime directory: replaced, not followed */
        replace_file(path, resolv);
    }
}

static void name_all(void)
{
    _cleanup_free_ char *resolv = slurp("/etc/resolv.conf", HOSTS_MAX);

    name_services("", NULL);
    for (size_t i = 0; i < nsvcs; i++)
        if (svcs[i]->def.root != NULL)
            name_services(svcs[i]->def.root, resolv);
}

void init_service_request(struct init_conn *c, const struct wr_frame_hdr *h, const uint8_t *p)
{
    switch (h->type) {
    case WR_MSG_SERVICE:
        define(c, h->id, p, h->len);
        break;
    case WR_MSG_SERVICES_START:
        if (started) {
            reply_error(c, h->id, EALREADY, "services were started already");
            break;
        }
        started = true;
        name_all();
        wr_msg_ok(&c->out, h->id);
        log_info("starting %zu services", nsvcs);
        break;
    case WR_MSG_SERVICE_LIST:
        list(c, h->id);
        break;
    default:
        break;
    }
}
