/* SPDX-License-Identifier: Apache-2.0 */
/* FILE_LIST: a depth-first walk producing one STAT per entry, resumable, so a huge tree is sent
 * while the connection drains instead of built in memory. Symlinks are listed, never followed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "files.h"
#include "init.h"

void init_files_list(struct init_conn *c, uint32_t id, const struct wr_file_req *r,
                     const struct init_user *u)
{
    uint64_t depth = r->depth;
    struct init_job *j;
    DIR *d;
    int fd;

    if (depth < 1)
        depth = 1;
    if (depth > INIT_MAX_DEPTH)
        depth = INIT_MAX_DEPTH;
    if (init_fs_enter(u) < 0) {
        init_conn_errorf(c, id, errno, "switch to uid %u", (unsigned)u->uid);
        return;
    }
    fd = open(r->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int saved = errno;
    init_fs_leave();
    if (fd < 0) {
        init_conn_errorf(c, id, saved, "list `%s`", r->path);
        return;
    }
    d = fdopendir(fd);
    if (d == NULL) {
        init_conn_errorf(c, id, errno, "list `%s`", r->path);
        (void)close(fd);
        return;
    }
    j = xcalloc(1, sizeof(*j));
    j->id = id;
    j->list = true;
    j->fd = -1;
    j->maxdepth = (unsigned)depth;
    init_user_copy(&j->user, u);
    j->dirs[0] = d;
    j->prefix[0] = xstrdup("");
    j->top = 1;
    init_files_add_job(c, j);
}

static void pop(struct init_job *j)
{
    j->top--;
    (void)closedir(j->dirs[j->top]);
    free(j->prefix[j->top]);
    j->dirs[j->top] = NULL;
    j->prefix[j->top] = NULL;
}

bool init_files_list_step(struct init_conn *c, struct init_job *j)
{
    /* Subdirectories open under the user's identity: unreadable ones are listed but not
     * entered. */
    if (init_fs_enter(&j->user) < 0) {
        init_conn_errorf(c, j->id, errno, "switch to uid %u", (unsigned)j->user.uid);
        return true;
    }
    for (int n = 0; n < 64 && j->top > 0; n++) {
        DIR *d = j->dirs[j->top - 1];
        const char *prefix = j->prefix[j->top - 1];
        struct dirent *de;
        struct stat st;

        errno = 0;
        de = readdir(d);
        if (de == NULL) {
            pop(j);
            continue;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* vanished meanwhile */
        _cleanup_free_ char *name =
            prefix[0] ? xasprintf("%s/%s", prefix, de->d_name) : xstrdup(de->d_name);
        _cleanup_free_ char *link =
            S_ISLNK(st.st_mode) ? init_files_readlink(dirfd(d), de->d_name) : NULL;
        init_files_stat_reply(c, j->id, name, &st, link);
        if (S_ISDIR(st.st_mode) && j->top < j->maxdepth) {
            int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            DIR *sub = fd >= 0 ? fdopendir(fd) : NULL;
            if (sub == NULL) {
                if (fd >= 0)
                    (void)close(fd);
                continue;
            }
            j->dirs[j->top] = sub;
            j->prefix[j->top] = steal_pointer(&name);
            j->top++;
        }
    }
    init_fs_leave();
    if (j->top == 0) {
        wr_msg_ok(&c->out, j->id);
        return true;
    }
    return false;
}

void init_files_list_fini(struct init_job *j)
{
    if (!j->list)
        return;
    while (j->top > 0)
        pop(j);
    init_user_fini(&j->user);
}
