/* SPDX-License-Identifier: Apache-2.0 */
/* The changes between two overlay trees with shared bottom layers (see ovldiff.h). */
#include "ovldiff.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/strv.h"
#include "../util/utf8.h"
#include "../util/walk.h"
#include "../util/xalloc.h"
#include "textdiff.h"

/* Layer ids: a shared layer has its index from the bottom; the others are told apart by side. */
#define OLD_ID              1000
#define NEW_ID              2000
#define MAX_OUT_DEFAULT     10000
#define CONTENT_MAX_DEFAULT (1u << 20)

const char *wr_ovl_change_name(enum wr_ovl_change_kind k)
{
    static const char *const names[] = {"added", "modified", "deleted", "renamed"};
    return names[k];
}

const char *wr_ovl_type_name(enum wr_ovl_type t)
{
    static const char *const names[] = {"file", "dir", "symlink", "other"};
    return names[t];
}

/* One directory of the merged tree in its layers, topmost first: fds owned. */
struct lyr {
    int fd;
    int id;
};
struct dset {
    struct lyr *v;
    size_t n;
};

static void dset_push(struct dset *d, int fd, int id)
{
    d->v = xrealloc(d->v, (d->n + 1) * sizeof(*d->v));
    d->v[d->n++] = (struct lyr){fd, id};
}

static void dset_fini(struct dset *d)
{
    for (size_t i = 0; i < d->n; i++)
        close(d->v[i].fd);
    free(d->v);
    *d = (struct dset){0};
}

/* Whether the two sets hold the same shared layers (their other layers aside). */
static bool shared_equal(const struct dset *a, const struct dset *b)
{
    size_t i = 0, j = 0;

    for (;;) {
        while (i < a->n && a->v[i].id >= OLD_ID)
            i++;
        while (j < b->n && b->v[j].id >= OLD_ID)
            j++;
        if (i == a->n || j == b->n)
            return i == a->n && j == b->n;
        if (a->v[i++].id != b->v[j++].id)
            return false;
    }
}

/* Whether both sets are made of the same shared layers only: the same directory both sides. */
static bool all_shared_equal(const struct dset *a, const struct dset *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (a->v[i].id >= OLD_ID || a->v[i].id != b->v[i].id)
            return false;
    return true;
}

/* A name as the merged tree has it in one directory. */
struct ent {
    bool present;
    struct stat st;
    int id;          /* the layer that gives it */
    int pfd;         /* its directory in that layer (borrowed from the set resolved in) */
    struct dset sub; /* a directory: its directories in the layers, topmost first */
};

/* Only the trusted.* marks: overlayfs honours user.overlay.* only on userxattr mounts (warrend
 * makes none), and a sandbox can set user.* xattrs: honouring them would let it hide files. */
static bool opaque(int dirfd)
{
    char v[2];
    return fgetxattr(dirfd, "trusted.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y';
}

static bool whiteout(int dirfd, const char *name, const struct stat *st)
{
    if (S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0))
        return true;
    if (S_ISREG(st->st_mode) && st->st_size == 0) {
        _cleanup_close_ int fd =
            openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        return fd >= 0 && fgetxattr(fd, "trusted.overlay.whiteout", NULL, 0) >= 0;
    }
    return false;
}

/* Look name up in the directory d as overlayfs does. e->present false: not there (or a
 * whiteout). A directory's layers go into e->sub (the caller frees it with dset_fini). */
static int resolve(const struct dset *d, const char *name, struct ent *e, struct wr_err *err)
{
    bool found = false;

    *e = (struct ent){.id = -1, .pfd = -1};
    for (size_t i = 0; i < d->n; i++) {
        struct stat st;
        int fd;

        if (fstatat(d->v[i].fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT || errno == ENOTDIR)
                continue;
            return wr_err_sys(err, "stat `%s`", name);
        }
        if (!found) {
            if (whiteout(d->v[i].fd, name, &st))
                return 0;
            found = true;
            e->present = true;
            e->st = st;
            e->id = d->v[i].id;
            e->pfd = d->v[i].fd;
            if (!S_ISDIR(st.st_mode))
                return 0;
        } else if (!S_ISDIR(st.st_mode)) {
            return 0; /* a non-directory (or a whiteout) ends the merge */
        }
        fd = openat(d->v[i].fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            if (errno == ENOENT || errno == ENOTDIR) {
                if (e->sub.n == 0)
                    e->present = false; /* vanished meanwhile */
                return 0;
            }
            return wr_err_sys(err, "open `%s`", name);
        }
        dset_push(&e->sub, fd, d->v[i].id);
        if (opaque(fd))
            return 0;
    }
    return 0;
}

static enum wr_ovl_type type_of(mode_t m)
{
    if (S_ISREG(m))
        return WR_OVL_FILE;
    if (S_ISDIR(m))
        return WR_OVL_DIR;
    if (S_ISLNK(m))
        return WR_OVL_SYMLINK;
    return WR_OVL_OTHER;
}

static struct wr_ovl_entry entry_of(const struct stat *st)
{
    enum wr_ovl_type t = type_of(st->st_mode);
    return (struct wr_ovl_entry){
        .type = t,
        .size = (t == WR_OVL_FILE || t == WR_OVL_SYMLINK) ? (uint64_t)st->st_size : 0,
        .mode = st->st_mode & 07777,
        .uid = st->st_uid,
        .gid = st->st_gid,
    };
}

struct ctx {
    const char *scope; /* "" for everything */
    size_t scope_len;
    size_t max;
    uint64_t budget;  /* content bytes left to compare or hash */
    uint64_t entries; /* names read */
    struct wr_ovl_diff *out;
    size_t cap;
    struct dset old_root, new_root;
};

/* A regular file of the layer directory dirfd, opened (never a FIFO or a device). */
static int open_reg(int dirfd, const char *name, struct stat *st, struct wr_err *err)
{
    _cleanup_close_ int fd =
        openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat tmp;

    if (st == NULL)
        st = &tmp;
    if (fd < 0)
        return wr_err_sys(err, "open `%s`", name);
    if (fstat(fd, st) < 0)
        return wr_err_sys(err, "stat `%s`", name);
    if (!S_ISREG(st->st_mode))
        return wr_err_set(err, WR_ECONFLICT, 0, "`%s` is no longer a regular file", name);
    return steal_fd(&fd);
}

/* Whether two regular files of equal size hold different bytes: 1, 0, or 1 past the budget or
 * when one cannot be read any more (a running sandbox changed it). */
static int content_differs(struct ctx *c, const struct ent *a, const struct ent *b,
                           const char *name)
{
    _cleanup_close_ int fa = -1, fb = -1;
    _cleanup_free_ char *ba = NULL, *bb = NULL;
    uint64_t size = (uint64_t)a->st.st_size;

    if (size > c->budget)
        return 1;
    c->budget -= size;
    fa = open_reg(a->pfd, name, NULL, NULL);
    fb = open_reg(b->pfd, name, NULL, NULL);
    if (fa < 0 || fb < 0)
        return 1;
    ba = xmalloc(65536);
    bb = xmalloc(65536);
    for (;;) {
        ssize_t ra = wr_read_all(fa, ba, 65536), rb = wr_read_all(fb, bb, 65536);
        if (ra < 0 || rb < 0 || ra != rb || memcmp(ba, bb, (size_t)ra) != 0)
            return 1;
        if (ra == 0)
            return 0;
    }
}

static char *read_link(int dirfd, const char *name, size_t size)
{
    char *t = xmalloc(size + 2);
    ssize_t n = readlinkat(dirfd, name, t, size + 1);

    if (n < 0)
        n = 0;
    t[n] = '\0';
    return t;
}

/* Whether two present entries of the same name differ in what a diff reports. */
static bool differs(struct ctx *c, const struct ent *a, const struct ent *b, const char *name)
{
    const struct stat *x = &a->st, *y = &b->st;

    if (type_of(x->st_mode) != type_of(y->st_mode) ||
        (x->st_mode & 07777) != (y->st_mode & 07777) || x->st_uid != y->st_uid ||
        x->st_gid != y->st_gid)
        return true;
    if (a->id == b->id)
        return false;
    switch (type_of(x->st_mode)) {
    case WR_OVL_FILE:
        return x->st_size != y->st_size || content_differs(c, a, b, name) != 0;
    case WR_OVL_SYMLINK: {
        if (x->st_size != y->st_size)
            return true;
        _cleanup_free_ char *ta = read_link(a->pfd, name, (size_t)x->st_size);
        _cleanup_free_ char *tb = read_link(b->pfd, name, (size_t)y->st_size);
        return strcmp(ta, tb) != 0;
    }
    case WR_OVL_OTHER:
        return (x->st_mode & S_IFMT) != (y->st_mode & S_IFMT) || x->st_rdev != y->st_rdev;
    default:
        return false;
    }
}

/* 1: the walk is to stop (max reached). */
static int record(struct ctx *c, const char *path, enum wr_ovl_change_kind k, const struct ent *now,
                  const struct ent *old)
{
    struct wr_ovl_change *ch;

    if (c->out->n >= c->max) {
        c->out->truncated = true;
        return 1;
    }
    if (c->out->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->out->changes = xrealloc(c->out->changes, c->cap * sizeof(*c->out->changes));
    }
    ch = &c->out->changes[c->out->n++];
    *ch = (struct wr_ovl_change){.path = xstrdup(path), .change = k, .now = entry_of(&now->st)};
    if (old != NULL)
        ch->old = entry_of(&old->st);
    return 0;
}

/* Where path is against the scope: 0 outside, 1 an ancestor (entered, not reported), 2 in it. */
static int in_scope(const struct ctx *c, const char *path)
{
    size_t n = strlen(path);

    if (c->scope_len == 0)
        return 2;
    if (strncmp(path, c->scope, c->scope_len) == 0 &&
        (path[c->scope_len] == '\0' || path[c->scope_len] == '/'))
        return 2;
    if (n < c->scope_len && strncmp(c->scope, path, n) == 0 && c->scope[n] == '/')
        return 1;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Add the names of directory fd to *names (a fresh open of it: fd's own offset is left). */
static int add_names(struct ctx *c, int fd, char ***names, size_t *n, size_t *cap,
                     struct wr_err *err)
{
    int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_closedir_ DIR *dir = NULL;
    struct dirent *de;

    if (dfd < 0)
        return wr_err_sys(err, "open directory");
    dir = fdopendir(dfd);
    if (dir == NULL) {
        close(dfd);
        return wr_err_sys(err, "open directory");
    }
    while ((errno = 0, de = readdir(dir)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (++c->entries > WR_WALK_LIVE_ENTRIES)
            return wr_err_set(err, WR_ELIMIT, 0, "more than %u entries", WR_WALK_LIVE_ENTRIES);
        if (*n == *cap) {
            *cap = *cap ? 2 * *cap : 32;
            *names = xrealloc(*names, *cap * sizeof(char *));
        }
        (*names)[(*n)++] = xstrdup(de->d_name);
    }
    if (errno != 0)
        return wr_err_sys(err, "read directory");
    return 0;
}

static int diff_dir(struct ctx *c, const char *path, const struct dset *o, const struct dset *n,
                    unsigned depth, struct wr_err *err);

/* One name of a directory on both sides. 0, 1 to stop, -1 with err. */
static int diff_ent(struct ctx *c, const char *path, const char *name, const struct ent *eo,
                    const struct ent *en, unsigned depth, struct wr_err *err)
{
    static const struct dset none = {0};
    int scope = in_scope(c, path), r = 0;
    bool rec = scope == 2;
    bool od, nd;

    if (scope == 0 || (!eo->present && !en->present))
        return 0;
    od = eo->present && S_ISDIR(eo->st.st_mode);
    nd = en->present && S_ISDIR(en->st.st_mode);
    if (eo->present && en->present) {
        if (od && nd && all_shared_equal(&eo->sub, &en->sub))
            return 0;
        if (rec && differs(c, eo, en, name) && record(c, path, WR_OVL_MODIFIED, en, eo))
            return 1;
    } else if (rec && record(c, path, en->present ? WR_OVL_ADDED : WR_OVL_DELETED,
                             en->present ? en : eo, NULL)) {
        return 1;
    }
    if (!od && !nd)
        return 0;
    if (depth + 1 > WR_OVL_MAX_DEPTH)
        return wr_err_set(err, WR_EINVAL, 0, "`%s` is deeper than %d levels", path,
                          WR_OVL_MAX_DEPTH);
    r = diff_dir(c, path, od ? &eo->sub : &none, nd ? &en->sub : &none, depth + 1, err);
    return r;
}

static int diff_dir(struct ctx *c, const char *path, const struct dset *o, const struct dset *n,
                    unsigned depth, struct wr_err *err)
{
    bool same = shared_equal(o, n);
    char **names = NULL;
    size_t nn = 0, cap = 0, u = 0;
    int r = 0;

    for (int side = 0; side < 2 && r == 0; side++) {
        const struct dset *d = side ? n : o;
        for (size_t i = 0; i < d->n && r == 0; i++) {
            bool dup = false;
            if (d->v[i].id < OLD_ID && same)
                continue; /* the same on both sides */
            for (size_t j = 0; side == 1 && j < o->n; j++)
                dup |= o->v[j].id == d->v[i].id;
            if (!dup)
                r = add_names(c, d->v[i].fd, &names, &nn, &cap, err);
        }
    }
    if (r == 0 && nn > 0) {
        qsort(names, nn, sizeof(char *), cmp_str);
        for (size_t i = 0; i < nn; i++) {
            if (u > 0 && strcmp(names[u - 1], names[i]) == 0) {
                free(names[i]);
                continue;
            }
            names[u++] = names[i];
        }
        nn = u;
    }
    for (size_t i = 0; i < nn && r == 0; i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s", path, names[i]);
        struct ent eo, en;

        if (in_scope(c, p) == 0)
            continue;
        r = resolve(o, names[i], &eo, err);
        if (r == 0)
            r = resolve(n, names[i], &en, err);
        else
            en = (struct ent){0};
        if (r == 0)
            r = diff_ent(c, p, names[i], &eo, &en, depth, err);
        dset_fini(&eo.sub);
        dset_fini(&en.sub);
    }
    for (size_t i = 0; i < nn; i++)
        free(names[i]);
    free(names);
    return r;
}

/* ---- opening the two trees ----------------------------------------------------------------- */

static size_t shared_count(const struct wr_ovl_stack *a, const struct wr_ovl_stack *b)
{
    size_t k = 0;
    while (k < a->n && k < b->n && strcmp(a->dirs[k], b->dirs[k]) == 0)
        k++;
    return k;
}

static int open_roots(struct ctx *c, const struct wr_ovl_stack *old, const struct wr_ovl_stack *new,
                      struct wr_err *err)
{
    size_t ns = shared_count(old, new);

    for (int side = 0; side < 2; side++) {
        const struct wr_ovl_stack *s = side ? new : old;
        struct dset *d = side ? &c->new_root : &c->old_root;
        for (size_t i = s->n; i-- > 0;) {
            int fd = open(s->dirs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (fd < 0) {
                if (errno == ENOENT)
                    return wr_err_set(err, WR_ECONFLICT, 0,
                                      "a layer of the %s tree is gone (removed meanwhile)",
                                      side ? "new" : "old");
                return wr_err_sys(err, "open layer `%s`", s->dirs[i]);
            }
            dset_push(d, fd, i < ns ? (int)i : (side ? NEW_ID : OLD_ID) + (int)i);
        }
    }
    return 0;
}

static void ctx_fini(struct ctx *c)
{
    dset_fini(&c->old_root);
    dset_fini(&c->new_root);
}

/* ---- renames ------------------------------------------------------------------------------ */

/* The entry at path (absolute, clean) of a tree: *parent is the set of its directory (the
 * caller frees it, and e->sub). */
static int lookup(const struct dset *root, const char *path, struct dset *parent, struct ent *e,
                  struct wr_err *err)
{
    _cleanup_free_ char *copy = xstrdup(path);
    char *p = copy + 1, *slash;

    *parent = (struct dset){0};
    for (size_t i = 0; i < root->n; i++) {
        int fd = fcntl(root->v[i].fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
            return wr_err_sys(err, "dup");
        dset_push(parent, fd, root->v[i].id);
    }
    while ((slash = strchr(p, '/')) != NULL) {
        *slash = '\0';
        if (resolve(parent, p, e, err) < 0)
            return -1;
        dset_fini(parent);
        *parent = e->sub;
        e->sub = (struct dset){0};
        if (!e->present || !S_ISDIR(e->st.st_mode)) {
            dset_fini(parent);
            *e = (struct ent){0};
            return 0;
        }
        p = slash + 1;
    }
    return resolve(parent, p, e, err);
}

static const char *base_name(const char *path)
{
    return strrchr(path, '/') + 1;
}

/* The SHA-256 of the regular file at path of a tree, or false (gone, not regular, over budget). */
static bool hash_file(struct ctx *c, const struct dset *root, const char *path, uint64_t size,
                      unsigned char md[32])
{
    struct dset parent;
    struct ent e;
    bool ok = false;
    struct wr_err err;

    if (size > c->budget)
        return false;
    c->budget -= size;
    if (lookup(root, path, &parent, &e, &err) == 0 && e.present && S_ISREG(e.st.st_mode)) {
        _cleanup_close_ int fd = open_reg(e.pfd, base_name(path), NULL, NULL);
        EVP_MD_CTX *h = fd >= 0 ? EVP_MD_CTX_new() : NULL;
        char buf[65536];
        ssize_t r = 0;

        if (h != NULL && EVP_DigestInit_ex(h, EVP_sha256(), NULL) == 1) {
            while ((r = wr_read_all(fd, buf, sizeof(buf))) > 0)
                EVP_DigestUpdate(h, buf, (size_t)r);
            ok = r == 0 && EVP_DigestFinal_ex(h, md, NULL) == 1;
        }
        EVP_MD_CTX_free(h);
    }
    dset_fini(&parent);
    dset_fini(&e.sub);
    return ok;
}

struct cand {
    size_t idx;
    bool hashed, ok, used;
    unsigned char md[32];
};

static int cmp_cand_size(const void *a, const void *b, void *arg)
{
    const struct wr_ovl_change *ch = arg;
    const struct cand *x = a, *y = b;
    uint64_t sx = ch[x->idx].now.size, sy = ch[y->idx].now.size;

    if (sx != sy)
        return sx < sy ? -1 : 1;
    return strcmp(ch[x->idx].path, ch[y->idx].path);
}

static bool cand_hash(struct ctx *c, struct cand *k, const struct dset *root)
{
    struct wr_ovl_change *ch = &c->out->changes[k->idx];

    if (!k->hashed) {
        k->hashed = true;
        k->ok = hash_file(c, root, ch->path, ch->now.size, k->md);
    }
    return k->ok;
}

/* Pair added and deleted regular files of equal content (ovldiff.h). */
static void find_renames(struct ctx *c)
{
    struct wr_ovl_diff *d = c->out;
    struct cand *added = NULL, *deleted = NULL;
    size_t na = 0, nd = 0, kept = 0;

    for (size_t i = 0; i < d->n; i++) {
        const struct wr_ovl_change *ch = &d->changes[i];
        if (ch->now.type != WR_OVL_FILE || ch->now.size == 0)
            continue;
        if (ch->change == WR_OVL_ADDED) {
            added = xrealloc(added, (na + 1) * sizeof(*added));
            added[na++] = (struct cand){.idx = i};
        } else if (ch->change == WR_OVL_DELETED) {
            deleted = xrealloc(deleted, (nd + 1) * sizeof(*deleted));
            deleted[nd++] = (struct cand){.idx = i};
        }
    }
    if (na > 0 && nd > 0) {
        qsort_r(added, na, sizeof(*added), cmp_cand_size, d->changes);
        qsort_r(deleted, nd, sizeof(*deleted), cmp_cand_size, d->changes);
        for (size_t i = 0, j0 = 0; i < na; i++) {
            struct wr_ovl_change *a = &d->changes[added[i].idx];
            while (j0 < nd && d->changes[deleted[j0].idx].now.size < a->now.size)
                j0++;
            for (size_t j = j0; j < nd && d->changes[deleted[j].idx].now.size == a->now.size; j++) {
                struct wr_ovl_change *del = &d->changes[deleted[j].idx];
                if (deleted[j].used)
                    continue;
                if (!cand_hash(c, &added[i], &c->new_root))
                    break;
                if (!cand_hash(c, &deleted[j], &c->old_root) ||
                    memcmp(added[i].md, deleted[j].md, 32) != 0)
                    continue;
                deleted[j].used = true;
                a->change = WR_OVL_RENAMED;
                a->from = steal_pointer(&del->path);
                a->old = del->now;
                break;
            }
        }
        /* Drop the deleted entries that became renames' `from`. */
        for (size_t i = 0; i < d->n; i++) {
            if (d->changes[i].path == NULL)
                continue;
            d->changes[kept++] = d->changes[i];
        }
        d->n = kept;
    }
    free(added);
    free(deleted);
}

static int cmp_change(const void *a, const void *b)
{
    return strcmp(((const struct wr_ovl_change *)a)->path, ((const struct wr_ovl_change *)b)->path);
}

void wr_ovl_diff_fini(struct wr_ovl_diff *d)
{
    for (size_t i = 0; i < d->n; i++) {
        free(d->changes[i].path);
        free(d->changes[i].from);
    }
    free(d->changes);
    *d = (struct wr_ovl_diff){0};
}

static void ctx_init(struct ctx *c, const char *scope, size_t max, struct wr_ovl_diff *out)
{
    *c = (struct ctx){.scope = "",
                      .max = max ? max : MAX_OUT_DEFAULT,
                      .out = out,
                      .budget = WR_OVL_COMPARE_BUDGET};
    if (scope != NULL && strcmp(scope, "/") != 0)
        c->scope = scope;
    c->scope_len = strlen(c->scope);
}

int wr_ovl_diff(const struct wr_ovl_stack *old, const struct wr_ovl_stack *new, const char *scope,
                size_t max, struct wr_ovl_diff *out, struct wr_err *err)
{
    struct wr_ovl_diff tmp = {0};
    struct ctx c;
    int r;

    *out = (struct wr_ovl_diff){0};
    ctx_init(&c, scope, max, &tmp);
    r = open_roots(&c, old, new, err);
    if (r == 0)
        r = diff_dir(&c, "", &c.old_root, &c.new_root, 0, err);
    if (r >= 0)
        find_renames(&c);
    ctx_fini(&c);
    if (r < 0) {
        wr_ovl_diff_fini(&tmp);
        return -1;
    }
    if (tmp.n > 1)
        qsort(tmp.changes, tmp.n, sizeof(*tmp.changes), cmp_change);
    *out = tmp;
    return 0;
}

/* ---- one file's content ---------------------------------------------------------------------- */

void wr_ovl_content_fini(struct wr_ovl_content *c)
{
    free(c->diff);
    *c = (struct wr_ovl_content){0};
}

/* The text of e (name in its layer directory), up to max + 1 bytes (*n bytes; *over if more). A
 * missing entry is empty; a symlink's text is its target. */
static int read_side(const struct ent *e, const char *name, size_t max, char **text, size_t *n,
                     bool *over, struct wr_err *err)
{
    *text = NULL;
    *n = 0;
    if (!e->present)
        return 0;
    if (S_ISLNK(e->st.st_mode)) {
        *text = read_link(e->pfd, name, (size_t)e->st.st_size);
        *n = strlen(*text);
    } else if (S_ISREG(e->st.st_mode)) {
        _cleanup_close_ int fd = open_reg(e->pfd, name, NULL, err);
        ssize_t r;

        if (fd < 0)
            return -1;
        *text = xmalloc(max + 2);
        r = wr_read_all(fd, *text, max + 1);
        if (r < 0)
            return wr_err_sys(err, "read `%s`", name);
        *n = (size_t)r;
        (*text)[*n] = '\0';
    }
    if (*n > max)
        *over = true;
    return 0;
}

static bool is_binary(const char *p, size_t n)
{
    size_t i = 0;

    if (memchr(p, '\0', n) != NULL)
        return true;
    while (i < n) {
        int k = wr_utf8_seq((const uint8_t *)p + i, n - i);
        if (k <= 0)
            return true;
        i += (size_t)k;
    }
    return false;
}

int wr_ovl_content(const struct wr_ovl_stack *old, const struct wr_ovl_stack *new, const char *path,
                   size_t max, struct wr_ovl_content *out, struct wr_err *err)
{
    struct wr_ovl_diff unused = {0};
    struct dset po = {0}, pn = {0};
    struct ent eo = {0}, en = {0};
    _cleanup_free_ char *ta = NULL, *tb = NULL, *la = NULL, *lb = NULL;
    size_t na = 0, nb = 0;
    const char *name = base_name(path);
    struct ctx c;
    int r = -1;

    *out = (struct wr_ovl_content){0};
    if (max == 0)
        max = CONTENT_MAX_DEFAULT;
    if (strcmp(path, "/") == 0)
        return wr_err_set(err, WR_EINVAL, 0, "`/` is a directory");
    ctx_init(&c, NULL, 1, &unused);
    if (open_roots(&c, old, new, err) < 0 || lookup(&c.old_root, path, &po, &eo, err) < 0 ||
        lookup(&c.new_root, path, &pn, &en, err) < 0)
        goto out;
    if (!eo.present && !en.present) {
        wr_err_set(err, WR_ENOTFOUND, 0, "`%s` is in neither tree", path);
        goto out;
    }
    if ((eo.present && S_ISDIR(eo.st.st_mode)) || (en.present && S_ISDIR(en.st.st_mode))) {
        wr_err_set(err, WR_EINVAL, 0, "`%s` is a directory: list its changes without content",
                   path);
        goto out;
    }
    if (eo.present && en.present && !differs(&c, &eo, &en, name)) {
        wr_err_set(err, WR_ENOTFOUND, 0, "`%s` has not changed", path);
        goto out;
    }
    out->change = !eo.present ? WR_OVL_ADDED : !en.present ? WR_OVL_DELETED : WR_OVL_MODIFIED;
    out->now = entry_of(en.present ? &en.st : &eo.st);
    if (eo.present && en.present)
        out->old = entry_of(&eo.st);
    if (read_side(&eo, name, max, &ta, &na, &out->too_large, err) < 0 ||
        read_side(&en, name, max, &tb, &nb, &out->too_large, err) < 0)
        goto out;
    if (out->too_large) {
        r = 0;
        goto out;
    }
    if ((ta != NULL && is_binary(ta, na)) || (tb != NULL && is_binary(tb, nb))) {
        out->binary = true;
        r = 0;
        goto out;
    }
    la = eo.present ? xasprintf("a%s", path) : xstrdup("/dev/null");
    lb = en.present ? xasprintf("b%s", path) : xstrdup("/dev/null");
    r = wr_text_diff(ta ? ta : "", na, tb ? tb : "", nb, la, lb, 4 * max + 65536, &out->diff, err);
out:
    dset_fini(&eo.sub);
    dset_fini(&en.sub);
    dset_fini(&po);
    dset_fini(&pn);
    ctx_fini(&c);
    if (r < 0)
        wr_ovl_content_fini(out);
    return r;
}

char *wr_ovl_path_clean(const char *path, struct wr_err *err)
{
    _cleanup_free_ char *copy = NULL;
    char *out, *o, *save = NULL;

    if (path == NULL || path[0] != '/') {
        wr_err_set(err, WR_EINVAL, 0, "path `%s` is not absolute", path ? path : "");
        return NULL;
    }
    copy = xstrdup(path);
    out = xmalloc(strlen(path) + 2);
    o = out;
    for (char *t = strtok_r(copy, "/", &save); t != NULL; t = strtok_r(NULL, "/", &save)) {
        if (strcmp(t, ".") == 0 || strcmp(t, "..") == 0) {
            wr_err_set(err, WR_EINVAL, 0, "path `%s` has a `%s` component", path, t);
            free(out);
            return NULL;
        }
        *o++ = '/';
        size_t n = strlen(t);
        memcpy(o, t, n);
        o += n;
    }
    if (o == out)
        *o++ = '/';
    *o = '\0';
    return out;
}
