/* SPDX-License-Identifier: Apache-2.0 */
/* Images and the layer store (see images.h). */
#include "images.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../runtime/layer.h"
#include "../runtime/mount.h"
#include "../runtime/quota.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/xalloc.h"

struct wr_images {
    uv_loop_t *loop;
    struct wr_store *store;
    char *layers_dir;    /* <state>/layers */
    char *tmp_dir;       /* <state>/layers/.tmp */
    char *homes_dir;     /* <state>/sandboxes */
    char *templates_dir; /* directory templates */
    struct wr_fs_info fs;
    const char *quota, *quota_why; /* wr_quota_method of the state directory */
    unsigned gc_running;           /* collections on workers (images is freed after the last) */
    bool closing;
};

char *wr_images_new_id(const char *prefix)
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char rnd[16];
    char s[17];

    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        abort(); /* the kernel's CSPRNG cannot fail once initialised */
    for (int i = 0; i < 16; i++)
        s[i] = alphabet[rnd[i] % 36];
    s[16] = '\0';
    return xasprintf("%s%s", prefix, s);
}

int wr_images_open(uv_loop_t *loop, struct wr_store *store, const char *state_dir,
                   const char *templates_dir, struct wr_images **out, struct wr_err *err)
{
    struct wr_images *im = xcalloc(1, sizeof(*im));

    im->loop = loop;
    im->store = store;
    im->layers_dir = xasprintf("%s/layers", state_dir);
    im->tmp_dir = xasprintf("%s/layers/.tmp", state_dir);
    im->homes_dir = xasprintf("%s/sandboxes", state_dir);
    im->templates_dir = xstrdup(templates_dir);
    /* A capture or collection cut short by a crash leaves its work under .tmp. */
    if (wr_layer_remove(im->tmp_dir, err) < 0 || wr_mkdir_p(im->tmp_dir, 0700, err) < 0 ||
        wr_mkdir_p(im->homes_dir, 0700, err) < 0 || wr_fs_probe(im->layers_dir, &im->fs, err) < 0) {
        wr_images_close(im);
        return wr_err_wrap(err, "layer store");
    }
    im->quota = wr_quota_method(im->homes_dir, &im->quota_why);
    log_info("layer store: %s on %s, captures by %s, disk limits %s%s", im->layers_dir,
             wr_fs_kind_name(im->fs.kind), wr_fs_capture_name(&im->fs),
             im->quota ? "by " : "not enforceable: ", im->quota ? im->quota : im->quota_why);
    *out = im;
    return 0;
}

void wr_images_close(struct wr_images *im)
{
    if (im == NULL)
        return;
    im->closing = true;
    if (im->gc_running > 0)
        return; /* the last collection frees it */
    free(im->layers_dir);
    free(im->tmp_dir);
    free(im->homes_dir);
    free(im->templates_dir);
    free(im);
}

const struct wr_fs_info *wr_images_fs(const struct wr_images *im)
{
    return &im->fs;
}

const char *wr_images_quota_method(const struct wr_images *im, const char **why)
{
    *why = im->quota_why;
    return im->quota;
}

const char *wr_images_capture_name(const struct wr_images *im)
{
    return wr_fs_capture_name(&im->fs);
}

char *wr_images_home(const struct wr_images *im, const char *id)
{
    return xasprintf("%s/%s", im->homes_dir, id);
}

char *wr_images_tmp(const struct wr_images *im)
{
    _cleanup_free_ char *id = wr_images_new_id("l-");
    return xasprintf("%s/%s", im->tmp_dir, id);
}

void wr_image_fini(struct wr_image *img)
{
    if (img == NULL)
        return;
    free(img->name);
    free(img->kind);
    json_decref(img->layers);
    json_decref(img->config);
    memset(img, 0, sizeof(*img));
}

bool wr_images_name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64 || s[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_' || s[i] == '.'))
            return false;
    return true;
}

bool wr_images_user_name_valid(const char *s)
{
    return s != NULL && wr_images_name_valid(s) && strncmp(s, "snap-", 5) != 0;
}

/* <templates>/<name>: rootfs/ used in place, config.json for the defaults. */
static int resolve_dir(struct wr_images *im, const char *name, struct wr_image *out,
                       struct wr_err *err)
{
    _cleanup_free_ char *rootfs = xasprintf("%s/%s/rootfs", im->templates_dir, name);
    _cleanup_free_ char *cfg = xasprintf("%s/%s/config.json", im->templates_dir, name);
    _cleanup_free_ char *real = NULL;
    json_error_t je;
    struct stat st;

    if (stat(rootfs, &st) < 0 || !S_ISDIR(st.st_mode))
        return wr_err_set(err, WR_ENOTFOUND, 0, "template `%s` does not exist", name);
    real = realpath(rootfs, NULL);
    if (real == NULL)
        return wr_err_sys(err, "template `%s`", name);
    out->config = json_object();
    if (access(cfg, F_OK) == 0) {
        json_t *j = json_load_file(cfg, 0, &je);
        if (!json_is_object(j)) {
            json_decref(j);
            wr_image_fini(out);
            return wr_err_set(err, WR_EINTERNAL, 0, "template config `%s`: %s", cfg, je.text);
        }
        json_decref(out->config);
        out->config = j;
    }
    out->name = xstrdup(name);
    out->kind = xstrdup("dir");
    out->layers = json_array();
    json_array_append_new(out->layers, json_sprintf("dir:%s", real));
    return 0;
}

static int image_of_rec(struct wr_image_rec *rec, const char *ref, struct wr_image *out,
                        struct wr_err *err)
{
    out->layers = json_loads(rec->layers_json, 0, NULL);
    out->config = json_loads(rec->config_json, 0, NULL);
    out->name = xstrdup(strcmp(rec->kind, "snapshot") == 0 ? rec->id : rec->name);
    out->kind = xstrdup(rec->kind);
    wr_image_rec_fini(rec);
    if (!json_is_array(out->layers) || !json_is_object(out->config)) {
        wr_image_fini(out);
        return wr_err_set(err, WR_EINTERNAL, 0, "image `%s`: malformed record", ref);
    }
    return 0;
}

static bool dir_template(const struct wr_images *im, const char *name)
{
    _cleanup_free_ char *rootfs = xasprintf("%s/%s/rootfs", im->templates_dir, name);
    struct stat st;

    return stat(rootfs, &st) == 0 && S_ISDIR(st.st_mode);
}

int wr_images_resolve(struct wr_images *im, const char *team, const char *ref, struct wr_image *out,
                      struct wr_err *err)
{
    struct wr_image_rec rec = {0};

    memset(out, 0, sizeof(*out));
    if (!wr_images_name_valid(ref))
        return wr_err_set(err, WR_EINVAL, 0, "template name `%s` is not valid", ref);
    /* The team's own, then the host's directory templates, then the shared ones. */
    if (wr_store_image_get(im->store, team, ref, &rec, err) == 0)
        return image_of_rec(&rec, ref, out, err);
    if (err->kind != WR_ENOTFOUND)
        return -1;
    if (dir_template(im, ref))
        return resolve_dir(im, ref, out, err);
    if (wr_store_image_get_shared(im->store, ref, &rec, err) == 0)
        return image_of_rec(&rec, ref, out, err);
    if (err->kind != WR_ENOTFOUND)
        return -1;
    return wr_err_set(err, WR_ENOTFOUND, 0, "template `%s` does not exist", ref);
}

int wr_images_list(struct wr_images *im, const char *team, const char *kind, const char *source,
                   struct wr_image_rec **out, size_t *n, struct wr_err *err)
{
    return wr_store_image_list(im->store, team, kind, source, out, n, err);
}

int wr_images_get(struct wr_images *im, const char *team, const char *ref, struct wr_image_rec *r,
                  struct wr_err *err)
{
    return wr_store_image_get(im->store, team, ref, r, err);
}

int64_t wr_images_users(struct wr_images *im, const char *team, const char *name)
{
    int64_t n = 0;
    (void)wr_store_image_users(im->store, team, name, &n, NULL);
    return n;
}

bool wr_images_shared_name(struct wr_images *im, const char *name, bool *dir)
{
    struct wr_image_rec rec;

    *dir = dir_template(im, name);
    if (*dir)
        return true;
    if (wr_store_image_get_shared(im->store, name, &rec, NULL) < 0)
        return false;
    wr_image_rec_fini(&rec);
    return true;
}

int wr_images_claim(struct wr_images *im, const struct wr_images_claim *c, char **replaces,
                    struct wr_err *err)
{
    const char *what = c->snapshot ? "snapshot" : "template";
    struct wr_image_rec rec;
    bool dir;

    *replaces = NULL;
    if (c->snapshot && c->name == NULL)
        return 0; /* an unnamed snapshot: its id is new */
    if (!wr_images_user_name_valid(c->name))
        return wr_err_set(err, WR_EINVAL, 0,
                          "%s name `%s` is not valid: 1 to 64 of [A-Za-z0-9._-], not starting "
                          "with `.` or `snap-`",
                          what, c->name ? c->name : "");
    /* A shared template's name is every team's: nobody builds, imports, pulls or snapshots
     * over it (a directory template's not even an admin: it is replaced on the host). */
    if (wr_images_shared_name(im, c->name, &dir)) {
        if (dir)
            return wr_err_set(err, WR_ECONFLICT, 0,
                              "`%s` is a shared template (a directory in the host's templates "
                              "directory): choose another name",
                              c->name);
        if (!c->shared || c->snapshot)
            return wr_err_set(err, WR_ECONFLICT, 0,
                              "`%s` is a shared template's name: choose another name", c->name);
        if (!c->replace)
            return wr_err_set(err, WR_ECONFLICT, 0,
                              "a shared template `%s` exists already (replace it with replace)",
                              c->name);
        if (wr_store_image_get_shared(im->store, c->name, &rec, err) < 0)
            return -1;
        *replaces = steal_pointer(&rec.id);
        wr_image_rec_fini(&rec);
        return 0;
    }
    /* Then only the team's own names count: another team's never answer (nor show). */
    if (wr_store_image_get(im->store, c->team, c->name, &rec, err) < 0)
        return err->kind == WR_ENOTFOUND ? 0 : -1;
    if (c->replace && !c->snapshot && !c->shared && strcmp(rec.kind, "template") == 0 &&
        strcmp(rec.name, c->name) == 0) {
        *replaces = steal_pointer(&rec.id);
        wr_image_rec_fini(&rec);
        return 0;
    }
    if (c->shared)
        wr_err_set(err, WR_ECONFLICT, 0,
                   "your team has an image named `%s`: a shared template cannot take its name",
                   c->name);
    else
        wr_err_set(err, WR_ECONFLICT, 0, "an image named `%s` exists already%s", c->name,
                   c->replace ? " and is not a template of your team" : "");
    wr_image_rec_fini(&rec);
    return -1;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int wr_images_dir_names(const struct wr_images *im, char ***names, size_t *n)
{
    _cleanup_closedir_ DIR *d = opendir(im->templates_dir);
    size_t cap = 0;

    *names = NULL;
    *n = 0;
    if (d == NULL)
        return 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        _cleanup_free_ char *rootfs = NULL;
        struct stat st;
        if (de->d_name[0] == '.' || !wr_images_name_valid(de->d_name))
            continue;
        rootfs = xasprintf("%s/%s/rootfs", im->templates_dir, de->d_name);
        if (stat(rootfs, &st) < 0 || !S_ISDIR(st.st_mode))
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            *names = xrealloc(*names, cap * sizeof(char *));
        }
        (*names)[(*n)++] = xstrdup(de->d_name);
    }
    if (*n > 0)
        qsort(*names, *n, sizeof(char *), cmp_name);
    return 0;
}

/* Whether refs[i] comes again higher up the stack. */
static bool again_above(const json_t *refs, size_t i)
{
    const char *ref = json_string_value(json_array_get(refs, i));

    for (size_t k = i + 1; ref != NULL && k < json_array_size(refs); k++)
        if (json_equal(json_array_get(refs, k), json_array_get(refs, i)))
            return true;
    return false;
}

/* A layer below another copy of itself adds nothing: for every path the upper copy answers
 * first, and whatever it leaves to the layers below (a name it does not have, the rest of a
 * directory it does not make opaque) the lower copy does not have either. So the lower copy
 * goes. (Keeping the lower one instead would be wrong: a layer in between may delete or hide
 * what the upper copy shows again.) overlayfs refuses a stack that names a directory twice
 * (ELOOP), so a stack never does. */
json_t *wr_images_stack_clean(const json_t *layers)
{
    json_t *out = json_array();

    for (size_t i = 0; i < json_array_size(layers); i++)
        if (!again_above(layers, i))
            json_array_append(out, json_array_get(layers, i));
    return out;
}

void wr_images_stack_push(json_t *layers, const char *digest)
{
    if (digest == NULL || digest[0] == '\0')
        return;
    for (size_t i = json_array_size(layers); i-- > 0;) {
        const char *ref = json_string_value(json_array_get(layers, i));
        if (ref != NULL && strcmp(ref, digest) == 0)
            json_array_remove(layers, i);
    }
    json_array_append_new(layers, json_string(digest));
}

int wr_images_layer_paths(const struct wr_images *im, const json_t *layers, char ***paths,
                          size_t *n, struct wr_err *err)
{
    json_t *stack = wr_images_stack_clean(layers), *l;
    size_t cnt = json_array_size(stack), i;
    char **v = xcalloc(cnt + 1, sizeof(char *));

    json_array_foreach(stack, i, l)
    {
        const char *ref = json_string_value(l);
        struct stat st;
        if (ref != NULL && strncmp(ref, "dir:", 4) == 0)
            v[i] = xstrdup(ref + 4);
        else if (ref != NULL && strncmp(ref, "sha256:", 7) == 0 && strlen(ref) == 71 &&
                 strchr(ref + 7, '/') == NULL)
            v[i] = xasprintf("%s/%s/fs", im->layers_dir, ref + 7);
        if (v[i] == NULL || stat(v[i], &st) < 0 || !S_ISDIR(st.st_mode)) {
            wr_err_set(err, v[i] == NULL ? WR_EINTERNAL : WR_ENOTFOUND, 0, "layer `%s` is missing",
                       ref ? ref : "(not a string)");
            for (size_t k = 0; k <= i; k++)
                free(v[k]);
            free(v);
            json_decref(stack);
            return -1;
        }
    }
    json_decref(stack);
    *paths = v;
    *n = cnt;
    return 0;
}

/* The layer at tmp/fs holds nothing: only its root directory, whose owner and mode no sandbox
 * sees (the root of an overlay is its upper's). */
static bool layer_empty(const char *tmp)
{
    _cleanup_free_ char *fs = xasprintf("%s/fs", tmp);
    _cleanup_closedir_ DIR *d = opendir(fs);

    if (d == NULL)
        return false;
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            return false;
    return true;
}

int wr_images_install(const struct wr_images *im, const char *tmp, char digest[72], uint64_t *bytes,
                      struct wr_err *err)
{
    _cleanup_free_ char *dst = NULL;
    struct stat st;

    if (layer_empty(tmp)) {
        /* Nothing changed: no layer (an empty one would only lengthen the stack). */
        digest[0] = '\0';
        *bytes = 0;
        return wr_layer_remove(tmp, err);
    }
    if (wr_layer_digest(tmp, digest, bytes, err) < 0)
        goto fail;
    dst = xasprintf("%s/%s", im->layers_dir, digest + 7);
    if (stat(dst, &st) == 0) {
        /* The store has this very layer: share it. */
        (void)wr_layer_remove(tmp, NULL);
        return 0;
    }
    /* Sealed once in place: a read-only subvolume cannot be renamed. */
    if (rename(tmp, dst) < 0) {
        wr_err_sys(err, "install layer %s", digest);
        goto fail;
    }
    if (wr_layer_seal(dst, err) < 0) {
        (void)wr_layer_remove(dst, NULL);
        return -1;
    }
    return 0;
fail:
    (void)wr_layer_remove(tmp, NULL);
    return -1;
}

int wr_images_record(struct wr_images *im, struct wr_image_rec *img, const json_t *base_layers,
                     const char *digest, uint64_t bytes, struct wr_err *err)
{
    json_t *layers = wr_images_stack_clean(base_layers);
    uint64_t size = 0;
    int r;

    if (digest != NULL && digest[0] != '\0') {
        _cleanup_free_ char *dir = xasprintf("%s/%s/fs", im->layers_dir, digest + 7);
        struct stat st;
        if (stat(dir, &st) < 0) {
            json_decref(layers);
            return wr_err_set(err, WR_ENOTFOUND, 0, "layer %s was collected meanwhile", digest);
        }
        if (wr_store_layer_put(im->store, digest, bytes, err) < 0) {
            json_decref(layers);
            return -1;
        }
        wr_images_stack_push(layers, digest);
    }
    /* An image no sandbox could start is never recorded. */
    if (json_array_size(layers) == 0 || json_array_size(layers) > WR_MAX_LAYERS) {
        if (json_array_size(layers) == 0)
            wr_err_set(err, WR_EBADDATA, 0, "the image holds no files (every layer is empty)");
        else
            wr_err_set(err, WR_ECONFLICT, 0,
                       "the image would have %zu layers, and a sandbox stacks at most %d",
                       json_array_size(layers), WR_MAX_LAYERS);
        json_decref(layers);
        wr_images_gc(im); /* the layer may be referenced by nothing */
        return -1;
    }
    img->layers_json = json_dumps(layers, JSON_COMPACT);
    json_decref(layers);
    if (wr_store_layers_size(im->store, img->layers_json, &size, err) < 0)
        return -1;
    img->size_bytes = size;
    if (img->created_ms == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        img->created_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    }
    r = wr_store_image_insert(im->store, img, err);
    if (r < 0)
        wr_images_gc(im); /* the layer may be referenced by nothing now */
    return r;
}

int wr_images_template(struct wr_images *im, const char *team, const char *name, bool any_team,
                       struct wr_image_rec *rec, bool *dir, struct wr_err *err)
{
    struct wr_image_rec *all = NULL;
    size_t n = 0, found = 0;

    memset(rec, 0, sizeof(*rec));
    *dir = false;
    if (wr_store_image_get(im->store, team, name, rec, err) == 0) {
        if (strcmp(rec->kind, "template") == 0 && strcmp(rec->name, name) == 0)
            return 0;
        wr_image_rec_fini(rec);
    } else if (err->kind != WR_ENOTFOUND) {
        return -1;
    }
    if (dir_template(im, name)) {
        *dir = true;
        return 0;
    }
    if (wr_store_image_get_shared(im->store, name, rec, err) == 0)
        return 0;
    if (err->kind != WR_ENOTFOUND)
        return -1;
    if (!any_team)
        return wr_err_set(err, WR_ENOTFOUND, 0, "template `%s` does not exist", name);
    /* (An admin) another team's, if it is the only one of that name. */
    if (wr_store_image_list(im->store, NULL, "template", NULL, &all, &n, err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(all[i].name, name) == 0 && found++ == 0)
            *rec = all[i];
        else
            wr_image_rec_fini(&all[i]);
    }
    free(all);
    if (found == 1)
        return 0;
    if (found > 1)
        wr_image_rec_fini(rec);
    return found == 0 ? wr_err_set(err, WR_ENOTFOUND, 0, "template `%s` does not exist", name)
                      : wr_err_set(err, WR_ECONFLICT, 0,
                                   "%zu teams have a template `%s`: name the team", found, name);
}

void wr_images_forget(struct wr_images *im, const char *digest, uint64_t bytes)
{
    struct wr_err err;

    if (digest == NULL || digest[0] == '\0')
        return;
    if (wr_store_layer_put(im->store, digest, bytes, &err) < 0)
        log_warn("layer store: %s", err.msg);
    wr_images_gc(im);
}

int wr_images_delete_template(struct wr_images *im, const char *team, const char *name, bool admin,
                              bool any_team, struct wr_err *err)
{
    struct wr_image_rec rec;
    bool dir;
    int rc;

    if (wr_images_template(im, team, name, admin && any_team, &rec, &dir, err) < 0)
        return -1;
    if (dir)
        return wr_err_set(err, WR_ECONFLICT, 0,
                          "template `%s` is a directory in the host's templates directory; "
                          "remove it there",
                          name);
    if (rec.shared && !admin) {
        wr_image_rec_fini(&rec);
        return wr_err_set(err, WR_ECONFLICT, 0,
                          "template `%s` is shared by every team: only an admin key deletes it",
                          name);
    }
    rc = wr_store_image_delete(im->store, rec.id, err);
    wr_image_rec_fini(&rec);
    if (rc == 0)
        wr_images_gc(im);
    return rc;
}

int wr_images_delete(struct wr_images *im, const char *team, const char *kind, const char *ref,
                     struct wr_err *err)
{
    struct wr_image_rec rec = {0};

    if (strcmp(kind, "template") == 0)
        return wr_images_delete_template(im, team, ref, false, false, err);
    if (wr_store_image_get(im->store, team, ref, &rec, err) < 0)
        return -1;
    if (strcmp(rec.kind, kind) != 0) {
        wr_image_rec_fini(&rec);
        return wr_err_set(err, WR_ENOTFOUND, 0, "%s `%s` not found", kind, ref);
    }
    if (wr_store_image_delete(im->store, rec.id, err) < 0) {
        wr_image_rec_fini(&rec);
        return -1;
    }
    wr_image_rec_fini(&rec);
    wr_images_gc(im);
    return 0;
}

int wr_images_replace(struct wr_images *im, const char *id, struct wr_err *err)
{
    if (id == NULL)
        return 0;
    if (wr_store_image_delete(im->store, id, err) < 0)
        return err->kind == WR_ENOTFOUND ? 0 : -1;
    return 0;
}

int wr_images_prune_cache(struct wr_images *im, const char *team, int64_t *n, struct wr_err *err)
{
    if (wr_store_build_cache_prune(im->store, team, n, err) < 0)
        return -1;
    if (*n > 0)
        wr_images_gc(im);
    return 0;
}

/* ---- collection -------------------------------------------------------------------------- */

struct gc_work {
    uv_work_t w;
    struct wr_images *im;
    char **doomed; /* directories under .tmp, renamed there on the loop */
    size_t n;
};

static void gc_run(uv_work_t *w)
{
    struct gc_work *g = w->data;
    struct wr_err err;

    for (size_t i = 0; i < g->n; i++)
        if (wr_layer_remove(g->doomed[i], &err) < 0)
            log_warn("layer store: %s", err.msg);
}

static void gc_done(uv_work_t *w, int status)
{
    struct gc_work *g = w->data;
    struct wr_images *im = g->im;

    for (size_t i = 0; i < g->n; i++)
        free(g->doomed[i]);
    free(g->doomed);
    free(g);
    im->gc_running--;
    if (im->closing && im->gc_running == 0)
        wr_images_close(im);
}

void wr_images_gc(struct wr_images *im)
{
    struct gc_work *g;
    char **digests = NULL;
    size_t n = 0;
    struct wr_err err;

    if (im->closing)
        return;
    if (wr_store_layers_unreferenced(im->store, &digests, &n, &err) < 0) {
        log_warn("layer store: %s", err.msg);
        return;
    }
    if (n == 0) {
        free(digests);
        return;
    }
    g = xcalloc(1, sizeof(*g));
    g->im = im;
    g->doomed = xcalloc(n, sizeof(char *));
    /* Out of the store first (a rename, on the loop), so that no image can pick the layer up
     * again while a worker deletes it. */
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *dir = xasprintf("%s/%s", im->layers_dir, digests[i] + 7);
        _cleanup_free_ char *to = wr_images_tmp(im);
        (void)wr_layer_unseal(dir, NULL);
        if (rename(dir, to) < 0 && errno != ENOENT) {
            log_warn("layer store: collect %s: %s", digests[i], strerror(errno));
        } else if (wr_store_layer_delete(im->store, digests[i], &err) < 0) {
            log_warn("layer store: %s", err.msg);
        } else {
            log_info("layer store: collected %s", digests[i]);
            g->doomed[g->n++] = steal_pointer(&to);
        }
        free(digests[i]);
    }
    free(digests);
    g->w.data = g;
    im->gc_running++;
    uv_queue_work(im->loop, &g->w, gc_run, gc_done);
}
