/* SPDX-License-Identifier: Apache-2.0 */
/* `warren cp`: copy one file into or out of a sandbox, streamed both ways (the file is never
 * held in memory). `ID:/path` names the sandbox side; `-` is stdin or stdout. Directories are not
 * supported yet. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/xalloc.h"

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

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* Fill err with a failure of ours (not the daemon's). Returns -1. */
static int cp_fail(warren_error *err, warren_code code, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int cp_fail(warren_error *err, warren_code code, int errnum, const char *fmt, ...)
{
    struct wr_err e;
    va_list ap;

    va_start(ap, fmt);
    wr_err_vset(&e, (enum wr_err_kind)code, errnum, fmt, ap);
    va_end(ap);
    memset(err, 0, sizeof(*err));
    err->code = code;
    err->sys_errno = errnum;
    snprintf(err->message, sizeof(err->message), "%s", e.msg);
    return -1;
}

/* The remote entry's stat into *st: 1 when it exists, 0 when the answer was not_found (the
 * path, or the sandbox, does not exist; err says which), -1 on any other failure. */
static int remote_stat(warren *w, const struct remote *r, warren_file_info *st, warren_error *err)
{
    if (warren_file_stat(w, r->id, r->path, st, err) == 0)
        return 1;
    return err->code == WARREN_ENOTFOUND ? 0 : -1;
}

static int upload(warren *w, const char *local, struct remote *r, warren_error *err)
{
    _cleanup_close_ int fd = -1;
    _cleanup_free_ char *dest = NULL;
    warren_file_info rst = {0};
    struct stat st;
    int found;

    if (strcmp(local, "-") == 0) {
        fd = dup(STDIN_FILENO);
    } else {
        fd = open(local, O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0 || fstat(fd, &st) < 0)
        return cp_fail(err, WARREN_ESYS, errno, "%s", local);
    if (S_ISDIR(st.st_mode))
        return cp_fail(err, WARREN_EUNSUPPORTED, 0,
                       "%s is a directory; copying directories is not supported yet", local);

    /* Into an existing directory: keep the file's name, as cp does. */
    if ((found = remote_stat(w, r, &rst, err)) < 0)
        return -1;
    if (found && rst.type == WARREN_DIR) {
        const char *name = strcmp(local, "-") == 0 ? "stdin" : base_name(local);
        size_t n = strlen(r->path);
        dest = xasprintf("%s%s%s", r->path, n && r->path[n - 1] == '/' ? "" : "/", name);
    } else if (r->path[strlen(r->path) - 1] == '/') {
        warren_file_info_fini(&rst);
        return cp_fail(err, WARREN_ENOTFOUND, 0, "%s:%s: no such directory", r->id, r->path);
    } else {
        dest = xstrdup(r->path);
    }
    warren_file_info_fini(&rst);
    return warren_file_write_fd(w, r->id, dest, S_ISREG(st.st_mode) ? st.st_mode & 07777 : 0, fd,
                                S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1, err);
}

static int on_download(const void *data, size_t len, void *ctx)
{
    return wr_write_all(*(int *)ctx, data, len) < 0 ? -1 : 0;
}

static int download(warren *w, struct remote *r, const char *local, warren_error *err)
{
    _cleanup_free_ char *dest = NULL, *tmp = NULL;
    _cleanup_close_ int fd = -1;
    warren_file_info rst = {0};
    struct stat st;
    bool to_stdout = strcmp(local, "-") == 0;
    int ret;

    /* not found: the server's message says whether the file or the sandbox is missing */
    if (remote_stat(w, r, &rst, err) <= 0)
        return -1;
    if (rst.type == WARREN_DIR) {
        warren_file_info_fini(&rst);
        return cp_fail(err, WARREN_EUNSUPPORTED, 0,
                       "%s:%s is a directory; copying directories is not supported yet", r->id,
                       r->path);
    }
    warren_file_info_fini(&rst);

    if (to_stdout) {
        fd = dup(STDOUT_FILENO);
        if (fd < 0)
            return cp_fail(err, WARREN_ESYS, errno, "stdout");
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
            return cp_fail(err, WARREN_ESYS, errno, "create %s", tmp);
    }

    ret = warren_file_read(w, r->id, r->path, on_download, &fd, err);
    if (ret < 0 && err->code == WARREN_EINTERNAL && err->status == 0)
        cp_fail(err, WARREN_ESYS, errno, "write");
    if (to_stdout)
        return ret;
    if (ret == 0 && fsync(fd) < 0 && errno != EINVAL)
        ret = cp_fail(err, WARREN_ESYS, errno, "write %s", tmp);
    if (ret == 0 && rename(tmp, dest) < 0)
        ret = cp_fail(err, WARREN_ESYS, errno, "rename %s to %s", tmp, dest);
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
    warren *w = NULL;
    warren_error err;
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
    if ((w = cli_warren_or_complain("cp")) == NULL)
        goto out;
    if (src_remote ? download(w, &src, argv[optind + 1], &err) < 0
                   : upload(w, argv[optind], &dst, &err) < 0) {
        cli_errorf("cp: %s", err.message);
        goto out;
    }
    rc = 0;
out:
    warren_close(w);
    free(src.id);
    free(dst.id);
    return rc;
}
