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

void api_volume_create(struct api_call *c)
{
    static const char *const allowed[] = {"name", NULL};
    struct wr_http_req *req = c->req;
    struct wr_volume_rec rec;
    struct wr_err err;
    const char *name;
    json_t *j, *nj;

    j = api_parse_object(req, c->body, c->len);
    if (j == NULL)
        return;
    nj = json_object_get(j, "name");
    name = json_string_value(nj);
    if (api_only_keys(req, j, allowed) < 0)
        goto out;
    if (name == NULL) {
        api_fail(req, WR_EINVAL, "`name` must be a string");
        goto out;
    }
    if (wr_manager_volume_create(c->api->mgr, c->who.team, name, &rec, &err) < 0) {
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

void api_volumes_list(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    struct wr_volume_rec *recs = NULL;
    struct wr_err err;
    size_t n = 0;
    json_t *arr;

    if (wr_manager_volume_list(c->api->mgr, c->who.team, &recs, &n, &err) < 0) {
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

void api_volume_get(struct api_call *c)
{
    wr_manager_volume_get(c->api->mgr, c->who.team, c->seg[1], got, api_pending_new(c->req));
}

void api_volume_delete(struct api_call *c)
{
    wr_manager_volume_delete(c->api->mgr, c->who.team, c->seg[1], api_pending_deleted,
                             api_pending_new(c->req));
}
