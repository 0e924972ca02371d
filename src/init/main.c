/* SPDX-License-Identifier: Apache-2.0 */
/* warren-init: PID 1 of a sandbox. Parses the image defaults, becomes a proper init (session
 * leader, reaper, deaf to job-control signals) and runs the one epoll loop that serves the
 * control connections. See docs/design/init.md. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "../runtime/rlimit.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "entry.h"
#include "init.h"
#include "service.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define LISTEN_FD  3
#define PRIMARY_FD 4

const int init_ignored_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGTTIN, SIGTTOU, SIGTSTP};
const size_t init_ignored_signals_n =
    sizeof(init_ignored_signals) / sizeof(init_ignored_signals[0]);

struct init_config init_cfg;

static int epfd = -1;
static bool run_again;

void init_fdw_set(struct init_fdw *w, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = w};
    int op;

    if (w->fd < 0 || w->events == events)
        return;
    if (events == 0)
        op = EPOLL_CTL_DEL;
    else if (w->events == 0)
        op = EPOLL_CTL_ADD;
    else
        op = EPOLL_CTL_MOD;
    if (epoll_ctl(epfd, op, w->fd, &ev) < 0) {
        log_error("epoll_ctl fd %d: %s", w->fd, strerror(errno));
        return;
    }
    w->events = events;
}

void init_fdw_close(struct init_fdw *w)
{
    if (w->fd < 0)
        return;
    init_fdw_set(w, 0);
    (void)close(w->fd);
    w->fd = -1;
    w->events = 0;
}

void init_loop_again(void)
{
    run_again = true;
}

static void env_add_default(const char *kv)
{
    size_t klen = strcspn(kv, "=");

    for (size_t i = 0; i < init_cfg.nenv; i++) {
        if (strncmp(init_cfg.env[i], kv, klen) == 0 && init_cfg.env[i][klen] == '=') {
            free(init_cfg.env[i]);
            init_cfg.env[i] = xstrdup(kv);
            return;
        }
    }
    init_cfg.env = xrealloc(init_cfg.env, (init_cfg.nenv + 2) * sizeof(char *));
    init_cfg.env[init_cfg.nenv++] = xstrdup(kv);
    init_cfg.env[init_cfg.nenv] = NULL;
}

static void usage_exit(const char *what)
{
    fprintf(stderr,
            "warren-init: %s\nusage: warren-init [--ephemeral] [--env KEY=VALUE]... "
            "[--cwd DIR] [--user NAME|UID] [--oom-fd FD] [--resolver ADDR] [--listen PATH] "
            "[--gvisor]\n",
            what);
    _exit(2);
}

static void parse_args(int argc, char **argv)
{
    bool have_path = false;

    init_cfg.env = xcalloc(1, sizeof(char *));
    init_cfg.oom_fd = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;

        if (strcmp(a, "--ephemeral") == 0) {
            init_cfg.ephemeral = true;
            continue;
        }
        if (strcmp(a, "--gvisor") == 0) {
            init_cfg.gvisor = true;
            continue;
        }
        if (strcmp(a, "--oom-fd") == 0) {
            char *end;
            long fd;
            if (i + 1 >= argc)
                usage_exit("option needs a value");
            fd = strtol(argv[++i], &end, 10);
            if (*end != '\0' || fd < 3 || fd > 1023)
                usage_exit("--oom-fd needs a file descriptor");
            init_cfg.oom_fd = (int)fd;
            continue;
        }
        if (strcmp(a, "--resolver") == 0 || strcmp(a, "--listen") == 0) {
            char **dst = a[2] == 'r' ? &init_cfg.resolver : &init_cfg.listen_path;
            if (i + 1 >= argc)
                usage_exit("option needs a value");
            free(*dst);
            *dst = xstrdup(argv[++i]);
            continue;
        }
        if (strcmp(a, "--env") == 0 || strcmp(a, "--cwd") == 0 || strcmp(a, "--user") == 0) {
            if (i + 1 >= argc)
                usage_exit("option needs a value");
            val = argv[++i];
        } else if (strncmp(a, "--env=", 6) == 0 || strncmp(a, "--cwd=", 6) == 0) {
            val = a + 6;
        } else if (strncmp(a, "--user=", 7) == 0) {
            val = a + 7;
        } else {
            usage_exit("unknown argument");
        }
        if (strncmp(a, "--env", 5) == 0) {
            if (strchr(val, '=') == NULL || val[0] == '=')
                usage_exit("--env needs KEY=VALUE");
            env_add_default(val);
            if (strncmp(val, "PATH=", 5) == 0)
                have_path = true;
        } else if (strncmp(a, "--cwd", 5) == 0) {
            free(init_cfg.cwd);
            init_cfg.cwd = xstrdup(val);
        } else {
            free(init_cfg.user);
            init_cfg.user = xstrdup(val);
        }
    }
    if (!have_path)
        env_add_default("PATH=" INIT_DEFAULT_PATH);
}

/* /etc/resolv.conf naming addr alone, replacing whatever the image had (a symbolic link into a
 * resolver's runtime directory, say: it is removed, not followed). A sandbox without /etc keeps
 * none. */
static void write_resolv_conf(const char *addr)
{
    char text[64];
    int n = snprintf(text, sizeof(text), "nameserver %s\n", addr), fd;

    if (unlink("/etc/resolv.conf") < 0 && errno != ENOENT) {
        log_warn("/etc/resolv.conf: %s", strerror(errno));
        return;
    }
    fd = open("/etc/resolv.conf", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        if (errno != ENOENT)
            log_warn("/etc/resolv.conf: %s", strerror(errno));
        return;
    }
    if (write(fd, text, (size_t)n) != n)
        log_warn("/etc/resolv.conf: %s", strerror(errno));
    close(fd);
}

/* Nothing init holds may leak into a child: every fd from 3 up becomes close-on-exec. */
static void cloexec_from_3(void)
{
    if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
        return;
    /* Without close_range (gVisor has none): the fds that are open, not every possible one
     * (65,536 fcntl calls cost a second there). */
    DIR *d = opendir("/proc/self/fd");
    if (d != NULL) {
        int self = dirfd(d);
        for (struct dirent *de; (de = readdir(d)) != NULL;) {
            char *end;
            long fd = strtol(de->d_name, &end, 10);
            int fl;
            if (*end != '\0' || fd < 3 || fd > 1048576 || fd == self)
                continue;
            if ((fl = fcntl((int)fd, F_GETFD)) >= 0 && !(fl & FD_CLOEXEC))
                (void)fcntl((int)fd, F_SETFD, fl | FD_CLOEXEC);
        }
        closedir(d);
        return;
    }
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536)
        max = 65536;
    for (int fd = 3; fd < max; fd++) {
        int fl = fcntl(fd, F_GETFD);
        if (fl >= 0 && !(fl & FD_CLOEXEC))
            (void)fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
    }
}

static void ensure_stdio(void)
{
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) >= 0)
            continue;
        int n = open("/dev/null", O_RDWR);
        if (n >= 0 && n != fd) {
            (void)dup2(n, fd);
            (void)close(n);
        }
    }
}

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);

    if (fl < 0)
        return -1;
    return fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* --listen: a control socket of init's own at path, on fd 3 (the gvisor backend: no fd crosses
 * into a gVisor sandbox but stdio, and its runtime reaches this socket through a directory of
 * the host's, src/runtime/gvisor.c). Whatever was at path goes. */
static void listen_at(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        log_error("--listen %s: path too long", path);
        _exit(1);
    }
    memcpy(sa.sun_path, path, strlen(path));
    (void)unlink(path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0 ||
        (fd != LISTEN_FD && dup3(fd, LISTEN_FD, O_CLOEXEC) < 0)) {
        log_error("--listen %s: %s", path, strerror(errno));
        _exit(1);
    }
    if (fd != LISTEN_FD)
        close(fd);
}

static void on_listen(struct init_fdw *w, uint32_t events);

/* ---- quiesced for a checkpoint (WR_MSG_QUIESCE) ---------------------------------------------- */

#define QUIESCE_POLL_MS 20
static bool quiesced;

/* The OK is on its way (the pump just wrote it): drop every connection and the listener. */
static void quiesce(struct init_fdw *listen_w)
{
    init_quiesce_pending = false;
    init_conns_close_all();
    init_fdw_close(listen_w);
    (void)unlink(init_cfg.listen_path);
    quiesced = true;
}

/* After a restore the runtime puts `resume` beside the socket: listen again. */
static void maybe_resume(struct init_fdw *listen_w)
{
    char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 16];
    const char *slash = strrchr(init_cfg.listen_path, '/');
    int dirlen = slash != NULL ? (int)(slash - init_cfg.listen_path) : 0;

    snprintf(path, sizeof(path), "%.*s/resume", dirlen, init_cfg.listen_path);
    if (unlink(path) < 0)
        return;
    listen_at(init_cfg.listen_path);
    if (set_nonblock(LISTEN_FD) < 0) {
        log_error("--listen %s: %s", init_cfg.listen_path, strerror(errno));
        _exit(1);
    }
    listen_w->fd = LISTEN_FD;
    listen_w->cb = on_listen;
    init_fdw_set(listen_w, EPOLLIN);
    quiesced = false;
}

static void on_listen(struct init_fdw *w, uint32_t events)
{
    /* Accept a few per wakeup; level-triggered epoll brings us back for the rest. */
    for (int i = 0; i < 16; i++) {
        int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                log_warn("accept: %s", strerror(errno));
            return;
        }
        init_conn_new(fd, false);
    }
}

static void on_signal(struct init_fdw *w, uint32_t events)
{
    struct signalfd_siginfo si[16];

    /* The content does not matter: SIGCHLD coalesces, so reap everything each time. */
    while (read(w->fd, si, sizeof(si)) > 0)
        ;
    init_procs_reap();
}

static void setup_signals(struct init_fdw *sigw)
{
    sigset_t set;

    /* PID 1 must not die of a stray terminal or job-control signal. */
    for (size_t i = 0; i < init_ignored_signals_n; i++)
        (void)signal(init_ignored_signals[i], SIG_IGN);
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0) {
        log_error("sigprocmask: %s", strerror(errno));
        _exit(1);
    }
    sigw->fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sigw->fd < 0) {
        log_error("signalfd: %s", strerror(errno));
        _exit(1);
    }
    sigw->cb = on_signal;
    init_fdw_set(sigw, EPOLLIN);
}

void wr_init_main(int argc, char **argv)
{
    static struct init_fdw listen_w = {.fd = -1};
    static struct init_fdw sig_w = {.fd = -1};
    int rc;

    wr_log_set_level(getenv("WARREN_INIT_LOG"));
    parse_args(argc, argv);
    ensure_stdio();
    cloexec_from_3();
    /* The sandbox's rlimits: on ns the child set them before it became init; inside gVisor
     * they are runsc's until here. */
    if (init_cfg.gvisor && (rc = wr_rlimits_apply()) < 0)
        log_warn("rlimits: %s", strerror(-rc));
    if (init_cfg.listen_path != NULL) /* fd 3, before anything else opens one */
        listen_at(init_cfg.listen_path);
    (void)setsid();
    /* Modes in FILE_WRITE and FILE_MKDIR are applied exactly; children get the usual 022. */
    umask(0);
    init_fs_save();
    if (init_cfg.resolver != NULL)
        write_resolv_conf(init_cfg.resolver);

    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) {
        log_error("epoll_create1: %s", strerror(errno));
        _exit(1);
    }
    setup_signals(&sig_w);

    if (fcntl(LISTEN_FD, F_GETFD) >= 0 && set_nonblock(LISTEN_FD) == 0) {
        listen_w.fd = LISTEN_FD;
        listen_w.cb = on_listen;
        init_fdw_set(&listen_w, EPOLLIN);
    } else {
        log_warn("no listening socket on fd %d", LISTEN_FD);
    }
    if (init_cfg.listen_path != NULL)
        ; /* no creator's connection: fd 4 is one of init's own */
    else if (fcntl(PRIMARY_FD, F_GETFD) >= 0 && set_nonblock(PRIMARY_FD) == 0)
        init_conn_new(PRIMARY_FD, true);
    else if (init_cfg.ephemeral)
        _exit(0); /* the creator is already gone */

    /* Children may have exited before the signalfd existed. */
    init_procs_reap();
    for (int svc_ms = -1;;) {
        struct epoll_event ev[64];
        int timeout = run_again ? 0 : quiesced ? QUIESCE_POLL_MS : -1;
        int n;

        /* The services' next deadline (a restart, a healthcheck) bounds the wait. */
        if (svc_ms >= 0 && (timeout < 0 || svc_ms < timeout))
            timeout = svc_ms;
        n = epoll_wait(epfd, ev, (int)WR_ARRAY_SIZE(ev), timeout);
        run_again = false;
        if (n < 0 && errno != EINTR) {
            log_error("epoll_wait: %s", strerror(errno));
            _exit(1);
        }
        for (int i = 0; i < n; i++) {
            struct init_fdw *w = ev[i].data.ptr;
            if (w->fd >= 0)
                w->cb(w, ev[i].events);
        }
        init_conns_pump();
        init_procs_pump();
        init_conns_pump();
        init_ports_pump();
        svc_ms = init_services_pump();
        if (init_quiesce_pending)
            quiesce(&listen_w);
        else if (quiesced)
            maybe_resume(&listen_w);
    }
}
