/* SPDX-License-Identifier: Apache-2.0 */
/* `warren create -f FILE`: the create's `compose` object (docs/compose.md), with the Compose
 * file's text, its interpolation variables (--compose-env) and its context (--context DIR: the
 * files env_file and bind volumes name, sent as text). */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/utf8.h"
#include "../util/walk.h"
#include "../util/xalloc.h"

#define COMPOSE_FILE_MAX (1u << 20) /* the server refuses far less (256 KiB): 413 too_large */

/* Read all of fd, at most max bytes. Returns 0 with b filled, or -1 with err. */
static int read_capped(int fd, const char *what, size_t max, struct wr_buf *b, struct wr_err *err)
{
    for (;;) {
        ssize_t n;

        wr_buf_reserve(b, 64u << 10);
        n = read(fd, b->data + b->len, b->cap - b->len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return wr_err_sys(err, "read %s", what);
        if (n == 0)
            break;
        b->len += (size_t)n;
        if (b->len > max)
            return wr_err_set(err, WR_ETOOBIG, 0, "%s is larger than %zu KiB", what, max >> 10);
    }
    wr_buf_append(b, "", 0);
    return 0;
}

/* ---- the context ---------------------------------------------------------------------------- */

struct context {
    json_t *files;  /* relative path -> content */
    size_t bytes;   /* of content so far */
    size_t *opened; /* per directory entered: the number of entries when it was entered */
    size_t n_opened;
};

/* context[path] = content (taken). */
static int add_entry(struct context *c, const char *path, json_t *content, struct wr_err *err)
{
    if (json_object_size(c->files) >= CLI_CONTEXT_MAX_FILES) {
        json_decref(content);
        return wr_err_set(err, WR_ETOOBIG, 0, "more than %u files (the most a context holds)",
                          CLI_CONTEXT_MAX_FILES);
    }
    if (!wr_utf8_valid(path)) {
        json_decref(content);
        return wr_err_set(err, WR_EINVAL, 0, "the name %s is not UTF-8", path);
    }
    json_object_set_new(c->files, path, content);
    return 0;
}

static int add_file(struct context *c, const struct wr_walk_ent *e, struct wr_err *err)
{
    const char *rel = e->path + 1; /* the prefix is "": paths are "/a/b" */
    _cleanup_close_ int fd = -1;
    _cleanup_(wr_buf_finip) struct wr_buf b = {0};
    size_t left = CLI_CONTEXT_MAX_BYTES - c->bytes;
    json_t *text;

    if ((uint64_t)e->st.st_size > left)
        goto too_big;
    fd = openat(e->dirfd, e->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return wr_err_sys(err, "open %s", rel);
    if (read_capped(fd, rel, left, &b, err) < 0) {
        if (err->kind == WR_ETOOBIG)
            goto too_big;
        return -1;
    }
    text = json_stringn((const char *)b.data, b.len);
    if (text == NULL)
        return wr_err_set(err, WR_EINVAL, 0,
                          "%s is not UTF-8 text (a context holds text files only)", rel);
    c->bytes += b.len;
    return add_entry(c, rel, text, err);
too_big:
    return wr_err_set(err, WR_ETOOBIG, 0,
                      "its files are more than %u MiB (the most a context holds)",
                      CLI_CONTEXT_MAX_BYTES >> 20);
}

static int visit(const struct wr_walk_ent *e, void *ctx, struct wr_err *err)
{
    struct context *c = ctx;

    if (e->depth == 0 && !S_ISDIR(e->st.st_mode))
        return wr_err_set(err, WR_EINVAL, 0, "not a directory");
    if (e->depth > 0 && e->name[0] == '.')
        return S_ISDIR(e->st.st_mode) ? WR_WALK_SKIP : 0; /* .git, .env, ...: left out */
    if (S_ISDIR(e->st.st_mode)) {
        c->opened = xrealloc(c->opened, (c->n_opened + 1) * sizeof(*c->opened));
        c->opened[c->n_opened++] = json_object_size(c->files);
        return 0;
    }
    if (!S_ISREG(e->st.st_mode))
        return 0; /* symlinks, sockets, devices: a context holds none */
    return add_file(c, e, err);
}

/* A directory left with nothing added below it is sent as "dir/": "" (a bind of an empty
 * directory must find it). */
static int leave(const struct wr_walk_ent *e, void *ctx, struct wr_err *err)
{
    struct context *c = ctx;
    size_t before = c->opened[--c->n_opened];

    if (e->depth == 0 || json_object_size(c->files) != before)
        return 0;
    _cleanup_free_ char *key = xasprintf("%s/", e->path + 1);
    return add_entry(c, key, json_string(""), err);
}

json_t *cli_compose_context(const char *dir, struct wr_err *err)
{
    struct context c = {0};
    struct wr_walk w = {
        .flags = WR_WALK_SORTED, .prefix = "", .visit = visit, .leave = leave, .ctx = &c};
    _cleanup_free_ char *real = realpath(dir, NULL); /* DIR itself may be a symlink */
    int r;

    if (real == NULL) {
        wr_err_sys(err, "--context %s", dir);
        return NULL;
    }
    c.files = json_object();
    r = wr_walk_at(AT_FDCWD, real, &w, err);
    free(c.opened);
    if (r < 0) {
        struct wr_err inner = *err;
        wr_err_set(err, inner.kind, 0, "--context %s: %s", dir, inner.msg);
        json_decref(c.files);
        return NULL;
    }
    return c.files;
}

/* ---- the compose object --------------------------------------------------------------------- */

json_t *cli_compose_json(const char *file, json_t *env, const char *context_dir, struct wr_err *err)
{
    _cleanup_(wr_buf_finip) struct wr_buf b = {0};
    _cleanup_close_ int fd = -1;
    bool from_stdin = strcmp(file, "-") == 0;
    const char *what = from_stdin ? "stdin" : file;
    json_t *text, *compose, *context = NULL;

    fd = from_stdin ? dup(STDIN_FILENO) : open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        wr_err_sys(err, "-f %s", what);
        return NULL;
    }
    if (read_capped(fd, what, COMPOSE_FILE_MAX, &b, err) < 0)
        return NULL;
    if ((text = json_stringn((const char *)b.data, b.len)) == NULL) {
        wr_err_set(err, WR_EINVAL, 0, "-f %s: not UTF-8 text", what);
        return NULL;
    }
    if (context_dir != NULL && (context = cli_compose_context(context_dir, err)) == NULL) {
        json_decref(text);
        return NULL;
    }
    compose = json_pack("{s:o}", "file", text);
    if (json_object_size(env) > 0)
        json_object_set(compose, "env", env);
    if (context != NULL)
        json_object_set_new(compose, "context", context);
    return compose;
}
