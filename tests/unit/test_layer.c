/* SPDX-License-Identifier: Apache-2.0 */
/* Layer directories (src/runtime/layer.c) on real trees in a temporary directory: the digest of
 * a fixed tree is pinned (layers in stores are keyed by it), a copy keeps what the digest covers
 * and the hard links, and trees deeper, wider or with longer paths than the tools' buffers are
 * digested, copied, measured and removed without recursion, within the fds given. Needs root
 * (owners, device nodes, trusted.* xattrs): skipped otherwise. */
#include "../../src/runtime/layer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "../../src/util/fs.h"
#include "../../src/util/walk.h"
#include "../../src/util/xalloc.h"
#include "tap.h"

/* The fixture on the disk (tmpfs has user xattrs only from Linux 6.6); the big trees in memory,
 * where they are quick to make. */
static char disk[] = "/tmp/test_layer.XXXXXX", mem[] = "/dev/shm/test_layer.XXXXXX";
static const char *dir = disk;

static char *in(const char *name)
{
    return xasprintf("%s/%s", dir, name);
}

static int mkfile(int dfd, const char *name, const char *data, size_t len, mode_t mode)
{
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int r = fd >= 0 && wr_write_all(fd, data, len) == 0 && fchmod(fd, mode) == 0 ? 0 : -1;

    if (fd >= 0)
        close(fd);
    return r;
}

/* <dir>/<name>/fs: one entry of every kind the digest covers, with fixed owners and modes. */
static int make_fixture(const char *name)
{
    char *top = in(name), *fs = xasprintf("%s/fs", top);
    int ok = 0, d = -1, b = -1;
    static char big[70000];

    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)('a' + i % 26);
    if (mkdir(top, 0700) < 0 || mkdir(fs, 0755) < 0 || chmod(fs, 0755) < 0)
        goto out;
    d = open(fs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0 || mkdirat(d, "a", 0755) < 0 || mkfile(d, "a/file", "hello\n", 6, 0644) < 0 ||
        linkat(d, "a/file", d, "a/hard", 0) < 0 || symlinkat("a/file", d, "link") < 0 ||
        mkfifoat(d, "fifo", 0600) < 0 || fchmodat(d, "fifo", 0600, 0) < 0 ||
        mknodat(d, "wh", S_IFCHR, makedev(0, 0)) < 0 || fchmodat(d, "wh", 0, 0) < 0 ||
        mkfile(d, "Z", "", 0, 0600) < 0 || mkfile(d, "_", "x", 1, 0400) < 0 ||
        mkfile(d, "a.b", "y", 1, 0640) < 0 || mkdirat(d, "b", 0700) < 0 ||
        fchmodat(d, "b", 0700, 0) < 0 || fchownat(d, "b", 1000, 1000, 0) < 0)
        goto out;
    b = openat(d, "b", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (b < 0 || mkfile(b, "setuid", big, sizeof(big), 0755) < 0 ||
        fchownat(b, "setuid", 0, 1000, 0) < 0 || fchmodat(b, "setuid", 04755, 0) < 0 ||
        mkfile(b, "empty", "", 0, 0644) < 0 || fsetxattr(b, "user.k", "v", 1, 0) < 0 ||
        fsetxattr(b, "trusted.overlay.opaque", "y", 1, 0) < 0 ||
        fsetxattr(b, "trusted.overlay.origin", "ignored", 7, 0) < 0)
        goto out;
    ok = 1;
out:
    if (!ok)
        printf("# fixture: %s\n", strerror(errno));
    if (d >= 0)
        close(d);
    if (b >= 0)
        close(b);
    free(top);
    free(fs);
    return ok ? 0 : -1;
}

/* The digest of the fixture, as computed by the recursive walk the layer store started with:
 * a change here re-keys every layer already stored. */
#define FIXTURE_DIGEST "sha256:82556ad9b387937d4d0d543748181f6882304c2d1912a1666d19d7c0ca47689a"

static void test_digest_is_pinned(void)
{
    char digest[72] = "";
    uint64_t bytes = 0;
    struct wr_err err = {0};
    char *top = in("fixture");

    ok(make_fixture("fixture") == 0, "fixture made");
    ok(wr_layer_digest(top, digest, &bytes, &err) == 0, "digest: %s", err.msg);
    is_str(digest, FIXTURE_DIGEST, "the digest of the fixture is the one layers are keyed by");
    is_int(bytes, 6 + 6 + 0 + 1 + 1 + 70000 + 0, "bytes: the apparent size of the files");
    free(top);
}

/* A chain of n directories named name below dfd/top (made), with a file at the bottom; made
 * with *at calls from open directories, so that its paths may be longer than PATH_MAX. */
static int make_deep(int dfd, const char *top, unsigned n, const char *name)
{
    int fd, r = -1;

    if (mkdirat(dfd, top, 0755) < 0 || (fd = openat(dfd, top, O_RDONLY | O_DIRECTORY)) < 0)
        return -1;
    for (unsigned i = 0; i < n; i++) {
        int next = mkdirat(fd, name, 0755) == 0 ? openat(fd, name, O_RDONLY | O_DIRECTORY) : -1;
        close(fd);
        if (next < 0)
            return -1;
        fd = next;
    }
    r = mkfile(fd, "bottom", "b", 1, 0644);
    close(fd);
    return r;
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static int open_fds(void)
{
    int n = 0;
    char p[64];
    for (int fd = 0; fd < 4096; fd++) {
        snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
        n += access(p, F_OK) == 0;
    }
    return n;
}

static void test_copy_keeps_what_the_digest_covers(void)
{
    char digest[72] = "";
    uint64_t bytes = 0;
    struct wr_err err = {0};
    struct wr_fs_info info = {0};
    char *src = in("fixture/fs"), *dst = in("copy"), *a = in("copy/fs/a/file"),
         *b = in("copy/fs/a/hard"), *links = in("copy/.links");
    struct stat sa, sb;

    ok(wr_layer_copy_tree(src, dst, &info, &err) == 0, "copy: %s", err.msg);
    ok(wr_layer_digest(dst, digest, &bytes, &err) == 0, "digest of the copy: %s", err.msg);
    is_str(digest, FIXTURE_DIGEST, "the copy has the fixture's digest");
    ok(lstat(a, &sa) == 0 && lstat(b, &sb) == 0 && sa.st_ino == sb.st_ino && sa.st_nlink == 2,
       "a hard link stays one inode with two links");
    ok(!exists(links), "the copy's staging directory for hard links is gone");
    ok(wr_layer_remove(dst, &err) == 0 && !exists(dst), "the copy is removed: %s", err.msg);
    free(src);
    free(dst);
    free(a);
    free(b);
    free(links);
}

/* Each walk on a tree of depth directories below fs/ (and a name of name bytes at each level). */
static void deep_walks(unsigned depth, const char *name, bool fits, const char *what)
{
    char *top = in("deep"), *fs = in("deep/fs"), *copy = in("deep-copy");
    struct wr_fs_info info = {0};
    struct wr_err err = {0};
    char digest[72];
    uint64_t bytes = 0;
    int d = open(dir, O_RDONLY | O_DIRECTORY);
    int fds = open_fds();

    ok(d >= 0 && mkdirat(d, "deep", 0700) == 0 && make_deep(d, "deep/fs", depth, name) == 0,
       "%s: made", what);
    int r = wr_layer_digest(top, digest, &bytes, &err);
    if (fits) {
        ok(r == 0 && bytes == 1, "%s: digest: %s", what, err.msg);
        ok(wr_layer_copy_tree(fs, copy, &info, &err) == 0, "%s: copy: %s", what, err.msg);
        ok(wr_layer_usage(fs, &bytes, &err) == 0 && bytes > 0, "%s: usage: %s", what, err.msg);
    } else {
        ok(r < 0 && err.kind == WR_EINVAL && strstr(err.msg, "deeper than 1024 directories"),
           "%s: digest refused: %s", what, err.msg);
        err = (struct wr_err){0};
        ok(wr_layer_copy_tree(fs, copy, &info, &err) < 0 && err.kind == WR_EINVAL &&
               strstr(err.msg, "deeper than 1024") && !exists(copy),
           "%s: copy refused, nothing left: %s", what, err.msg);
        err = (struct wr_err){0};
        ok(wr_layer_usage(fs, &bytes, &err) < 0 && err.kind == WR_EINVAL, "%s: usage refused: %s",
           what, err.msg);
    }
    is_int(open_fds(), fds, "no fd left open by the walks");
    err = (struct wr_err){0};
    ok(wr_layer_remove(copy, &err) == 0 && !exists(copy), "%s: the copy removed: %s", what,
       err.msg);
    ok(wr_layer_remove(top, &err) == 0 && !exists(top), "%s: removed: %s", what, err.msg);
    close(d);
    free(top);
    free(fs);
    free(copy);
}

static void test_deep_trees(void)
{
    char longname[256];

    memset(longname, 'n', 255);
    longname[255] = '\0';
    /* The 150 levels that crashed the daemon through the digest's stack. */
    deep_walks(150, "d", true, "150 levels");
    deep_walks(1024, "d", true, "1024 levels, the limit");
    deep_walks(1025, "d", false, "1025 levels");
    deep_walks(5000, "d", false, "5000 levels");
    /* 40 names of 255 bytes: paths of 10 KiB, past PATH_MAX. */
    deep_walks(40, longname, true, "paths past PATH_MAX");
}

/* Removal takes no more fds than it can have, whatever the depth: past them it moves what is
 * deeper up and goes on. */
static void test_remove_with_few_fds(void)
{
    struct rlimit was, few = {.rlim_cur = 48};
    struct wr_err err = {0};
    char *top = in("deep-rm");
    int d = open(dir, O_RDONLY | O_DIRECTORY);

    ok(d >= 0 && make_deep(d, "deep-rm", 5000, "d") == 0, "5000 levels made");
    getrlimit(RLIMIT_NOFILE, &was);
    few.rlim_max = was.rlim_max;
    ok(setrlimit(RLIMIT_NOFILE, &few) == 0, "at most 48 fds");
    ok(wr_layer_remove(top, &err) == 0, "removed with 48 fds: %s", err.msg);
    err = (struct wr_err){0};
    ok(make_deep(d, "deep-rm", 3000, "d") == 0 && wr_rm_rf_at(d, "deep-rm", &err) == 0,
       "wr_rm_rf_at too: %s", err.msg);
    setrlimit(RLIMIT_NOFILE, &was);
    ok(!exists(top), "nothing left");
    close(d);
    free(top);
}

/* A directory of many entries and many inodes with two links each: the copy keeps every link
 * (one inode each), the usage counts each inode once. */
static void test_wide_and_linked(void)
{
    enum { N = 10000 };
    char *top = in("wide"), *src = in("wide/fs"), *copy = in("wide-copy");
    struct wr_fs_info info = {0};
    struct wr_err err = {0};
    char digest[72], name[256];
    uint64_t bytes, used, used_copy;
    int d = open(dir, O_RDONLY | O_DIRECTORY), fs;
    int made = 0, same = 0;

    ok(d >= 0 && mkdirat(d, "wide", 0700) == 0 && mkdirat(d, "wide/fs", 0755) == 0 &&
           mkdirat(d, "wide/fs/a", 0755) == 0 && mkdirat(d, "wide/fs/b", 0755) == 0,
       "made");
    fs = openat(d, "wide/fs", O_RDONLY | O_DIRECTORY);
    for (int i = 0; i < N; i++) {
        char a[80], b[80];
        snprintf(name, sizeof(name), "%0200d", i);
        snprintf(a, sizeof(a), "a/%d", i);
        snprintf(b, sizeof(b), "b/%d", i);
        made += mkfile(fs, name, "", 0, 0644) == 0 && mkfile(fs, a, "x", 1, 0644) == 0 &&
                linkat(fs, a, fs, b, 0) == 0;
    }
    is_int(made, N, "10000 entries of 200-byte names, 10000 inodes with two links");
    ok(wr_layer_digest(top, digest, &bytes, &err) == 0 && bytes == 2 * N, "digest: %s", err.msg);
    ok(wr_layer_copy_tree(src, copy, &info, &err) == 0, "copy: %s", err.msg);
    for (int i = 0; i < N; i += 97) {
        struct stat sa, sb;
        char a[128], b[128];
        snprintf(a, sizeof(a), "%s/fs/a/%d", copy, i);
        snprintf(b, sizeof(b), "%s/fs/b/%d", copy, i);
        same +=
            lstat(a, &sa) == 0 && lstat(b, &sb) == 0 && sa.st_ino == sb.st_ino && sa.st_nlink == 2;
    }
    is_int(same, (N + 96) / 97, "every copied pair is one inode with two links");
    {
        char d2[72];
        ok(wr_layer_digest(copy, d2, &bytes, &err) == 0 && strcmp(d2, digest) == 0,
           "the copy has the same digest");
    }
    ok(wr_layer_usage(src, &used, &err) == 0 && wr_layer_usage(copy, &used_copy, &err) == 0,
       "usage: %s", err.msg);
    /* Each linked inode once: 4 KiB blocks for N one-byte files, not 2N. */
    ok(used >= (uint64_t)N * 4096 && used < (uint64_t)N * 4096 * 3 / 2 + (64u << 20),
       "usage counts each inode once (%llu bytes)", (unsigned long long)used);
    ok(wr_layer_remove(copy, &err) == 0 && wr_layer_remove(top, &err) == 0 && !exists(top) &&
           !exists(copy),
       "removed: %s", err.msg);
    close(fs);
    close(d);
    free(top);
    free(src);
    free(copy);
}

/* A file's capabilities and setuid bit survive a copy: the chown, which clears both, comes before
 * the xattrs and the mode. */
static void test_copy_keeps_file_caps_and_setuid(void)
{
    /* security.capability v2, effective: CAP_NET_RAW (13) permitted */
    const uint32_t cap[5] = {0x02000001, 1u << 13, 0, 0, 0};
    char *top = in("caps"), *src = in("caps/fs"), *copy = in("caps-copy"),
         *f = in("caps-copy/fs/ping");
    struct wr_fs_info info = {0};
    struct wr_err err = {0};
    uint32_t got[5] = {0};
    struct stat st;
    int d = open(dir, O_RDONLY | O_DIRECTORY);
    int fd = -1;

    ok(d >= 0 && mkdirat(d, "caps", 0700) == 0 && mkdirat(d, "caps/fs", 0755) == 0 &&
           mkfile(d, "caps/fs/ping", "x", 1, 0755) == 0 &&
           fchownat(d, "caps/fs/ping", 1000, 1000, 0) == 0 &&
           (fd = openat(d, "caps/fs/ping", O_RDONLY | O_CLOEXEC)) >= 0 &&
           fsetxattr(fd, "security.capability", cap, sizeof(cap), 0) == 0 && fchmod(fd, 04755) == 0,
       "made a setuid file with capabilities: %s", strerror(errno));
    if (fd >= 0)
        close(fd);
    ok(wr_layer_copy_tree(src, copy, &info, &err) == 0, "copy: %s", err.msg);
    ok(lgetxattr(f, "security.capability", got, sizeof(got)) == sizeof(cap) &&
           memcmp(got, cap, sizeof(cap)) == 0,
       "the copy keeps security.capability");
    ok(lstat(f, &st) == 0 && (st.st_mode & 07777) == 04755 && st.st_uid == 1000,
       "and its owner and setuid mode");
    ok(wr_layer_remove(copy, &err) == 0 && wr_layer_remove(top, &err) == 0, "removed");
    close(d);
    free(top);
    free(src);
    free(copy);
    free(f);
}

/* FIFOs, sockets and device nodes are digested and copied without being opened for reading (a
 * FIFO would hang the walk). */
static void test_special_files(void)
{
    char *top = in("special"), *src = in("special/fs"), *copy = in("special-copy"), *sock = NULL;
    struct wr_fs_info info = {0};
    struct wr_err err = {0};
    char d1[72], d2[72];
    uint64_t bytes;
    struct stat st;
    int d = open(dir, O_RDONLY | O_DIRECTORY);

    ok(d >= 0 && mkdirat(d, "special", 0700) == 0 && mkdirat(d, "special/fs", 0755) == 0 &&
           mkfifoat(d, "special/fs/fifo", 0644) == 0 &&
           mknodat(d, "special/fs/null", S_IFCHR | 0666, makedev(1, 3)) == 0 &&
           mknodat(d, "special/fs/sock", S_IFSOCK | 0755, 0) == 0 &&
           symlinkat("/etc/passwd", d, "special/fs/abs") == 0 &&
           symlinkat("loop", d, "special/fs/loop") == 0,
       "made");
    ok(wr_layer_digest(top, d1, &bytes, &err) == 0, "digest: %s", err.msg);
    ok(wr_layer_copy_tree(src, copy, &info, &err) == 0, "copy: %s", err.msg);
    ok(wr_layer_digest(copy, d2, &bytes, &err) == 0 && strcmp(d1, d2) == 0,
       "the copy has the same digest: %s", err.msg);
    sock = in("special-copy/fs/sock");
    ok(lstat(sock, &st) == 0 && S_ISSOCK(st.st_mode), "a socket is copied as a socket");
    ok(wr_layer_remove(copy, &err) == 0 && wr_layer_remove(top, &err) == 0, "removed");
    close(d);
    free(top);
    free(src);
    free(copy);
    free(sock);
}

/* mkdir -p of a path of 2,040 components: no recursion with a PATH_MAX buffer per level (that
 * took 8.4 MB of stack, past the 8 MB of a main thread). */
static void test_mkdir_p_many_components(void)
{
    char *path = xasprintf("%s/m", dir);
    struct wr_err err = {0};

    while (strlen(path) + 2 < 4090) {
        char *p = xasprintf("%s/m", path);
        free(path);
        path = p;
    }
    ok(strlen(path) < 4096, "a path of %zu bytes", strlen(path));
    ok(wr_mkdir_p(path, 0755, &err) == 0 && exists(path), "mkdir -p: %s", err.msg);
    ok(wr_mkdir_p(path, 0755, &err) == 0, "again: it exists");
    free(path);
    path = in("m");
    ok(wr_layer_remove(path, &err) == 0 && !exists(path), "removed: %s", err.msg);
    free(path);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define TIMED(f)                                                                                   \
    do {                                                                                           \
        double t0_ = now();                                                                        \
        f();                                                                                       \
        printf("# %s: %.2f s\n", #f, now() - t0_);                                                 \
    } while (0)

int main(void)
{
    if (geteuid() != 0) {
        printf("1..0 # SKIP needs root (owners, device nodes, trusted xattrs)\n");
        return 77;
    }
    if (mkdtemp(disk) == NULL || mkdtemp(mem) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    TIMED(test_digest_is_pinned);
    TIMED(test_copy_keeps_what_the_digest_covers);
    TIMED(test_special_files);
    TIMED(test_copy_keeps_file_caps_and_setuid);
    dir = mem;
    TIMED(test_deep_trees);
    TIMED(test_remove_with_few_fds);
    TIMED(test_wide_and_linked);
    TIMED(test_mkdir_p_many_components);
    {
        struct wr_err err = {0};
        ok(wr_layer_remove(disk, &err) == 0 && wr_layer_remove(mem, &err) == 0,
           "the test directories are removed: %s", err.msg);
    }
    return done();
}
