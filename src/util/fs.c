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
#include "walk.h"
#include "xalloc.h"

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
    _cleanup_free_ char *buf = NULL;
    size_t len = strlen(path);

    if (len == 0 || len >= PATH_MAX)
        return wr_err_set(err, WR_EINVAL, 0, "mkdir `%s`: bad path", path);
    /* The common case, an existing directory, costs one call. */
    if (mkdir(path, mode) == 0 || errno == EEXIST)
        return 0;
    if (errno != ENOENT)
        return wr_err_sys(err, "mkdir `%s`", path);
    /* Every ancestor from the top down, in one buffer (no recursion: path may have as many
     * components as bytes). */
    buf = xstrdup(path);
    for (char *slash = buf + 1; (slash = strchr(slash, '/')) != NULL; *slash++ = '/') {
        *slash = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return wr_err_sys(err, "mkdir `%s`", buf);
    }
    if (mkdir(path, mode) < 0 && errno != EEXIST)
        return wr_err_sys(err, "mkdir `%s`", path);
    return 0;
}

static int rm_visit(const struct wr_walk_ent *e, void *ctx, struct wr_err *err)
{
    if (!S_ISDIR(e->st.st_mode) && unlinkat(e->dirfd, e->name, 0) < 0 && errno != ENOENT)
        return wr_err_sys(err, "unlink `%s`", e->path);
    return 0;
}

static int rm_leave(const struct wr_walk_ent *e, void *ctx, struct wr_err *err)
{
    if (unlinkat(e->dirfd, e->name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return wr_err_sys(err, "rmdir `%s`", e->path);
    return 0;
}

int wr_rm_rf_at(int dfd, const char *name, struct wr_err *err)
{
    const struct wr_walk w = {
        .flags = WR_WALK_REMOVE | WR_WALK_MISSING_OK, .visit = rm_visit, .leave = rm_leave};

    return wr_walk_at(dfd, name, &w, err);
}

static int du_visit(const struct wr_walk_ent *e, void *ctx, struct wr_err *err)
{
    *(uint64_t *)ctx += (uint64_t)e->st.st_blocks * 512;
    return 0;
}

int wr_disk_usage_at(int dfd, const char *name, uint64_t *bytes, struct wr_err *err)
{
    const struct wr_walk w = {.flags = WR_WALK_MISSING_OK,
                              .max_entries = WR_WALK_LIVE_ENTRIES,
                              .visit = du_visit,
                              .ctx = bytes};

    *bytes = 0;
    return wr_walk_at(dfd, name, &w, err);
}
