/* SPDX-License-Identifier: Apache-2.0 */
/* The gvisor backend: the same sandbox (its layers and writable layer, warren-init as PID 1,
 * cgroups with its limits) inside gVisor's user-space kernel, runsc on its ptrace platform, so
 * that the code in it meets gVisor's system calls, not the host's (docs/design/isolation.md,
 * "The gvisor backend"). Measurements behind the choices: shared/research/perf-gvisor.md.
 *
 *   runtime (worker thread)                    inside runsc
 *   -----------------------                    ------------
 *   run dir + lock (sandbox.c), `backend` file
 *   cgroups with the limits
 *   overlay of the layers + writable layer,
 *   not idmapped, mounted at <dir>/rootfs
 *   <dir>/ctl: a tiny tmpfs (/dev/.warren/ctl)
 *   <dir>/bundle/config.json
 *   warren-shim (holds the lock) into the
 *   cgroups, "go" ────▶ runsc run --detach ────▶ sentry + gofer, PID 1:
 *                                               /dev/.warren/init --listen
 *                                               /dev/.warren/ctl/ctl.sock
 *   wait for ctl/ctl.sock (a host socket the
 *   gofer made: --host-uds=create), check it
 *   is a socket, bind it over <dir>/ctl.sock
 *   HELLO on <dir>/ctl.sock
 *
 * The daemon then reaches warren-init at <dir>/ctl.sock exactly as for the ns backend. It is a
 * bind mount of the socket's inode, not the path in the directory the sandbox can write: a
 * sandbox that puts a symbolic link there reaches nothing of anyone else's. warren-shim
 * (src/shim/main.c) is the parent of runsc's processes and ends with them: its pid is the
 * sandbox's pid for every caller (exits, adoption, kill). Without a network slot runsc has
 * --network=none (loopback only); with one, warren-shim is spawned inside the slot's namespace
 * and runsc has --network=sandbox there: gVisor's own stack, on the slot's eth0, whose address
 * it takes off the host's stack (core puts it back: wr_netslot_readdress). */
#include "runtime_int.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/inet.h"
#include "../util/log.h"
#include "../proto/proto.h"
#include "../util/xalloc.h"
#include "mount.h"
#include "rlimit.h"

#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif

#define GV_START_TIMEOUT_MS 20000 /* runsc's start is about 0.1 s; a loaded host takes longer */
#define GV_CTL_TMPFS        "size=64k,nr_inodes=16,mode=0700"
#define GV_INIT_PATH        "/dev/.warren/init"
#define GV_CTL_DIR          "/dev/.warren/ctl"
#define GV_SOCKET           GV_CTL_DIR "/ctl.sock"
#define GV_LOG_TAIL         512

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

enum wr_backend wr__dir_backend(int dirfd)
{
    char buf[16] = "";

    if (wr_read_fileat(dirfd, "backend", buf, sizeof(buf), NULL) < 0)
        return WR_BACKEND_NS;
    return strncmp(buf, "gvisor", 6) == 0 ? WR_BACKEND_GVISOR : WR_BACKEND_NS;
}

void wr__gvisor_unmount(const char *dir)
{
    static const char *const mounts[] = {"ctl.sock", "ctl", "rootfs"};

    for (size_t i = 0; i < sizeof(mounts) / sizeof(mounts[0]); i++) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, mounts[i]);
        /* Each is mounted once; a second one would be a leftover of an earlier try. */
        while (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
            ;
        if (errno != EINVAL && errno != ENOENT)
            log_warn("unmount `%s`: %s", path, strerror(errno));
    }
}

/* The OCI config is written here as text: runtime/ links no JSON library (the Makefile's
 * check-layers). Strings are escaped as JSON requires; bytes from 0x80 go as they are. */
static void json_str(struct wr_buf *b, const char *s)
{
    wr_buf_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\')
            wr_buf_printf(b, "\\%c", *p);
        else if (*p < 0x20)
            wr_buf_printf(b, "\\u%04x", *p);
        else
            wr_buf_append(b, p, 1);
    }
    wr_buf_puts(b, "\"");
}

static void json_arg(struct wr_buf *b, const char *s)
{
    wr_buf_puts(b, ",");
    json_str(b, s);
}

static void json_mount(struct wr_buf *b, const char *dst, const char *type, const char *src,
                       const char *opts)
{
    wr_buf_puts(b, ",{\"destination\":");
    json_str(b, dst);
    wr_buf_puts(b, ",\"type\":");
    json_str(b, type);
    wr_buf_puts(b, ",\"source\":");
    json_str(b, src);
    wr_buf_puts(b, ",\"options\":[");
    for (const char *p = opts; *p != '\0';) {
        size_t n = strcspn(p, ",");
        wr_buf_printf(b, "%s\"%.*s\"", p == opts ? "" : ",", (int)n, p);
        p += n + (p[n] == ',');
    }
    wr_buf_puts(b, "]}");
}

/* The capabilities of the sandbox's root inside gVisor: the ns backend's set
 * (src/runtime/caps.c), by name. */
#define GV_CAPS                                                                                    \
    "[\"CAP_CHOWN\",\"CAP_DAC_OVERRIDE\",\"CAP_FSETID\",\"CAP_FOWNER\",\"CAP_MKNOD\","             \
    "\"CAP_NET_RAW\",\"CAP_SETGID\",\"CAP_SETUID\",\"CAP_SETFCAP\",\"CAP_SETPCAP\","               \
    "\"CAP_NET_BIND_SERVICE\",\"CAP_SYS_CHROOT\",\"CAP_KILL\",\"CAP_AUDIT_WRITE\","                \
    "\"CAP_SYS_PTRACE\"]"

/* The OCI bundle's config.json: warren-init as the process, the overlay as the root, the
 * sandbox's volumes as bind mounts (their ids as stored: no idmap is needed). */
static int write_bundle(struct wr_runtime *rt, const struct wr_sandbox_spec *spec,
                        const struct wr_sandbox *sb, struct wr_err *err)
{
    _cleanup_free_ char *bundle = xasprintf("%s/bundle", sb->dir), *path = NULL;
    _cleanup_free_ char *rootfs = xasprintf("%s/rootfs", sb->dir);
    _cleanup_free_ char *ctl = xasprintf("%s/ctl", sb->dir);
    _cleanup_free_ char *tmp = xasprintf("%s/rootfs/tmp", sb->dir), *shm = NULL;
    struct stat st;
    struct wr_buf b;
    int rc;

    wr_buf_init(&b);
    wr_buf_puts(&b, "{\"ociVersion\":\"1.0.2\",\"process\":{\"terminal\":false,"
                    "\"user\":{\"uid\":0,\"gid\":0},\"args\":[");
    json_str(&b, GV_INIT_PATH);
    json_arg(&b, "--listen");
    json_arg(&b, GV_SOCKET);
    json_arg(&b, "--gvisor");
    for (const char *const *e = spec->env; e && *e; e++) {
        json_arg(&b, "--env");
        json_arg(&b, *e);
    }
    if (spec->cwd != NULL) {
        json_arg(&b, "--cwd");
        json_arg(&b, spec->cwd);
    }
    if (spec->user != NULL) {
        json_arg(&b, "--user");
        json_arg(&b, spec->user);
    }
    if (spec->resolver != 0) {
        char a[WR_INET4_STRLEN];
        wr_inet4_format(spec->resolver, a);
        json_arg(&b, "--resolver");
        json_arg(&b, a);
    }
    /* A setuid program (allow_setuid) gains what gVisor's root has, never the host's. The
     * rlimits are warren-init's to set (--gvisor, rlimit.c), as the ns backend's child sets
     * them, within hard limits of runsc's: locked memory's is raised here to the table's. */
    wr_buf_printf(
        &b,
        "],\"env\":[\"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"],"
        "\"cwd\":\"/\",\"capabilities\":{"
        "\"bounding\":" GV_CAPS ",\"effective\":" GV_CAPS ",\"permitted\":" GV_CAPS
        ",\"inheritable\":[]},\"rlimits\":[{\"type\":\"RLIMIT_MEMLOCK\",\"soft\":%lu,"
        "\"hard\":%lu}],\"noNewPrivileges\":%s},\"root\":{\"path\":",
        WR_RLIMIT_MEMLOCK, WR_RLIMIT_MEMLOCK, spec->allow_setuid ? "false" : "true");
    json_str(&b, rootfs);
    wr_buf_puts(&b, ",\"readonly\":false},\"hostname\":");
    json_str(&b, spec->hostname ? spec->hostname : spec->id);
    wr_buf_puts(&b,
                ",\"mounts\":[{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\"}");
    json_mount(&b, "/dev", "tmpfs", "tmpfs", "nosuid,mode=755");
    json_mount(&b, "/sys", "sysfs", "sysfs", "nosuid,noexec,nodev,ro");
    /* Everyone's, as on ns (runsc's own would be root's alone), and of ns's size: it is in the
     * sentry's memory, and a full one gets ENOSPC before the memory limit ends the sandbox. */
    shm = xasprintf("nosuid,nodev,mode=1777,size=%" PRIu64, wr__shm_bytes(spec->memory_bytes));
    json_mount(&b, "/dev/shm", "tmpfs", "shm", shm);
    /* /tmp is the writable layer's, as on ns (runsc would put a tmpfs of the sentry's memory
     * there, and a big file in /tmp would end the sandbox at its memory limit). A bind's source
     * is a host path, followed on the host: only a directory of the root itself, never a
     * symbolic link of the image's or the writable layer's (which would reach the host's tree);
     * nothing of the sandbox runs now to change it. */
    if (lstat(tmp, &st) == 0 && S_ISDIR(st.st_mode))
        json_mount(&b, "/tmp", "bind", tmp, "bind,rw");
    json_mount(&b, GV_INIT_PATH, "bind", rt->init_path, "bind,ro");
    json_mount(&b, GV_CTL_DIR, "bind", ctl, "bind,rw");
    for (size_t i = 0; i < spec->n_mounts; i++)
        json_mount(&b, spec->mounts[i].target, "bind", spec->mounts[i].host_dir,
                   spec->mounts[i].readonly ? "rbind,ro,nosuid,nodev" : "rbind,rw,nosuid,nodev");
    /* With the slot's network (--network=sandbox) the sandbox joins the namespace runsc was
     * started in (warren-shim was spawned into the slot's); else a new one, loopback only. */
    wr_buf_printf(&b,
                  "],\"linux\":{\"namespaces\":[{\"type\":\"pid\"},%s"
                  "{\"type\":\"ipc\"},{\"type\":\"uts\"},{\"type\":\"mount\"}]}}\n",
                  spec->netns_fd > 0 ? "{\"type\":\"network\",\"path\":\"/proc/self/ns/net\"},"
                                     : "{\"type\":\"network\"},");
    if (mkdir(bundle, 0700) < 0) {
        wr_buf_fini(&b);
        return wr_err_sys(err, "mkdir `%s`", bundle);
    }
    path = xasprintf("%s/config.json", bundle);
    rc = wr_write_fileat(AT_FDCWD, path, wr_buf_str(&b), true, err);
    wr_buf_fini(&b);
    return rc;
}

/* The root: the overlay of the layers and the writable layer, at <dir>/rootfs. */
/* <run>/gvisor-points: a read-only layer put on top of every gvisor sandbox's image with the
 * mount points of warren's binds (/dev/.warren/init, /dev/.warren/ctl). runsc's gofer makes a
 * bind's mount point on the root it is given where none is; without this layer they would be
 * made in the writable layer and show in its snapshots and diffs. Checked on every create (four
 * mkdirs and an open that find it made: microseconds against runsc's start). */
static const char *points_layer(struct wr_runtime *rt, struct wr_err *err)
{
    static const char *const dirs[] = {"", "/dev", "/dev/.warren", "/dev/.warren/ctl"};
    _cleanup_free_ char *init = NULL;
    _cleanup_close_ int fd = -1;

    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        _cleanup_free_ char *d = xasprintf("%s%s", rt->gv_points, dirs[i]);
        if (mkdir(d, 0755) < 0 && errno != EEXIST)
            return wr_err_sys(err, "mkdir `%s`", d), NULL;
    }
    init = xasprintf("%s%s", rt->gv_points, GV_INIT_PATH);
    if ((fd = open(init, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0755)) < 0)
        return wr_err_sys(err, "create `%s`", init), NULL;
    return rt->gv_points;
}

static int mount_rootfs(struct wr_runtime *rt, const struct wr_sandbox_spec *spec,
                        struct wr_sandbox *sb, struct wr_err *err)
{
    _cleanup_free_ char *rootfs = xasprintf("%s/rootfs", sb->dir), *tmp = NULL;
    const char *layers[WR_MAX_STACK];
    struct wr_rootfs_spent spent = {.n = 0};
    int ovl = -1, rc = 0;

    if (spec->n_layers >= WR_MAX_STACK)
        return wr_err_set(err, WR_EINVAL, 0, "an image has 1 to %d layers, not %zu", WR_MAX_LAYERS,
                          spec->n_layers);
    memcpy(layers, spec->layers, spec->n_layers * sizeof(layers[0]));
    if ((layers[spec->n_layers] = points_layer(rt, err)) == NULL)
        return -1;
    if (mkdir(rootfs, 0755) < 0)
        return wr_err_sys(err, "mkdir `%s`", rootfs);
    if (wr_rootfs_build(layers, spec->n_layers + 1, -1, spec->upper_dir, spec->tmpfs_bytes, 0, &ovl,
                        &spent, err) < 0)
        return -1;
    if (syscall(SYS_move_mount, ovl, "", AT_FDCWD, rootfs, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        rc = wr_err_sys(err, "mount the root at `%s`", rootfs);
    close(ovl);
    wr_rootfs_spent_close(&spent);
    if (rc < 0)
        return -1;
    /* /tmp is in the writable layer, as with the ns backend. */
    tmp = xasprintf("%s/tmp", rootfs);
    if (mkdir(tmp, 01777) == 0)
        (void)chmod(tmp, 01777);
    return 0;
}

/* The volumes' mount points in the mounted root, made here as on ns (never through a symbolic
 * link of the image or the writable layer), so runsc, which would resolve one inside the root,
 * is given a root where each is a plain directory, and a target ns refuses is refused here. */
static int make_mount_points(const struct wr_sandbox_spec *spec, const struct wr_sandbox *sb,
                             struct wr_err *err)
{
    _cleanup_free_ char *rootfs = xasprintf("%s/rootfs", sb->dir);
    _cleanup_close_ int root = -1;
    const char *step = NULL;

    if (spec->n_mounts == 0)
        return 0;
    if ((root = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
        return wr_err_sys(err, "open `%s`", rootfs);
    for (size_t i = 0; i < spec->n_mounts; i++) {
        int fd = wr_mount_point_open(root, spec->mounts[i].target, &step);
        if (fd < 0)
            return wr_err_set(err, WR_EINVAL, -fd, "%s `%s`", step, spec->mounts[i].target);
        close(fd);
    }
    return 0;
}

/* <dir>/ctl: where warren-init's socket appears on the host. The sandbox's root can write
 * there, so it is a tmpfs of its own, 64 KiB and 16 inodes. */
static int mount_ctl(struct wr_sandbox *sb, struct wr_err *err)
{
    _cleanup_free_ char *ctl = xasprintf("%s/ctl", sb->dir);

    if (mkdir(ctl, 0700) < 0)
        return wr_err_sys(err, "mkdir `%s`", ctl);
    if (mount("tmpfs", ctl, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, GV_CTL_TMPFS) < 0)
        return wr_err_sys(err, "mount a tmpfs at `%s`", ctl);
    return 0;
}

/* runsc's flags for one sandbox: its own state directory and log (<dir>/runsc.log: runsc's
 * messages only; the sandbox's stdio is /dev/null, as on ns, so nothing in it can write to the
 * host's /run); no network but loopback, or the network slot's (sandbox: gVisor's own stack
 * sends and receives frames on the slot's eth0, so every packet crosses the slot's veth and the
 * host's policy, and a checkpoint holds the stack: pause to disk and fork keep processes); host
 * sockets made by the sandbox (warren-init's), the cgroups left to us, ptrace. */
#define GV_FLAGS(root_flag, log_flag, host_net)                                                    \
    (root_flag), (log_flag), (host_net) ? "--network=sandbox" : "--network=none",                  \
        "--host-uds=create", "--ignore-cgroups", "--platform=ptrace"

/* Spawn argv[0] with stdio /dev/null, fd 3 the run directory's lock and fd 4 go_rd (if not
 * -1), in the network namespace netns_fd (if not -1: this thread goes into it for the spawn
 * only). Returns its pid, or -1 with err. */
static pid_t spawn_runsc(struct wr_sandbox *sb, char *const *argv, int go_rd, int netns_fd,
                         struct wr_err *err)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, all;
    pid_t pid;
    int rc;
    _cleanup_close_ int self_ns = -1;

    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDWR, 0);
    posix_spawn_file_actions_adddup2(&fa, 0, 1);
    posix_spawn_file_actions_adddup2(&fa, 0, 2);
    if (go_rd >= 0) {
        posix_spawn_file_actions_adddup2(&fa, sb->dir_lock, 3);
        posix_spawn_file_actions_adddup2(&fa, go_rd, 4);
    }
    posix_spawnattr_init(&attr);
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (netns_fd >= 0) {
        self_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (self_ns < 0 || setns(netns_fd, CLONE_NEWNET) < 0) {
            rc = errno;
            posix_spawn_file_actions_destroy(&fa);
            posix_spawnattr_destroy(&attr);
            return wr_err_set(err, WR_ESYS, rc, "enter the network slot");
        }
    }
    rc = posix_spawn(&pid, argv[0], &fa, &attr, argv, (char *[]){NULL});
    if (self_ns >= 0 && setns(self_ns, CLONE_NEWNET) < 0)
        abort(); /* a thread left in a sandbox's netns must not go on */
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0)
        return wr_err_set(err, WR_ESYS, rc, "spawn `%s`", argv[0]);
    return pid;
}

/* warren-shim, with the lock at fd 3 and the read end of go at fd 4, in the network slot's
 * namespace (netns_fd, if not -1). */
static int spawn_shim(struct wr_runtime *rt, struct wr_sandbox *sb, const char *restore_image,
                      int netns_fd, int go_rd, struct wr_err *err)
{
    _cleanup_free_ char *root_flag = xasprintf("--root=%s/runsc", sb->dir);
    _cleanup_free_ char *log_flag = xasprintf("--log=%s/runsc.log", sb->dir);
    _cleanup_free_ char *bundle = xasprintf("%s/bundle", sb->dir);
    char *argv[] = {
        rt->shim_path,
        rt->runsc_path,
        GV_FLAGS(root_flag, log_flag, netns_fd >= 0),
        "--",
        sb->id,
        bundle,
        (char *)restore_image,
        NULL,
    };
    struct stat self, slot;
    pid_t pid;

    /* runsc's own stack takes the addresses of the namespace it is given: never the host's
     * (warren-shim hides runsc's own check, which misfires on this kernel). */
    if (netns_fd >= 0 &&
        (stat("/proc/thread-self/ns/net", &self) < 0 || fstat(netns_fd, &slot) < 0 ||
         (self.st_dev == slot.st_dev && self.st_ino == slot.st_ino)))
        return wr_err_set(err, WR_EINTERNAL, 0, "the network slot is not a namespace of its own");
    pid = spawn_runsc(sb, argv, go_rd, netns_fd, err);
    if (pid < 0)
        return -1;
    sb->pid = pid;
    sb->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (sb->pidfd < 0)
        return wr_err_sys(err, "pidfd_open");
    {
        _cleanup_free_ char *pidfile = xasprintf("%s/shim.pid", sb->dir);
        char text[24];
        snprintf(text, sizeof(text), "%d\n", (int)pid);
        if (wr_write_fileat(AT_FDCWD, pidfile, text, true, err) < 0)
            return -1;
    }
    return 0;
}

/* The last lines runsc wrote (why it failed), into err's message. */
static int runsc_failed(struct wr_sandbox *sb, int status, struct wr_err *err)
{
    _cleanup_free_ char *log = xasprintf("%s/runsc.log", sb->dir);
    char buf[8192] = "", *tail;
    ssize_t n = 0;
    int fd = open(log, O_RDONLY | O_CLOEXEC);

    if (fd >= 0) {
        off_t end = lseek(fd, 0, SEEK_END);
        (void)lseek(fd, end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0, SEEK_SET);
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
    }
    buf[n > 0 ? n : 0] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    tail = strrchr(buf, '\n');
    tail = tail != NULL ? tail + 1 : buf;
    /* runsc logs JSON lines: {"msg":"...","level":"error",...} */
    if (strncmp(tail, "{\"msg\":\"", 8) == 0) {
        char *end = strstr(tail + 8, "\",\"");
        tail += 8;
        if (end != NULL)
            *end = '\0';
    }
    return wr_err_set(err, WR_ESYS, 0, "runsc %s failed (status %d): %.*s",
                      status == 101   ? "run"
                      : status == 103 ? "restore"
                      : status == 104 ? "checkpoint"
                                      : "shim",
                      status, GV_LOG_TAIL, tail);
}

/* Wait for warren-init's socket in <dir>/ctl, bind it over <dir>/ctl.sock, say HELLO. */
static int await_init(struct wr_sandbox *sb, struct wr_err *err)
{
    _cleanup_free_ char *sock = xasprintf("%s/ctl/ctl.sock", sb->dir);
    _cleanup_close_ int fd = -1, conn = -1;
    uint64_t deadline = now_ns() + (uint64_t)GV_START_TIMEOUT_MS * 1000000ull;
    struct stat st;
    char src[64];

    for (;;) {
        siginfo_t si = {0};
        fd = open(sock, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
            break;
        if (waitid(P_PID, (id_t)sb->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid != 0)
            return runsc_failed(sb, si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status,
                                err);
        if (now_ns() > deadline)
            return wr_err_set(err, WR_ETIMEOUT, ETIMEDOUT,
                              "warren-init did not listen in gVisor within %d ms",
                              GV_START_TIMEOUT_MS);
        usleep(2000);
    }
    if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
        return wr_err_set(err, WR_EPROTO, 0, "`%s` is not a socket", sock);
    conn = open(sb->ctl_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (conn < 0)
        return wr_err_sys(err, "create `%s`", sb->ctl_path);
    close(steal_fd(&conn));
    snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
    if (mount(src, sb->ctl_path, NULL, MS_BIND, NULL) < 0)
        return wr_err_sys(err, "bind the control socket at `%s`", sb->ctl_path);
    {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(sb->ctl_path) >= sizeof(sa.sun_path))
            return wr_err_set(err, WR_EINVAL, 0, "socket path `%s` too long", sb->ctl_path);
        memcpy(sa.sun_path, sb->ctl_path, strlen(sb->ctl_path));
        /* Bound is not yet listening: refused until warren-init's listen(). */
        for (;;) {
            conn = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (conn < 0)
                return wr_err_sys(err, "socket");
            if (connect(conn, (struct sockaddr *)&sa, sizeof(sa)) == 0)
                break;
            if (errno != ECONNREFUSED || now_ns() > deadline)
                return wr_err_sys(err, "connect to warren-init");
            close(steal_fd(&conn));
            usleep(1000);
        }
    }
    if (wr__ctl_hello(conn, GV_START_TIMEOUT_MS, NULL, err) < 0)
        return -1;
    sb->ctl_fd = steal_fd(&conn);
    return 0;
}

static int check_gvisor_spec(struct wr_runtime *rt, const struct wr_sandbox_spec *spec,
                             struct wr_err *err)
{
    if (!wr_runtime_has_backend(rt, WR_BACKEND_GVISOR, err))
        return -1;
    if (!wr__valid_id(spec->id))
        return wr_err_set(err, WR_EINVAL, 0, "sandbox id `%s` must be 1-64 of [A-Za-z0-9_-]",
                          spec->id ? spec->id : "");
    if (spec->n_layers == 0)
        return wr_err_set(err, WR_EINVAL, 0, "image has no layers");
    if (spec->netns_fd == WR_NETNS_POOLED)
        return wr_err_set(err, WR_EUNSUPPORTED, 0,
                          "a child pre-cloned into a network slot is not for the gvisor backend");
    if (spec->ephemeral)
        return wr_err_set(err, WR_EUNSUPPORTED, 0, "ephemeral sandboxes on the gvisor backend");
    if (spec->n_devices > 0 || spec->n_binds > 0 || spec->n_symlinks > 0)
        return wr_err_set(err, WR_EUNSUPPORTED, 0, "host devices on the gvisor backend");
    if (spec->n_inner_binds > 0)
        return wr_err_set(err, WR_EUNSUPPORTED, 0, "Compose services on the gvisor backend");
    return wr_mounts_check(spec->mounts, spec->n_mounts, err);
}

int wr__gvisor_create(struct wr_runtime *rt, const struct wr_sandbox_spec *spec,
                      struct wr_sandbox **out, struct wr_err *err)
{
    struct wr_cgroup_limits lim = {.memory_bytes = spec->memory_bytes,
                                   .cpu_millis = spec->cpu_millis,
                                   .pids_max = spec->pids_max};
    struct wr_sandbox *sb;
    int go[2] = {-1, -1};
    _cleanup_close_ int dirfd = -1;

    if (check_gvisor_spec(rt, spec, err) < 0 || (sb = wr__sandbox_new(rt, spec->id, err)) == NULL)
        return -1;
    sb->backend = WR_BACKEND_GVISOR;
    sb->host_net = spec->netns_fd > 0;
    /* The pids limit counts host tasks: the sentry's and gofer's threads and, on the ptrace
     * platform, the stub processes and threads behind the processes inside (about 11 each, kept
     * at their high-water mark). A sandbox that reaches it ends: the sentry cannot go on. The
     * CPU limit comes once warren-init answers: runsc's start (Go programs on several threads)
     * is the platform's work, and under a 1-vCPU quota it took 320 ms, not 220. */
    lim.cpu_millis = 0;
    dirfd = open(sb->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0 || wr_write_fileat(dirfd, "backend", "gvisor\n", true, err) < 0) {
        if (dirfd < 0)
            wr_err_sys(err, "open `%s`", sb->dir);
        goto fail;
    }
    if (wr_cgroup_create(rt->cg, spec->id, &lim, &sb->cg, err) < 0 ||
        mount_rootfs(rt, spec, sb, err) < 0 || make_mount_points(spec, sb, err) < 0 ||
        mount_ctl(sb, err) < 0 || write_bundle(rt, spec, sb, err) < 0)
        goto fail;
    sb->timing.cloned = sb->timing.mapped = sb->timing.overlay = now_ns();
    if (pipe2(go, O_CLOEXEC) < 0) {
        wr_err_sys(err, "pipe");
        goto fail;
    }
    /* A restored warren-init waits, quiesced as it was checkpointed, for this file. */
    if (spec->restore_image != NULL) {
        _cleanup_free_ char *resume = xasprintf("%s/ctl/resume", sb->dir);
        if (wr_write_fileat(AT_FDCWD, resume, "", true, err) < 0)
            goto fail;
    }
    if (spawn_shim(rt, sb, spec->restore_image, spec->netns_fd > 0 ? spec->netns_fd : -1, go[0],
                   err) < 0)
        goto fail;
    close(steal_fd(&go[0]));
    if (wr_cgroup_attach(sb->cg, sb->pid, err) < 0)
        goto fail;
    sb->timing.cgroup = now_ns();
    if (write(go[1], "g", 1) != 1) {
        wr_err_sys(err, "start warren-shim");
        goto fail;
    }
    close(steal_fd(&go[1]));
    if (await_init(sb, err) < 0)
        goto fail;
    if (spec->cpu_millis != 0 &&
        wr_cgroup_set_limits(sb->cg, &(struct wr_cgroup_limits){.cpu_millis = spec->cpu_millis},
                             err) < 0)
        goto fail;
    sb->timing.ready = now_ns();
    *out = sb;
    return 0;
fail:
    if (go[0] >= 0)
        close(go[0]);
    if (go[1] >= 0)
        close(go[1]); /* a shim still waiting for go exits */
    wr_err_wrap(err, "create sandbox %s", spec->id);
    (void)wr__sandbox_undo(sb, NULL);
    return -1;
}

/* HELLO, then QUIESCE on a connection of its own: OK, or the connection closing (init drops
 * every connection right after its answer), is warren-init quiesced. */
static int quiesce_init(struct wr_sandbox *sb, struct wr_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    _cleanup_close_ int fd = -1;
    struct wr_buf out;
    uint8_t buf[256];
    ssize_t n;
    int rc;

    if (strlen(sb->ctl_path) >= sizeof(sa.sun_path))
        return wr_err_set(err, WR_EINVAL, 0, "socket path `%s` too long", sb->ctl_path);
    memcpy(sa.sun_path, sb->ctl_path, strlen(sb->ctl_path));
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return wr_err_sys(err, "connect to warren-init");
    if (wr__ctl_hello(fd, GV_START_TIMEOUT_MS, NULL, err) < 0)
        return -1;
    wr_buf_init(&out);
    (void)wr_msg_end(&out, wr_msg_begin(&out, WR_MSG_QUIESCE, 0, 1));
    rc = wr_write_all(fd, out.data, out.len);
    wr_buf_fini(&out);
    if (rc < 0)
        return wr_err_sys(err, "send quiesce");
    /* Read until EOF: the OK comes first, then init closes. */
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, GV_START_TIMEOUT_MS) <= 0)
            return wr_err_set(err, WR_ETIMEOUT, ETIMEDOUT, "warren-init did not quiesce");
        n = read(fd, buf, sizeof(buf));
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return 0;
        if (n < 0 && errno != EINTR)
            return wr_err_sys(err, "read from warren-init");
    }
}

int wr_sandbox_checkpoint(struct wr_sandbox *sb, const char *image_dir, struct wr_err *err)
{
    _cleanup_free_ char *root_flag = xasprintf("--root=%s/runsc", sb->dir);
    _cleanup_free_ char *image_flag = xasprintf("--image-path=%s", image_dir);
    _cleanup_free_ char *log_flag = xasprintf("--log=%s/runsc.log", sb->dir), *ns_path = NULL;
    _cleanup_close_ int ns = -1;
    char *argv[] = {sb->rt->runsc_path,
                    GV_FLAGS(root_flag, log_flag, sb->host_net),
                    "checkpoint",
                    image_flag,
                    sb->id,
                    NULL};
    int st;
    pid_t pid;

    if (sb->backend != WR_BACKEND_GVISOR)
        return wr_err_set(err, WR_EUNSUPPORTED, 0,
                          "sandbox %s: keeping processes on disk needs the gvisor runtime", sb->id);
    if (sb->ctl_fd >= 0)
        close(steal_fd(&sb->ctl_fd));
    if (quiesce_init(sb, err) < 0)
        return wr_err_wrap(err, "sandbox %s: checkpoint", sb->id);
    /* Our bind of its socket goes: the socket itself is gone with the listener. */
    (void)umount2(sb->ctl_path, MNT_DETACH | UMOUNT_NOFOLLOW);
    (void)unlink(sb->ctl_path);
    if (mkdir(image_dir, 0700) < 0 && errno != EEXIST)
        return wr_err_sys(err, "mkdir `%s`", image_dir);
    /* In warren-shim's network namespace, where runsc run left the sandbox's control socket (an
     * abstract one, seen only from that namespace): the slot's, or the host's. */
    ns_path = xasprintf("/proc/%d/ns/net", (int)sb->pid);
    if ((ns = open(ns_path, O_RDONLY | O_CLOEXEC)) < 0)
        return wr_err_sys(err, "open `%s`", ns_path);
    pid = spawn_runsc(sb, argv, -1, ns, err);
    if (pid < 0)
        return -1;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return wr_err_sys(err, "wait for runsc checkpoint");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return runsc_failed(sb, 104, err);
    return 0;
}
