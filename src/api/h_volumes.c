/* SPDX-License-Identifier: Apache-2.0 */
/* /v1/volumes: a team's named volumes (create, list, get with disk use, delete). Every caller,
 * admin included, sees the volumes of its own team: names are unique per team only. */
#include <string.h>

#include "../util/xalloc.h"
#include "api_int.h"

static json_t *volume_json(const struct wr_volume_rec *v)
{
    char created[32];

    api_time(v->created_ms, created);
    return json_pack("{s:s,s:s}", "name", v->name, "created_at", created);
}

static void create_body(struct wr_http_req *req, const char *body, size_t len)
{
    static const char *const allowed[] = {"name", NULL};
    struct body_ctx *bc = take_body_ctx(req);
    struct wr_api *api = bc->api;
    char team[128];
    struct wr_volume_rec rec;
    struct wr_err err;
    const char *name;
    json_t *j, *nj;

    snprintf(team, sizeof(team), "%s", bc->team);
    free(bc);
    j = api_parse_object(req, body, len);
    if (j == NULL)
        return;
    nj = json_object_get(j, "name");
    name = json_string_value(nj);
    if (api_only_keys(req, j, allowed) < 0)
        goto out;
    if (name == NULL) {
        wr_http_respond_error(req, 400, "invalid", "`name` must be a string");
        goto out;
    }
    if (wr_manager_volume_create(api->mgr, team, name, &rec, &err) < 0) {
        api_error(req, &err);
        goto out;
    }
    wr_http_respond_json(req, 201, volume_json(&rec));
    wr_volume_rec_fini(&rec);
out:
    json_decref(j);
}

static void got(void *ctx, const struct wr_volume_rec *rec, uint64_t bytes,
                const struct wr_err *err)
{
    struct wr_http_req *req = api_pending_end(ctx);
    json_t *j;

    if (req == NULL)
        return;
    if (err != NULL) {
        api_error(req, err);
        return;
    }
    j = volume_json(rec);
    json_object_set_new(j, "disk_bytes", json_integer((json_int_t)bytes));
    wr_http_respond_json(req, 200, j);
}

static void list(struct wr_api *api, struct wr_http_req *req, const char *team)
{
    struct wr_volume_rec *recs = NULL;
    struct wr_err err;
    size_t n = 0;
    json_t *arr;

    if (wr_manager_volume_list(api->mgr, team, &recs, &n, &err) < 0) {
        api_error(req, &err);
        return;
    }
    arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, volume_json(&recs[i]));
        wr_volume_rec_fini(&recs[i]);
    }
    free(recs);
    wr_http_respond_json(req, 200, json_pack("{s:o}", "volumes", arr));
}

void api_volumes(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                 const struct api_route *rt)
{
    const char *method = wr_http_req_method(req);

    if (rt->nseg == 1) {
        if (strcmp(method, "POST") == 0) {
            read_body_with(api, req, who->team, NULL, 4096, create_body);
        } else if (strcmp(method, "GET") == 0) {
            list(api, req, who->team);
        } else {
            wr_http_respond_error(req, 405, "method_not_allowed", "use GET or POST");
        }
        return;
    }
    if (rt->nseg == 2) {
        if (strcmp(method, "GET") == 0)
            wr_manager_volume_get(api->mgr, who->team, rt->seg[1], got, api_pending_new(req));
        else if (strcmp(method, "DELETE") == 0)
            wr_manager_volume_delete(api->mgr, who->team, rt->seg[1], api_pending_deleted,
                                     api_pending_new(req));
        else
            wr_http_respond_error(req, 405, "method_not_allowed", "use GET or DELETE");
        return;
    }
    wr_http_respond_error(req, 404, "not_found", "no such endpoint: %s %s", method,
                          wr_http_req_path(req));
}
