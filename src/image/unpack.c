/* SPDX-License-Identifier: Apache-2.0 */
/* Tar unpacking with libarchive, for layers and for the outer tar of an image archive (see
 * image.h). Paths are resolved one component at a time with openat(O_NOFOLLOW) from the root's
 * fd: an entry can never be written through a symlink, inside the tree or out of it. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/xalloc.h"
#include "image_int.h"

#define MAX_DEPTH 256

struct src {
    int fd;
    EVP_MD_CTX *md;
    char buf[128 * 1024];
};

static la_ssize_t src_read(struct archive *a, void *data, const void **buf)
{
    struct src *s = data;
    ssize_t n;

    do
        n = read(s->fd, s->buf, sizeof(s->buf));
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        archive_set_error(a, errno, "read");
        return -1;
    }
    if (s->md != NULL && n > 0)
        EVP_DigestUpdate(s->md, s->buf, (size_t)n);
    *buf = s->buf;
    return n;
}

/* A deferred directory time: directories are touched by their entries, so their times are set
 * last. */
struct dirtime {
    char *path;
    struct timespec ts[2];
};

struct unpack {
    int root;
    bool layer; /* a layer: owners, devices, whiteouts; else the outer tar of an archive */
    struct dirtime *dt;
    size_t ndt, capdt;
};

/* Split path into components (in place: path is modified), refusing absolute paths and `..`.
 * "." and empty components are dropped. */
static int split_path(char *path, char **comp, size_t *n, struct wr_err *err)
{
    char *save = NULL;

    *n = 0;
    if (path[0] == '/')
        return wr_err_set(err, WR_EBADDATA, 0, "entry `%s` has an absolute path", path);
    for (char *c = strtok_r(path, "/", &save); c != NULL; c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, ".") == 0)
            continue;
        if (strcmp(c, "..") == 0)
            return wr_err_set(err, WR_EBADDATA, 0, "an entry's path has `..`");
        if (*n == MAX_DEPTH)
            return wr_err_set(err, WR_EBADDATA, 0, "an entry's path is too deep");
        comp[(*n)++] = c;
    }
    return 0;
}

/* The directory holding comp[0..n-1] (the root if n is 0), as a new fd; missing directories are
 * made (0755, root) when create is set. A component that is a symlink or not a directory
 * fails. */
static int walk(const struct unpack *u, char **comp, size_t n, bool create, struct wr_err *err)
{
    int fd = fcntl(u->root, F_DUPFD_CLOEXEC, 3);

    if (fd < 0)
        return wr_err_sys(err, "dup");
    for (size_t i = 0; i < n; i++) {
        int next = openat(fd, comp[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 && errno == ENOENT && create) {
            /* root's even when the caller's fsuid is not (runtime/creds.h) */
            if ((mkdirat(fd, comp[i], 0755) < 0 && errno != EEXIST) ||
                fchownat(fd, comp[i], 0, 0, AT_SYMLINK_NOFOLLOW) < 0) {
                wr_err_sys(err, "mkdir `%s`", comp[i]);
                close(fd);
                return -1;
            }
            next = openat(fd, comp[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (next < 0) {
            int e = errno;
            close(fd);
            if (e == ELOOP || e == ENOTDIR)
                return wr_err_set(err, WR_EBADDATA, 0,
                                  "an entry's path goes through `%s`, which is not a directory",
                                  comp[i]);
            return wr_err_set(err, e == ENOENT ? WR_EBADDATA : WR_ESYS, e, "open `%s`", comp[i]);
        }
        close(fd);
        fd = next;
    }
    return fd;
}

/* Make room for a new entry `name` in dirfd: remove what is there (a directory only if
 * keep_dir is false). Returns 1 if a directory was kept, 0 otherwise. */
static int clear(int dirfd, const char *name, bool keep_dir, struct wr_err *err)
{
    struct stat st;

    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : wr_err_sys(err, "stat `%s`", name);
    if (S_ISDIR(st.st_mode)) {
        if (keep_dir)
            return 1;
        return wr_rm_rf_at(dirfd, name, err) < 0 ? -1 : 0;
    }
    if (unlinkat(dirfd, name, 0) < 0)
        return wr_err_sys(err, "replace `%s`", name);
    return 0;
}

static int set_xattrs(struct archive_entry *e, int fd, const char *name, struct wr_err *err)
{
    const char *xn;
    const void *val;
    size_t size;

    archive_entry_xattr_reset(e);
    while (archive_entry_xattr_next(e, &xn, &val, &size) == ARCHIVE_OK) {
        /* overlayfs' own marks come from whiteouts only, never from an image's say-so. */
        if (strncmp(xn, "trusted.overlay.", 16) == 0)
            continue;
        if (fsetxattr(fd, xn, val, size, 0) < 0 && errno != EOPNOTSUPP)
            return wr_err_sys(err, "xattr %s on `%s`", xn, name);
    }
    return 0;
}

static int write_data(struct archive *a, int fd, const char *name, struct wr_err *err)
{
    const void *buf;
    size_t size;
    la_int64_t off, end = 0;
    int r;

    while ((r = archive_read_data_block(a, &buf, &size, &off)) == ARCHIVE_OK) {
        const char *p = buf;
        while (size > 0) {
            ssize_t w = pwrite(fd, p, size, off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return wr_err_sys(err, "write `%s`", name);
            p += w;
            off += w;
            size -= (size_t)w;
        }
        if (off > end)
            end = off;
    }
    if (r != ARCHIVE_EOF)
        return wr_err_set(err, WR_EBADDATA, 0, "`%s`: %s", name, archive_error_string(a));
    return 0;
}

static void defer_time(struct unpack *u, char **comp, size_t n, struct archive_entry *e)
{
    struct dirtime *d;
    size_t len = 1;

    if (u->ndt == u->capdt) {
        u->capdt = u->capdt ? 2 * u->capdt : 64;
        u->dt = xrealloc(u->dt, u->capdt * sizeof(*u->dt));
    }
    d = &u->dt[u->ndt++];
    for (size_t i = 0; i < n; i++)
        len += strlen(comp[i]) + 1;
    d->path = xcalloc(1, len);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            strcat(d->path, "/");
        strcat(d->path, comp[i]);
    }
    d->ts[0].tv_sec = archive_entry_atime(e);
    d->ts[0].tv_nsec = archive_entry_atime_nsec(e);
    d->ts[1].tv_sec = archive_entry_mtime(e);
    d->ts[1].tv_nsec = archive_entry_mtime_nsec(e);
    if (!archive_entry_atime_is_set(e))
        d->ts[0] = d->ts[1];
}

static void apply_dir_times(struct unpack *u)
{
    /* Deepest last written first: children before their parents. */
    for (size_t i = u->ndt; i-- > 0;) {
        char *comp[MAX_DEPTH];
        size_t n;
        int fd;
        if (split_path(u->dt[i].path, comp, &n, NULL) == 0 &&
            (fd = walk(u, comp, n, false, NULL)) >= 0) {
            (void)futimens(fd, u->dt[i].ts);
            close(fd);
        }
        free(u->dt[i].path);
    }
    free(u->dt);
    u->dt = NULL;
    u->ndt = u->capdt = 0;
}

/* One entry of the tar. */
static int unpack_entry(struct unpack *u, struct archive *a, struct archive_entry *e,
                        struct wr_err *err)
{
    const char *p = archive_entry_pathname(e), *link = archive_entry_hardlink(e);
    _cleanup_free_ char *path = xstrdup(p ? p : "");
    _cleanup_close_ int pfd = -1, fd = -1;
    char *comp[MAX_DEPTH];
    const char *name;
    size_t n;
    mode_t type = archive_entry_filetype(e), perm = archive_entry_perm(e) & 07777;
    uid_t uid = u->layer ? (uid_t)archive_entry_uid(e) : 0;
    gid_t gid = u->layer ? (gid_t)archive_entry_gid(e) : 0;
    struct timespec ts[2] = {{archive_entry_atime(e), archive_entry_atime_nsec(e)},
                             {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};

    if (!archive_entry_atime_is_set(e))
        ts[0] = ts[1];
    if (split_path(path, comp, &n, err) < 0)
        return -1;
    if (n == 0) { /* the root itself ("./") */
        if (type != AE_IFDIR)
            return wr_err_set(err, WR_EBADDATA, 0, "the archive's root is not a directory");
        if (!u->layer)
            return 0;
        if (fchown(u->root, uid, gid) < 0 || fchmod(u->root, perm) < 0)
            return wr_err_sys(err, "root directory");
        defer_time(u, comp, 0, e);
        return set_xattrs(e, u->root, ".", err);
    }
    name = comp[n - 1];
    pfd = walk(u, comp, n - 1, true, err);
    if (pfd < 0)
        return -1;

    if (u->layer && strncmp(name, ".wh.", 4) == 0) {
        const char *victim = name + 4;
        if (strcmp(name, ".wh..wh..opq") == 0) {
            if (fsetxattr(pfd, "trusted.overlay.opaque", "y", 1, 0) < 0)
                return wr_err_sys(err, "mark `%s` opaque", n > 1 ? comp[n - 2] : "/");
            return 0;
        }
        if (victim[0] == '\0' || strcmp(victim, ".") == 0 || strcmp(victim, "..") == 0)
            return wr_err_set(err, WR_EBADDATA, 0, "bad whiteout `%s`", name);
        if (clear(pfd, victim, false, err) < 0)
            return -1;
        if (mknodat(pfd, victim, S_IFCHR, makedev(0, 0)) < 0 ||
            fchownat(pfd, victim, 0, 0, AT_SYMLINK_NOFOLLOW) < 0)
            return wr_err_sys(err, "whiteout `%s`", victim);
        return 0;
    }

    if (link != NULL) {
        _cleanup_free_ char *target = xstrdup(link);
        _cleanup_close_ int tfd = -1;
        char *tcomp[MAX_DEPTH];
        size_t tn;
        if (split_path(target, tcomp, &tn, err) < 0)
            return -1;
        if (tn == 0)
            return wr_err_set(err, WR_EBADDATA, 0, "hard link `%s` to the root", p);
        tfd = walk(u, tcomp, tn - 1, false, err);
        if (tfd < 0)
            return -1;
        if (clear(pfd, name, false, err) < 0)
            return -1;
        if (linkat(tfd, tcomp[tn - 1], pfd, name, 0) < 0)
            return errno == ENOENT
                       ? wr_err_set(err, WR_EBADDATA, 0,
                                    "hard link `%s`: its target `%s` is not there", p, link)
                       : wr_err_sys(err, "hard link `%s`", p);
        return 0;
    }

    switch (type) {
    case AE_IFREG:
        if (clear(pfd, name, false, err) < 0)
            return -1;
        fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
            return wr_err_sys(err, "create `%s`", p);
        if (write_data(a, fd, p, err) < 0)
            return -1;
        if (archive_entry_size_is_set(e) && ftruncate(fd, archive_entry_size(e)) < 0)
            return wr_err_sys(err, "size `%s`", p);
        break;
    case AE_IFDIR: {
        int kept = clear(pfd, name, true, err);
        if (kept < 0)
            return -1;
        if (!kept && mkdirat(pfd, name, 0700) < 0)
            return wr_err_sys(err, "mkdir `%s`", p);
        fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return wr_err_sys(err, "open `%s`", p);
        defer_time(u, comp, n, e);
        break;
    }
    case AE_IFLNK: {
        const char *target = archive_entry_symlink(e);
        if (!u->layer) /* an archive's own files are named by path: no links to follow */
            return 0;
        if (target == NULL)
            return wr_err_set(err, WR_EBADDATA, 0, "symlink `%s` without a target", p);
        if (clear(pfd, name, false, err) < 0)
            return -1;
        if (symlinkat(target, pfd, name) < 0)
            return wr_err_sys(err, "symlink `%s`", p);
        if (u->layer && fchownat(pfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
            return wr_err_sys(err, "chown `%s`", p);
        (void)utimensat(pfd, name, ts, AT_SYMLINK_NOFOLLOW);
        return 0;
    }
    case AE_IFCHR:
    case AE_IFBLK:
    case AE_IFIFO:
        if (!u->layer)
            return 0;
        if (clear(pfd, name, false, err) < 0)
            return -1;
        if (mknodat(pfd, name, type | 0600, archive_entry_rdev(e)) < 0)
            return wr_err_sys(err, "mknod `%s`", p);
        if (fchownat(pfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0 ||
            fchmodat(pfd, name, perm, 0) < 0)
            return wr_err_sys(err, "`%s`", p);
        (void)utimensat(pfd, name, ts, AT_SYMLINK_NOFOLLOW);
        return 0;
    default: /* sockets and the like: nothing to keep */
        return 0;
    }

    if (!u->layer)
        return 0;
    if (fchown(fd, uid, gid) < 0 || fchmod(fd, perm) < 0) /* chmod after: chown clears setuid */
        return wr_err_sys(err, "owner and mode of `%s`", p);
    if (set_xattrs(e, fd, p, err) < 0)
        return -1;
    if (type == AE_IFREG)
        (void)futimens(fd, ts);
    return 0;
}

int wr__unpack_tar(int fd, int root, bool layer, const char *want_digest, const char *what,
                   struct wr_err *err)
{
    struct archive *a = archive_read_new();
    struct archive_entry *e;
    struct unpack u = {.root = root, .layer = layer};
    struct src *s = xcalloc(1, sizeof(*s));
    int r, rc = -1;

    s->fd = fd;
    if (want_digest != NULL) {
        s->md = EVP_MD_CTX_new();
        if (s->md == NULL || EVP_DigestInit_ex(s->md, EVP_sha256(), NULL) != 1)
            abort();
    }
    /* The compressions images use; not _all, which may run external programs. */
    archive_read_support_filter_gzip(a);
    archive_read_support_filter_zstd(a);
    archive_read_support_filter_xz(a);
    archive_read_support_filter_bzip2(a);
    archive_read_support_format_tar(a);
    if (archive_read_open(a, s, NULL, src_read, NULL) != ARCHIVE_OK) {
        wr_err_set(err, WR_EBADDATA, 0, "%s: %s", what, archive_error_string(a));
        goto out;
    }
    while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN)
        if (unpack_entry(&u, a, e, err) < 0) {
            /* A call refused because of what the entry asks (a hard link to a directory, a
             * name too long, ...) is the archive's fault; running out of room is the host's. */
            if (err->kind == WR_ESYS && err->sys_errno != ENOSPC && err->sys_errno != EDQUOT &&
                err->sys_errno != EIO && err->sys_errno != ENOMEM && err->sys_errno != EMFILE &&
                err->sys_errno != ENFILE && err->sys_errno != EROFS)
                err->kind = WR_EBADDATA;
            wr_err_wrap(err, "%s", what);
            goto out;
        }
    if (r != ARCHIVE_EOF) {
        wr_err_set(err, WR_EBADDATA, 0, "%s: %s", what, archive_error_string(a));
        goto out;
    }
    if (want_digest != NULL) {
        /* What follows the end of the tar (padding) belongs to the blob too. */
        ssize_t n;
        char got[72];
        while ((n = read(fd, s->buf, sizeof(s->buf))) > 0)
            EVP_DigestUpdate(s->md, s->buf, (size_t)n);
        if (n < 0) {
            wr_err_sys(err, "%s: read", what);
            goto out;
        }
        wr__digest_final(s->md, got);
        if (strcmp(got, want_digest) != 0) {
            wr_err_set(err, WR_EBADDATA, 0, "%s: its digest is %s, not %s as its descriptor says",
                       what, got, want_digest);
            goto out;
        }
    }
    apply_dir_times(&u);
    rc = 0;
out:
    for (size_t i = 0; i < u.ndt; i++)
        free(u.dt[i].path);
    free(u.dt);
    archive_read_free(a);
    EVP_MD_CTX_free(s->md);
    free(s);
    return rc;
}

int wr_oci_unpack_layer(const struct wr_oci_layer *l, const char *dir, struct wr_err *err)
{
    _cleanup_close_ int fd = open(l->path, O_RDONLY | O_CLOEXEC);
    _cleanup_close_ int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd < 0 || root < 0)
        return wr_err_sys(err, "layer %s", l->digest);
    return wr__unpack_tar(fd, root, true, l->digest, l->digest, err);
}
