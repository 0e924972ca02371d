/* SPDX-License-Identifier: Apache-2.0 */
/* SPAWN: resolve the user, build the environment, set up pipes or a PTY, then start the child
 * the way posix_spawn does: clone(CLONE_VM | CLONE_VFORK) on a stack of its own, so no page table
 * is copied and no page is faulted in twice (a fork costs more than the exec of a small program on
 * a paravirtualised host). init is suspended until the child has exec'd or failed; a failure
 * before exec is written into the plan, which the child shares, so the reply says whether exec
 * really happened. Services' processes and healthchecks (service.c) start the same way, through
 * init_exec_start. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "init.h"
#include "service.h"

extern char **environ;

/* What the child reports through the error pipe. */
enum child_stage {
    STAGE_CGROUP = 1,
    STAGE_PTY,
    STAGE_STDIO,
    STAGE_CHROOT,
    STAGE_GROUPS,
    STAGE_SETGID,
    STAGE_SETUID,
    STAGE_CHDIR,
    STAGE_EXEC,
};

struct child_report {
    int stage;
    int errnum;
};

struct child_plan {
    char **argv;
    char **env;
    const char *cwd; /* explicit cwd (must work), or NULL */
    const char *home;
    const struct init_user *user;
    bool pty;
    const char *slave;
    struct winsize ws;
    int stdio[3];                 /* pipe ends for the child, without a pty */
    bool own_stdio;               /* the pipes are its own: chown them to the user */
    const char *root;             /* chroot here before the ids change, or NULL */
    int cg_fds[WR_SPAWN_FDS_MAX]; /* cgroup.procs files of the command's own cgroup */
    unsigned ncg;
    struct child_report rep; /* written by the child if it fails before exec */
};

/* The child's stack. init is single-threaded and suspended while a child uses it (CLONE_VFORK),
 * so one is enough. execvpe needs room for a path; everything else here is a few frames. */
static _Alignas(64) char child_stack[64 * 1024];

static void env_set(char ***env, size_t *n, const char *kv, bool overwrite)
{
    size_t klen = strcspn(kv, "=");

    for (size_t i = 0; i < *n; i++) {
        if (strncmp((*env)[i], kv, klen) == 0 && (*env)[i][klen] == '=') {
            if (overwrite) {
                free((*env)[i]);
                (*env)[i] = xstrdup(kv);
            }
            return;
        }
    }
    *env = xrealloc(*env, (*n + 2) * sizeof(char *));
    (*env)[(*n)++] = xstrdup(kv);
    (*env)[*n] = NULL;
}

static void env_set_kv(char ***env, size_t *n, const char *k, const char *v)
{
    _cleanup_free_ char *kv = xasprintf("%s=%s", k, v);
    env_set(env, n, kv, false);
}

void init_env_free(char **env)
{
    if (env == NULL)
        return;
    for (char **e = env; *e != NULL; e++)
        free(*e);
    free(env);
}

char **init_env_build(char *const *base, char *const *overlay, const struct init_user *u,
                      unsigned flags)
{
    char **env = xcalloc(1, sizeof(char *));
    size_t n = 0;

    for (char *const *e = base; e != NULL && *e != NULL; e++)
        env_set(&env, &n, *e, true);
    for (char *const *e = overlay; e != NULL && *e != NULL; e++)
        if (strchr(*e, '=') != NULL && (*e)[0] != '=')
            env_set(&env, &n, *e, true);
    if (flags & INIT_ENV_PATH)
        env_set(&env, &n, "PATH=" INIT_DEFAULT_PATH, false);
    env_set_kv(&env, &n, "HOME", u->home != NULL ? u->home : "/");
    if ((flags & INIT_ENV_LOGIN) && u->name != NULL) {
        env_set_kv(&env, &n, "USER", u->name);
        env_set_kv(&env, &n, "LOGNAME", u->name);
    }
    if ((flags & INIT_ENV_LOGIN) && u->shell != NULL)
        env_set_kv(&env, &n, "SHELL", u->shell);
    if (flags & INIT_ENV_TERM)
        env_set_kv(&env, &n, "TERM", "xterm-256color");
    return env;
}

static _Noreturn void child_fail(struct child_plan *pl, int stage)
{
    pl->rep.errnum = errno;
    pl->rep.stage = stage;
    _exit(127);
}

/* In the child, between clone and exec. It shares init's memory: no allocation, no logging, no
 * stdio, and the identity calls go straight to the kernel (libc's wrappers may coordinate
 * threads). Signal dispositions are the child's own copy (no CLONE_SIGHAND). */
static int child_run(void *arg)
{
    struct child_plan *pl = arg;
    sigset_t none;

    /* First of all: into the command's own cgroup (one file per hierarchy), so that nothing
     * it runs is counted or limited anywhere else. "0" is the writer itself; the files were
     * opened by the host, whose credentials the kernel checks. */
    for (unsigned i = 0; i < pl->ncg; i++)
        if (write(pl->cg_fds[i], "0", 1) != 1)
            child_fail(pl, STAGE_CGROUP);
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    /* exec resets handled signals by itself; only the ones init ignores would stay ignored. */
    for (size_t i = 0; i < init_ignored_signals_n; i++)
        (void)signal(init_ignored_signals[i], SIG_DFL);
    (void)setsid();
    umask(022);

    if (pl->pty) {
        int fd = open(pl->slave, O_RDWR);
        if (fd < 0)
            child_fail(pl, STAGE_PTY);
        /* Opening it made it our controlling terminal already on gVisor, whose TIOCSCTTY then
         * answers EINVAL (Linux answers 0); TIOCGPGRP answers only on one's controlling
         * terminal. */
        pid_t pgrp;
        if (ioctl(fd, TIOCSCTTY, 0) < 0 && ioctl(fd, TIOCGPGRP, &pgrp) < 0)
            child_fail(pl, STAGE_PTY);
        (void)ioctl(fd, TIOCSWINSZ, &pl->ws);
        if (fchown(fd, pl->user->uid, (gid_t)-1) < 0) {
            /* the terminal stays root's; the process can still use it */
        }
        for (int i = 0; i < 3; i++)
            if (dup2(fd, i) < 0)
                child_fail(pl, STAGE_PTY);
        if (fd > 2)
            (void)close(fd);
    } else {
        /* The pipe ends are all >= 3 (0-2 are open), so dup2 always makes a fresh,
         * inheritable copy. */
        for (int i = 0; i < 3; i++)
            if (dup2(pl->stdio[i], i) < 0)
                child_fail(pl, STAGE_STDIO);
        /* The pipes are the process's own, as a shell's would be: owned by its user, so that
         * opening /dev/stdout (/proc/self/fd/1) works after the uid changes (scrot -, tee
         * /dev/stderr). Init keeps the other ends; nothing else has them. (A service's log
         * file and /dev/null stay as they are.) */
        for (int i = 0; i < 3 && pl->own_stdio; i++)
            if (fchown(i, pl->user->uid, (gid_t)-1) < 0) {
                /* the pipe stays root's: only a reopen of /dev/std* is refused */
            }
    }

    /* A service's root, while the process still has CAP_SYS_CHROOT (its stdio is open
     * already: a service's tree need not have /dev/pts). chroot, not pivot_root: no mount is
     * needed, and the sandbox's seccomp filter forbids them. */
    if (pl->root != NULL && (chroot(pl->root) < 0 || chdir("/") < 0))
        child_fail(pl, STAGE_CHROOT);

    if (syscall(SYS_setgroups, pl->user->ngroups, pl->user->groups) < 0 && errno != EPERM)
        child_fail(pl, STAGE_GROUPS);
    if (syscall(SYS_setresgid, pl->user->gid, pl->user->gid, pl->user->gid) < 0)
        child_fail(pl, STAGE_SETGID);
    if (syscall(SYS_setresuid, pl->user->uid, pl->user->uid, pl->user->uid) < 0)
        child_fail(pl, STAGE_SETUID);

    if (pl->cwd != NULL) {
        if (chdir(pl->cwd) < 0)
            child_fail(pl, STAGE_CHDIR);
    } else if ((pl->home == NULL || chdir(pl->home) < 0) && chdir("/") < 0) {
        child_fail(pl, STAGE_CHDIR);
    }

    /* execvpe searches the PATH of the current environment: make it the child's (init puts its
     * own back when the child is gone). */
    environ = pl->env;
    execvpe(pl->argv[0], pl->argv, pl->env);
    child_fail(pl, STAGE_EXEC);
}

/* What failed, without the errno: "exec `x`", "chdir `/x`", ... */
static void failure_what(char *buf, size_t size, const struct child_report *rep,
                         const struct child_plan *pl, const char *cwd_shown)
{
    switch (rep->stage) {
    case STAGE_CGROUP:
        (void)snprintf(buf, size, "join the command's cgroup");
        break;
    case STAGE_PTY:
        (void)snprintf(buf, size, "open pty `%s`", pl->slave ? pl->slave : "");
        break;
    case STAGE_STDIO:
        (void)snprintf(buf, size, "set up stdio");
        break;
    case STAGE_CHROOT:
        (void)snprintf(buf, size, "chroot `%s`", pl->root ? pl->root : "");
        break;
    case STAGE_GROUPS:
        (void)snprintf(buf, size, "setgroups");
        break;
    case STAGE_SETGID:
        (void)snprintf(buf, size, "setresgid %u", (unsigned)pl->user->gid);
        break;
    case STAGE_SETUID:
        (void)snprintf(buf, size, "setresuid %u", (unsigned)pl->user->uid);
        break;
    case STAGE_CHDIR:
        (void)snprintf(buf, size, "chdir `%s`", cwd_shown);
        break;
    default:
        (void)snprintf(buf, size, "exec `%s`", pl->argv[0]);
        break;
    }
}

static void report_failure(struct init_conn *c, uint32_t id, const struct child_report *rep,
                           const struct child_plan *pl, const char *cwd_shown)
{
    char what[WR_MAX_PATH + 64];

    failure_what(what, sizeof(what), rep, pl, cwd_shown);
    init_conn_errorf(c, id, rep->errnum, "%s", what);
}

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Every process init starts is the OOM killer's choice before init: init raises its own
 * oom_score_adj to the maximum, 1000, for the clone (a child inherits it, and what it starts
 * inherits it from it), and goes back to 0 once the child has exec'd. A process may lower
 * its score again only down to 0 (below takes CAP_SYS_RESOURCE on the host), where it ties
 * with init. Through the fd the host opened: init's /proc files belong to the host's root, and
 * so do the child's until its exec (they share init's memory, which is non-dumpable). */
static void oom_score(const char *value)
{
    if (init_cfg.oom_fd >= 0 && write(init_cfg.oom_fd, value, strlen(value)) < 0)
        log_debug("oom_score_adj %s: %s", value, strerror(errno));
}

/* Clone the child of plan pl and wait for its exec or failure (pl->rep). Returns its pid, or
 * -1 with errno if the clone failed. */
static pid_t run_child(struct child_plan *pl, uint64_t *start_ns)
{
    char **saved_environ = environ;
    pid_t pid;
    int saved;

    oom_score("1000");
    *start_ns = init_now_ns();
    pid = clone(child_run, child_stack + sizeof(child_stack), CLONE_VM | CLONE_VFORK | SIGCHLD, pl);
    saved = errno;
    oom_score("0");
    environ = saved_environ;
    errno = saved;
    return pid;
}

pid_t init_exec_start(const struct init_exec *x, uint64_t *start_ns, struct wr_err *err)
{
    struct child_plan pl = {.argv = x->argv,
                            .env = x->env,
                            .cwd = x->cwd,
                            .home = x->user->home,
                            .user = x->user,
                            .root = x->root,
                            .ncg = x->ncg};
    char what[WR_MAX_PATH + 64];
    pid_t pid;

    memcpy(pl.stdio, x->stdio, sizeof(pl.stdio));
    if (x->ncg > 0)
        memcpy(pl.cg_fds, x->cg_fds, x->ncg * sizeof(int));
    pid = run_child(&pl, start_ns);
    if (pid < 0)
        return wr_err_sys(err, "clone");
    if (pl.rep.stage != 0) {
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        failure_what(what, sizeof(what), &pl.rep, &pl, x->cwd ? x->cwd : "");
        wr_err_set(err, WR_ESYS, pl.rep.errnum, "%s", what);
        return -2;
    }
    return pid;
}

static char **argv_copy(char **argv)
{
    size_t n = 0;
    char **out;

    while (argv[n] != NULL)
        n++;
    out = xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        out[i] = xstrdup(argv[i]);
    return out;
}

void init_spawn(struct init_conn *c, uint32_t id, const uint8_t *p, size_t n)
{
    struct wr_spawn s;
    struct wr_err err = {0};
    struct init_user u = {0};
    struct child_plan pl = {.stdio = {-1, -1, -1}};
    const struct wr_service *svc = NULL;
    char slave[128];
    int parent_fds[3] = {-1, -1, -1}; /* stdin write end, stdout/pty master, stderr */
    int master = -1;
    char **env = NULL;
    uint64_t start_ns;
    pid_t pid;
    int rc;

    memset(&s, 0, sizeof(s));
    if (wr_spawn_decode(p, n, &s, &err) < 0) {
        init_conn_errorf(c, id, EINVAL, "spawn: %s", err.msg);
        return;
    }
    /* The fds came with this frame's bytes: take them before anything can fail. */
    if (init_conn_take_fds(c, pl.cg_fds, s.nfds) < 0) {
        init_conn_errorf(c, id, EBADF, "spawn: %u cgroup fds announced, fewer came", s.nfds);
        goto out;
    }
    pl.ncg = s.nfds;
    if (s.service != NULL && (svc = init_service_get(s.service)) == NULL) {
        _cleanup_free_ char *msg = xasprintf("no service `%s`", s.service);
        wr_msg_error(&c->out, id, ENOENT, msg);
        goto out;
    }
    /* In a service: its tree's users, and its user unless the request names one. */
    if (svc != NULL && s.user == NULL && s.uid < 0)
        rc = init_user_resolve_in(svc->root, svc->sp.user, svc->sp.uid,
                                  s.gid >= 0 ? s.gid : svc->sp.gid, NULL, &u, &err);
    else
        rc = init_user_resolve_in(svc != NULL ? svc->root : NULL, s.user, s.uid, s.gid,
                                  svc != NULL ? NULL : init_cfg.user, &u, &err);
    if (rc < 0) {
        init_conn_errorf(c, id, err.sys_errno ? err.sys_errno : EINVAL, "spawn: %s", err.msg);
        goto out;
    }
    env = init_env_build(svc != NULL ? svc->sp.env : init_cfg.env, s.env, &u,
                         INIT_ENV_PATH | INIT_ENV_LOGIN | (s.pty ? INIT_ENV_TERM : 0));
    pl.argv = s.argv;
    pl.env = env;
    pl.cwd = s.cwd != NULL ? s.cwd : svc != NULL ? svc->sp.cwd : init_cfg.cwd;
    pl.home = u.home;
    pl.user = &u;
    pl.pty = s.pty;
    pl.root = svc != NULL ? svc->root : NULL;

    if (s.pty) {
        master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0 ||
            ptsname_r(master, slave, sizeof(slave)) != 0) {
            init_conn_errorf(c, id, errno, "spawn: open pty");
            goto out;
        }
        pl.slave = slave;
        pl.ws.ws_row = s.rows ? s.rows : WR_TTY_ROWS_DEFAULT;
        pl.ws.ws_col = s.cols ? s.cols : WR_TTY_COLS_DEFAULT;
    } else {
        for (int i = 0; i < 3; i++) {
            int fds[2];
            if (pipe2(fds, O_CLOEXEC) < 0) {
                init_conn_errorf(c, id, errno, "spawn: pipe");
                goto out;
            }
            /* stdin: the child reads fds[0]; stdout/stderr: the child writes fds[1]. */
            pl.stdio[i] = i == 0 ? fds[0] : fds[1];
            parent_fds[i] = i == 0 ? fds[1] : fds[0];
        }
        pl.own_stdio = true;
    }
    /* Returns once the child has exec'd or exited: init's loop waits only for the few syscalls
     * before exec, and the exec itself. */
    pid = run_child(&pl, &start_ns);
    if (pid < 0) {
        init_conn_errorf(c, id, errno, "spawn: clone");
        goto out;
    }
    for (int i = 0; i < 3; i++) {
        if (pl.stdio[i] >= 0)
            (void)close(pl.stdio[i]);
        pl.stdio[i] = -1;
    }
    if (pl.rep.stage != 0) {
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        report_failure(c, id, &pl.rep, &pl, pl.cwd ? pl.cwd : "");
        goto out;
    }

    struct init_proc *pr = xcalloc(1, sizeof(*pr));
    pr->pid = pid;
    pr->start_ns = start_ns;
    pr->argv = argv_copy(s.argv);
    pr->cgroup = s.cgroup != NULL ? xstrdup(s.cgroup) : NULL;
    pr->pty = s.pty;
    pr->in.fd = pr->out.fd = pr->err.fd = -1;
    if (s.pty) {
        pr->out.fd = master;
        master = -1;
        /* A second fd on the master, so stdin and output have their own epoll entries. */
        pr->in.fd = fcntl(pr->out.fd, F_DUPFD_CLOEXEC, 3);
        (void)set_nonblock(pr->out.fd);
        if (pr->in.fd >= 0)
            (void)set_nonblock(pr->in.fd);
    } else {
        pr->in.fd = parent_fds[0];
        pr->out.fd = parent_fds[1];
        pr->err.fd = parent_fds[2];
        for (int i = 0; i < 3; i++) {
            (void)set_nonblock(parent_fds[i]);
            parent_fds[i] = -1;
        }
    }
    uint32_t proc_id = init_proc_add(pr, c);
    size_t start = wr_msg_begin(&c->out, WR_MSG_OK, 0, id);
    wr_msg_put_u64(&c->out, WR_TAG_PROC_ID, proc_id);
    wr_msg_put_u64(&c->out, WR_TAG_PID, (uint64_t)pid);
    (void)wr_msg_end(&c->out, start);
    log_debug("spawned proc %u pid %d `%s`", proc_id, (int)pid, s.argv[0]);

out:
    for (unsigned i = 0; i < pl.ncg; i++)
        (void)close(pl.cg_fds[i]);
    for (int i = 0; i < 3; i++) {
        if (pl.stdio[i] >= 0)
            (void)close(pl.stdio[i]);
        if (parent_fds[i] >= 0)
            (void)close(parent_fds[i]);
    }
    if (master >= 0)
        (void)close(master);
    init_env_free(env);
    init_user_fini(&u);
    wr_spawn_fini(&s);
}
