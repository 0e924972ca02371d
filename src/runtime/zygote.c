/* SPDX-License-Identifier: Apache-2.0 */
/* The zygote: a small single-threaded process, started when the daemon's runtime opens (before
 * any thread exists), that clones sandbox children on the daemon's behalf.
 *
 * Cloning from the daemon itself copies the daemon's page tables (large, and shared by its
 * worker threads, so every copy-on-write fault afterwards flushes the other CPUs' TLBs) only for
 * the child to throw them away at exec. The zygote is alone, and small: it is warren-zygote
 * (src/zygote/main.c), a static program the daemon forks and execs, with a dozen mappings where
 * a fork of the daemon has some 270 (its libraries), all of which every clone copied and every
 * exec of warren-init tore down again. Without warren-zygote next to the daemon (or at
 * wr_runtime_config.zygote_path) the zygote is a plain fork of the daemon, as it was before.
 *
 * Its children are made with CLONE_PARENT, so they are the daemon's children: the daemon reaps
 * them and gets their pidfds, id-range locks and sockets over the zygote's socket (SCM_RIGHTS).
 * The zygote dies with the daemon (parent-death signal, and EOF on its socket). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "rlimit.h"
#include "runtime_int.h"
#include "uidpool.h"

#define ZYGOTE_NFDS 4 /* pidfd, sync, uid lock, userns */

struct zygote_reply {
    int rc;
    pid_t pid;
    uid_t uid_base;
    struct wr_err err;
};

/* Close every fd from 3 up but those in keep[] (any order). Async-signal-safe. */
void wr__close_all_but(const int *keep, size_t n)
{
    int k[8];
    unsigned lo = 3;

    for (size_t i = 0; i < n && i < 8; i++)
        k[i] = keep[i];
    /* insertion sort: n is tiny */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && k[j - 1] > k[j]; j--) {
            int t = k[j];
            k[j] = k[j - 1];
            k[j - 1] = t;
        }
    for (size_t i = 0; i < n; i++) {
        if (k[i] < (int)lo)
            continue;
        if ((unsigned)k[i] > lo)
            (void)syscall(SYS_close_range, lo, (unsigned)k[i] - 1, 0);
        lo = (unsigned)k[i] + 1;
    }
    (void)syscall(SYS_close_range, lo, ~0U, 0);
}

static void close_warm_fds(struct wr__warm *w)
{
    int *fds[] = {&w->pidfd, &w->sync, &w->uid_lock, &w->userns_fd};
    for (size_t i = 0; i < WR_ARRAY_SIZE(fds); i++)
        if (*fds[i] >= 0) {
            close(*fds[i]);
            *fds[i] = -1;
        }
}

static __attribute__((noreturn)) void zygote_main(struct wr_runtime *rt, int fd, pid_t daemon)
{
    int keep[3] = {fd, rt->init_fd, wr__uidpool_dirfd(rt->uids)};

    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != daemon)
        _exit(0);
    (void)prctl(PR_SET_NAME, "warren-zygote");
    signal(SIGPIPE, SIG_IGN);
    wr__close_all_but(keep, 3);
    /* A user namespace takes its sandbox-wide caps on locked memory, message queues and pending
     * signals from its creator: make them the sandbox's, not whatever the daemon has. */
    if (wr_rlimits_apply() < 0)
        _exit(1);
    rt->zygote_fd = -1; /* in here, spawn for real */
    rt->in_zygote = true;
    for (;;) {
        char c;
        struct zygote_reply r = {0};
        struct wr__warm w;
        char cbuf[CMSG_SPACE(ZYGOTE_NFDS * sizeof(int))];
        struct iovec iov = {.iov_base = &r, .iov_len = sizeof(r)};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        /* the request: one byte, and with it (SCM_RIGHTS) the network slot to clone into */
        char rbuf[CMSG_SPACE(sizeof(int))];
        struct iovec riov = {.iov_base = &c, .iov_len = 1};
        struct msghdr req = {
            .msg_iov = &riov, .msg_iovlen = 1, .msg_control = rbuf, .msg_controllen = sizeof(rbuf)};
        struct cmsghdr *rc;
        int netns_fd = -1;
        ssize_t n = recvmsg(fd, &req, MSG_CMSG_CLOEXEC);

        if (n == 0 || (n < 0 && errno != EINTR))
            _exit(0);
        if (n < 0)
            continue;
        rc = CMSG_FIRSTHDR(&req);
        if (rc != NULL && rc->cmsg_type == SCM_RIGHTS && rc->cmsg_len == CMSG_LEN(sizeof(int)))
            memcpy(&netns_fd, CMSG_DATA(rc), sizeof(int));
        if (c == 'n' && netns_fd < 0) {
            r.rc = wr_err_set(&r.err, WR_EINTERNAL, 0, "zygote: no netns with the request");
        } else {
            r.rc = wr__warm_spawn_here(rt, &w, c == 'n' ? netns_fd : -1, &r.err);
        }
        if (netns_fd >= 0)
            close(netns_fd);
        if (r.rc == 0) {
            struct cmsghdr *cm;
            int fds[ZYGOTE_NFDS] = {w.pidfd, w.sync, w.uid_lock, w.userns_fd};
            r.pid = w.pid;
            r.uid_base = w.uid_base;
            memset(cbuf, 0, sizeof(cbuf));
            msg.msg_control = cbuf;
            msg.msg_controllen = sizeof(cbuf);
            cm = CMSG_FIRSTHDR(&msg);
            cm->cmsg_level = SOL_SOCKET;
            cm->cmsg_type = SCM_RIGHTS;
            cm->cmsg_len = CMSG_LEN(sizeof(fds));
            memcpy(CMSG_DATA(cm), fds, sizeof(fds));
        }
        if (sendmsg(fd, &msg, MSG_NOSIGNAL) < 0 && r.rc == 0) {
            /* The daemon is gone: the child it will never use must not linger. */
            (void)syscall(SYS_pidfd_send_signal, w.pidfd, SIGKILL, NULL, 0);
        }
        if (r.rc == 0)
            close_warm_fds(&w);
    }
}

void wr_runtime_zygote_main(const struct wr_runtime_config *cfg, int fd, pid_t parent)
{
    struct wr_runtime_config c = *cfg;
    struct wr_runtime *rt;
    struct wr_err err;

    c.zygote = false;
    c.pool_taken = NULL;
    if (wr_runtime_open(&c, &rt, &err) < 0) {
        fprintf(stderr, "warren-zygote: %s\n", err.msg);
        _exit(1);
    }
    zygote_main(rt, fd, parent);
}

/* warren-zygote's path: cfg's, or next to the running executable; NULL if there is none. */
static char *zygote_path(const struct wr_runtime_config *cfg)
{
    char self[PATH_MAX];
    ssize_t n;

    if (cfg->zygote_path != NULL)
        return xstrdup(cfg->zygote_path);
    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n < 0)
        return NULL;
    self[n] = '\0';
    return xasprintf("%s/warren-zygote", dirname(self));
}

/* In the forked child: the socket at fd 3, warren-init at fd 4, nothing else; exec. */
static __attribute__((noreturn)) void exec_zygote(const struct wr_runtime *rt,
                                                  const struct wr_runtime_config *cfg,
                                                  const char *path, int sock, pid_t daemon)
{
    char parent[32], base[32], slots[32];
    const char *argv[24];
    size_t n = 0;
    int s = fcntl(sock, F_DUPFD, 10), i = fcntl(rt->init_fd, F_DUPFD, 10);
    int keep[2] = {3, 4};

    if (s < 0 || i < 0 || dup2(s, 3) < 0 || dup2(i, 4) < 0)
        _exit(127);
    wr__close_all_but(keep, 2);
    snprintf(parent, sizeof(parent), "%d", (int)daemon);
    snprintf(base, sizeof(base), "%u", (unsigned)cfg->uid_base);
    snprintf(slots, sizeof(slots), "%u", (unsigned)cfg->uid_slots);
    argv[n++] = "warren-zygote";
    argv[n++] = "--parent";
    argv[n++] = parent;
    argv[n++] = "--run-dir";
    argv[n++] = rt->run_dir;
    argv[n++] = "--init";
    argv[n++] = "/proc/self/fd/4";
    argv[n++] = "--uid-base";
    argv[n++] = base;
    argv[n++] = "--uid-slots";
    argv[n++] = slots;
    if (cfg->cgroup_mode != NULL) {
        argv[n++] = "--cgroup";
        argv[n++] = cfg->cgroup_mode;
    }
    if (cfg->cgroup_parent != NULL) {
        argv[n++] = "--cgroup-parent";
        argv[n++] = cfg->cgroup_parent;
    }
    if (cfg->cgroup_v2_root != NULL) {
        argv[n++] = "--cgroup-v2-root";
        argv[n++] = cfg->cgroup_v2_root;
    }
    if (rt->fault != NULL) {
        argv[n++] = "--fault";
        argv[n++] = rt->fault;
    }
    argv[n] = NULL;
    /* No environment: the zygote needs none, and its memory is every sandbox's PID 1's. */
    execve(path, (char *const *)argv, (char *const[]){NULL});
    _exit(127);
}

int wr__zygote_start(struct wr_runtime *rt, const struct wr_runtime_config *cfg, struct wr_err *err)
{
    _cleanup_free_ char *path = zygote_path(cfg);
    int sv[2];
    pid_t daemon = getpid(), pid;

    if (path != NULL && access(path, X_OK) < 0) {
        log_info("zygote: no `%s`: a fork of this process clones the sandboxes", path);
        free(path);
        path = NULL;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return wr_err_sys(err, "zygote: socketpair");
    pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return wr_err_sys(err, "zygote: fork");
    }
    if (pid == 0) {
        close(sv[0]);
        if (path != NULL)
            exec_zygote(rt, cfg, path, sv[1], daemon);
        zygote_main(rt, sv[1], daemon);
    }
    close(sv[1]);
    rt->zygote_fd = sv[0];
    rt->zygote_pid = pid;
    return 0;
}

void wr__zygote_stop(struct wr_runtime *rt)
{
    if (rt->zygote_fd < 0)
        return;
    close(rt->zygote_fd);
    rt->zygote_fd = -1;
    while (waitpid(rt->zygote_pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

/* A clone request: "c", or "n" with the network slot's fd. Returns 0 or -1 (errno set). */
static int send_request(int fd, int netns_fd)
{
    char cbuf[CMSG_SPACE(sizeof(int))];
    char c = netns_fd >= 0 ? 'n' : 'c';
    struct iovec iov = {.iov_base = &c, .iov_len = 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

    if (netns_fd >= 0) {
        struct cmsghdr *cm;
        memset(cbuf, 0, sizeof(cbuf));
        msg.msg_control = cbuf;
        msg.msg_controllen = sizeof(cbuf);
        cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &netns_fd, sizeof(int));
    }
    return sendmsg(fd, &msg, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

int wr__zygote_spawn(struct wr_runtime *rt, struct wr__warm *w, int netns_fd, struct wr_err *err)
{
    struct zygote_reply r;
    char cbuf[CMSG_SPACE(ZYGOTE_NFDS * sizeof(int))];
    struct iovec iov = {.iov_base = &r, .iov_len = sizeof(r)};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
    struct cmsghdr *cm;
    ssize_t n;
    int fds[ZYGOTE_NFDS];

    *w = (struct wr__warm){.pidfd = -1, .sync = -1, .uid_lock = -1, .userns_fd = -1};
    /* One request at a time: creates on several worker threads take turns. */
    pthread_mutex_lock(&rt->zygote_lock);
    if (send_request(rt->zygote_fd, netns_fd) < 0) {
        pthread_mutex_unlock(&rt->zygote_lock);
        return wr_err_sys(err, "zygote: request");
    }
    do {
        n = recvmsg(rt->zygote_fd, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    pthread_mutex_unlock(&rt->zygote_lock);
    cm = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
    if (n != (ssize_t)sizeof(r) || r.rc < 0 || cm == NULL || cm->cmsg_type != SCM_RIGHTS ||
        cm->cmsg_len != CMSG_LEN(sizeof(fds))) {
        /* Whatever fds came with a bad answer: the child they stand for must not linger
         * (it would wait for "go" forever, holding an id range). */
        if (cm != NULL && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len >= CMSG_LEN(sizeof(int))) {
            size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            memcpy(fds, CMSG_DATA(cm), (k > ZYGOTE_NFDS ? ZYGOTE_NFDS : k) * sizeof(int));
            (void)syscall(SYS_pidfd_send_signal, fds[0], SIGKILL, NULL, 0);
            for (size_t i = 0; i < k && i < ZYGOTE_NFDS; i++)
                close(fds[i]);
            if (n == (ssize_t)sizeof(r) && r.pid > 0) /* our child (CLONE_PARENT): reap it */
                while (waitpid(r.pid, NULL, __WALL) < 0 && errno == EINTR)
                    ;
        }
        if (n == (ssize_t)sizeof(r) && r.rc < 0) {
            *err = r.err;
            return -1;
        }
        return wr_err_set(err, WR_EINTERNAL, n < 0 ? errno : 0, "zygote: bad answer");
    }
    memcpy(fds, CMSG_DATA(cm), sizeof(fds));
    w->pid = r.pid;
    w->uid_base = r.uid_base;
    w->pidfd = fds[0];
    w->sync = fds[1];
    w->uid_lock = fds[2];
    w->userns_fd = fds[3];
    return 0;
}
