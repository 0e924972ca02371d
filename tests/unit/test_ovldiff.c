/* SPDX-License-Identifier: Apache-2.0 */
/* The overlay diff (src/runtime/ovldiff.c) on real layer directories in a temporary directory:
 * a lower layer and upper layers holding every kind of overlayfs mark (a whiteout device, the
 * trusted.overlay.whiteout and .opaque xattrs, and the user.overlay.* ones that count for
 * nothing), renames, a FIFO and a symlink out of the tree (never opened or followed), scopes,
 * truncation, two uppers over one shared layer, and one file's unified diff. Needs root (device
 * nodes, trusted.* xattrs): skipped otherwise. */
#include "../../src/runtime/ovldiff.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../../src/util/fs.h"
#include "../../src/util/xalloc.h"
#include "tap.h"

static char top[] = "/tmp/test_ovldiff.XXXXXX";

static int put(const char *layer, const char *path, const char *data, mode_t mode)
{
    char *p = xasprintf("%s/%s/%s", top, layer, path);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int r = fd >= 0 && wr_write_all(fd, data, strlen(data)) == 0 && fchmod(fd, mode) == 0 ? 0 : -1;

    if (fd >= 0)
        close(fd);
    free(p);
    return r;
}

static int dir(const char *layer, const char *path)
{
    char *p = xasprintf("%s/%s/%s", top, layer, path);
    int r = mkdir(p, 0755);
    free(p);
    return r;
}

static int whiteout(const char *layer, const char *path)
{
    char *p = xasprintf("%s/%s/%s", top, layer, path);
    int r = mknod(p, S_IFCHR | 0, makedev(0, 0));
    free(p);
    return r;
}

static int xattr(const char *layer, const char *path, const char *name, const char *value)
{
    char *p = xasprintf("%s/%s/%s", top, layer, path);
    int r = lsetxattr(p, name, value, strlen(value), 0);
    free(p);
    return r;
}

static int link_to(const char *layer, const char *path, const char *target)
{
    char *p = xasprintf("%s/%s/%s", top, layer, path);
    int r = symlink(target, p);
    free(p);
    return r;
}

static const struct wr_ovl_change *find(const struct wr_ovl_diff *d, const char *path)
{
    for (size_t i = 0; i < d->n; i++)
        if (strcmp(d->changes[i].path, path) == 0)
            return &d->changes[i];
    return NULL;
}

static const char *kind(const struct wr_ovl_diff *d, const char *path)
{
    const struct wr_ovl_change *c = find(d, path);
    return c ? wr_ovl_change_name(c->change) : "unchanged";
}

static int build(void)
{
    char *p;
    int r = 0;

    for (const char *const *l = (const char *const[]){"low", "up", "up2", NULL}; *l; l++) {
        p = xasprintf("%s/%s", top, *l);
        r |= mkdir(p, 0755);
        free(p);
    }
    /* The lower layer (a template). */
    r |= dir("low", "etc") | dir("low", "d") | dir("low", "e") | dir("low", "e/f") |
         dir("low", "keep");
    r |= put("low", "etc/a", "one\n", 0644) | put("low", "etc/b", "bee\n", 0644) |
         put("low", "etc/c", "sea\n", 0644) | put("low", "etc/m", "mode\n", 0644) |
         put("low", "etc/src", "rename me\n", 0644) | put("low", "etc/u", "you\n", 0644) |
         put("low", "d/x", "x\n", 0644) | put("low", "d/y", "y\n", 0644) |
         put("low", "e/f/g", "g\n", 0644) | put("low", "keep/k", "k\n", 0644) |
         put("low", "etc/bin", "a\001b\n", 0644);
    r |= link_to("low", "etc/s", "a");
    /* An upper layer (a sandbox's): every kind of change. */
    r |= dir("up", "etc") | dir("up", "d") | dir("up", "new") | dir("up", "keep");
    r |= put("up", "etc/a", "two\n", 0644);                    /* modified */
    r |= whiteout("up", "etc/b");                              /* deleted */
    r |= put("up", "etc/c", "", 0644) |                        /* deleted: xattr whiteout */
         xattr("up", "etc/c", "trusted.overlay.whiteout", ""); /* */
    r |= put("up", "etc/u", "", 0644) |                        /* a sandbox's own xattr: */
         xattr("up", "etc/u", "user.overlay.whiteout", "");    /* modified (emptied), not gone */
    r |= put("up", "etc/m", "mode\n", 0600);                   /* mode only */
    r |= put("up", "etc/dst", "rename me\n", 0644) | whiteout("up", "etc/src"); /* renamed */
    r |= put("up", "keep/k", "k\n", 0644); /* copied up unchanged */
    r |= xattr("up", "d", "trusted.overlay.opaque", "y") | put("up", "d/z", "z\n", 0644);
    r |= whiteout("up", "e"); /* a directory deleted */
    r |= put("up", "new/file", "n\n", 0755) | link_to("up", "new/out", "/../../../etc/shadow");
    p = xasprintf("%s/up/new/fifo", top);
    r |= mkfifo(p, 0600);
    free(p);
    r |= dir("up", "uo") | xattr("up", "uo", "user.overlay.opaque", "y");
    r |= put("up", "etc/bin", "a\377c\n", 0644);
    /* Another upper over the same lower (a second fork). */
    r |= dir("up2", "etc") | put("up2", "etc/a", "three\n", 0644) | whiteout("up2", "etc/m");
    return r;
}

static void test_against_lower(void)
{
    char *low = xasprintf("%s/low", top), *up = xasprintf("%s/up", top);
    const char *o[] = {low}, *n[] = {low, up};
    struct wr_ovl_stack so = {o, 1}, sn = {n, 2};
    struct wr_ovl_diff d;
    struct wr_err err;
    const struct wr_ovl_change *c;
    int r = wr_ovl_diff(&so, &sn, NULL, 0, &d, &err);

    is_int(r, 0, "diff against the lower layer");
    if (r < 0) {
        printf("# %s\n", err.msg);
        return;
    }
    is_str(kind(&d, "/etc/a"), "modified", "a changed file");
    is_str(kind(&d, "/etc/b"), "deleted", "a whiteout device");
    is_str(kind(&d, "/etc/c"), "deleted", "a trusted.overlay.whiteout file");
    is_str(kind(&d, "/etc/u"), "modified", "user.overlay.whiteout counts for nothing");
    c = find(&d, "/etc/m");
    ok(c && c->change == WR_OVL_MODIFIED && c->old.mode == 0644 && c->now.mode == 0600,
       "a mode change: old_mode and mode");
    c = find(&d, "/etc/dst");
    ok(c && c->change == WR_OVL_RENAMED && c->from && strcmp(c->from, "/etc/src") == 0,
       "a copy with the deleted file's content is a rename");
    ok(find(&d, "/etc/src") == NULL, "the rename's source is not listed");
    is_str(kind(&d, "/keep/k"), "unchanged", "copied up unchanged");
    is_str(kind(&d, "/keep"), "unchanged", "a directory copied up");
    is_str(kind(&d, "/d/x"), "deleted", "below an opaque directory: deleted");
    is_str(kind(&d, "/d/y"), "deleted", "below an opaque directory: deleted (2)");
    is_str(kind(&d, "/d/z"), "added", "in an opaque directory: added");
    is_str(kind(&d, "/d"), "unchanged", "the opaque directory itself");
    is_str(kind(&d, "/e"), "deleted", "a deleted directory");
    is_str(kind(&d, "/e/f"), "deleted", "below a deleted directory");
    is_str(kind(&d, "/e/f/g"), "deleted", "below a deleted directory (2)");
    is_str(kind(&d, "/new"), "added", "a new directory");
    c = find(&d, "/new/file");
    ok(c && c->change == WR_OVL_ADDED && c->now.size == 2 && c->now.mode == 0755,
       "a new file with its size and mode");
    c = find(&d, "/new/out");
    ok(c && c->now.type == WR_OVL_SYMLINK && c->now.size == strlen("/../../../etc/shadow"),
       "a symlink out of the tree is listed, not followed");
    c = find(&d, "/new/fifo");
    ok(c && c->now.type == WR_OVL_OTHER, "a FIFO is listed (never opened)");
    is_str(kind(&d, "/uo"), "added", "user.overlay.opaque counts for nothing");
    is_str(kind(&d, "/etc/s"), "unchanged", "a lower symlink left alone");
    for (size_t i = 1; i < d.n; i++)
        ok(strcmp(d.changes[i - 1].path, d.changes[i].path) < 0, "sorted: %s", d.changes[i].path);
    wr_ovl_diff_fini(&d);

    r = wr_ovl_diff(&so, &sn, "/d", 0, &d, &err);
    ok(r == 0 && d.n == 3 && find(&d, "/d/z") && !find(&d, "/etc/a"), "a scope");
    wr_ovl_diff_fini(&d);
    r = wr_ovl_diff(&so, &sn, "/e/f/g", 0, &d, &err);
    ok(r == 0 && d.n == 1 && find(&d, "/e/f/g"), "a scope on one deleted file");
    wr_ovl_diff_fini(&d);
    r = wr_ovl_diff(&so, &sn, NULL, 3, &d, &err);
    ok(r == 0 && d.n == 3 && d.truncated, "truncated at max");
    wr_ovl_diff_fini(&d);
    /* The other way round: what the lower has that the upper hid. */
    r = wr_ovl_diff(&sn, &so, NULL, 0, &d, &err);
    ok(r == 0 && strcmp(kind(&d, "/etc/b"), "added") == 0 &&
           strcmp(kind(&d, "/new/file"), "deleted") == 0 &&
           strcmp(kind(&d, "/etc/src"), "renamed") == 0,
       "reversed");
    wr_ovl_diff_fini(&d);
    free(low);
    free(up);
}

static void test_two_uppers(void)
{
    char *low = xasprintf("%s/low", top), *up = xasprintf("%s/up", top),
         *up2 = xasprintf("%s/up2", top);
    const char *o[] = {low, up2}, *n[] = {low, up};
    struct wr_ovl_stack so = {o, 2}, sn = {n, 2};
    struct wr_ovl_diff d;
    struct wr_err err;
    const struct wr_ovl_change *c;
    int r = wr_ovl_diff(&so, &sn, NULL, 0, &d, &err);

    is_int(r, 0, "diff of two uppers over one lower");
    c = find(&d, "/etc/a");
    ok(c && c->change == WR_OVL_MODIFIED && c->old.size == 6 && c->now.size == 4,
       "both changed it: modified, with both sizes");
    is_str(kind(&d, "/etc/m"), "added", "deleted in the other: added");
    is_str(kind(&d, "/etc/b"), "deleted", "deleted here");
    is_str(kind(&d, "/keep/k"), "unchanged", "the same in both");
    wr_ovl_diff_fini(&d);
    free(low);
    free(up);
    free(up2);
}

static void test_content(void)
{
    char *low = xasprintf("%s/low", top), *up = xasprintf("%s/up", top);
    const char *o[] = {low}, *n[] = {low, up};
    struct wr_ovl_stack so = {o, 1}, sn = {n, 2};
    struct wr_ovl_content c;
    struct wr_err err;
    int r;

    r = wr_ovl_content(&so, &sn, "/etc/a", 0, &c, &err);
    ok(r == 0 && c.change == WR_OVL_MODIFIED && c.diff &&
           strcmp(c.diff, "--- a/etc/a\n+++ b/etc/a\n@@ -1 +1 @@\n-one\n+two\n") == 0,
       "a modified file's unified diff");
    if (r == 0 && c.diff)
        printf("# %s", c.diff);
    wr_ovl_content_fini(&c);
    r = wr_ovl_content(&so, &sn, "/new/file", 0, &c, &err);
    ok(r == 0 && c.change == WR_OVL_ADDED && c.diff &&
           strncmp(c.diff, "--- /dev/null\n+++ b/new/file\n", 29) == 0,
       "an added file against /dev/null");
    wr_ovl_content_fini(&c);
    r = wr_ovl_content(&so, &sn, "/etc/bin", 0, &c, &err);
    ok(r == 0 && c.binary && c.diff == NULL, "invalid UTF-8: binary");
    wr_ovl_content_fini(&c);
    r = wr_ovl_content(&so, &sn, "/etc/a", 2, &c, &err);
    ok(r == 0 && c.too_large && c.diff == NULL, "over max: too_large");
    wr_ovl_content_fini(&c);
    r = wr_ovl_content(&so, &sn, "/etc/m", 0, &c, &err);
    ok(r == 0 && c.diff && c.diff[0] == '\0' && c.old.mode == 0644, "a mode change: empty diff");
    wr_ovl_content_fini(&c);
    r = wr_ovl_content(&so, &sn, "/keep/k", 0, &c, &err);
    ok(r < 0 && err.kind == WR_ENOTFOUND && strstr(err.msg, "not changed"), "unchanged: %s",
       err.msg);
    r = wr_ovl_content(&so, &sn, "/no/such", 0, &c, &err);
    ok(r < 0 && err.kind == WR_ENOTFOUND, "missing: %s", err.msg);
    r = wr_ovl_content(&so, &sn, "/new", 0, &c, &err);
    ok(r < 0 && err.kind == WR_EINVAL, "a directory: %s", err.msg);
    r = wr_ovl_content(&so, &sn, "/new/fifo", 0, &c, &err);
    ok(r == 0 && c.diff && c.diff[0] == '\0', "a FIFO is never opened");
    wr_ovl_content_fini(&c);
    r = wr_ovl_content(&so, &sn, "/new/out/x", 0, &c, &err);
    ok(r < 0 && err.kind == WR_ENOTFOUND, "a path through a symlink is not followed");
    free(low);
    free(up);
}

static void test_paths(void)
{
    struct wr_err err;
    char *p;

    p = wr_ovl_path_clean("//etc//motd/", &err);
    is_str(p, "/etc/motd", "slashes dropped");
    free(p);
    p = wr_ovl_path_clean("/", &err);
    is_str(p, "/", "the root");
    free(p);
    ok(wr_ovl_path_clean("etc", &err) == NULL && err.kind == WR_EINVAL, "relative: refused");
    ok(wr_ovl_path_clean("/etc/../x", &err) == NULL, "`..`: refused");
    ok(wr_ovl_path_clean("/./x", &err) == NULL, "`.`: refused");
}

int main(void)
{
    if (geteuid() != 0) {
        printf("1..0 # SKIP needs root\n");
        return 0;
    }
    if (mkdtemp(top) == NULL || build() != 0) {
        printf("Bail out! fixture: %s\n", strerror(errno));
        return 1;
    }
    test_against_lower();
    test_two_uppers();
    test_content();
    test_paths();
    {
        struct wr_err err;
        (void)wr_rm_rf_at(AT_FDCWD, top, &err);
    }
    return done();
}
