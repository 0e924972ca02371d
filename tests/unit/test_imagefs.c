/* SPDX-License-Identifier: Apache-2.0 */
/* Files of an image read on the host through its layer directories (src/core/imagefs.c): the
 * topmost layer wins, whiteouts and opaque directories hide what is below, nothing but regular
 * files is opened and no symlink is followed; and the default user's ids from the image's
 * /etc/passwd and /etc/group. Whiteouts and the opaque xattr need root, as the daemon has. */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../../src/core/images.h"
#include "../../src/util/fs.h"
#include "../../src/util/xalloc.h"
#include "tap.h"

static char root[] = "/tmp/test_imagefs.XXXXXX";

/* layer_dir/path, in a static buffer. */
static const char *at(const char *layer_dir, const char *path)
{
    static char buf[512];
    snprintf(buf, sizeof(buf), "%s/%s", layer_dir, path);
    return buf;
}

static char *layer(const char *name)
{
    char *p = xasprintf("%s/%s", root, name);
    struct wr_err err;
    (void)wr_mkdir_p(p, 0755, &err);
    return p;
}

static void put(const char *layer_dir, const char *path, const char *text)
{
    char *p = xasprintf("%s/%s", layer_dir, path), *dir = xstrdup(p);
    struct wr_err err;
    FILE *f;

    *strrchr(dir, '/') = '\0';
    (void)wr_mkdir_p(dir, 0755, &err);
    f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
    free(dir);
    free(p);
}

static void whiteout(const char *layer_dir, const char *path)
{
    ok(mknod(at(layer_dir, path), S_IFCHR | 0600, makedev(0, 0)) == 0, "whiteout %s", path);
}

static void read_is(char **layers, size_t n, const char *want, const char *what)
{
    char *got = wr_images_read_file(layers, n, "etc/passwd", 4096);
    is_str(got, want, what);
    free(got);
}

static void ids_are(char **layers, size_t n, const char *spec, long uid, long gid)
{
    uid_t u = 99;
    gid_t g = 99;
    struct wr_err err;
    int r = wr_images_user_ids(layers, n, spec, &u, &g, &err);

    ok(r == 0 && (long)u == uid && (long)g == gid, "`%s` is %ld:%ld (got %d, %u:%u%s%s)",
       spec ? spec : "(none)", uid, gid, r, (unsigned)u, (unsigned)g, r ? ": " : "",
       r ? err.msg : "");
}

int main(void)
{
    char *l[3];
    struct wr_err err;
    uid_t u;
    gid_t g;

    if (mkdtemp(root) == NULL)
        return 1;
    l[0] = layer("base");
    l[1] = layer("mid");
    l[2] = layer("top");
    put(l[0], "etc/passwd", "root:x:0:0::/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n");
    put(l[0], "etc/group", "root:x:0:\nuser:x:1000:\nstaff:x:50:user\n");
    read_is(l, 3, "root:x:0:0::/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n",
            "a file of the bottom layer shows through layers that lack it");
    ids_are(l, 3, "user", 1000, 1000);
    ids_are(l, 3, "user:staff", 1000, 50);
    ids_are(l, 3, "user:7", 1000, 7);
    ids_are(l, 3, "1000", 1000, 1000);
    ids_are(l, 3, "4242", 4242, 0);
    ids_are(l, 3, NULL, 0, 0);
    ids_are(l, 3, "", 0, 0);
    ok(wr_images_user_ids(l, 3, "nobody-here", &u, &g, &err) < 0 && err.kind == WR_ENOTFOUND,
       "an unknown user: %s", err.msg);
    ok(wr_images_user_ids(l, 3, "user:nogroup", &u, &g, &err) < 0 && err.kind == WR_ENOTFOUND,
       "an unknown group: %s", err.msg);

    put(l[1], "etc/passwd", "# a comment\nbad line\napp:x:1234:4321::/:/bin/sh\n");
    read_is(l, 3, "# a comment\nbad line\napp:x:1234:4321::/:/bin/sh\n", "a higher layer wins");
    ids_are(l, 3, "app", 1234, 4321);
    ok(wr_images_user_ids(l, 3, "user", &u, &g, &err) < 0, "the lower passwd is not read");

    whiteout(l[2], "etc");
    read_is(l, 3, NULL, "a whiteout of the directory hides it");
    unlink(at(l[2], "etc"));
    ok(mkdir(at(l[2], "etc"), 0755) == 0, "an empty etc/ on top");
    read_is(l, 3, "# a comment\nbad line\napp:x:1234:4321::/:/bin/sh\n",
            "a plain directory on top merges");
    ok(setxattr(at(l[2], "etc"), "trusted.overlay.opaque", "y", 1, 0) == 0, "made opaque");
    read_is(l, 3, NULL, "an opaque directory hides the layers below");
    ok(removexattr(at(l[2], "etc"), "trusted.overlay.opaque") == 0, "opaque no more");
    whiteout(l[2], "etc/passwd");
    read_is(l, 3, NULL, "a whiteout of the file hides it");
    unlink(at(l[2], "etc/passwd"));

    ok(symlink("/etc/shadow", at(l[2], "etc/passwd")) == 0, "a symlink on top");
    read_is(l, 3, NULL, "a symlink is not followed (and hides the layers below)");
    unlink(at(l[2], "etc/passwd"));
    ok(mkfifo(at(l[2], "etc/passwd"), 0644) == 0, "a fifo on top");
    read_is(l, 3, NULL, "a fifo is not opened");
    unlink(at(l[2], "etc/passwd"));
    ok(mknod(at(l[2], "etc/passwd"), S_IFCHR | 0644, makedev(1, 3)) == 0,
       "a device node on top (/dev/null's numbers)");
    read_is(l, 3, NULL, "a device is not opened");
    unlink(at(l[2], "etc/passwd"));
    rmdir(at(l[2], "etc"));
    ok(symlink("/etc", at(l[2], "etc")) == 0, "etc a symlink on top");
    read_is(l, 3, NULL, "a symlinked directory is not followed");
    unlink(at(l[2], "etc"));
    {
        char big[5000];
        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        put(l[2], "etc/passwd", big);
        read_is(l, 3, NULL, "a file over the bound is not read");
    }
    (void)wr_rm_rf_at(AT_FDCWD, root, &err);
    for (int i = 0; i < 3; i++)
        free(l[i]);
    return done();
}
