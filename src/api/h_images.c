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

/* Live sandboxes of team (NULL: of every team) started from `name`. */
static json_int_t users_of(struct wr_api *api, const char *team, const char *name)
{
    return (json_int_t)wr_images_users(api->images, team, name);
}

/* Whose sandboxes count in a template's in_use: a team's template's own team's; a shared
 * one's, the caller's team's (an admin's: every team's). */
static const char *counted_team(const struct wr_caller *who, const char *owner)
{
    return owner != NULL ? owner : who->admin ? NULL : who->team;
}

json_t *api_template_json(struct wr_api *api, const struct wr_caller *who,
                          const struct wr_image_rec *r)
{
    char created[32];
    json_t *j;

    api_time(r->created_ms, created);
    j = json_pack("{s:s,s:s,s:b,s:I,s:I,s:s,s:I}", "name", r->name, "kind", "template", "shared",
                  r->shared, "size_bytes", (json_int_t)r->size_bytes, "layers",
                  n_layers(r->layers_json), "created_at", created, "in_use",
                  users_of(api, counted_team(who, r->shared ? NULL : r->team), r->name));
    /* Names are per team: an admin, who sees every team's, is told whose. */
    if (who->admin)
        json_object_set_new(j, "team", json_string(r->team));
    return j;
}

void api_forbid_shared(struct wr_http_req *req)
{
    wr_http_respond_error(req, 403, "forbidden",
                          "only an admin key makes a shared template (one every team uses)");
}

static json_t *dir_template_json(struct wr_api *api, const struct wr_caller *who, const char *name)
{
    return json_pack("{s:s,s:s,s:b,s:n,s:I,s:n,s:I}", "name", name, "kind", "dir", "shared", 1,
                     "size_bytes", "layers", (json_int_t)1, "created_at", "in_use",
                     users_of(api, counted_team(who, NULL), name));
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

/* For a team: its own templates, the directory templates and the shared ones, each name once
 * (the first of them: what a create of that name runs). For an admin: every team's, and the
 * directory templates. */
static void list_templates(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who)
{
    struct wr_image_rec *recs = NULL;
    char **dirs = NULL;
    size_t n = 0, nd = 0;
    struct wr_err err;
    json_t *arr, *seen;

    if (wr_images_list(api->images, who->admin ? NULL : who->team, "template", NULL, &recs, &n,
                       &err) < 0) {
        api_error(req, &err);
        return;
    }
    arr = json_array();
    seen = json_object();
    for (size_t i = 0; i < n; i++)
        if (who->admin || strcmp(recs[i].team, who->team) == 0) {
            json_array_append_new(arr, api_template_json(api, who, &recs[i]));
            if (!who->admin)
                json_object_set_new(seen, recs[i].name, json_true());
        }
    (void)wr_images_dir_names(api->images, &dirs, &nd);
    for (size_t i = 0; i < nd; i++) {
        if (json_object_get(seen, dirs[i]) == NULL) {
            json_array_append_new(arr, dir_template_json(api, who, dirs[i]));
            json_object_set_new(seen, dirs[i], json_true());
        }
        free(dirs[i]);
    }
    free(dirs);
    for (size_t i = 0; i < n; i++) {
        if (!who->admin && json_object_get(seen, recs[i].name) == NULL)
            json_array_append_new(arr, api_template_json(api, who, &recs[i]));
        wr_image_rec_fini(&recs[i]);
    }
    free(recs);
    json_decref(seen);
    wr_http_respond_json(req, 200, json_pack("{s:o}", "templates", arr));
}

/* GET and DELETE /v1/templates/{name}: the template a create of that name would run for the
 * caller's team; an admin's `?team=` names another team, and without it an admin also reaches
 * the only team's template of that name. */
static void one_template(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                         const char *name)
{
    const char *method = wr_http_req_method(req);
    const char *other = who->admin ? wr_http_req_query(req, "team") : NULL;
    const char *team = other != NULL && other[0] != '\0' ? other : who->team;
    bool any = who->admin && team == who->team;
    struct wr_image_rec rec;
    struct wr_err err;
    bool dir;

    if (strcmp(method, "GET") == 0) {
        /* A template only: a snapshot's name does not answer here. */
        if (wr_images_template(api->images, team, name, any, &rec, &dir, &err) < 0) {
            api_error(req, &err);
        } else if (dir) {
            wr_http_respond_json(req, 200, dir_template_json(api, who, name));
        } else {
            wr_http_respond_json(req, 200, api_template_json(api, who, &rec));
            wr_image_rec_fini(&rec);
        }
    } else if (strcmp(method, "DELETE") == 0) {
        deleted(req, &err,
                wr_images_delete_template(api->images, team, name, who->admin, any, &err));
    } else {
        wr_http_respond_error(req, 405, "method_not_allowed", "use GET or DELETE");
    }
}

void api_templates(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                   const struct api_route *rt)
{
    const char *method = wr_http_req_method(req);
    const char *team = who->admin ? NULL : who->team;
    struct wr_err err;

    if (rt->nseg == 1) {
        if (strcmp(method, "GET") != 0)
            wr_http_respond_error(req, 405, "method_not_allowed", "use GET");
        else
            list_templates(api, req, who);
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
    one_template(api, req, who, rt->seg[1]);
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
        if (wr_images_list(api->images, team, "snapshot", wr_http_req_query(req, "sandbox_id"),
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
        if (wr_images_get(api->images, team, rt->seg[1], &rec, &err) < 0) {
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
