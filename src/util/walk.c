/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded walks of directory trees (see walk.h): a heap stack of frames, one per directory the
 * walk is in, and a hash set of inodes. */
#include "walk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xalloc.h"

/* One directory the walk is in. */
struct frame {
    int fd;
    DIR *d;        /* unsorted: read as the walk goes (owns fd) */
    char *names;   /* sorted: every name, each NUL-terminated, one after the other */
    size_t *order; /* sorted: where each name starts in names, in strcmp order */
    size_t n, next;
    size_t path_len; /* of the directory's own path */
    size_t name_off; /* where its name starts in that path (not for the top) */
    struct stat st;
    bool root;     /* directories moved up (WR_WALK_REMOVE) land in it */
    bool moved_in; /* something was moved into it since it was last read from the start */
    bool crossed;
};

struct walker {
    const struct wr_walk *w;
    unsigned max_depth;
    int top_dfd;
    const char *top_name;
    struct frame *f;
    size_t nf, capf;
    char *path; /* the path of the entry at hand */
    size_t path_len, path_cap;
    uint64_t moved;   /* names given to directories moved up */
    uint64_t visited; /* entries below the top */
};

static bool dots(const char *name)
{
    return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/* ---- the path -------------------------------------------------------------------------------- */

static void path_reserve(struct walker *k, size_t need)
{
    if (need <= k->path_cap)
        return;
    k->path_cap = need > 2 * k->path_cap ? need : 2 * k->path_cap;
    k->path = xrealloc(k->path, k->path_cap);
}

static void path_cut(struct walker *k, size_t len)
{
    k->path_len = len;
    k->path[len] = '\0';
}

/* The path becomes its first len bytes, "/" and name. Returns where name starts in it. */
static size_t path_add(struct walker *k, size_t len, const char *name)
{
    size_t n = strlen(name);

    path_reserve(k, len + n + 2);
    k->path[len] = '/';
    memcpy(k->path + len + 1, name, n + 1);
    k->path_len = len + 1 + n;
    return len + 1;
}

/* ---- frames ---------------------------------------------------------------------------------- */

static int cmp_names(const void *a, const void *b, void *names)
{
    return strcmp((const char *)names + *(const size_t *)a,
                  (const char *)names + *(const size_t *)b);
}

/* Read every name of f's directory (on a dup of its fd: f->fd stays for the *at calls) and sort
 * them. */
static int read_sorted(struct walker *k, struct frame *f, struct wr_err *err)
{
    int fd = fcntl(f->fd, F_DUPFD_CLOEXEC, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    size_t used = 0, cap = 0, ocap = 0;
    int r = 0;

    if (d == NULL) {
        r = wr_err_sys(err, "open `%s`", k->path);
        if (fd >= 0)
            (void)close(fd);
        return r;
    }
    for (struct dirent *de; (errno = 0, de = readdir(d)) != NULL;) {
        size_t len = strlen(de->d_name) + 1;
        if (dots(de->d_name))
            continue;
        if (used + len + (f->n + 1) * sizeof(size_t) > WR_WALK_MAX_NAMES) {
            r = wr_err_set(err, WR_EINVAL, 0, "a directory with more than %u MiB of names: `%s`",
                           WR_WALK_MAX_NAMES >> 20, k->path);
            break;
        }
        if (used + len > cap) {
            cap = cap ? 2 * cap : 4096;
            f->names = xrealloc(f->names, cap);
        }
        if (f->n == ocap) {
            ocap = ocap ? 2 * ocap : 64;
            f->order = xrealloc(f->order, ocap * sizeof(size_t));
        }
        memcpy(f->names + used, de->d_name, len);
        f->order[f->n++] = used;
        used += len;
    }
    if (r == 0 && errno != 0)
        r = wr_err_sys(err, "read `%s`", k->path);
    (void)closedir(d);
    if (r == 0 && f->n > 1)
        qsort_r(f->order, f->n, sizeof(size_t), cmp_names, f->names);
    return r;
}

static void frame_close(struct frame *f)
{
    if (f->d != NULL)
        (void)closedir(f->d);
    else if (f->fd >= 0)
        (void)close(f->fd);
    free(f->names);
    free(f->order);
}

/* Enter the directory open at fd (taken over: closed on failure too), whose path is the path at
 * hand. */
static int push(struct walker *k, int fd, const struct stat *st, size_t name_off, bool crossed,
                struct wr_err *err)
{
    struct frame *f;

    if (k->nf == k->capf) {
        k->capf = k->capf ? 2 * k->capf : 16;
        k->f = xrealloc(k->f, k->capf * sizeof(*k->f));
    }
    f = &k->f[k->nf];
    *f = (struct frame){.fd = fd,
                        .st = *st,
                        .path_len = k->path_len,
                        .name_off = name_off,
                        .root = k->nf == 0 || crossed,
                        .crossed = crossed};
    if (k->w->flags & WR_WALK_SORTED) {
        if (read_sorted(k, f, err) < 0) {
            frame_close(f);
            return -1;
        }
    } else if ((f->d = fdopendir(fd)) == NULL) {
        int r = wr_err_sys(err, "open `%s`", k->path);
        frame_close(f);
        return r;
    }
    k->nf++;
    return 0;
}

/* The next name of the innermost directory, or NULL at its end. The path at hand is the
 * directory's. */
static int next_name(struct walker *k, struct frame *f, const char **name, struct wr_err *err)
{
    if (k->w->flags & WR_WALK_SORTED) {
        *name = f->next < f->n ? f->names + f->order[f->next++] : NULL;
        return 0;
    }
    for (;;) {
        struct dirent *de;

        errno = 0;
        de = readdir(f->d);
        if (de == NULL && errno != 0)
            return wr_err_sys(err, "read `%s`", k->path);
        if (de == NULL && f->moved_in) {
            f->moved_in = false;
            rewinddir(f->d);
            continue;
        }
        if (de == NULL || !dots(de->d_name)) {
            *name = de != NULL ? de->d_name : NULL;
            return 0;
        }
    }
}

/* Leave the innermost directory. */
static int pop(struct walker *k, struct wr_err *err)
{
    struct frame *f = &k->f[k->nf - 1];
    struct wr_walk_ent e = {.fd = f->fd,
                            .st = f->st,
                            .depth = (unsigned)(k->nf - 1),
                            .crossed = f->crossed,
                            .path = k->path,
                            .path_len = f->path_len};
    int r = 0;

    if (k->nf == 1) {
        e.dirfd = k->top_dfd;
        e.name = k->top_name;
    } else {
        e.dirfd = k->f[k->nf - 2].fd;
        e.name = k->path + f->name_off;
    }
    if (k->w->leave != NULL)
        r = k->w->leave(&e, k->w->ctx, err);
    frame_close(f);
    k->nf--;
    return r;
}

/* ---- entries --------------------------------------------------------------------------------- */

/* 1 if the directory open at fd is the root of a mount, 0 if not, -1 if the kernel cannot say
 * (statx's attribute is from Linux 5.8). */
static int mount_root(int fd)
{
    struct statx stx;

    if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, 0, &stx) < 0 ||
        !(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
        return -1;
    return (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
}

/* A removal's way past max_depth: rename the directory name of the innermost one into the
 * nearest root under a fresh name; the root reads itself again once done. */
static int move_up(struct walker *k, const char *name, struct wr_err *err)
{
    struct frame *f = &k->f[k->nf - 1], *root = f;

    while (!root->root)
        root--;
    if (root == f)
        return wr_err_set(err, WR_ELIMIT, 0, "`%s`: no directory to move it up to", k->path);
    for (;;) {
        char fresh[48];

        snprintf(fresh, sizeof(fresh), ".warren-deep-%" PRIu64, k->moved++);
        if (renameat2(f->fd, name, root->fd, fresh, RENAME_NOREPLACE) == 0) {
            root->moved_in = true;
            return 0;
        }
        if (errno == ENOENT)
            return 0;
        if (errno != EEXIST)
            return wr_err_sys(err, "move `%s` up", k->path);
    }
}

/* A directory the walk would enter past max_depth. */
static int too_deep(struct walker *k, const char *name, struct wr_err *err)
{
    if (k->w->flags & WR_WALK_REMOVE)
        return move_up(k, name, err);
    return wr_err_set(err, WR_EINVAL, 0, "a tree deeper than %u directories: `%s`", k->max_depth,
                      k->path);
}

/* Refuse a mount point (a bind mount of the same filesystem too); a change of device that is not
 * one (a btrfs subvolume) is crossed with WR_WALK_CROSS. */
static int check_mount(struct walker *k, struct wr_walk_ent *e, dev_t parent, struct wr_err *err)
{
    int m = mount_root(e->fd);

    if (m == 1 || (e->st.st_dev != parent && (m < 0 || !(k->w->flags & WR_WALK_CROSS))))
        return wr_err_set(err, WR_ECONFLICT, 0, "`%s` is a mount point", k->path);
    e->crossed = e->st.st_dev != parent;
    return 0;
}

/* The entry name of the innermost directory: visit it, and enter it if it is a directory. */
static int visit_child(struct walker *k, const char *name, struct wr_err *err)
{
    struct frame *f = &k->f[k->nf - 1];
    size_t name_off = path_add(k, f->path_len, name);
    struct wr_walk_ent e = {.dirfd = f->fd,
                            .name = k->path + name_off,
                            .path = k->path,
                            .path_len = k->path_len,
                            .fd = -1,
                            .depth = (unsigned)k->nf};
    int r;

    if (k->w->max_entries != 0 && ++k->visited > k->w->max_entries)
        return wr_err_set(err, WR_ELIMIT, 0, "more than %" PRIu64 " entries (or changing too fast)",
                          k->w->max_entries);
    for (int tries = 0;; tries++) {
        if (fstatat(f->fd, e.name, &e.st, AT_SYMLINK_NOFOLLOW) < 0)
            return errno == ENOENT ? 0 : wr_err_sys(err, "stat `%s`", k->path);
        if (!S_ISDIR(e.st.st_mode))
            return k->w->visit(&e, k->w->ctx, err) < 0 ? -1 : 0;
        if (e.depth > k->max_depth)
            return too_deep(k, e.name, err);
        e.fd = openat(f->fd, e.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (e.fd >= 0)
            break;
        if (errno == ENOENT)
            return 0;
        /* Replaced by something else since the stat (a running sandbox): look again. */
        if ((errno == ENOTDIR || errno == ELOOP) && tries < 3)
            continue;
        if ((errno == EMFILE || errno == ENFILE) && (k->w->flags & WR_WALK_REMOVE))
            return move_up(k, e.name, err);
        return wr_err_sys(err, "open `%s`", k->path);
    }
    if (fstat(e.fd, &e.st) < 0)
        r = wr_err_sys(err, "stat `%s`", k->path);
    else if ((r = check_mount(k, &e, f->st.st_dev, err)) == 0)
        r = k->w->visit(&e, k->w->ctx, err);
    if (r != 0) {
        (void)close(e.fd);
        return r < 0 ? -1 : 0;
    }
    return push(k, e.fd, &e.st, name_off, e.crossed, err);
}

/* The top: visit it, and enter it if it is a directory. Returns 1 when entered. */
static int visit_top(struct walker *k, int dfd, const char *name, struct wr_err *err)
{
    struct wr_walk_ent e = {
        .dirfd = dfd, .name = name, .path = k->path, .path_len = k->path_len, .fd = -1};
    int r;

    if (fstatat(dfd, name, &e.st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT && (k->w->flags & WR_WALK_MISSING_OK))
            return 0;
        return wr_err_sys(err, "stat `%s`", k->path);
    }
    if (!S_ISDIR(e.st.st_mode))
        return k->w->visit(&e, k->w->ctx, err) < 0 ? -1 : 0;
    e.fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (e.fd < 0) {
        if (errno == ENOENT && (k->w->flags & WR_WALK_MISSING_OK))
            return 0;
        return wr_err_sys(err, "open `%s`", k->path);
    }
    if (fstat(e.fd, &e.st) < 0)
        r = wr_err_sys(err, "stat `%s`", k->path);
    else if (mount_root(e.fd) == 1)
        r = wr_err_set(err, WR_ECONFLICT, 0, "`%s` is a mount point", k->path);
    else
        r = k->w->visit(&e, k->w->ctx, err);
    if (r != 0) {
        (void)close(e.fd);
        return r < 0 ? -1 : 0;
    }
    return push(k, e.fd, &e.st, 0, false, err) < 0 ? -1 : 1;
}

int wr_walk_at(int dfd, const char *name, const struct wr_walk *w, struct wr_err *err)
{
    struct walker k = {.w = w, .top_dfd = dfd, .top_name = name};
    const char *prefix = w->prefix != NULL ? w->prefix : name;
    int r;

    k.max_depth = w->max_depth                ? w->max_depth
                  : w->flags & WR_WALK_REMOVE ? WR_WALK_REMOVE_DEPTH
                                              : WR_WALK_MAX_DEPTH;
    k.path_len = strlen(prefix);
    path_reserve(&k, k.path_len + 1);
    memcpy(k.path, prefix, k.path_len + 1);
    r = visit_top(&k, dfd, name, err);
    while (r > 0 && k.nf > 0) {
        struct frame *f = &k.f[k.nf - 1];
        const char *child = NULL;

        path_cut(&k, f->path_len);
        if (next_name(&k, f, &child, err) < 0)
            r = -1;
        else if ((child == NULL ? pop(&k, err) : visit_child(&k, child, err)) < 0)
            r = -1;
    }
    while (k.nf > 0)
        frame_close(&k.f[--k.nf]);
    free(k.f);
    free(k.path);
    return r < 0 ? -1 : 0;
}

/* ---- a set of inodes ------------------------------------------------------------------------- */

struct wr_inode_slot {
    dev_t dev;
    ino_t ino;
    uint64_t value;
    bool used;
};

static size_t inode_hash(const struct wr_inodes *s, dev_t dev, ino_t ino)
{
    uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15u ^ (uint64_t)dev * 0xc2b2ae3d27d4eb4fu;
    return (size_t)(h ^ (h >> 29)) & (s->cap - 1);
}

static struct wr_inode_slot *inode_slot(const struct wr_inodes *s, dev_t dev, ino_t ino)
{
    size_t i = inode_hash(s, dev, ino);

    while (s->slot[i].used && (s->slot[i].dev != dev || s->slot[i].ino != ino))
        i = (i + 1) & (s->cap - 1);
    return &s->slot[i];
}

bool wr_inodes_add(struct wr_inodes *s, const struct stat *st, uint64_t value, uint64_t *old)
{
    struct wr_inode_slot *e;

    if ((s->n + 1) * 2 > s->cap) {
        struct wr_inode_slot *was = s->slot;
        size_t n = s->cap;

        s->cap = n ? 2 * n : 64;
        s->slot = xcalloc(s->cap, sizeof(*s->slot));
        for (size_t i = 0; i < n; i++)
            if (was[i].used)
                *inode_slot(s, was[i].dev, was[i].ino) = was[i];
        free(was);
    }
    e = inode_slot(s, st->st_dev, st->st_ino);
    if (e->used) {
        if (old != NULL)
            *old = e->value;
        return false;
    }
    *e = (struct wr_inode_slot){st->st_dev, st->st_ino, value, true};
    s->n++;
    return true;
}

void wr_inodes_fini(struct wr_inodes *s)
{
    free(s->slot);
    *s = (struct wr_inodes){0};
}
