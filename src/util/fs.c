/* SPDX-License-Identifier: Apache-2.0 */
/* File helpers. */
#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"

int wr_write_fileat(int dirfd, const char *path, const char *s, bool create, struct wr_err *err)
{
    int flags = O_WRONLY | O_TRUNC | O_CLOEXEC | (create ? O_CREAT : 0);
    _cleanup_close_ int fd = openat(dirfd, path, flags, 0644);

    if (fd < 0)
        return wr_err_sys(err, "open `%s`", path);
    if (wr_write_all(fd, s, strlen(s)) < 0)
        return wr_err_sys(err, "write `%s`", path);
    return 0;
}

ssize_t wr_read_fileat(int dirfd, const char *path, char *buf, size_t size, struct wr_err *err)
{
    _cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return wr_err_sys(err, "open `%s`", path);
    n = wr_read_all(fd, buf, size - 1);
    if (n < 0)
        return wr_err_sys(err, "read `%s`", path);
    buf[n] = '\0';
    return n;
}

int wr_write_all(int fd, const void *p, size_t n)
{
    const char *c = p;

    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

ssize_t wr_read_all(int fd, void *p, size_t n)
{
    char *c = p;
    size_t got = 0;

    while (got < n) {
        ssize_t r = read(fd, c + got, n - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

int wr_mkdir_p(const char *path, mode_t mode, struct wr_err *err)
{
    char buf[PATH_MAX];
    size_t len = strlen(path);
    char *slash;

    if (len == 0 || len >= sizeof(buf))
        return wr_err_set(err, WR_EINVAL, 0, "mkdir `%s`: bad path", path);
    /* The common case, an existing directory, costs one call. */
    if (mkdir(path, mode) == 0 || errno == EEXIST)
        return 0;
    if (errno != ENOENT)
        return wr_err_sys(err, "mkdir `%s`", path);
    memcpy(buf, path, len + 1);
    while (len > 1 && buf[len - 1] == '/')
        buf[--len] = '\0';
    slash = strrchr(buf, '/');
    if (slash == NULL || slash == buf)
        return wr_err_sys(err, "mkdir `%s`", path);
    *slash = '\0';
    if (wr_mkdir_p(buf, mode, err) < 0)
        return -1;
    if (mkdir(path, mode) < 0 && errno != EEXIST)
        return wr_err_sys(err, "mkdir `%s`", path);
    return 0;
}

/* Visit dfd/name and, for a directory, everything below it (children first), without following
 * symbolic links and without crossing mount points: visit(dfd, name, st, ctx, err) for each
 * entry. A missing dfd/name is not an error. Returns 0 or -1 with err. */
typedef int (*walk_fn)(int dfd, const char *name, const struct stat *st, void *ctx,
                       struct wr_err *err);

static int walk_at(int dfd, const char *name, walk_fn visit, void *ctx, const char *what,
                   struct wr_err *err)
{
    struct stat st, parent;
    _cleanup_closedir_ DIR *d = NULL;
    int fd;

    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT)
            return 0;
        return wr_err_sys(err, "stat `%s`", name);
    }
    if (!S_ISDIR(st.st_mode))
        return visit(dfd, name, &st, ctx, err);
    if (fstat(dfd, &parent) == 0 && parent.st_dev != st.st_dev)
        return wr_err_set(err, WR_ECONFLICT, 0, "%s `%s`: is a mount point", what, name);
    fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) /* removed meanwhile (by a sandbox using the tree) */
        return 0;
    if (fd < 0)
        return wr_err_sys(err, "open `%s`", name);
    d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return wr_err_sys(err, "opendir `%s`", name);
    }
    for (struct dirent *de; (errno = 0, de = readdir(d)) != NULL;) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (walk_at(dirfd(d), de->d_name, visit, ctx, what, err) < 0)
            return wr_err_wrap(err, "%s `%s`", what, name);
    }
    return visit(dfd, name, &st, ctx, err);
}

static int rm_one(int dfd, const char *name, const struct stat *st, void *ctx, struct wr_err *err)
{
    bool dir = S_ISDIR(st->st_mode);

    if (unlinkat(dfd, name, dir ? AT_REMOVEDIR : 0) < 0 && errno != ENOENT)
        return wr_err_sys(err, "%s `%s`", dir ? "rmdir" : "unlink", name);
    return 0;
}

int wr_rm_rf_at(int dfd, const char *name, struct wr_err *err)
{
    return walk_at(dfd, name, rm_one, NULL, "rm", err);
}

static int du_one(int dfd, const char *name, const struct stat *st, void *ctx, struct wr_err *err)
{
    *(uint64_t *)ctx += (uint64_t)st->st_blocks * 512;
    return 0;
}

int wr_disk_usage_at(int dfd, const char *name, uint64_t *bytes, struct wr_err *err)
{
    *bytes = 0;
    return walk_at(dfd, name, du_one, bytes, "du", err);
}
