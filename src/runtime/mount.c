/* SPDX-License-Identifier: Apache-2.0 */
/* Root filesystem of a sandbox: idmapped overlay (parent) and the mounts inside it (child). */
#include "mount.h"
#include "uidpool.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/xalloc.h"

#define STR_(x) #x
#define STR(x)  STR_(x)

/* glibc 2.36 has these in <sys/mount.h>; spell them through syscall() so older headers work. */
static int sys_open_tree(int dfd, const char *path, unsigned flags)
{
    return (int)syscall(SYS_open_tree, dfd, path, flags);
}

static int sys_mount_setattr(int dfd, const char *path, unsigned flags, struct mount_attr *a)
{
    return (int)syscall(SYS_mount_setattr, dfd, path, flags, a, sizeof(*a));
}

static int sys_fsopen(const char *fs, unsigned flags)
{
    return (int)syscall(SYS_fsopen, fs, flags);
}

static int sys_fsconfig(int fd, unsigned cmd, const char *key, const void *val, int aux)
{
    return (int)syscall(SYS_fsconfig, fd, cmd, key, val, aux);
}

static int sys_fsmount(int fd, unsigned flags, unsigned attrs)
{
    return (int)syscall(SYS_fsmount, fd, flags, attrs);
}

/* A detached tmpfs owned by the sandbox's root, holding upper/ and work/. Passing the layers
 * as fds of a detached mount also keeps host paths out of the sandbox's mountinfo. */
static int make_tmpfs_upper(uint64_t bytes, uid_t host_root, int *tmnt, int *upper, int *work,
                            struct wr_err *err)
{
    _cleanup_close_ int fs = -1, mnt = -1;
    char opt[32];

    fs = sys_fsopen("tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0)
        return wr_err_sys(err, "fsopen tmpfs");
    snprintf(opt, sizeof(opt), "%llu", (unsigned long long)bytes);
    if (sys_fsconfig(fs, FSCONFIG_SET_STRING, "size", opt, 0) < 0 ||
        sys_fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0)
        return wr_err_sys(err, "tmpfs options");
    if (sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
        return wr_err_sys(err, "create tmpfs");
    mnt = sys_fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID);
    if (mnt < 0)
        return wr_err_sys(err, "fsmount tmpfs");
    if (mkdirat(mnt, "upper", 0755) < 0 || mkdirat(mnt, "work", 0700) < 0)
        return wr_err_sys(err, "mkdir upper/work");
    if (fchownat(mnt, "upper", host_root, host_root, 0) < 0 ||
        fchownat(mnt, "work", host_root, host_root, 0) < 0)
        return wr_err_sys(err, "chown upper/work");
    *upper = openat(mnt, "upper", O_PATH | O_DIRECTORY | O_CLOEXEC);
    *work = openat(mnt, "work", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*upper < 0 || *work < 0) {
        int e = errno;
        if (*upper >= 0)
            close(*upper);
        if (*work >= 0)
            close(*work);
        *upper = *work = -1;
        return wr_err_set(err, WR_ESYS, e, "open upper/work");
    }
    /* The detached tmpfs must stay mounted (its fd open) until overlayfs has cloned it: once
     * the last fd of a detached mount is closed, the mount is dissolved. */
    *tmnt = steal_fd(&mnt);
    return 0;
}

/* A writable layer on disk, stored with sandbox-side ids (its root 0:0): dir holds upper/ and
 * work/, and the overlay gets them through a detached clone of dir idmapped to the sandbox's
 * user namespace, so the same directory works under any uid range (a sandbox resumed from
 * disk gets a new one) and can become an image layer as it is. *dmnt keeps the clone alive
 * until overlayfs has taken its own. */
static int make_disk_upper(const char *dir, int userns_fd, int *dmnt, int *upper, int *work,
                           struct wr_err *err)
{
    _cleanup_close_ int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), mnt = -1;
    struct mount_attr attr = {
        .attr_set = (userns_fd >= 0 ? MOUNT_ATTR_IDMAP : 0) | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID,
        .userns_fd = (uint64_t)(userns_fd >= 0 ? userns_fd : 0),
    };

    if (d < 0)
        return wr_err_sys(err, "open `%s`", dir);
    if ((mkdirat(d, "upper", 0755) < 0 && errno != EEXIST) ||
        (mkdirat(d, "work", 0700) < 0 && errno != EEXIST))
        return wr_err_sys(err, "mkdir `%s`/upper,work", dir);
    mnt = sys_open_tree(d, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    if (mnt < 0)
        return wr_err_sys(err, "clone `%s`", dir);
    if (sys_mount_setattr(mnt, "", AT_EMPTY_PATH, &attr) < 0)
        return wr_err_sys(err, "idmap `%s`", dir);
    *upper = openat(mnt, "upper", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    *work = openat(mnt, "work", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*upper < 0 || *work < 0) {
        int e = errno;
        if (*upper >= 0)
            close(*upper);
        if (*work >= 0)
            close(*work);
        *upper = *work = -1;
        return wr_err_set(err, WR_ESYS, e, "open `%s`/upper,work", dir);
    }
    *dmnt = steal_fd(&mnt);
    return 0;
}

/* overlayfs does every upper operation with the credentials of the task that ran CMD_CREATE.
 * Through an idmapped upper those must be mapped, or the overlay silently comes up read-only
 * (docs/design/isolation.md): create it with fsuid/fsgid = the sandbox's host root and every
 * permitted capability effective (a non-zero fsuid drops the file capabilities). Credentials
 * are per thread, and restored before returning. */
static int create_as(int ovl, uid_t host_root, struct wr_err *err)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct data[2];
    int r = 0, e = 0;

    if (syscall(SYS_capget, &hdr, data) < 0)
        return wr_err_sys(err, "capget");
    (void)syscall(SYS_setfsgid, host_root);
    (void)syscall(SYS_setfsuid, host_root);
    for (int i = 0; i < 2; i++)
        data[i].effective = data[i].permitted;
    if (syscall(SYS_capset, &hdr, data) < 0 ||
        sys_fsconfig(ovl, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
        e = errno;
        r = -1;
    }
    (void)syscall(SYS_setfsuid, 0);
    (void)syscall(SYS_setfsgid, 0);
    if (r < 0)
        return wr_err_set(err, WR_ESYS, e, "create overlay");
    return 0;
}

void wr_rootfs_spent_close(struct wr_rootfs_spent *s)
{
    for (size_t i = 0; i < s->n; i++)
        close(s->fds[i]);
    s->n = 0;
}

int wr_rootfs_build(const char *const *layers, size_t n_layers, int userns_fd,
                    const char *upper_dir, uint64_t tmpfs_bytes, uid_t host_root, int *overlay_fd,
                    struct wr_rootfs_spent *spent, struct wr_err *err)
{
    _cleanup_close_ int ovl = -1, upper = -1, work = -1, tmnt = -1;
    int mnt, ret = -1, *lfds;

    if (n_layers == 0 || n_layers > WR_MAX_STACK)
        return wr_err_set(err, WR_EINVAL, 0, "a root stacks 1 to %d layers, not %zu", WR_MAX_STACK,
                          n_layers);
    ovl = sys_fsopen("overlay", FSOPEN_CLOEXEC);
    if (ovl < 0)
        return wr_err_sys(err, "fsopen overlay");
    lfds = xmalloc(n_layers * sizeof(int));
    for (size_t i = 0; i < n_layers; i++)
        lfds[i] = -1;

    /* lowerdir+ stacks downwards: the first one given is the topmost layer. Each layer is a
     * detached clone idmapped to the sandbox's user namespace, so root-owned image files show
     * as owned by the sandbox's root while the directory on disk stays shared and unchanged.
     * The clone is read-only; overlayfs takes a private copy of it at CMD_CREATE (so the clone
     * must stay open until then: closing the last fd of a detached mount dissolves it) and the
     * caller closes ours (*spent), so no process in the sandbox ever holds a handle on the
     * layer itself, whose read-only flag it could clear. */
    for (size_t i = n_layers; i-- > 0;) {
        struct mount_attr attr = {
            .attr_set = (userns_fd >= 0 ? MOUNT_ATTR_IDMAP : 0) | MOUNT_ATTR_RDONLY |
                        MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID,
            .userns_fd = (uint64_t)(userns_fd >= 0 ? userns_fd : 0),
        };
        int lfd = sys_open_tree(AT_FDCWD, layers[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);

        if (lfd < 0) {
            wr_err_sys(err, "open layer `%s`", layers[i]);
            goto out;
        }
        lfds[i] = lfd;
        if (sys_mount_setattr(lfd, "", AT_EMPTY_PATH, &attr) < 0) {
            wr_err_sys(err, "idmap layer `%s`", layers[i]);
            goto out;
        }
        if (sys_fsconfig(ovl, FSCONFIG_SET_FD, "lowerdir+", NULL, lfd) < 0) {
            wr_err_sys(err, "add layer `%s`", layers[i]);
            goto out;
        }
    }

    if (upper_dir == NULL) {
        if (make_tmpfs_upper(tmpfs_bytes ? tmpfs_bytes : (1ull << 30), host_root, &tmnt, &upper,
                             &work, err) < 0) {
            wr_err_wrap(err, "writable layer");
            goto out;
        }
    } else if (make_disk_upper(upper_dir, userns_fd, &tmnt, &upper, &work, err) < 0) {
        wr_err_wrap(err, "writable layer");
        goto out;
    }
    if (sys_fsconfig(ovl, FSCONFIG_SET_FD, "upperdir", NULL, upper) < 0 ||
        sys_fsconfig(ovl, FSCONFIG_SET_FD, "workdir", NULL, work) < 0) {
        wr_err_sys(err, "overlay upper/work");
        goto out;
    }
    if (upper_dir != NULL && userns_fd >= 0
            ? create_as(ovl, host_root, err) < 0
            : sys_fsconfig(ovl, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
        if (upper_dir == NULL || userns_fd < 0)
            wr_err_sys(err, "create overlay");
        goto out;
    }
    mnt = sys_fsmount(ovl, FSMOUNT_CLOEXEC, 0);
    if (mnt < 0) {
        wr_err_sys(err, "fsmount overlay");
        goto out;
    }
    *overlay_fd = mnt;
    spent->n = 0;
    for (size_t i = 0; i < n_layers; i++)
        spent->fds[spent->n++] = steal_fd(&lfds[i]);
    spent->fds[spent->n++] = steal_fd(&tmnt);
    ret = 0;
out:
    for (size_t i = 0; i < n_layers; i++)
        if (lfds[i] >= 0)
            close(lfds[i]);
    free(lfds);
    return ret;
}

/* ---- volumes and other host directories ---------------------------------------------------- */

int wr_mount_target_check(const char *t, struct wr_err *err)
{
    static const char *const banned[] = {"/proc", "/sys", "/dev"};
    size_t n = t ? strlen(t) : 0;

    if (n == 0 || t[0] != '/')
        return wr_err_set(err, WR_EINVAL, 0, "mount path `%s` must be absolute", t ? t : "");
    if (n > WR_MOUNT_TARGET_MAX)
        return wr_err_set(err, WR_EINVAL, 0, "mount path is longer than %d bytes",
                          WR_MOUNT_TARGET_MAX);
    if (n == 1)
        return wr_err_set(err, WR_EINVAL, 0, "a volume cannot be mounted at `/`");
    for (const char *p = t + 1;;) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);

        if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return wr_err_set(err, WR_EINVAL, 0,
                              "mount path `%s` must have no empty, `.` or `..` component", t);
        if (e == NULL)
            break;
        p = e + 1;
    }
    /* Strictly below /dev/shm is fine: a tmpfs of the sandbox's own, whose mount points are in
     * no layer (the build context of a template build is mounted there). */
    if (strncmp(t, "/dev/shm/", 9) == 0)
        return 0;
    for (size_t i = 0; i < WR_ARRAY_SIZE(banned); i++) {
        size_t b = strlen(banned[i]);
        if (strncmp(t, banned[i], b) == 0 && (t[b] == '\0' || t[b] == '/'))
            return wr_err_set(err, WR_EINVAL, 0, "a volume cannot be mounted at or below %s",
                              banned[i]);
    }
    return 0;
}

/* a is b or an ancestor of b. */
static bool path_covers(const char *a, const char *b)
{
    size_t n = strlen(a);
    return strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '/');
}

int wr_mounts_check(const struct wr_mount_spec *m, size_t n, struct wr_err *err)
{
    if (n > WR_MAX_MOUNTS)
        return wr_err_set(err, WR_EINVAL, 0, "at most %d volumes per sandbox, not %zu",
                          WR_MAX_MOUNTS, n);
    for (size_t i = 0; i < n; i++) {
        if (wr_mount_target_check(m[i].target, err) < 0)
            return -1;
        for (size_t j = 0; j < i; j++)
            if (path_covers(m[j].target, m[i].target) || path_covers(m[i].target, m[j].target))
                return wr_err_set(err, WR_EINVAL, 0, "mount paths `%s` and `%s` overlap",
                                  m[j].target, m[i].target);
    }
    return 0;
}

int wr_mounts_build(const struct wr_mount_spec *mounts, size_t n, int userns_fd, int *fds,
                    struct wr_err *err)
{
    for (size_t i = 0; i < n; i++)
        fds[i] = -1;
    for (size_t i = 0; i < n; i++) {
        /* No MOUNT_ATTR_NOEXEC: programs kept on a volume run. Not recursive: a mount below the
         * directory on the host stays out of the sandbox. */
        struct mount_attr attr = {
            .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID |
                        (mounts[i].readonly ? MOUNT_ATTR_RDONLY : 0),
            .userns_fd = (uint64_t)userns_fd,
        };

        fds[i] = sys_open_tree(AT_FDCWD, mounts[i].host_dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (fds[i] < 0) {
            wr_err_sys(err, "open volume directory `%s`", mounts[i].host_dir);
            goto fail;
        }
        if (sys_mount_setattr(fds[i], "", AT_EMPTY_PATH, &attr) < 0) {
            wr_err_sys(err, "idmap volume directory `%s`", mounts[i].host_dir);
            goto fail;
        }
    }
    return 0;
fail:
    for (size_t i = 0; i < n; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
    return -1;
}

int wr_devices_check(const struct wr_device_node *d, size_t n, struct wr_err *err)
{
    if (n > WR_MAX_DEVICE_NODES)
        return wr_err_set(err, WR_EINVAL, 0, "at most %d device nodes per sandbox, not %zu",
                          WR_MAX_DEVICE_NODES, n);
    for (size_t i = 0; i < n; i++) {
        const char *p = d[i].path;
        if (p == NULL || strncmp(p, "/dev/", 5) != 0 || strlen(p) > WR_DEVICE_PATH_MAX ||
            p[strlen(p) - 1] == '/' || strstr(p, "//") != NULL || strstr(p, "/./") != NULL ||
            strstr(p, "/../") != NULL || path_covers("/dev/pts", p) || path_covers("/dev/shm", p) ||
            strcmp(p + strlen(p) - 2, "/.") == 0 || strcmp(p + strlen(p) - 3, "/..") == 0)
            return wr_err_set(err, WR_EINVAL, 0,
                              "device node `%s`: a path below /dev/ (not /dev/pts or /dev/shm), "
                              "at most %d bytes",
                              p ? p : "", WR_DEVICE_PATH_MAX);
        if ((d[i].type != 'c' && d[i].type != 'b') || d[i].uid >= WR_UID_RANGE ||
            d[i].gid >= WR_UID_RANGE || strspn(d[i].access, "rwm") != strlen(d[i].access))
            return wr_err_set(err, WR_EINVAL, 0, "device node `%s`: bad type, owner or access", p);
        for (size_t j = 0; j < i; j++)
            if (strcmp(d[j].path, p) == 0)
                return wr_err_set(err, WR_EINVAL, 0, "device node `%s` is given twice", p);
    }
    return 0;
}

int wr_binds_check(const struct wr_bind_spec *b, size_t n, struct wr_err *err)
{
    if (n > WR_MAX_BINDS)
        return wr_err_set(err, WR_EINVAL, 0, "at most %d host mounts per sandbox, not %zu",
                          WR_MAX_BINDS, n);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (wr_mount_target_check(b[i].target, err) < 0)
            return -1;
        if (b[i].host_path == NULL || b[i].host_path[0] != '/' || stat(b[i].host_path, &st) < 0 ||
            (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)))
            return wr_err_set(err, WR_EINVAL, errno,
                              "host mount `%s`: not an absolute path to a directory or a file",
                              b[i].host_path ? b[i].host_path : "");
        for (size_t j = 0; j < i; j++)
            if (strcmp(b[j].target, b[i].target) == 0)
                return wr_err_set(err, WR_EINVAL, 0, "mount path `%s` is given twice", b[i].target);
    }
    return 0;
}

int wr_symlinks_check(const struct wr_symlink_spec *l, size_t n, struct wr_err *err)
{
    if (n > WR_MAX_SYMLINKS)
        return wr_err_set(err, WR_EINVAL, 0, "at most %d symbolic links per sandbox, not %zu",
                          WR_MAX_SYMLINKS, n);
    for (size_t i = 0; i < n; i++) {
        if (wr_mount_target_check(l[i].link, err) < 0)
            return wr_err_wrap(err, "symbolic link");
        if (l[i].target == NULL || l[i].target[0] == '\0' ||
            strlen(l[i].target) > WR_MOUNT_TARGET_MAX)
            return wr_err_set(err, WR_EINVAL, 0, "symbolic link `%s`: bad target", l[i].link);
    }
    return 0;
}

static bool inner_source_special(const char *src)
{
    return strcmp(src, "/proc") == 0 || strcmp(src, "/dev") == 0 || strcmp(src, "/sys") == 0;
}

int wr_inner_binds_check(const struct wr_inner_bind *b, size_t n, struct wr_err *err)
{
    if (n > WR_MAX_INNER_BINDS)
        return wr_err_set(err, WR_EINVAL, 0, "at most %d binds in a sandbox, not %zu",
                          WR_MAX_INNER_BINDS, n);
    for (size_t i = 0; i < n; i++) {
        if (b[i].src == NULL ||
            (!inner_source_special(b[i].src) && wr_mount_target_check(b[i].src, err) < 0))
            return wr_err_wrap(err, "bind source");
        if (wr_mount_target_check(b[i].dst, err) < 0)
            return wr_err_wrap(err, "bind `%s`", b[i].src);
    }
    return 0;
}

int wr_binds_build(const struct wr_bind_spec *b, size_t n, int *fds, unsigned char *is_dir,
                   struct wr_err *err)
{
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};

    for (size_t i = 0; i < n; i++)
        fds[i] = -1;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if ((fds[i] = sys_open_tree(AT_FDCWD, b[i].host_path,
                                    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)) < 0 ||
            sys_mount_setattr(fds[i], "", AT_EMPTY_PATH, &attr) < 0 || fstat(fds[i], &st) < 0) {
            wr_err_sys(err, "host mount `%s`", b[i].host_path);
            for (size_t j = 0; j <= i; j++)
                if (fds[j] >= 0) {
                    close(fds[j]);
                    fds[j] = -1;
                }
            return -1;
        }
        is_dir[i] = S_ISDIR(st.st_mode);
    }
    return 0;
}

int wr_device_mounts_build(const struct wr_device_node *d, size_t n, uid_t uid_base, int *fds,
                           struct wr_err *err)
{
    _cleanup_close_ int fs = -1, mnt = -1;

    for (size_t i = 0; i < n; i++)
        fds[i] = -1;
    if (n == 0)
        return 0;
    /* Made by the host's root, so its device nodes open (a filesystem mounted inside a user
     * namespace would be nodev whatever its flags); nosuid, noexec; never attached anywhere of
     * the host's. */
    fs = sys_fsopen("tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0 || sys_fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 ||
        sys_fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0700", 0) < 0 ||
        sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
        (mnt = sys_fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC)) < 0)
        return wr_err_sys(err, "make a tmpfs for device nodes");
    for (size_t i = 0; i < n; i++) {
        char name[24];
        mode_t type = d[i].type == 'b' ? S_IFBLK : S_IFCHR;
        snprintf(name, sizeof(name), "%zu", i);
        if (mknodat(mnt, name, type | 0600, makedev(d[i].major, d[i].minor)) < 0 ||
            fchownat(mnt, name, uid_base + d[i].uid, uid_base + d[i].gid, 0) < 0 ||
            fchmodat(mnt, name, d[i].mode & 0777, 0) < 0 ||
            (fds[i] = sys_open_tree(mnt, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)) < 0) {
            wr_err_sys(err, "device node `%s`", d[i].path);
            for (size_t j = 0; j <= i; j++)
                if (fds[j] >= 0) {
                    close(fds[j]);
                    fds[j] = -1;
                }
            return -1;
        }
    }
    return 0;
}

/* ---- child side: async-signal-safe from here on ------------------------------------------ */

#define TRY(expr, what)                                                                            \
    do {                                                                                           \
        if ((expr) < 0) {                                                                          \
            *step = (what);                                                                        \
            return -errno;                                                                         \
        }                                                                                          \
    } while (0)

/* Format "size=N,mode=M" without stdio. */
static void tmpfs_opts(char *buf, size_t sz, uint64_t bytes, const char *mode)
{
    char digits[24];
    size_t n = 0, o = 0;

    do {
        digits[n++] = (char)('0' + bytes % 10);
        bytes /= 10;
    } while (bytes && n < sizeof(digits));
    for (const char *p = "size="; *p && o + 1 < sz; p++)
        buf[o++] = *p;
    while (n && o + 1 < sz)
        buf[o++] = digits[--n];
    for (const char *p = ",mode="; *p && o + 1 < sz; p++)
        buf[o++] = *p;
    for (const char *p = mode; *p && o + 1 < sz; p++)
        buf[o++] = *p;
    buf[o] = '\0';
}

static int bind_dev(const char *name, const char **step)
{
    char host[32] = "/dev/", dst[32] = "dev/";

    strcat(host, name);
    strcat(dst, name);
    /* mknod of a regular file needs no privilege: one syscall for the bind target. */
    TRY(mknod(dst, S_IFREG | 0666, 0), "create device node target");
    TRY(mount(host, dst, NULL, MS_BIND, NULL), "bind device node");
    return 0;
}

/* A device node's mount (wr_device_mounts_build) at path (/dev/..., checked), over an empty
 * file made for it on the sandbox's /dev, with the directories above it. */
static int attach_dev(int fd, const char *path, const char **step)
{
    char rel[WR_DEVICE_PATH_MAX + 1];
    size_t n = 0;

    for (const char *p = path + 1; *p && n + 1 < sizeof(rel); p++) {
        if (*p == '/') {
            rel[n] = '\0';
            if (mkdir(rel, 0755) < 0 && errno != EEXIST) {
                *step = "create a device node's directory";
                return -1;
            }
        }
        rel[n++] = *p;
    }
    rel[n] = '\0';
    if (mknod(rel, S_IFREG | 0600, 0) < 0 && errno != EEXIST) {
        *step = "create a device node's mount point";
        return -1;
    }
    TRY(syscall(SYS_move_mount, fd, "", AT_FDCWD, rel, MOVE_MOUNT_F_EMPTY_PATH),
        "attach a device node");
    close(fd);
    return 0;
}

/* Hide a path: an empty read-only tmpfs over a directory, /dev/null over a file. Paths this
 * kernel does not have are skipped (ENOENT from the mount itself: no separate stat). The first
 * directory masked gets the tmpfs and the others a bind of it (*dir_mask, the path of the
 * first, or NULL): one superblock, not one each. Every superblock costs each memory cgroup on
 * the host bookkeeping of its own (docs/design/density.md), so a sandbox makes as few as it
 * can. */
static int mask_path(const char *path, bool dir, const char **dir_mask, const char **step)
{
    int r;

    if (!dir)
        r = mount("dev/null", path, NULL, MS_BIND, NULL);
    else if (*dir_mask != NULL) /* read-only as a mount too, not only through its superblock */
        r = mount(*dir_mask, path, NULL, MS_BIND, NULL) < 0
                ? -1
                : mount(NULL, path, NULL,
                        MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    else if ((r = mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                        "size=4k,mode=0555")) == 0)
        *dir_mask = path;
    if (r < 0 && errno != ENOENT) {
        *step = dir ? "mask directory" : "mask file";
        return -1;
    }
    return 0;
}

static int readonly_path(const char *path, const char **step)
{
    if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) < 0) {
        if (errno == ENOENT)
            return 0;
        *step = "bind read-only path";
        return -1;
    }
    TRY(mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              NULL),
        "remount read-only path");
    return 0;
}

/* Mount on dir, creating it only if the image lacks it (most images have it: no extra call). */
static int mount_at(const char *src, const char *dir, const char *type, unsigned long flags,
                    const char *data, mode_t mode)
{
    if (mount(src, dir, type, flags, data) == 0)
        return 0;
    if (errno != ENOENT || mkdir(dir, mode) < 0)
        return -1;
    return mount(src, dir, type, flags, data);
}

int wr_mount_point_open(int root_fd, const char *target, const char **step)
{
    char buf[WR_MOUNT_TARGET_MAX + 1];
    size_t n = strlen(target);
    int dfd, ret;

    if (n > WR_MOUNT_TARGET_MAX || target[0] != '/') {
        *step = "volume path";
        return -EINVAL;
    }
    memcpy(buf, target, n + 1);
    dfd = openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        *step = "open new root";
        return -errno;
    }
    for (char *p = buf + 1, *e; p != NULL; p = e) {
        int nfd;

        e = strchr(p, '/');
        if (e != NULL)
            *e++ = '\0';
        if (p[0] == '\0' || strcmp(p, ".") == 0 || strcmp(p, "..") == 0) {
            close(dfd);
            *step = "volume path";
            return -EINVAL;
        }
        if (mkdirat(dfd, p, 0755) < 0 && errno != EEXIST) {
            ret = -errno;
            close(dfd);
            *step = "create volume mount point";
            return ret;
        }
        /* O_NOFOLLOW on a symbolic link opens the link itself, and O_DIRECTORY then refuses
         * it (ENOTDIR). */
        nfd = openat(dfd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        ret = -errno;
        close(dfd);
        if (nfd < 0) {
            *step = "open volume mount point";
            return ret;
        }
        dfd = nfd;
    }
    return dfd;
}

/* An O_PATH fd of the directory of path (absolute, checked) from the new root (the current
 * directory), made as a volume's mount point is, never through a symbolic link; *name its last
 * component. -errno with *step. */
static int parent_open(const char *path, const char **name, const char **step)
{
    char parent[WR_MOUNT_TARGET_MAX + 1];
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    int dfd;

    if (slash == NULL || n >= sizeof(parent) || slash[1] == '\0') {
        *step = "mount point path";
        return -EINVAL;
    }
    memcpy(parent, path, n);
    parent[n] = '\0';
    *name = slash + 1;
    if (n > 0)
        return wr_mount_point_open(AT_FDCWD, parent, step);
    dfd = openat(AT_FDCWD, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        *step = "open new root";
    return dfd < 0 ? -errno : dfd;
}

/* Walk to the directory of target from the new root (the current directory) and attach the
 * mount fd of a file on an empty file made there (or the regular file there), never through a
 * symbolic link. */
static int attach_file_at(int mnt_fd, const char *target, const char **step)
{
    const char *name;
    struct stat st;
    int dfd = parent_open(target, &name, step), fd, ret;

    if (dfd < 0)
        return dfd;
    if (mknodat(dfd, name, S_IFREG | 0644, 0) < 0 && errno != EEXIST) {
        ret = -errno;
        close(dfd);
        *step = "create host mount point";
        return ret;
    }
    fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    ret = -errno;
    close(dfd);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        *step = "open host mount point (a regular file)";
        return fd < 0 ? ret : -ENOTDIR;
    }
    ret = (int)syscall(SYS_move_mount, mnt_fd, "", fd, "",
                       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
    if (ret < 0) {
        ret = -errno;
        *step = "attach host mount";
    }
    close(fd);
    return ret;
}

/* A symbolic link at link (absolute, checked) to target, from the new root (the current
 * directory), the directories above it made as a volume's; one that exists is left. */
static int make_link(const char *target, const char *link, const char **step)
{
    const char *name;
    int dfd = parent_open(link, &name, step), ret = 0;

    if (dfd < 0)
        return dfd;
    if (symlinkat(target, dfd, name) < 0 && errno != EEXIST) {
        ret = -errno;
        *step = "create a device's symbolic link";
    }
    close(dfd);
    return ret;
}

/* Walk to target from the new root (the current directory) and attach the mount fd there. */
static int attach_at(int mnt_fd, const char *target, const char **step)
{
    int dfd = wr_mount_point_open(AT_FDCWD, target, step), ret;

    if (dfd < 0)
        return dfd;
    ret = (int)syscall(SYS_move_mount, mnt_fd, "", dfd, "",
                       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
    if (ret < 0) {
        ret = -errno;
        *step = "attach volume";
    }
    close(dfd);
    return ret;
}

int wr_inner_binds_make(const char *const *src, const char *const *dst, const unsigned char *ro,
                        size_t n, const char **step)
{
    for (size_t i = 0; i < n; i++) {
        struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY};
        struct stat st;
        int sfd, mnt, ret;

        if (inner_source_special(src[i])) {
            sfd = open(src[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sfd < 0) {
                *step = "open a bind's source";
                return -errno;
            }
        } else if ((sfd = wr_mount_point_open(AT_FDCWD, src[i], step)) < 0) {
            return sfd;
        }
        mnt = sys_open_tree(sfd, "",
                            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
        ret = -errno;
        if (mnt >= 0 && fstat(sfd, &st) < 0)
            ret = -errno;
        close(sfd);
        if (mnt < 0) {
            *step = "clone a bind's source";
            return ret;
        }
        if (ro[i] && sys_mount_setattr(mnt, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr) < 0) {
            ret = -errno;
            close(mnt);
            *step = "make a bind read-only";
            return ret;
        }
        ret =
            S_ISDIR(st.st_mode) ? attach_at(mnt, dst[i], step) : attach_file_at(mnt, dst[i], step);
        close(mnt);
        if (ret < 0)
            return ret;
    }
    return 0;
}

int wr_sysfs_build(int netns_fd, struct wr_err *err)
{
    _cleanup_close_ int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    _cleanup_close_ int fs = -1;
    int mnt = -1, e = 0;

    if (self < 0)
        return wr_err_sys(err, "open this thread's netns");
    if (setns(netns_fd, CLONE_NEWNET) < 0)
        return wr_err_sys(err, "enter the sandbox's netns");
    /* sysfs takes the namespace of whoever makes the superblock */
    fs = sys_fsopen("sysfs", FSOPEN_CLOEXEC);
    if (fs < 0 || sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
        (mnt = sys_fsmount(fs, FSMOUNT_CLOEXEC,
                           MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                               MOUNT_ATTR_NOEXEC)) < 0)
        e = errno;
    if (setns(self, CLONE_NEWNET) < 0)
        abort(); /* a thread left in a sandbox's netns must not go on */
    if (e != 0) {
        errno = e;
        return wr_err_sys(err, "make a sysfs for the sandbox's netns");
    }
    return mnt;
}

int wr_rootfs_enter(int overlay_fd, int sysfs_fd, const struct wr_rootfs_mounts *mounts,
                    const char *stage, uint64_t shm_bytes, const char **step)
{
    static const char *const devs[] = {"null", "zero", "full", "random", "urandom", "tty"};
    static const struct {
        const char *path;
        bool dir;
    } masked[] = {
        {"proc/kcore", false},
        {"proc/keys", false},
        {"proc/timer_list", false},
        {"proc/sched_debug", false},
        {"proc/latency_stats", false},
        {"proc/timer_stats", false},
        {"proc/acpi", true},
        {"proc/scsi", true},
        {"proc/asound", true},
        {"sys/firmware", true},
        {"sys/devices/virtual/powercap", true},
    };
    static const char *const readonly[] = {
        "proc/sys", "proc/sysrq-trigger", "proc/irq", "proc/bus", "proc/fs",
    };
    const char *dir_mask = NULL;
    char opts[64];

    /* Nothing we mount may propagate back to the host's namespace. */
    TRY(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), "make mounts private");
    TRY(syscall(SYS_move_mount, overlay_fd, "", AT_FDCWD, stage, MOVE_MOUNT_F_EMPTY_PATH),
        "attach root overlay");
    TRY(chdir(stage), "enter new root");

    /* Everything below is relative to the new root. */
    TRY(mount_at("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, 0555),
        "mount /proc");
    if (sysfs_fd >= 0) {
        TRY(mkdir("sys", 0555) == 0 || errno == EEXIST ? 0 : -1, "mkdir /sys");
        TRY(syscall(SYS_move_mount, sysfs_fd, "", AT_FDCWD, "sys", MOVE_MOUNT_F_EMPTY_PATH),
            "attach /sys");
        close(sysfs_fd);
    } else {
        TRY(mount_at("sysfs", "sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL,
                     0555),
            "mount /sys");
    }

    /* One tmpfs for /dev and /dev/shm (a directory of it): a superblock fewer (mask_path).
     * Its size is /dev/shm's share of the memory limit, and 64 KiB for the rest of /dev. */
    tmpfs_opts(opts, sizeof(opts), shm_bytes + 65536, "755");
    TRY(mount_at("tmpfs", "dev", "tmpfs", MS_NOSUID | MS_NOEXEC, opts, 0755), "mount /dev");
    for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++)
        if (bind_dev(devs[i], step) < 0)
            return -errno;
    TRY(mkdir("dev/pts", 0755), "mkdir /dev/pts");
    /* Terminals are counted host-wide (kernel.pty.max, the host's own instance reserving
     * kernel.pty.reserve of them): max= keeps one sandbox from taking them all. */
    TRY(mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
              "newinstance,ptmxmode=0666,mode=0620,max=" STR(WR_PTYS_MAX)),
        "mount /dev/pts");
    TRY(symlink("pts/ptmx", "dev/ptmx"), "link /dev/ptmx");
    TRY(mkdir("dev/shm", 01777), "mkdir /dev/shm");
    TRY(chmod("dev/shm", 01777), "chmod /dev/shm"); /* mkdir applied the umask */
    TRY(symlink("/proc/self/fd", "dev/fd"), "link /dev/fd");
    TRY(symlink("/proc/self/fd/0", "dev/stdin"), "link /dev/stdin");
    TRY(symlink("/proc/self/fd/1", "dev/stdout"), "link /dev/stdout");
    TRY(symlink("/proc/self/fd/2", "dev/stderr"), "link /dev/stderr");
    for (size_t i = 0; mounts != NULL && i < mounts->n_devs; i++)
        if (attach_dev(mounts->dev_fds[i], mounts->dev_paths[i], step) < 0)
            return -errno;

    /* /tmp is the writable layer's, as in Docker: a disk fills or hits its limit, and it is
     * kept by snapshots, forks and pause to disk. A tmpfs would be charged to the memory limit
     * without belonging to any process (its writer would not be the OOM killer's choice). */
    if (mkdir("tmp", 01777) == 0)
        TRY(chmod("tmp", 01777), "chmod /tmp"); /* mkdir applied the umask */
    else if (errno != EEXIST)
        TRY(-1, "create /tmp");

    /* Volumes go on top of everything else of the root (so /tmp/x works), and their fds are
     * closed at once: nothing started in the sandbox can hold one (pitfall P2). */
    for (size_t i = 0; mounts != NULL && i < mounts->n; i++) {
        int r = attach_at(mounts->fds[i], mounts->targets[i], step);
        if (r < 0)
            return r;
        close(mounts->fds[i]);
    }
    for (size_t i = 0; mounts != NULL && i < mounts->n_binds; i++) {
        int r = mounts->bind_dirs[i]
                    ? attach_at(mounts->bind_fds[i], mounts->bind_targets[i], step)
                    : attach_file_at(mounts->bind_fds[i], mounts->bind_targets[i], step);
        if (r < 0)
            return r;
        close(mounts->bind_fds[i]);
    }
    for (size_t i = 0; mounts != NULL && i < mounts->n_links; i++) {
        int r = make_link(mounts->link_targets[i], mounts->links[i], step);
        if (r < 0)
            return r;
    }

    for (size_t i = 0; i < sizeof(masked) / sizeof(masked[0]); i++)
        if (mask_path(masked[i].path, masked[i].dir, &dir_mask, step) < 0)
            return -errno;
    for (size_t i = 0; i < sizeof(readonly) / sizeof(readonly[0]); i++)
        if (readonly_path(readonly[i], step) < 0)
            return -errno;

    /* pivot_root(".", ".") stacks the old root on top of the new one; detaching it leaves only
     * the sandbox's tree. */
    TRY(syscall(SYS_pivot_root, ".", "."), "pivot_root");
    TRY(umount2(".", MNT_DETACH), "detach old root");
    TRY(chdir("/"), "chdir /");
    return 0;
}
