/* SPDX-License-Identifier: Apache-2.0 */
/* Template builds from the Dockerfile subset (see manager.h, dockerfile.h and
 * docs/design/images.md). Each step that changes files (RUN, WORKDIR, COPY) runs in a sandbox
 * started from the image built so far, and its writable layer is captured into the layer store;
 * ENV and USER only change the config. Steps are cached by a key chained from the base image
 * and every step before them, so an unchanged prefix is not run again. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/layer.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/walk.h"
#include "../util/xalloc.h"
#include "core_int.h"
#include "dockerfile.h"
#include "images.h"
#include "oci.h"
#include "space.h"

struct build {
    struct wr_manager *m;
    char *team, *name;
    char *runtime; /* the template's "runtime", or NULL: the base's */
    bool replace, shared;
    uint32_t step_timeout_s, cpu_millis;
    uint64_t memory_bytes;
    struct wr_dockerfile df;
    char *dockerfile;      /* its text, until parsed */
    char *context_tar;     /* the uploaded context (removed at the end), or NULL */
    char *dockerfile_path; /* in the context */
    char *context_root;    /* the extracted context: <root>/fs; removed at the end */
    char ctx_digest[72];   /* of the context, for COPY's cache keys */
    char *context_dir_fs;  /* <context_root>/fs */
    size_t at;             /* the step running */
    json_t *layers;        /* refs so far, bottom first */
    json_t *config;        /* env, cwd, user, setuid */
    char key[65];          /* the cache key of the image so far */
    char *step_key;        /* the key the running step would have */
    char *sandbox;         /* the step's sandbox, while it exists */
    struct wr_proc_sub sub;
    struct wr_build_fail fail;
    struct wr_err err;             /* a failed step's, while its sandbox goes */
    char digest[80];               /* the running step's layer, while its sandbox goes */
    void (*then)(struct build *b); /* after the step's sandbox is gone */
    bool from_announced;           /* FROM's step event was sent (a pull runs) */
    bool admin;                    /* an admin's build: FROM may pull from private addresses */
    char *done_tpl;                /* the end: the template made (id), or */
    struct wr_err done_err;        /* why not */
    const struct wr_build_events *ev;
    void *ctx;
};

static void chain(char out[65], const char *prev, const char *what, const json_t *j)
{
    EVP_MD_CTX *h = EVP_MD_CTX_new();
    unsigned char md[32];
    unsigned int len = 0;
    char *js = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

    EVP_DigestInit_ex(h, EVP_sha256(), NULL);
    EVP_DigestUpdate(h, prev, strlen(prev) + 1);
    EVP_DigestUpdate(h, what, strlen(what) + 1);
    if (js != NULL)
        EVP_DigestUpdate(h, js, strlen(js));
    EVP_DigestFinal_ex(h, md, &len);
    EVP_MD_CTX_free(h);
    free(js);
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

struct cleanup_work {
    uv_work_t w;
    struct build *b;
    char *dir, *file;
};

static void report(struct build *b);

static void cleanup_run(uv_work_t *w)
{
    struct cleanup_work *c = w->data;
    struct wr_err err;

    if (c->dir != NULL && wr_layer_remove(c->dir, &err) < 0)
        log_warn("build: remove the context: %s", err.msg);
    if (c->file != NULL)
        (void)unlink(c->file);
}

static void cleanup_done(uv_work_t *w, int status)
{
    struct cleanup_work *c = w->data;
    struct wr_manager *m = c->b->m;

    report(c->b);
    free(c->dir);
    free(c->file);
    free(c);
    wr__work_done(m);
}

static void build_free(struct build *b)
{
    free(b->done_tpl);
    free(b->dockerfile);
    free(b->dockerfile_path);
    free(b->team);
    free(b->name);
    free(b->runtime);
    wr_dockerfile_fini(&b->df);
    json_decref(b->layers);
    json_decref(b->config);
    free(b->step_key);
    free(b->sandbox);
    free(b->context_dir_fs);
    free(b);
}

/* Tell the caller how it ended, and free the build. */
static void report(struct build *b)
{
    struct wr_image_rec tpl;

    if (b->done_tpl != NULL &&
        wr_store_image_get(b->m->cfg.store, b->team, b->done_tpl, &tpl, &b->done_err) == 0) {
        b->ev->on_done(b->ctx, &tpl, NULL, NULL);
        wr_image_rec_fini(&tpl);
    } else {
        b->ev->on_done(b->ctx, NULL, b->fail.line ? &b->fail : NULL, &b->done_err);
    }
    build_free(b);
}

/* The end: the context goes first (on a worker), so that nothing of the build is left when
 * the caller hears of it. */
static void finish(struct build *b, const struct wr_image_rec *tpl, const struct wr_err *err)
{
    if (tpl != NULL)
        b->done_tpl = xstrdup(tpl->id);
    else
        b->done_err = *err;
    if (b->context_root != NULL || b->context_tar != NULL) {
        struct cleanup_work *c = xcalloc(1, sizeof(*c));
        c->b = b;
        c->dir = steal_pointer(&b->context_root);
        c->file = steal_pointer(&b->context_tar);
        c->w.data = c;
        wr__queue_work(b->m, &c->w, cleanup_run, cleanup_done);
        return;
    }
    report(b);
}

/* Delete the step's sandbox, if any, then go on with then(b): the build answers, and the next
 * step starts, only once it is gone. */
static void sandbox_gone(void *ctx, const struct wr_err *err);

static void drop_sandbox(struct build *b, void (*then)(struct build *b))
{
    b->then = then;
    if (b->sandbox == NULL) {
        then(b);
        return;
    }
    wr_manager_delete(b->m, NULL, b->sandbox, sandbox_gone, b);
}

static void sandbox_gone(void *ctx, const struct wr_err *err)
{
    struct build *b = ctx;

    if (err != NULL)
        log_warn("build: remove a step's sandbox: %s", err->msg);
    free(b->sandbox);
    b->sandbox = NULL;
    b->then(b);
}

static void fail_now(struct build *b)
{
    finish(b, NULL, &b->err);
}

static void fail_step(struct build *b, const struct wr_err *err)
{
    const struct wr_df_step *st = &b->df.steps[b->at];

    b->err = *err;
    b->fail.step = (unsigned)b->at + 1;
    b->fail.line = st->line;
    wr_err_wrap(&b->err, "step %zu (line %u, %s)", b->at + 1, st->line, st->text);
    drop_sandbox(b, fail_now);
}

static void next_step(struct build *b);

/* The running step made b->digest ("" if it changed nothing; cached already), and its sandbox
 * is gone: go on. */
static void step_layer(struct build *b)
{
    wr_images_stack_push(b->layers, b->digest);
    memcpy(b->key, b->step_key, sizeof(b->key));
    b->at++;
    next_step(b);
}

static void snapshot_done(void *ctx, const struct wr_image_rec *snap,
                          const struct wr_snapshot_info *info, const struct wr_err *err)
{
    struct build *b = ctx;
    struct wr_err e2;

    if (err != NULL) {
        fail_step(b, err);
        return;
    }
    /* A step that changed nothing adds no layer; its cache row says so with "". The row keeps
     * the layer once the snapshot's record is gone. */
    snprintf(b->digest, sizeof(b->digest), "%s", info->layer ? info->layer : "");
    if (wr_store_build_cache_put(b->m->cfg.store, b->step_key, b->digest, b->team, &e2) < 0)
        log_warn("build: cache step: %s", e2.msg);
    if (wr_images_delete(b->m->cfg.images, NULL, "snapshot", snap->id, &e2) < 0)
        log_warn("build: drop step snapshot: %s", e2.msg);
    drop_sandbox(b, step_layer);
}

static bool step_output(struct wr_proc_sub *sub, int stream, const uint8_t *p, size_t n)
{
    struct build *b = container_of(sub, struct build, sub);
    b->ev->on_output(b->ctx, stream, p, n);
    return false;
}

static void step_exit(struct wr_proc_sub *sub, const struct wr_exit *ex, bool timed_out)
{
    struct build *b = container_of(sub, struct build, sub);
    struct wr_err err;

    wr_proc_unsubscribe(sub);
    if (timed_out || ex->signal != 0 || ex->exit_code != 0) {
        b->fail.exit_code = ex->signal == 0 ? ex->exit_code : -1;
        b->fail.signal = ex->signal;
        if (timed_out)
            wr_err_set(&err, WR_EINVAL, 0, "timed out after %u s", b->step_timeout_s);
        else if (ex->signal != 0)
            wr_err_set(&err, WR_EINVAL, 0, "killed by signal %" PRId64, ex->signal);
        else
            wr_err_set(&err, WR_EINVAL, 0, "exit code %" PRId64, ex->exit_code);
        fail_step(b, &err);
        return;
    }
    wr_manager_snapshot(b->m, NULL, b->sandbox, NULL, snapshot_done, b);
}

static void step_lost(struct wr_proc_sub *sub, const struct wr_err *err)
{
    struct build *b = container_of(sub, struct build, sub);
    wr_proc_unsubscribe(sub);
    fail_step(b, err);
}

/* COPY runs this as root in the step's sandbox, with the context mounted read-only at
 * WR_BUILD_CONTEXT: $1 the destination (relative to the working directory), $2 the --chown
 * value or "", then the sources. A directory's contents are copied; a file goes into a
 * destination ending in / or that is a directory, else becomes it. */
static const char copy_script[] =
    "set -e\n"
    "ctx=" WR_BUILD_CONTEXT "; dest=$1; own=$2; shift 2\n"
    "case $dest in /*) ;; *) dest=$(pwd)/$dest ;; esac\n"
    "for src in \"$@\"; do\n"
    "  s=$ctx/$src\n"
    "  if [ ! -e \"$s\" ] && [ ! -L \"$s\" ]; then\n"
    "    echo \"COPY: $src is not in the build context\" >&2; exit 1\n"
    "  fi\n"
    "  if [ -d \"$s\" ] && [ ! -L \"$s\" ]; then\n"
    "    mkdir -p \"$dest\"; cp -a \"$s/.\" \"$dest/\"; t=$dest\n"
    "  else\n"
    "    case $dest in\n"
    "      */) mkdir -p \"$dest\"; t=$dest$(basename \"$src\") ;;\n"
    "      *) if [ -d \"$dest\" ]; then t=$dest/$(basename \"$src\");\n"
    "         else mkdir -p \"$(dirname \"$dest\")\"; t=$dest; fi ;;\n"
    "    esac\n"
    "    cp -a \"$s\" \"$t\"\n"
    "  fi\n"
    "  if [ -n \"$own\" ]; then chown -R -h \"$own\" \"$t\"; fi\n"
    "done\n";

/* The command of the running step: RUN's, WORKDIR's mkdir, or COPY's script. */
static void step_argv(struct build *b, char ***argv, bool *as_root)
{
    const struct wr_df_step *st = &b->df.steps[b->at];
    static const char *const mkdir_argv[] = {"/bin/mkdir", "-p", "--", NULL, NULL};

    *as_root = false;
    if (st->kind == WR_DF_COPY) {
        char **v = xcalloc(st->argc + 6, sizeof(char *));
        size_t k = 0;
        v[k++] = xstrdup("/bin/sh");
        v[k++] = xstrdup("-c");
        v[k++] = xstrdup(copy_script);
        v[k++] = xstrdup("copy");
        v[k++] = xstrdup(st->argv[st->argc - 1]);
        v[k++] = xstrdup(st->chown ? st->chown : "");
        for (size_t i = 0; i + 1 < st->argc; i++)
            v[k++] = xstrdup(st->argv[i]);
        *argv = v;
        *as_root = true;
    } else if (st->kind == WR_DF_WORKDIR) {
        char **v = xcalloc(5, sizeof(char *));
        for (int i = 0; i < 3; i++)
            v[i] = xstrdup(mkdir_argv[i]);
        v[3] = xstrdup(json_string_value(json_object_get(b->config, "cwd")));
        *argv = v;
        *as_root = true;
    } else if (st->shell != NULL) {
        char **v = xcalloc(4, sizeof(char *));
        v[0] = xstrdup("/bin/sh");
        v[1] = xstrdup("-c");
        v[2] = xstrdup(st->shell);
        *argv = v;
    } else {
        char **v = xcalloc(st->argc + 1, sizeof(char *));
        for (size_t i = 0; i < st->argc; i++)
            v[i] = xstrdup(st->argv[i]);
        *argv = v;
    }
}

static void spawned(void *ctx, struct wr_proc *p, const struct wr_err *err)
{
    struct build *b = ctx;

    if (err != NULL) {
        fail_step(b, err);
        return;
    }
    b->sub =
        (struct wr_proc_sub){.on_output = step_output, .on_exit = step_exit, .on_lost = step_lost};
    wr_proc_subscribe(p, &b->sub, true);
}

static void step_created(void *ctx, struct wr_sandbox_rec *rec, bool existed,
                         const struct wr_err *err, unsigned retry_after_s)
{
    struct build *b = ctx;
    struct wr_spawn sp = {.uid = -1, .gid = -1};
    struct wr_live_sb *sb;
    struct wr_err e2;
    bool as_root;

    if (err != NULL) {
        fail_step(b, err);
        return;
    }
    b->sandbox = xstrdup(rec->id);
    wr_sandbox_rec_fini(rec);
    free(rec);
    sb = wr_manager_find(b->m, NULL, b->sandbox, &e2);
    if (sb == NULL) {
        fail_step(b, &e2);
        return;
    }
    step_argv(b, &sp.argv, &as_root);
    if (as_root)
        sp.user = xstrdup("root");
    if (b->df.steps[b->at].kind == WR_DF_WORKDIR)
        sp.cwd = xstrdup("/"); /* the new working directory is what it makes */
    wr_live_sb_spawn(sb, &sp, (uint64_t)b->step_timeout_s * 1000, spawned, b);
    wr_spawn_fini(&sp);
}

/* Run the current step in a sandbox of the image so far. */
static void run_step(struct build *b)
{
    json_t *image = json_pack("{sOsO}", "layers", b->layers, "config", b->config);
    _cleanup_free_ char *image_json = json_dumps(image, JSON_COMPACT);
    _cleanup_free_ char *display = xasprintf(WR_BUILD_TEMPLATE_PREFIX "%s", b->name);
    struct wr_create_req req = {
        .team = b->team,
        .template_name = display,
        .image_json = image_json,
        .context_dir = b->df.steps[b->at].kind == WR_DF_COPY ? b->context_dir_fs : NULL,
        .cpu_millis = b->cpu_millis,
        .memory_bytes = b->memory_bytes,
        .timeout_s = b->step_timeout_s + 60,
        .runtime = wr__default_runtime(b->m),
    };

    json_decref(image);
    wr_manager_create(b->m, &req, step_created, b);
}

static void set_env(struct build *b, const struct wr_df_step *st)
{
    json_t *env = json_object_get(b->config, "env");

    if (!json_is_object(env)) {
        env = json_object();
        json_object_set_new(b->config, "env", env);
    }
    for (size_t i = 0; i + 1 < st->argc; i += 2)
        json_object_set_new(env, st->argv[i], json_string(st->argv[i + 1]));
}

static void set_workdir(struct build *b, const char *path)
{
    const char *cwd = json_string_value(json_object_get(b->config, "cwd"));
    char *abs;

    if (path[0] == '/')
        abs = xstrdup(path);
    else
        abs = xasprintf("%s/%s", cwd && strcmp(cwd, "/") != 0 ? cwd : "", path);
    json_object_set_new(b->config, "cwd", json_string(abs));
    free(abs);
}

/* The claim of the build's name (wr_images_claim); *replaces as there. */
static int claim(struct build *b, char **replaces, struct wr_err *err)
{
    struct wr_images_claim c = {
        .team = b->team, .name = b->name, .replace = b->replace, .shared = b->shared};
    return wr_images_claim(b->m->cfg.images, &c, replaces, err);
}

static void record_template(struct build *b)
{
    struct wr_images *im = b->m->cfg.images;
    _cleanup_free_ char *replaces = NULL;
    struct wr_image_rec img = {0};
    struct wr_err err;
    int r;

    /* Again: the name may have been taken (or shared) while the steps ran. */
    if (claim(b, &replaces, &err) < 0 || wr_images_replace(im, replaces, &err) < 0) {
        finish(b, NULL, &err);
        return;
    }
    img.id = wr_images_new_id("tpl-");
    img.kind = xstrdup("template");
    img.name = xstrdup(b->name);
    img.team = xstrdup(b->team);
    img.source = xstrdup("build");
    img.shared = b->shared;
    if (b->runtime != NULL)
        json_object_set_new(b->config, "runtime", json_string(b->runtime));
    img.config_json = json_dumps(b->config, JSON_COMPACT | JSON_SORT_KEYS);
    r = wr_images_record(im, &img, b->layers, NULL, 0, &err);
    if (r == 0)
        log_info("build: template %s of team %s made (%zu layers%s)", b->name, b->team,
                 json_array_size(b->layers), b->shared ? ", shared" : "");
    if (replaces != NULL)
        wr_images_gc(im); /* the replaced template's layers, if nothing else has them */
    finish(b, r == 0 ? &img : NULL, r == 0 ? NULL : &err);
    wr_image_rec_fini(&img);
}

static void next_step(struct build *b)
{
    for (; b->at < b->df.n; b->at++) {
        const struct wr_df_step *st = &b->df.steps[b->at];
        char key[65], digest[80];
        struct wr_err err;

        if (st->kind == WR_DF_FROM)
            continue; /* resolved at the start */
        if (st->kind == WR_DF_ENV || st->kind == WR_DF_USER) {
            if (st->kind == WR_DF_ENV)
                set_env(b, st);
            else
                json_object_set_new(b->config, "user", json_string(st->argv[0]));
            b->ev->on_step(b->ctx, b->at, b->df.n, st->line, st->text, false);
            chain(b->key, b->key, st->text, NULL);
            continue;
        }
        if (st->kind == WR_DF_COPY && b->context_dir_fs == NULL) {
            wr_err_set(&err, WR_EINVAL, 0,
                       "COPY needs a build context (send the context as a tar archive)");
            b->fail.step = (unsigned)b->at + 1;
            b->fail.line = st->line;
            wr_err_wrap(&err, "step %zu (line %u, %s)", b->at + 1, st->line, st->text);
            finish(b, NULL, &err);
            return;
        }
        if (st->kind == WR_DF_WORKDIR)
            set_workdir(b, st->argv[0]);
        /* RUN, WORKDIR and COPY make a layer: from the cache if this very step was run on this
         * very image before (COPY: with this very context) and its layer is still in the
         * store. */
        chain(key, b->key, st->text, b->config);
        if (st->kind == WR_DF_COPY)
            chain(key, key, b->ctx_digest, NULL);
        free(b->step_key);
        b->step_key = xstrdup(key);
        if (wr_store_build_cache_get(b->m->cfg.store, key, digest, &err) == 0) {
            b->ev->on_step(b->ctx, b->at, b->df.n, st->line, st->text, true);
            wr_images_stack_push(b->layers, digest);
            memcpy(b->key, key, sizeof(b->key));
            continue;
        }
        b->ev->on_step(b->ctx, b->at, b->df.n, st->line, st->text, false);
        run_step(b);
        return;
    }
    record_template(b);
}

/* ---- the build context ------------------------------------------------------------------- */

/* Entries a context may hold: files, directories, symlinks, hard links. */
static bool context_entry_ok(struct archive_entry *e)
{
    mode_t t = archive_entry_filetype(e);
    return t == AE_IFREG || t == AE_IFDIR || t == AE_IFLNK || archive_entry_hardlink(e) != NULL;
}

/* Absolute, or with a `..` component. */
static bool path_escapes(const char *p)
{
    if (p[0] == '/')
        return true;
    for (const char *c = p; *c;) {
        size_t n = strcspn(c, "/");
        if (n == 2 && c[0] == '.' && c[1] == '.')
            return true;
        c += n;
        while (*c == '/')
            c++;
    }
    return false;
}

/* Whether dir/p is a path libarchive writes without changing the working directory (past
 * PATH_MAX it chdir()s down the path, which would move every thread of the daemon) and that the
 * context's digest walks (at most WR_WALK_MAX_DEPTH directories deep). */
static bool path_fits(const char *dir, const char *p)
{
    unsigned slashes = 0;

    if (strlen(dir) + 1 + strlen(p) >= PATH_MAX)
        return false;
    for (const char *c = p; *c; c++)
        slashes += *c == '/';
    return slashes <= WR_WALK_MAX_DEPTH;
}

/* Unpack the tar (optionally compressed) at tar into dir, an existing directory given by its
 * real path (the entries are written at dir/<name>): nothing outside dir (no absolute paths,
 * no `..`, nothing through a symlink), no device nodes, owned by root. The daemon writes it as
 * root, so it checks every CONTEXT_CHECK_BYTES that the tenants' room (space.h) is not spent:
 * a compressed context cannot inflate into the daemon's reserve. */
#define CONTEXT_CHECK_BYTES (4u << 20)
static int extract_context(const struct wr_space *space, const char *tar, const char *dir,
                           struct wr_err *err)
{
    struct archive *a = archive_read_new(), *w = archive_write_disk_new();
    struct archive_entry *e;
    uint64_t unchecked = 0;
    int r, ret = 0;

    archive_read_support_format_tar(a);
    archive_read_support_format_gnutar(a);
    archive_read_support_filter_gzip(a);
    archive_read_support_filter_zstd(a);
    archive_write_disk_set_options(
        w, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
               ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_NO_OVERWRITE_NEWER);
    if (archive_read_open_filename(a, tar, 65536) != ARCHIVE_OK) {
        ret = wr_err_set(err, WR_EINVAL, 0, "the build context is not a tar archive: %s",
                         archive_error_string(a));
        goto out;
    }
    while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
        const char *path = archive_entry_pathname(e), *link = archive_entry_hardlink(e);
        _cleanup_free_ char *full = NULL, *lfull = NULL;
        if (path == NULL || path_escapes(path) || !context_entry_ok(e)) {
            ret = wr_err_set(err, WR_EINVAL, 0,
                             "the build context holds `%s`: only files, directories and links "
                             "inside it are allowed",
                             path ? path : "(no name)");
            goto out;
        }
        if (!path_fits(dir, path) || (link != NULL && !path_fits(dir, link))) {
            ret = wr_err_set(err, WR_EINVAL, 0,
                             "the build context holds a path longer than %zu bytes or deeper "
                             "than %u directories: `%.200s`",
                             (size_t)PATH_MAX - 2 - strlen(dir), WR_WALK_MAX_DEPTH, path);
            goto out;
        }
        full = xasprintf("%s/%s", dir, path);
        archive_entry_set_pathname(e, full);
        if (link != NULL) {
            if (path_escapes(link)) {
                ret = wr_err_set(err, WR_EINVAL, 0, "the build context links outside: `%s`", link);
                goto out;
            }
            lfull = xasprintf("%s/%s", dir, link);
            archive_entry_set_hardlink(e, lfull);
        }
        archive_entry_set_uid(e, 0);
        archive_entry_set_gid(e, 0);
        if (archive_write_header(w, e) != ARCHIVE_OK) {
            ret = wr_err_set(err, WR_EINVAL, 0, "the build context: `%s`: %s", path,
                             archive_error_string(w));
            goto out;
        }
        if (archive_entry_size(e) > 0) {
            const void *buf;
            size_t size;
            la_int64_t off;
            while ((r = archive_read_data_block(a, &buf, &size, &off)) == ARCHIVE_OK) {
                if (archive_write_data_block(w, buf, size, off) < ARCHIVE_OK) {
                    r = ARCHIVE_FATAL;
                    break;
                }
                unchecked += size;
                if (unchecked >= CONTEXT_CHECK_BYTES) {
                    unchecked = 0;
                    if (wr_space_admit(space, "unpack the build context", 0, err) < 0) {
                        ret = -1;
                        goto out;
                    }
                }
            }
            if (r == ARCHIVE_FATAL && (archive_errno(w) == ENOSPC || archive_errno(w) == EDQUOT)) {
                ret = wr_err_set(err, WR_ESYS, archive_errno(w), "unpack the build context");
                goto out;
            }
            if (r != ARCHIVE_EOF) {
                ret = wr_err_set(err, WR_EINVAL, 0, "the build context: `%s`: %s", path,
                                 archive_error_string(r == ARCHIVE_FATAL ? w : a));
                goto out;
            }
        }
        if (archive_write_finish_entry(w) < ARCHIVE_WARN) {
            ret = wr_err_set(err, WR_EINVAL, 0, "the build context: `%s`: %s", path,
                             archive_error_string(w));
            goto out;
        }
    }
    if (r != ARCHIVE_EOF)
        ret = wr_err_set(err, WR_EINVAL, 0, "the build context is not a valid tar archive: %s",
                         archive_error_string(a));
out:
    archive_read_free(a);
    archive_write_free(w);
    return ret;
}

struct prep_work {
    uv_work_t w;
    struct build *b;
    struct wr_err err;
    int rc;
};

/* Worker: unpack the context, digest it, read the Dockerfile from it if it was not given. */
static void prep_run(uv_work_t *w)
{
    struct prep_work *p = w->data;
    struct build *b = p->b;
    uint64_t bytes;

    p->rc = -1;
    if (mkdir(b->context_root, 0700) < 0 || mkdir(b->context_dir_fs, 0755) < 0) {
        wr_err_sys(&p->err, "make the build context's directory");
        return;
    }
    {
        /* libarchive refuses to write through a symlink anywhere on the path: give it one
         * without any. */
        char *real = realpath(b->context_dir_fs, NULL);
        if (real == NULL) {
            wr_err_sys(&p->err, "resolve the build context's directory");
            return;
        }
        free(b->context_dir_fs);
        b->context_dir_fs = real;
    }
    if (extract_context(b->m->cfg.space, b->context_tar, b->context_dir_fs, &p->err) < 0 ||
        wr_layer_digest(b->context_root, b->ctx_digest, &bytes, &p->err) < 0)
        return;
    if (b->dockerfile == NULL) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -1;
        char buf[1 << 20];
        ssize_t n;
        if (path_escapes(b->dockerfile_path)) {
            wr_err_set(&p->err, WR_EINVAL, 0, "the Dockerfile path `%s` is outside the context",
                       b->dockerfile_path);
            return;
        }
        path = xasprintf("%s/%s", b->context_dir_fs, b->dockerfile_path);
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            wr_err_set(&p->err, WR_EINVAL, 0, "the build context has no `%s`", b->dockerfile_path);
            return;
        }
        n = wr_read_all(fd, buf, sizeof(buf) - 1);
        if (n < 0 || n == (ssize_t)sizeof(buf) - 1) {
            wr_err_set(&p->err, WR_EINVAL, n < 0 ? errno : 0, "`%s`: unreadable or over 1 MiB",
                       b->dockerfile_path);
            return;
        }
        buf[n] = '\0';
        b->dockerfile = xstrdup(buf);
    }
    p->rc = 0;
}

static void start(struct build *b);
static void fail_from(struct build *b, const struct wr_err *err);
static bool is_image_ref(const char *ref);
static void from_registry(struct build *b);
static void from_image(struct build *b, struct wr_image *base);
static void from_image_quiet(struct build *b, struct wr_image *base);

static void prep_done(uv_work_t *w, int status)
{
    struct prep_work *p = w->data;
    struct build *b = p->b;
    struct wr_manager *m = b->m;

    if (p->rc < 0)
        finish(b, NULL, &p->err);
    else
        start(b);
    free(p);
    wr__work_done(m);
}

/* Parse, check the name, resolve FROM, and run the steps. */
static void start(struct build *b)
{
    struct wr_manager *m = b->m;
    struct wr_image base = {0};
    _cleanup_free_ char *replaces = NULL;
    struct wr_err err;
    unsigned line = 0;

    if (wr_dockerfile_parse(b->dockerfile, &b->df, &line, &err) < 0) {
        b->fail.line = line;
        finish(b, NULL, &err);
        return;
    }
    if (claim(b, &replaces, &err) < 0) {
        finish(b, NULL, &err);
        return;
    }
    if (is_image_ref(b->df.steps[0].argv[0])) {
        from_registry(b);
        return;
    }
    if (wr_images_resolve(m->cfg.images, b->team, b->df.steps[0].argv[0], &base, &err) < 0) {
        fail_from(b, &err);
        return;
    }
    from_image(b, &base);
}

static void fail_from(struct build *b, const struct wr_err *err)
{
    struct wr_err e = *err;

    b->fail.step = 1;
    b->fail.line = b->df.steps[0].line;
    wr_err_wrap(&e, "step 1 (line %u, %s)", b->df.steps[0].line, b->df.steps[0].text);
    finish(b, NULL, &e);
}

/* FROM names a registry image (it has a host or a path: "host[:port]/repo[:tag|@digest]"),
 * not a template or a snapshot (whose names have neither `/` nor `:` nor `@`). */
static bool is_image_ref(const char *ref)
{
    return strpbrk(ref, "/:@") != NULL;
}

/* Pulled images are kept as the team's templates named after the reference, so a rebuild does
 * not pull again (delete the template to pull a moved tag anew). */
static char *pulled_name(const char *ref)
{
    char hex[65];
    chain(hex, "warren-from", ref, NULL);
    return xasprintf("from-%.16s", hex);
}

static void from_pulled(void *ctx, const struct wr_image_rec *tpl, const struct wr_err *err)
{
    struct build *b = ctx;
    struct wr_image base = {0};
    struct wr_err e2;

    if (err != NULL) {
        fail_from(b, err);
        return;
    }
    if (wr_images_resolve(b->m->cfg.images, b->team, tpl->name, &base, &e2) < 0) {
        fail_from(b, &e2);
        return;
    }
    from_image(b, &base);
}

static void from_registry(struct build *b)
{
    const char *ref = b->df.steps[0].argv[0];
    _cleanup_free_ char *name = pulled_name(ref);
    const char *host_end = strchr(ref, '/');
    size_t host_len = host_end ? (size_t)(host_end - ref) : 0;
    struct wr_image base = {0};
    struct wr_err err;
    /* A registry on this host's loopback speaks plain http, as Docker assumes too. */
    bool loopback = (host_len >= 9 && strncmp(ref, "localhost", 9) == 0) ||
                    (host_len >= 4 && strncmp(ref, "127.", 4) == 0) ||
                    (host_len >= 5 && strncmp(ref, "[::1]", 5) == 0);
    struct wr_oci_request req = {
        .name = name,
        .team = b->team,
        .admin = b->admin,
        .image = ref,
        .insecure = loopback,
    };

    if (wr_images_resolve(b->m->cfg.images, b->team, name, &base, &err) == 0) {
        b->ev->on_step(b->ctx, 0, b->df.n, b->df.steps[0].line, b->df.steps[0].text, true);
        from_image_quiet(b, &base);
        return;
    }
    b->ev->on_step(b->ctx, 0, b->df.n, b->df.steps[0].line, b->df.steps[0].text, false);
    b->from_announced = true;
    wr_oci_start(b->m, &req, from_pulled, b);
}

/* The base image is known: run the steps on it. */
static void from_image(struct build *b, struct wr_image *base)
{
    if (!b->from_announced)
        b->ev->on_step(b->ctx, 0, b->df.n, b->df.steps[0].line, b->df.steps[0].text, false);
    from_image_quiet(b, base);
}

static void from_image_quiet(struct build *b, struct wr_image *base)
{
    b->layers = wr_images_stack_clean(base->layers);
    b->config = json_deep_copy(base->config);
    /* The team is part of the key: a team never gets a layer another team's build made (a RUN
     * that fetched something is not a function of its text alone). */
    chain(b->key, "warren-build-v1", b->team, base->layers);
    chain(b->key, b->key, "config", base->config);
    wr_image_fini(base);
    b->at = 1;
    next_step(b);
}

void wr_manager_build(struct wr_manager *m, const struct wr_build_req *req,
                      const struct wr_build_events *ev, void *ctx)
{
    struct build *b = xcalloc(1, sizeof(*b));
    struct wr_err err;

    b->m = m;
    b->ev = ev;
    b->ctx = ctx;
    b->team = xstrdup(req->team);
    b->name = xstrdup(req->name);
    b->runtime = req->runtime ? xstrdup(req->runtime) : NULL;
    b->replace = req->replace;
    b->shared = req->shared;
    b->admin = req->admin;
    b->step_timeout_s = req->step_timeout_s ? req->step_timeout_s : 3600;
    b->cpu_millis = req->cpu_millis;
    b->memory_bytes = req->memory_bytes;
    b->dockerfile = req->dockerfile ? xstrdup(req->dockerfile) : NULL;
    b->dockerfile_path = xstrdup(req->dockerfile_path ? req->dockerfile_path : "Dockerfile");
    b->context_tar = req->context_tar ? xstrdup(req->context_tar) : NULL;
    if (b->runtime != NULL && wr_manager_runtime_allowed(m, b->runtime, &err) < 0) {
        finish(b, NULL, &err);
        return;
    }
    {
        _cleanup_free_ char *replaces = NULL;
        if (claim(b, &replaces, &err) < 0) {
            finish(b, NULL, &err);
            return;
        }
    }
    if (wr_space_admit(m->cfg.space, "build", 0, &err) < 0) {
        finish(b, NULL, &err);
        return;
    }
    if (b->context_tar == NULL) {
        if (b->dockerfile == NULL) {
            wr_err_set(&err, WR_EINVAL, 0, "no Dockerfile and no build context");
            finish(b, NULL, &err);
            return;
        }
        start(b);
        return;
    }
    {
        struct prep_work *p = xcalloc(1, sizeof(*p));
        b->context_root = wr_images_tmp(m->cfg.images);
        b->context_dir_fs = xasprintf("%s/fs", b->context_root);
        p->b = b;
        p->w.data = p;
        wr__queue_work(m, &p->w, prep_run, prep_done);
    }
}
