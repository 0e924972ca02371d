/* SPDX-License-Identifier: Apache-2.0 */
/* Layer directories: probe, capture (btrfs snapshot or copy), digest, seal, remove. */
#include "layer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/btrfs.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/walk.h"
#include "../util/xalloc.h"

#ifndef XFS_SUPER_MAGIC
#define XFS_SUPER_MAGIC 0x58465342
#endif
#define BTRFS_FIRST_SUBVOL_INO 256

const char *wr_fs_kind_name(enum wr_fs_kind kind)
{
    switch (kind) {
    case WR_FS_BTRFS:
        return "btrfs";
    case WR_FS_XFS:
        return "xfs";
    case WR_FS_EXT4:
        return "ext4";
    case WR_FS_TMPFS:
        return "tmpfs";
    default:
        return "other";
    }
}

const char *wr_fs_capture_name(const struct wr_fs_info *info)
{
    if (info->subvolumes)
        return "btrfs-snapshot";
    return info->reflink ? "reflink-copy" : "copy";
}

/* Split path into its parent directory (opened) and last component. */
static int open_parent(const char *path, char **base, struct wr_err *err)
{
    _cleanup_free_ char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    int fd;

    if (slash == NULL || slash[1] == '\0')
        return wr_err_set(err, WR_EINVAL, 0, "`%s` is not an absolute path to an entry", path);
    *base = xstrdup(slash + 1);
    if (slash == dir)
        slash[1] = '\0';
    else
        *slash = '\0';
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        free(*base);
        *base = NULL;
        return wr_err_sys(err, "open `%s`", dir);
    }
    return fd;
}

static bool can_reflink(const char *dir)
{
    _cleanup_free_ char *a = xasprintf("%s/.reflink-probe-a", dir);
    _cleanup_free_ char *b = xasprintf("%s/.reflink-probe-b", dir);
    _cleanup_close_ int fa = open(a, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    _cleanup_close_ int fb = open(b, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = false;

    if (fa >= 0 && fb >= 0 && wr_write_all(fa, "reflink", 7) == 0)
        ok = ioctl(fb, FICLONE, fa) == 0;
    unlink(a);
    unlink(b);
    return ok;
}

int wr_fs_probe(const char *dir, struct wr_fs_info *info, struct wr_err *err)
{
    struct statfs sf;

    if (statfs(dir, &sf) < 0)
        return wr_err_sys(err, "statfs `%s`", dir);
    *info = (struct wr_fs_info){.kind = WR_FS_OTHER};
    switch ((unsigned long)sf.f_type) {
    case BTRFS_SUPER_MAGIC:
        info->kind = WR_FS_BTRFS;
        info->subvolumes = true;
        break;
    case XFS_SUPER_MAGIC:
        info->kind = WR_FS_XFS;
        break;
    case EXT4_SUPER_MAGIC:
        info->kind = WR_FS_EXT4;
        break;
    case TMPFS_MAGIC:
        info->kind = WR_FS_TMPFS;
        break;
    }
    info->reflink = can_reflink(dir);
    return 0;
}

static bool is_subvolume(int fd)
{
    struct statfs sf;
    struct stat st;

    return fstatfs(fd, &sf) == 0 && (unsigned long)sf.f_type == BTRFS_SUPER_MAGIC &&
           fstat(fd, &st) == 0 && st.st_ino == BTRFS_FIRST_SUBVOL_INO;
}

static int set_name(char *dst, size_t size, const char *name, struct wr_err *err)
{
    if (strlen(name) >= size)
        return wr_err_set(err, WR_EINVAL, 0, "name `%s` is too long for btrfs", name);
    strcpy(dst, name);
    return 0;
}

int wr_layer_home_create(const char *path, const struct wr_fs_info *info, struct wr_err *err)
{
    _cleanup_free_ char *base = NULL;
    _cleanup_close_ int pfd = -1;

    if (!info->subvolumes) {
        if (mkdir(path, 0700) < 0)
            return wr_err_sys(err, "mkdir `%s`", path);
        return 0;
    }
    pfd = open_parent(path, &base, err);
    if (pfd < 0)
        return -1;
    struct btrfs_ioctl_vol_args args = {0};
    if (set_name(args.name, sizeof(args.name), base, err) < 0)
        return -1;
    if (ioctl(pfd, BTRFS_IOC_SUBVOL_CREATE, &args) < 0)
        return wr_err_sys(err, "create subvolume `%s`", path);
    if (chmod(path, 0700) < 0) {
        int e = errno;
        (void)wr_layer_remove(path, NULL);
        return wr_err_set(err, WR_ESYS, e, "chmod `%s`", path);
    }
    return 0;
}

/* ---- copying a tree ------------------------------------------------------------------------ */

/* overlayfs keeps its own bookkeeping in trusted.overlay.* (user.overlay.* with userxattr);
 * only the opaque-directory mark means something in a lower layer. */
static bool private_xattr(const char *name)
{
    const char *rest = NULL;

    if (strncmp(name, "trusted.overlay.", 16) == 0)
        rest = name + 16;
    else if (strncmp(name, "user.overlay.", 13) == 0)
        rest = name + 13;
    return rest != NULL && strcmp(rest, "opaque") != 0;
}

/* The name under which the xattr calls reach the inode open at fd, whatever the fd: the f*xattr
 * calls refuse O_PATH fds (symlinks, device nodes are opened so), and the *xattrat ones are from
 * Linux 6.13. The magic link leads to the inode itself, never through a path. */
static void fd_path(char buf[32], int fd)
{
    snprintf(buf, 32, "/proc/self/fd/%d", fd);
}

/* Names of the extended attributes of the inode open at fd, NUL-separated; *n of them. */
static int list_xattrs(int fd, const char *path, char **names, size_t *n, struct wr_err *err)
{
    char at[32];
    ssize_t len;
    char *buf;

    fd_path(at, fd);
    len = listxattr(at, NULL, 0);
    *names = NULL;
    *n = 0;
    if (len < 0) {
        if (errno == ENOTSUP)
            return 0;
        return wr_err_sys(err, "list xattrs of `%s`", path);
    }
    if (len == 0)
        return 0;
    buf = xmalloc((size_t)len + 1);
    len = listxattr(at, buf, (size_t)len);
    if (len < 0) {
        free(buf);
        return wr_err_sys(err, "list xattrs of `%s`", path);
    }
    buf[len] = '\0';
    for (ssize_t i = 0; i < len; i += (ssize_t)strlen(buf + i) + 1)
        (*n)++;
    *names = buf;
    return 0;
}

/* The value of the xattr name of the inode open at fd, in a new buffer; *len its size. */
static char *get_xattr(int fd, const char *name, ssize_t *len, const char *path, struct wr_err *err)
{
    char at[32];
    char *v;

    fd_path(at, fd);
    *len = getxattr(at, name, NULL, 0);
    if (*len < 0) {
        wr_err_sys(err, "get xattr %s of `%s`", name, path);
        return NULL;
    }
    v = xmalloc((size_t)*len + 1);
    *len = getxattr(at, name, v, (size_t)*len);
    if (*len < 0) {
        wr_err_sys(err, "get xattr %s of `%s`", name, path);
        free(v);
        return NULL;
    }
    return v;
}

static int copy_xattrs(int src, int dst, const char *path, struct wr_err *err)
{
    _cleanup_free_ char *names = NULL;
    char at[32];
    size_t n;
    char *p;

    if (list_xattrs(src, path, &names, &n, err) < 0)
        return -1;
    fd_path(at, dst);
    p = names;
    for (size_t i = 0; i < n; i++, p += strlen(p) + 1) {
        if (private_xattr(p))
            continue;
        ssize_t vlen;
        _cleanup_free_ char *v = get_xattr(src, p, &vlen, path, err);
        if (v == NULL)
            return -1;
        if (setxattr(at, p, v, (size_t)vlen, 0) < 0)
            return wr_err_sys(err, "copy `%s`: set xattr %s", path, p);
    }
    return 0;
}

/* The target of the symlink open (O_PATH) at fd, whose lstat said size bytes. */
static char *read_link(int fd, off_t size, const char *path, struct wr_err *err)
{
    size_t cap = size > 0 ? (size_t)size + 1 : 256;

    for (;;) {
        char *buf = xmalloc(cap);
        ssize_t n = readlinkat(fd, "", buf, cap);
        if (n < 0) {
            free(buf);
            wr_err_sys(err, "readlink `%s`", path);
            return NULL;
        }
        if ((size_t)n < cap) {
            buf[n] = '\0';
            return buf;
        }
        free(buf);
        cap *= 2; /* grew since the lstat */
    }
}

/* Open the entry e of a walk for reading what it holds: a regular file for its bytes
 * (O_NONBLOCK: a FIFO put in its place does not hang us), anything else O_PATH; a directory is
 * the walk's own fd (not to be closed). Checks that it is still the inode e->st describes. */
static int open_entry(const struct wr_walk_ent *e, struct wr_err *err)
{
    int flags = S_ISREG(e->st.st_mode) ? O_RDONLY | O_NONBLOCK | O_NOCTTY : O_PATH;
    struct stat st;
    int fd;

    if (e->fd >= 0)
        return e->fd;
    fd = openat(e->dirfd, e->name, flags | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return wr_err_sys(err, "open `%s`", e->path);
    if (fstat(fd, &st) < 0 || st.st_ino != e->st.st_ino || st.st_dev != e->st.st_dev ||
        (st.st_mode & S_IFMT) != (e->st.st_mode & S_IFMT)) {
        (void)close(fd);
        return wr_err_set(err, WR_ECONFLICT, 0, "`%s` changed while it was read", e->path);
    }
    return fd;
}

struct copier {
    bool reflink;
    bool hardlink; /* regular files linked to the source's inode where the filesystem allows */
    int top_dfd;   /* where the copy's top is made, as top_name */
    const char *top_name;
    int *dst; /* the copy of each directory the walk is in, by depth */
    size_t ndst;
    int stage; /* .links beside the copy: a link to the first copy of each inode that has
                  several, named by its number, so that later ones link to it in
                  constant time whatever its path */
    uint64_t nstaged;
    struct wr_inodes links;
};

static int copy_data(struct copier *c, int in, int out, off_t size, const char *src,
                     struct wr_err *err)
{
    if (c->reflink && ioctl(out, FICLONE, in) == 0)
        return 0;
    while (size > 0) {
        ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)size, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return wr_err_sys(err, "copy `%s`", src);
        }
        if (n == 0)
            break;
        size -= n;
    }
    return 0;
}

/* Owner, mode, extended attributes (from src to dst, the copy's fd) and times of the copy name
 * in dfd (ours: nobody else can swap it), or of the directory dfd itself when name is NULL. The
 * xattrs come after the chown, which clears security.capability (and after the chmod, which
 * the chown's clearing of setuid makes necessary). */
static int set_meta(int dfd, const char *name, const struct stat *st, int src, int dst,
                    const char *path, struct wr_err *err)
{
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    bool self = name == NULL;

    if ((self ? fchown(dfd, st->st_uid, st->st_gid)
              : fchownat(dfd, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW)) < 0)
        return wr_err_sys(err, "copy `%s`: chown", path);
    if (!S_ISLNK(st->st_mode) &&
        (self ? fchmod(dfd, st->st_mode & 07777) : fchmodat(dfd, name, st->st_mode & 07777, 0)) < 0)
        return wr_err_sys(err, "copy `%s`: chmod", path);
    if (copy_xattrs(src, dst, path, err) < 0)
        return -1;
    if ((self ? futimens(dfd, ts) : utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW)) < 0)
        return wr_err_sys(err, "copy `%s`: set times", path);
    return 0;
}

static int copy_dir_enter(struct copier *c, const struct wr_walk_ent *e, struct wr_err *err)
{
    int pfd = e->depth > 0 ? c->dst[e->depth - 1] : c->top_dfd;
    const char *name = e->depth > 0 ? e->name : c->top_name;

    if (e->depth >= c->ndst) {
        size_t was = c->ndst;
        c->ndst = 2 * e->depth + 16;
        c->dst = xrealloc(c->dst, c->ndst * sizeof(int));
        for (size_t i = was; i < c->ndst; i++)
            c->dst[i] = -1;
    }
    if (mkdirat(pfd, name, 0700) < 0)
        return wr_err_sys(err, "copy `%s`: mkdir", e->path);
    c->dst[e->depth] = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (c->dst[e->depth] < 0)
        return wr_err_sys(err, "copy `%s`: open the copy", e->path);
    return 0;
}

/* A later link to an inode copied already (its number in *first). */
static int copy_link(struct copier *c, const struct wr_walk_ent *e, uint64_t first,
                     struct wr_err *err)
{
    char staged[24];

    snprintf(staged, sizeof(staged), "%" PRIu64, first);
    if (linkat(c->stage, staged, c->dst[e->depth - 1], e->name, 0) < 0)
        return wr_err_sys(err, "copy `%s`: link", e->path);
    return 0;
}

/* Keep the copy just made of an inode with several links at .links/<number>. */
static int stage_link(struct copier *c, const struct wr_walk_ent *e, struct wr_err *err)
{
    char staged[24];

    if (c->stage < 0) {
        if (mkdirat(c->top_dfd, ".links", 0700) < 0 ||
            (c->stage = openat(c->top_dfd, ".links", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
            return wr_err_sys(err, "copy: make .links");
    }
    snprintf(staged, sizeof(staged), "%" PRIu64, c->nstaged++);
    if (linkat(c->dst[e->depth - 1], e->name, c->stage, staged, 0) < 0)
        return wr_err_sys(err, "copy `%s`: link", e->path);
    return 0;
}

/* Anything but a directory. */
static int copy_other(struct copier *c, const struct wr_walk_ent *e, struct wr_err *err)
{
    const struct stat *st = &e->st;
    int pfd = c->dst[e->depth - 1];
    _cleanup_close_ int in = -1, out = -1;
    uint64_t first;
    bool staged = false;

    /* Read-only layers may share inodes: the link carries the content and every attribute. */
    if (c->hardlink && S_ISREG(st->st_mode) && linkat(e->dirfd, e->name, pfd, e->name, 0) == 0)
        return 0;
    if (st->st_nlink > 1) {
        if (!wr_inodes_add(&c->links, st, c->nstaged, &first))
            return copy_link(c, e, first, err);
        staged = true;
    }
    if ((in = open_entry(e, err)) < 0)
        return -1;
    if (S_ISREG(st->st_mode)) {
        out = openat(pfd, e->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
            return wr_err_sys(err, "copy `%s`: create", e->path);
        if (copy_data(c, in, out, st->st_size, e->path, err) < 0)
            return -1;
    } else if (S_ISLNK(st->st_mode)) {
        _cleanup_free_ char *target = read_link(in, st->st_size, e->path, err);
        if (target == NULL)
            return -1;
        if (symlinkat(target, pfd, e->name) < 0)
            return wr_err_sys(err, "copy `%s`: symlink", e->path);
    } else if (mknodat(pfd, e->name, st->st_mode & S_IFMT, st->st_rdev) < 0) {
        /* character and block devices (an overlay whiteout is 0:0), fifos, sockets */
        return wr_err_sys(err, "copy `%s`: mknod", e->path);
    }
    if (out < 0 && (out = openat(pfd, e->name, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
        return wr_err_sys(err, "copy `%s`: open the copy", e->path);
    if (set_meta(pfd, e->name, st, in, out, e->path, err) < 0)
        return -1;
    return staged ? stage_link(c, e, err) : 0;
}

static int copy_visit(const struct wr_walk_ent *e, void *ctx, struct wr_err *err)
{
    if (S_ISDIR(e->st.st_mode))
        return copy_dir_enter(ctx, e, err);
    if (e->depth == 0)
        return wr_err_set(err, WR_EINVAL, 0, "`%s` is not a directory", e->path);
    return copy_other(ctx, e, err);
}

/* A directory's xattrs, owner, mode and times, once its entries are in. */
static int copy_leave(const struct wr_walk_ent *e, void *ctx, struct wr_err *err)
{
    struct copier *c = ctx;
    int fd = c->dst[e->depth];
    int r = -1;

    if (set_meta(fd, NULL, &e->st, e->fd, fd, e->path, err) == 0)
        r = 0;
    (void)close(fd);
    c->dst[e->depth] = -1;
    return r;
}

/* Copy the tree at src into dfd/name (which must not exist); .links in dfd is made and removed
 * on the way. */
static int copy_tree(const char *src, int dfd, const char *name, bool reflink, bool hardlink,
                     struct wr_err *err)
{
    struct copier c = {
        .reflink = reflink, .hardlink = hardlink, .top_dfd = dfd, .top_name = name, .stage = -1};
    const struct wr_walk w = {.prefix = ".", .visit = copy_visit, .leave = copy_leave, .ctx = &c};
    int r = wr_walk_at(AT_FDCWD, src, &w, err);

    for (size_t i = 0; i < c.ndst; i++)
        if (c.dst[i] >= 0)
            (void)close(c.dst[i]);
    for (uint64_t i = 0; i < c.nstaged; i++) {
        char staged[24];
        snprintf(staged, sizeof(staged), "%" PRIu64, i);
        if (unlinkat(c.stage, staged, 0) < 0 && r == 0)
            r = wr_err_sys(err, "copy: remove .links/%s", staged);
    }
    if (c.stage >= 0) {
        (void)close(c.stage);
        if (unlinkat(dfd, ".links", AT_REMOVEDIR) < 0 && r == 0)
            r = wr_err_sys(err, "copy: remove .links");
    }
    free(c.dst);
    wr_inodes_fini(&c.links);
    return r;
}

void wr_layer_presync(const char *home, const struct wr_fs_info *info)
{
    _cleanup_close_ int fd = -1;

    if (!info->subvolumes)
        return;
    fd = open(home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0)
        (void)syncfs(fd);
}

int wr_layer_copy_tree(const char *src, const char *dst, const struct wr_fs_info *info,
                       struct wr_err *err)
{
    _cleanup_close_ int dfd = -1;

    if (mkdir(dst, 0700) < 0)
        return wr_err_sys(err, "mkdir `%s`", dst);
    dfd = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0 || copy_tree(src, dfd, "fs", info->reflink, false, err) < 0) {
        if (dfd < 0)
            wr_err_sys(err, "open `%s`", dst);
        wr_err_wrap(err, "copy `%s`", src);
        (void)wr_layer_remove(dst, NULL);
        return -1;
    }
    return 0;
}

int wr_layer_relocate(const char *src, const char *dst, const char *prefix,
                      const struct wr_fs_info *info, struct wr_err *err)
{
    char buf[PATH_MAX];
    const char *last;
    int dfd = -1, r = -1;

    if (prefix[0] != '/' || strlen(prefix) >= sizeof(buf) || strstr(prefix, "/..") != NULL ||
        strstr(prefix, "//") != NULL || prefix[strlen(prefix) - 1] == '/')
        return wr_err_set(err, WR_EINVAL, 0, "relocate: bad prefix `%s`", prefix);
    if (mkdir(dst, 0700) < 0)
        return wr_err_sys(err, "mkdir `%s`", dst);
    snprintf(buf, sizeof(buf), "%s", prefix);
    last = strrchr(buf, '/') + 1;
    dfd = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        wr_err_sys(err, "open `%s`", dst);
        goto out;
    }
    /* fs, then every directory of the prefix but its last, owned by the sandbox's root (0:0 in
     * a layer) and 0755, as an image's own directories are. */
    for (char *p = (char *)"fs", *next = buf + 1; p != NULL;) {
        int nfd;
        if (mkdirat(dfd, p, 0755) < 0 || fchmodat(dfd, p, 0755, 0) < 0) {
            wr_err_sys(err, "relocate: mkdir `%s`", p);
            goto out;
        }
        nfd = openat(dfd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0) {
            wr_err_sys(err, "relocate: open `%s`", p);
            goto out;
        }
        (void)close(dfd);
        dfd = nfd;
        p = next;
        if (p == last) {
            p = NULL;
        } else {
            next = strchr(p, '/');
            *next++ = '\0';
        }
    }
    if (copy_tree(src, dfd, last, info->reflink, true, err) < 0) {
        wr_err_wrap(err, "relocate `%s`", src);
        goto out;
    }
    r = 0;
out:
    if (dfd >= 0)
        (void)close(dfd);
    if (r < 0)
        (void)wr_layer_remove(dst, NULL);
    return r;
}

int wr_layer_capture(const char *home, const char *dst, const struct wr_fs_info *info,
                     struct wr_err *err)
{
    _cleanup_free_ char *upper = xasprintf("%s/upper", home);
    _cleanup_free_ char *base = NULL;
    _cleanup_close_ int src = -1, pfd = -1;

    src = open(home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (src < 0)
        return wr_err_sys(err, "open `%s`", home);
    if (!info->subvolumes || !is_subvolume(src))
        return wr_layer_copy_tree(upper, dst, info, err);

    pfd = open_parent(dst, &base, err);
    if (pfd < 0)
        return -1;
    struct btrfs_ioctl_vol_args_v2 args = {.fd = src};
    if (set_name(args.name, sizeof(args.name), base, err) < 0)
        return -1;
    if (ioctl(pfd, BTRFS_IOC_SNAP_CREATE_V2, &args) < 0)
        return wr_err_sys(err, "snapshot `%s`", home);
    return 0;
}

int wr_layer_capture_finish(const char *dst, struct wr_err *err)
{
    _cleanup_free_ char *from = xasprintf("%s/upper", dst);
    _cleanup_free_ char *to = xasprintf("%s/fs", dst);
    _cleanup_close_ int dfd = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;

    if (dfd < 0)
        return wr_err_sys(err, "open `%s`", dst);
    if (fstatat(dfd, "fs", &st, AT_SYMLINK_NOFOLLOW) == 0)
        return 0; /* a copy: arranged already */
    /* A snapshot holds the whole home: keep upper/ as fs/, drop overlayfs' work/. */
    wr_err_clear(err);
    if (rename(from, to) < 0 || wr_rm_rf_at(dfd, "work", err) < 0) {
        if (err->kind == WR_EOK)
            wr_err_sys(err, "arrange the snapshot `%s`", dst);
        (void)wr_layer_remove(dst, NULL);
        return -1;
    }
    return 0;
}

/* ---- digest ------------------------------------------------------------------------------- */

/* The walk is sorted (strcmp order of each directory's names) and its paths start with ".", so
 * the bytes hashed are those of the recursive walk the layer store started with: ".", "./a",
 * "./a/b" for each entry, its header, its xattrs, then its content, link target, or entries and
 * "end". Layers are keyed by this digest: any change re-keys them (tests/unit/test_layer.c pins
 * one). */

struct digester {
    EVP_MD_CTX *h;
    uint64_t *bytes;
    char *buf; /* DIGEST_BUF bytes */
};

#define DIGEST_BUF 65536

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void h_str(EVP_MD_CTX *h, const char *s)
{
    EVP_DigestUpdate(h, s, strlen(s) + 1);
}

static int digest_xattrs(EVP_MD_CTX *h, int fd, const char *path, struct wr_err *err)
{
    _cleanup_free_ char *names = NULL;
    _cleanup_free_ char **v = NULL;
    size_t n, m = 0;
    char *p;

    if (list_xattrs(fd, path, &names, &n, err) < 0)
        return -1;
    v = xcalloc(n + 1, sizeof(char *));
    p = names;
    for (size_t i = 0; i < n; i++, p += strlen(p) + 1)
        if (!private_xattr(p))
            v[m++] = p;
    qsort(v, m, sizeof(char *), cmp_str);
    for (size_t i = 0; i < m; i++) {
        ssize_t len;
        _cleanup_free_ char *val = get_xattr(fd, v[i], &len, path, err);
        char hdr[64];
        if (val == NULL)
            return -1;
        snprintf(hdr, sizeof(hdr), "x%zd", len);
        h_str(h, hdr);
        h_str(h, v[i]);
        EVP_DigestUpdate(h, val, (size_t)len);
    }
    return 0;
}

static int digest_content(struct digester *d, int fd, const struct wr_walk_ent *e,
                          struct wr_err *err)
{
    char hdr[32];
    ssize_t n;

    snprintf(hdr, sizeof(hdr), "%" PRIu64, (uint64_t)e->st.st_size);
    h_str(d->h, hdr);
    while ((n = read(fd, d->buf, DIGEST_BUF)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return wr_err_sys(err, "read `%s`", e->path);
        }
        EVP_DigestUpdate(d->h, d->buf, (size_t)n);
    }
    *d->bytes += (uint64_t)e->st.st_size;
    return 0;
}

static int digest_visit(const struct wr_walk_ent *e, void *ctx, struct wr_err *err)
{
    struct digester *d = ctx;
    const struct stat *st = &e->st;
    char hdr[160];
    int fd, r;

    snprintf(hdr, sizeof(hdr), "%o %u %u %u:%u", (unsigned)st->st_mode, (unsigned)st->st_uid,
             (unsigned)st->st_gid, major(st->st_rdev), minor(st->st_rdev));
    h_str(d->h, e->path);
    h_str(d->h, hdr);
    if ((fd = open_entry(e, err)) < 0)
        return -1;
    r = digest_xattrs(d->h, fd, e->path, err);
    if (r == 0 && S_ISREG(st->st_mode)) {
        r = digest_content(d, fd, e, err);
    } else if (r == 0 && S_ISLNK(st->st_mode)) {
        char *target = read_link(fd, st->st_size, e->path, err);
        if (target == NULL)
            r = -1;
        else
            h_str(d->h, target);
        free(target);
    }
    if (fd != e->fd)
        (void)close(fd);
    return r;
}

static int digest_leave(const struct wr_walk_ent *e, void *ctx, struct wr_err *err)
{
    h_str(((struct digester *)ctx)->h, "end");
    return 0;
}

int wr_layer_digest(const char *dir, char digest[72], uint64_t *bytes, struct wr_err *err)
{
    _cleanup_free_ char *fs = xasprintf("%s/fs", dir);
    _cleanup_free_ char *buf = xmalloc(DIGEST_BUF);
    struct digester d = {.h = EVP_MD_CTX_new(), .bytes = bytes, .buf = buf};
    const struct wr_walk w = {.flags = WR_WALK_SORTED,
                              .prefix = ".",
                              .visit = digest_visit,
                              .leave = digest_leave,
                              .ctx = &d};
    unsigned char md[32];
    unsigned int mdlen = 0;
    int r;

    if (d.h == NULL)
        return wr_err_set(err, WR_EINTERNAL, 0, "out of memory for a digest");
    *bytes = 0;
    EVP_DigestInit_ex(d.h, EVP_sha256(), NULL);
    h_str(d.h, "warren-layer-v1");
    r = wr_walk_at(AT_FDCWD, fs, &w, err);
    EVP_DigestFinal_ex(d.h, md, &mdlen);
    EVP_MD_CTX_free(d.h);
    if (r < 0)
        return wr_err_wrap(err, "digest `%s`", dir);
    strcpy(digest, "sha256:");
    for (unsigned i = 0; i < 32; i++)
        snprintf(digest + 7 + 2 * i, 3, "%02x", md[i]);
    return 0;
}

int wr_layer_seal(const char *dir, struct wr_err *err)
{
    _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    uint64_t flags = BTRFS_SUBVOL_RDONLY;

    if (fd < 0)
        return wr_err_sys(err, "open `%s`", dir);
    if (!is_subvolume(fd))
        return 0;
    if (ioctl(fd, BTRFS_IOC_SUBVOL_SETFLAGS, &flags) < 0)
        return wr_err_sys(err, "make `%s` read-only", dir);
    return 0;
}

int wr_layer_unseal(const char *dir, struct wr_err *err)
{
    _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    uint64_t flags = 0;

    if (fd < 0)
        return wr_err_sys(err, "open `%s`", dir);
    if (!is_subvolume(fd))
        return 0;
    if (ioctl(fd, BTRFS_IOC_SUBVOL_SETFLAGS, &flags) < 0)
        return wr_err_sys(err, "make `%s` writable", dir);
    return 0;
}

/* ---- removal ------------------------------------------------------------------------------- */

/* Delete the subvolume name in dfd: in constant time, whatever it holds, unless it holds
 * subvolumes of its own (ENOTEMPTY). -1 with errno. */
static int destroy_subvolume(int dfd, const char *name)
{
    struct btrfs_ioctl_vol_args args = {0};

    if (strlen(name) >= sizeof(args.name)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(args.name, name);
    return ioctl(dfd, BTRFS_IOC_SNAP_DESTROY, &args);
}

static bool remove_as_subvolume(const struct wr_walk_ent *e)
{
    return e->crossed || (e->depth == 0 && is_subvolume(e->fd));
}

static int remove_visit(const struct wr_walk_ent *e, void *ctx, struct wr_err *err)
{
    uint64_t flags = 0;

    if (!S_ISDIR(e->st.st_mode)) {
        if (unlinkat(e->dirfd, e->name, 0) < 0 && errno != ENOENT)
            return wr_err_sys(err, "unlink `%s`", e->path);
        return 0;
    }
    if (e->crossed && !is_subvolume(e->fd))
        return wr_err_set(err, WR_ECONFLICT, 0, "`%s` is on another filesystem", e->path);
    if (!remove_as_subvolume(e))
        return 0;
    /* Writable again (a sealed layer), so that what it holds can be removed from it. */
    (void)ioctl(e->fd, BTRFS_IOC_SUBVOL_SETFLAGS, &flags);
    if (destroy_subvolume(e->dirfd, e->name) == 0)
        return WR_WALK_SKIP;
    if (errno != ENOTEMPTY)
        return wr_err_sys(err, "delete subvolume `%s`", e->path);
    return 0; /* its subvolumes first */
}

static int remove_leave(const struct wr_walk_ent *e, void *ctx, struct wr_err *err)
{
    if (remove_as_subvolume(e)) {
        if (destroy_subvolume(e->dirfd, e->name) < 0 && errno != ENOENT)
            return wr_err_sys(err, "delete subvolume `%s`", e->path);
    } else if (unlinkat(e->dirfd, e->name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
        return wr_err_sys(err, "rmdir `%s`", e->path);
    }
    return 0;
}

int wr_layer_remove(const char *dir, struct wr_err *err)
{
    const struct wr_walk w = {.flags = WR_WALK_REMOVE | WR_WALK_CROSS | WR_WALK_MISSING_OK,
                              .prefix = dir,
                              .visit = remove_visit,
                              .leave = remove_leave};
    _cleanup_free_ char *base = NULL;
    _cleanup_close_ int pfd = -1;
    struct stat st;

    if (lstat(dir, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        return wr_err_sys(err, "stat `%s`", dir);
    }
    pfd = open_parent(dir, &base, err);
    if (pfd < 0)
        return -1;
    return wr_walk_at(pfd, base, &w, err);
}

/* ---- usage --------------------------------------------------------------------------------- */

struct usage {
    struct wr_inodes seen; /* inodes with several links */
    uint64_t *bytes;
};

static int usage_visit(const struct wr_walk_ent *e, void *ctx, struct wr_err *err)
{
    struct usage *u = ctx;

    if (e->st.st_nlink > 1 && !S_ISDIR(e->st.st_mode) && !wr_inodes_add(&u->seen, &e->st, 0, NULL))
        return 0;
    *u->bytes += (uint64_t)e->st.st_blocks * 512;
    return 0;
}

int wr_layer_usage(const char *dir, uint64_t *bytes, struct wr_err *err)
{
    struct usage u = {.bytes = bytes};
    const struct wr_walk w = {
        .prefix = ".", .max_entries = WR_WALK_LIVE_ENTRIES, .visit = usage_visit, .ctx = &u};
    int r;

    *bytes = 0;
    r = wr_walk_at(AT_FDCWD, dir, &w, err);
    wr_inodes_fini(&u.seen);
    if (r < 0)
        return wr_err_wrap(err, "disk use of `%s`", dir);
    return 0;
}
