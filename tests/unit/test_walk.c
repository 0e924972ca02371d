/* SPDX-License-Identifier: Apache-2.0 */
/* The bounded tree walk (src/util/walk.c) on real trees: order and paths of a sorted walk, mount
 * points refused (another filesystem, and a bind mount of the same one), removal past its
 * depth, a tree renamed while it is walked, and the inode set. Needs root for the mounts. */
#include "../../src/util/walk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/util/fs.h"
#include "../../src/util/xalloc.h"
#include "tap.h"

static char dir[] = "/dev/shm/test_walk.XXXXXX";

struct seen {
    char buf[4096];
    size_t len;
    unsigned deepest;
};

static int record(const struct wr_walk_ent *e, void *ctx, struct wr_err *err)
{
    struct seen *s = ctx;
    int n = snprintf(s->buf + s->len, sizeof(s->buf) - s->len, "%s%s;", e->path,
                     S_ISDIR(e->st.st_mode) ? "/" : "");
    s->len += (size_t)n;
    if (e->depth > s->deepest)
        s->deepest = e->depth;
    return 0;
}

static int record_leave(const struct wr_walk_ent *e, void *ctx, struct wr_err *err)
{
    struct seen *s = ctx;
    s->len += (size_t)snprintf(s->buf + s->len, sizeof(s->buf) - s->len, "end;");
    return 0;
}

static int touch(int dfd, const char *name)
{
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

static void test_sorted_order(void)
{
    struct seen s = {0};
    struct wr_err err = {0};
    const struct wr_walk w = {
        .flags = WR_WALK_SORTED, .prefix = ".", .visit = record, .leave = record_leave, .ctx = &s};
    int d = open(dir, O_RDONLY | O_DIRECTORY);

    ok(d >= 0 && mkdirat(d, "s", 0755) == 0 && mkdirat(d, "s/b", 0755) == 0 &&
           touch(d, "s/b/z") == 0 && touch(d, "s/a") == 0 && touch(d, "s/B") == 0 &&
           symlinkat("b", d, "s/c") == 0,
       "made");
    ok(wr_walk_at(d, "s", &w, &err) == 0, "walk: %s", err.msg);
    is_str(s.buf, "./;./B;./a;./b/;./b/z;end;./c;end;",
           "directories first, entries in strcmp order, a symlink is not followed");
    close(d);
}

static void test_mount_points_are_refused(void)
{
    struct seen s = {0};
    struct wr_err err = {0};
    const struct wr_walk w = {.visit = record, .ctx = &s};
    char *m = xasprintf("%s/m/sub/mnt", dir), *b = xasprintf("%s/b/bind", dir),
         *src = xasprintf("%s/bsrc", dir);
    int d = open(dir, O_RDONLY | O_DIRECTORY);
    struct stat st;

    ok(wr_mkdir_p(m, 0755, &err) == 0 && mount("tmpfs", m, "tmpfs", 0, "size=1m") == 0,
       "a tmpfs mounted inside a tree: %s", strerror(errno));
    ok(touch(d, "m/sub/mnt/inside") == 0, "a file on it");
    ok(wr_walk_at(d, "m", &w, &err) < 0 && err.kind == WR_ECONFLICT && strstr(err.msg, "mount"),
       "a walk stops at it: %s", err.msg);
    err = (struct wr_err){0};
    ok(wr_rm_rf_at(d, "m", &err) < 0 && err.kind == WR_ECONFLICT, "rm -rf refuses it: %s", err.msg);
    ok(fstatat(d, "m/sub/mnt/inside", &st, 0) == 0, "nothing on it was removed");
    err = (struct wr_err){0};
    ok(wr_walk_at(d, "m/sub/mnt", &w, &err) < 0 && err.kind == WR_ECONFLICT,
       "a walk refuses a mount point at its top: %s", err.msg);
    umount(m);

    ok(wr_mkdir_p(b, 0755, &err) == 0 && wr_mkdir_p(src, 0755, &err) == 0 &&
           touch(d, "bsrc/keep") == 0 && mount(src, b, NULL, MS_BIND, NULL) == 0,
       "a bind mount of the same filesystem inside a tree: %s", strerror(errno));
    err = (struct wr_err){0};
    ok(wr_rm_rf_at(d, "b", &err) < 0 && err.kind == WR_ECONFLICT,
       "rm -rf refuses it though the device is the same: %s", err.msg);
    ok(fstatat(d, "bsrc/keep", &st, 0) == 0, "nothing under it was removed");
    umount(b);
    err = (struct wr_err){0};
    ok(wr_rm_rf_at(d, "m", &err) == 0 && wr_rm_rf_at(d, "b", &err) == 0 &&
           wr_rm_rf_at(d, "bsrc", &err) == 0,
       "unmounted: removed");
    close(d);
    free(m);
    free(b);
    free(src);
}

static int rm_visit(const struct wr_walk_ent *e, void *ctx, struct wr_err *err)
{
    struct seen *s = ctx;
    if (e->depth > s->deepest)
        s->deepest = e->depth;
    if (!S_ISDIR(e->st.st_mode) && unlinkat(e->dirfd, e->name, 0) < 0)
        return wr_err_sys(err, "unlink `%s`", e->path);
    return 0;
}

static int rm_leave(const struct wr_walk_ent *e, void *ctx, struct wr_err *err)
{
    if (unlinkat(e->dirfd, e->name, AT_REMOVEDIR) < 0)
        return wr_err_sys(err, "rmdir `%s`", e->path);
    return 0;
}

/* Past max_depth a walk fails; a removal moves the deeper directory up and finishes. */
static void test_depth(void)
{
    struct seen s = {0};
    struct wr_err err = {0};
    struct wr_walk w = {.max_depth = 3, .visit = record, .ctx = &s};
    int d = open(dir, O_RDONLY | O_DIRECTORY);
    char *deep = xasprintf("%s/t/1/2/3/4/5/6/7", dir);

    ok(wr_mkdir_p(deep, 0755, &err) == 0 && touch(d, "t/1/2/3/4/5/6/7/f") == 0 &&
           touch(d, "t/1/2/3/4/g") == 0 && mkdirat(d, "t/.warren-deep-0", 0755) == 0,
       "made, with a name a move up would take");
    ok(wr_walk_at(d, "t", &w, &err) < 0 && err.kind == WR_EINVAL &&
           strstr(err.msg, "deeper than 3 directories: `t/1/2/3/4`"),
       "a walk stops past max_depth, naming the limit and the path: %s", err.msg);
    ok(s.deepest == 3, "it went no deeper than 3");
    err = (struct wr_err){0};
    s = (struct seen){0};
    w = (struct wr_walk){
        .flags = WR_WALK_REMOVE, .max_depth = 2, .visit = rm_visit, .leave = rm_leave, .ctx = &s};
    ok(wr_walk_at(d, "t", &w, &err) == 0, "a removal of max_depth 2 finishes: %s", err.msg);
    ok(faccessat(d, "t", F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT, "nothing is left");
    is_int(s.deepest, 3, "no directory deeper than 2 was entered (files at 3)");
    close(d);
    free(deep);
}

/* A directory renamed while the walk is in it: the walk goes on from its fd and never leaves the
 * tree through the new path. */
struct renamer {
    int d;
    struct seen s;
};

static int rename_away(const struct wr_walk_ent *e, void *ctx, struct wr_err *err)
{
    struct renamer *r = ctx;
    if (strcmp(e->name, "inner") == 0 && S_ISDIR(e->st.st_mode))
        (void)renameat(r->d, "r/a", r->d, "elsewhere");
    return record(e, &r->s, err);
}

static void test_renamed_while_walked(void)
{
    struct renamer ctx = {0};
    struct wr_err err = {0};
    const struct wr_walk w = {.flags = WR_WALK_SORTED, .visit = rename_away, .ctx = &ctx};
    char *p = xasprintf("%s/r/a/inner", dir);

    ctx.d = open(dir, O_RDONLY | O_DIRECTORY);
    ok(wr_mkdir_p(p, 0755, &err) == 0 && touch(ctx.d, "r/a/inner/f") == 0, "made");
    ok(wr_walk_at(ctx.d, "r", &w, &err) == 0, "walk: %s", err.msg);
    is_str(ctx.s.buf, "r/;r/a/;r/a/inner/;r/a/inner/f;",
           "the moved directory is walked through its fd");
    ok(wr_rm_rf_at(ctx.d, "r", &err) == 0 && wr_rm_rf_at(ctx.d, "elsewhere", &err) == 0, "removed");
    close(ctx.d);
    free(p);
}

static void test_inodes(void)
{
    struct wr_inodes set = {0};
    struct stat st = {0};
    uint64_t old = 0;
    int added = 0, dups = 0, right = 0;

    for (int i = 0; i < 300000; i++) {
        st.st_dev = (dev_t)(i % 3);
        st.st_ino = (ino_t)i * 7919;
        added += wr_inodes_add(&set, &st, (uint64_t)i, NULL);
    }
    for (int i = 0; i < 300000; i += 3) {
        st.st_dev = (dev_t)(i % 3);
        st.st_ino = (ino_t)i * 7919;
        dups += !wr_inodes_add(&set, &st, 0, &old);
        right += old == (uint64_t)i;
    }
    st.st_dev = 1;
    st.st_ino = 0;
    is_int(added, 300000, "300000 inodes added");
    is_int(dups, 100000, "each found again");
    is_int(right, 100000, "with its value");
    ok(wr_inodes_add(&set, &st, 0, NULL), "another device, same inode number: a new one");
    wr_inodes_fini(&set);
}

int main(void)
{
    struct wr_err err = {0};

    if (geteuid() != 0) {
        printf("1..0 # SKIP needs root (mounts)\n");
        return 77;
    }
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    test_sorted_order();
    test_mount_points_are_refused();
    test_depth();
    test_renamed_while_walked();
    test_inodes();
    ok(wr_rm_rf_at(AT_FDCWD, dir, &err) == 0, "the test directory is removed: %s", err.msg);
    return done();
}
