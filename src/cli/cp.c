/* SPDX-License-Identifier: Apache-2.0 */
/* `warren cp`: copy one file into or out of a sandbox, streamed both ways (the file is never
 * held in memory). `ID:/path` names the sandbox side; `-` is stdin or stdout. Directories are not
 * supported yet. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/xalloc.h"
#include "client.h"

struct remote {
    char *id;
    const char *path;
};

/* "ID:/path" -> true with r filled (r->id owned by the caller); anything else is local. */
static bool parse_remote(const char *arg, struct remote *r)
{
    const char *colon = strchr(arg, ':');
    size_t n = colon ? (size_t)(colon - arg) : 0;

    if (colon == NULL || n == 0 || n > 64 ||
        strspn(arg, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != n)
        return false;
    r->id = xstrndup(arg, n);
    r->path = colon + 1;
    return true;
}

static char *files_target(const char *id, const char *endpoint, const char *path)
{
    struct wr_buf b = {0};

    wr_buf_printf(&b, "/v1/sandboxes/%s/%s?path=", id, endpoint);
    cli_buf_add_escaped(&b, path);
    return wr_buf_steal_str(&b);
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The remote entry's stat, or NULL with err filled: *failed is false when the answer was
 * not_found (the path, or the sandbox, does not exist), true on any other failure. */
static json_t *remote_stat(struct cli_http *c, const struct remote *r, bool *failed,
                           struct wr_err *err)
{
    _cleanup_free_ char *t = files_target(r->id, "files/stat", r->path);
    json_t *st = NULL;

    *failed = false;
    if (cli_api(c, "GET", t, NULL, &st, err) < 0) {
        *failed = err->kind != WR_ENOTFOUND;
        return NULL;
    }
    return st;
}

static int upload(struct cli_http *c, const char *local, struct remote *r, struct wr_err *err)
{
    _cleanup_close_ int fd = -1;
    _cleanup_free_ char *dest = NULL, *target = NULL, *mode_q = NULL;
    struct cli_http_resp resp;
    struct stat st;
    json_t *rst;
    bool failed;
    int ret;

    if (strcmp(local, "-") == 0) {
        fd = dup(STDIN_FILENO);
    } else {
        fd = open(local, O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0 || fstat(fd, &st) < 0)
        return wr_err_sys(err, "%s", local);
    if (S_ISDIR(st.st_mode))
        return wr_err_set(err, WR_EUNSUPPORTED, 0,
                          "%s is a directory; copying directories is not supported yet", local);

    /* Into an existing directory: keep the file's name, as cp does. */
    rst = remote_stat(c, r, &failed, err);
    if (failed)
        return -1;
    if (rst != NULL && strcmp(json_string_value(json_object_get(rst, "type")) ?: "", "dir") == 0) {
        const char *name = strcmp(local, "-") == 0 ? "stdin" : base_name(local);
        size_t n = strlen(r->path);
        dest = xasprintf("%s%s%s", r->path, n && r->path[n - 1] == '/' ? "" : "/", name);
    } else if (r->path[strlen(r->path) - 1] == '/') {
        json_decref(rst);
        return wr_err_set(err, WR_ENOTFOUND, 0, "%s:%s: no such directory", r->id, r->path);
    } else {
        dest = xstrdup(r->path);
    }
    json_decref(rst);

    target = files_target(r->id, "files", dest);
    if (S_ISREG(st.st_mode)) {
        mode_q = xasprintf("%s&mode=0%o", target, (unsigned)(st.st_mode & 07777));
        free(target);
        target = steal_pointer(&mode_q);
    }
    struct cli_http_req req = {.method = "PUT",
                               .target = target,
                               .content_type = "application/octet-stream",
                               .body_kind = CLI_BODY_FD,
                               .body_fd = fd,
                               .body_fd_len = S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1};
    if (cli_http_request(c, &req, &resp, err) < 0)
        return -1;
    ret = resp.status >= 200 && resp.status <= 299 ? 0 : cli_http_error(&resp, err);
    cli_http_resp_fini(&resp);
    return ret;
}

struct sink {
    int fd;
};

static int on_download(const char *data, size_t len, void *ctx, struct wr_err *err)
{
    struct sink *s = ctx;

    if (wr_write_all(s->fd, data, len) < 0)
        return wr_err_sys(err, "write");
    return 0;
}

static int download(struct cli_http *c, struct remote *r, const char *local, struct wr_err *err)
{
    _cleanup_free_ char *target = files_target(r->id, "files", r->path);
    _cleanup_free_ char *dest = NULL, *tmp = NULL;
    _cleanup_close_ int fd = -1;
    struct cli_http_resp resp;
    struct stat st;
    json_t *rst;
    bool failed, to_stdout = strcmp(local, "-") == 0;
    int ret;

    rst = remote_stat(c, r, &failed, err);
    if (failed)
        return -1;
    if (rst == NULL)
        return -1; /* the server's message says whether the file or the sandbox is missing */
    if (strcmp(json_string_value(json_object_get(rst, "type")) ?: "", "dir") == 0) {
        json_decref(rst);
        return wr_err_set(err, WR_EUNSUPPORTED, 0,
                          "%s:%s is a directory; copying directories is not supported yet", r->id,
                          r->path);
    }
    json_decref(rst);

    if (to_stdout) {
        fd = dup(STDOUT_FILENO);
        if (fd < 0)
            return wr_err_sys(err, "stdout");
    } else {
        /* Into an existing directory: keep the file's name. The data goes to a temporary file
         * renamed over the destination at the end, so a failed copy leaves no torn file. */
        if (stat(local, &st) == 0 && S_ISDIR(st.st_mode))
            dest = xasprintf("%s/%s", local, base_name(r->path));
        else
            dest = xstrdup(local);
        _cleanup_free_ char *d = xstrdup(dest);
        tmp = xasprintf("%s/.%s.warren-%d", dirname(d), base_name(dest), (int)getpid());
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0)
            return wr_err_sys(err, "create %s", tmp);
    }

    struct sink s = {.fd = fd};
    struct cli_http_req req = {.method = "GET",
                               .target = target,
                               .accept = "application/octet-stream",
                               .on_body = on_download,
                               .ctx = &s};
    ret = cli_http_request(c, &req, &resp, err);
    if (ret == 0 && (resp.status < 200 || resp.status > 299))
        ret = cli_http_error(&resp, err);
    cli_http_resp_fini(&resp);
    if (to_stdout)
        return ret;
    if (ret == 0 && fsync(fd) < 0 && errno != EINVAL)
        ret = wr_err_sys(err, "write %s", tmp);
    if (ret == 0 && rename(tmp, dest) < 0)
        ret = wr_err_sys(err, "rename %s to %s", tmp, dest);
    if (ret < 0)
        (void)unlink(tmp);
    return ret;
}

int cmd_cp(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct remote src = {0}, dst = {0};
    struct cli_http *c = NULL;
    struct wr_err err;
    bool src_remote, dst_remote;
    int ch, rc = CLI_EXIT_USAGE;

    opterr = 0;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'h':
            printf("usage: warren cp SRC DST\n\n"
                   "Copy a file into or out of a sandbox; ID:/path names the sandbox side,\n"
                   "`-` is stdin (as SRC) or stdout (as DST). Into an existing directory, the\n"
                   "file keeps its name. Directories are not supported yet.\n\n"
                   "  warren cp ./data.csv sb-1:/work/\n"
                   "  warren cp sb-1:/work/out.json ./out.json\n");
            return 0;
        default:
            return cli_bad_option("cp", argv);
        }
    }
    if (argc - optind != 2) {
        cli_errorf("cp: want SRC and DST (usage: warren cp SRC DST)");
        return CLI_EXIT_USAGE;
    }
    src_remote = parse_remote(argv[optind], &src);
    dst_remote = parse_remote(argv[optind + 1], &dst);
    if (src_remote == dst_remote) {
        cli_errorf("cp: exactly one of SRC and DST must be ID:/path in a sandbox");
        goto out;
    }
    if ((src_remote ? src.path : dst.path)[0] != '/') {
        cli_errorf("cp: the sandbox path `%s` must be absolute", src_remote ? src.path : dst.path);
        goto out;
    }
    rc = CLI_EXIT_FAIL;
    if (cli_connect(&c, &err) < 0) {
        cli_errorf("cp: %s", err.msg);
        goto out;
    }
    if (src_remote ? download(c, &src, argv[optind + 1], &err) < 0
                   : upload(c, argv[optind], &dst, &err) < 0) {
        cli_errorf("cp: %s", err.msg);
        goto out;
    }
    rc = 0;
out:
    cli_http_close(c);
    free(src.id);
    free(dst.id);
    return rc;
}
