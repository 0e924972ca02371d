/* SPDX-License-Identifier: Apache-2.0 */
/* Creating and destroying a sandbox: the one place that reads as the list of steps.
 *
 *   parent                                   child (clone3: new user, mount, pid, net, uts, ipc)
 *   ------                                   -----
 *   lock run dir, take a uid range
 *   control socket (listening) + socketpair
 *   clone3, as the range's root ────────────▶ lo up (caps in its userns already), bounding
 *   write uid_map/gid_map                    set, rlimits; wait on the sync socket
 *   cgroups with limits
 *   build idmapped overlay (detached)
 *   idmapped clones of the volumes (detached)
 *   attach the child to the cgroups
 *   send "go" + overlay, volume fds ────────▶ hostname, fds 3..8, setresuid(0),
 *                                            unshare(cgroup ns)
 *                                            attach overlay, /proc /sys /dev /tmp, volumes,
 *                                            masks, pivot
 *                                            stdio = /dev/null, seccomp (sets no_new_privs)
 *   read sync: EOF = init started ◀───────── execveat(warren-init), or, with
 *                                            wr_runtime_config.init_main, become warren-init in
 *                                            place (child_become_init)
 *   HELLO on the control connection
 *
 * A failure at any step unwinds everything before it (destroy_partial). The child never
 * allocates or logs: it reports a failed step as {step, errno} on the sync socket. */
#include "runtime_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <linux/securebits.h>
#include <linux/nsfs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>

#include "../proto/proto.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/inet.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "caps.h"
#include "mount.h"
#include "net.h"
#include "rlimit.h"
#include "seccomp.h"
#include "uidpool.h"

#define WR_STR_(x)       #x
#define WR_STR(x)        WR_STR_(x)
#define HELLO_TIMEOUT_MS 10000
#define CHILD_FD_BASE    100 /* fds are parked here while 3..8 are filled */

/* tmpfs pages are charged to the sandbox's memory cgroup but belong to no process, so a tmpfs
 * larger than the memory limit fills the cgroup and the OOM killer then picks a process that
 * holds none of it. Each tmpfs of a sandbox is capped at a share of its memory limit, and a
 * writer gets ENOSPC first: the writable layer when it is a tmpfs (`warren run`; /tmp is on it)
 * at half, /dev/shm at a quarter, and at most 64 MiB (Docker's size). */
#define UPPER_TMPFS_BYTES (1ull << 30)
#define SHM_BYTES         (64ull << 20)

struct child_report {
    int err; /* positive errno */
    char step[64];
};

/* What the child inherits at clone: the same for every sandbox of a runtime, so a child can be
 * cloned ahead of time (wr_runtime_prewarm). What belongs to one sandbox comes later with
 * "go" (struct go_msg). The child allocates nothing. */
struct child_args {
    int sync_fd, uid_lock, init_fd;
    const char *stage;
    const struct wr_seccomp *seccomp;
    const struct wr_runtime *rt; /* for init_main and cmdline: read, never written */
    bool joined_net;             /* cloned into a network slot's netns, which the host set up */
    enum { FAULT_NONE, FAULT_EARLY, FAULT_ROOTFS, FAULT_EXEC } fault;
};

/* "go": the sandbox's own parameters, followed by warren-init's argv as NUL-separated strings;
 * with it, as SCM_RIGHTS, the root overlay, the control socket (listening), the creator's
 * connection, the run directory's lock and the child's own /proc/<pid>/oom_score_adj (which it
 * cannot open itself, see src/init/spawn.c), then one idmapped mount per volume (n_mounts,
 * their targets in mount_targets), then one mount per device node (n_devs, their paths in
 * dev_paths: wr_device_mounts_build), then one read-only mount per host bind (n_binds, their
 * targets in bind_targets: wr_binds_build), then, if sysfs is set, the sandbox's /sys (made by the
 * parent: a sandbox in a network slot may not mount sysfs itself). */
#define GO_MAX_ARGV  65536
#define GO_MAX_ARGS  2048
#define GO_NFDS      5
#define INIT_OOM_FD  9 /* where warren-init gets the oom_score_adj fd (--oom-fd) */
#define GO_MAX_BINDS (WR_MAX_MOUNTS + WR_MAX_DEVICE_NODES + WR_MAX_BINDS)
#define GO_MAX_FDS   (GO_NFDS + GO_MAX_BINDS + 1)
struct go_msg {
    uint64_t shm_bytes; /* size of /dev/shm */
    uint32_t argv_len;
    uint8_t ephemeral;
    uint8_t allow_setuid;
    uint8_t n_mounts;
    uint8_t n_devs;
    uint8_t n_binds;
    uint8_t sysfs;
    char hostname[65];
    char mount_targets[WR_MAX_MOUNTS][WR_MOUNT_TARGET_MAX + 1];
    char dev_paths[WR_MAX_DEVICE_NODES][WR_DEVICE_PATH_MAX + 1];
    char bind_targets[WR_MAX_BINDS][WR_MOUNT_TARGET_MAX + 1];
    uint8_t bind_dirs[WR_MAX_BINDS];
    uint8_t n_links;
    char link_targets[WR_MAX_SYMLINKS][WR_MOUNT_TARGET_MAX + 1];
    char links[WR_MAX_SYMLINKS][WR_MOUNT_TARGET_MAX + 1];
    uint8_t n_inner;
    uint8_t inner_ro[WR_MAX_INNER_BINDS];
    char inner_src[WR_MAX_INNER_BINDS][WR_MOUNT_TARGET_MAX + 1];
    char inner_dst[WR_MAX_INNER_BINDS][WR_MOUNT_TARGET_MAX + 1];
};

/* Testing hook (wr_runtime_config.fault): true if create should fail at `step`. */
static bool fault_at(const struct wr_runtime *rt, const char *step)
{
#ifndef WR_TESTING
    return false;
#endif
    return rt->fault != NULL && strcmp(rt->fault, step) == 0;
}

/* want, or memory / div if that is smaller (memory 0: no limit). */
static uint64_t fit_memory(uint64_t want, uint64_t memory, unsigned div)
{
    return memory != 0 && memory / div < want ? memory / div : want;
}

uint64_t wr__shm_bytes(uint64_t memory_bytes)
{
    return fit_memory(SHM_BYTES, memory_bytes, 4);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool wr__valid_id(const char *id)
{
    size_t n = id ? strlen(id) : 0;

    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return false;
    }
    return true;
}

/* ---- child ---------------------------------------------------------------------------------- */

static __attribute__((noreturn)) void child_fail(int fd, const char *step, int errnum)
{
    struct child_report r = {.err = errnum};
    size_t n = strlen(step);

    if (n >= sizeof(r.step))
        n = sizeof(r.step) - 1;
    memcpy(r.step, step, n);
    (void)!write(fd, &r, sizeof(r));
    _exit(127);
}

/* The child's copy of "go" (its own memory after clone: no allocation needed). */
static union {
    struct go_msg m;
    char raw[sizeof(struct go_msg) + GO_MAX_ARGV];
} go_buf;
static char *go_argv[GO_MAX_ARGS + 1];

/* Receive "go": the message into go_buf, the fds into fds[] (GO_NFDS + n_mounts of them).
 * Returns 0 or -errno. */
static int child_recv_go(int fd, int fds[GO_MAX_FDS])
{
    char cbuf[CMSG_SPACE(GO_MAX_FDS * sizeof(int))];
    struct iovec iov = {.iov_base = go_buf.raw, .iov_len = sizeof(go_buf.raw)};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
    struct cmsghdr *c;
    ssize_t n;
    size_t argc = 0;

    n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0)
        return -errno;
    c = CMSG_FIRSTHDR(&msg);
    if ((size_t)n < sizeof(struct go_msg) || c == NULL || c->cmsg_type != SCM_RIGHTS ||
        go_buf.m.n_mounts > WR_MAX_MOUNTS || go_buf.m.n_devs > WR_MAX_DEVICE_NODES ||
        go_buf.m.n_binds > WR_MAX_BINDS || go_buf.m.sysfs > 1 ||
        c->cmsg_len != CMSG_LEN((GO_NFDS + go_buf.m.n_mounts + go_buf.m.n_devs + go_buf.m.n_binds +
                                 go_buf.m.sysfs) *
                                sizeof(int)) ||
        (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
        go_buf.m.argv_len != (size_t)n - sizeof(struct go_msg) ||
        go_buf.m.hostname[sizeof(go_buf.m.hostname) - 1] != '\0')
        return -EPROTO;
    for (size_t i = 0; i < go_buf.m.n_mounts; i++)
        if (go_buf.m.mount_targets[i][WR_MOUNT_TARGET_MAX] != '\0')
            return -EPROTO;
    for (size_t i = 0; i < go_buf.m.n_devs; i++)
        if (go_buf.m.dev_paths[i][WR_DEVICE_PATH_MAX] != '\0')
            return -EPROTO;
    for (size_t i = 0; i < go_buf.m.n_binds; i++)
        if (go_buf.m.bind_targets[i][WR_MOUNT_TARGET_MAX] != '\0')
            return -EPROTO;
    if (go_buf.m.n_links > WR_MAX_SYMLINKS)
        return -EPROTO;
    for (size_t i = 0; i < go_buf.m.n_links; i++)
        if (go_buf.m.link_targets[i][WR_MOUNT_TARGET_MAX] != '\0' ||
            go_buf.m.links[i][WR_MOUNT_TARGET_MAX] != '\0')
            return -EPROTO;
    if (go_buf.m.n_inner > WR_MAX_INNER_BINDS)
        return -EPROTO;
    for (size_t i = 0; i < go_buf.m.n_inner; i++)
        if (go_buf.m.inner_src[i][WR_MOUNT_TARGET_MAX] != '\0' ||
            go_buf.m.inner_dst[i][WR_MOUNT_TARGET_MAX] != '\0')
            return -EPROTO;
    memcpy(fds, CMSG_DATA(c),
           (GO_NFDS + go_buf.m.n_mounts + go_buf.m.n_devs + go_buf.m.n_binds + go_buf.m.sysfs) *
               sizeof(int));
    /* argv: NUL-separated strings, the last one terminated too */
    for (char *p = go_buf.raw + sizeof(struct go_msg), *end = p + go_buf.m.argv_len; p < end;) {
        char *z = memchr(p, '\0', (size_t)(end - p));
        if (z == NULL || argc == GO_MAX_ARGS)
            return -E2BIG;
        go_argv[argc++] = p;
        p = z + 1;
    }
    go_argv[argc] = NULL;
    return argc > 0 ? 0 : -EPROTO;
}

/* Park fd at CHILD_FD_BASE or above (close-on-exec), closing the original. */
static int park_fd(int fd)
{
    int n = fcntl(fd, F_DUPFD_CLOEXEC, CHILD_FD_BASE);
    if (n >= 0)
        close(fd);
    return n;
}

/* Become warren-init without an exec (wr_runtime_config.init_main): leave the process as exec
 * would have left it, then run init's body. fds 3..6 and 9 are init's; 7, 8 and 10 up are
 * close-on-exec and closed here, the sync socket (8) among them, which tells the parent that
 * init has started, as an exec would. */
static __attribute__((noreturn)) void child_become_init(const struct wr_runtime *rt)
{
    static char *no_env[] = {NULL};
    int argc = 0;

    /* Nothing in the sandbox may read this memory (the caller's, copied at clone): with no
     * exec, the mm keeps the host's user namespace as its owner, and non-dumpable makes ptrace,
     * /proc/1/mem and /proc/1/exe need CAP_SYS_PTRACE there. The change of credentials already
     * cleared the flag unless fs.suid_dumpable says otherwise; this does not depend on it. */
    if (prctl(PR_SET_DUMPABLE, 0) < 0)
        child_fail(8, "make warren-init non-dumpable", errno);
    /* The caller's signal handlers were reset at clone (CLONE_CLEAR_SIGHAND), as exec would
     * have; ignored signals stay ignored, as across exec. */
    (void)prctl(PR_SET_NAME, "warren-init");
    /* The caller's environment (a user's shell for `warren run`) is no business of the
     * sandbox's, even in memory it cannot read. */
    if (rt->environ_area != NULL)
        explicit_bzero(rt->environ_area, rt->environ_len);
    if (rt->cmdline != NULL) {
        static const char title[] = "warren-init";
        memset(rt->cmdline, 0, rt->cmdline_len);
        memcpy(rt->cmdline, title,
               (rt->cmdline_len < sizeof(title) ? rt->cmdline_len : sizeof(title)) - 1);
    }
    environ = no_env;
    if (syscall(SYS_close_range, 7U, 8U, 0) < 0 || syscall(SYS_close_range, 10U, ~0U, 0) < 0)
        _exit(127);
    while (go_argv[argc] != NULL)
        argc++;
    rt->init_main(argc, go_argv);
    _exit(127); /* init_main does not return */
}

static __attribute__((noreturn)) void child_main(const struct child_args *a)
{
    int sync_fd = a->sync_fd, ret, null_fd, fds[GO_MAX_FDS];
    int ofd, listen_fd, conn_fd, dir_lock, uid_lock, init_fd, oom_fd, sysfs_fd = -1;
    int vol_fds[GO_MAX_BINDS]; /* the volumes', then the device nodes', then the binds' */
    const char *vol_targets[WR_MAX_MOUNTS], *dev_paths[WR_MAX_DEVICE_NODES];
    const char *bind_targets[WR_MAX_BINDS], *link_targets[WR_MAX_SYMLINKS], *links[WR_MAX_SYMLINKS];
    struct wr_rootfs_mounts vols = {.fds = vol_fds,
                                    .targets = vol_targets,
                                    .dev_paths = dev_paths,
                                    .bind_targets = bind_targets,
                                    .link_targets = link_targets,
                                    .links = links};
    size_t n_binds;
    const char *step = "setup";

    /* The child holds every capability in its new user namespace from the start, so what needs
     * no id map, no root filesystem and nothing of the sandbox's own happens now: while the
     * parent writes the maps and builds the overlay, or long before, for a pre-cloned child. */
    /* Nothing of the creator's may stay open here: a pre-cloned child can wait a long time,
     * and must not hold the daemon's listening sockets or database. */
    {
        int keep[3] = {sync_fd, a->uid_lock, a->init_fd};
        wr__close_all_but(keep, 3);
    }
    /* In a network slot the host brought lo up (and we could not: the slot is not ours). */
    ret = a->joined_net ? 0 : wr_net_loopback_up();
    if (ret < 0)
        child_fail(sync_fd, "bring up loopback", -ret);
    /* Only the bounding set shrinks here; the effective set, needed for the mounts below, stays
     * until exec. */
    ret = wr_caps_limit(wr_caps_sandbox_mask());
    if (ret < 0)
        child_fail(sync_fd, "limit capabilities", -ret);
    ret = wr_rlimits_apply();
    if (ret < 0)
        child_fail(sync_fd, "set resource limits", -ret);
    if (a->fault == FAULT_EARLY)
        child_fail(sync_fd, "injected fault (child-early)", EIO);

    ret = child_recv_go(sync_fd, fds);
    if (ret < 0)
        child_fail(sync_fd, "receive the sandbox's parameters", -ret);
    if (sethostname(go_buf.m.hostname, strlen(go_buf.m.hostname)) < 0)
        child_fail(sync_fd, "set hostname", errno);

    /* fds 3..8 as warren-init expects them (src/init/main.c), the overlay at 9 and the volumes
     * from 10 until they are attached; parked first so no dup2 overwrites a source. */
    sync_fd = park_fd(sync_fd);
    ofd = park_fd(fds[0]);
    listen_fd = park_fd(fds[1]);
    conn_fd = park_fd(fds[2]);
    dir_lock = park_fd(fds[3]);
    oom_fd = park_fd(fds[4]);
    uid_lock = park_fd(a->uid_lock);
    init_fd = park_fd(a->init_fd);
    if (sync_fd < 0 || ofd < 0 || listen_fd < 0 || conn_fd < 0 || dir_lock < 0 || oom_fd < 0 ||
        uid_lock < 0 || init_fd < 0)
        _exit(127);
    vols.n = go_buf.m.n_mounts;
    vols.n_devs = go_buf.m.n_devs;
    vols.dev_fds = vol_fds + vols.n;
    vols.n_binds = go_buf.m.n_binds;
    vols.bind_fds = vol_fds + vols.n + vols.n_devs;
    vols.bind_dirs = go_buf.m.bind_dirs;
    n_binds = vols.n + vols.n_devs + vols.n_binds;
    for (size_t i = 0; i < n_binds; i++) {
        vol_fds[i] = park_fd(fds[GO_NFDS + i]);
        if (i < vols.n)
            vol_targets[i] = go_buf.m.mount_targets[i];
        else if (i < vols.n + vols.n_devs)
            dev_paths[i - vols.n] = go_buf.m.dev_paths[i - vols.n];
        else
            bind_targets[i - vols.n - vols.n_devs] =
                go_buf.m.bind_targets[i - vols.n - vols.n_devs];
        if (vol_fds[i] < 0)
            _exit(127);
    }
    if (go_buf.m.sysfs && (sysfs_fd = park_fd(fds[GO_NFDS + n_binds])) < 0)
        _exit(127);
    vols.n_links = go_buf.m.n_links;
    for (size_t i = 0; i < vols.n_links; i++) {
        link_targets[i] = go_buf.m.link_targets[i];
        links[i] = go_buf.m.links[i];
    }
    if (dup2(listen_fd, 3) < 0 || dup2(conn_fd, 4) < 0 || dup2(dir_lock, 5) < 0 ||
        dup2(uid_lock, 6) < 0 || dup3(init_fd, 7, O_CLOEXEC) < 0 ||
        dup3(sync_fd, 8, O_CLOEXEC) < 0 || dup3(ofd, 9, O_CLOEXEC) < 0)
        child_fail(sync_fd, "arrange fds", errno);
    sync_fd = 8;
    for (size_t i = 0; i < n_binds; i++) {
        if (dup3(vol_fds[i], 10 + (int)i, O_CLOEXEC) < 0)
            child_fail(sync_fd, "arrange fds", errno);
        vol_fds[i] = 10 + (int)i;
    }
    /* The oom_score_adj fd waits after the volumes until fd 9 (the overlay) is free. */
    if (dup3(oom_fd, 10 + (int)n_binds, O_CLOEXEC) < 0)
        child_fail(sync_fd, "arrange fds", errno);
    oom_fd = 10 + (int)n_binds;
    if (sysfs_fd >= 0) {
        if (dup3(sysfs_fd, 11 + (int)n_binds, O_CLOEXEC) < 0)
            child_fail(sync_fd, "arrange fds", errno);
        sysfs_fd = 11 + (int)n_binds;
    }
    if (syscall(SYS_close_range, 11 + (unsigned)n_binds + (sysfs_fd >= 0), ~0U, 0) < 0)
        child_fail(sync_fd, "close inherited fds", errno);

    /* Until now our ids were the creator's (real uid host root, effective uid the range's
     * root, see clone_as_owner), unmapped in our own namespace: every file or mount made with
     * them would fail (EACCES) or record host root. From here on every id is the range's
     * first. */
    /* Raw system calls: glibc's wrappers would try to apply the change to every thread of the
     * process that cloned us (the daemon's), whose list the child still carries. */
    if (syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setresuid, 0, 0, 0) < 0)
        child_fail(sync_fd, "become root in the user namespace", errno);
    if (syscall(SYS_setgroups, 0, NULL) < 0)
        child_fail(sync_fd, "drop supplementary groups", errno);
    /* The parent attached us to the sandbox's cgroup before "go"; a cgroup namespace made now
     * has that cgroup as its root. */
    if (unshare(CLONE_NEWCGROUP) < 0)
        child_fail(sync_fd, "unshare cgroup namespace", errno);

    ret = wr_rootfs_enter(9, sysfs_fd, &vols, a->stage, go_buf.m.shm_bytes, &step);
    if (ret < 0)
        child_fail(sync_fd, step, -ret);
    if (go_buf.m.n_inner > 0) {
        const char *isrc[WR_MAX_INNER_BINDS], *idst[WR_MAX_INNER_BINDS];
        for (size_t i = 0; i < go_buf.m.n_inner; i++) {
            isrc[i] = go_buf.m.inner_src[i];
            idst[i] = go_buf.m.inner_dst[i];
        }
        ret = wr_inner_binds_make(isrc, idst, go_buf.m.inner_ro, go_buf.m.n_inner, &step);
        if (ret < 0)
            child_fail(sync_fd, step, -ret);
    }
    close(9);
    if (dup2(oom_fd, INIT_OOM_FD) < 0) /* not close-on-exec: warren-init's, exec'd or not */
        child_fail(sync_fd, "arrange fds", errno);
    close(oom_fd);
    if (a->fault == FAULT_ROOTFS)
        child_fail(sync_fd, "injected fault (child-rootfs)", EIO);

    /* stdio is the sandbox's own /dev/null. */
    null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(null_fd, 1) < 0 || dup2(null_fd, 2) < 0)
        child_fail(sync_fd, "open /dev/null", errno);
    close(null_fd);

    /* The parent-death signal is cleared by a change of credentials, so it is set after
     * setresuid. */
    if (go_buf.m.ephemeral && prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        child_fail(sync_fd, "set parent-death signal", errno);
    ret = wr_seccomp_install(a->seccomp, !go_buf.m.allow_setuid);
    if (ret < 0)
        child_fail(sync_fd, "install seccomp filter", -ret);

    /* warren-init is a root-owned, execute-only file of the host, exec'd by fd: the sandbox has
     * no path to it, and because the sandbox's root cannot read it the kernel makes the process
     * non-dumpable with the host's user namespace as its owner, so nothing in the sandbox can
     * ptrace it or open /proc/1/mem (docs/design/isolation.md). A child that becomes init in
     * place keeps the same two properties without the exec (child_become_init). */
    char *const envp[] = {NULL};
    if (a->fault == FAULT_EXEC)
        child_fail(sync_fd, "exec warren-init (injected fault)", ENOEXEC);
    if (a->rt->init_main != NULL)
        child_become_init(a->rt);
    syscall(SYS_execveat, 7, "", go_argv, envp, AT_EMPTY_PATH);
    child_fail(sync_fd, "exec warren-init", errno);
}

/* ---- parent --------------------------------------------------------------------------------- */

static int write_id_maps(pid_t pid, uid_t base, struct wr_err *err)
{
    char path[64], map[64];

    snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)base, WR_UID_RANGE);
    snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
    if (wr_write_fileat(AT_FDCWD, path, map, false, err) < 0)
        return -1;
    snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
    if (wr_write_fileat(AT_FDCWD, path, map, false, err) < 0)
        return -1;
    return 0;
}

/* Send "go": the message and its fds (GO_NFDS + n_mounts + n_devs + sysfs). Returns 0 or -1
 * (errno set). */
static int send_go(int fd, const struct go_msg *m, const char *argv_blob, const int *fds)
{
    size_t nfds = GO_NFDS + m->n_mounts + m->n_devs + m->n_binds + m->sysfs;
    char cbuf[CMSG_SPACE(GO_MAX_FDS * sizeof(int))];
    struct iovec iov[2] = {{.iov_base = (void *)m, .iov_len = sizeof(*m)},
                           {.iov_base = (void *)argv_blob, .iov_len = m->argv_len}};
    struct msghdr msg = {.msg_iov = iov,
                         .msg_iovlen = 2,
                         .msg_control = cbuf,
                         .msg_controllen = CMSG_SPACE(nfds * sizeof(int))};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

    memset(cbuf, 0, sizeof(cbuf));
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
    memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    return sendmsg(fd, &msg, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

static int listen_unix(const char *path, struct wr_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    _cleanup_close_ int fd = -1;

    if (strlen(path) >= sizeof(sa.sun_path))
        return wr_err_set(err, WR_EINVAL, 0, "socket path `%s` too long", path);
    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return wr_err_sys(err, "socket");
    (void)unlink(path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return wr_err_sys(err, "bind `%s`", path);
    if (chmod(path, 0600) < 0 || listen(fd, 64) < 0)
        return wr_err_sys(err, "listen `%s`", path);
    return steal_fd(&fd);
}

/* Exchange HELLO on a fresh control connection. Returns 0 or -1 with err. */
int wr__ctl_hello(int fd, int timeout_ms, pid_t *init_pid, struct wr_err *err)
{
    struct wr_buf out;
    struct wr_reader rd;
    struct wr_frame_hdr h;
    const uint8_t *payload;
    uint64_t v;
    int ret = -1;
    size_t at;

    wr_buf_init(&out);
    wr_reader_init(&rd);
    at = wr_msg_begin(&out, WR_MSG_HELLO, 0, 0);
    wr_msg_put_u64(&out, WR_TAG_VERSION, WR_PROTO_VERSION);
    wr_msg_end(&out, at);
    if (wr_write_all(fd, out.data, out.len) < 0) {
        wr_err_sys(err, "send hello");
        goto out;
    }
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        uint8_t buf[4096];
        ssize_t n;
        int r = wr_reader_next(&rd, &h, &payload, err);

        if (r < 0)
            goto out;
        if (r == 1)
            break;
        if (poll(&p, 1, timeout_ms) <= 0) {
            /* A host so loaded that a sandbox's setup takes this long (docs/design/density.md)
             * is a timeout, not a fault of the system. */
            wr_err_set(err, WR_ETIMEOUT, ETIMEDOUT, "warren-init did not answer in %d ms",
                       timeout_ms);
            goto out;
        }
        n = read(fd, buf, sizeof(buf));
        if (n <= 0) {
            wr_err_set(err, WR_EPROTO, n < 0 ? errno : 0, "warren-init closed the connection");
            goto out;
        }
        wr_reader_feed(&rd, buf, (size_t)n);
    }
    if (h.type != WR_MSG_HELLO || wr_msg_get_u64(payload, h.len, WR_TAG_VERSION, &v) < 0 ||
        v != WR_PROTO_VERSION) {
        wr_err_set(err, WR_EPROTO, 0, "warren-init answered with an unexpected hello");
        goto out;
    }
    if (init_pid != NULL && wr_msg_get_u64(payload, h.len, WR_TAG_PID, &v) == 0)
        *init_pid = (pid_t)v;
    ret = 0;
out:
    wr_buf_fini(&out);
    wr_reader_fini(&rd);
    return ret;
}

/* warren-init's argv as NUL-separated strings (the form "go" carries). */
static void append_arg(struct wr_buf *b, const char *s)
{
    wr_buf_append(b, s, strlen(s) + 1);
}

static int init_argv(const struct wr_sandbox_spec *spec, struct wr_buf *b, struct wr_err *err)
{
    size_t n = 0;

    append_arg(b, "warren-init");
    append_arg(b, "--oom-fd");
    append_arg(b, WR_STR(INIT_OOM_FD));
    if (spec->ephemeral)
        append_arg(b, "--ephemeral");
    for (const char *const *e = spec->env; e && *e; e++, n++) {
        append_arg(b, "--env");
        append_arg(b, *e);
    }
    if (spec->cwd) {
        append_arg(b, "--cwd");
        append_arg(b, spec->cwd);
    }
    if (spec->user) {
        append_arg(b, "--user");
        append_arg(b, spec->user);
    }
    if (spec->resolver != 0) {
        char a[WR_INET4_STRLEN];
        wr_inet4_format(spec->resolver, a);
        append_arg(b, "--resolver");
        append_arg(b, a);
    }
    if (b->len > GO_MAX_ARGV || 2 * n + 8 > GO_MAX_ARGS)
        return wr_err_set(err, WR_EINVAL, 0,
                          "the sandbox's environment is too large (%zu bytes, at most %u)", b->len,
                          GO_MAX_ARGV);
    return 0;
}

/* ---- pre-cloned children ------------------------------------------------------------------- */

static void warm_close(struct wr__warm *w)
{
    if (w->pid > 0) {
        if (syscall(SYS_pidfd_send_signal, w->pidfd, SIGKILL, NULL, 0) < 0)
            (void)kill(w->pid, SIGKILL);
        while (waitpid(w->pid, NULL, __WALL) < 0 && errno == EINTR)
            ;
    }
    if (w->pidfd >= 0)
        close(w->pidfd);
    if (w->sync >= 0)
        close(w->sync);
    if (w->uid_lock >= 0)
        close(w->uid_lock);
    if (w->userns_fd >= 0)
        close(w->userns_fd);
    w->pid = 0;
    w->pidfd = w->sync = w->uid_lock = w->userns_fd = -1;
}

/* clone3 with the effective uid set to `owner` (the range's root) for the call. A user
 * namespace's owner is its creator's effective uid, and the kernel charges every per-user count
 * of the namespace (inotify instances and watches, fanotify groups and marks, user and other
 * namespaces, message-queue bytes, pending signals, locked memory) up the tree to its owner in
 * the parent: made by host root, all sandboxes and host root would share one count. The thread
 * keeps its capabilities across the change (SECBIT_NO_SETUID_FIXUP), so the other namespaces of
 * the same clone3 are made with them; the uid is changed back at once. Credentials are per thread
 * (raw system calls: glibc's wrappers would apply them to every thread), and a change of
 * effective uid resets the thread's parent-death signal and the process's dumpable flag, which
 * are put back. Returns what clone3 returns (0 in the child). */
static long clone_as_owner(struct clone_args *ca, uid_t owner)
{
    int bits = prctl(PR_GET_SECUREBITS), dumpable = prctl(PR_GET_DUMPABLE), pdeath = 0, e;
    long pid;

    /* The bit stays set on this thread afterwards (it only keeps capabilities across uid
     * changes): setting it costs a change of credentials each time. */
    if (bits < 0 || prctl(PR_GET_PDEATHSIG, &pdeath) < 0 ||
        (!(bits & SECBIT_NO_SETUID_FIXUP) &&
         prctl(PR_SET_SECUREBITS, bits | SECBIT_NO_SETUID_FIXUP) < 0))
        return -1;
    if (syscall(SYS_setresuid, -1, owner, -1) < 0)
        return -1;
    pid = syscall(SYS_clone3, ca, sizeof(*ca));
    if (pid == 0)
        return 0;
    e = errno;
    /* Back to root: allowed, root being the real and saved uid. */
    if (syscall(SYS_setresuid, -1, 0, -1) < 0)
        abort(); /* a creator left as another user must not go on */
    if (dumpable >= 0)
        (void)prctl(PR_SET_DUMPABLE, dumpable);
    if (pdeath != 0)
        (void)prctl(PR_SET_PDEATHSIG, pdeath);
    errno = e;
    return pid;
}

/* Clone a child: an id range, a sync socket, clone3 into new user, mount, pid, net, uts and ipc
 * namespaces (the cgroup one the child makes itself once it is inside its cgroups), the id
 * maps, and the user namespace's fd. On failure nothing is left. */
int wr__warm_spawn_here(struct wr_runtime *rt, struct wr__warm *w, int netns_fd, struct wr_err *err)
{
    int syncp[2], self_ns = -1;
    uint32_t base;
    char path[64];

    *w = (struct wr__warm){.pidfd = -1, .sync = -1, .uid_lock = -1, .userns_fd = -1};
    if (fault_at(rt, "uids"))
        return wr_err_set(err, WR_ELIMIT, 0, "injected fault (uids)");
    if (wr_uidpool_alloc(rt->uids, &base, &w->uid_lock, err) < 0)
        return -1;
    w->uid_base = base;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, syncp) < 0) {
        wr_err_sys(err, "socketpair");
        goto fail;
    }
    w->sync = syncp[0];
    {
        struct child_args a = {
            .sync_fd = syncp[1],
            .uid_lock = w->uid_lock,
            .init_fd = rt->init_fd,
            .stage = rt->stage_dir,
            .seccomp = &rt->seccomp,
            .rt = rt,
            .joined_net = netns_fd >= 0,
            .fault = fault_at(rt, "child-early")    ? FAULT_EARLY
                     : fault_at(rt, "child-rootfs") ? FAULT_ROOTFS
                     : fault_at(rt, "child-exec")   ? FAULT_EXEC
                                                    : FAULT_NONE,
        };
        /* In the zygote the child becomes the daemon's (CLONE_PARENT), which reaps it. */
        struct clone_args ca = {
            .flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC |
                     CLONE_PIDFD | CLONE_CLEAR_SIGHAND | (netns_fd >= 0 ? 0 : CLONE_NEWNET) |
                     (rt->in_zygote ? CLONE_PARENT : 0),
            .pidfd = (uint64_t)(uintptr_t)&w->pidfd,
            .exit_signal = rt->in_zygote ? 0 : SIGCHLD,
        };
        long pid;

        /* Into the slot for the clone only: the child inherits it, this thread goes back. */
        if (netns_fd >= 0) {
            self_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
            if (self_ns < 0 || setns(netns_fd, CLONE_NEWNET) < 0) {
                wr_err_sys(err, "enter the network slot");
                close(syncp[1]);
                if (self_ns >= 0)
                    close(self_ns);
                goto fail;
            }
        }
        pid = clone_as_owner(&ca, w->uid_base);
        if (pid != 0 && self_ns >= 0) {
            if (setns(self_ns, CLONE_NEWNET) < 0)
                abort(); /* a thread left in a sandbox's netns must not go on */
            close(self_ns);
        }
        if (pid < 0) {
            int e = errno;
            close(syncp[1]);
            wr_err_set(err, e == ENOSPC || e == EAGAIN ? WR_ELIMIT : WR_ESYS, e, "clone3");
            goto fail;
        }
        if (pid == 0) {
            close(w->sync);
            child_main(&a);
        }
        w->pid = (pid_t)pid;
        close(syncp[1]);
    }
    if (fault_at(rt, "maps")) {
        wr_err_set(err, WR_ESYS, EIO, "injected fault (maps)");
        goto fail;
    }
    if (write_id_maps(w->pid, w->uid_base, err) < 0)
        goto fail;
    /* A creator the OOM killer treats specially (systemd's OOMScoreAdjust=, say) must not pass
     * that on: the sandbox starts from 0 (with CAP_SYS_RESOURCE this also resets the minimum
     * its processes may lower themselves to). */
    if (rt->oom_adj_inherited) {
        snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", (int)w->pid);
        if (wr_write_fileat(AT_FDCWD, path, "0", false, err) < 0)
            goto fail;
    }
    snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)w->pid);
    w->userns_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (w->userns_fd < 0) {
        wr_err_sys(err, "open `%s`", path);
        goto fail;
    }
    return 0;
fail:
    warm_close(w);
    return -1;
}

/* netns_fd: the network slot to clone into, or -1 for a netns of the child's own. */
static int warm_spawn(struct wr_runtime *rt, struct wr__warm *w, int netns_fd, struct wr_err *err)
{
    return rt->zygote_fd >= 0 ? wr__zygote_spawn(rt, w, netns_fd, err)
                              : wr__warm_spawn_here(rt, w, netns_fd, err);
}

int wr_runtime_prewarm(struct wr_runtime *rt, unsigned n, struct wr_err *err)
{
    int made = 0;

    for (;;) {
        struct wr__warm w;
        bool full;

        pthread_mutex_lock(&rt->pool_lock);
        full = rt->npool + rt->pool_pending >= n || rt->npool >= WR__POOL_MAX;
        if (!full)
            rt->pool_pending++;
        pthread_mutex_unlock(&rt->pool_lock);
        if (full)
            return made;
        if (warm_spawn(rt, &w, -1, err) < 0) {
            pthread_mutex_lock(&rt->pool_lock);
            rt->pool_pending--;
            pthread_mutex_unlock(&rt->pool_lock);
            return -1;
        }
        pthread_mutex_lock(&rt->pool_lock);
        rt->pool_pending--;
        rt->pool[rt->npool++] = w;
        pthread_mutex_unlock(&rt->pool_lock);
        made++;
    }
}

/* Take a pre-cloned child (the most recent: its pages are warmest). False if none. */
static bool warm_take(struct wr_runtime *rt, struct wr__warm *w)
{
    bool got = false;

    pthread_mutex_lock(&rt->pool_lock);
    if (rt->npool > 0) {
        *w = rt->pool[--rt->npool];
        got = true;
    }
    pthread_mutex_unlock(&rt->pool_lock);
    return got;
}

static void netwarm_close(struct wr__netwarm *nw)
{
    warm_close(&nw->w);
    if (nw->netns_fd >= 0)
        close(nw->netns_fd);
    if (nw->sysfs_fd >= 0)
        close(nw->sysfs_fd);
    nw->netns_fd = nw->sysfs_fd = -1;
}

void wr__runtime_pool_drain(struct wr_runtime *rt)
{
    struct wr__warm w;

    while (warm_take(rt, &w))
        warm_close(&w);
    pthread_mutex_lock(&rt->pool_lock);
    while (rt->nnetpool > 0)
        netwarm_close(&rt->netpool[--rt->nnetpool]);
    pthread_mutex_unlock(&rt->pool_lock);
}

int wr_runtime_prewarm_net(struct wr_runtime *rt, const int *netns_fds, const uint32_t *slots,
                           const uint32_t *resolvers, size_t n, struct wr_err *err)
{
    int made = 0;

    for (size_t i = 0; i < n; i++) {
        struct wr__netwarm nw = {
            .w = {.pidfd = -1, .sync = -1, .uid_lock = -1, .userns_fd = -1},
            .netns_fd = -1,
            .sysfs_fd = -1,
            .slot = slots[i],
            .resolver = resolvers != NULL ? resolvers[i] : 0,
        };
        bool full;

        pthread_mutex_lock(&rt->pool_lock);
        full = rt->nnetpool >= WR__POOL_MAX;
        pthread_mutex_unlock(&rt->pool_lock);
        if (full)
            break;
        if (ioctl(netns_fds[i], NS_GET_NSTYPE) != CLONE_NEWNET)
            return wr_err_set(err, WR_EINVAL, errno, "fd %d is not a network namespace",
                              netns_fds[i]);
        nw.netns_fd = fcntl(netns_fds[i], F_DUPFD_CLOEXEC, 3);
        if (nw.netns_fd < 0)
            return wr_err_sys(err, "dup the slot's netns");
        nw.sysfs_fd = wr_sysfs_build(nw.netns_fd, err);
        if (nw.sysfs_fd < 0 || warm_spawn(rt, &nw.w, nw.netns_fd, err) < 0) {
            nw.w.pid = 0;
            netwarm_close(&nw);
            return made > 0 ? made : -1;
        }
        pthread_mutex_lock(&rt->pool_lock);
        if (rt->nnetpool < WR__POOL_MAX) {
            rt->netpool[rt->nnetpool++] = nw;
            nw.w.pid = 0;
            made++;
        }
        pthread_mutex_unlock(&rt->pool_lock);
        if (nw.w.pid != 0) { /* filled meanwhile */
            netwarm_close(&nw);
            break;
        }
    }
    return made;
}

size_t wr_runtime_pooled(struct wr_runtime *rt)
{
    size_t n;

    pthread_mutex_lock(&rt->pool_lock);
    n = rt->npool;
    pthread_mutex_unlock(&rt->pool_lock);
    return n;
}

size_t wr_runtime_net_pooled(struct wr_runtime *rt)
{
    size_t n;

    pthread_mutex_lock(&rt->pool_lock);
    n = rt->nnetpool;
    pthread_mutex_unlock(&rt->pool_lock);
    return n;
}

/* Take the child pre-cloned into slot (any: the most recent one, whatever its slot). False if
 * none. */
static bool netwarm_take(struct wr_runtime *rt, bool any, uint32_t slot, struct wr__netwarm *nw)
{
    bool got = false;

    pthread_mutex_lock(&rt->pool_lock);
    for (size_t i = rt->nnetpool; i-- > 0;) {
        if (!any && rt->netpool[i].slot != slot)
            continue;
        *nw = rt->netpool[i];
        rt->netpool[i] = rt->netpool[--rt->nnetpool];
        got = true;
        break;
    }
    pthread_mutex_unlock(&rt->pool_lock);
    return got;
}

static void sandbox_free(struct wr_sandbox *sb)
{
    if (sb->ctl_fd >= 0)
        close(sb->ctl_fd);
    if (sb->pidfd >= 0)
        close(sb->pidfd);
    if (sb->dir_lock >= 0)
        close(sb->dir_lock);
    if (sb->uid_lock >= 0)
        close(sb->uid_lock);
    free(sb->id);
    free(sb->dir);
    free(sb->ctl_path);
    free(sb);
}

/* A pidfd on warren-init of a sandbox we did not create, if its pid still is that process:
 * the pid may have been reused by an unrelated process once init was gone, so it must sit in
 * the sandbox's own cgroup (the pidfd, opened first, pins the identity checked). -1 with errno
 * ESRCH if it is gone. */
static int open_init_pidfd(const struct wr_sandbox *sb)
{
    char path[64], buf[4096];
    int fd = (int)syscall(SYS_pidfd_open, sb->pid, 0);

    if (fd < 0)
        return -1;
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)sb->pid);
    if (wr_read_fileat(AT_FDCWD, path, buf, sizeof(buf), NULL) < 0 || strstr(buf, sb->id) == NULL) {
        close(fd);
        errno = ESRCH;
        return -1;
    }
    return fd;
}

/* Kill and reap warren-init (and with it the whole pid namespace). */
static void kill_and_reap(struct wr_sandbox *sb)
{
    if (sb->pid <= 0 || sb->reaped)
        return;
    if (sb->pidfd < 0 && sb->adopted) { /* closed by wr_sandbox_drop_fds */
        sb->pidfd = open_init_pidfd(sb);
        if (sb->pidfd < 0) {
            sb->reaped = true; /* gone already, and reaped by its parent */
            return;
        }
    }
    if (syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH &&
        !sb->adopted)
        (void)kill(sb->pid, SIGKILL);
    if (sb->adopted) {
        /* Someone else reaps it; the pidfd turns readable once it (and its pid namespace) has
         * exited. */
        struct pollfd p = {.fd = sb->pidfd, .events = POLLIN};
        while (poll(&p, 1, 10000) < 0 && errno == EINTR)
            ;
    } else {
        while (waitpid(sb->pid, NULL, __WALL) < 0 && errno == EINTR)
            ;
    }
    sb->reaped = true;
}

/* Undo every step that was done, in reverse. Used by create on failure and by destroy. */
int wr__sandbox_undo(struct wr_sandbox *sb, struct wr_err *err)
{
    struct wr_err e2;
    int ret = 0;

    /* A gvisor sandbox's processes (sentry, gofer, stubs) are not in a pid namespace that
     * ends with its first process: the cgroup is emptied instead. */
    if (sb->backend == WR_BACKEND_GVISOR && sb->cg != NULL && !sb->reaped &&
        wr_cgroup_kill(sb->cg, &e2) < 0)
        log_warn("sandbox %s: %s", sb->id, e2.msg);
    kill_and_reap(sb);
    if (sb->cg != NULL) {
        /* A process that escaped the pid namespace's teardown cannot exist, but a cgroup can
         * still hold exiting tasks for a moment; destroy waits for them. */
        if (wr_cgroup_destroy(sb->cg, &e2) < 0) {
            log_warn("sandbox %s: %s", sb->id, e2.msg);
            if (ret == 0 && err != NULL)
                *err = e2;
            ret = -1;
        }
        sb->cg = NULL;
    }
    if (sb->dir != NULL) {
        _cleanup_close_ int parent =
            open(sb->rt->sandboxes_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        wr__gvisor_unmount(sb->dir);
        if (parent >= 0 && wr_rm_rf_at(parent, sb->id, &e2) < 0) {
            log_warn("sandbox %s: %s", sb->id, e2.msg);
            if (ret == 0 && err != NULL)
                *err = e2;
            ret = -1;
        }
    }
    sandbox_free(sb);
    return ret;
}

static void close_vol_fds(int *fds)
{
    for (size_t i = 0; i < GO_MAX_BINDS; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

/* A create in progress: what its steps make and hand on, until the sandbox is whole. */
struct create {
    struct wr_runtime *rt;
    const struct wr_sandbox_spec *spec;
    const char *hostname;
    struct wr_sandbox *sb;
    struct wr_buf argv; /* warren-init's */
    int listen_fd, sync_parent, conn_child, userns_fd, overlay_fd, oom_fd, sysfs_fd;
    /* vol_fds: the volumes' mounts, then the device nodes', then the binds', in go_fds */
    int go_fds[GO_NFDS + GO_MAX_BINDS], *vol_fds;
    unsigned char bind_dirs[WR_MAX_BINDS];
    struct wr_rootfs_spent spent;
};

/* Testing hook: fail the create at `step` with kind and errnum if wr_runtime_config.fault names
 * it. Returns -1 (err set) if so, else 0. */
static int inject(const struct wr_runtime *rt, const char *step, enum wr_err_kind kind, int errnum,
                  struct wr_err *err)
{
    if (!fault_at(rt, step))
        return 0;
    return wr_err_set(err, kind, errnum, "injected fault (%s)", step);
}

static int check_spec(const struct wr_sandbox_spec *spec, const char *hostname, struct wr_err *err)
{
    struct go_msg go;

    if (!wr__valid_id(spec->id))
        return wr_err_set(err, WR_EINVAL, 0, "sandbox id `%s` must be 1-64 of [A-Za-z0-9_-]",
                          spec->id ? spec->id : "");
    if (strlen(hostname) >= sizeof(go.hostname))
        return wr_err_set(err, WR_EINVAL, 0, "hostname longer than 64 bytes");
    if (spec->n_layers == 0)
        return wr_err_set(err, WR_EINVAL, 0, "image has no layers");
    for (size_t i = 0; i < spec->n_layers; i++) {
        struct stat st;
        if (stat(spec->layers[i], &st) < 0 || !S_ISDIR(st.st_mode))
            return wr_err_set(err, WR_EINVAL, errno, "image layer `%s` is not a directory",
                              spec->layers[i]);
    }
    if (wr_mounts_check(spec->mounts, spec->n_mounts, err) < 0 ||
        wr_devices_check(spec->devices, spec->n_devices, err) < 0 ||
        wr_binds_check(spec->binds, spec->n_binds, err) < 0 ||
        wr_symlinks_check(spec->symlinks, spec->n_symlinks, err) < 0 ||
        wr_inner_binds_check(spec->inner_binds, spec->n_inner_binds, err) < 0)
        return -1;
    if (spec->netns_fd > 0 && ioctl(spec->netns_fd, NS_GET_NSTYPE) != CLONE_NEWNET)
        return wr_err_set(err, WR_EINVAL, errno, "netns_fd %d is not a network namespace",
                          spec->netns_fd);
    for (size_t i = 0; i < spec->n_mounts; i++) {
        struct stat st;
        if (stat(spec->mounts[i].host_dir, &st) < 0 || !S_ISDIR(st.st_mode))
            return wr_err_set(err, WR_EINVAL, errno, "volume directory `%s` is not a directory",
                              spec->mounts[i].host_dir);
    }
    return 0;
}

/* The sandbox and its run directory, whose lock is held for the sandbox's whole life, by us and
 * by warren-init, so a sweep can tell a crashed sandbox from a live one. A run directory that
 * exists is a conflict. NULL (err set, nothing left) on failure. */
struct wr_sandbox *wr__sandbox_new(struct wr_runtime *rt, const char *id, struct wr_err *err)
{
    struct wr_sandbox *sb = xcalloc(1, sizeof(*sb));
    char *dir = xasprintf("%s/%s", rt->sandboxes_dir, id);
    _cleanup_free_ char *lock = NULL;

    sb->rt = rt;
    sb->id = xstrdup(id);
    sb->ctl_fd = sb->pidfd = sb->dir_lock = sb->uid_lock = -1;
    sb->net_slot = -1;
    sb->timing.start = now_ns();
    if (mkdir(dir, 0700) < 0) {
        int e = errno;
        free(dir);
        wr_err_set(err, e == EEXIST ? WR_ECONFLICT : WR_ESYS, e, "sandbox `%s` run directory", id);
        sandbox_free(sb);
        return NULL;
    }
    sb->dir = dir;
    lock = xasprintf("%s/lock", sb->dir);
    sb->dir_lock = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (sb->dir_lock < 0 || flock(sb->dir_lock, LOCK_EX | LOCK_NB) < 0) {
        wr_err_sys(err, "lock `%s`", lock);
        wr_err_wrap(err, "create sandbox %s", id);
        (void)wr__sandbox_undo(sb, NULL);
        return NULL;
    }
    sb->ctl_path = xasprintf("%s/ctl.sock", sb->dir);
    return sb;
}

/* The control socket warren-init will serve, and the creator's first connection. */
static int control_socket(struct create *c, struct wr_err *err)
{
    int ctl[2];

    c->listen_fd = listen_unix(c->sb->ctl_path, err);
    if (c->listen_fd < 0)
        return -1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0)
        return wr_err_sys(err, "socketpair");
    c->sb->ctl_fd = ctl[0];
    c->conn_child = ctl[1];
    return 0;
}

/* A child in its namespaces with its own id range: pre-cloned if the pool has one (an
 * ephemeral sandbox's child must be ours: its parent-death signal follows its creator; one in a
 * network slot is cloned into it now). */
static int take_child(struct create *c, struct wr_err *err)
{
    struct wr_sandbox *sb = c->sb;
    struct wr__warm w;
    char path[64];
    bool joined = c->spec->netns_fd > 0 || c->spec->netns_fd == WR_NETNS_POOLED;

    if (c->spec->netns_fd == WR_NETNS_POOLED) {
        struct wr__netwarm nw;
        if (!netwarm_take(c->rt, c->spec->pooled_any, c->spec->pooled_slot, &nw))
            return wr_err_set(err, WR_ELIMIT, 0, "no child waits in a network slot");
        w = nw.w;
        close(nw.netns_fd);
        c->sysfs_fd = nw.sysfs_fd;
        sb->net_slot = nw.slot;
        if (c->spec->resolver == 0 && nw.resolver != 0) {
            char a[WR_INET4_STRLEN];
            wr_inet4_format(nw.resolver, a);
            append_arg(&c->argv, "--resolver");
            append_arg(&c->argv, a);
        }
    } else if (joined) {
        if (warm_spawn(c->rt, &w, c->spec->netns_fd, err) < 0)
            return -1;
    } else if (c->spec->ephemeral || !warm_take(c->rt, &w)) {
        if (warm_spawn(c->rt, &w, -1, err) < 0)
            return -1;
    }
    if (!c->spec->ephemeral && !joined && c->rt->pool_taken != NULL)
        c->rt->pool_taken(c->rt->pool_taken_arg); /* taken, or found empty: time to refill */
    sb->pid = w.pid;
    sb->pidfd = w.pidfd;
    sb->uid_lock = w.uid_lock;
    sb->uid_base = w.uid_base;
    c->sync_parent = w.sync;
    c->userns_fd = w.userns_fd;
    snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", (int)sb->pid);
    c->oom_fd = open(path, O_WRONLY | O_CLOEXEC);
    if (c->oom_fd < 0)
        return wr_err_sys(err, "open `%s`", path);
    sb->timing.cloned = sb->timing.mapped = now_ns();
    wr_runtime_crash_point(c->rt, "cloned");
    return 0;
}

/* The cgroups, with the limits. */
static int make_cgroup(struct create *c, struct wr_err *err)
{
    struct wr_cgroup_limits lim = {.memory_bytes = c->spec->memory_bytes,
                                   .cpu_millis = c->spec->cpu_millis,
                                   .pids_max = c->spec->pids_max,
                                   .devices = true,
                                   .device_nodes = c->spec->devices,
                                   .n_devices = c->spec->n_devices};

    if (wr_cgroup_create(c->rt->cg, c->spec->id, &lim, &c->sb->cg, err) < 0)
        return -1;
    return inject(c->rt, "cgroup", WR_ESYS, EIO, err);
}

/* The idmapped overlay of the root, then the volumes' idmapped mounts. */
static int build_rootfs(struct create *c, struct wr_err *err)
{
    const struct wr_sandbox_spec *spec = c->spec;

    if (wr_rootfs_build(spec->layers, spec->n_layers, c->userns_fd, spec->upper_dir,
                        fit_memory(spec->tmpfs_bytes ? spec->tmpfs_bytes : UPPER_TMPFS_BYTES,
                                   spec->memory_bytes, 2),
                        c->sb->uid_base, &c->overlay_fd, &c->spent, err) < 0)
        return -1;
    c->sb->timing.overlay = now_ns();
    if (inject(c->rt, "overlay", WR_ESYS, EIO, err) < 0 ||
        wr_mounts_build(spec->mounts, spec->n_mounts, c->userns_fd, c->vol_fds, err) < 0 ||
        wr_device_mounts_build(spec->devices, spec->n_devices, c->sb->uid_base,
                               c->vol_fds + spec->n_mounts, err) < 0 ||
        wr_binds_build(spec->binds, spec->n_binds, c->vol_fds + spec->n_mounts + spec->n_devices,
                       c->bind_dirs, err) < 0)
        return -1;
    if (spec->netns_fd > 0 && c->sysfs_fd < 0 &&
        (c->sysfs_fd = wr_sysfs_build(spec->netns_fd, err)) < 0)
        return -1;
    return inject(c->rt, "volumes", WR_ESYS, EIO, err);
}

/* Into the cgroups before the child runs anything of the sandbox. */
static int attach_cgroup(struct create *c, struct wr_err *err)
{
    if (wr_cgroup_attach(c->sb->cg, c->sb->pid, err) < 0 ||
        inject(c->rt, "attach", WR_ESYS, EIO, err) < 0)
        return -1;
    wr_runtime_crash_point(c->rt, "attached");
    c->sb->timing.cgroup = now_ns();
    return 0;
}

/* Go, then wait: a report means a step failed, EOF means warren-init was exec'd. If the child
 * failed already (its report waits in the socket), sending fails: the report says why. */
static int start_init(struct create *c, struct wr_err *err)
{
    const struct wr_sandbox_spec *spec = c->spec;
    struct go_msg go = {0};
    struct child_report rep;
    ssize_t n;

    go.shm_bytes = wr__shm_bytes(spec->memory_bytes);
    go.argv_len = (uint32_t)c->argv.len;
    go.ephemeral = spec->ephemeral;
    go.allow_setuid = spec->allow_setuid;
    memcpy(go.hostname, c->hostname, strlen(c->hostname) + 1);
    go.n_mounts = (uint8_t)spec->n_mounts;
    go.n_devs = (uint8_t)spec->n_devices;
    go.n_binds = (uint8_t)spec->n_binds;
    go.n_links = (uint8_t)spec->n_symlinks;
    for (size_t i = 0; i < spec->n_symlinks; i++) {
        memcpy(go.link_targets[i], spec->symlinks[i].target, strlen(spec->symlinks[i].target) + 1);
        memcpy(go.links[i], spec->symlinks[i].link, strlen(spec->symlinks[i].link) + 1);
    }

    go.n_inner = (uint8_t)spec->n_inner_binds;
    for (size_t i = 0; i < spec->n_inner_binds; i++) {
        memcpy(go.inner_src[i], spec->inner_binds[i].src, strlen(spec->inner_binds[i].src) + 1);
        memcpy(go.inner_dst[i], spec->inner_binds[i].dst, strlen(spec->inner_binds[i].dst) + 1);
        go.inner_ro[i] = spec->inner_binds[i].read_only;
    }
    for (size_t i = 0; i < spec->n_binds; i++) {
        memcpy(go.bind_targets[i], spec->binds[i].target, strlen(spec->binds[i].target) + 1);
        go.bind_dirs[i] = c->bind_dirs[i];
    }
    go.sysfs = c->sysfs_fd >= 0;
    for (size_t i = 0; i < spec->n_mounts; i++)
        memcpy(go.mount_targets[i], spec->mounts[i].target, strlen(spec->mounts[i].target) + 1);
    for (size_t i = 0; i < spec->n_devices; i++)
        memcpy(go.dev_paths[i], spec->devices[i].path, strlen(spec->devices[i].path) + 1);
    c->go_fds[0] = c->overlay_fd;
    c->go_fds[1] = c->listen_fd;
    c->go_fds[2] = c->conn_child;
    c->go_fds[3] = c->sb->dir_lock;
    c->go_fds[4] = c->oom_fd;
    {
        int fds[GO_MAX_FDS];
        size_t nfds = GO_NFDS + spec->n_mounts + spec->n_devices + spec->n_binds;
        memcpy(fds, c->go_fds, nfds * sizeof(int));
        fds[nfds] = c->sysfs_fd; /* sent only if go.sysfs */
        (void)send_go(c->sync_parent, &go, (const char *)c->argv.data, fds);
    }
    wr_runtime_crash_point(c->rt, "go");
    close_vol_fds(c->vol_fds);
    close(steal_fd(&c->overlay_fd));
    close(steal_fd(&c->listen_fd));
    close(steal_fd(&c->conn_child));
    close(steal_fd(&c->oom_fd));
    if (c->sysfs_fd >= 0)
        close(steal_fd(&c->sysfs_fd));
    wr_rootfs_spent_close(&c->spent); /* the RCU waits overlap the child's setup */
    /* A child that failed before reading the go message exits with it unread: the kernel then
     * reports ECONNRESET once (and clears it) even though the child's report is queued. */
    do {
        n = read(c->sync_parent, &rep, sizeof(rep));
    } while (n < 0 && errno == EINTR);
    if (n < 0 && errno == ECONNRESET)
        n = read(c->sync_parent, &rep, sizeof(rep));
    if (n == (ssize_t)sizeof(rep)) {
        rep.step[sizeof(rep.step) - 1] = '\0';
        return wr_err_set(err, rep.err == EPERM || rep.err == EACCES ? WR_EUNSUPPORTED : WR_ESYS,
                          rep.err, "sandbox setup: %s", rep.step);
    } else if (n != 0) {
        return wr_err_set(err, WR_EINTERNAL, n < 0 ? errno : 0, "sandbox setup: bad report");
    }
    return 0;
}

/* warren-init's hello on the creator's connection: the sandbox is ready. */
static int await_hello(struct create *c, struct wr_err *err)
{
    if (inject(c->rt, "hello", WR_EPROTO, 0, err) < 0 ||
        wr__ctl_hello(c->sb->ctl_fd, HELLO_TIMEOUT_MS, NULL, err) < 0)
        return -1;
    wr_runtime_crash_point(c->rt, "hello");
    c->sb->timing.ready = now_ns();
    return 0;
}

/* A sandbox's making, step by step. A step that fails undoes nothing itself: teardown undoes
 * every step that was done. */
static int (*const create_steps[])(struct create *c, struct wr_err *err) = {
    control_socket, /* the control socket warren-init will serve */
    take_child,     /* a child in its namespaces, pre-cloned or cloned now */
    make_cgroup,    /* its cgroups with the limits */
    build_rootfs,   /* the idmapped overlay and the volumes */
    attach_cgroup,  /* the child into its cgroups */
    start_init,     /* "go": the child sets up and becomes warren-init */
    await_hello,    /* warren-init answers */
};

static void create_fini(struct create *c)
{
    int *fds[] = {&c->listen_fd,  &c->sync_parent, &c->conn_child, &c->userns_fd,
                  &c->overlay_fd, &c->oom_fd,      &c->sysfs_fd};

    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (*fds[i] >= 0)
            close(steal_fd(fds[i]));
    close_vol_fds(c->vol_fds);
    wr_rootfs_spent_close(&c->spent);
    wr_buf_fini(&c->argv);
}

int wr_sandbox_create(struct wr_runtime *rt, const struct wr_sandbox_spec *spec,
                      struct wr_sandbox **out, struct wr_err *err)
{
    struct create c = {
        .rt = rt,
        .spec = spec,
        .hostname = spec->hostname ? spec->hostname : spec->id,
        .listen_fd = -1,
        .sync_parent = -1,
        .conn_child = -1,
        .userns_fd = -1,
        .overlay_fd = -1,
        .oom_fd = -1,
        .sysfs_fd = -1,
        .spent = {.n = 0},
    };

    if (spec->backend == WR_BACKEND_GVISOR)
        return wr__gvisor_create(rt, spec, out, err);
    c.vol_fds = c.go_fds + GO_NFDS;
    for (size_t i = 0; i < GO_MAX_BINDS; i++)
        c.vol_fds[i] = -1;
    wr_buf_init(&c.argv);
    if (check_spec(spec, c.hostname, err) < 0 || init_argv(spec, &c.argv, err) < 0 ||
        (c.sb = wr__sandbox_new(rt, spec->id, err)) == NULL) {
        wr_buf_fini(&c.argv);
        return -1;
    }
    for (size_t i = 0; i < sizeof(create_steps) / sizeof(create_steps[0]); i++) {
        if (create_steps[i](&c, err) < 0) {
            create_fini(&c);
            wr_err_wrap(err, "create sandbox %s", spec->id);
            (void)wr__sandbox_undo(c.sb, NULL);
            return -1;
        }
    }
    create_fini(&c);
    *out = c.sb;
    return 0;
}

/* A sandbox's first process is PID 1 of a pid namespace one below ours: NSpid reads "<pid> 1".
 * (A process in a pid namespace the sandbox made itself would have more fields.) */
static bool is_ns_init(pid_t pid)
{
    char path[64], buf[4096];
    const char *p;
    int fields = 0;
    bool one = false;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if (wr_read_fileat(AT_FDCWD, path, buf, sizeof(buf), NULL) < 0 ||
        (p = strstr(buf, "\nNSpid:")) == NULL)
        return false;
    for (p += strlen("\nNSpid:"); *p != '\0' && *p != '\n';) {
        char *end;
        long v;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0' || *p == '\n')
            break;
        v = strtol(p, &end, 10);
        if (end == p)
            return false;
        fields++;
        one = v == 1;
        p = end;
    }
    return fields == 2 && one;
}

static void find_ns_init(pid_t pid, void *arg)
{
    pid_t *found = arg;
    if (*found <= 0 && is_ns_init(pid))
        *found = pid;
}

/* The first host id that process pid's user namespace maps 0 to. */
static int read_uid_base(pid_t pid, uid_t *out, struct wr_err *err)
{
    char path[64], buf[256];
    unsigned inside, outside, count;

    snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
    if (wr_read_fileat(AT_FDCWD, path, buf, sizeof(buf), err) < 0)
        return -1;
    if (sscanf(buf, "%u %u %u", &inside, &outside, &count) != 3 || inside != 0 ||
        count != WR_UID_RANGE)
        return wr_err_set(err, WR_ENOTFOUND, 0, "pid %d does not map a sandbox's id range",
                          (int)pid);
    *out = outside;
    return 0;
}

int wr_sandbox_adopt(struct wr_runtime *rt, const char *id, pid_t pid, uid_t uid_base,
                     struct wr_sandbox **out, struct wr_err *err)
{
    struct wr_sandbox *sb;
    struct stat st;

    if (!wr__valid_id(id))
        return wr_err_set(err, WR_EINVAL, 0, "sandbox id `%s` is not valid", id);
    sb = xcalloc(1, sizeof(*sb));
    sb->rt = rt;
    sb->id = xstrdup(id);
    sb->ctl_fd = sb->pidfd = sb->dir_lock = sb->uid_lock = -1;
    sb->net_slot = -1;
    sb->adopted = true;
    sb->dir = xasprintf("%s/%s", rt->sandboxes_dir, id);
    sb->ctl_path = xasprintf("%s/ctl.sock", sb->dir);
    if (wr_cgroup_lookup(rt->cg, id, &sb->cg, err) < 0)
        goto fail;
    {
        _cleanup_close_ int dir = open(sb->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char buf[24] = "";
        sb->backend = dir >= 0 ? wr__dir_backend(dir) : WR_BACKEND_NS;
        /* A gvisor sandbox's pid is warren-shim's, which its run directory records. */
        if (sb->backend == WR_BACKEND_GVISOR && pid <= 0 &&
            wr_read_fileat(dir, "shim.pid", buf, sizeof(buf), NULL) > 0)
            pid = (pid_t)strtol(buf, NULL, 10);
        if (sb->backend == WR_BACKEND_GVISOR)
            uid_base = 0;
    }
    if (pid <= 0) {
        /* A create cut short: the child is the one process there that heads a pid namespace. */
        if (wr_cgroup_procs(sb->cg, find_ns_init, &pid, err) < 0)
            goto fail;
        if (pid <= 0) {
            wr_err_set(err, WR_ENOTFOUND, 0, "sandbox %s: no warren-init in its cgroup", id);
            goto fail;
        }
        if (read_uid_base(pid, &uid_base, err) < 0)
            goto fail;
    }
    sb->pid = pid;
    sb->uid_base = uid_base;
    sb->pidfd = open_init_pidfd(sb);
    if (sb->pidfd < 0 || stat(sb->dir, &st) < 0) {
        wr_err_set(err, WR_ENOTFOUND, errno, "sandbox %s: warren-init (pid %d) is gone", id,
                   (int)pid);
        goto fail;
    }
    *out = sb;
    return 0;
fail:
    wr_cgroup_forget(sb->cg);
    free(sb->dir);
    sb->dir = NULL; /* nothing of the sandbox is removed on a failed adopt */
    sandbox_free(sb);
    return -1;
}

int wr_sandbox_hello(struct wr_sandbox *sb, int timeout_ms, struct wr_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    _cleanup_close_ int fd = -1;

    if (strlen(sb->ctl_path) >= sizeof(sa.sun_path))
        return wr_err_set(err, WR_EINVAL, 0, "socket path `%s` too long", sb->ctl_path);
    strcpy(sa.sun_path, sb->ctl_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return wr_err_sys(err, "socket");
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return wr_err_set(err, errno == ECONNREFUSED || errno == ENOENT ? WR_ENOTFOUND : WR_ESYS,
                          errno, "sandbox %s: connect to warren-init", sb->id);
    if (wr__ctl_hello(fd, timeout_ms, NULL, err) < 0)
        return wr_err_wrap(err, "sandbox %s", sb->id);
    return 0;
}

int wr_sandbox_cleanup(struct wr_runtime *rt, const char *id, struct wr_err *err)
{
    _cleanup_close_ int dir = -1, lock = -1;
    _cleanup_free_ char *lockpath = NULL;
    struct wr_err e2;

    if (!wr__valid_id(id))
        return wr_err_set(err, WR_EINVAL, 0, "sandbox id `%s` is not valid", id);
    lockpath = xasprintf("%s/%s/lock", rt->sandboxes_dir, id);
    lock = open(lockpath, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) < 0)
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox %s is still running", id);
    if (wr_cgroup_remove_stale(rt->cg, id, &e2) < 0)
        log_warn("cleanup %s: %s", id, e2.msg);
    dir = open(rt->sandboxes_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return wr_err_sys(err, "open `%s`", rt->sandboxes_dir);
    {
        _cleanup_free_ char *sbdir = xasprintf("%s/%s", rt->sandboxes_dir, id);
        wr__gvisor_unmount(sbdir);
    }
    return wr_rm_rf_at(dir, id, err);
}

int wr_sandbox_reap(struct wr_runtime *rt, const char *id, struct wr_err *err)
{
    struct wr_cgroup *cg = NULL;
    struct wr_err e2;
    int rc;

    if (!wr__valid_id(id))
        return wr_err_set(err, WR_EINVAL, 0, "sandbox id `%s` is not valid", id);
    if (wr_cgroup_lookup(rt->cg, id, &cg, NULL) == 0) {
        rc = wr_cgroup_kill(cg, err); /* returns once cgroup.procs is empty */
        wr_cgroup_forget(cg);
        if (rc < 0)
            return -1;
    }
    /* The run directory's lock closes with the last process's files, just before it is
     * reaped (by whoever inherited it): wait for that, briefly. */
    for (int i = 0;; i++) {
        rc = wr_sandbox_cleanup(rt, id, &e2);
        if (rc == 0 || e2.kind != WR_ECONFLICT || i == 200)
            break;
        usleep(10 * 1000);
    }
    if (rc < 0 && e2.kind == WR_ESYS && e2.sys_errno == ENOENT)
        return 0; /* nothing was left */
    if (rc < 0 && err != NULL)
        *err = e2;
    return rc;
}

int wr_sandbox_freeze(struct wr_sandbox *sb, bool frozen, struct wr_err *err)
{
    if (sb->cg == NULL)
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox %s has no cgroup", sb->id);
    if (wr_cgroup_freeze(sb->cg, frozen, err) < 0)
        return wr_err_wrap(err, "sandbox %s", sb->id);
    return 0;
}

int wr_sandbox_usage(struct wr_sandbox *sb, struct wr_sandbox_usage *u, struct wr_err *err)
{
    if (sb->cg == NULL)
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox %s has no cgroup", sb->id);
    if (wr_cgroup_cpu(sb->cg, &u->cpu_ns, err) < 0 ||
        wr_cgroup_memory(sb->cg, &u->memory_bytes, NULL, err) < 0)
        return wr_err_wrap(err, "sandbox %s", sb->id);
    return 0;
}

int wr_sandbox_limit_hits(struct wr_sandbox *sb, struct wr_sandbox_limit_hits *h,
                          struct wr_err *err)
{
    if (sb->cg == NULL)
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox %s has no cgroup", sb->id);
    if (wr_cgroup_memory(sb->cg, NULL, &h->oom_kills, err) < 0 ||
        wr_cgroup_pids_refused(sb->cg, &h->pids_refused, err) < 0)
        return wr_err_wrap(err, "sandbox %s", sb->id);
    return 0;
}

int wr_sandbox_usage_by_id(struct wr_runtime *rt, const char *id, struct wr_sandbox_usage *u,
                           struct wr_err *err)
{
    struct wr_cgroup *cg;
    int rc;

    if (!wr__valid_id(id))
        return wr_err_set(err, WR_EINVAL, 0, "sandbox id `%s` is not valid", id);
    if (wr_cgroup_lookup(rt->cg, id, &cg, err) < 0)
        return -1;
    rc = wr_cgroup_cpu(cg, &u->cpu_ns, err) < 0 ||
                 wr_cgroup_memory(cg, &u->memory_bytes, NULL, err) < 0
             ? wr_err_wrap(err, "sandbox %s", id)
             : 0;
    wr_cgroup_forget(cg);
    return rc;
}

int wr_sandbox_cmd_cgroup_create(struct wr_runtime *rt, const char *id, const char *name,
                                 uint64_t memory_bytes, uint32_t cpu_millis,
                                 int fds[WR_CMD_CGROUP_FDS], size_t *nfds, struct wr_err *err)
{
    _Static_assert(WR_CMD_CGROUP_FDS == WR_CGROUP_JOIN_MAX, "one fd per hierarchy");
    struct wr_cgroup_limits lim = {.memory_bytes = memory_bytes, .cpu_millis = cpu_millis};
    struct wr_cgroup *cg;
    int rc;

    *nfds = 0;
    if (!wr__valid_id(id))
        return wr_err_set(err, WR_EINVAL, 0, "sandbox id `%s` is not valid", id);
    if (wr_cgroup_lookup(rt->cg, id, &cg, err) < 0)
        return -1;
    rc = wr_cgroup_child_create(cg, name, &lim, fds, nfds, err);
    wr_cgroup_forget(cg);
    return rc;
}

int wr_sandbox_cmd_cgroup_end(struct wr_runtime *rt, const char *id, const char *name,
                              uint64_t *cpu_ns, uint64_t *memory_peak, struct wr_err *err)
{
    struct wr_cgroup *cg;
    struct wr_err e2;
    int rc;

    if (!wr__valid_id(id))
        return wr_err_set(err, WR_EINVAL, 0, "sandbox id `%s` is not valid", id);
    if (wr_cgroup_lookup(rt->cg, id, &cg, err) < 0)
        return -1;
    rc = wr_cgroup_child_usage(cg, name, cpu_ns, memory_peak, err);
    if (wr_cgroup_child_remove(cg, name, &e2) < 0) {
        log_warn("sandbox %s: %s", id, e2.msg);
        if (rc == 0 && err != NULL)
            *err = e2;
        rc = -1;
    }
    wr_cgroup_forget(cg);
    return rc;
}

void wr_sandbox_release(struct wr_sandbox *sb)
{
    if (sb == NULL)
        return;
    wr_cgroup_forget(sb->cg);
    sandbox_free(sb);
}

int wr_sandbox_pidfd(const struct wr_sandbox *sb)
{
    return sb->pidfd;
}

int wr_sandbox_take_ctl_fd(struct wr_sandbox *sb)
{
    int fd = sb->ctl_fd;

    sb->ctl_fd = -1;
    return fd;
}

bool wr_sandbox_drop_fds(struct wr_sandbox *sb)
{
    struct pollfd p = {.fd = sb->pidfd, .events = POLLIN};
    bool alive = true;

    if (sb->pidfd >= 0) {
        while (poll(&p, 1, 0) < 0 && errno == EINTR)
            ;
        alive = !(p.revents & (POLLIN | POLLHUP | POLLERR));
        close(sb->pidfd);
        sb->pidfd = -1;
    }
    if (sb->dir_lock >= 0) /* warren-init holds both locks as long as it lives */
        close(sb->dir_lock);
    if (sb->uid_lock >= 0)
        close(sb->uid_lock);
    sb->dir_lock = sb->uid_lock = -1;
    return alive;
}

bool wr_sandbox_alive(const struct wr_sandbox *sb)
{
    struct pollfd p = {.fd = sb->pidfd, .events = POLLIN};
    siginfo_t si = {0};
    _cleanup_close_ int fd = -1;

    if (sb->reaped || sb->pid <= 0)
        return false;
    if (sb->pidfd < 0 && !sb->adopted) {
        /* Our child: a zombie until destroy reaps it, so its pid is its own. */
        if (waitid(P_PID, (id_t)sb->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
            return false; /* ECHILD: reaped, so gone */
        return si.si_pid == 0;
    }
    if (sb->pidfd < 0) {
        fd = open_init_pidfd(sb);
        if (fd < 0)
            return false;
        p.fd = fd;
    }
    while (poll(&p, 1, 0) < 0 && errno == EINTR)
        ;
    return !(p.revents & (POLLIN | POLLHUP | POLLERR));
}

int wr_sandbox_destroy(struct wr_sandbox *sb, struct wr_err *err)
{
    if (sb == NULL)
        return 0;
    return wr__sandbox_undo(sb, err);
}

int wr_sandbox_ctl_fd(const struct wr_sandbox *sb)
{
    return sb->ctl_fd;
}

const char *wr_sandbox_ctl_path(const struct wr_sandbox *sb)
{
    return sb->ctl_path;
}

pid_t wr_sandbox_pid(const struct wr_sandbox *sb)
{
    return sb->pid;
}

int64_t wr_sandbox_net_slot(const struct wr_sandbox *sb)
{
    return sb->net_slot;
}

uid_t wr_sandbox_uid_base(const struct wr_sandbox *sb)
{
    return sb->uid_base;
}

const char *wr_sandbox_id(const struct wr_sandbox *sb)
{
    return sb->id;
}

enum wr_backend wr_sandbox_backend(const struct wr_sandbox *sb)
{
    return sb->backend;
}

const struct wr_sandbox_timing *wr_sandbox_timing(const struct wr_sandbox *sb)
{
    return &sb->timing;
}
