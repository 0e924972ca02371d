/* SPDX-License-Identifier: Apache-2.0 */
/* Moving a sandbox paused to disk between nodes through the object store (see move.h). */
#include "move.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../image/image.h"
#include "../image/objstore.h"
#include "../runtime/creds.h"
#include "../runtime/layer.h"
#include "../runtime/mount.h"
#include "../runtime/quota.h"
#include "../util/cleanup.h"
#include "../util/json_cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "core_int.h"
#include "images.h"
#include "space.h"

#define MANIFEST_VERSION 1
#define MANIFEST_MAX     (1024 * 1024)

/* ---- the object store --------------------------------------------------------------------- */

/* The URL of --object-store, checked on the loop (the store is opened on the worker: an s3://
 * one answers a HEAD first). *out: a copy. */
static int store_url_check(const char *url, char **out, struct wr_err *err)
{
    if (url == NULL || url[0] == '\0')
        return wr_err_set(err, WR_EUNSUPPORTED, 0,
                          "this node has no object store (warrend --object-store)");
    *out = xstrdup(url);
    return 0;
}

/* ---- export -------------------------------------------------------------------------------- */

struct export_work {
    uv_work_t w;
    struct wr_manager *m;
    struct wr_live_sb *sb;  /* referenced, busy; NULL for an image */
    const char *prefix;     /* of the manifest's key: "sandboxes" or "images" */
    char *url;              /* the store's */
    struct wr_objstore *st; /* opened by the worker */
    char **paths;           /* the image's layer directories, bottom first */
    size_t npaths;
    json_t *refs;     /* their refs */
    char *upper;      /* the writable layer's tree; NULL for an image */
    json_t *manifest; /* the record's part, made on the loop */
    /* results */
    char *key;
    size_t layers;
    uint64_t bytes;
    struct wr_err err;
    int rc;
    wr_move_export_cb cb;
    void *ctx;
};

static void export_free(struct export_work *x)
{
    for (size_t i = 0; i < x->npaths; i++)
        free(x->paths[i]);
    free(x->paths);
    json_decref(x->refs);
    json_decref(x->manifest);
    free(x->upper);
    free(x->key);
    wr_objstore_free(x->st);
    free(x->url);
    free(x);
}

/* Worker: the tar of the tree at dir into the store; its descriptor {digest, size}. */
static json_t *export_tree(struct export_work *x, const char *dir, struct wr_err *err)
{
    _cleanup_free_ char *tmp = wr_images_tmp(x->m->cfg.images);
    _cleanup_free_ char *key = NULL;
    char digest[72];
    uint64_t size;
    bool existed;
    int rc;

    if (wr_oci_pack_layer(dir, tmp, digest, &size, err) < 0)
        return NULL;
    key = xasprintf("blobs/sha256/%s", digest + 7);
    rc = wr_objstore_put_file(x->st, key, tmp, &existed, err);
    (void)unlink(tmp);
    if (rc < 0)
        return NULL;
    x->layers++;
    x->bytes += size;
    return json_pack("{s:s,s:I}", "digest", digest, "size", (json_int_t)size);
}

static void export_run(uv_work_t *w)
{
    struct export_work *x = w->data;
    json_t *layers = json_array(), *d;
    _cleanup_free_ char *text = NULL;
    char digest[72];
    struct stat st;
    bool existed;

    x->rc = -1;
    json_object_set_new(x->manifest, "layers", layers);
    if (wr_objstore_open(x->url, &x->st, &x->err) < 0)
        return;
    for (size_t i = 0; i < x->npaths; i++) {
        const char *ref = json_string_value(json_array_get(x->refs, i));
        if ((d = export_tree(x, x->paths[i], &x->err)) == NULL) {
            wr_err_wrap(&x->err, "layer %zu of %zu", i + 1, x->npaths);
            return;
        }
        /* A layer of the store: a node that has it needs no blob. */
        if (ref != NULL && strncmp(ref, "sha256:", 7) == 0)
            json_object_set_new(d, "layer", json_string(ref));
        json_array_append_new(layers, d);
    }
    if (x->upper == NULL) {
        /* an image: its layers are all */
    } else if (lstat(x->upper, &st) == 0 && S_ISDIR(st.st_mode)) {
        if ((d = export_tree(x, x->upper, &x->err)) == NULL) {
            wr_err_wrap(&x->err, "writable layer");
            return;
        }
        json_object_set_new(x->manifest, "writable", d);
    } else {
        json_object_set_new(x->manifest, "writable", json_null());
    }
    text = json_dumps(x->manifest, JSON_COMPACT | JSON_SORT_KEYS);
    wr_oci_digest(text, strlen(text), digest);
    x->key = xasprintf("%s/%s/%s.json", x->prefix,
                       json_string_value(json_object_get(x->manifest, "id")), digest + 7);
    if (wr_objstore_put(x->st, x->key, text, strlen(text), &existed, &x->err) < 0)
        return;
    x->rc = 0;
}

/* An image's export is done: nothing to let go. */
static void export_image_done(uv_work_t *w, int status)
{
    struct export_work *x = w->data;
    struct wr_manager *m = x->m;
    struct wr_move_export_result res = {.manifest = x->key, .layers = x->layers, .bytes = x->bytes};
    struct wr_err err;

    if (m->closing) {
        wr_err_set(&err, WR_ECONFLICT, 0, "the daemon is shutting down");
        x->cb(x->ctx, NULL, &err);
    } else if (x->rc < 0) {
        log_warn("image export: %s", x->err.msg);
        x->cb(x->ctx, NULL, &x->err);
    } else {
        log_info("image exported to %s (%zu layers, %" PRIu64 " bytes)", x->key, x->layers,
                 x->bytes);
        x->cb(x->ctx, &res, NULL);
    }
    export_free(x);
    wr__work_done(m);
}

static void export_done(uv_work_t *w, int status)
{
    struct export_work *x = w->data;
    struct wr_live_sb *sb = x->sb;
    struct wr_manager *m = x->m;
    struct wr_move_export_result res = {.manifest = x->key, .layers = x->layers, .bytes = x->bytes};
    struct wr_err err;

    sb->busy = false;
    if (m->closing) {
        wr_err_set(&err, WR_ECONFLICT, 0, "the daemon is shutting down");
        x->cb(x->ctx, NULL, &err);
        wr__live_sb_let_go(sb);
    } else {
        if (x->rc < 0) {
            log_warn("sandbox %s: export: %s", sb->id, x->err.msg);
            x->cb(x->ctx, NULL, &x->err);
        } else {
            log_info("sandbox %s: exported to %s (%zu layers, %" PRIu64 " bytes)", sb->id, x->key,
                     x->layers, x->bytes);
            x->cb(x->ctx, &res, NULL);
        }
        (void)wr__run_pending_end(sb); /* a delete asked for meanwhile */
    }
    wr_live_sb_unref(sb);
    export_free(x);
    wr__work_done(m);
}

/* A JSON column of the record as a value (NULL or bad: null). */
static json_t *column(const char *text)
{
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    return j ? j : json_null();
}

/* What the record needs to be made again on another node. */
static json_t *manifest_of(const struct wr_sandbox_rec *r, const json_t *image)
{
    const json_t *cfg = json_object_get(image, "config");

    return json_pack(
        "{s:i,s:s,s:s,s:s,s:I,s:I,s:I,s:o,s:o,s:O,s:o,s:I,s:I,s:s,s:s,s:o,s:I}", "version",
        MANIFEST_VERSION, "id", r->id, "team", r->team, "template", r->template_name, "cpu_millis",
        (json_int_t)r->cpu_millis, "memory_bytes", (json_int_t)r->memory_bytes, "disk_bytes",
        (json_int_t)r->disk_bytes, "env", column(r->env_json), "metadata", column(r->metadata_json),
        "config", cfg ? cfg : json_object(), "network", column(r->net_json), "timeout_s",
        (json_int_t)r->timeout_s, "remaining_ms",
        (json_int_t)(r->remaining_ms > 0 ? r->remaining_ms : 0), "on_timeout",
        wr_sb_on_timeout_name(r->on_timeout), "runtime", r->runtime ? r->runtime : "ns", "compose",
        column(r->compose_json), "created_ms", (json_int_t)r->created_ms);
}

/* Whether a JSON column holds something: not NULL, "", "[]" or "{}". */
static bool column_set(const char *text)
{
    return text != NULL && text[0] != '\0' && strcmp(text, "[]") != 0 && strcmp(text, "{}") != 0 &&
           strcmp(text, "null") != 0;
}

/* On the loop: the checks, the record's part of the manifest and the layer paths. */
static int export_prepare(struct export_work *x, const char *team, const char *id,
                          struct wr_err *err)
{
    struct wr_manager *m = x->m;
    struct wr_sandbox_rec rec;
    _cleanup_json_ json_t *image = NULL;
    int rc = -1;

    x->sb = wr__lookup(m, team, id, err);
    if (x->sb == NULL || wr__check_settled(x->sb, err) < 0)
        return -1;
    if (x->sb->state != LIVE_SB_ON_DISK)
        return wr_err_set(err, WR_ECONFLICT, 0,
                          "sandbox `%s` is not paused to disk: pause it with mode `disk` first",
                          id);
    if (wr_store_sandbox_get(m->cfg.store, NULL, x->sb->id, &rec, err) < 0)
        return -1;
    if (column_set(rec.volumes_json) || column_set(rec.devices_json)) {
        wr_err_set(err, WR_ECONFLICT, 0,
                   "sandbox `%s` holds volumes or host devices, which stay on their node", id);
        goto out;
    }
    image = json_loads(rec.image_json ? rec.image_json : "{}", 0, NULL);
    x->refs = wr_images_stack_clean(json_object_get(image, "layers"));
    if (json_array_size(x->refs) == 0) {
        wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` records no image layers", id);
        goto out;
    }
    if (wr_images_layer_paths(m->cfg.images, x->refs, &x->paths, &x->npaths, err) < 0)
        goto out;
    {
        _cleanup_free_ char *home = wr_images_home(m->cfg.images, x->sb->id);
        x->upper = xasprintf("%s/upper", home);
    }
    x->manifest = manifest_of(&rec, image);
    rc = 0;
out:
    wr_sandbox_rec_fini(&rec);
    return rc;
}

void wr_move_export(struct wr_manager *m, const char *store_url, const char *team, const char *id,
                    wr_move_export_cb cb, void *ctx)
{
    struct export_work *x = xcalloc(1, sizeof(*x));
    struct wr_err err;

    x->m = m;
    x->prefix = "sandboxes";
    if (store_url_check(store_url, &x->url, &err) < 0 || export_prepare(x, team, id, &err) < 0 ||
        wr_space_admit(m->cfg.space, "export", 0, &err) < 0) {
        x->sb = NULL;
        export_free(x);
        cb(ctx, NULL, &err);
        return;
    }
    x->cb = cb;
    x->ctx = ctx;
    x->w.data = x;
    x->sb->busy = true;
    wr_live_sb_ref(x->sb);
    wr__queue_work(m, &x->w, export_run, export_done);
}

/* On the loop: the image's record as the manifest, and its layer paths. */
static int export_image_prepare(struct export_work *x, const char *team, const char *ref,
                                struct wr_err *err)
{
    struct wr_images *im = x->m->cfg.images;
    struct wr_image_rec rec;
    _cleanup_json_ json_t *layers = NULL;
    bool dir;
    int rc = -1;

    if (wr_images_get(im, team, ref, &rec, err) < 0) {
        if (err->kind == WR_ENOTFOUND && wr_images_shared_name(im, ref, &dir) && dir)
            return wr_err_set(err, WR_ECONFLICT, 0,
                              "`%s` is a directory template: each node has its own", ref);
        return -1;
    }
    layers = json_loads(rec.layers_json ? rec.layers_json : "[]", 0, NULL);
    x->refs = wr_images_stack_clean(layers);
    if (json_array_size(x->refs) == 0) {
        wr_err_set(err, WR_ECONFLICT, 0, "image `%s` records no layers", ref);
        goto out;
    }
    if (wr_images_layer_paths(im, x->refs, &x->paths, &x->npaths, err) < 0)
        goto out;
    x->manifest =
        json_pack("{s:i,s:s,s:s,s:s,s:s?,s:s,s:b,s:s?,s:o,s:I}", "version", MANIFEST_VERSION,
                  "type", "image", "id", rec.id, "kind", rec.kind, "name", rec.name, "team",
                  rec.team, "shared", rec.shared, "source", rec.source, "config",
                  column(rec.config_json), "created_ms", (json_int_t)rec.created_ms);
    rc = 0;
out:
    wr_image_rec_fini(&rec);
    return rc;
}

void wr_move_image_export(struct wr_manager *m, const char *store_url, const char *team,
                          const char *ref, wr_move_export_cb cb, void *ctx)
{
    struct export_work *x = xcalloc(1, sizeof(*x));
    struct wr_err err;

    x->m = m;
    x->prefix = "images";
    if (store_url_check(store_url, &x->url, &err) < 0 ||
        export_image_prepare(x, team, ref, &err) < 0 ||
        wr_space_admit(m->cfg.space, "export", 0, &err) < 0) {
        export_free(x);
        cb(ctx, NULL, &err);
        return;
    }
    x->cb = cb;
    x->ctx = ctx;
    x->w.data = x;
    wr__queue_work(m, &x->w, export_run, export_image_done);
}

/* ---- import -------------------------------------------------------------------------------- */

struct import_work {
    uv_work_t w;
    struct wr_manager *m;
    char *url;              /* the store's */
    struct wr_objstore *st; /* opened by the worker */
    char *key, *team;       /* team NULL: any */
    char id[128];           /* from the key, then the manifest */
    bool image;             /* an image's (wr_move_image_import), else a sandbox's */
    /* phase 1 (worker): the manifest, the image's layers in the store, the writable blob */
    json_t *manifest;
    char (*digests)[72]; /* the layers, bottom first ("" for an empty one) */
    uint64_t *bytes;
    bool *installed; /* put into the store here (to record, or to collect on failure) */
    size_t nlayers;
    char *wblob; /* the writable layer's tar, fetched (NULL: none) */
    const char *wdigest;
    /* phase 2 (worker): the home, for the record inserted on the loop */
    char *home;
    uint64_t disk_bytes;
    uint32_t project;
    /* its network slot (-1: loopback only), taken on the loop; made by phase 2 if slot_make */
    int32_t slot;
    bool slot_make, slot_made;
    bool recorded, home_made;
    struct wr_err err;
    int rc;
    wr_manager_state_cb cb; /* a sandbox's */
    wr_move_image_cb icb;   /* an image's */
    void *ctx;
};

static void import_free(struct import_work *x)
{
    if (x->wblob != NULL)
        (void)unlink(x->wblob);
    free(x->wblob);
    free(x->key);
    free(x->team);
    free(x->home);
    json_decref(x->manifest);
    free(x->digests);
    free(x->bytes);
    free(x->installed);
    wr_objstore_free(x->st);
    free(x->url);
    free(x);
}

/* "sandboxes/<id>/<64 hex>.json" -> id. */
static int key_id(const char *key, const char *prefix, char *id, size_t size, struct wr_err *err)
{
    size_t n = strlen(prefix);
    const char *p, *slash;

    if (!wr_objstore_key_valid(key) || strncmp(key, prefix, n) != 0 || key[n] != '/')
        return wr_err_set(err, WR_EINVAL, 0,
                          "`manifest` must be a key %s/<id>/<sha256>.json, as export answers",
                          prefix);
    p = key + n + 1;
    slash = strchr(p, '/');
    if (slash == NULL || slash == p || (size_t)(slash - p) >= size || strchr(slash + 1, '/'))
        return wr_err_set(err, WR_EINVAL, 0, "`manifest` must be a key %s/<id>/<sha256>.json",
                          prefix);
    memcpy(id, p, (size_t)(slash - p));
    id[slash - p] = '\0';
    return 0;
}

static bool digest_valid(const char *d)
{
    if (d == NULL || strncmp(d, "sha256:", 7) != 0 || strlen(d) != 71)
        return false;
    for (const char *p = d + 7; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

/* A blob descriptor {digest, size[, layer]}. */
static bool blob_valid(const json_t *b)
{
    const json_t *l = json_object_get(b, "layer");
    return json_is_object(b) && digest_valid(json_string_value(json_object_get(b, "digest"))) &&
           json_is_integer(json_object_get(b, "size")) &&
           (l == NULL || digest_valid(json_string_value(l)));
}

/* The manifest's checks: its shape, and that it is the sandbox the key names. */
/* The fields only a sandbox's manifest has. */
static bool sandbox_fields_valid(const json_t *j)
{
    const json_t *wr = json_object_get(j, "writable");
    enum wr_sb_on_timeout ot;

    return json_string_value(json_object_get(j, "template")) != NULL &&
           json_integer_value(json_object_get(j, "cpu_millis")) > 0 &&
           json_integer_value(json_object_get(j, "cpu_millis")) <= UINT32_MAX &&
           json_integer_value(json_object_get(j, "memory_bytes")) > 0 &&
           json_integer_value(json_object_get(j, "disk_bytes")) >= 0 &&
           json_integer_value(json_object_get(j, "timeout_s")) >= 0 &&
           json_integer_value(json_object_get(j, "timeout_s")) <= UINT32_MAX &&
           (wr == NULL || json_is_null(wr) || blob_valid(wr)) &&
           json_is_object(json_object_get(j, "env")) &&
           json_is_object(json_object_get(j, "metadata")) &&
           wr_sb_on_timeout_parse(json_string_value(json_object_get(j, "on_timeout")), &ot) == 0;
}

/* The fields only an image's manifest has. */
static bool image_fields_valid(const json_t *j)
{
    const char *kind = json_string_value(json_object_get(j, "kind"));
    const json_t *name = json_object_get(j, "name");

    return kind != NULL && (strcmp(kind, "template") == 0 || strcmp(kind, "snapshot") == 0) &&
           (json_is_string(name) ||
            ((name == NULL || json_is_null(name)) && strcmp(kind, "snapshot") == 0));
}

static int manifest_check(struct import_work *x, struct wr_err *err)
{
    const json_t *j = x->manifest, *layers = json_object_get(j, "layers"), *b;
    const char *id = json_string_value(json_object_get(j, "id"));
    const char *team = json_string_value(json_object_get(j, "team"));
    size_t i;

    if (json_integer_value(json_object_get(j, "version")) != MANIFEST_VERSION || id == NULL ||
        team == NULL || !json_is_array(layers) || json_array_size(layers) == 0 ||
        json_array_size(layers) > WR_MAX_LAYERS || !json_is_object(json_object_get(j, "config")) ||
        !(x->image ? image_fields_valid(j) : sandbox_fields_valid(j)))
        return wr_err_set(err, WR_EBADDATA, 0, "manifest `%s` is not one export writes", x->key);
    json_array_foreach(layers, i, b)
    {
        if (!blob_valid(b))
            return wr_err_set(err, WR_EBADDATA, 0, "manifest `%s`: layer %zu is malformed", x->key,
                              i + 1);
    }
    if (strlen(team) == 0 || strlen(team) > 127)
        return wr_err_set(err, WR_EBADDATA, 0, "manifest `%s`: a bad team", x->key);
    if (strcmp(id, x->id) != 0)
        return wr_err_set(err, WR_EBADDATA, 0, "manifest `%s` is `%s`'s", x->key, id);
    /* Another team's manifest is as good as missing. */
    if (x->team != NULL && strcmp(team, x->team) != 0)
        return wr_err_set(err, WR_ENOTFOUND, 0, "object `%s` not found", x->key);
    return 0;
}

/* The key names its manifest's SHA-256 ("sandboxes/<id>/<hex>.json"): what was read must have
 * it. */
static int manifest_digest_check(const char *key, const char *text, size_t len, struct wr_err *err)
{
    const char *base = strrchr(key, '/') + 1;
    char digest[72];

    wr_oci_digest(text, len, digest);
    if (strlen(base) != 64 + 5 || strncmp(base, digest + 7, 64) != 0 ||
        strcmp(base + 64, ".json") != 0)
        return wr_err_set(err, WR_EBADDATA, 0, "manifest `%s`: its digest is %s", key, digest);
    return 0;
}

/* Fetch a blob into a fresh temporary file (*path). */
static int fetch_blob(struct import_work *x, const json_t *b, char **path, struct wr_err *err)
{
    const char *digest = json_string_value(json_object_get(b, "digest"));
    _cleanup_free_ char *key = xasprintf("blobs/sha256/%s", digest + 7);

    *path = wr_images_tmp(x->m->cfg.images);
    if (wr_objstore_get_file(x->st, key, *path, err) < 0) {
        free(*path);
        *path = NULL;
        return -1;
    }
    return 0;
}

/* Unpack the blob at path (checked against digest) into the existing directory dir, as tenant
 * data (runtime/creds.h). */
static int unpack_blob(const char *path, const char *digest, const char *dir, struct wr_err *err)
{
    struct wr_oci_layer l = {.path = (char *)path, .digest = (char *)digest, .media_type = ""};
    struct wr_creds_saved saved;
    int rc;

    if (wr_creds_tenant_begin(&saved, err) < 0)
        return -1;
    rc = wr_oci_unpack_layer(&l, dir, err);
    wr_creds_tenant_end(&saved);
    return rc;
}

/* Worker: layer i into the layer store, unless the store has it. */
static int import_layer(struct import_work *x, size_t i, struct wr_err *err)
{
    const json_t *b = json_array_get(json_object_get(x->manifest, "layers"), i);
    const char *have = json_string_value(json_object_get(b, "layer"));
    _cleanup_free_ char *blob = NULL, *tmp = NULL, *fs = NULL;
    struct stat st;
    int rc = -1;

    if (have != NULL) {
        _cleanup_json_ json_t *one = json_pack("[s]", have);
        char **paths = NULL;
        size_t n = 0;
        if (wr_images_layer_paths(x->m->cfg.images, one, &paths, &n, NULL) == 0) {
            for (size_t k = 0; k < n; k++)
                free(paths[k]);
            free(paths);
            snprintf(x->digests[i], sizeof(x->digests[i]), "%s", have);
            return 0;
        }
    }
    if (fetch_blob(x, b, &blob, err) < 0)
        return -1;
    tmp = wr_images_tmp(x->m->cfg.images);
    fs = xasprintf("%s/fs", tmp);
    if (mkdir(tmp, 0700) < 0 || mkdir(fs, 0755) < 0) {
        wr_err_sys(err, "mkdir `%s`", fs);
        goto out;
    }
    if (unpack_blob(blob, json_string_value(json_object_get(b, "digest")), fs, err) < 0)
        goto out;
    /* install moves or removes tmp, success or not */
    rc = wr_images_install(x->m->cfg.images, tmp, x->digests[i], &x->bytes[i], err);
    free(tmp);
    tmp = NULL;
    x->installed[i] = rc == 0 && x->digests[i][0] != '\0';
out:
    (void)unlink(blob);
    if (tmp != NULL && stat(tmp, &st) == 0)
        (void)wr_layer_remove(tmp, NULL);
    return rc;
}

static void import_fetch_run(uv_work_t *w)
{
    struct import_work *x = w->data;
    _cleanup_free_ char *text = NULL;
    const json_t *wr;
    json_error_t jerr;
    size_t len = 0;

    x->rc = -1;
    if (wr_objstore_open(x->url, &x->st, &x->err) < 0 ||
        wr_objstore_get(x->st, x->key, MANIFEST_MAX, &text, &len, &x->err) < 0)
        return;
    if (manifest_digest_check(x->key, text, len, &x->err) < 0)
        return;
    x->manifest = json_loadb(text, len, 0, &jerr);
    if (x->manifest == NULL || !json_is_object(x->manifest)) {
        wr_err_set(&x->err, WR_EBADDATA, 0, "manifest `%s`: %s", x->key,
                   x->manifest ? "not an object" : jerr.text);
        return;
    }
    if (manifest_check(x, &x->err) < 0)
        return;
    x->nlayers = json_array_size(json_object_get(x->manifest, "layers"));
    x->digests = xcalloc(x->nlayers, sizeof(*x->digests));
    x->bytes = xcalloc(x->nlayers, sizeof(*x->bytes));
    x->installed = xcalloc(x->nlayers, sizeof(*x->installed));
    for (size_t i = 0; i < x->nlayers; i++)
        if (import_layer(x, i, &x->err) < 0) {
            wr_err_wrap(&x->err, "layer %zu of %zu", i + 1, x->nlayers);
            return;
        }
    wr = json_object_get(x->manifest, "writable");
    if (!x->image && json_is_object(wr)) {
        x->wdigest = json_string_value(json_object_get(wr, "digest"));
        if (fetch_blob(x, wr, &x->wblob, &x->err) < 0) {
            wr_err_wrap(&x->err, "writable layer");
            return;
        }
    }
    x->rc = 0;
}

/* Worker: the home, its disk limit, and the writable layer unpacked into its upper/. */
static void import_home_run(uv_work_t *w)
{
    struct import_work *x = w->data;
    _cleanup_free_ char *upper = xasprintf("%s/upper", x->home);
    struct stat st;

    x->rc = -1;
    if (lstat(x->home, &st) == 0) {
        wr_err_set(&x->err, WR_ECONFLICT, 0, "sandbox `%s` has files on this node already", x->id);
        return;
    }
    if (wr_layer_home_create(x->home, wr_images_fs(x->m->cfg.images), &x->err) < 0)
        return;
    x->home_made = true;
    if (x->slot >= 0 && x->slot_make) {
        int fd = wr__net_open_fd(x->m, x->slot, true, false, &x->err);
        if (fd < 0)
            return;
        close(fd);
        x->slot_made = true;
    }
    if (x->disk_bytes > 0 && wr_quota_limit(x->home, x->disk_bytes, x->project, &x->err) < 0) {
        wr_err_wrap(&x->err, "disk limit");
        return;
    }
    if (mkdir(upper, 0755) < 0) {
        wr_err_sys(&x->err, "mkdir `%s`", upper);
        return;
    }
    if (x->wblob != NULL && unpack_blob(x->wblob, x->wdigest, upper, &x->err) < 0) {
        wr_err_wrap(&x->err, "writable layer");
        return;
    }
    wr_runtime_crash_point(x->m->cfg.rt, "imported");
    x->rc = 0;
}

/* Loop: what phase 1 put into the layer store is recorded and collected unless something
 * refers to it (an import that failed). */
static void forget_layers(struct import_work *x)
{
    for (size_t i = 0; i < x->nlayers; i++)
        if (x->installed[i])
            wr_images_forget(x->m->cfg.images, x->digests[i], x->bytes[i]);
}

/* The sandbox's image: its layers here and the manifest's config. */
static char *image_json_of(struct import_work *x)
{
    _cleanup_json_ json_t *layers = json_array();
    _cleanup_json_ json_t *img = NULL;

    for (size_t i = 0; i < x->nlayers; i++)
        wr_images_stack_push(layers, x->digests[i]);
    img =
        json_pack("{s:O,s:O}", "layers", layers, "config", json_object_get(x->manifest, "config"));
    return json_dumps(img, JSON_COMPACT);
}

static char *dump_or_null(const json_t *j)
{
    return j != NULL && !json_is_null(j) ? json_dumps(j, JSON_COMPACT) : NULL;
}

/* Loop: a network slot for a sandbox that had a network (on a node with networking). */
static int import_slot(struct import_work *x, struct wr_err *err)
{
    const json_t *net = json_object_get(x->manifest, "network");
    bool pooled;

    if (x->m->net == NULL || !json_is_object(net) || !json_is_true(json_object_get(net, "enabled")))
        return 0;
    if (wr__net_take(x->m, false, &x->slot, &x->slot_make, &pooled, err) < 0) {
        x->slot = -1;
        return -1;
    }
    return 0;
}

/* Loop: record the layers and the sandbox (state creating: a daemon that dies before the
 * import ends tears it down at its next start, as a create it did not finish). */
static int import_record(struct import_work *x, struct wr_err *err)
{
    struct wr_manager *m = x->m;
    const json_t *j = x->manifest;
    struct wr_sandbox_rec r = {0}, old;
    char **paths = NULL;
    size_t n = 0;
    _cleanup_json_ json_t *layers = json_array();
    int rc;

    if (wr_store_sandbox_get(m->cfg.store, NULL, x->id, &old, NULL) == 0) {
        wr_sandbox_rec_fini(&old);
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` exists on this node", x->id);
    }
    for (size_t i = 0; i < x->nlayers; i++) {
        if (x->installed[i] &&
            wr_store_layer_put(m->cfg.store, x->digests[i], x->bytes[i], err) < 0)
            return -1;
        wr_images_stack_push(layers, x->digests[i]);
    }
    if (json_array_size(layers) == 0)
        return wr_err_set(err, WR_EBADDATA, 0, "the sandbox's image holds no files");
    if (wr_images_layer_paths(m->cfg.images, layers, &paths, &n, err) < 0)
        return wr_err_set(err, WR_ECONFLICT, 0, "a layer was collected meanwhile: try again");
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    r.id = x->id;
    r.team = (char *)json_string_value(json_object_get(j, "team"));
    r.template_name = (char *)json_string_value(json_object_get(j, "template"));
    r.state = WR_SB_CREATING;
    r.cpu_millis = (uint32_t)json_integer_value(json_object_get(j, "cpu_millis"));
    r.memory_bytes = (uint64_t)json_integer_value(json_object_get(j, "memory_bytes"));
    r.disk_bytes = (uint64_t)json_integer_value(json_object_get(j, "disk_bytes"));
    r.created_ms = json_integer_value(json_object_get(j, "created_ms"));
    r.metadata_json = dump_or_null(json_object_get(j, "metadata"));
    r.env_json = dump_or_null(json_object_get(j, "env"));
    r.timeout_s = (uint32_t)json_integer_value(json_object_get(j, "timeout_s"));
    (void)wr_sb_on_timeout_parse(json_string_value(json_object_get(j, "on_timeout")),
                                 &r.on_timeout);
    r.image_json = image_json_of(x);
    r.net_slot = -1;
    r.runtime = (char *)json_string_value(json_object_get(j, "runtime"));
    r.compose_json = dump_or_null(json_object_get(j, "compose"));
    rc = wr_store_sandbox_insert(m->cfg.store, &r, err);
    if (rc == 0) {
        x->recorded = true;
        x->disk_bytes = r.disk_bytes;
        x->project = wr__project_of(r.seq);
        rc = import_slot(x, err);
    }
    free(r.metadata_json);
    free(r.env_json);
    free(r.image_json);
    free(r.compose_json);
    return rc;
}

/* Loop: the imported sandbox in the manager's table, paused to disk (as a restarted daemon
 * takes one back, src/core/reconcile.c). */
static struct wr_live_sb *import_adopt(struct wr_manager *m, const struct wr_sandbox_rec *r)
{
    struct wr_live_sb *sb = wr__live_sb_new(m, r->id, r->team, r->memory_bytes, r->cpu_millis);
    struct wr_err err;

    if (wr__rec_backend(r, &sb->backend, &err) < 0)
        log_warn("%s", err.msg);
    sb->store_layers = true;
    wr__live_sb_set_state(sb, LIVE_SB_ON_DISK);
    sb->remaining_ms = r->remaining_ms > 0 ? r->remaining_ms : 0;
    sb->on_timeout = r->on_timeout;
    sb->timeout_s = r->timeout_s;
    wr__table_put(m, sb);
    wr__account(sb, false);
    return sb;
}

/* Loop: undo what the import did (the home goes on the loop only at shutdown or after a
 * failed phase 2, where it is small or gone). */
static void import_undo(struct import_work *x)
{
    if (x->slot >= 0)
        wr__net_release_slot(x->m, x->slot, !x->slot_make || x->slot_made);
    x->slot = -1;
    if (x->home_made)
        (void)wr_layer_remove(x->home, NULL);
    if (x->recorded)
        (void)wr_store_sandbox_delete(x->m->cfg.store, x->id, NULL);
    forget_layers(x);
}

static void import_fail(struct import_work *x, const struct wr_err *err)
{
    log_info("import %s: %s", x->key, err->msg);
    import_undo(x);
    if (x->image)
        x->icb(x->ctx, NULL, err);
    else
        x->cb(x->ctx, NULL, err);
}

static void import_home_done(uv_work_t *w, int status)
{
    struct import_work *x = w->data;
    struct wr_manager *m = x->m;
    int64_t remaining = json_integer_value(json_object_get(x->manifest, "remaining_ms"));
    struct wr_sandbox_rec rec;
    struct wr_err err;

    if (m->closing) {
        wr_err_set(&err, WR_ECONFLICT, 0, "the daemon is shutting down");
        import_fail(x, &err);
    } else if (x->rc < 0) {
        import_fail(x, &x->err);
    } else if (wr_store_sandbox_set_paused(m->cfg.store, x->id, WR_SB_PAUSED_DISK, NULL, remaining,
                                           &err) < 0 ||
               wr_store_sandbox_get(m->cfg.store, NULL, x->id, &rec, &err) < 0) {
        /* gone: deleted meanwhile (a delete of a record being created tears it down) */
        x->recorded = x->recorded && err.kind != WR_ENOTFOUND;
        import_fail(x, &err);
    } else {
        struct wr_live_sb *sb = import_adopt(m, &rec);
        if (x->slot >= 0) {
            _cleanup_free_ char *net = dump_or_null(json_object_get(x->manifest, "network"));
            wr__net_slot_made(m, x->slot);
            if (wr__net_import(m, sb, x->slot, net, &err) < 0)
                log_warn("sandbox %s: network: %s", x->id, err.msg);
            wr_sandbox_rec_fini(&rec);
            if (wr_store_sandbox_get(m->cfg.store, NULL, x->id, &rec, &err) < 0) {
                x->cb(x->ctx, NULL, &err);
                goto out;
            }
        }
        log_info("sandbox %s: imported from %s, paused to disk", x->id, x->key);
        x->cb(x->ctx, &rec, NULL);
        wr_sandbox_rec_fini(&rec);
    }
out:
    import_free(x);
    wr__work_done(m);
}

/* Loop: record the image with its id, kind, name and team (its name claimed here as a build's
 * or an import's is), and answer. */
static void import_image_record(struct import_work *x)
{
    struct wr_images *im = x->m->cfg.images;
    const json_t *j = x->manifest;
    const char *kind = json_string_value(json_object_get(j, "kind"));
    struct wr_image_rec rec = {0}, old;
    struct wr_images_claim c = {
        .team = json_string_value(json_object_get(j, "team")),
        .name = json_string_value(json_object_get(j, "name")),
        .snapshot = strcmp(kind, "snapshot") == 0,
        .shared = json_is_true(json_object_get(j, "shared")),
    };
    _cleanup_free_ char *replaces = NULL;
    _cleanup_json_ json_t *layers = json_array();
    struct wr_err err;

    if (wr_images_get(im, NULL, x->id, &old, NULL) == 0) {
        wr_image_rec_fini(&old);
        wr_err_set(&err, WR_ECONFLICT, 0, "image `%s` exists on this node", x->id);
        import_fail(x, &err);
        return;
    }
    for (size_t i = 0; i < x->nlayers; i++) {
        if (x->installed[i] &&
            wr_store_layer_put(x->m->cfg.store, x->digests[i], x->bytes[i], &err) < 0) {
            import_fail(x, &err);
            return;
        }
        wr_images_stack_push(layers, x->digests[i]);
    }
    if (wr_images_claim(im, &c, &replaces, &err) < 0) {
        import_fail(x, &err);
        return;
    }
    rec.id = xstrdup(x->id);
    rec.kind = xstrdup(kind);
    rec.name = c.name ? xstrdup(c.name) : NULL;
    rec.team = xstrdup(c.team);
    rec.shared = c.shared;
    rec.source = xstrdup(json_string_value(json_object_get(j, "source"))
                             ? json_string_value(json_object_get(j, "source"))
                             : "import");
    rec.config_json = json_dumps(json_object_get(j, "config"), JSON_COMPACT | JSON_SORT_KEYS);
    rec.created_ms = json_integer_value(json_object_get(j, "created_ms"));
    if (wr_images_record(im, &rec, layers, NULL, 0, &err) < 0) {
        import_fail(x, &err);
    } else {
        log_info("image %s: imported from %s", x->id, x->key);
        x->icb(x->ctx, &rec, NULL);
    }
    wr_image_rec_fini(&rec);
}

static void import_fetch_done(uv_work_t *w, int status)
{
    struct import_work *x = w->data;
    struct wr_manager *m = x->m;
    struct wr_err err;

    if (m->closing) {
        wr_err_set(&err, WR_ECONFLICT, 0, "the daemon is shutting down");
        import_fail(x, &err);
    } else if (x->rc < 0) {
        import_fail(x, &x->err);
    } else if (x->image) {
        import_image_record(x);
    } else if (import_record(x, &err) < 0) {
        import_fail(x, &err);
    } else {
        x->home = wr_images_home(m->cfg.images, x->id);
        wr__queue_work(m, &x->w, import_home_run, import_home_done);
        wr__work_done(m);
        return;
    }
    import_free(x);
    wr__work_done(m);
}

void wr_move_import(struct wr_manager *m, const char *store_url, const char *team, const char *key,
                    wr_manager_state_cb cb, void *ctx)
{
    struct import_work *x = xcalloc(1, sizeof(*x));
    struct wr_sandbox_rec old;
    struct wr_err err;

    x->m = m;
    x->slot = -1;
    if (store_url_check(store_url, &x->url, &err) < 0 ||
        key_id(key, "sandboxes", x->id, sizeof(x->id), &err) < 0 ||
        wr_space_admit(m->cfg.space, "import", 0, &err) < 0)
        goto fail;
    if (wr_store_sandbox_get(m->cfg.store, NULL, x->id, &old, NULL) == 0) {
        wr_sandbox_rec_fini(&old);
        wr_err_set(&err, WR_ECONFLICT, 0, "sandbox `%s` exists on this node", x->id);
        goto fail;
    }
    x->key = xstrdup(key);
    x->team = team ? xstrdup(team) : NULL;
    x->cb = cb;
    x->ctx = ctx;
    x->w.data = x;
    wr__queue_work(m, &x->w, import_fetch_run, import_fetch_done);
    return;
fail:
    import_free(x);
    cb(ctx, NULL, &err);
}

void wr_move_image_import(struct wr_manager *m, const char *store_url, const char *team,
                          const char *key, wr_move_image_cb cb, void *ctx)
{
    struct import_work *x = xcalloc(1, sizeof(*x));
    struct wr_image_rec old;
    struct wr_err err;

    x->m = m;
    x->slot = -1;
    x->image = true;
    if (store_url_check(store_url, &x->url, &err) < 0 ||
        key_id(key, "images", x->id, sizeof(x->id), &err) < 0 ||
        wr_space_admit(m->cfg.space, "import", 0, &err) < 0)
        goto fail;
    if (wr_images_get(m->cfg.images, NULL, x->id, &old, NULL) == 0) {
        wr_image_rec_fini(&old);
        wr_err_set(&err, WR_ECONFLICT, 0, "image `%s` exists on this node", x->id);
        goto fail;
    }
    x->key = xstrdup(key);
    x->team = team ? xstrdup(team) : NULL;
    x->icb = cb;
    x->ctx = ctx;
    x->w.data = x;
    wr__queue_work(m, &x->w, import_fetch_run, import_fetch_done);
    return;
fail:
    import_free(x);
    cb(ctx, NULL, &err);
}
