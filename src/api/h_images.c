/* SPDX-License-Identifier: Apache-2.0 */
/* Templates, snapshots and forks: /v1/templates, /v1/snapshots,
 * POST /v1/sandboxes/{id}/snapshots and POST /v1/sandboxes/{id}/fork. */
#include <stdlib.h>
#include <string.h>

#include "../core/images.h"
#include "../core/manager.h"
#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "api_int.h"
#include "http.h"

static json_int_t n_layers(const char *layers_json)
{
    json_t *l = json_loads(layers_json ? layers_json : "[]", 0, NULL);
    json_int_t n = (json_int_t)json_array_size(l);
    json_decref(l);
    return n;
}

static json_int_t users_of(struct wr_api *api, const char *name)
{
    int64_t n = 0;
    (void)wr_store_image_users(api->store, name, &n, NULL);
    return (json_int_t)n;
}

json_t *api_template_json(struct wr_api *api, const struct wr_image_rec *r)
{
    char created[32];

    api_time(r->created_ms, created);
    return json_pack("{s:s,s:s,s:I,s:I,s:s,s:I}", "name", r->name, "kind", "template", "size_bytes",
                     (json_int_t)r->size_bytes, "layers", n_layers(r->layers_json), "created_at",
                     created, "in_use", users_of(api, r->name));
}

static json_t *dir_template_json(struct wr_api *api, const char *name)
{
    return json_pack("{s:s,s:s,s:n,s:I,s:n,s:I}", "name", name, "kind", "dir", "size_bytes",
                     "layers", (json_int_t)1, "created_at", "in_use", users_of(api, name));
}

static json_t *snapshot_json(const struct wr_image_rec *r, const struct wr_snapshot_info *info)
{
    char created[32];
    json_t *j;

    api_time(r->created_ms ? r->created_ms : 0, created);
    j = json_pack("{s:s,s:s?,s:s?,s:I,s:I,s:s}", "id", r->id, "name", r->name, "sandbox_id",
                  r->source, "size_bytes", (json_int_t)r->size_bytes, "layers",
                  n_layers(r->layers_json), "created_at", created);
    if (info != NULL) {
        json_object_set_new(j, "freeze_ms", json_real(info->freeze_ms));
        json_object_set_new(j, "capture_ms", json_real(info->capture_ms));
        json_object_set_new(j, "capture", json_string(info->capture));
    }
    return j;
}

static void deleted(struct wr_http_req *req, struct wr_err *err, int rc)
{
    if (rc < 0)
        api_error(req, err);
    else
        wr_http_respond(req, 204, NULL, NULL, 0);
}

/* ---- /v1/templates ------------------------------------------------------------------------- */

static void list_templates(struct wr_api *api, struct wr_http_req *req)
{
    struct wr_image_rec *recs = NULL;
    char **dirs = NULL;
    size_t n = 0, nd = 0;
    struct wr_err err;
    json_t *arr;

    if (wr_store_image_list(api->store, NULL, "template", NULL, &recs, &n, &err) < 0) {
        api_error(req, &err);
        return;
    }
    arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, api_template_json(api, &recs[i]));
    (void)wr_images_dir_names(api->images, &dirs, &nd);
    for (size_t i = 0; i < nd; i++) {
        bool shadowed = false;
        for (size_t k = 0; k < n && !shadowed; k++)
            shadowed = strcmp(recs[k].name, dirs[i]) == 0;
        if (!shadowed)
            json_array_append_new(arr, dir_template_json(api, dirs[i]));
        free(dirs[i]);
    }
    free(dirs);
    for (size_t i = 0; i < n; i++)
        wr_image_rec_fini(&recs[i]);
    free(recs);
    wr_http_respond_json(req, 200, json_pack("{s:o}", "templates", arr));
}

static bool is_dir_template(struct wr_api *api, const char *name)
{
    char **dirs = NULL;
    size_t n = 0;
    bool found = false;

    (void)wr_images_dir_names(api->images, &dirs, &n);
    for (size_t i = 0; i < n; i++) {
        found = found || strcmp(dirs[i], name) == 0;
        free(dirs[i]);
    }
    free(dirs);
    return found;
}

void api_templates(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                   const struct api_route *rt)
{
    const char *method = wr_http_req_method(req);
    const char *team = who->admin ? NULL : who->team;
    struct wr_image_rec rec;
    struct wr_err err;

    if (rt->nseg == 1) {
        if (strcmp(method, "GET") != 0)
            wr_http_respond_error(req, 405, "method_not_allowed", "use GET");
        else
            list_templates(api, req);
        return;
    }
    if (rt->nseg == 2 && strcmp(rt->seg[1], "build") == 0 && strcmp(method, "POST") == 0) {
        api_build(api, req, who);
        return;
    }
    if (rt->nseg == 2 && strcmp(rt->seg[1], "prune") == 0 && strcmp(method, "POST") == 0) {
        /* The build cache: the caller's team's (an admin's: every team's). */
        int64_t n = 0;
        if (wr_images_prune_cache(api->images, team, &n, &err) < 0)
            api_error(req, &err);
        else
            wr_http_respond_json(req, 200, json_pack("{s:I}", "pruned_steps", (json_int_t)n));
        return;
    }
    if (rt->nseg == 2 && strcmp(method, "POST") == 0 &&
        (strcmp(rt->seg[1], "import") == 0 || strcmp(rt->seg[1], "pull") == 0)) {
        api_oci(api, req, who, rt);
        return;
    }
    if (rt->nseg != 2) {
        wr_http_respond_error(req, 404, "not_found", "no such endpoint: %s %s", method,
                              wr_http_req_path(req));
        return;
    }
    if (strcmp(method, "GET") == 0) {
        /* A template only: a snapshot's name does not answer here. */
        if (wr_store_image_get(api->store, team, rt->seg[1], &rec, NULL) == 0) {
            bool tpl = strcmp(rec.kind, "template") == 0;
            if (tpl)
                wr_http_respond_json(req, 200, api_template_json(api, &rec));
            wr_image_rec_fini(&rec);
            if (tpl)
                return;
        }
        if (is_dir_template(api, rt->seg[1]))
            wr_http_respond_json(req, 200, dir_template_json(api, rt->seg[1]));
        else
            wr_http_respond_error(req, 404, "not_found", "template `%s` does not exist",
                                  rt->seg[1]);
    } else if (strcmp(method, "DELETE") == 0) {
        int rc = wr_images_delete(api->images, team, "template", rt->seg[1], &err);
        if (rc < 0 && err.kind == WR_ENOTFOUND && is_dir_template(api, rt->seg[1]))
            wr_err_set(&err, WR_ECONFLICT, 0,
                       "template `%s` is a directory in the host's templates directory; remove it "
                       "there",
                       rt->seg[1]);
        deleted(req, &err, rc);
    } else {
        wr_http_respond_error(req, 405, "method_not_allowed", "use GET or DELETE");
    }
}

/* ---- /v1/snapshots ------------------------------------------------------------------------- */

void api_snapshots(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                   const struct api_route *rt)
{
    const char *method = wr_http_req_method(req);
    const char *team = who->admin ? NULL : who->team;
    struct wr_image_rec rec, *recs = NULL;
    struct wr_err err;
    size_t n = 0;

    if (rt->nseg == 1) {
        json_t *arr;
        if (strcmp(method, "GET") != 0) {
            wr_http_respond_error(req, 405, "method_not_allowed",
                                  "use GET (snapshots are made with POST "
                                  "/v1/sandboxes/{id}/snapshots)");
            return;
        }
        if (wr_store_image_list(api->store, team, "snapshot", wr_http_req_query(req, "sandbox_id"),
                                &recs, &n, &err) < 0) {
            api_error(req, &err);
            return;
        }
        arr = json_array();
        for (size_t i = 0; i < n; i++) {
            json_array_append_new(arr, snapshot_json(&recs[i], NULL));
            wr_image_rec_fini(&recs[i]);
        }
        free(recs);
        wr_http_respond_json(req, 200, json_pack("{s:o}", "snapshots", arr));
        return;
    }
    if (rt->nseg != 2) {
        wr_http_respond_error(req, 404, "not_found", "no such endpoint: %s %s", method,
                              wr_http_req_path(req));
        return;
    }
    if (strcmp(method, "GET") == 0) {
        if (wr_store_image_get(api->store, team, rt->seg[1], &rec, &err) < 0) {
            api_error(req, &err);
            return;
        }
        if (strcmp(rec.kind, "snapshot") != 0)
            wr_http_respond_error(req, 404, "not_found", "snapshot `%s` not found", rt->seg[1]);
        else
            wr_http_respond_json(req, 200, snapshot_json(&rec, NULL));
        wr_image_rec_fini(&rec);
    } else if (strcmp(method, "DELETE") == 0) {
        deleted(req, &err, wr_images_delete(api->images, team, "snapshot", rt->seg[1], &err));
    } else {
        wr_http_respond_error(req, 405, "method_not_allowed", "use GET or DELETE");
    }
}

/* ---- POST /v1/sandboxes/{id}/snapshots and /fork ------------------------------------------- */

/* A snapshot or fork goes on if the client leaves (api_pending). */
static void snapshot_done(void *ctx, const struct wr_image_rec *snap,
                          const struct wr_snapshot_info *info, const struct wr_err *err)
{
    struct wr_http_req *req = api_pending_end(ctx);

    if (req == NULL)
        return;
    if (err != NULL)
        api_error(req, err);
    else
        wr_http_respond_json(req, 201, snapshot_json(snap, info));
}

void api_snapshot_body(struct wr_http_req *req, const char *body, size_t len)
{
    static const char *const allowed[] = {"name", NULL};
    struct body_ctx *bc = take_body_ctx(req);
    const char *name = NULL;
    json_t *j, *v;

    j = api_parse_object(req, len ? body : "{}", len ? len : 2);
    if (j == NULL || api_only_keys(req, j, allowed) < 0)
        goto out;
    v = json_object_get(j, "name");
    if (v != NULL && !json_is_null(v)) {
        name = json_string_value(v);
        if (name == NULL) {
            wr_http_respond_error(req, 400, "invalid", "`name` must be a string");
            goto out;
        }
    }
    wr_manager_snapshot(bc->api->mgr, bc->team[0] ? bc->team : NULL, bc->id, name, snapshot_done,
                        api_pending_new(req));
out:
    json_decref(j);
    free(bc);
}

static void fork_done(void *ctx, struct wr_sandbox_rec *recs, size_t n, const struct wr_err *errs,
                      size_t nerrs, const struct wr_snapshot_info *info, const struct wr_err *err)
{
    struct wr_http_req *req = api_pending_end(ctx);
    json_t *sbs, *es;

    if (req == NULL)
        return;
    if (err != NULL) {
        api_error(req, err);
        return;
    }
    sbs = json_array();
    es = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(sbs, api_sandbox_json(&recs[i]));
    for (size_t i = 0; i < nerrs; i++)
        json_array_append_new(es, json_pack("{s:s,s:o}", "code", wr_err_kind_name(errs[i].kind),
                                            "message", api_json_message(errs[i].msg)));
    wr_http_respond_json(req, 201,
                         json_pack("{s:f,s:s,s:o,s:o}", "freeze_ms", info->freeze_ms, "capture",
                                   info->capture, "sandboxes", sbs, "errors", es));
}

void api_fork_body(struct wr_http_req *req, const char *body, size_t len)
{
    static const char *const allowed[] = {"count", "timeout", "metadata", NULL};
    struct body_ctx *bc = take_body_ctx(req);
    struct wr_fork_req fr = {.team = bc->team[0] ? bc->team : NULL, .id = bc->id, .count = 1};
    _cleanup_free_ char *meta = NULL;
    json_t *j, *v;

    j = api_parse_object(req, len ? body : "{}", len ? len : 2);
    if (j == NULL || api_only_keys(req, j, allowed) < 0)
        goto out;
    if ((v = json_object_get(j, "count")) != NULL && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > WR_FORK_MAX) {
            wr_http_respond_error(req, 400, "invalid", "`count` must be an integer from 1 to %d",
                                  WR_FORK_MAX);
            goto out;
        }
        fr.count = (uint32_t)json_integer_value(v);
    }
    if (api_opt_seconds(req, j, "timeout", &fr.timeout_s) < 0 ||
        api_string_map(req, j, "metadata", &meta) < 0)
        goto out;
    fr.metadata_json = meta;
    wr_manager_fork(bc->api->mgr, &fr, fork_done, api_pending_new(req));
out:
    json_decref(j);
    free(bc);
}
