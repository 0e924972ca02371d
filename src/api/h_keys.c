/* SPDX-License-Identifier: Apache-2.0 */
/* /v1/keys: API keys. Admin keys (and the unix socket) make keys for any team; a team's own key
 * lists and revokes its team's keys. */
#include <string.h>

#include "../core/keys.h"
#include "../util/xalloc.h"
#include "api_int.h"

static json_t *key_json(const struct wr_key_info *k)
{
    char created[32];

    api_time(k->created_ms, created);
    return json_pack("{s:s,s:s,s:s,s:b,s:s}", "id", k->id, "team", k->team, "name",
                     k->name ? k->name : "", "admin", k->admin, "created_at", created);
}

static bool valid_team(const char *t)
{
    size_t n = strlen(t);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z') ||
              (t[i] >= '0' && t[i] <= '9') || t[i] == '-' || t[i] == '_' || t[i] == '.'))
            return false;
    return true;
}

void api_key_create(struct api_call *c)
{
    static const char *const allowed[] = {"team", "name", "admin", NULL};
    struct wr_http_req *req = c->req;
    struct wr_key_info ki;
    struct wr_err err;
    const char *team, *name;
    char *secret = NULL;
    json_t *j, *out;

    if (!c->who.admin) {
        api_fail(req, WR_EFORBIDDEN, "only an admin key can make keys");
        return;
    }
    j = api_parse_object(req, c->body, c->len);
    if (j == NULL)
        return;
    if (api_only_keys(req, j, allowed) < 0)
        goto out;
    team = json_string_value(json_object_get(j, "team"));
    name = json_string_value(json_object_get(j, "name"));
    if (team == NULL || !valid_team(team)) {
        api_fail(req, WR_EINVAL, "`team` must be 1-64 of [A-Za-z0-9._-]");
        goto out;
    }
    if (name != NULL && strlen(name) > 128) {
        api_fail(req, WR_EINVAL, "`name` is longer than 128 bytes");
        goto out;
    }
    if (json_object_get(j, "admin") != NULL && !json_is_boolean(json_object_get(j, "admin"))) {
        api_fail(req, WR_EINVAL, "`admin` must be a boolean");
        goto out;
    }
    if (wr_keys_create(c->api->mgr, team, name ? name : "",
                       json_is_true(json_object_get(j, "admin")), &secret, &ki, &err) < 0) {
        api_error(req, &err);
        goto out;
    }
    out = key_json(&ki);
    json_object_set_new(out, "key", json_string(secret));
    wr_http_respond_json(req, 201, out);
    wr_key_info_fini(&ki);
    free(secret);
out:
    json_decref(j);
}

void api_keys_list(struct api_call *c)
{
    struct wr_key_info *keys = NULL;
    struct wr_err err;
    size_t n = 0;
    json_t *arr;

    if (wr_keys_list(c->api->mgr, c->team, &keys, &n, &err) < 0) {
        api_error(c->req, &err);
        return;
    }
    arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, key_json(&keys[i]));
        wr_key_info_fini(&keys[i]);
    }
    free(keys);
    wr_http_respond_json(c->req, 200, json_pack("{s:o}", "keys", arr));
}

void api_key_delete(struct api_call *c)
{
    struct wr_err err;

    if (wr_keys_delete(c->api->mgr, c->team, c->seg[1], &err) < 0)
        api_error(c->req, &err);
    else
        wr_http_respond(c->req, 204, NULL, NULL, 0);
}
