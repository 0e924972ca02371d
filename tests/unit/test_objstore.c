/* SPDX-License-Identifier: Apache-2.0 */
/* The object store (src/image/objstore.c): key validation; the file:// backend on a temporary
 * directory (put, get, exists, list, delete, immutability, symlinks planted in the store not
 * followed); the s3:// backend against s3rver (tests/s3, installed by scripts/deps.sh test),
 * started here on 127.0.0.1 and an ephemeral port; and the SigV4 signatures of the s3 requests,
 * checked by a server of the test on 127.0.0.1 (s3rver does not check them). The s3rver part is
 * skipped only when node or tests/s3/node_modules is missing. Run from the top of the tree
 * (make unit). */
#include "../../src/image/objstore.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "../../src/util/fs.h"
#include "../../src/util/strv.h"
#include "../../src/util/xalloc.h"
#include "tap.h"

#define S3RVER_JS "tests/s3/node_modules/s3rver/bin/s3rver.js"
#define BUCKET    "warren-test"

static char tmp[] = "/tmp/test_objstore.XXXXXX";

static void write_file(const char *path, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || wr_write_all(fd, p, n) < 0)
        abort();
    close(fd);
}

/* The whole file at path (NULL if it cannot be read); its length in *n. */
static char *read_file(const char *path, size_t *n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    char *p;

    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    p = xmalloc((size_t)st.st_size + 1);
    *n = (size_t)wr_read_all(fd, p, (size_t)st.st_size);
    close(fd);
    return p;
}

/* The keys joined with ',' (for comparisons), freed with the array. */
static char *joined(char **keys)
{
    static char buf[4096];
    size_t len = 0;

    buf[0] = '\0';
    for (size_t i = 0; keys != NULL && keys[i] != NULL; i++)
        len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s", i ? "," : "", keys[i]);
    wr_strv_free(keys);
    return buf;
}

static const char *list(struct wr_objstore *s, const char *prefix)
{
    struct wr_err err = {0};
    char **keys = NULL;

    if (wr_objstore_list(s, prefix, &keys, &err) < 0) {
        printf("# list `%s`: %s\n", prefix, err.msg);
        return "(error)";
    }
    return joined(keys);
}

/* How many entries of dir have a name starting with start. */
static int count_named(const char *dir, const char *start)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;

    while (d != NULL && (de = readdir(d)) != NULL)
        n += strncmp(de->d_name, start, strlen(start)) == 0;
    if (d != NULL)
        closedir(d);
    return n;
}

static void test_keys(void)
{
    static const char *const bad[] = {"",    "/x",    "../x", "a//b", "a/./b", "a/../b",
                                      ".",   "..",    "a/",   "a b",  "a\\b",  "a:b",
                                      "a?b", "a%2Fb", "a/.",  "a/.."};
    static const char *const good[] = {"a",       "blobs/sha256/0123abcdef", "a/.b", "a..b",
                                       "A-Z_0.9", "manifests/t/1.json"};
    char k[600];
    int all_bad = 1, all_good = 1;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (wr_objstore_key_valid(bad[i])) {
            printf("# accepted `%s`\n", bad[i]);
            all_bad = 0;
        }
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (!wr_objstore_key_valid(good[i])) {
            printf("# refused `%s`\n", good[i]);
            all_good = 0;
        }
    ok(all_bad, "keys: empty, absolute, dot segments, empty segments, other characters refused");
    ok(all_good, "keys: plain keys accepted");
    ok(!wr_objstore_key_valid(NULL), "keys: NULL refused");
    ok(!wr_objstore_key_valid("a\xc3\xa9"), "keys: non-ASCII refused");
    memset(k, 'a', 512);
    k[512] = '\0';
    ok(wr_objstore_key_valid(k), "keys: 512 bytes accepted");
    k[512] = 'a';
    k[513] = '\0';
    ok(!wr_objstore_key_valid(k), "keys: 513 bytes refused");
}

static void test_open_errors(void)
{
    struct wr_objstore *s = NULL;
    struct wr_err err = {0};

    is_int(wr_objstore_open("file://relative/dir", &s, &err), -1, "open: file URL not absolute");
    is_int(err.kind, WR_EINVAL, "open: file URL not absolute is WR_EINVAL");
    is_int(wr_objstore_open("ftp://x/y", &s, &err), -1, "open: unknown scheme");
    is_int(err.kind, WR_EINVAL, "open: unknown scheme is WR_EINVAL");
    is_int(wr_objstore_open("file:///nonexistent/test_objstore", &s, &err), -1,
           "open: missing directory");
    is_int(wr_objstore_open("s3://" BUCKET "/p", &s, &err), -1, "open: s3 without endpoint");
    is_int(err.kind, WR_EINVAL, "open: s3 without endpoint is WR_EINVAL");
    is_int(wr_objstore_open("s3://B_AD?endpoint=http://127.0.0.1:1", &s, &err), -1,
           "open: s3 bad bucket name");
    is_int(wr_objstore_open("s3://" BUCKET "/a/../b?endpoint=http://127.0.0.1:1", &s, &err), -1,
           "open: s3 bad prefix");
    is_int(wr_objstore_open("s3://" BUCKET "?endpoint=http://127.0.0.1:1&max-keys=0", &s, &err), -1,
           "open: s3 bad max-keys");
    is_int(wr_objstore_open("s3://" BUCKET "?endpoint=http://127.0.0.1:1&colour=red", &s, &err), -1,
           "open: s3 unknown parameter");
}

/* put, exists, get, immutability and delete on any backend. */
static void test_basic(struct wr_objstore *s, const char *what)
{
    struct wr_err err = {0};
    bool existed = true;
    uint64_t size = 0;
    char *data = NULL;
    size_t len = 0;

    is_int(wr_objstore_put(s, "manifests/app/1.json", "{\"v\":1}", 7, &existed, &err), 0,
           "put a manifest");
    ok(!existed, "%s: a new key did not exist", what);
    is_int(wr_objstore_exists(s, "manifests/app/1.json", &size, &err), 1, "exists");
    is_int(size, 7, "exists: its size");
    is_int(wr_objstore_get(s, "manifests/app/1.json", 1024, &data, &len, &err), 0, "get");
    ok(data != NULL && len == 7 && strcmp(data, "{\"v\":1}") == 0, "%s: get: the bytes put", what);
    free(data);
    data = NULL;

    is_int(wr_objstore_put(s, "manifests/app/1.json", "other", 5, &existed, &err), 0, "put again");
    ok(existed, "%s: a second put says it existed", what);
    is_int(wr_objstore_get(s, "manifests/app/1.json", 1024, &data, &len, &err), 0, "get again");
    ok(data != NULL && strcmp(data, "{\"v\":1}") == 0, "%s: a second put changed nothing", what);
    free(data);
    data = NULL;

    is_int(wr_objstore_get(s, "manifests/app/1.json", 3, &data, &len, &err), -1, "get over max");
    is_int(err.kind, WR_ETOOBIG, "get over max is WR_ETOOBIG");

    is_int(wr_objstore_get(s, "manifests/app/none", 1024, &data, &len, &err), -1, "get missing");
    is_int(err.kind, WR_ENOTFOUND, "get missing is WR_ENOTFOUND");
    is_int(wr_objstore_get(s, "nodir/none", 1024, &data, &len, &err), -1, "get missing dir");
    is_int(err.kind, WR_ENOTFOUND, "get under a missing directory is WR_ENOTFOUND");
    is_int(wr_objstore_exists(s, "manifests/app/none", NULL, &err), 0, "exists missing: 0");
    is_int(wr_objstore_exists(s, "nodir/none", NULL, &err), 0, "exists missing dir: 0");

    is_int(wr_objstore_put(s, "a//b", "x", 1, NULL, &err), -1, "put a bad key");
    is_int(err.kind, WR_EINVAL, "put a bad key is WR_EINVAL");
    is_int(wr_objstore_get(s, "../x", 10, &data, &len, &err), -1, "get a bad key");
    is_int(err.kind, WR_EINVAL, "get a bad key is WR_EINVAL");
    is_int(wr_objstore_exists(s, "/x", NULL, &err), -1, "exists of a bad key");
    is_int(wr_objstore_delete(s, "a/./b", &err), -1, "delete of a bad key");

    is_int(wr_objstore_delete(s, "manifests/app/1.json", &err), 0, "delete");
    is_int(wr_objstore_exists(s, "manifests/app/1.json", NULL, &err), 0, "deleted: gone");
    is_int(wr_objstore_delete(s, "manifests/app/1.json", &err), 0, "delete again: not an error");
    is_int(wr_objstore_delete(s, "nodir/none", &err), 0, "delete under a missing directory");
}

/* put_file and get_file of a larger file, compared byte for byte, and no temporary left. */
static void test_files(struct wr_objstore *s, const char *what)
{
    struct wr_err err = {0};
    size_t n = 300 * 1024 + 7, got = 0;
    char *buf = xmalloc(n), *back;
    char in[256], out[300], outdir[256];
    bool existed = true;

    srand(7);
    for (size_t i = 0; i < n; i++)
        buf[i] = (char)rand();
    snprintf(in, sizeof(in), "%s/in.bin", tmp);
    snprintf(outdir, sizeof(outdir), "%s/out-%s", tmp, what);
    snprintf(out, sizeof(out), "%s/layer.tar", outdir);
    write_file(in, buf, n);
    mkdir(outdir, 0755);

    is_int(wr_objstore_put_file(s, "blobs/sha256/abc", in, &existed, &err), 0, "put_file");
    ok(!existed, "%s: put_file of a new key", what);
    is_int(wr_objstore_get_file(s, "blobs/sha256/abc", out, &err), 0, "get_file");
    back = read_file(out, &got);
    ok(back != NULL && got == n && memcmp(back, buf, n) == 0, "%s: get_file: the same bytes", what);
    free(back);
    write_file(out, "stale", 5);
    is_int(wr_objstore_get_file(s, "blobs/sha256/abc", out, &err), 0, "get_file over a file");
    back = read_file(out, &got);
    ok(back != NULL && got == n, "%s: get_file replaces what was at path", what);
    free(back);
    is_int(wr_objstore_get_file(s, "blobs/sha256/none", out, &err), -1, "get_file missing");
    is_int(err.kind, WR_ENOTFOUND, "get_file missing is WR_ENOTFOUND");
    is_int(count_named(outdir, "layer.tar"), 1, "get_file left no temporary beside its path");
    is_int(wr_objstore_put_file(s, "blobs/sha256/abc", in, &existed, &err), 0, "put_file again");
    ok(existed, "%s: put_file of a key that exists", what);
    is_int(wr_objstore_put_file(s, "blobs/sha256/x", "/nonexistent/in", NULL, &err), -1,
           "put_file of a missing file");
    free(buf);
}

/* Listings: sorted, by string prefix (a partial last segment too). */
static void test_list(struct wr_objstore *s, const char *what)
{
    static const char *const keys[] = {"blobs/sha256/bb", "blobs/sha256/aa", "blobs/sha512/cc",
                                       "blobs-x", "manifests/m/1"};
    struct wr_err err = {0};
    char **v = NULL;

    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (wr_objstore_put(s, keys[i], "k", 1, NULL, &err) < 0)
            printf("# put %s: %s\n", keys[i], err.msg);
    is_str(list(s, ""),
           "blobs-x,blobs/sha256/aa,blobs/sha256/abc,blobs/sha256/bb,blobs/sha512/cc,manifests/m/1",
           "list everything, sorted");
    is_str(list(s, "blobs/"), "blobs/sha256/aa,blobs/sha256/abc,blobs/sha256/bb,blobs/sha512/cc",
           "list a directory");
    is_str(list(s, "blobs/sha2"), "blobs/sha256/aa,blobs/sha256/abc,blobs/sha256/bb",
           "list with a partial segment");
    is_str(list(s, "blobs"),
           "blobs-x,blobs/sha256/aa,blobs/sha256/abc,blobs/sha256/bb,blobs/sha512/cc",
           "list with a partial first segment");
    is_str(list(s, "blobs/sha256/aa"), "blobs/sha256/aa", "list with a whole key");
    is_str(list(s, "nothing/"), "", "list of a missing prefix is empty");
    is_int(wr_objstore_list(s, "../", &v, &err), -1, "list with a bad prefix");
    is_int(err.kind, WR_EINVAL, "list with a bad prefix is WR_EINVAL");
}

/* The file backend's own: temporaries and symlinks planted in the directory. */
static void test_file_plants(struct wr_objstore *s, const char *store)
{
    struct wr_err err = {0};
    char p[512], outside[256], target[300];
    char *data = NULL;
    size_t len = 0;

    snprintf(outside, sizeof(outside), "%s/outside", tmp);
    mkdir(outside, 0755);
    snprintf(target, sizeof(target), "%s/secret", outside);
    write_file(target, "secret", 6);
    snprintf(p, sizeof(p), "%s/link", store);
    ok(symlink(target, p) == 0, "plant a symlink to a file");
    snprintf(p, sizeof(p), "%s/ldir", store);
    ok(symlink(outside, p) == 0, "plant a symlink to a directory");
    snprintf(p, sizeof(p), "%s/blobs/.tmp~0123", store);
    write_file(p, "partial", 7);

    ok(wr_objstore_get(s, "link", 100, &data, &len, &err) < 0, "get through a symlink fails");
    printf("# %s\n", err.msg);
    ok(wr_objstore_get(s, "ldir/secret", 100, &data, &len, &err) < 0,
       "get through a symlinked directory fails");
    printf("# %s\n", err.msg);
    ok(wr_objstore_exists(s, "link", NULL, &err) < 0, "exists of a symlink is an error");
    ok(wr_objstore_exists(s, "ldir/secret", NULL, &err) != 1,
       "exists through a symlinked directory is not 1");
    ok(wr_objstore_put(s, "ldir/new", "x", 1, NULL, &err) < 0,
       "put through a symlinked directory fails");
    is_int(count_named(outside, "new"), 0, "nothing was written outside the store");
    is_int(count_named(outside, ".tmp"), 0, "no temporary was written outside the store");
    is_int(wr_objstore_delete(s, "ldir/secret", &err), -1,
           "delete through a symlinked directory fails");
    ok(access(target, F_OK) == 0, "the file outside the store is still there");
    is_str(list(s, ""),
           "blobs-x,blobs/sha256/aa,blobs/sha256/abc,blobs/sha256/bb,blobs/sha512/cc,manifests/m/1",
           "list shows neither symlinks nor temporaries");
    is_int(count_named(store, ".tmp~"), 0, "puts left no temporary in the store's top");
    is_int(wr_objstore_put(s, "blobs/sha256", "x", 1, NULL, &err), -1,
           "put of a key that is a directory fails");
    is_int(err.kind, WR_EBADDATA, "put of a key that is a directory is WR_EBADDATA");
}

static void test_file(void)
{
    struct wr_objstore *s = NULL;
    struct wr_err err = {0};
    char store[256], url[300];

    snprintf(store, sizeof(store), "%s/store", tmp);
    mkdir(store, 0755);
    snprintf(url, sizeof(url), "file://%s", store);
    if (wr_objstore_open(url, &s, &err) < 0) {
        ok(0, "open %s: %s", url, err.msg);
        return;
    }
    is_str(wr_objstore_url(s), url, "file: the URL as given");
    test_basic(s, "file");
    test_files(s, "file");
    test_list(s, "file");
    test_file_plants(s, store);
    wr_objstore_free(s);
}

/* ---- s3 ---------------------------------------------------------------------------------------
 */

/* Start s3rver on 127.0.0.1 and an ephemeral port, with its data in dir and the bucket made.
 * Returns its pid with the port in *port, or -1. */
static pid_t s3rver_start(const char *dir, int *port)
{
    int p[2];
    char buf[4096];
    size_t len = 0;
    pid_t pid;
    time_t until = time(NULL) + 60;

    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(p[1], 1);
        /* s3rver's continuation tokens use DES, which OpenSSL 3 keeps in its legacy provider. */
        execlp("node", "node", "--openssl-legacy-provider", S3RVER_JS, "-d", dir, "-a", "127.0.0.1",
               "-p", "0", "--silent", "--configure-bucket", BUCKET, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    while (pid > 0 && time(NULL) < until && len < sizeof(buf) - 1) {
        struct pollfd pfd = {.fd = p[0], .events = POLLIN};
        const char *at;
        ssize_t n;

        if (poll(&pfd, 1, 1000) <= 0)
            continue;
        n = read(p[0], buf + len, sizeof(buf) - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        at = strstr(buf, "listening on 127.0.0.1:");
        if (at != NULL && strchr(at, '\n') != NULL) {
            *port = (int)strtol(at + strlen("listening on 127.0.0.1:"), NULL, 10);
            close(p[0]);
            return pid;
        }
    }
    close(p[0]);
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    printf("# s3rver did not start: %s\n", buf);
    return -1;
}

/* A listing over several pages: max-keys=3 and 10 keys. Not mixed with test_list's keys:
 * s3rver lists in its directories' order and starts a page after the last key of the previous
 * one, so it loses "blobs-x" after "blobs/sha512/cc" (S3 lists in byte order). */
static void test_s3_pages(int port)
{
    struct wr_objstore *s = NULL;
    struct wr_err err = {0};
    char url[256], k[32];

    snprintf(url, sizeof(url),
             "s3://" BUCKET "/warren/paged?endpoint=http://127.0.0.1:%d&max-keys=3", port);
    if (wr_objstore_open(url, &s, &err) < 0) {
        ok(0, "open %s: %s", url, err.msg);
        return;
    }
    for (int i = 9; i >= 0; i--) {
        snprintf(k, sizeof(k), "many/k%02d", i);
        if (wr_objstore_put(s, k, "m", 1, NULL, &err) < 0)
            printf("# put %s: %s\n", k, err.msg);
    }
    is_str(list(s, ""),
           "many/k00,many/k01,many/k02,many/k03,many/k04,many/k05,many/k06,many/k07,many/k08,"
           "many/k09",
           "s3: a listing over four pages");
    is_str(list(s, "many/k0"),
           "many/k00,many/k01,many/k02,many/k03,many/k04,many/k05,many/k06,many/k07,many/k08,"
           "many/k09",
           "s3: a listing over four pages, by a partial segment");
    wr_objstore_free(s);
}

static void test_s3_store(int port)
{
    struct wr_objstore *s = NULL;
    struct wr_err err = {0};
    char url[256];

    snprintf(url, sizeof(url), "s3://" BUCKET "/warren/t1?endpoint=http://127.0.0.1:%d", port);
    if (wr_objstore_open(url, &s, &err) < 0) {
        ok(0, "open %s: %s", url, err.msg);
        return;
    }
    ok(1, "s3: open (HEAD of the bucket)");
    is_str(wr_objstore_url(s), url, "s3: the URL as given");
    test_basic(s, "s3");
    test_files(s, "s3");
    test_list(s, "s3");
    wr_objstore_free(s);
    test_s3_pages(port);

    /* Another prefix of the same bucket sees none of it. */
    snprintf(url, sizeof(url), "s3://" BUCKET "/warren/t2?endpoint=http://127.0.0.1:%d/", port);
    if (wr_objstore_open(url, &s, &err) == 0) {
        is_str(list(s, ""), "", "s3: another prefix is another store");
        wr_objstore_free(s);
    } else
        ok(0, "open %s: %s", url, err.msg);

    snprintf(url, sizeof(url), "s3://no-such-bucket?endpoint=http://127.0.0.1:%d", port);
    is_int(wr_objstore_open(url, &s, &err), -1, "s3: open of a missing bucket fails");
    is_int(err.kind, WR_ENOTFOUND, "s3: a missing bucket is WR_ENOTFOUND");

    setenv("AWS_ACCESS_KEY_ID", "NOTS3RVER", 1);
    snprintf(url, sizeof(url), "s3://" BUCKET "?endpoint=http://127.0.0.1:%d", port);
    is_int(wr_objstore_open(url, &s, &err), -1, "s3: a wrong access key is refused");
    is_int(err.kind, WR_EUPSTREAM, "s3: a wrong access key is WR_EUPSTREAM");
    printf("# %s\n", err.msg);
    unsetenv("AWS_ACCESS_KEY_ID");
    is_int(wr_objstore_open(url, &s, &err), -1, "s3: no credentials");
    is_int(err.kind, WR_EINVAL, "s3: no credentials is WR_EINVAL");

    snprintf(url, sizeof(url), "s3://" BUCKET "?endpoint=http://127.0.0.1:1");
    setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
    is_int(wr_objstore_open(url, &s, &err), -1, "s3: nothing listening");
    is_int(err.kind, WR_EUPSTREAM, "s3: nothing listening is WR_EUPSTREAM");
}

/* ---- SigV4, checked against the algorithm ---------------------------------------------------- */

/* s3rver does not check SigV4 signatures, so a server of this test on 127.0.0.1 answers an open
 * a put and a listing of two pages, keeps each request, and the test signs each again from what was
 * received, as S3 does: a canonical request (the query's parameters decoded, encoded again and
 * sorted; the signed headers; the payload's hash as x-amz-content-sha256 says), then the string
 * to sign and the HMAC-SHA256 chain of date, region, service. */

#define MOCK_REQS 8

struct mock {
    int lfd;
    char req[MOCK_REQS][4096];
    int n;
};

static const char page1[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult><Name>bkt</Name>"
    "<IsTruncated>true</IsTruncated><Contents><Key>pre/b</Key><Size>1</Size></Contents>"
    "<Contents><Key>pre/a&amp;x</Key></Contents><Contents><Key>elsewhere/c</Key></Contents>"
    "<NextContinuationToken>t&amp;k/+=</NextContinuationToken></ListBucketResult>";
static const char page2[] =
    "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>pre/a.1</Key></Contents>"
    "<Contents><Key>pre/&lt;x</Key></Contents><Contents><Key>pre/q&bogus;</Key></Contents>"
    "</ListBucketResult>";

/* The value of header name (lowercase) in a request head, trimmed, into out. */
static bool header(const char *req, const char *name, char *out, size_t size)
{
    size_t n = strlen(name);

    for (const char *l = strstr(req, "\r\n"); l != NULL && l[2] != '\r';
         l = strstr(l + 2, "\r\n")) {
        const char *v = l + 2, *e = strstr(v, "\r\n");
        if (strncasecmp(v, name, n) != 0 || v[n] != ':')
            continue;
        for (v += n + 1; *v == ' '; v++)
            ;
        snprintf(out, size, "%.*s", (int)(e - v), v);
        return true;
    }
    return false;
}

/* The answer to a request: the bucket is there, objects are not (HEAD 404), a PUT is taken, a
 * listing has two pages. */
static const char *mock_answer(const char *req, int *status)
{
    *status = 200;
    if (strncmp(req, "HEAD /bkt ", 10) == 0 || strncmp(req, "PUT ", 4) == 0)
        return "";
    if (strncmp(req, "HEAD ", 5) == 0) {
        *status = 404;
        return "";
    }
    return strstr(req, "continuation-token=") != NULL ? page2 : page1;
}

/* Answer one connection's requests (a PUT's small body is read and dropped). */
static void mock_conn(struct mock *m, int c)
{
    char buf[4096], head[256], cl[32];
    size_t len = 0;

    while (m->n < MOCK_REQS) {
        char *end = memmem(buf, len, "\r\n\r\n", 4), *req = m->req[m->n];
        size_t hl, body_len = 0;
        const char *body;
        int status;
        ssize_t r = 0;

        if (end == NULL) {
            r = read(c, buf + len, sizeof(buf) - 1 - len);
            if (r <= 0)
                return;
            len += (size_t)r;
            continue;
        }
        hl = (size_t)(end + 4 - buf);
        snprintf(req, sizeof(m->req[0]), "%.*s", (int)hl, buf);
        if (header(req, "content-length", cl, sizeof(cl)))
            body_len = strtoul(cl, NULL, 10);
        if (body_len > sizeof(buf) / 2)
            return;
        while (len < hl + body_len && (r = read(c, buf + len, sizeof(buf) - 1 - len)) > 0)
            len += (size_t)r;
        if (len < hl + body_len)
            return;
        m->n++;
        body = mock_answer(req, &status);
        snprintf(head, sizeof(head), "HTTP/1.1 %d X\r\nContent-Length: %zu\r\n\r\n", status,
                 strlen(body));
        if (wr_write_all(c, head, strlen(head)) < 0 ||
            (strncmp(req, "HEAD ", 5) != 0 && wr_write_all(c, body, strlen(body)) < 0))
            return;
        len -= hl + body_len;
        memmove(buf, buf + hl + body_len, len);
    }
}

static void *mock_run(void *arg)
{
    struct mock *m = arg;
    int c;

    while (m->n < MOCK_REQS && (c = accept4(m->lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
        struct timeval tv = {.tv_sec = 10};
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        mock_conn(m, c);
        close(c);
    }
    return NULL;
}

/* AWS's URI encoding of the n bytes at p (%XX decoded first): all but A-Za-z0-9-_.~ as %XX. */
static void uri_reencode(const char *p, size_t n, char *out, size_t size)
{
    size_t o = 0;

    for (size_t i = 0; i < n && o + 4 < size; i++) {
        unsigned c = (unsigned char)p[i];
        if (c == '%' && i + 2 < n && sscanf(p + i + 1, "%2x", &c) == 1)
            i += 2;
        if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, size - o, "%%%02X", c);
    }
    out[o] = '\0';
}

struct qparam {
    char k[128], v[512];
};

static int by_param(const void *a, const void *b)
{
    const struct qparam *x = a, *y = b;
    int r = strcmp(x->k, y->k);
    return r != 0 ? r : strcmp(x->v, y->v);
}

/* The canonical query of a query string: decoded, encoded again, sorted by name then value. */
static void canonical_query(const char *q, size_t qn, char *out, size_t size)
{
    struct qparam p[16];
    size_t np = 0, o = 0;
    const char *end = q + qn;

    while (q < end && np < 16) {
        const char *amp = memchr(q, '&', (size_t)(end - q)), *eq;
        if (amp == NULL)
            amp = end;
        eq = memchr(q, '=', (size_t)(amp - q));
        uri_reencode(q, (size_t)((eq ? eq : amp) - q), p[np].k, sizeof(p[np].k));
        uri_reencode(eq ? eq + 1 : amp, eq ? (size_t)(amp - eq - 1) : 0, p[np].v, sizeof(p[np].v));
        np++;
        q = amp + 1;
    }
    qsort(p, np, sizeof(p[0]), by_param);
    out[0] = '\0';
    for (size_t i = 0; i < np; i++)
        o += (size_t)snprintf(out + o, size - o, "%s%s=%s", i ? "&" : "", p[i].k, p[i].v);
}

static void hmac(const unsigned char *key, size_t klen, const char *msg, unsigned char out[32])
{
    unsigned int n = 32;
    HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), out, &n);
}

static void hex(const unsigned char *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", p[i]);
}

/* Whether the request head req carries a good SigV4 signature by secret. */
static bool sigv4_ok(const char *req, const char *secret)
{
    char auth[512], date[32], day[16], region[64], signed_hdrs[256], names[256], sig[80], hv[512];
    char creq[4096], cq[1024], sts[512], kbuf[128], want[65], digest[65];
    unsigned char k[32], h[32];
    const char *sp1 = strchr(req, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL, *qm;
    size_t o;

    if (sp2 == NULL || !header(req, "authorization", auth, sizeof(auth)) ||
        !header(req, "x-amz-date", date, sizeof(date)) ||
        sscanf(auth,
               "AWS4-HMAC-SHA256 Credential=%*[^/]/%15[^/]/%63[^/]/s3/aws4_request, "
               "SignedHeaders=%255[^,], Signature=%79s",
               day, region, signed_hdrs, sig) != 4)
        return false;
    qm = memchr(sp1 + 1, '?', (size_t)(sp2 - sp1 - 1));
    canonical_query(qm ? qm + 1 : sp2, qm ? (size_t)(sp2 - qm - 1) : 0, cq, sizeof(cq));
    o = (size_t)snprintf(creq, sizeof(creq), "%.*s\n%.*s\n%s\n", (int)(sp1 - req), req,
                         (int)((qm ? qm : sp2) - sp1 - 1), sp1 + 1, cq);
    snprintf(names, sizeof(names), "%s", signed_hdrs);
    for (char *save = NULL, *name = strtok_r(names, ";", &save); name != NULL;
         name = strtok_r(NULL, ";", &save)) {
        if (!header(req, name, hv, sizeof(hv)))
            return false;
        o += (size_t)snprintf(creq + o, sizeof(creq) - o, "%s:%s\n", name, hv);
    }
    if (!header(req, "x-amz-content-sha256", hv, sizeof(hv)))
        return false;
    snprintf(creq + o, sizeof(creq) - o, "\n%s\n%s", signed_hdrs, hv);
    SHA256((const unsigned char *)creq, strlen(creq), h);
    hex(h, 32, digest);
    snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s/%s/s3/aws4_request\n%s", date, day, region,
             digest);
    snprintf(kbuf, sizeof(kbuf), "AWS4%s", secret);
    hmac((const unsigned char *)kbuf, strlen(kbuf), day, k);
    hmac(k, 32, region, k);
    hmac(k, 32, "s3", k);
    hmac(k, 32, "aws4_request", k);
    hmac(k, 32, sts, h);
    hex(h, 32, want);
    return strcmp(want, sig) == 0;
}

static void test_sigv4(void)
{
    struct mock m = {.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    struct wr_objstore *s = NULL;
    struct wr_err err = {0};
    char url[256];
    pthread_t t;

    if (bind(m.lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(m.lfd, 8) < 0 ||
        getsockname(m.lfd, (struct sockaddr *)&a, &alen) < 0 ||
        pthread_create(&t, NULL, mock_run, &m) != 0) {
        ok(0, "sigv4: a server on 127.0.0.1");
        return;
    }
    setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", 1);
    setenv("AWS_SESSION_TOKEN", "token/with+chars=", 1);
    snprintf(url, sizeof(url), "s3://bkt/pre?endpoint=http://127.0.0.1:%d&region=eu-west-3",
             ntohs(a.sin_port));
    is_int(wr_objstore_open(url, &s, &err), 0, "sigv4: open");
    if (s != NULL) {
        is_int(wr_objstore_put(s, "blobs/x", "hello", 5, NULL, &err), 0, "sigv4: put");
        is_str(list(s, ""), "a.1,b",
               "sigv4: two pages; keys of other prefixes and keys that are not keys skipped");
        wr_objstore_free(s);
    }
    shutdown(m.lfd, SHUT_RDWR);
    pthread_join(t, NULL);
    close(m.lfd);
    is_int(m.n, 5, "sigv4: HEAD of the bucket, HEAD and PUT of an object, two pages");
    for (int i = 0; i < m.n; i++) {
        char line[200];
        snprintf(line, sizeof(line), "%.*s", (int)strcspn(m.req[i], "\r"), m.req[i]);
        ok(sigv4_ok(m.req[i], "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
           "sigv4: a good signature: %s", line);
        ok(strstr(m.req[i], "x-amz-security-token: token/with+chars=\r\n") != NULL &&
               strstr(m.req[i], "x-amz-security-token;") == NULL &&
               strstr(m.req[i], ";x-amz-security-token") != NULL,
           "sigv4: the session token is sent and signed");
    }
    ok(m.n == 5 && strstr(m.req[4], "continuation-token=t%26k%2F%2B%3D&list-type=2") != NULL,
       "sigv4: the continuation token decoded and sent encoded");
    ok(!sigv4_ok(m.req[0], "another secret"), "sigv4: the check refuses another secret");
    unsetenv("AWS_SESSION_TOKEN");
}

static void test_s3(void)
{
    char dir[300];
    int port = 0;
    pid_t pid;

    if (system("command -v node >/dev/null 2>&1") != 0 || access(S3RVER_JS, R_OK) != 0) {
        printf("ok %d # SKIP s3: node or tests/s3/node_modules missing (scripts/deps.sh test)\n",
               ++tap_n);
        return;
    }
    snprintf(dir, sizeof(dir), "%s/s3rver", tmp);
    pid = s3rver_start(dir, &port);
    if (pid < 0) {
        ok(0, "s3rver starts");
        return;
    }
    setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
    unsetenv("AWS_SESSION_TOKEN");
    test_s3_store(port);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

int main(void)
{
    char cmd[300];

    if (mkdtemp(tmp) == NULL)
        return 1;
    test_keys();
    test_open_errors();
    test_file();
    test_sigv4();
    test_s3();
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", tmp);
    return done();
}
