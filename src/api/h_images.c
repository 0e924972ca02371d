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

/* A template config's "runtime" (its sandboxes' backend when a create names none), or null. */
static json_t *config_runtime(json_t *config)
{
    json_t *v = json_object_get(config, "runtime");
    return json_is_string(v) ? json_incref(v) : json_null();
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
    {
        json_t *config = json_loads(r->config_json ? r->config_json : "{}", 0, NULL);
        json_object_set_new(j, "runtime", config_runtime(config));
        json_decref(config);
    }
    return j;
}

void api_forbid_shared(struct wr_http_req *req)
{
    api_fail(req, WR_EFORBIDDEN, "only an admin key makes a shared template (one every team uses)");
}

static json_t *dir_template_json(struct wr_api *api, const struct wr_caller *who, const char *name)
{
    struct wr_image img = {0};
    struct wr_err err;
    json_t *j = json_pack("{s:s,s:s,s:b,s:n,s:I,s:n,s:I}", "name", name, "kind", "dir", "shared", 1,
                          "size_bytes", "layers", (json_int_t)1, "created_at", "in_use",
                          users_of(api, counted_team(who, NULL), name));

    /* Its config.json, read again (a directory template is changed on the host). */
    json_object_set_new(j, "runtime",
                        wr_images_resolve(api->images, who->team, name, &img, &err) == 0
                            ? config_runtime(img.config)
                            : json_null());
    wr_image_fini(&img);
    return j;
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

/* GET and DELETE /v1/templates/{name} act on the template a create of that name would run for
 * the caller's team (returned); an admin's `?team=` names another team, and without it an admin
 * also reaches the only team's template of that name (*any). */
static const char *template_team(const struct api_call *c, bool *any)
{
    const char *other = c->who.admin ? wr_http_req_query(c->req, "team") : NULL;
    const char *team = other != NULL && other[0] != '\0' ? other : c->who.team;

    *any = c->who.admin && team == c->who.team;
    return team;
}

void api_template_get(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    const char *name = c->seg[1];
    struct wr_image_rec rec;
    struct wr_err err;
    bool any, dir;
    const char *team = template_team(c, &any);

    /* A template only: a snapshot's name does not answer here. */
    if (wr_images_template(c->api->images, team, name, any, &rec, &dir, &err) < 0) {
        api_error(req, &err);
    } else if (dir) {
        wr_http_respond_json(req, 200, dir_template_json(c->api, &c->who, name));
    } else {
        wr_http_respond_json(req, 200, api_template_json(c->api, &c->who, &rec));
        wr_image_rec_fini(&rec);
    }
}

void api_template_delete(struct api_call *c)
{
    struct wr_err err;
    bool any;
    const char *team = template_team(c, &any);

    deleted(c->req, &err,
            wr_images_delete_template(c->api->images, team, c->seg[1], c->who.admin, any, &err));
}

void api_templates_list(struct api_call *c)
{
    list_templates(c->api, c->req, &c->who);
}

void api_template_prune(struct api_call *c)
{
    struct wr_err err;
    int64_t n = 0;

    /* The build cache: the caller's team's (an admin's: every team's). */
    if (wr_images_prune_cache(c->api->images, c->team, &n, &err) < 0)
        api_error(c->req, &err);
    else
        wr_http_respond_json(c->req, 200, json_pack("{s:I}", "pruned_steps", (json_int_t)n));
}

/* ---- /v1/snapshots ------------------------------------------------------------------------- */

void api_snapshots_list(struct api_call *c)
{
    struct wr_image_rec *recs = NULL;
    struct wr_err err;
    size_t n = 0;
    json_t *arr;

    if (wr_images_list(c->api->images, c->team, "snapshot", wr_http_req_query(c->req, "sandbox_id"),
                       &recs, &n, &err) < 0) {
        api_error(c->req, &err);
        return;
    }
    arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, snapshot_json(&recs[i], NULL));
        wr_image_rec_fini(&recs[i]);
    }
    free(recs);
    wr_http_respond_json(c->req, 200, json_pack("{s:o}", "snapshots", arr));
}

void api_snapshot_get(struct api_call *c)
{
    struct wr_image_rec rec;
    struct wr_err err;

    if (wr_images_get(c->api->images, c->team, c->seg[1], &rec, &err) < 0) {
        api_error(c->req, &err);
        return;
    }
    if (strcmp(rec.kind, "snapshot") != 0)
        api_fail(c->req, WR_ENOTFOUND, "snapshot `%s` not found", c->seg[1]);
    else
        wr_http_respond_json(c->req, 200, snapshot_json(&rec, NULL));
    wr_image_rec_fini(&rec);
}

void api_snapshot_delete(struct api_call *c)
{
    struct wr_err err;

    deleted(c->req, &err, wr_images_delete(c->api->images, c->team, "snapshot", c->seg[1], &err));
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

void api_sandbox_snapshot(struct api_call *c)
{
    static const char *const allowed[] = {"name", NULL};
    struct wr_http_req *req = c->req;
    const char *name = NULL;
    json_t *j, *v;

    j = api_parse_object(req, c->len ? c->body : "{}", c->len ? c->len : 2);
    if (j == NULL || api_only_keys(req, j, allowed) < 0)
        goto out;
    v = json_object_get(j, "name");
    if (v != NULL && !json_is_null(v)) {
        name = json_string_value(v);
        if (name == NULL) {
            api_fail(req, WR_EINVAL, "`name` must be a string");
            goto out;
        }
    }
    wr_manager_snapshot(c->api->mgr, c->team, c->seg[1], name, snapshot_done, api_pending_new(req));
out:
    json_decref(j);
}

static void fork_done(void *ctx, struct wr_sandbox_rec *recs, size_t n, const struct wr_err *errs,
                      size_t nerrs, const struct wr_snapshot_info *info, const struct wr_err *err)
{
    struct wr_http_req *req = api_pending_end(ctx);
    json_t *sbs, *es;

    if (req == NULL)
        return;
    if (err != NULL && err->kind == WR_ELIMIT) {
        api_limits_capacity(req, err, 5);
        return;
    }
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
                         json_pack("{s:f,s:s,s:b,s:o,s:o}", "freeze_ms", info->freeze_ms, "capture",
                                   info->capture, "processes_kept", info->processes_kept,
                                   "sandboxes", sbs, "errors", es));
}

void api_sandbox_fork(struct api_call *c)
{
    static const char *const allowed[] = {"count", "timeout", "metadata", NULL};
    struct wr_http_req *req = c->req;
    struct wr_fork_req fr = {.team = c->team, .id = c->seg[1], .count = 1};
    _cleanup_free_ char *meta = NULL;
    json_t *j, *v;

    j = api_parse_object(req, c->len ? c->body : "{}", c->len ? c->len : 2);
    if (j == NULL || api_only_keys(req, j, allowed) < 0)
        goto out;
    if ((v = json_object_get(j, "count")) != NULL && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > WR_FORK_MAX) {
            api_fail(req, WR_EINVAL, "`count` must be an integer from 1 to %d", WR_FORK_MAX);
            goto out;
        }
        fr.count = (uint32_t)json_integer_value(v);
    }
    if (api_opt_seconds(req, j, "timeout", &fr.timeout_s) < 0 ||
        api_string_map(req, j, "metadata", &meta) < 0)
        goto out;
    fr.metadata_json = meta;
    {
        /* A fork of N costs N creates, and needs room for N sandboxes of the parent's memory in
         * the team's quota. */
        struct wr_sandbox_rec parent = {0};
        struct wr_err err;
        uint64_t mem;
        if (wr_manager_get(c->api->mgr, c->team, c->seg[1], &parent, &err) < 0) {
            api_error(req, &err);
            goto out;
        }
        mem = parent.memory_bytes;
        wr_sandbox_rec_fini(&parent);
        if (api_limits_take(c->api, req, &c->who, WR_POL_CREATES, fr.count) < 0 ||
            api_limits_quota(c->api, req, &c->who, fr.count, mem) < 0)
            goto out;
    }
    wr_manager_fork(c->api->mgr, &fr, fork_done, api_pending_new(req));
out:
    json_decref(j);
}
