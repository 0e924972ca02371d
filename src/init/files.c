/* SPDX-License-Identifier: Apache-2.0 */
/* File operations inside the sandbox, each under the requesting user's filesystem identity:
 * streamed reads, streamed (optionally atomic) writes, stat, mkdir, remove, rename, chmod.
 * Listings live in list.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "files.h"
#include "init.h"

struct init_write {
    struct init_write *next;
    uint32_t id;
    int fd;
    char *path;
    char *tmp; /* atomic: the temporary file renamed over path at DATA_END */
    bool excl;
    bool failed; /* an ERROR was sent; DATA is ignored until DATA_END */
    struct init_user user;
};

static unsigned count_jobs(const struct init_conn *c)
{
    unsigned n = 0;

    for (const struct init_job *j = c->jobs; j != NULL; j = j->next)
        n++;
    for (const struct init_write *w = c->writes; w != NULL; w = w->next)
        n++;
    return n;
}

void init_files_reply_err(struct init_conn *c, uint32_t id, const struct wr_err *err)
{
    wr_msg_error(&c->out, id, err->sys_errno != 0 ? err->sys_errno : EIO, err->msg);
}

void init_files_stat_reply(struct init_conn *c, uint32_t id, const char *name,
                           const struct stat *st, const char *link)
{
    struct wr_stat ws = {0};

    if (S_ISREG(st->st_mode))
        ws.type = WR_FT_FILE;
    else if (S_ISDIR(st->st_mode))
        ws.type = WR_FT_DIR;
    else if (S_ISLNK(st->st_mode))
        ws.type = WR_FT_SYMLINK;
    else
        ws.type = WR_FT_OTHER;
    ws.name = (char *)name;
    ws.mode = st->st_mode & 07777;
    ws.size = (uint64_t)st->st_size;
    ws.mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    ws.uid = st->st_uid;
    ws.gid = st->st_gid;
    ws.link = (char *)link;
    wr_stat_encode(&c->out, id, &ws);
}

/* readlinkat into a new string, or NULL. */
char *init_files_readlink(int dirfd, const char *path)
{
    char buf[PATH_MAX];
    ssize_t n = readlinkat(dirfd, path, buf, sizeof(buf) - 1);

    if (n < 0)
        return NULL;
    buf[n] = '\0';
    return xstrdup(buf);
}

/* ---- read -------------------------------------------------------------------------------- */

static void file_read(struct init_conn *c, uint32_t id, const struct wr_file_req *r,
                      const struct init_user *u)
{
    _cleanup_close_ int fd = -1;
    struct stat st;
    struct init_job *j;

    if (init_fs_enter(u) < 0) {
        init_conn_errorf(c, id, errno, "switch to uid %u", (unsigned)u->uid);
        return;
    }
    /* O_NONBLOCK: opening a FIFO must not hang init; it is refused below anyway. */
    fd = open(r->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    int saved = errno;
    init_fs_leave();
    if (fd < 0) {
        init_conn_errorf(c, id, saved, "open `%s`", r->path);
        return;
    }
    if (fstat(fd, &st) < 0) {
        init_conn_errorf(c, id, errno, "stat `%s`", r->path);
        return;
    }
    if (S_ISDIR(st.st_mode)) {
        init_conn_errorf(c, id, EISDIR, "read `%s`", r->path);
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        init_conn_errorf(c, id, EINVAL, "read `%s`: not a regular file", r->path);
        return;
    }
    (void)fcntl(fd, F_SETFL, 0);
    init_files_stat_reply(c, id, NULL, &st, NULL);
    j = xcalloc(1, sizeof(*j));
    j->id = id;
    j->fd = steal_fd(&fd);
    j->offset = r->offset;
    j->remaining = r->length;
    init_files_add_job(c, j);
}

/* One chunk of a read. Returns true when the job is finished (OK or ERROR queued). */
bool init_files_read_step(struct init_conn *c, struct init_job *j)
{
    static uint8_t buf[WR_CHUNK_SIZE];
    size_t want = sizeof(buf);
    ssize_t n;

    if (j->remaining == 0) {
        wr_msg_ok(&c->out, j->id);
        return true;
    }
    if (j->remaining < want)
        want = (size_t)j->remaining;
    do
        n = pread(j->fd, buf, want, (off_t)j->offset);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        init_conn_errorf(c, j->id, errno, "read");
        return true;
    }
    if (n == 0) {
        wr_msg_ok(&c->out, j->id);
        return true;
    }
    wr_frame_raw(&c->out, WR_MSG_DATA, 0, j->id, buf, (size_t)n);
    j->offset += (uint64_t)n;
    j->remaining -= (uint64_t)n;
    return false;
}

/* ---- write ------------------------------------------------------------------------------- */

static struct init_write *find_write(struct init_conn *c, uint32_t id)
{
    for (struct init_write *w = c->writes; w != NULL; w = w->next)
        if (w->id == id)
            return w;
    return NULL;
}

static void write_free(struct init_conn *c, struct init_write *w)
{
    for (struct init_write **pp = &c->writes; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    }
    if (w->fd >= 0)
        (void)close(w->fd);
    if (w->tmp != NULL)
        (void)unlink(w->tmp);
    free(w->tmp);
    free(w->path);
    init_user_fini(&w->user);
    free(w);
}

/* Give up on a write: close and remove the temporary file, keep a tombstone until DATA_END. */
static void write_fail(struct init_write *w)
{
    w->failed = true;
    if (w->fd >= 0)
        (void)close(w->fd);
    w->fd = -1;
    if (w->tmp != NULL)
        (void)unlink(w->tmp);
    free(w->tmp);
    w->tmp = NULL;
}

/* Split "/a/b/c" into a new "/a/b" and a pointer to "c". */
static char *dir_of(const char *path, const char **base)
{
    const char *slash = strrchr(path, '/');

    *base = slash + 1;
    if (slash == path)
        return xstrdup("/");
    return xstrndup(path, (size_t)(slash - path));
}

static int open_tmp(const char *dir, const char *base, mode_t mode, char **out)
{
    for (int i = 0; i < 16; i++) {
        uint32_t rnd = 0;
        if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) < 0)
            rnd = (uint32_t)rand();
        _cleanup_free_ char *tmp =
            xasprintf("%s%s.%.64s.warren-%08x", dir, strcmp(dir, "/") == 0 ? "" : "/", base, rnd);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, mode);
        if (fd >= 0) {
            *out = steal_pointer(&tmp);
            return fd;
        }
        if (errno != EEXIST)
            return -1;
    }
    errno = EEXIST;
    return -1;
}

static void file_write(struct init_conn *c, uint32_t id, const struct wr_file_req *r,
                       const struct init_user *u)
{
    uint64_t flags = r->flags;
    bool atomic = flags & WR_WRITE_ATOMIC, excl = flags & WR_WRITE_EXCL;
    bool append = flags & WR_WRITE_APPEND;
    bool mode_given = r->has_mode;
    mode_t mode = mode_given ? (mode_t)r->mode : 0644;
    _cleanup_free_ char *dir = NULL;
    _cleanup_free_ char *tmp = NULL;
    const char *base;
    struct stat st;
    int fd = -1;

    if (find_write(c, id) != NULL) {
        init_conn_errorf(c, id, EBUSY, "write `%s`: request id in use", r->path);
        return;
    }
    if (atomic && append) {
        init_conn_errorf(c, id, EINVAL, "write `%s`: ATOMIC with APPEND", r->path);
        return;
    }
    dir = dir_of(r->path, &base);
    if (*base == '\0') {
        init_conn_errorf(c, id, EISDIR, "write `%s`", r->path);
        return;
    }
    if (init_fs_enter(u) < 0) {
        init_conn_errorf(c, id, errno, "switch to uid %u", (unsigned)u->uid);
        return;
    }
    if (flags & WR_WRITE_MKDIRS) {
        struct wr_err err = {0};
        if (wr_mkdir_p(dir, 0755, &err) < 0) {
            init_fs_leave();
            init_files_reply_err(c, id, &err);
            return;
        }
    }
    if (atomic) {
        bool exists = stat(r->path, &st) == 0;
        if (exists && excl) {
            init_fs_leave();
            init_conn_errorf(c, id, EEXIST, "open `%s`", r->path);
            return;
        }
        if (exists && S_ISDIR(st.st_mode)) {
            init_fs_leave();
            init_conn_errorf(c, id, EISDIR, "open `%s`", r->path);
            return;
        }
        /* Replacing a file keeps its permissions unless the request names a mode. */
        if (exists && !mode_given)
            mode = st.st_mode & 07777;
        fd = open_tmp(dir, base, mode, &tmp);
    } else {
        fd = open(r->path,
                  O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK |
                      (append ? O_APPEND : O_TRUNC) | (excl ? O_EXCL : 0),
                  mode);
    }
    int saved = errno;
    init_fs_leave();
    if (fd < 0) {
        init_conn_errorf(c, id, saved, "open `%s`", r->path);
        return;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        (void)close(fd);
        if (tmp != NULL)
            (void)unlink(tmp);
        init_conn_errorf(c, id, EINVAL, "write `%s`: not a regular file", r->path);
        return;
    }
    (void)fcntl(fd, F_SETFL, append ? O_APPEND : 0);

    struct init_write *w = xcalloc(1, sizeof(*w));
    w->id = id;
    w->fd = fd;
    w->path = xstrdup(r->path);
    w->tmp = steal_pointer(&tmp);
    w->excl = excl;
    init_user_copy(&w->user, u);
    w->next = c->writes;
    c->writes = w;
    wr_msg_ok(&c->out, id);
}

static void write_data(struct init_conn *c, uint32_t id, const uint8_t *p, size_t n)
{
    struct init_write *w = find_write(c, id);

    if (w == NULL || w->failed)
        return; /* after an ERROR, the rest of the stream is ignored */
    if (wr_write_all(w->fd, p, n) < 0) {
        init_conn_errorf(c, id, errno, "write `%s`", w->path);
        write_fail(w);
    }
}

static void write_end(struct init_conn *c, uint32_t id)
{
    struct init_write *w = find_write(c, id);
    int fd;

    if (w == NULL) {
        init_conn_errorf(c, id, EBADF, "no write in progress for request %u", id);
        return;
    }
    if (w->failed) {
        write_free(c, w);
        return;
    }
    fd = steal_fd(&w->fd);
    if (close(fd) < 0) {
        init_conn_errorf(c, id, errno, "write `%s`", w->path);
        write_free(c, w);
        return;
    }
    if (w->tmp != NULL) {
        if (init_fs_enter(&w->user) < 0) {
            init_conn_errorf(c, id, errno, "switch to uid %u", (unsigned)w->user.uid);
            write_free(c, w);
            return;
        }
        int rc;
        if (w->excl) {
            rc = renameat2(AT_FDCWD, w->tmp, AT_FDCWD, w->path, RENAME_NOREPLACE);
            if (rc < 0 && errno == EINVAL) { /* filesystem without RENAME_NOREPLACE */
                struct stat st;
                if (lstat(w->path, &st) == 0) {
                    errno = EEXIST;
                } else {
                    rc = rename(w->tmp, w->path);
                }
            }
        } else {
            rc = rename(w->tmp, w->path);
        }
        int saved = errno;
        init_fs_leave();
        if (rc < 0) {
            init_conn_errorf(c, id, saved, "rename to `%s`", w->path);
            write_free(c, w);
            return;
        }
        free(w->tmp);
        w->tmp = NULL;
    }
    wr_msg_ok(&c->out, id);
    write_free(c, w);
}

/* ---- small operations -------------------------------------------------------------------- */

static void file_stat(struct init_conn *c, uint32_t id, const struct wr_file_req *r)
{
    bool nofollow = r->nofollow;
    _cleanup_free_ char *link = NULL;
    struct stat st;

    if (fstatat(AT_FDCWD, r->path, &st, nofollow ? AT_SYMLINK_NOFOLLOW : 0) < 0) {
        init_conn_errorf(c, id, errno, "stat `%s`", r->path);
        return;
    }
    if (S_ISLNK(st.st_mode))
        link = init_files_readlink(AT_FDCWD, r->path);
    init_files_stat_reply(c, id, NULL, &st, link);
}

static void file_mkdir(struct init_conn *c, uint32_t id, const struct wr_file_req *r)
{
    mode_t mode = r->has_mode ? (mode_t)r->mode : 0755;
    struct stat st;

    if (r->parents) {
        struct wr_err err = {0};
        if (wr_mkdir_p(r->path, mode, &err) < 0) {
            init_files_reply_err(c, id, &err);
            return;
        }
        if (stat(r->path, &st) < 0) {
            init_conn_errorf(c, id, errno, "mkdir `%s`", r->path);
            return;
        }
        if (!S_ISDIR(st.st_mode)) {
            init_conn_errorf(c, id, ENOTDIR, "mkdir `%s`", r->path);
            return;
        }
    } else if (mkdir(r->path, mode) < 0) {
        init_conn_errorf(c, id, errno, "mkdir `%s`", r->path);
        return;
    }
    wr_msg_ok(&c->out, id);
}

static void file_remove(struct init_conn *c, uint32_t id, const struct wr_file_req *r)
{
    struct stat st;

    if (lstat(r->path, &st) < 0) {
        init_conn_errorf(c, id, errno, "remove `%s`", r->path);
        return;
    }
    if (r->recursive) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_close_ int dfd = -1;
        struct wr_err err = {0};
        const char *base;

        dir = dir_of(r->path, &base);
        if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
            init_conn_errorf(c, id, EBUSY, "remove `%s`", r->path);
            return;
        }
        /* From the parent, so wr_rm_rf_at can refuse a mount point at the top too. */
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
            init_conn_errorf(c, id, errno, "remove `%s`", r->path);
            return;
        }
        if (wr_rm_rf_at(dfd, base, &err) < 0) {
            wr_err_wrap(&err, "remove `%s`", r->path);
            init_files_reply_err(c, id, &err);
            return;
        }
    } else if (S_ISDIR(st.st_mode) ? rmdir(r->path) < 0 : unlink(r->path) < 0) {
        init_conn_errorf(c, id, errno, "remove `%s`", r->path);
        return;
    }
    wr_msg_ok(&c->out, id);
}

/* DEST is absolute (wr_file_req_decode). */
static void file_rename(struct init_conn *c, uint32_t id, const struct wr_file_req *r)
{
    if (rename(r->path, r->dest) < 0) {
        init_conn_errorf(c, id, errno, "rename `%s` to `%s`", r->path, r->dest);
        return;
    }
    wr_msg_ok(&c->out, id);
}

/* MODE is there (wr_file_req_decode). */
static void file_chmod(struct init_conn *c, uint32_t id, const struct wr_file_req *r)
{
    if (chmod(r->path, (mode_t)r->mode) < 0) {
        init_conn_errorf(c, id, errno, "chmod `%s`", r->path);
        return;
    }
    wr_msg_ok(&c->out, id);
}

/* ---- dispatch ---------------------------------------------------------------------------- */

int init_path_req(struct init_conn *c, const struct wr_frame_hdr *h, const uint8_t *p,
                  struct wr_file_req *r, struct init_user *u)
{
    struct wr_err err = {0};

    memset(u, 0, sizeof(*u));
    if (wr_file_req_decode(h->type, p, h->len, r, &err) < 0) {
        init_conn_errorf(c, h->id, EINVAL, "%s", err.msg);
        return -1;
    }
    if (init_user_resolve(r->user, r->uid, r->gid, u, &err) < 0) {
        init_conn_errorf(c, h->id, EINVAL, "%s", err.msg);
        init_user_fini(u);
        wr_file_req_fini(r);
        return -1;
    }
    return 0;
}

void init_file_request(struct init_conn *c, const struct wr_frame_hdr *h, const uint8_t *p)
{
    struct wr_file_req r;
    struct init_user u = {0};

    if (h->type == WR_MSG_DATA) {
        write_data(c, h->id, p, h->len);
        return;
    }
    if (h->type == WR_MSG_DATA_END) {
        write_end(c, h->id);
        return;
    }
    if (init_path_req(c, h, p, &r, &u) < 0)
        return;
    if ((h->type == WR_MSG_FILE_READ || h->type == WR_MSG_FILE_WRITE ||
         h->type == WR_MSG_FILE_LIST) &&
        count_jobs(c) >= INIT_MAX_JOBS) {
        init_conn_errorf(c, h->id, EMFILE, "too many file transfers on this connection");
        goto out;
    }

    switch (h->type) {
    case WR_MSG_FILE_READ:
        file_read(c, h->id, &r, &u);
        goto out;
    case WR_MSG_FILE_WRITE:
        file_write(c, h->id, &r, &u);
        goto out;
    case WR_MSG_FILE_LIST:
        init_files_list(c, h->id, &r, &u);
        goto out;
    default:
        break;
    }

    /* The short operations run entirely under the user's identity. */
    if (init_fs_enter(&u) < 0) {
        init_conn_errorf(c, h->id, errno, "switch to uid %u", (unsigned)u.uid);
        goto out;
    }
    switch (h->type) {
    case WR_MSG_FILE_STAT:
        file_stat(c, h->id, &r);
        break;
    case WR_MSG_FILE_MKDIR:
        file_mkdir(c, h->id, &r);
        break;
    case WR_MSG_FILE_REMOVE:
        file_remove(c, h->id, &r);
        break;
    case WR_MSG_FILE_RENAME:
        file_rename(c, h->id, &r);
        break;
    case WR_MSG_FILE_CHMOD:
        file_chmod(c, h->id, &r);
        break;
    default:
        break;
    }
    init_fs_leave();
out:
    init_user_fini(&u);
    wr_file_req_fini(&r);
}

/* ---- jobs -------------------------------------------------------------------------------- */

void init_files_add_job(struct init_conn *c, struct init_job *j)
{
    struct init_job **pp = &c->jobs;

    while (*pp != NULL)
        pp = &(*pp)->next;
    *pp = j;
}

static void job_free(struct init_job *j)
{
    if (j->fd >= 0)
        (void)close(j->fd);
    init_files_list_fini(j);
    free(j);
}

bool init_files_produce(struct init_conn *c)
{
    /* Round-robin, one chunk per job per pass, so transfers interleave. */
    while (c->jobs != NULL && init_conn_queued(c) < INIT_CONN_OUT_PRODUCE) {
        struct init_job **pp = &c->jobs;
        while (*pp != NULL && init_conn_queued(c) < INIT_CONN_OUT_PRODUCE) {
            struct init_job *j = *pp;
            bool done = j->list ? init_files_list_step(c, j) : init_files_read_step(c, j);
            if (done) {
                *pp = j->next;
                job_free(j);
            } else {
                pp = &j->next;
            }
        }
    }
    return c->jobs != NULL;
}

void init_files_conn_gone(struct init_conn *c)
{
    while (c->jobs != NULL) {
        struct init_job *j = c->jobs;
        c->jobs = j->next;
        job_free(j);
    }
    while (c->writes != NULL)
        write_free(c, c->writes);
}
