/* SPDX-License-Identifier: Apache-2.0 */
/* Templates from OCI images (see oci.h): src/image/ reads and fetches on a worker, the layers go
 * into the store through wr_images_install, and the template is recorded on the loop. */
#include "oci.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../image/image.h"
#include "../runtime/creds.h"
#include "../runtime/layer.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "core_int.h"
#include "images.h"
#include "space.h"

struct oci_work {
    uv_work_t w;
    struct wr_manager *m;
    char *name, *team, *archive, *image, *username, *password;
    bool replace, insecure, admin, shared;
    /* results of the worker */
    json_t *config;
    char (*digests)[72]; /* the installed layers, bottom first */
    uint64_t *bytes;
    size_t ninstalled, nlayers;
    struct wr_err err;
    int rc;
    wr_oci_cb cb;
    void *ctx;
};

static void oci_free(struct oci_work *o)
{
    free(o->name);
    free(o->team);
    free(o->archive);
    free(o->image);
    free(o->username);
    if (o->password != NULL)
        explicit_bzero(o->password, strlen(o->password));
    free(o->password);
    json_decref(o->config);
    free(o->digests);
    free(o->bytes);
    free(o);
}

static int make_dir(const char *path, mode_t mode, struct wr_err *err)
{
    if (mkdir(path, mode) < 0)
        return wr_err_sys(err, "mkdir `%s`", path);
    return 0;
}

/* What a registry or an archive brings is written for a tenant (runtime/creds.h): the blobs
 * fetched, and the layers unpacked (every entry gets its owner from the tar). */
static int unpack_as_tenant(const struct wr_oci_layer *l, const char *fs, struct wr_err *err)
{
    struct wr_creds_saved saved;
    int rc;

    if (wr_creds_tenant_begin(&saved, err) < 0)
        return -1;
    rc = wr_oci_unpack_layer(l, fs, err);
    wr_creds_tenant_end(&saved);
    return rc;
}

static int fetch_as_tenant(struct oci_work *o, const char *work, struct wr_oci_image *img)
{
    struct wr_registry_opts ro = {.username = o->username,
                                  .password = o->password,
                                  .insecure = o->insecure,
                                  .allow_private = o->admin};
    struct wr_creds_saved saved;
    int rc;

    if (wr_creds_tenant_begin(&saved, &o->err) < 0)
        return -1;
    if (o->archive != NULL)
        rc = wr_oci_archive_read(o->archive, work, img, &o->err);
    else
        rc = wr_registry_pull(o->image, &ro, work, img, &o->err);
    wr_creds_tenant_end(&saved);
    return rc;
}

/* Unpack every layer into its own directory under layers/.tmp, then install them all: a layer
 * that fails its checks leaves nothing installed. */
static int unpack_and_install(struct oci_work *o, const struct wr_oci_image *img)
{
    struct wr_images *im = o->m->cfg.images;
    char **tmps = xcalloc(img->nlayers, sizeof(char *));
    size_t made = 0, i;
    int rc = -1;

    for (i = 0; i < img->nlayers; i++) {
        _cleanup_free_ char *fs = NULL;
        tmps[i] = wr_images_tmp(im);
        made = i + 1;
        fs = xasprintf("%s/fs", tmps[i]);
        if (make_dir(tmps[i], 0700, &o->err) < 0 || make_dir(fs, 0755, &o->err) < 0 ||
            unpack_as_tenant(&img->layers[i], fs, &o->err) < 0) {
            wr_err_wrap(&o->err, "layer %zu of %zu", i + 1, img->nlayers);
            goto out;
        }
    }
    o->digests = xcalloc(img->nlayers, sizeof(*o->digests));
    o->bytes = xcalloc(img->nlayers, sizeof(*o->bytes));
    o->nlayers = img->nlayers;
    for (i = 0; i < img->nlayers; i++) {
        /* install moves or removes the directory, success or not */
        int r = wr_images_install(im, tmps[i], o->digests[i], &o->bytes[i], &o->err);
        free(tmps[i]);
        tmps[i] = NULL;
        if (r < 0)
            goto out;
        o->ninstalled++;
    }
    rc = 0;
out:
    for (i = 0; i < made; i++)
        if (tmps[i] != NULL) {
            (void)wr_layer_remove(tmps[i], NULL);
            free(tmps[i]);
        }
    free(tmps);
    return rc;
}

static void oci_run(uv_work_t *w)
{
    struct oci_work *o = w->data;
    _cleanup_free_ char *work = wr_images_tmp(o->m->cfg.images);
    struct wr_oci_image img = {0};

    o->rc = -1;
    if (make_dir(work, 0700, &o->err) < 0 || fetch_as_tenant(o, work, &img) < 0)
        goto out;
    if (o->archive != NULL) /* extracted: the tarball is not needed any more */
        (void)unlink(o->archive);
    if (unpack_and_install(o, &img) < 0)
        goto out;
    o->config = json_incref(img.config);
    o->rc = 0;
out:
    wr_oci_image_fini(&img);
    if (o->archive != NULL)
        (void)unlink(o->archive);
    (void)wr_layer_remove(work, NULL);
    /* Names from an archive or a registry may be any bytes: keep the log and the JSON clean. */
    for (char *p = o->err.msg; o->rc < 0 && *p; p++)
        if ((unsigned char)*p >= 0x7f || (unsigned char)*p < 0x20)
            *p = '?';
}

/* The layers as an image lists them: bottom first, an empty layer left out, one that comes
 * again higher up kept there only (wr_images_stack_push). */
static json_t *layer_list(const struct oci_work *o)
{
    json_t *l = json_array();

    for (size_t i = 0; i < o->nlayers; i++)
        wr_images_stack_push(l, o->digests[i]);
    return l;
}

/* Rows for the layers installed (an empty one installed nothing). */
static int put_layers(const struct oci_work *o, struct wr_err *err)
{
    for (size_t i = 0; i < o->ninstalled; i++)
        if (o->digests[i][0] != '\0' &&
            wr_store_layer_put(o->m->cfg.store, o->digests[i], o->bytes[i], err) < 0)
            return -1;
    return 0;
}

/* The claim of the template's name (wr_images_claim); *replaces as there. */
static int claim(struct wr_manager *m, const struct wr_oci_request *req, char **replaces,
                 struct wr_err *err)
{
    struct wr_images_claim c = {
        .team = req->team, .name = req->name, .replace = req->replace, .shared = req->shared};
    return wr_images_claim(m->cfg.images, &c, replaces, err);
}

static int record(struct oci_work *o, struct wr_image_rec *rec, struct wr_err *err)
{
    struct wr_images *im = o->m->cfg.images;
    _cleanup_free_ char *replaces = NULL;
    json_t *layers;
    int rc;

    layers = layer_list(o);
    /* The store may have collected a layer it had already while this one was being made. */
    {
        char **paths = NULL;
        size_t n = 0;
        if (wr_images_layer_paths(im, layers, &paths, &n, err) < 0) {
            json_decref(layers);
            return wr_err_set(err, WR_ECONFLICT, 0, "a layer was collected meanwhile: try again");
        }
        for (size_t i = 0; i < n; i++)
            free(paths[i]);
        free(paths);
    }
    if (put_layers(o, err) < 0) {
        json_decref(layers);
        return -1;
    }
    rec->id = wr_images_new_id("tpl-");
    rec->kind = xstrdup("template");
    rec->name = xstrdup(o->name);
    rec->team = xstrdup(o->team);
    rec->source = xstrdup(o->image ? o->image : "import");
    rec->shared = o->shared;
    rec->config_json = json_dumps(o->config, JSON_COMPACT | JSON_SORT_KEYS);
    /* Again: the name may have been taken (or shared) meanwhile. The old record goes just
     * before the new one is made; its layers are collected after, so that those both share
     * stay. */
    {
        struct wr_oci_request req = {
            .team = o->team, .name = o->name, .replace = o->replace, .shared = o->shared};
        if (claim(o->m, &req, &replaces, err) < 0 || wr_images_replace(im, replaces, err) < 0) {
            json_decref(layers);
            return -1;
        }
    }
    rc = wr_images_record(im, rec, layers, NULL, 0, err);
    json_decref(layers);
    if (replaces != NULL)
        wr_images_gc(im); /* the old template's layers, if nothing else has them */
    return rc;
}

static void oci_done(uv_work_t *w, int status)
{
    struct oci_work *o = w->data;
    struct wr_manager *m = o->m;
    struct wr_image_rec rec = {0};
    struct wr_err err;

    if (m->closing) {
        wr_err_set(&err, WR_ECONFLICT, 0, "the daemon is shutting down");
        o->cb(o->ctx, NULL, &err);
    } else if (o->rc < 0) {
        log_info("template %s: %s", o->name, o->err.msg);
        o->cb(o->ctx, NULL, &o->err);
    } else if (record(o, &rec, &err) < 0) {
        log_info("template %s: %s", o->name, err.msg);
        o->cb(o->ctx, NULL, &err);
    } else {
        log_info("template %s: %zu layers from %s", o->name, o->nlayers,
                 o->image ? o->image : "an archive");
        o->cb(o->ctx, &rec, NULL);
    }
    /* Layers installed for a template that was not recorded: nothing refers to them. */
    if (!m->closing && o->ninstalled > 0 && rec.layers_json == NULL) {
        struct wr_err e2;
        (void)put_layers(o, &e2);
        wr_images_gc(m->cfg.images);
    }
    wr_image_rec_fini(&rec);
    oci_free(o);
    wr__work_done(m);
}

int wr_oci_check(struct wr_manager *m, const struct wr_oci_request *req, struct wr_err *err)
{
    _cleanup_free_ char *replaces = NULL;
    return claim(m, req, &replaces, err);
}

void wr_oci_start(struct wr_manager *m, const struct wr_oci_request *req, wr_oci_cb cb, void *ctx)
{
    struct oci_work *o;
    struct wr_err err;

    if (wr_oci_check(m, req, &err) < 0 ||
        wr_space_admit(m->cfg.space, req->archive ? "import" : "pull", 0, &err) < 0) {
        if (req->archive != NULL)
            (void)unlink(req->archive);
        cb(ctx, NULL, &err);
        return;
    }
    o = xcalloc(1, sizeof(*o));
    o->m = m;
    o->name = xstrdup(req->name);
    o->team = xstrdup(req->team);
    o->replace = req->replace;
    o->shared = req->shared;
    o->admin = req->admin;
    o->archive = req->archive ? xstrdup(req->archive) : NULL;
    o->image = req->image ? xstrdup(req->image) : NULL;
    o->username = req->username ? xstrdup(req->username) : NULL;
    o->password = req->password ? xstrdup(req->password) : NULL;
    o->insecure = req->insecure;
    o->cb = cb;
    o->ctx = ctx;
    o->w.data = o;
    wr__queue_work(m, &o->w, oci_run, oci_done);
}
