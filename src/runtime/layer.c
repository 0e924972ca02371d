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

/* Names of the extended attributes of the entry at /proc/self/fd-relative path, sorted. */
static int list_xattrs(const char *path, char **names, size_t *n, struct wr_err *err)
{
    ssize_t len = llistxattr(path, NULL, 0);
    char *buf;

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
    len = llistxattr(path, buf, (size_t)len);
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

static int copy_xattrs(const char *src, const char *dst, struct wr_err *err)
{
    _cleanup_free_ char *names = NULL;
    size_t n;
    char *p;

    if (list_xattrs(src, &names, &n, err) < 0)
        return -1;
    p = names;
    for (size_t i = 0; i < n; i++, p += strlen(p) + 1) {
        if (private_xattr(p))
            continue;
        ssize_t vlen = lgetxattr(src, p, NULL, 0);
        if (vlen < 0)
            return wr_err_sys(err, "get xattr %s of `%s`", p, src);
        _cleanup_free_ char *v = xmalloc((size_t)vlen + 1);
        vlen = lgetxattr(src, p, v, (size_t)vlen);
        if (vlen < 0)
            return wr_err_sys(err, "get xattr %s of `%s`", p, src);
        if (lsetxattr(dst, p, v, (size_t)vlen, 0) < 0)
            return wr_err_sys(err, "set xattr %s on `%s`", p, dst);
    }
    return 0;
}

struct link_seen {
    dev_t dev;
    ino_t ino;
    char *dst;
};

struct copier {
    bool reflink;
    struct link_seen *links;
    size_t nlinks, caplinks;
};

static const char *seen_link(struct copier *c, const struct stat *st)
{
    for (size_t i = 0; i < c->nlinks; i++)
        if (c->links[i].dev == st->st_dev && c->links[i].ino == st->st_ino)
            return c->links[i].dst;
    return NULL;
}

static void remember_link(struct copier *c, const struct stat *st, const char *dst)
{
    if (c->nlinks == c->caplinks) {
        c->caplinks = c->caplinks ? 2 * c->caplinks : 16;
        c->links = xrealloc(c->links, c->caplinks * sizeof(*c->links));
    }
    c->links[c->nlinks++] = (struct link_seen){st->st_dev, st->st_ino, xstrdup(dst)};
}

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

static int set_meta(const char *dst, const struct stat *st, struct wr_err *err)
{
    struct timespec ts[2] = {st->st_atim, st->st_mtim};

    if (lchown(dst, st->st_uid, st->st_gid) < 0)
        return wr_err_sys(err, "chown `%s`", dst);
    if (!S_ISLNK(st->st_mode) && chmod(dst, st->st_mode & 07777) < 0)
        return wr_err_sys(err, "chmod `%s`", dst);
    if (utimensat(AT_FDCWD, dst, ts, AT_SYMLINK_NOFOLLOW) < 0)
        return wr_err_sys(err, "set times of `%s`", dst);
    return 0;
}

static int copy_entry(struct copier *c, const char *src, const char *dst, const struct stat *st,
                      struct wr_err *err);

static int copy_dir(struct copier *c, const char *src, const char *dst, const struct stat *st,
                    struct wr_err *err)
{
    _cleanup_closedir_ DIR *d = NULL;

    if (mkdir(dst, 0700) < 0)
        return wr_err_sys(err, "mkdir `%s`", dst);
    d = opendir(src);
    if (d == NULL)
        return wr_err_sys(err, "open `%s`", src);
    for (struct dirent *de; (errno = 0, de = readdir(d)) != NULL;) {
        struct stat cst;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        _cleanup_free_ char *s = xasprintf("%s/%s", src, de->d_name);
        _cleanup_free_ char *t = xasprintf("%s/%s", dst, de->d_name);
        if (lstat(s, &cst) < 0)
            return wr_err_sys(err, "stat `%s`", s);
        if (copy_entry(c, s, t, &cst, err) < 0)
            return -1;
    }
    if (errno != 0)
        return wr_err_sys(err, "read `%s`", src);
    if (copy_xattrs(src, dst, err) < 0)
        return -1;
    return set_meta(dst, st, err);
}

static int copy_entry(struct copier *c, const char *src, const char *dst, const struct stat *st,
                      struct wr_err *err)
{
    if (S_ISDIR(st->st_mode))
        return copy_dir(c, src, dst, st, err);
    if (st->st_nlink > 1) {
        const char *first = seen_link(c, st);
        if (first != NULL) {
            if (link(first, dst) < 0)
                return wr_err_sys(err, "link `%s`", dst);
            return 0;
        }
        remember_link(c, st, dst);
    }
    if (S_ISREG(st->st_mode)) {
        _cleanup_close_ int in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int out = -1;
        if (in < 0)
            return wr_err_sys(err, "open `%s`", src);
        out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
            return wr_err_sys(err, "create `%s`", dst);
        if (copy_data(c, in, out, st->st_size, src, err) < 0)
            return -1;
    } else if (S_ISLNK(st->st_mode)) {
        char target[PATH_MAX + 1];
        ssize_t n = readlink(src, target, PATH_MAX);
        if (n < 0)
            return wr_err_sys(err, "readlink `%s`", src);
        target[n] = '\0';
        if (symlink(target, dst) < 0)
            return wr_err_sys(err, "symlink `%s`", dst);
    } else if (mknod(dst, st->st_mode & S_IFMT, st->st_rdev) < 0) {
        /* character and block devices (an overlay whiteout is 0:0), fifos, sockets */
        return wr_err_sys(err, "mknod `%s`", dst);
    }
    if (copy_xattrs(src, dst, err) < 0)
        return -1;
    return set_meta(dst, st, err);
}

static int copy_tree(const char *src, const char *dst, bool reflink, struct wr_err *err)
{
    struct copier c = {.reflink = reflink};
    struct stat st;
    int r;

    if (lstat(src, &st) < 0)
        return wr_err_sys(err, "stat `%s`", src);
    if (!S_ISDIR(st.st_mode))
        return wr_err_set(err, WR_EINVAL, 0, "`%s` is not a directory", src);
    r = copy_dir(&c, src, dst, &st, err);
    for (size_t i = 0; i < c.nlinks; i++)
        free(c.links[i].dst);
    free(c.links);
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
    _cleanup_free_ char *fs = xasprintf("%s/fs", dst);

    if (mkdir(dst, 0700) < 0)
        return wr_err_sys(err, "mkdir `%s`", dst);
    if (copy_tree(src, fs, info->reflink, err) < 0) {
        wr_err_wrap(err, "copy `%s`", src);
        (void)wr_layer_remove(dst, NULL);
        return -1;
    }
    return 0;
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

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void h_str(EVP_MD_CTX *h, const char *s)
{
    EVP_DigestUpdate(h, s, strlen(s) + 1);
}

static int digest_xattrs(EVP_MD_CTX *h, const char *path, struct wr_err *err)
{
    _cleanup_free_ char *names = NULL;
    _cleanup_free_ char **v = NULL;
    size_t n, m = 0;
    char *p;

    if (list_xattrs(path, &names, &n, err) < 0)
        return -1;
    v = xcalloc(n + 1, sizeof(char *));
    p = names;
    for (size_t i = 0; i < n; i++, p += strlen(p) + 1)
        if (!private_xattr(p))
            v[m++] = p;
    qsort(v, m, sizeof(char *), cmp_str);
    for (size_t i = 0; i < m; i++) {
        ssize_t len = lgetxattr(path, v[i], NULL, 0);
        if (len < 0)
            return wr_err_sys(err, "get xattr %s of `%s`", v[i], path);
        _cleanup_free_ char *val = xmalloc((size_t)len + 1);
        len = lgetxattr(path, v[i], val, (size_t)len);
        if (len < 0)
            return wr_err_sys(err, "get xattr %s of `%s`", v[i], path);
        char hdr[64];
        snprintf(hdr, sizeof(hdr), "x%zd", len);
        h_str(h, hdr);
        h_str(h, v[i]);
        EVP_DigestUpdate(h, val, (size_t)len);
    }
    return 0;
}

static int digest_entry(EVP_MD_CTX *h, const char *path, const char *rel, uint64_t *bytes,
                        struct wr_err *err)
{
    struct stat st;
    char hdr[160];

    if (lstat(path, &st) < 0)
        return wr_err_sys(err, "stat `%s`", path);
    snprintf(hdr, sizeof(hdr), "%o %u %u %u:%u", (unsigned)st.st_mode, (unsigned)st.st_uid,
             (unsigned)st.st_gid, major(st.st_rdev), minor(st.st_rdev));
    h_str(h, rel);
    h_str(h, hdr);
    if (digest_xattrs(h, path, err) < 0)
        return -1;

    if (S_ISREG(st.st_mode)) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        char buf[65536];
        ssize_t n;
        if (fd < 0)
            return wr_err_sys(err, "open `%s`", path);
        snprintf(hdr, sizeof(hdr), "%" PRIu64, (uint64_t)st.st_size);
        h_str(h, hdr);
        while ((n = read(fd, buf, sizeof(buf))) != 0) {
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                return wr_err_sys(err, "read `%s`", path);
            }
            EVP_DigestUpdate(h, buf, (size_t)n);
        }
        *bytes += (uint64_t)st.st_size;
    } else if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX + 1];
        ssize_t n = readlink(path, target, PATH_MAX);
        if (n < 0)
            return wr_err_sys(err, "readlink `%s`", path);
        target[n] = '\0';
        h_str(h, target);
    } else if (S_ISDIR(st.st_mode)) {
        _cleanup_closedir_ DIR *d = opendir(path);
        char **names = NULL;
        size_t n = 0, cap = 0;
        int r = 0;
        if (d == NULL)
            return wr_err_sys(err, "open `%s`", path);
        for (struct dirent *de; (errno = 0, de = readdir(d)) != NULL;) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 32;
                names = xrealloc(names, cap * sizeof(char *));
            }
            names[n++] = xstrdup(de->d_name);
        }
        if (n > 1) /* qsort of NULL is undefined, even for 0 items */
            qsort(names, n, sizeof(char *), cmp_str);
        for (size_t i = 0; i < n; i++) {
            if (r == 0) {
                _cleanup_free_ char *cp = xasprintf("%s/%s", path, names[i]);
                _cleanup_free_ char *cr = xasprintf("%s/%s", rel, names[i]);
                r = digest_entry(h, cp, cr, bytes, err);
            }
            free(names[i]);
        }
        free(names);
        h_str(h, "end");
        return r;
    }
    return 0;
}

int wr_layer_digest(const char *dir, char digest[72], uint64_t *bytes, struct wr_err *err)
{
    _cleanup_free_ char *fs = xasprintf("%s/fs", dir);
    EVP_MD_CTX *h = EVP_MD_CTX_new();
    unsigned char md[32];
    unsigned int mdlen = 0;
    int r;

    if (h == NULL)
        return wr_err_set(err, WR_EINTERNAL, 0, "out of memory for a digest");
    *bytes = 0;
    EVP_DigestInit_ex(h, EVP_sha256(), NULL);
    h_str(h, "warren-layer-v1");
    r = digest_entry(h, fs, ".", bytes, err);
    EVP_DigestFinal_ex(h, md, &mdlen);
    EVP_MD_CTX_free(h);
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

static int remove_subvolume(int pfd, const char *name, const char *path, struct wr_err *err);

/* rm -rf of the entries of dir fd, deleting nested subvolumes as subvolumes. */
static int remove_children(int fd, const char *path, struct wr_err *err)
{
    struct stat top;
    DIR *d;
    int dup_fd = dup(fd), r = 0;

    if (dup_fd < 0 || fstat(fd, &top) < 0)
        return wr_err_sys(err, "open `%s`", path);
    d = fdopendir(dup_fd);
    if (d == NULL) {
        close(dup_fd);
        return wr_err_sys(err, "open `%s`", path);
    }
    for (struct dirent *de; r == 0 && (errno = 0, de = readdir(d)) != NULL;) {
        struct stat st;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            r = wr_err_sys(err, "stat `%s/%s`", path, de->d_name);
        } else if (S_ISDIR(st.st_mode) && st.st_dev != top.st_dev &&
                   st.st_ino == BTRFS_FIRST_SUBVOL_INO) {
            _cleanup_free_ char *sub = xasprintf("%s/%s", path, de->d_name);
            r = remove_subvolume(fd, de->d_name, sub, err);
        } else if (S_ISDIR(st.st_mode)) {
            _cleanup_free_ char *sub = xasprintf("%s/%s", path, de->d_name);
            _cleanup_close_ int cfd =
                openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (cfd < 0)
                r = wr_err_sys(err, "open `%s`", sub);
            else if ((r = remove_children(cfd, sub, err)) == 0 &&
                     unlinkat(fd, de->d_name, AT_REMOVEDIR) < 0)
                r = wr_err_sys(err, "rmdir `%s`", sub);
        } else if (unlinkat(fd, de->d_name, 0) < 0) {
            r = wr_err_sys(err, "unlink `%s/%s`", path, de->d_name);
        }
    }
    closedir(d);
    return r;
}

static int remove_subvolume(int pfd, const char *name, const char *path, struct wr_err *err)
{
    _cleanup_close_ int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct btrfs_ioctl_vol_args args = {0};
    uint64_t flags = 0;

    if (fd < 0)
        return wr_err_sys(err, "open `%s`", path);
    /* Writable again, so that nested subvolumes can be removed from it. */
    (void)ioctl(fd, BTRFS_IOC_SUBVOL_SETFLAGS, &flags);
    if (remove_children(fd, path, err) < 0)
        return -1;
    if (set_name(args.name, sizeof(args.name), name, err) < 0)
        return -1;
    if (ioctl(pfd, BTRFS_IOC_SNAP_DESTROY, &args) < 0)
        return wr_err_sys(err, "delete subvolume `%s`", path);
    return 0;
}

int wr_layer_remove(const char *dir, struct wr_err *err)
{
    _cleanup_free_ char *base = NULL;
    _cleanup_close_ int pfd = -1, fd = -1;
    struct stat st;

    if (lstat(dir, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        return wr_err_sys(err, "stat `%s`", dir);
    }
    pfd = open_parent(dir, &base, err);
    if (pfd < 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        if (unlinkat(pfd, base, 0) < 0)
            return wr_err_sys(err, "unlink `%s`", dir);
        return 0;
    }
    fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return wr_err_sys(err, "open `%s`", dir);
    if (is_subvolume(fd))
        return remove_subvolume(pfd, base, dir, err);
    if (remove_children(fd, dir, err) < 0)
        return -1;
    if (unlinkat(pfd, base, AT_REMOVEDIR) < 0)
        return wr_err_sys(err, "rmdir `%s`", dir);
    return 0;
}

/* ---- usage --------------------------------------------------------------------------------- */

static int usage_of(const char *path, struct copier *seen, uint64_t *bytes, struct wr_err *err)
{
    struct stat st;

    if (lstat(path, &st) < 0)
        return wr_err_sys(err, "stat `%s`", path);
    if (st.st_nlink > 1 && !S_ISDIR(st.st_mode)) {
        if (seen_link(seen, &st) != NULL)
            return 0;
        remember_link(seen, &st, "");
    }
    *bytes += (uint64_t)st.st_blocks * 512;
    if (S_ISDIR(st.st_mode)) {
        _cleanup_closedir_ DIR *d = opendir(path);
        if (d == NULL)
            return wr_err_sys(err, "open `%s`", path);
        for (struct dirent *de; (errno = 0, de = readdir(d)) != NULL;) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            _cleanup_free_ char *c = xasprintf("%s/%s", path, de->d_name);
            if (usage_of(c, seen, bytes, err) < 0)
                return -1;
        }
    }
    return 0;
}

int wr_layer_usage(const char *dir, uint64_t *bytes, struct wr_err *err)
{
    struct copier seen = {0};
    int r;

    *bytes = 0;
    r = usage_of(dir, &seen, bytes, err);
    for (size_t i = 0; i < seen.nlinks; i++)
        free(seen.links[i].dst);
    free(seen.links);
    return r;
}
