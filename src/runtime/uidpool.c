/* SPDX-License-Identifier: Apache-2.0 */
/* Host id ranges handed out through lock files. */
#include "uidpool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/xalloc.h"

struct wr_uidpool {
    pthread_mutex_t lock; /* creates may run on several threads */
    int dirfd;
    uint32_t base;
    uint32_t slots;
    uint32_t next; /* next-fit: where the last search ended */
};

/* Whether a process holds a slot of the pool (any numbered lock file locked). */
static int any_held(int dirfd, struct wr_err *err)
{
    int dfd = dup(dirfd);
    DIR *d;
    struct dirent *e;
    int held = 0;

    if (dfd < 0 || (d = fdopendir(dfd)) == NULL) {
        if (dfd >= 0)
            close(dfd);
        return wr_err_sys(err, "uid pool: read the directory");
    }
    rewinddir(d);
    while (held == 0 && (e = readdir(d)) != NULL) {
        int fd;
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        fd = openat(dirfd, e->d_name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0)
            held = 1;
        close(fd); /* the lock, if taken here, goes with it */
    }
    closedir(d);
    return held;
}

/* The pool's layout is recorded in <dir>/layout ("BASE SLOTS"): slot i means a range only
 * under one layout, so a process that asks for another while any slot is held (sandboxes of a
 * daemon started with other WARREN_UID_BASE/WARREN_UID_SLOTS, or of an older one that kept no
 * record) would hand out ids that live sandboxes own. That is refused; with no slot held the
 * new layout is recorded. A matching record costs one small read. */
static int check_layout(int dirfd, uint32_t base, uint32_t slots, struct wr_err *err)
{
    char want[32], have[32] = "";
    ssize_t n = -1;
    int fd, held;

    snprintf(want, sizeof(want), "%u %u\n", base, slots);
    fd = openat(dirfd, "layout", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        n = read(fd, have, sizeof(have) - 1);
        close(fd);
        if (n > 0 && strcmp(have, want) == 0)
            return 0;
    }
    held = any_held(dirfd, err);
    if (held < 0)
        return -1;
    if (held) {
        char *nl = strchr(have, '\n');
        if (nl != NULL)
            *nl = '\0';
        return wr_err_set(err, WR_ECONFLICT, 0,
                          "uid pool: sandboxes hold id ranges laid out %s%s; asked for base %u "
                          "with %u ranges: stop them first, or start with WARREN_UID_BASE and "
                          "WARREN_UID_SLOTS as they were",
                          n > 0 ? "as `BASE SLOTS` " : "by a daemon that did not record how",
                          n > 0 ? have : "", base, slots);
    }
    fd = openat(dirfd, "layout.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return wr_err_sys(err, "uid pool: write its layout");
    n = write(fd, want, strlen(want));
    close(fd);
    if (n != (ssize_t)strlen(want) || renameat(dirfd, "layout.tmp", dirfd, "layout") < 0)
        return wr_err_sys(err, "uid pool: write its layout");
    return 0;
}

int wr_uidpool_open(const char *dir, uint32_t base, uint32_t slots, struct wr_uidpool **out,
                    struct wr_err *err)
{
    struct wr_uidpool *p;
    int fd;

    if (slots == 0 || (uint64_t)base + (uint64_t)slots * WR_UID_RANGE > UINT32_MAX)
        return wr_err_set(err, WR_EINVAL, 0, "uid pool %u + %u ranges overflows 32 bits", base,
                          slots);
    if (wr_mkdir_p(dir, 0700, err) < 0)
        return -1;
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return wr_err_sys(err, "open `%s`", dir);
    if (check_layout(fd, base, slots, err) < 0) {
        close(fd);
        return -1;
    }
    p = xcalloc(1, sizeof(*p));
    pthread_mutex_init(&p->lock, NULL);
    p->dirfd = fd;
    p->base = base;
    p->slots = slots;
    *out = p;
    return 0;
}

void wr_uidpool_close(struct wr_uidpool *p)
{
    if (p == NULL)
        return;
    close(p->dirfd);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

int wr__uidpool_dirfd(const struct wr_uidpool *p)
{
    return p->dirfd;
}

static int alloc_locked(struct wr_uidpool *p, uint32_t *host_base, int *lock_fd, struct wr_err *err)
{
    for (uint32_t i = 0; i < p->slots; i++) {
        uint32_t slot = (p->next + i) % p->slots;
        char name[16];
        int fd;

        snprintf(name, sizeof(name), "%u", slot);
        fd = openat(p->dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
            return wr_err_sys(err, "uid pool: open slot %u", slot);
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            p->next = (slot + 1) % p->slots;
            *host_base = p->base + slot * WR_UID_RANGE;
            *lock_fd = fd;
            return 0;
        }
        int e = errno;
        close(fd);
        if (e != EWOULDBLOCK)
            return wr_err_set(err, WR_ESYS, e, "uid pool: lock slot %u", slot);
    }
    return wr_err_set(err, WR_ELIMIT, 0, "uid pool: all %u id ranges are in use", p->slots);
}

int wr_uidpool_alloc(struct wr_uidpool *p, uint32_t *host_base, int *lock_fd, struct wr_err *err)
{
    int ret;

    pthread_mutex_lock(&p->lock);
    ret = alloc_locked(p, host_base, lock_fd, err);
    pthread_mutex_unlock(&p->lock);
    return ret;
}
