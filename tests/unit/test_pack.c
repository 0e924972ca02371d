/* SPDX-License-Identifier: Apache-2.0 */
/* Packing a layer directory into a tar (src/image/pack.c) and unpacking it again
 * (src/image/unpack.c) gives back the same tree: the same content digest (src/runtime/layer.c:
 * names, types, modes, owners, devices, links, contents, xattrs), with overlayfs' whiteouts and
 * opaque directories carried as OCI ones, hard links as links, and overlayfs' private xattrs
 * left out. Packing the same tree twice gives the same bytes. Needs root (owners, device nodes,
 * trusted.* xattrs): skipped otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../../src/image/image.h"
#include "../../src/runtime/layer.h"
#include "../../src/util/fs.h"
#include "../../src/util/xalloc.h"
#include "tap.h"

static char top[] = "/tmp/test_pack.XXXXXX";

static char *in(const char *name)
{
    return xasprintf("%s/%s", top, name);
}

static int mkfile(int dfd, const char *name, const char *data, mode_t mode)
{
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int r = fd >= 0 && wr_write_all(fd, data, strlen(data)) == 0 && fchmod(fd, mode) == 0 ? 0 : -1;

    if (fd >= 0)
        close(fd);
    return r;
}

/* <top>/<name>/fs: a writable layer's upper as overlayfs leaves it. */
static int make_upper(const char *name)
{
    char *dir = in(name), *fs = xasprintf("%s/fs", dir);
    int d = -1, o = -1, ok_ = -1;

    if (mkdir(dir, 0700) < 0 || mkdir(fs, 0755) < 0 || chmod(fs, 0755) < 0)
        goto out;
    d = open(fs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0 || mkdirat(d, "etc", 0755) < 0 || mkfile(d, "etc/hosts", "127.0.0.1 x\n", 0644) < 0 ||
        mknodat(d, "etc/motd", S_IFCHR, makedev(0, 0)) < 0 ||
        linkat(d, "etc/hosts", d, "hard", 0) < 0 || symlinkat("etc/hosts", d, "link") < 0 ||
        mkfifoat(d, "fifo", 0600) < 0 || fchmodat(d, "fifo", 0600, 0) < 0 ||
        mkdirat(d, "usr", 0755) < 0 || fchownat(d, "usr", 1000, 1000, 0) < 0 ||
        mkfile(d, "usr/only", "o", 04755) < 0 || fchownat(d, "usr/only", 0, 1000, 0) < 0 ||
        fchmodat(d, "usr/only", 04755, 0) < 0)
        goto out;
    o = openat(d, "usr", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (o < 0 || fsetxattr(o, "trusted.overlay.opaque", "y", 1, 0) < 0 ||
        fsetxattr(o, "user.k", "v", 1, 0) < 0)
        goto out;
    ok_ = 0;
out:
    if (ok_ < 0)
        printf("# fixture: %s\n", strerror(errno));
    if (d >= 0)
        close(d);
    if (o >= 0)
        close(o);
    free(dir);
    free(fs);
    return ok_;
}

static void test_round_trip(void)
{
    char *src = in("src"), *src_fs = in("src/fs"), *tar = in("a.tar"), *tar2 = in("b.tar");
    char *dst = in("dst"), *dst_fs = in("dst/fs");
    char d1[72] = "", d2[72] = "", t1[72] = "", t2[72] = "", *l = NULL;
    uint64_t b1 = 0, b2 = 0, s1 = 0, s2 = 0;
    struct wr_err err = {0};
    struct wr_oci_layer layer = {.path = tar, .digest = t1, .media_type = ""};
    struct stat a, b;
    char v[8] = "";

    ok(make_upper("src") == 0, "upper made");
    ok(wr_oci_pack_layer(src_fs, tar, t1, &s1, &err) == 0, "packed: %s", err.msg);
    ok(wr_oci_pack_layer(src_fs, tar2, t2, &s2, &err) == 0, "packed again: %s", err.msg);
    is_str(t2, t1, "the same tree packs to the same bytes");
    is_int(s2, s1, "and as many");
    ok(mkdir(dst, 0700) == 0 && mkdir(dst_fs, 0755) == 0, "destination made");
    ok(wr_oci_unpack_layer(&layer, dst_fs, &err) == 0, "unpacked: %s", err.msg);
    ok(wr_layer_digest(src, d1, &b1, &err) == 0, "digest of the source: %s", err.msg);
    ok(wr_layer_digest(dst, d2, &b2, &err) == 0, "digest of the copy: %s", err.msg);
    is_str(d2, d1, "the unpacked tree is the packed one");
    is_int(b2, b1, "with as many bytes");
    l = in("dst/fs/etc/motd");
    ok(lstat(l, &a) == 0 && S_ISCHR(a.st_mode) && a.st_rdev == makedev(0, 0),
       "a whiteout stays a whiteout");
    free(l);
    l = in("dst/fs/usr");
    ok(getxattr(l, "trusted.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y',
       "an opaque directory stays opaque");
    free(l);
    {
        char *h = in("dst/fs/hard"), *e = in("dst/fs/etc/hosts");
        ok(stat(h, &a) == 0 && stat(e, &b) == 0 && a.st_ino == b.st_ino, "a hard link stays one");
        free(h);
        free(e);
    }
    l = in("dst/fs/usr/only");
    ok(stat(l, &a) == 0 && (a.st_mode & 07777) == 04755 && a.st_gid == 1000,
       "modes and owners are kept");
    free(l);
    free(src);
    free(src_fs);
    free(tar);
    free(tar2);
    free(dst);
    free(dst_fs);
}

static void test_private_xattrs_left_out(void)
{
    char *dir = in("priv"), *fs = in("priv/fs"), *tar = in("priv.tar"), *back = in("back");
    char *back_fs = in("back/fs"), t[72] = "", v[16];
    uint64_t s = 0;
    struct wr_err err = {0};
    struct wr_oci_layer layer = {.path = tar, .digest = t, .media_type = ""};

    ok(mkdir(dir, 0700) == 0 && mkdir(fs, 0755) == 0 &&
           setxattr(fs, "trusted.overlay.origin", "x", 1, 0) == 0 &&
           setxattr(fs, "trusted.overlay.impure", "y", 1, 0) == 0,
       "a root with overlayfs' bookkeeping");
    ok(wr_oci_pack_layer(fs, tar, t, &s, &err) == 0, "packed: %s", err.msg);
    ok(mkdir(back, 0700) == 0 && mkdir(back_fs, 0755) == 0 &&
           wr_oci_unpack_layer(&layer, back_fs, &err) == 0,
       "unpacked: %s", err.msg);
    ok(getxattr(back_fs, "trusted.overlay.origin", v, sizeof(v)) < 0 &&
           getxattr(back_fs, "trusted.overlay.impure", v, sizeof(v)) < 0 &&
           getxattr(back_fs, "trusted.overlay.opaque", v, sizeof(v)) < 0,
       "overlayfs' private xattrs do not travel");
    ok(wr_oci_pack_layer(fs, tar, t, &s, &err) < 0 && err.kind == WR_ESYS,
       "a tar is never written over: %s", err.msg);
    free(dir);
    free(fs);
    free(tar);
    free(back);
    free(back_fs);
}

int main(void)
{
    struct wr_err err = {0};

    if (geteuid() != 0) {
        printf("1..0 # SKIP needs root (owners, device nodes, trusted xattrs)\n");
        return 77;
    }
    if (mkdtemp(top) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_private_xattrs_left_out();
    ok(wr_layer_remove(top, &err) == 0, "the test directory is removed: %s", err.msg);
    return done();
}
