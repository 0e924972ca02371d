/* SPDX-License-Identifier: Apache-2.0 */
/* Object storage (objstore.h): a shared directory (file://) or an S3-compatible service (s3://,
 * libcurl signing with SigV4). A key is checked before it reaches a path or a URL, so it is
 * always a relative path of plain segments: the file backend resolves it one segment at a time
 * from the store's directory without following a symlink, and the s3 backend puts it in a URL
 * as it is (its characters are all unreserved in a URI). */
#include "objstore.h"

#include <curl/curl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/parse.h"
#include "../util/strv.h"
#include "../util/xalloc.h"

#define KEY_MAX 512
/* The segments of the longest key ("a/a/.../a"): a listing goes no deeper. */
#define KEY_DEPTH (KEY_MAX / 2 + 1)
/* The keys one listing returns at most (beyond: WR_ELIMIT). */
#define LIST_MAX (1u << 24)
/* One ListObjectsV2 answer, and the start of an error's body kept for its message. */
#define PAGE_MAX    (16u << 20)
#define ERRBODY_MAX (64u << 10)
/* Temporary files are named with a '~', which no key holds, so a listing never shows one. */
#define TMP_PREFIX ".tmp~"

enum backend { BK_FILE, BK_S3 };

struct wr_objstore {
    enum backend kind;
    char *url;
    int dfd;          /* file: the directory */
    char *bucket_url; /* s3: "<endpoint>/<bucket>" */
    char *prefix;     /* s3: "" or "<prefix>/" */
    char *sigv4;      /* s3: "aws:amz:<region>:s3" */
    char *userpwd;    /* s3: "<access key>:<secret>" */
    char *token_hdr;  /* s3: "x-amz-security-token: ..." or NULL */
    unsigned max_keys;
};

/* What a put stores: the file open at fd, or mem/len when fd < 0. */
struct src {
    int fd;
    const char *mem;
    size_t len, off;
};

/* ---- keys -------------------------------------------------------------------------------- */

static bool key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

/* One segment of a key: not empty, not "." or "..", key characters only. */
static bool seg_valid(const char *p, size_t n)
{
    if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!key_char(p[i]))
            return false;
    return true;
}

bool wr_objstore_key_valid(const char *key)
{
    size_t n = key != NULL ? strnlen(key, KEY_MAX + 1) : 0;
    size_t start = 0;

    if (n == 0 || n > KEY_MAX)
        return false;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && key[i] != '/')
            continue;
        if (!seg_valid(key + start, i - start))
            return false;
        start = i + 1;
    }
    return true;
}

/* A listing's prefix: "" or what starts a valid key (its last segment may be partial or empty). */
static bool prefix_valid(const char *prefix)
{
    char k[KEY_MAX + 2];

    if (prefix[0] == '\0')
        return true;
    if (strnlen(prefix, KEY_MAX) >= KEY_MAX)
        return false;
    snprintf(k, sizeof(k), "%sx", prefix);
    return wr_objstore_key_valid(k);
}

static int check_key(const char *key, struct wr_err *err)
{
    if (!wr_objstore_key_valid(key))
        return wr_err_set(err, WR_EINVAL, 0, "invalid object key `%.64s`", key ? key : "");
    return 0;
}

static int by_strcmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Append a key to a growing NULL-terminated array (*n keys in it so far). */
static int keys_add(char ***keys, size_t *n, char *key, struct wr_err *err)
{
    if (*n >= LIST_MAX) {
        free(key);
        return wr_err_set(err, WR_ELIMIT, 0, "more than %u keys", LIST_MAX);
    }
    if ((*n & (*n + 1)) == 0 || *keys == NULL) /* grow at 0, 1, 3, 7, ... */
        *keys = xrealloc(*keys, (2 * *n + 2) * sizeof(char *));
    (*keys)[(*n)++] = key;
    (*keys)[*n] = NULL;
    return 0;
}

/* ---- local files ------------------------------------------------------------------------- */

/* An error about a local file: WR_ENOTFOUND for ENOENT, else WR_ESYS. Reads errno first. */
static int file_err(struct wr_err *err, const char *what)
{
    int e = errno;
    return wr_err_set(err, e == ENOENT ? WR_ENOTFOUND : WR_ESYS, e, "%s", what);
}

/* Hand an error kept in a local to the caller's err (which may be NULL). Returns -1. */
static int err_pass(struct wr_err *err, const struct wr_err *e)
{
    if (err != NULL)
        *err = *e;
    return -1;
}

/* Copy src to fd (from its start). Returns 0 or -1 with errno set. */
static int src_copy(struct src *src, int fd)
{
    char buf[64 << 10];
    ssize_t n;

    if (src->fd < 0)
        return wr_write_all(fd, src->mem, src->len);
    while ((n = read(src->fd, buf, sizeof(buf))) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || wr_write_all(fd, buf, (size_t)n) < 0)
            return -1;
    }
    return 0;
}

/* A temporary file for a rename onto path, beside it: path plus ".tmp~XXXXXX". Returns its fd
 * (O_CLOEXEC) with the name in *tmp (free it), or -1 with err. */
static int tmp_beside(const char *path, char **tmp, struct wr_err *err)
{
    _cleanup_free_ char *name = xasprintf("%s" TMP_PREFIX "XXXXXX", path);
    int fd = mkostemp(name, O_CLOEXEC);

    if (fd < 0)
        return wr_err_sys(err, "create a temporary file beside `%s`", path);
    *tmp = steal_pointer(&name);
    return fd;
}

/* Sync fd and rename tmp onto path. On failure tmp is removed. Returns 0 or -1 with err. */
static int tmp_commit(int fd, const char *tmp, const char *path, struct wr_err *err)
{
    if (fsync(fd) < 0 || rename(tmp, path) < 0) {
        wr_err_sys(err, "write `%s`", path);
        (void)unlink(tmp);
        return -1;
    }
    return 0;
}

/* ---- file:// ----------------------------------------------------------------------------- */

/* Open the directory of key (every segment but the last) below the store's, one segment at a
 * time with O_NOFOLLOW: a symlink on the way fails it (ELOOP or ENOTDIR). With create, missing
 * directories are made (0755). *leaf points to the last segment in key. Returns the fd, or -1
 * with err (WR_ENOTFOUND for a missing directory). */
static int key_dir(const struct wr_objstore *s, const char *key, bool create, const char **leaf,
                   struct wr_err *err)
{
    _cleanup_close_ int fd = openat(s->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char seg[KEY_MAX + 1];
    const char *p = key, *slash;

    if (fd < 0)
        return wr_err_sys(err, "open the store's directory");
    while ((slash = strchr(p, '/')) != NULL) {
        int next;

        snprintf(seg, sizeof(seg), "%.*s", (int)(slash - p), p);
        if (create && mkdirat(fd, seg, 0755) < 0 && errno != EEXIST)
            return wr_err_sys(err, "create directory `%s`", seg);
        next = openat(fd, seg, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0)
            return file_err(err, "open directory");
        (void)close(fd);
        fd = next;
        p = slash + 1;
    }
    *leaf = p;
    return steal_fd(&fd);
}

/* Write src into a new temporary file of dfd, synced. Its name goes to name. On failure nothing
 * is left. Returns 0 or -1 with err. */
static int file_tmp_write(int dfd, struct src *src, char name[32], struct wr_err *err)
{
    _cleanup_close_ int fd = -1;
    uint64_t rnd;

    for (int tries = 0; fd < 0; tries++) {
        if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
            return wr_err_sys(err, "getrandom");
        snprintf(name, 32, TMP_PREFIX "%016" PRIx64, rnd);
        fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && (errno != EEXIST || tries >= 8))
            return wr_err_sys(err, "create a temporary file");
    }
    if (src_copy(src, fd) < 0 || fsync(fd) < 0) {
        wr_err_sys(err, "write a temporary file");
        (void)unlinkat(dfd, name, 0);
        return -1;
    }
    return 0;
}

/* Store src under key: written to a temporary file, then linked to the key's name. link(2)
 * never replaces what is there (unlike rename) and is atomic on NFS too. */
static int file_put(struct wr_objstore *s, const char *key, struct src *src, bool *existed,
                    struct wr_err *err)
{
    const char *leaf;
    _cleanup_close_ int dfd = key_dir(s, key, true, &leaf, err);
    struct stat st;
    char tmp[32];
    int r, e;

    if (dfd < 0)
        return -1;
    *existed = fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (*existed && !S_ISREG(st.st_mode))
        return wr_err_set(err, WR_EBADDATA, 0, "not a regular file");
    if (*existed)
        return 0;
    if (file_tmp_write(dfd, src, tmp, err) < 0)
        return -1;
    r = linkat(dfd, tmp, dfd, leaf, 0);
    e = errno;
    (void)unlinkat(dfd, tmp, 0);
    if (r < 0 && e == EEXIST) {
        *existed = true; /* another writer came first: the same content */
        return 0;
    }
    errno = e;
    if (r < 0 || fsync(dfd) < 0)
        return wr_err_sys(err, "link");
    return 0;
}

/* Open the object of key for reading (a regular file, not through a symlink). Returns the fd
 * with its stat in *st, or -1 with err. */
static int file_open_obj(struct wr_objstore *s, const char *key, struct stat *st,
                         struct wr_err *err)
{
    const char *leaf;
    _cleanup_close_ int dfd = key_dir(s, key, false, &leaf, err);
    _cleanup_close_ int fd = -1;

    if (dfd < 0)
        return -1;
    fd = openat(dfd, leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return file_err(err, "open");
    if (fstat(fd, st) < 0)
        return wr_err_sys(err, "stat");
    if (!S_ISREG(st->st_mode))
        return wr_err_set(err, WR_EBADDATA, 0, "not a regular file");
    return steal_fd(&fd);
}

static int file_get_file(struct wr_objstore *s, const char *key, const char *path,
                         struct wr_err *err)
{
    struct stat st;
    _cleanup_close_ int in = file_open_obj(s, key, &st, err);
    _cleanup_free_ char *tmp = NULL;
    _cleanup_close_ int out = -1;
    struct src src = {.fd = in};

    if (in < 0 || (out = tmp_beside(path, &tmp, err)) < 0)
        return -1;
    if (src_copy(&src, out) < 0) {
        wr_err_sys(err, "copy to `%s`", path);
        (void)unlink(tmp);
        return -1;
    }
    return tmp_commit(out, tmp, path, err);
}

static int file_get(struct wr_objstore *s, const char *key, size_t max, char **data, size_t *len,
                    struct wr_err *err)
{
    struct stat st;
    _cleanup_close_ int fd = file_open_obj(s, key, &st, err);
    _cleanup_free_ char *p = NULL;
    ssize_t n;

    if (fd < 0)
        return -1;
    if ((uint64_t)st.st_size > max)
        return wr_err_set(err, WR_ETOOBIG, 0, "larger than %zu bytes", max);
    p = xmalloc((size_t)st.st_size + 1);
    n = wr_read_all(fd, p, (size_t)st.st_size);
    if (n < 0)
        return wr_err_sys(err, "read");
    p[n] = '\0';
    *len = (size_t)n;
    *data = steal_pointer(&p);
    return 0;
}

static int file_exists(struct wr_objstore *s, const char *key, uint64_t *size, struct wr_err *err)
{
    const char *leaf;
    struct wr_err e2 = {0};
    _cleanup_close_ int dfd = key_dir(s, key, false, &leaf, &e2);
    struct stat st;

    if (dfd < 0 && e2.kind == WR_ENOTFOUND)
        return 0;
    if (dfd < 0)
        return err_pass(err, &e2);
    if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : wr_err_sys(err, "stat");
    if (!S_ISREG(st.st_mode))
        return wr_err_set(err, WR_EBADDATA, 0, "not a regular file");
    if (size != NULL)
        *size = (uint64_t)st.st_size;
    return 1;
}

static int file_delete(struct wr_objstore *s, const char *key, struct wr_err *err)
{
    const char *leaf;
    struct wr_err e2 = {0};
    _cleanup_close_ int dfd = key_dir(s, key, false, &leaf, &e2);

    if (dfd < 0 && e2.kind == WR_ENOTFOUND)
        return 0;
    if (dfd < 0)
        return err_pass(err, &e2);
    if (unlinkat(dfd, leaf, 0) < 0 && errno != ENOENT)
        return wr_err_sys(err, "remove");
    return 0;
}

/* A listing of the file backend: the keys under prefix so far, and the path being walked. */
struct lister {
    const char *prefix;
    size_t plen;
    char path[KEY_MAX + 2];
    char **keys;
    size_t n;
};

/* Add the regular files below dfd (whose key path is l->path[0..len)) that start with the
 * prefix, entering directories whose path may still lead to such a key. Symlinks and names
 * that are not key segments (temporary files) are skipped. depth bounds the recursion. */
static int list_dir(struct lister *l, int dfd, size_t len, unsigned depth, struct wr_err *err)
{
    _cleanup_closedir_ DIR *d = fdopendir(dfd);
    struct dirent *de;

    if (d == NULL) {
        (void)close(dfd);
        return wr_err_sys(err, "list `%.*s`", (int)len, l->path);
    }
    while ((errno = 0, de = readdir(d)) != NULL) {
        size_t nlen = strlen(de->d_name), end = len + nlen;
        struct stat st;
        int sub;

        if (!seg_valid(de->d_name, nlen) || end > KEY_MAX)
            continue;
        memcpy(l->path + len, de->d_name, nlen + 1);
        if (strncmp(l->path, l->prefix, end < l->plen ? end : l->plen) != 0)
            continue;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* gone since readdir */
        if (S_ISREG(st.st_mode) && end >= l->plen) {
            if (keys_add(&l->keys, &l->n, xstrdup(l->path), err) < 0)
                return -1;
        } else if (S_ISDIR(st.st_mode) && end + 2 <= KEY_MAX && depth < KEY_DEPTH) {
            sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0)
                return wr_err_sys(err, "open `%s`", l->path);
            l->path[end] = '/';
            l->path[end + 1] = '\0';
            if (list_dir(l, sub, end + 1, depth + 1, err) < 0)
                return -1;
        }
    }
    if (errno != 0)
        return wr_err_sys(err, "list `%.*s`", (int)len, l->path);
    return 0;
}

static int file_list(struct wr_objstore *s, const char *prefix, char ***keys, struct wr_err *err)
{
    struct lister l = {.prefix = prefix, .plen = strlen(prefix)};
    struct wr_err e2 = {0};
    const char *leaf, *slash = strrchr(prefix, '/');
    int dfd = key_dir(s, prefix, false, &leaf, &e2);
    size_t len = slash != NULL ? (size_t)(slash + 1 - prefix) : 0;

    if (dfd < 0 && e2.kind != WR_ENOTFOUND)
        return err_pass(err, &e2);
    memcpy(l.path, prefix, len);
    l.path[len] = '\0';
    if (dfd >= 0 && list_dir(&l, dfd, len, 0, err) < 0) {
        wr_strv_free(l.keys);
        return -1;
    }
    if (l.keys == NULL)
        l.keys = xcalloc(1, sizeof(char *));
    qsort(l.keys, l.n, sizeof(char *), by_strcmp);
    *keys = l.keys;
    return 0;
}

static int file_open(struct wr_objstore *s, const char *dir, struct wr_err *err)
{
    if (dir[0] != '/')
        return wr_err_set(err, WR_EINVAL, 0, "a file URL is file:///DIR (an absolute path)");
    s->kind = BK_FILE;
    s->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dfd < 0)
        return wr_err_sys(err, "open `%s`", dir);
    return 0;
}

/* ---- s3:// ------------------------------------------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

enum method { M_HEAD, M_GET, M_PUT, M_DELETE };

/* One easy handle for the requests of an operation, and what the last answer brought. A 2xx
 * body goes to fd, or to body (at most max) when fd < 0; any other body to body (its start,
 * ERRBODY_MAX), for the message. A put's body comes from src. */
struct req {
    CURL *c;
    struct curl_slist *hdrs;
    char errbuf[CURL_ERROR_SIZE];
    long status;
    int fd;
    struct wr_buf body;
    size_t max;
    bool too_big;
    int werr;
    struct src *src;
};

static void req_fini(struct req *r)
{
    curl_easy_cleanup(r->c);
    curl_slist_free_all(r->hdrs);
    wr_buf_fini(&r->body);
}
#define _cleanup_req_ _cleanup_(req_fini)

static size_t on_body(char *p, size_t size, size_t n, void *data)
{
    struct req *r = data;
    size_t len = size * n;
    long status = 0;
    bool good;

    curl_easy_getinfo(r->c, CURLINFO_RESPONSE_CODE, &status);
    good = status >= 200 && status < 300;
    if (good && r->fd >= 0) {
        if (wr_write_all(r->fd, p, len) < 0) {
            r->werr = errno;
            return 0;
        }
        return len;
    }
    if (r->body.len + len > (good ? r->max : ERRBODY_MAX)) {
        if (!good)
            return len; /* an error's body: its start says enough */
        r->too_big = true;
        return 0;
    }
    wr_buf_append(&r->body, p, len);
    return len;
}

static size_t on_read(char *p, size_t size, size_t n, void *data)
{
    struct src *src = data;
    size_t want = size * n;
    ssize_t got;

    if (src->fd < 0) {
        if (want > src->len - src->off)
            want = src->len - src->off;
        memcpy(p, src->mem + src->off, want);
        src->off += want;
        return want;
    }
    do
        got = read(src->fd, p, want);
    while (got < 0 && errno == EINTR);
    return got < 0 ? CURL_READFUNC_ABORT : (size_t)got;
}

/* curl's sockets are close-on-exec: the daemon starts processes. */
static curl_socket_t open_socket(void *data, curlsocktype purpose, struct curl_sockaddr *a)
{
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

/* A handle and the headers every request sends: the payload is not hashed (UNSIGNED-PAYLOAD,
 * which S3 requires to be said), and the session token when there is one. */
static int req_init(const struct wr_objstore *s, struct req *r, struct wr_err *err)
{
    pthread_once(&curl_once, curl_init_once);
    r->c = curl_easy_init();
    if (r->c == NULL)
        return wr_err_set(err, WR_ESYS, ENOMEM, "curl");
    r->hdrs = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (r->hdrs != NULL && s->token_hdr != NULL)
        r->hdrs = curl_slist_append(r->hdrs, s->token_hdr);
    if (r->hdrs == NULL)
        return wr_err_set(err, WR_ESYS, ENOMEM, "curl");
    return 0;
}

/* The options of every request: signed (SigV4 with the store's credentials), no redirects, and
 * a stalled transfer (under 1 byte/s for a minute) fails rather than holding a worker. */
static void req_opts(const struct wr_objstore *s, struct req *r, const char *url)
{
    CURL *c = r->c;

    curl_easy_reset(c); /* keeps the connections for the next request */
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 15L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "warren");
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, r->errbuf);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, r->hdrs);
    curl_easy_setopt(c, CURLOPT_USERPWD, s->userpwd);
    curl_easy_setopt(c, CURLOPT_AWS_SIGV4, s->sigv4);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
}

/* One request of method m on url. Returns the HTTP status, or -1 with err: WR_EUPSTREAM when
 * the service cannot be reached, WR_ETOOBIG past r->max, WR_ESYS when writing r->fd failed. */
static long req_perform(const struct wr_objstore *s, struct req *r, enum method m, const char *url,
                        const char *what, struct wr_err *err)
{
    CURLcode cc;

    req_opts(s, r, url);
    if (m == M_HEAD)
        curl_easy_setopt(r->c, CURLOPT_NOBODY, 1L);
    else if (m == M_DELETE)
        curl_easy_setopt(r->c, CURLOPT_CUSTOMREQUEST, "DELETE");
    else if (m == M_PUT) {
        struct stat st = {.st_size = (off_t)r->src->len};
        if (r->src->fd >= 0 && fstat(r->src->fd, &st) < 0)
            return wr_err_sys(err, "%s: stat", what);
        curl_easy_setopt(r->c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(r->c, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(r->c, CURLOPT_READDATA, r->src);
        curl_easy_setopt(r->c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)st.st_size);
    }
    wr_buf_fini(&r->body);
    r->errbuf[0] = '\0';
    r->status = 0;
    r->too_big = false;
    cc = curl_easy_perform(r->c);
    if (r->too_big)
        return wr_err_set(err, WR_ETOOBIG, 0, "%s: larger than %zu bytes", what, r->max);
    if (r->werr != 0)
        return wr_err_set(err, WR_ESYS, r->werr, "%s: write", what);
    if (cc != CURLE_OK)
        return wr_err_set(err, WR_EUPSTREAM, 0, "%s: %s", what,
                          r->errbuf[0] ? r->errbuf : curl_easy_strerror(cc));
    curl_easy_getinfo(r->c, CURLINFO_RESPONSE_CODE, &r->status);
    return r->status;
}

/* The decoded text of p[0..n): the five entities XML predefines and no markup. NULL for any
 * other '&' or a '<'. */
static char *xml_unescape(const char *p, size_t n)
{
    static const struct {
        const char *ent;
        char c;
    } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    _cleanup_free_ char *out = xmalloc(n + 1);
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        size_t k = 0;

        if (p[i] == '<')
            return NULL;
        if (p[i] != '&') {
            out[o++] = p[i];
            continue;
        }
        while (k < WR_ARRAY_SIZE(ents) && (n - i < strlen(ents[k].ent) ||
                                           memcmp(p + i, ents[k].ent, strlen(ents[k].ent)) != 0))
            k++;
        if (k == WR_ARRAY_SIZE(ents))
            return NULL;
        out[o++] = ents[k].c;
        i += strlen(ents[k].ent) - 1;
    }
    out[o] = '\0';
    return steal_pointer(&out);
}

/* The next element <tag>...</tag> of xml[*pos..len): false when there is none; else *pos moves
 * past it and *text is its decoded text (NULL if it cannot be decoded; free it). */
static bool xml_next(const char *xml, size_t len, const char *tag, size_t *pos, char **text)
{
    char open[32], close[32];
    int on = snprintf(open, sizeof(open), "<%s>", tag);
    int cn = snprintf(close, sizeof(close), "</%s>", tag);
    const char *start = memmem(xml + *pos, len - *pos, open, (size_t)on), *end;

    if (start == NULL)
        return false;
    start += on;
    end = memmem(start, len - (size_t)(start - xml), close, (size_t)cn);
    if (end == NULL)
        return false;
    *pos = (size_t)(end - xml) + (size_t)cn;
    *text = xml_unescape(start, (size_t)(end - start));
    return true;
}

/* The first <tag> of an answer's body, decoded, or NULL. */
static char *xml_first(const struct wr_buf *body, const char *tag)
{
    size_t pos = 0;
    char *text = NULL;

    return xml_next(wr_buf_str(body), body->len, tag, &pos, &text) ? text : NULL;
}

/* The error of an answer that is not a 2xx: WR_ENOTFOUND for 404, else WR_EUPSTREAM, with S3's
 * <Code> and <Message> when the body has them. Returns -1. */
static int status_err(struct req *r, const char *what, struct wr_err *err)
{
    _cleanup_free_ char *code = xml_first(&r->body, "Code");
    _cleanup_free_ char *msg = xml_first(&r->body, "Message");

    return wr_err_set(err, r->status == 404 ? WR_ENOTFOUND : WR_EUPSTREAM, 0,
                      "%s: HTTP %ld%s%s%s%.200s", what, r->status, code ? " " : "",
                      code ? code : "", msg ? ": " : "", msg ? msg : "");
}

/* A request that must answer 2xx (or 404 too, with missing_ok). Returns the status or -1. */
static long s3_call(const struct wr_objstore *s, struct req *r, enum method m, const char *url,
                    bool missing_ok, const char *what, struct wr_err *err)
{
    long st = req_perform(s, r, m, url, what, err);

    if (st < 0 || (st >= 200 && st < 300) || (st == 404 && missing_ok))
        return st;
    return status_err(r, what, err);
}

static char *obj_url(const struct wr_objstore *s, const char *key)
{
    return xasprintf("%s/%s%s", s->bucket_url, s->prefix, key);
}

static int s3_exists(struct wr_objstore *s, const char *key, uint64_t *size, struct wr_err *err)
{
    _cleanup_req_ struct req r = {.fd = -1};
    _cleanup_free_ char *url = obj_url(s, key);
    curl_off_t cl = -1;
    long st;

    if (req_init(s, &r, err) < 0 || (st = s3_call(s, &r, M_HEAD, url, true, "HEAD", err)) < 0)
        return -1;
    if (st == 404)
        return 0;
    curl_easy_getinfo(r.c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
    if (size != NULL)
        *size = cl > 0 ? (uint64_t)cl : 0;
    return 1;
}

/* HEAD, then PUT when absent. Two hosts putting the same key at once both write it: keys are
 * content-addressed, so they write the same bytes. */
static int s3_put(struct wr_objstore *s, const char *key, struct src *src, bool *existed,
                  struct wr_err *err)
{
    _cleanup_req_ struct req r = {.fd = -1, .src = src};
    _cleanup_free_ char *url = obj_url(s, key);
    long st;

    if (req_init(s, &r, err) < 0 || (st = s3_call(s, &r, M_HEAD, url, true, "HEAD", err)) < 0)
        return -1;
    *existed = st != 404;
    if (*existed)
        return 0;
    return s3_call(s, &r, M_PUT, url, false, "PUT", err) < 0 ? -1 : 0;
}

static int s3_get_file(struct wr_objstore *s, const char *key, const char *path, struct wr_err *err)
{
    _cleanup_req_ struct req r = {.fd = -1};
    _cleanup_free_ char *url = obj_url(s, key);
    _cleanup_free_ char *tmp = NULL;
    _cleanup_close_ int fd = -1;

    if (req_init(s, &r, err) < 0 || (fd = tmp_beside(path, &tmp, err)) < 0)
        return -1;
    r.fd = fd;
    if (s3_call(s, &r, M_GET, url, false, "GET", err) < 0) {
        (void)unlink(tmp);
        return -1;
    }
    return tmp_commit(fd, tmp, path, err);
}

static int s3_get(struct wr_objstore *s, const char *key, size_t max, char **data, size_t *len,
                  struct wr_err *err)
{
    _cleanup_req_ struct req r = {.fd = -1, .max = max};
    _cleanup_free_ char *url = obj_url(s, key);

    if (req_init(s, &r, err) < 0 || s3_call(s, &r, M_GET, url, false, "GET", err) < 0)
        return -1;
    *len = r.body.len;
    *data = wr_buf_steal_str(&r.body);
    return 0;
}

static int s3_delete(struct wr_objstore *s, const char *key, struct wr_err *err)
{
    _cleanup_req_ struct req r = {.fd = -1};
    _cleanup_free_ char *url = obj_url(s, key);

    if (req_init(s, &r, err) < 0 || s3_call(s, &r, M_DELETE, url, true, "DELETE", err) < 0)
        return -1;
    return 0;
}

/* A ListObjectsV2 URL. Its parameters are in the order and encoding of SigV4's canonical query
 * (sorted, every byte but the unreserved ones %-encoded), which curl signs as it is. */
static char *list_url(const struct wr_objstore *s, CURL *c, const char *prefix, const char *token)
{
    _cleanup_free_ char *full = xasprintf("%s%s", s->prefix, prefix);
    char *ep = curl_easy_escape(c, full, 0);
    char *et = token != NULL ? curl_easy_escape(c, token, 0) : NULL;
    char *url;

    if (ep == NULL || (token != NULL && et == NULL))
        abort(); /* out of memory */
    url = xasprintf("%s?%s%s%slist-type=2&max-keys=%u%s%s", s->bucket_url,
                    et ? "continuation-token=" : "", et ? et : "", et ? "&" : "", s->max_keys,
                    full[0] ? "&prefix=" : "", full[0] ? ep : "");
    curl_free(ep);
    curl_free(et);
    return url;
}

/* The keys of one ListObjectsV2 page, added to *keys (the store's prefix taken off; objects
 * whose name is not a key are not ours and are skipped); *token is the next page's or NULL.
 * *seen counts the objects of every page, against a service that never ends. */
static int page_keys(const struct wr_objstore *s, const struct wr_buf *body, char ***keys,
                     size_t *n, size_t *seen, char **token, struct wr_err *err)
{
    const char *xml = wr_buf_str(body);
    size_t pos = 0, plen = strlen(s->prefix), count = 0;
    _cleanup_free_ char *trunc = xml_first(body, "IsTruncated");
    char *key = NULL;

    while (xml_next(xml, body->len, "Key", &pos, &key)) {
        count++;
        if (key != NULL && strncmp(key, s->prefix, plen) == 0 &&
            wr_objstore_key_valid(key + plen)) {
            memmove(key, key + plen, strlen(key + plen) + 1);
            if (keys_add(keys, n, key, err) < 0)
                return -1;
        } else
            free(key);
    }
    *seen += count;
    *token = NULL;
    if (trunc == NULL || strcmp(trunc, "true") != 0)
        return 0;
    *token = xml_first(body, "NextContinuationToken");
    if (*token == NULL || count == 0 || *seen > LIST_MAX)
        return wr_err_set(err, WR_EUPSTREAM, 0, "ListObjectsV2: a listing that does not end");
    return 0;
}

static int s3_list(struct wr_objstore *s, const char *prefix, char ***keys, struct wr_err *err)
{
    _cleanup_req_ struct req r = {.fd = -1, .max = PAGE_MAX};
    _cleanup_free_ char *token = NULL;
    char **v = NULL;
    size_t n = 0, seen = 0;

    if (req_init(s, &r, err) < 0)
        return -1;
    do {
        _cleanup_free_ char *url = list_url(s, r.c, prefix, token);

        free(steal_pointer(&token));
        if (s3_call(s, &r, M_GET, url, false, "ListObjectsV2", err) < 0 ||
            page_keys(s, &r.body, &v, &n, &seen, &token, err) < 0) {
            wr_strv_free(v);
            return -1;
        }
    } while (token != NULL);
    if (v == NULL)
        v = xcalloc(1, sizeof(char *));
    qsort(v, n, sizeof(char *), by_strcmp);
    *keys = v;
    return 0;
}

/* A bucket name as S3 allows it: 3 to 63 of [a-z0-9.-]. */
static bool bucket_valid(const char *b)
{
    size_t n = strlen(b);

    if (n < 3 || n > 63)
        return false;
    return strspn(b, "abcdefghijklmnopqrstuvwxyz0123456789.-") == n;
}

/* http(s)://host[:port], with at most a trailing '/'; its length without that '/' in *len. */
static bool endpoint_valid(const char *e, size_t *len)
{
    const char *host = strncmp(e, "http://", 7) == 0    ? e + 7
                       : strncmp(e, "https://", 8) == 0 ? e + 8
                                                        : NULL;
    size_t n;

    if (host == NULL)
        return false;
    n = strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:[]");
    if (n == 0 || (host[n] != '\0' && strcmp(host + n, "/") != 0))
        return false;
    *len = (size_t)(host - e) + n;
    return true;
}

/* The query of an s3 URL: endpoint (required), region, max-keys (a listing's page size, 1 to
 * 1000; 1000 by default). */
static int s3_query(char *q, const char **endpoint, const char **region, unsigned *max_keys,
                    struct wr_err *err)
{
    char *save = NULL;
    uint64_t mk;

    for (char *kv = strtok_r(q, "&", &save); kv != NULL; kv = strtok_r(NULL, "&", &save)) {
        char *v = strchr(kv, '=');

        if (v == NULL)
            return wr_err_set(err, WR_EINVAL, 0, "s3 URL: `%s` has no value", kv);
        *v++ = '\0';
        if (strcmp(kv, "endpoint") == 0)
            *endpoint = v;
        else if (strcmp(kv, "region") == 0)
            *region = v;
        else if (strcmp(kv, "max-keys") == 0) {
            if (wr_parse_uint(v, 1000, &mk, err) < 0 || mk == 0)
                return wr_err_set(err, WR_EINVAL, 0, "s3 URL: max-keys is 1 to 1000");
            *max_keys = (unsigned)mk;
        } else
            return wr_err_set(err, WR_EINVAL, 0, "s3 URL: unknown parameter `%.32s`", kv);
    }
    return 0;
}

/* s3://BUCKET[/PREFIX]?endpoint=URL[&region=R][&max-keys=N] (after "s3://"). */
static int s3_parse(struct wr_objstore *s, const char *rest, struct wr_err *err)
{
    _cleanup_free_ char *copy = xstrdup(rest);
    char *q = strchr(copy, '?'), *prefix = NULL;
    const char *endpoint = NULL, *region = "us-east-1";
    size_t elen = 0;

    if (q != NULL)
        *q++ = '\0';
    if ((prefix = strchr(copy, '/')) != NULL)
        *prefix++ = '\0';
    if (!bucket_valid(copy))
        return wr_err_set(err, WR_EINVAL, 0, "s3 URL: invalid bucket name `%.64s`", copy);
    /* Up to 255 bytes: with a key, under S3's 1024. */
    if (prefix != NULL && prefix[0] != '\0' &&
        (strlen(prefix) >= KEY_MAX / 2 || !wr_objstore_key_valid(prefix)))
        return wr_err_set(err, WR_EINVAL, 0, "s3 URL: invalid prefix `%.64s`", prefix);
    s->max_keys = 1000;
    if (q != NULL && s3_query(q, &endpoint, &region, &s->max_keys, err) < 0)
        return -1;
    if (endpoint == NULL || !endpoint_valid(endpoint, &elen))
        return wr_err_set(err, WR_EINVAL, 0, "s3 URL: endpoint=http(s)://host[:port] is needed");
    if (region[0] == '\0' ||
        strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(region))
        return wr_err_set(err, WR_EINVAL, 0, "s3 URL: invalid region `%.32s`", region);
    s->bucket_url = xasprintf("%.*s/%s", (int)elen, endpoint, copy);
    s->prefix = prefix != NULL && prefix[0] ? xasprintf("%s/", prefix) : xstrdup("");
    s->sigv4 = xasprintf("aws:amz:%s:s3", region);
    return 0;
}

/* The credentials, from the environment. */
static int s3_creds(struct wr_objstore *s, struct wr_err *err)
{
    const char *id = getenv("AWS_ACCESS_KEY_ID"), *secret = getenv("AWS_SECRET_ACCESS_KEY");
    const char *token = getenv("AWS_SESSION_TOKEN");

    if (id == NULL || id[0] == '\0' || secret == NULL || secret[0] == '\0')
        return wr_err_set(err, WR_EINVAL, 0,
                          "s3: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set");
    if (strchr(id, ':') != NULL || (token != NULL && strpbrk(token, "\r\n") != NULL))
        return wr_err_set(err, WR_EINVAL, 0, "s3: malformed credentials in the environment");
    s->userpwd = xasprintf("%s:%s", id, secret);
    if (token != NULL && token[0] != '\0')
        s->token_hdr = xasprintf("x-amz-security-token: %s", token);
    return 0;
}

static int s3_open(struct wr_objstore *s, const char *rest, struct wr_err *err)
{
    _cleanup_req_ struct req r = {.fd = -1};

    s->kind = BK_S3;
    if (s3_parse(s, rest, err) < 0 || s3_creds(s, err) < 0 || req_init(s, &r, err) < 0)
        return -1;
    return s3_call(s, &r, M_HEAD, s->bucket_url, false, "HEAD bucket", err) < 0 ? -1 : 0;
}

/* ---- the interface ----------------------------------------------------------------------- */

int wr_objstore_open(const char *url, struct wr_objstore **out, struct wr_err *err)
{
    struct wr_objstore *s = xcalloc(1, sizeof(*s));
    int r;

    s->dfd = -1;
    s->url = xstrdup(url);
    if (strncmp(url, "file://", 7) == 0)
        r = file_open(s, url + 7, err);
    else if (strncmp(url, "s3://", 5) == 0)
        r = s3_open(s, url + 5, err);
    else
        r = wr_err_set(err, WR_EINVAL, 0, "an object store URL is file:///DIR or s3://BUCKET");
    if (r < 0) {
        wr_err_wrap(err, "object store `%s`", url);
        wr_objstore_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void wr_objstore_free(struct wr_objstore *s)
{
    if (s == NULL)
        return;
    if (s->dfd >= 0)
        (void)close(s->dfd);
    if (s->userpwd != NULL)
        explicit_bzero(s->userpwd, strlen(s->userpwd));
    free(s->userpwd);
    free(s->token_hdr);
    free(s->url);
    free(s->bucket_url);
    free(s->prefix);
    free(s->sigv4);
    free(s);
}

const char *wr_objstore_url(const struct wr_objstore *s)
{
    return s->url;
}

/* A put of src under key, on either backend. */
static int put_src(struct wr_objstore *s, const char *key, struct src *src, bool *existed,
                   struct wr_err *err)
{
    bool dummy;

    if (check_key(key, err) < 0)
        return -1;
    if (existed == NULL)
        existed = &dummy;
    if ((s->kind == BK_FILE ? file_put : s3_put)(s, key, src, existed, err) < 0)
        return wr_err_wrap(err, "put `%s`", key);
    return 0;
}

int wr_objstore_put_file(struct wr_objstore *s, const char *key, const char *path, bool *existed,
                         struct wr_err *err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    struct src src = {.fd = fd};

    if (fd < 0)
        return wr_err_sys(err, "open `%s`", path);
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return wr_err_set(err, WR_EINVAL, 0, "`%s` is not a regular file", path);
    return put_src(s, key, &src, existed, err);
}

int wr_objstore_put(struct wr_objstore *s, const char *key, const void *data, size_t len,
                    bool *existed, struct wr_err *err)
{
    struct src src = {.fd = -1, .mem = data, .len = len};

    return put_src(s, key, &src, existed, err);
}

int wr_objstore_get_file(struct wr_objstore *s, const char *key, const char *path,
                         struct wr_err *err)
{
    if (check_key(key, err) < 0)
        return -1;
    if ((s->kind == BK_FILE ? file_get_file : s3_get_file)(s, key, path, err) < 0)
        return wr_err_wrap(err, "get `%s`", key);
    return 0;
}

int wr_objstore_get(struct wr_objstore *s, const char *key, size_t max, char **data, size_t *len,
                    struct wr_err *err)
{
    if (check_key(key, err) < 0)
        return -1;
    if ((s->kind == BK_FILE ? file_get : s3_get)(s, key, max, data, len, err) < 0)
        return wr_err_wrap(err, "get `%s`", key);
    return 0;
}

int wr_objstore_exists(struct wr_objstore *s, const char *key, uint64_t *size, struct wr_err *err)
{
    int r;

    if (check_key(key, err) < 0)
        return -1;
    r = (s->kind == BK_FILE ? file_exists : s3_exists)(s, key, size, err);
    return r < 0 ? wr_err_wrap(err, "stat `%s`", key) : r;
}

int wr_objstore_delete(struct wr_objstore *s, const char *key, struct wr_err *err)
{
    if (check_key(key, err) < 0)
        return -1;
    if ((s->kind == BK_FILE ? file_delete : s3_delete)(s, key, err) < 0)
        return wr_err_wrap(err, "delete `%s`", key);
    return 0;
}

int wr_objstore_list(struct wr_objstore *s, const char *prefix, char ***keys, struct wr_err *err)
{
    if (prefix == NULL)
        prefix = "";
    if (!prefix_valid(prefix))
        return wr_err_set(err, WR_EINVAL, 0, "invalid prefix `%.64s`", prefix);
    if ((s->kind == BK_FILE ? file_list : s3_list)(s, prefix, keys, err) < 0)
        return wr_err_wrap(err, "list `%s`", prefix);
    return 0;
}
