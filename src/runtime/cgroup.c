/* SPDX-License-Identifier: Apache-2.0 */
/* Per-sandbox cgroups behind one handle: the v1 driver (a directory in each of the memory, pids,
 * cpu, cpuacct and freezer hierarchies) and the v2 driver (one directory in the unified tree).
 * Layouts, detection and costs: docs/design/cgroups-seccomp.md. */
#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "devbpf.h"
#include "runtime.h"

enum ctl { CTL_MEMORY, CTL_PIDS, CTL_CPU, CTL_CPUACCT, CTL_FREEZER, CTL_DEVICES, CTL_N };
static const char *const ctl_name[CTL_N] = {"memory",  "pids",    "cpu",
                                            "cpuacct", "freezer", "devices"};

#define DEFAULT_V2_ROOT "/sys/fs/cgroup"
#define DRAIN_NS        (2LL * 1000000000LL) /* how long destroy/kill wait for processes to go */
#define FREEZE_NS       (2LL * 1000000000LL)
#define CFS_PERIOD_US   100000u

struct wr_cgroup_driver {
    enum wr_cgroup_version version;
    /* Owned directory fds of the parent of all sandbox cgroups. v1: one per mounted hierarchy,
     * -1 where the controller is absent or shares an earlier controller's hierarchy (as cpuacct
     * does when mounted as cpu,cpuacct). v2: fd[0] only. */
    int fd[CTL_N];
    /* Where controller c's files live (an alias of one of fd[], never closed), -1 if absent. */
    int at[CTL_N];
    bool have[CTL_N];
    /* memory.memsw.limit_in_bytes (v1) or memory.swap.max (v2): 1 present, 0 absent, -1 not
     * known yet. Learned from the first sandbox so later ones skip a failing open. */
    int swap_file;
    char *parent;
};

struct wr_cgroup {
    struct wr_cgroup_driver *d;
    char name[NAME_MAX + 1];
};

/* ---- small helpers ---------------------------------------------------------------------- */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Sleep *ns, then double it up to 5 ms: the first polls come fast (an idle freeze or an exit
 * takes about 0.1 ms) without spinning on a cgroup that takes longer. */
static void backoff(long *ns)
{
    struct timespec ts = {0, *ns};
    (void)nanosleep(&ts, NULL);
    if (*ns < 5000000)
        *ns *= 2;
}

/* Write s to dfd/path with one open and one write. Returns 0 or -errno. */
static int cg_write(int dfd, const char *path, const char *s)
{
    _cleanup_close_ int fd = openat(dfd, path, O_WRONLY | O_CLOEXEC);

    if (fd < 0)
        return -errno;
    if (wr_write_all(fd, s, strlen(s)) < 0)
        return -errno;
    return 0;
}

/* Read dfd/path into buf (NUL-terminated). Returns the length or -errno. */
static ssize_t cg_read(int dfd, const char *path, char *buf, size_t size)
{
    _cleanup_close_ int fd = openat(dfd, path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return -errno;
    n = wr_read_all(fd, buf, size - 1);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return n;
}

/* "key value" lines (memory.events, memory.oom_control): the value of key, or 0. */
static uint64_t keyed_value(const char *buf, const char *key)
{
    size_t klen = strlen(key);

    for (const char *p = buf; p != NULL && *p != '\0';) {
        if (strncmp(p, key, klen) == 0 && p[klen] == ' ')
            return strtoull(p + klen + 1, NULL, 10);
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    return 0;
}

static void kill_one(pid_t pid, void *arg)
{
    (void)arg;
    /* Never signal ourselves, whatever a stale cgroup.procs lists. */
    if (pid > 1 && pid != getpid())
        (void)kill(pid, SIGKILL);
}

/* Call fn for each pid in dfd/path (a cgroup.procs file), reading in pages so that any number
 * of processes fits. Returns the number of pids or -errno. */
static int procs_foreach(int dfd, const char *path, void (*fn)(pid_t, void *), void *arg)
{
    _cleanup_close_ int fd = openat(dfd, path, O_RDONLY | O_CLOEXEC);
    char buf[4096];
    long cur = 0;
    bool in = false;
    int n = 0;

    if (fd < 0)
        return -errno;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof(buf));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            break;
        for (ssize_t i = 0; i < r; i++) {
            if (buf[i] >= '0' && buf[i] <= '9') {
                cur = cur * 10 + (buf[i] - '0');
                in = true;
            } else if (in) {
                if (fn != NULL)
                    fn((pid_t)cur, arg);
                n++;
                cur = 0;
                in = false;
            }
        }
    }
    if (in) {
        if (fn != NULL)
            fn((pid_t)cur, arg);
        n++;
    }
    return n;
}

static bool valid_name(const char *name)
{
    size_t len = strlen(name);
    return len > 0 && len <= NAME_MAX && strchr(name, '/') == NULL && strcmp(name, ".") != 0 &&
           strcmp(name, "..") != 0;
}

/* A parent is a relative path of plain components ("warren", "warren/sandboxes"). */
static bool valid_parent(const char *parent)
{
    size_t len = strlen(parent);

    if (len == 0 || len >= PATH_MAX / 2 || parent[0] == '/')
        return false;
    for (const char *p = parent; *p != '\0';) {
        const char *slash = strchr(p, '/');
        size_t n = slash != NULL ? (size_t)(slash - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        p += n + (slash != NULL);
    }
    return true;
}

/* rmdir every child directory of dfd/name (commands' cgroups: sandboxes make none of their
 * own), once, without waiting. */
static void rmdir_children(int dfd, const char *name)
{
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_closedir_ DIR *dir = NULL;
    struct dirent *de;

    if (fd < 0 || (dir = fdopendir(fd)) == NULL) {
        if (fd >= 0)
            (void)close(fd);
        return;
    }
    while ((de = readdir(dir)) != NULL)
        if (de->d_type == DT_DIR && strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            (void)unlinkat(dirfd(dir), de->d_name, AT_REMOVEDIR);
}

/* rmdir dfd/name, retrying on EBUSY (processes still exiting, or a command's cgroup below it)
 * until the deadline. Returns 0 (also if it was gone) or -errno. */
static int rmdir_wait(int dfd, const char *name, int64_t deadline)
{
    long ns = 50000;

    for (;;) {
        if (unlinkat(dfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
            return 0;
        if (errno != EBUSY || now_ns() >= deadline)
            return -errno;
        /* Only on the slow path: an empty child cgroup makes the rmdir fail as processes do. */
        rmdir_children(dfd, name);
        backoff(&ns);
    }
}

/* SIGKILL everything listed in dfd/<name>/cgroup.procs until the list is empty or the deadline
 * passes. A process forked between a read and the kills shows up in the next read; one that has
 * a SIGKILL pending cannot fork, so this converges in a round or two. Returns 0 or -errno
 * (-ETIMEDOUT if processes remain). */
static int kill_loop(int dfd, const char *name, int64_t deadline)
{
    char path[NAME_MAX + 32];
    long ns = 50000;

    snprintf(path, sizeof(path), "%s/cgroup.procs", name);
    for (;;) {
        int n = procs_foreach(dfd, path, kill_one, NULL);
        if (n == 0 || n == -ENOENT)
            return 0;
        if (n < 0)
            return n;
        if (now_ns() >= deadline)
            return -ETIMEDOUT;
        backoff(&ns);
    }
}

/* ---- detection ------------------------------------------------------------------------- */

/* Whether the space- or comma-separated list holds word. */
static bool list_has(const char *list, const char *word)
{
    size_t wl = strlen(word);

    for (const char *p = list; *p != '\0';) {
        size_t n = strcspn(p, " ,\n");
        if (n == wl && strncmp(p, word, wl) == 0)
            return true;
        p += n;
        p += strspn(p, " ,\n");
    }
    return false;
}

/* Controllers listed in dfd/file (cgroup.controllers or cgroup.subtree_control), as have[]. */
static int v2_controllers(int dfd, const char *file, bool have[CTL_N])
{
    char buf[512];
    ssize_t n = cg_read(dfd, file, buf, sizeof(buf));

    if (n < 0)
        return (int)n;
    have[CTL_MEMORY] = list_has(buf, "memory");
    have[CTL_PIDS] = list_has(buf, "pids");
    have[CTL_CPU] = list_has(buf, "cpu");
    /* cpu.stat (usage) and cgroup.freeze are core files in v2. */
    have[CTL_CPUACCT] = true;
    have[CTL_FREEZER] = true;
    return 0;
}

static bool is_cgroup2(const char *root)
{
    struct statfs sf;
    return statfs(root, &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
}

/* v2 usable in auto mode: a cgroup2 mount whose root offers memory, pids and cpu. */
static bool v2_usable(const char *root)
{
    _cleanup_close_ int fd = -1;
    bool have[CTL_N] = {0};

    if (!is_cgroup2(root))
        return false;
    fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || v2_controllers(fd, "cgroup.controllers", have) < 0)
        return false;
    return have[CTL_MEMORY] && have[CTL_PIDS] && have[CTL_CPU];
}

/* Find the v1 mount point of each controller in /proc/self/mountinfo. mnt[c] is malloc'ed or
 * NULL. Two controllers on one hierarchy (cpu,cpuacct) get the same path. */
static void v1_mounts(char *mnt[CTL_N])
{
    _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
    _cleanup_free_ char *line = NULL;
    size_t cap = 0;

    if (f == NULL)
        return;
    while (getline(&line, &cap, f) > 0) {
        /* id parent maj:min root mountpoint opts [optional...] - fstype source superopts */
        char *sep = strstr(line, " - ");
        char *fields[5], *save = NULL, *fstype, *superopts;
        int i = 0;

        if (sep == NULL)
            continue;
        *sep = '\0';
        fstype = strtok_r(sep + 3, " ", &save);
        (void)strtok_r(NULL, " ", &save); /* source */
        superopts = strtok_r(NULL, " \n", &save);
        if (fstype == NULL || superopts == NULL || strcmp(fstype, "cgroup") != 0)
            continue;
        save = NULL;
        for (char *t = strtok_r(line, " ", &save); t != NULL && i < 5;
             t = strtok_r(NULL, " ", &save))
            fields[i++] = t;
        if (i < 5)
            continue;
        for (int c = 0; c < CTL_N; c++)
            if (mnt[c] == NULL && list_has(superopts, ctl_name[c]))
                mnt[c] = xstrdup(fields[4]);
    }
}

/* ---- driver ---------------------------------------------------------------------------- */

static struct wr_cgroup_driver *driver_new(enum wr_cgroup_version v, const char *parent)
{
    struct wr_cgroup_driver *d = xcalloc(1, sizeof(*d));

    d->version = v;
    for (int c = 0; c < CTL_N; c++)
        d->fd[c] = d->at[c] = -1;
    d->swap_file = -1;
    d->parent = xstrdup(parent);
    return d;
}

void wr_cgroup_driver_close(struct wr_cgroup_driver *d)
{
    if (d == NULL)
        return;
    for (int c = 0; c < CTL_N; c++)
        if (d->fd[c] >= 0)
            (void)close(d->fd[c]);
    free(d->parent);
    free(d);
}

enum wr_cgroup_version wr_cgroup_driver_version(const struct wr_cgroup_driver *d)
{
    return d->version;
}

/* The v1 freezer switches a static key on when the host's first cgroup freezes and off when
 * the last one thaws, and that code patching stops every CPU: about 1.8 ms for the freeze and
 * 1.6 ms for the thaw on this machine type, most of a snapshot's or fork's freeze window. One
 * empty cgroup kept frozen, shared by every Warren on the host and never removed, keeps the
 * key on: a sandbox's freeze and thaw then cost about 0.3 and 0.1 ms. Best effort: without it
 * freezing only costs more. */
static void pin_v1_freezer(const char *mnt)
{
    _cleanup_close_ int root = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (root < 0 || (mkdirat(root, "warren-freezer-pin", 0755) < 0 && errno != EEXIST))
        return;
    (void)cg_write(root, "warren-freezer-pin/freezer.state", "FROZEN");
}

static int open_v1(const char *parent, struct wr_cgroup_driver **out, struct wr_err *err)
{
    char *mnt[CTL_N] = {0};
    struct wr_cgroup_driver *d = driver_new(WR_CGROUP_V1, parent);
    bool any = false;
    int rc = 0;

    v1_mounts(mnt);
    if (mnt[CTL_FREEZER] != NULL)
        pin_v1_freezer(mnt[CTL_FREEZER]);
    for (int c = 0; c < CTL_N && rc == 0; c++) {
        _cleanup_free_ char *path = NULL;
        int shared = -1;

        if (mnt[c] == NULL)
            continue;
        for (int e = 0; e < c; e++)
            if (mnt[e] != NULL && strcmp(mnt[e], mnt[c]) == 0)
                shared = e;
        d->have[c] = any = true;
        if (shared >= 0) {
            d->at[c] = d->at[shared];
            continue;
        }
        path = xasprintf("%s/%s", mnt[c], parent);
        if (wr_mkdir_p(path, 0755, err) < 0) {
            rc = wr_err_wrap(err, "cgroup v1");
            break;
        }
        d->fd[c] = d->at[c] = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d->fd[c] < 0)
            rc = wr_err_sys(err, "cgroup v1: open `%s`", path);
    }
    for (int c = 0; c < CTL_N; c++)
        free(mnt[c]);
    if (rc == 0 && !any)
        rc = wr_err_set(err, WR_EUNSUPPORTED, 0, "cgroup v1: no controller hierarchy mounted");
    if (rc == 0 && d->have[CTL_MEMORY]) {
        /* oom_kill_disable is inherited at mkdir, so settle it once here rather than per
         * sandbox: an OOM must kill inside the sandbox's cgroup, not hang it. */
        char buf[256];
        if (cg_read(d->at[CTL_MEMORY], "memory.oom_control", buf, sizeof(buf)) > 0 &&
            keyed_value(buf, "oom_kill_disable") != 0 &&
            (rc = cg_write(d->at[CTL_MEMORY], "memory.oom_control", "0")) < 0)
            rc = wr_err_set(err, WR_ESYS, -rc, "cgroup v1: enable the OOM killer in `%s`", parent);
    }
    if (rc < 0) {
        wr_cgroup_driver_close(d);
        return -1;
    }
    *out = d;
    return 0;
}

/* Enable in dfd's cgroup.subtree_control those of memory, pids and cpu that it offers. */
static int v2_delegate(int dfd, const char *where, struct wr_err *err)
{
    static const enum ctl want[] = {CTL_MEMORY, CTL_PIDS, CTL_CPU};
    bool avail[CTL_N] = {0}, on[CTL_N] = {0};
    char buf[64] = "";
    int rc;

    if ((rc = v2_controllers(dfd, "cgroup.controllers", avail)) < 0 ||
        (rc = v2_controllers(dfd, "cgroup.subtree_control", on)) < 0)
        return wr_err_set(err, WR_ESYS, -rc, "cgroup v2: read controllers of `%s`", where);
    for (size_t i = 0; i < WR_ARRAY_SIZE(want); i++)
        if (avail[want[i]] && !on[want[i]])
            snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "+%s ", ctl_name[want[i]]);
    if (buf[0] != '\0' && (rc = cg_write(dfd, "cgroup.subtree_control", buf)) < 0)
        return wr_err_set(err, WR_ESYS, -rc, "cgroup v2: enable `%s` in `%s`", buf, where);
    return 0;
}

static int open_v2(const char *root, const char *parent, struct wr_cgroup_driver **out,
                   struct wr_err *err)
{
    struct wr_cgroup_driver *d = NULL;
    _cleanup_free_ char *rest = xstrdup(parent);
    _cleanup_close_ int fd = -1;
    const char *where = root;
    char *save = NULL;

    if (!is_cgroup2(root))
        return wr_err_set(err, WR_EUNSUPPORTED, 0, "cgroup v2: `%s` is not a cgroup2 mount", root);
    fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return wr_err_sys(err, "cgroup v2: open `%s`", root);
    /* Walk down to the parent, enabling the controllers at every level on the way: a child
     * offers only what its parent's subtree_control enables. */
    for (char *comp = strtok_r(rest, "/", &save); comp != NULL; comp = strtok_r(NULL, "/", &save)) {
        int next;
        if (v2_delegate(fd, where, err) < 0)
            return -1;
        if (mkdirat(fd, comp, 0755) < 0 && errno != EEXIST)
            return wr_err_sys(err, "cgroup v2: mkdir `%s`", comp);
        next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (next < 0)
            return wr_err_sys(err, "cgroup v2: open `%s`", comp);
        (void)close(fd);
        fd = next;
        where = comp;
    }
    if (v2_delegate(fd, parent, err) < 0)
        return -1;
    d = driver_new(WR_CGROUP_V2, parent);
    if (v2_controllers(fd, "cgroup.subtree_control", d->have) < 0) {
        wr_cgroup_driver_close(d);
        return wr_err_sys(err, "cgroup v2: read `%s/cgroup.subtree_control`", parent);
    }
    d->fd[0] = steal_fd(&fd);
    for (int c = 0; c < CTL_N; c++)
        d->at[c] = d->fd[0];
    *out = d;
    return 0;
}

int wr_cgroup_driver_open(const char *mode, const char *parent, const char *v2_root,
                          struct wr_cgroup_driver **out, struct wr_err *err)
{
    char *mnt[CTL_N] = {0};
    bool v1_ok;

    if (mode == NULL)
        mode = "auto";
    if (v2_root == NULL)
        v2_root = DEFAULT_V2_ROOT;
    if (parent == NULL || !valid_parent(parent))
        return wr_err_set(err, WR_EINVAL, 0, "cgroup: bad parent `%s`", parent ? parent : "");
    if (strcmp(mode, "v1") == 0)
        return open_v1(parent, out, err);
    if (strcmp(mode, "v2") == 0)
        return open_v2(v2_root, parent, out, err);
    if (strcmp(mode, "auto") != 0)
        return wr_err_set(err, WR_EINVAL, 0, "cgroup: unknown mode `%s`", mode);
    if (v2_usable(v2_root))
        return open_v2(v2_root, parent, out, err);
    v1_mounts(mnt);
    v1_ok = mnt[CTL_MEMORY] != NULL && mnt[CTL_PIDS] != NULL && mnt[CTL_CPU] != NULL;
    for (int c = 0; c < CTL_N; c++)
        free(mnt[c]);
    if (v1_ok)
        return open_v1(parent, out, err);
    return wr_err_set(err, WR_EUNSUPPORTED, 0,
                      "cgroup: neither v2 at `%s` nor v1 with memory, pids and cpu is mounted",
                      v2_root);
}

/* ---- sandbox cgroups ------------------------------------------------------------------- */

/* The hierarchy whose sandbox cgroup holds every process of the sandbox itself: v1's pids
 * (commands' own cgroups are never made there), v2's only one. */
static int members_fd(const struct wr_cgroup_driver *d)
{
    if (d->version == WR_CGROUP_V1 && d->at[CTL_PIDS] >= 0)
        return d->at[CTL_PIDS];
    for (int c = 0; c < CTL_N; c++)
        if (d->fd[c] >= 0)
            return d->fd[c];
    return -1;
}

/* Kill whatever a stale cgroup `name` holds and remove it from every hierarchy. */
static int purge(struct wr_cgroup_driver *d, const char *name)
{
    int64_t deadline = now_ns() + DRAIN_NS;
    char path[NAME_MAX + 32];
    int rc = 0;

    if (d->version == WR_CGROUP_V2) {
        snprintf(path, sizeof(path), "%s/cgroup.kill", name);
        if (cg_write(d->fd[0], path, "1") == -ENOENT) {
            /* Before 5.14: no cgroup.kill. Thaw so SIGKILL is acted on, then kill by pid. */
            snprintf(path, sizeof(path), "%s/cgroup.freeze", name);
            (void)cg_write(d->fd[0], path, "0");
            (void)kill_loop(d->fd[0], name, deadline);
        }
    } else if (d->at[CTL_FREEZER] >= 0) {
        snprintf(path, sizeof(path), "%s/freezer.state", name);
        (void)cg_write(d->at[CTL_FREEZER], path, "THAWED");
    }
    for (int c = CTL_N - 1; c >= 0; c--) {
        int r;
        if (d->fd[c] < 0)
            continue;
        if (d->version == WR_CGROUP_V1)
            (void)kill_loop(d->fd[c], name, deadline);
        if ((r = rmdir_wait(d->fd[c], name, deadline)) < 0 && rc == 0)
            rc = r;
    }
    return rc;
}

/* Remove the directories of a half-made cgroup: they are empty, so rmdir succeeds at once. */
static void unmake(struct wr_cgroup_driver *d, const char *name, int upto)
{
    for (int c = upto - 1; c >= 0; c--)
        if (d->fd[c] >= 0)
            (void)unlinkat(d->fd[c], name, AT_REMOVEDIR);
}

static int missing(struct wr_cgroup_driver *d, enum ctl c, struct wr_err *err)
{
    return wr_err_set(err, WR_EUNSUPPORTED, 0, "cgroup v%d: controller `%s` not available",
                      (int)d->version, ctl_name[c]);
}

/* Write an optional file (memsw / swap.max): ENOENT means the host has no swap accounting. */
static int write_swap(struct wr_cgroup_driver *d, const char *path, const char *val)
{
    int rc;

    if (d->swap_file == 0)
        return 0;
    rc = cg_write(d->at[CTL_MEMORY], path, val);
    if (rc == -ENOENT && d->swap_file == -1) {
        d->swap_file = 0;
        return 0;
    }
    if (rc == 0)
        d->swap_file = 1;
    return rc;
}

/* The devices a sandbox may open: none, then the standard nodes and the sandbox's own
 * (wr_device_node.access), through v1's devices controller, or v2's eBPF device program. 0, or
 * -errno with *file what failed. */
static int apply_devices(struct wr_cgroup *cg, const struct wr_cgroup_limits *lim,
                         const char **file)
{
    static const char *const standard[] = {
        "c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm",   "c 1:8 rwm", "c 1:9 rwm", /* null .. urandom */
        "c 5:0 rwm", "c 5:2 rwm", "c 136:* rwm",                           /* tty, ptmx, pts */
    };
    int at = cg->d->at[CTL_DEVICES], rc;
    char path[NAME_MAX + 32], rule[64];

    if (cg->d->version == WR_CGROUP_V2) {
        /* No devices.allow in v2: an eBPF program attached to the cgroup (devbpf.c). */
        int prog = wr_devbpf_load(lim->device_nodes, lim->n_devices), dir;
        *file = "an eBPF device program";
        if (prog < 0)
            return prog;
        dir = openat(cg->d->fd[0], cg->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        rc = dir < 0 ? -errno : wr_devbpf_attach(prog, dir);
        if (dir >= 0)
            close(dir);
        close(prog);
        return rc;
    }
    if (at < 0)
        return 0;
    *file = "devices.deny";
    snprintf(path, sizeof(path), "%s/devices.deny", cg->name);
    if ((rc = cg_write(at, path, "a")) < 0)
        return rc;
    *file = "devices.allow";
    snprintf(path, sizeof(path), "%s/devices.allow", cg->name);
    for (size_t i = 0; i < sizeof(standard) / sizeof(standard[0]); i++)
        if ((rc = cg_write(at, path, standard[i])) < 0)
            return rc;
    for (size_t i = 0; i < lim->n_devices; i++) {
        const struct wr_device_node *n = &lim->device_nodes[i];
        if (n->access[0] == '\0')
            continue;
        snprintf(rule, sizeof(rule), "%c %u:%u %s", n->type, n->major, n->minor, n->access);
        if ((rc = cg_write(at, path, rule)) < 0)
            return rc;
    }
    return 0;
}

static int apply_limits(struct wr_cgroup *cg, const struct wr_cgroup_limits *lim,
                        struct wr_err *err)
{
    struct wr_cgroup_driver *d = cg->d;
    bool v2 = d->version == WR_CGROUP_V2;
    char path[NAME_MAX + 64], val[64];
    const char *file = "";
    int rc = 0;

    if (lim->devices && (rc = apply_devices(cg, lim, &file)) < 0)
        goto fail;
    if (lim->memory_bytes != 0) {
        file = v2 ? "memory.max" : "memory.limit_in_bytes";
        snprintf(path, sizeof(path), "%s/%s", cg->name, file);
        snprintf(val, sizeof(val), "%" PRIu64, lim->memory_bytes);
        if ((rc = cg_write(d->at[CTL_MEMORY], path, val)) < 0)
            goto fail;
        /* Swap would let the sandbox page out past the limit: cap memory+swap at the same
         * value (v1) or forbid swap (v2). */
        file = v2 ? "memory.swap.max" : "memory.memsw.limit_in_bytes";
        snprintf(path, sizeof(path), "%s/%s", cg->name, file);
        if ((rc = write_swap(d, path, v2 ? "0" : val)) < 0)
            goto fail;
    }
    if (lim->pids_max != 0) {
        file = "pids.max";
        snprintf(path, sizeof(path), "%s/pids.max", cg->name);
        snprintf(val, sizeof(val), "%" PRIu32, lim->pids_max);
        if ((rc = cg_write(d->at[CTL_PIDS], path, val)) < 0)
            goto fail;
    }
    if (lim->cpu_millis != 0) {
        uint64_t quota = (uint64_t)lim->cpu_millis * (CFS_PERIOD_US / 1000);
        if (v2) {
            file = "cpu.max";
            snprintf(val, sizeof(val), "%" PRIu64 " %u", quota, CFS_PERIOD_US);
        } else {
            /* The period is the kernel's default too, but the quota only means cpu_millis
             * relative to it, so set it rather than assume it. */
            file = "cpu.cfs_period_us";
            snprintf(path, sizeof(path), "%s/%s", cg->name, file);
            snprintf(val, sizeof(val), "%u", CFS_PERIOD_US);
            if ((rc = cg_write(d->at[CTL_CPU], path, val)) < 0)
                goto fail;
            file = "cpu.cfs_quota_us";
            snprintf(val, sizeof(val), "%" PRIu64, quota);
        }
        snprintf(path, sizeof(path), "%s/%s", cg->name, file);
        if ((rc = cg_write(d->at[CTL_CPU], path, val)) < 0)
            goto fail;
    }
    return 0;
fail:
    return wr_err_set(err, WR_ESYS, -rc, "write %s", file);
}

int wr_cgroup_set_limits(struct wr_cgroup *cg, const struct wr_cgroup_limits *lim,
                         struct wr_err *err)
{
    if (lim->cpu_millis != 0 && lim->cpu_millis < 10)
        return wr_err_set(err, WR_EINVAL, 0, "cpu limit %u millicores is below 10",
                          lim->cpu_millis);
    return apply_limits(cg, lim, err);
}

void wr_cgroup_forget(struct wr_cgroup *cg)
{
    free(cg);
}

int wr_cgroup_lookup(struct wr_cgroup_driver *d, const char *name, struct wr_cgroup **out,
                     struct wr_err *err)
{
    struct wr_cgroup *cg;
    struct stat st;
    int c;

    if (!valid_name(name))
        return wr_err_set(err, WR_EINVAL, 0, "cgroup: bad name `%s`", name);
    for (c = 0; c < CTL_N && d->fd[c] < 0; c++)
        ;
    if (c == CTL_N || fstatat(d->fd[c], name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
        return wr_err_set(err, WR_ENOTFOUND, 0, "cgroup `%s` does not exist", name);
    cg = xcalloc(1, sizeof(*cg));
    cg->d = d;
    memcpy(cg->name, name, strlen(name) + 1);
    *out = cg;
    return 0;
}

int wr_cgroup_create(struct wr_cgroup_driver *d, const char *name,
                     const struct wr_cgroup_limits *lim, struct wr_cgroup **out, struct wr_err *err)
{
    static const struct wr_cgroup_limits no_limits;
    struct wr_cgroup *cg;
    bool purged = false;
    int c;

    if (lim == NULL)
        lim = &no_limits;
    if (!valid_name(name))
        return wr_err_set(err, WR_EINVAL, 0, "cgroup: bad name `%s`", name);
    /* Refuse before any mkdir, so nothing is left to undo. */
    if (lim->memory_bytes != 0 && !d->have[CTL_MEMORY])
        return missing(d, CTL_MEMORY, err);
    if (lim->pids_max != 0 && !d->have[CTL_PIDS])
        return missing(d, CTL_PIDS, err);
    if (lim->cpu_millis != 0 && !d->have[CTL_CPU])
        return missing(d, CTL_CPU, err);
    if (lim->cpu_millis != 0 && lim->cpu_millis < 10)
        return wr_err_set(err, WR_EINVAL, 0, "cgroup: cpu limit %u below the minimum of 10",
                          lim->cpu_millis);

    cg = xcalloc(1, sizeof(*cg));
    cg->d = d;
    memcpy(cg->name, name, strlen(name) + 1);
    for (c = 0; c < CTL_N; c++) {
        if (d->fd[c] < 0)
            continue;
        if (mkdirat(d->fd[c], name, 0755) == 0)
            continue;
        if (errno == EEXIST && !purged) {
            /* Left by a crashed sandbox. Start over from an empty cgroup rather than reuse
             * one whose limits and counters are unknown. */
            int rc;
            log_warn("cgroup `%s/%s` exists; removing the stale cgroup", d->parent, name);
            purged = true;
            if ((rc = purge(d, name)) < 0) {
                wr_err_set(err, WR_ECONFLICT, -rc, "cgroup `%s`: remove stale cgroup", name);
                goto fail;
            }
            c = -1;
            continue;
        }
        wr_err_sys(err, "cgroup `%s`: mkdir in %s", name,
                   d->version == WR_CGROUP_V2 ? "cgroup2" : ctl_name[c]);
        goto fail;
    }
    if (apply_limits(cg, lim, err) < 0) {
        wr_err_wrap(err, "cgroup `%s`", name);
        goto fail;
    }
    *out = cg;
    return 0;
fail:
    unmake(d, name, c);
    free(cg);
    return -1;
}

int wr_cgroup_attach(struct wr_cgroup *cg, pid_t pid, struct wr_err *err)
{
    char path[NAME_MAX + 32], val[32];

    snprintf(path, sizeof(path), "%s/cgroup.procs", cg->name);
    snprintf(val, sizeof(val), "%d", (int)pid);
    for (int c = 0; c < CTL_N; c++) {
        int rc;
        if (cg->d->fd[c] < 0)
            continue;
        if ((rc = cg_write(cg->d->fd[c], path, val)) < 0)
            return wr_err_set(err, rc == -ESRCH ? WR_ENOTFOUND : WR_ESYS, -rc,
                              "cgroup `%s`: attach %d", cg->name, (int)pid);
    }
    return 0;
}

/* Write the freezer state and poll until it reads back: v1 freezer.state goes through FREEZING,
 * v2 reports "frozen 1" in cgroup.events once every task has stopped. Returns 0 or -errno. */
static int freeze_wait(struct wr_cgroup *cg, bool frozen, int64_t deadline)
{
    bool v2 = cg->d->version == WR_CGROUP_V2;
    int dfd = cg->d->at[CTL_FREEZER];
    char path[NAME_MAX + 32], buf[256];
    _cleanup_close_ int fd = -1;
    long ns = 20000;
    int64_t start = now_ns(), kicked = start;
    int rc;

    snprintf(path, sizeof(path), "%s/%s", cg->name, v2 ? "cgroup.freeze" : "freezer.state");
    if ((rc = cg_write(dfd, path, v2 ? (frozen ? "1" : "0") : (frozen ? "FROZEN" : "THAWED"))) < 0)
        return rc;
    if (v2)
        snprintf(path, sizeof(path), "%s/cgroup.events", cg->name);
    fd = openat(dfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    for (;;) {
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        bool done;
        if (n < 0)
            return -errno;
        buf[n] = '\0';
        if (v2)
            done = keyed_value(buf, "frozen") == (frozen ? 1 : 0);
        else
            done = strncmp(buf, frozen ? "FROZEN" : "THAWED", 6) == 0;
        if (done)
            return 0;
        if (now_ns() >= deadline)
            return -ETIMEDOUT;
        /* v1 freezes the tasks it finds when FROZEN is written; one that a ptrace stop or a
         * fork kept from the refrigerator (gVisor's sentry and its stubs, on the ptrace platform)
         * is caught by writing it again: every 100 ms. */
        if (!v2 && frozen && now_ns() - kicked >= 100000000) {
            (void)cg_write(dfd, path, "FROZEN");
            kicked = now_ns();
        }
        /* A freeze is the window a snapshot or fork holds the sandbox still: poll finely for
         * the first 5 ms (an idle sandbox freezes in well under one), then back off. */
        if (now_ns() - start < 5000000) {
            struct timespec ts = {0, 50000};
            (void)nanosleep(&ts, NULL);
        } else {
            backoff(&ns);
        }
    }
}

int wr_cgroup_freeze(struct wr_cgroup *cg, bool frozen, struct wr_err *err)
{
    int rc;

    if (!cg->d->have[CTL_FREEZER])
        return missing(cg->d, CTL_FREEZER, err);
    /* A freeze that does not complete is undone (never leave the sandbox half-frozen) and
     * tried again, three times in all: gVisor's sentry and stubs under load sometimes keep one
     * task out of the refrigerator for seconds, and a thaw lets it move on. */
    for (int attempt = 0; attempt < 3; attempt++) {
        rc = freeze_wait(cg, frozen, now_ns() + FREEZE_NS);
        if (rc == 0 || !frozen)
            break;
        (void)freeze_wait(cg, false, now_ns() + FREEZE_NS);
    }
    if (rc < 0)
        return wr_err_set(err, WR_ESYS, -rc, "cgroup `%s`: %s", cg->name,
                          frozen ? "freeze" : "thaw");
    return 0;
}

int wr_cgroup_kill(struct wr_cgroup *cg, struct wr_err *err)
{
    struct wr_cgroup_driver *d = cg->d;
    char path[NAME_MAX + 32];
    int rc = 0;

    if (d->version == WR_CGROUP_V2) {
        snprintf(path, sizeof(path), "%s/cgroup.kill", cg->name);
        rc = cg_write(d->fd[0], path, "1");
        if (rc != -ENOENT)
            goto out;
        /* Before 5.14 there is no cgroup.kill; a v2-frozen task still dies of SIGKILL. */
    } else if (d->at[CTL_FREEZER] >= 0) {
        /* A v1-frozen task does not act on SIGKILL until thawed: thaw first. */
        snprintf(path, sizeof(path), "%s/freezer.state", cg->name);
        (void)cg_write(d->at[CTL_FREEZER], path, "THAWED");
    }
    /* Every process is in the members' hierarchy itself (commands' cgroups are made in
     * others): one list is enough. */
    rc = kill_loop(members_fd(d), cg->name, now_ns() + DRAIN_NS);
out:
    if (rc < 0)
        return wr_err_set(err, WR_ESYS, -rc, "cgroup `%s`: kill", cg->name);
    return 0;
}

int wr_cgroup_procs(struct wr_cgroup *cg, void (*fn)(pid_t pid, void *arg), void *arg,
                    struct wr_err *err)
{
    char path[NAME_MAX + 32];
    int n = -ENOENT;

    snprintf(path, sizeof(path), "%s/cgroup.procs", cg->name);
    if (members_fd(cg->d) >= 0)
        n = procs_foreach(members_fd(cg->d), path, fn, arg);
    if (n < 0)
        return wr_err_set(err, WR_ESYS, -n, "cgroup `%s`: read cgroup.procs", cg->name);
    return n;
}

int wr_cgroup_nprocs(struct wr_cgroup *cg, struct wr_err *err)
{
    return wr_cgroup_procs(cg, NULL, NULL, err);
}

int wr_cgroup_memory(struct wr_cgroup *cg, uint64_t *usage, uint64_t *oom_kills, struct wr_err *err)
{
    bool v2 = cg->d->version == WR_CGROUP_V2;
    int dfd = cg->d->at[CTL_MEMORY];
    char path[NAME_MAX + 64], buf[1024];
    const char *file;
    ssize_t n;

    if (!cg->d->have[CTL_MEMORY])
        return missing(cg->d, CTL_MEMORY, err);
    file = v2 ? "memory.current" : "memory.usage_in_bytes";
    snprintf(path, sizeof(path), "%s/%s", cg->name, file);
    if ((n = cg_read(dfd, path, buf, sizeof(buf))) < 0)
        goto fail;
    if (usage != NULL)
        *usage = strtoull(buf, NULL, 10);
    if (oom_kills == NULL)
        return 0;
    file = v2 ? "memory.events" : "memory.oom_control";
    snprintf(path, sizeof(path), "%s/%s", cg->name, file);
    if ((n = cg_read(dfd, path, buf, sizeof(buf))) < 0)
        goto fail;
    *oom_kills = keyed_value(buf, "oom_kill");
    return 0;
fail:
    return wr_err_set(err, WR_ESYS, (int)-n, "cgroup `%s`: read %s", cg->name, file);
}

int wr_cgroup_pids_refused(struct wr_cgroup *cg, uint64_t *n, struct wr_err *err)
{
    char path[NAME_MAX + 64], buf[256];
    ssize_t r;

    if (!cg->d->have[CTL_PIDS])
        return missing(cg->d, CTL_PIDS, err);
    snprintf(path, sizeof(path), "%s/pids.events", cg->name);
    if ((r = cg_read(cg->d->at[CTL_PIDS], path, buf, sizeof(buf))) < 0)
        return wr_err_set(err, WR_ESYS, (int)-r, "cgroup `%s`: read pids.events", cg->name);
    *n = keyed_value(buf, "max");
    return 0;
}

int wr_cgroup_cpu(struct wr_cgroup *cg, uint64_t *ns, struct wr_err *err)
{
    bool v2 = cg->d->version == WR_CGROUP_V2;
    int dfd = cg->d->at[CTL_CPUACCT];
    char path[NAME_MAX + 64], buf[1024];
    const char *file = v2 ? "cpu.stat" : "cpuacct.usage";
    ssize_t n;

    if (!cg->d->have[CTL_CPUACCT])
        return missing(cg->d, CTL_CPUACCT, err);
    snprintf(path, sizeof(path), "%s/%s", cg->name, file);
    if ((n = cg_read(dfd, path, buf, sizeof(buf))) < 0)
        return wr_err_set(err, WR_ESYS, (int)-n, "cgroup `%s`: read %s", cg->name, file);
    *ns = v2 ? keyed_value(buf, "usage_usec") * 1000 : strtoull(buf, NULL, 10);
    return 0;
}

int wr_cgroup_destroy(struct wr_cgroup *cg, struct wr_err *err)
{
    int64_t deadline;
    int rc = 0, bad = -1;

    if (cg == NULL)
        return 0;
    deadline = now_ns() + DRAIN_NS;
    /* rmdir fails with EBUSY while a process (not yet a zombie) remains; retrying the rmdir is
     * the cheapest way to wait for the drain. */
    for (int c = CTL_N - 1; c >= 0; c--) {
        int r;
        if (cg->d->fd[c] < 0)
            continue;
        if ((r = rmdir_wait(cg->d->fd[c], cg->name, deadline)) < 0 && rc == 0) {
            rc = r;
            bad = c;
        }
    }
    if (rc < 0)
        wr_err_set(err, rc == -EBUSY ? WR_ECONFLICT : WR_ESYS, -rc, "cgroup `%s`: rmdir in %s",
                   cg->name, cg->d->version == WR_CGROUP_V2 ? "cgroup2" : ctl_name[bad]);
    free(cg);
    return rc < 0 ? -1 : 0;
}

/* ---- a command's cgroup ---------------------------------------------------------------- */

/* The controllers a command's cgroup is made in (v1), and their hierarchies' fds without
 * repeats (cpu,cpuacct co-mounted share one). Returns how many. */
static size_t child_hiers(const struct wr_cgroup_driver *d, int dfd[WR_CGROUP_JOIN_MAX])
{
    static const enum ctl want[] = {CTL_MEMORY, CTL_CPU, CTL_CPUACCT};
    size_t n = 0;

    for (size_t i = 0; i < WR_ARRAY_SIZE(want); i++) {
        int at = d->at[want[i]];
        bool dup = false;
        for (size_t k = 0; k < n; k++)
            dup = dup || dfd[k] == at;
        if (at >= 0 && !dup)
            dfd[n++] = at;
    }
    return n;
}

static int child_path(char *buf, size_t size, const struct wr_cgroup *cg, const char *child,
                      const char *file, struct wr_err *err)
{
    int n;

    if (!valid_name(child))
        return wr_err_set(err, WR_EINVAL, 0, "cgroup: bad name `%s`", child);
    n = snprintf(buf, size, "%s/%s%s%s", cg->name, child, file ? "/" : "", file ? file : "");
    if (n < 0 || (size_t)n >= size)
        return wr_err_set(err, WR_EINVAL, 0, "cgroup: name `%s` too long", child);
    return 0;
}

int wr_cgroup_child_create(struct wr_cgroup *cg, const char *child,
                           const struct wr_cgroup_limits *lim, int fds[WR_CGROUP_JOIN_MAX],
                           size_t *nfds, struct wr_err *err)
{
    struct wr_cgroup_driver *d = cg->d;
    struct wr_cgroup sub = {.d = d};
    char path[2 * NAME_MAX + 32];
    int dfd[WR_CGROUP_JOIN_MAX];
    size_t n, made = 0, opened = 0;

    *nfds = 0;
    if (d->version != WR_CGROUP_V1)
        return wr_err_set(err, WR_EUNSUPPORTED, 0,
                          "cgroup v2: a command cannot have a cgroup of its own (the sandbox's "
                          "cgroup holds its processes, so no controller can be enabled below it)");
    if (child_path(path, sizeof(path), cg, child, NULL, err) < 0)
        return -1;
    if (strlen(path) >= sizeof(sub.name))
        return wr_err_set(err, WR_EINVAL, 0, "cgroup: name `%s` too long", path);
    if (lim->pids_max != 0)
        return wr_err_set(err, WR_EINVAL, 0, "cgroup: a command has no pids limit of its own");
    if (lim->cpu_millis != 0 && lim->cpu_millis < 10)
        return wr_err_set(err, WR_EINVAL, 0, "cgroup: cpu limit %u below the minimum of 10",
                          lim->cpu_millis);
    n = child_hiers(d, dfd);
    for (made = 0; made < n; made++)
        if (mkdirat(dfd[made], path, 0755) < 0) {
            wr_err_sys(err, "cgroup `%s`: mkdir", path);
            goto fail;
        }
    /* apply_limits writes <name>/<file> in each controller's hierarchy: the child's name. */
    memcpy(sub.name, path, strlen(path) + 1);
    if (apply_limits(&sub, lim, err) < 0) {
        wr_err_wrap(err, "cgroup `%s`", path);
        goto fail;
    }
    (void)child_path(path, sizeof(path), cg, child, "cgroup.procs", NULL);
    for (opened = 0; opened < n; opened++) {
        fds[opened] = openat(dfd[opened], path, O_WRONLY | O_CLOEXEC);
        if (fds[opened] < 0) {
            wr_err_sys(err, "cgroup `%s`: open", path);
            goto fail;
        }
    }
    *nfds = n;
    return 0;
fail:
    for (size_t i = 0; i < opened; i++)
        (void)close(fds[i]);
    (void)child_path(path, sizeof(path), cg, child, NULL, NULL);
    while (made > 0)
        (void)unlinkat(dfd[--made], path, AT_REMOVEDIR);
    return -1;
}

int wr_cgroup_child_usage(struct wr_cgroup *cg, const char *child, uint64_t *cpu_ns,
                          uint64_t *memory_peak, struct wr_err *err)
{
    struct wr_cgroup_driver *d = cg->d;
    char path[2 * NAME_MAX + 64], buf[64];
    bool v2 = d->version == WR_CGROUP_V2;
    struct wr_cgroup sub = {.d = d};
    ssize_t r;

    if (child_path(path, sizeof(path), cg, child, NULL, err) < 0)
        return -1;
    if (strlen(path) >= sizeof(sub.name))
        return wr_err_set(err, WR_EINVAL, 0, "cgroup: name `%s` too long", path);
    memcpy(sub.name, path, strlen(path) + 1);
    if (wr_cgroup_cpu(&sub, cpu_ns, err) < 0)
        return -1;
    if (!d->have[CTL_MEMORY])
        return missing(d, CTL_MEMORY, err);
    (void)child_path(path, sizeof(path), cg, child,
                     v2 ? "memory.peak" : "memory.max_usage_in_bytes", NULL);
    if ((r = cg_read(d->at[CTL_MEMORY], path, buf, sizeof(buf))) < 0)
        return wr_err_set(err, WR_ESYS, (int)-r, "cgroup `%s`: read", path);
    *memory_peak = strtoull(buf, NULL, 10);
    return 0;
}

struct move_ctx {
    const int *dfd;
    size_t n;
    const char *to; /* the parent's cgroup.procs */
};

static void move_up(pid_t pid, void *arg)
{
    struct move_ctx *m = arg;
    char val[32];

    snprintf(val, sizeof(val), "%d", (int)pid);
    for (size_t i = 0; i < m->n; i++)
        (void)cg_write(m->dfd[i], m->to, val); /* ESRCH: it has just exited */
}

int wr_cgroup_child_remove(struct wr_cgroup *cg, const char *child, struct wr_err *err)
{
    struct wr_cgroup_driver *d = cg->d;
    char path[2 * NAME_MAX + 32], procs[2 * NAME_MAX + 32], to[NAME_MAX + 32];
    int64_t deadline = now_ns() + DRAIN_NS;
    int dfd[WR_CGROUP_JOIN_MAX];
    size_t n = child_hiers(d, dfd);
    struct move_ctx m = {dfd, n, to};
    int rc = 0;

    if (child_path(path, sizeof(path), cg, child, NULL, err) < 0 ||
        child_path(procs, sizeof(procs), cg, child, "cgroup.procs", err) < 0)
        return -1;
    snprintf(to, sizeof(to), "%s/cgroup.procs", cg->name);
    /* What the command left running goes on in the sandbox's cgroup, without its limits. A
     * process forked meanwhile shows in the next round; the rmdir's EBUSY says when to look. */
    for (long ns = 50000;;) {
        int left = n > 0 ? procs_foreach(dfd[0], procs, move_up, &m) : 0;
        bool busy = false;
        for (size_t i = 0; i < n; i++) {
            if (unlinkat(dfd[i], path, AT_REMOVEDIR) == 0 || errno == ENOENT)
                continue;
            busy = busy || errno == EBUSY;
            rc = -errno;
        }
        if (!busy || left < 0 || now_ns() >= deadline)
            break;
        rc = 0;
        backoff(&ns);
    }
    if (rc < 0)
        return wr_err_set(err, rc == -EBUSY ? WR_ECONFLICT : WR_ESYS, -rc, "cgroup `%s`: rmdir",
                          path);
    return 0;
}

int wr_cgroup_remove_stale(struct wr_cgroup_driver *d, const char *name, struct wr_err *err)
{
    char path[NAME_MAX + 32];
    int64_t deadline = now_ns() + DRAIN_NS / 4;

    if (!valid_name(name))
        return wr_err_set(err, WR_EINVAL, 0, "cgroup: bad name `%s`", name);
    snprintf(path, sizeof(path), "%s/cgroup.procs", name);
    for (int c = 0; c < CTL_N; c++) {
        int n;
        if (d->fd[c] < 0)
            continue;
        n = procs_foreach(d->fd[c], path, NULL, NULL);
        if (n > 0)
            return wr_err_set(err, WR_ECONFLICT, 0, "cgroup `%s`: %d processes remain", name, n);
    }
    for (int c = CTL_N - 1; c >= 0; c--) {
        int r;
        if (d->fd[c] >= 0 && (r = rmdir_wait(d->fd[c], name, deadline)) < 0)
            return wr_err_set(err, r == -EBUSY ? WR_ECONFLICT : WR_ESYS, -r, "cgroup `%s`: rmdir",
                              name);
    }
    return 0;
}
