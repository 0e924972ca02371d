/* SPDX-License-Identifier: Apache-2.0 */
/* Filesystem diff: which layers each side of a diff is made of (see manager.h); the walk is
 * src/runtime/ovldiff.c's, on a worker. */
#include <stdlib.h>
#include <string.h>

#include "../runtime/ovldiff.h"
#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "core_int.h"
#include "images.h"

struct diff_work {
    uv_work_t w;
    struct wr_manager *m;
    char *id, *kind, *name, *path;
    bool content;
    size_t limit;
    char **old, **new; /* layer directories, bottom first */
    size_t n_old, n_new;
    struct wr_ovl_diff diff;
    struct wr_ovl_content file;
    struct wr_err err;
    int rc;
    wr_manager_diff_cb cb;
    void *ctx;
};

static void strs_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void diff_free(struct diff_work *d)
{
    free(d->id);
    free(d->kind);
    free(d->name);
    free(d->path);
    strs_free(d->old, d->n_old);
    strs_free(d->new, d->n_new);
    wr_ovl_diff_fini(&d->diff);
    wr_ovl_content_fini(&d->file);
    free(d);
}

/* The layer directories of a sandbox's tree: its image's, then (with its files) its upper/. */
static int sandbox_layers(struct wr_manager *m, const char *team, const char *id, char ***dirs,
                          size_t *n, struct wr_err *err)
{
    struct wr_live_sb *sb = wr__lookup(m, team, id, err);
    struct wr_sandbox_rec rec;
    json_t *img;
    int r;

    if (sb == NULL)
        return -1;
    if (wr_store_sandbox_get(m->cfg.store, team, id, &rec, err) < 0)
        return -1;
    if (sb->state == LIVE_SB_CREATING) {
        wr_sandbox_rec_fini(&rec);
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` is being created", id);
    }
    if (wr__live_sb_ending(sb)) {
        wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` is %s: its files are gone", id,
                   wr_sb_state_name(rec.state));
        wr_sandbox_rec_fini(&rec);
        return -1;
    }
    img = json_loads(rec.image_json ? rec.image_json : "{}", 0, NULL);
    if (!json_is_array(json_object_get(img, "layers"))) {
        json_decref(img);
        wr_sandbox_rec_fini(&rec);
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` was made before images were recorded",
                          id);
    }
    r = wr_images_layer_paths(m->cfg.images, json_object_get(img, "layers"), dirs, n, err);
    json_decref(img);
    wr_sandbox_rec_fini(&rec);
    if (r < 0)
        return -1;
    {
        _cleanup_free_ char *home = wr_images_home(m->cfg.images, id);
        *dirs = xrealloc(*dirs, (*n + 1) * sizeof(char *));
        (*dirs)[(*n)++] = xasprintf("%s/upper", home);
    }
    return 0;
}

static int image_layers(struct wr_manager *m, const char *team, const char *ref, char **kind,
                        char ***dirs, size_t *n, struct wr_err *err)
{
    struct wr_image img;
    int r;

    if (wr_images_resolve(m->cfg.images, team, ref, &img, err) < 0)
        return -1;
    r = wr_images_layer_paths(m->cfg.images, img.layers, dirs, n, err);
    *kind = xstrdup(strcmp(img.kind, "snapshot") == 0 ? "snapshot" : "template");
    wr_image_fini(&img);
    return r;
}

static void diff_run(uv_work_t *w)
{
    struct diff_work *d = w->data;
    struct wr_ovl_stack old = {(const char *const *)d->old, d->n_old};
    struct wr_ovl_stack new = {(const char *const *)d->new, d->n_new};

    if (d->content)
        d->rc = wr_ovl_content(&old, &new, d->path, 0, &d->file, &d->err);
    else
        d->rc = wr_ovl_diff(&old, &new, d->path, d->limit, &d->diff, &d->err);
}

static struct wr_diff_entry entry(const struct wr_ovl_entry *e)
{
    return (struct wr_diff_entry){wr_ovl_type_name(e->type), e->size, (unsigned)e->mode,
                                  (uint32_t)e->uid, (uint32_t)e->gid};
}

static void diff_done(uv_work_t *w, int status)
{
    struct diff_work *d = w->data;
    struct wr_manager *m = d->m;
    struct wr_diff_result r = {.sandbox_id = d->id,
                               .against_kind = d->kind,
                               .against_name = d->name,
                               .content = d->content};
    struct wr_diff_change *ch = NULL;

    if (d->rc < 0) {
        wr_err_wrap(&d->err, "diff of sandbox `%s`", d->id);
        d->cb(d->ctx, NULL, &d->err);
    } else if (d->content) {
        const struct wr_ovl_content *f = &d->file;
        r.file = (struct wr_diff_change){
            .path = d->path,
            .change = wr_ovl_change_name(f->change),
            .now = entry(&f->now),
            .old = entry(&f->old),
            .has_old = f->change == WR_OVL_MODIFIED,
        };
        r.binary = f->binary;
        r.too_large = f->too_large;
        r.text = f->diff;
        d->cb(d->ctx, &r, NULL);
    } else {
        ch = xcalloc(d->diff.n ? d->diff.n : 1, sizeof(*ch));
        for (size_t i = 0; i < d->diff.n; i++) {
            const struct wr_ovl_change *c = &d->diff.changes[i];
            ch[i] = (struct wr_diff_change){
                .path = c->path,
                .change = wr_ovl_change_name(c->change),
                .from = c->from,
                .now = entry(&c->now),
                .old = entry(&c->old),
                .has_old = c->change == WR_OVL_MODIFIED || c->change == WR_OVL_RENAMED,
            };
        }
        r.changes = ch;
        r.n = d->diff.n;
        r.truncated = d->diff.truncated;
        d->cb(d->ctx, &r, NULL);
    }
    free(ch);
    diff_free(d);
    wr__work_done(m);
}

void wr_manager_diff(struct wr_manager *m, const struct wr_diff_req *req, wr_manager_diff_cb cb,
                     void *ctx)
{
    struct diff_work *d = xcalloc(1, sizeof(*d));
    struct wr_sandbox_rec rec;
    struct wr_err err;

    d->m = m;
    d->cb = cb;
    d->ctx = ctx;
    d->id = xstrdup(req->id);
    d->content = req->content;
    d->limit = req->limit;
    if (req->path != NULL && (d->path = wr_ovl_path_clean(req->path, &err)) == NULL)
        goto fail;
    if (d->content && d->path == NULL) {
        wr_err_set(&err, WR_EINVAL, 0, "content needs a path");
        goto fail;
    }
    if (sandbox_layers(m, req->team, req->id, &d->new, &d->n_new, &err) < 0)
        goto fail;
    if (req->against == NULL) {
        /* Against its own image: the image's layers, named as the sandbox record names it. */
        struct wr_image img;
        struct wr_err ignored;
        if (wr_store_sandbox_get(m->cfg.store, req->team, req->id, &rec, &err) < 0)
            goto fail;
        d->name = xstrdup(rec.template_name);
        wr_sandbox_rec_fini(&rec);
        d->kind = xstrdup("template");
        if (wr_images_resolve(m->cfg.images, req->team, d->name, &img, &ignored) == 0) {
            if (strcmp(img.kind, "snapshot") == 0) {
                free(d->kind);
                d->kind = xstrdup("snapshot");
            }
            wr_image_fini(&img);
        }
        d->n_old = d->n_new - 1;
        d->old = xcalloc(d->n_old ? d->n_old : 1, sizeof(char *));
        for (size_t i = 0; i < d->n_old; i++)
            d->old[i] = xstrdup(d->new[i]);
    } else {
        d->name = xstrdup(req->against);
        if (strcmp(req->against, req->id) == 0) {
            wr_err_set(&err, WR_EINVAL, 0, "a sandbox is not diffed against itself");
            goto fail;
        }
        if (wr_store_sandbox_get(m->cfg.store, req->team, req->against, &rec, &err) == 0) {
            wr_sandbox_rec_fini(&rec);
            d->kind = xstrdup("sandbox");
            if (sandbox_layers(m, req->team, req->against, &d->old, &d->n_old, &err) < 0)
                goto fail;
        } else if (err.kind != WR_ENOTFOUND) {
            goto fail;
        } else if (image_layers(m, req->team, req->against, &d->kind, &d->old, &d->n_old, &err) <
                   0) {
            if (err.kind == WR_ENOTFOUND || err.kind == WR_EINVAL)
                wr_err_set(&err, WR_ENOTFOUND, 0, "no snapshot, sandbox or template `%s`",
                           req->against);
            goto fail;
        }
        if (d->n_old == 0 || strcmp(d->old[0], d->new[0]) != 0) {
            wr_err_set(&err, WR_ECONFLICT, 0,
                       "`%s` and sandbox `%s` share no layer: not of the same lineage",
                       req->against, req->id);
            goto fail;
        }
    }
    d->w.data = d;
    wr__queue_work(m, &d->w, diff_run, diff_done);
    return;
fail:
    cb(ctx, NULL, &err);
    diff_free(d);
}
