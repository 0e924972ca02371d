/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/sandboxes/{id}/diff: what a sandbox changed against its image, a snapshot or another
 * sandbox (src/core/diff.c), as JSON. */
#include <stdio.h>
#include <string.h>

#include "../core/manager.h"
#include "../util/parse.h"
#include "api_int.h"
#include "http.h"

#define DIFF_LIMIT_MAX 100000

static json_t *mode_json(unsigned mode)
{
    char s[8];
    snprintf(s, sizeof(s), "%04o", mode & 07777);
    return json_string(s);
}

static void put_entry(json_t *o, const struct wr_diff_entry *e, bool old)
{
    json_object_set_new(o, old ? "old_type" : "type", json_string(e->type));
    json_object_set_new(o, old ? "old_size" : "size", json_integer((json_int_t)e->size));
    json_object_set_new(o, old ? "old_mode" : "mode", mode_json(e->mode));
    json_object_set_new(o, old ? "old_uid" : "uid", json_integer((json_int_t)e->uid));
    json_object_set_new(o, old ? "old_gid" : "gid", json_integer((json_int_t)e->gid));
}

static json_t *change_json(const struct wr_diff_change *c)
{
    json_t *o = json_pack("{s:o,s:s}", "path", api_json_text(c->path), "change", c->change);

    put_entry(o, &c->now, false);
    if (c->has_old)
        put_entry(o, &c->old, true);
    if (c->from != NULL)
        json_object_set_new(o, "from", api_json_text(c->from));
    return o;
}

static void diff_done(void *ctx, const struct wr_diff_result *r, const struct wr_err *err)
{
    struct wr_http_req *req = api_pending_end(ctx);
    json_t *o;

    if (req == NULL)
        return;
    if (err != NULL) {
        api_error(req, err);
        return;
    }
    o = json_pack("{s:s,s:{s:s,s:o}}", "sandbox_id", r->sandbox_id, "against", "kind",
                  r->against_kind, "name", api_json_text(r->against_name));
    if (r->content) {
        json_object_update_new(o, change_json(&r->file));
        json_object_set_new(o, "binary", json_boolean(r->binary));
        json_object_set_new(o, "too_large", json_boolean(r->too_large));
        json_object_set_new(o, "diff", r->text ? api_json_text(r->text) : json_null());
    } else {
        json_t *arr = json_array();
        for (size_t i = 0; i < r->n; i++)
            json_array_append_new(arr, change_json(&r->changes[i]));
        json_object_set_new(o, "changes", arr);
        json_object_set_new(o, "truncated", json_boolean(r->truncated));
    }
    wr_http_respond_json(req, 200, o);
}

static bool flag(const char *v)
{
    return v != NULL && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0);
}

void api_sandbox_diff(struct api_call *c)
{
    const char *content = wr_http_req_query(c->req, "content");
    const char *limit = wr_http_req_query(c->req, "limit");
    struct wr_diff_req r = {
        .team = c->team,
        .id = c->seg[1],
        .against = wr_http_req_query(c->req, "against"),
        .path = wr_http_req_query(c->req, "path"),
        .content = flag(content),
    };
    struct wr_err err;

    if (content != NULL && !r.content && strcmp(content, "0") != 0 &&
        strcmp(content, "false") != 0) {
        api_fail(c->req, WR_EINVAL, "content is 1, true, 0 or false, not `%s`", content);
        return;
    }
    if (r.against != NULL && r.against[0] == '\0')
        r.against = NULL;
    if (r.path != NULL && r.path[0] == '\0')
        r.path = NULL;
    if (limit != NULL) {
        uint64_t v;
        if (wr_parse_uint(limit, DIFF_LIMIT_MAX, &v, &err) < 0 || v == 0) {
            api_fail(c->req, WR_EINVAL, "limit is 1 to %d, not `%s`", DIFF_LIMIT_MAX, limit);
            return;
        }
        r.limit = (size_t)v;
    }
    wr_manager_diff(c->api->mgr, &r, diff_done, api_pending_new(c->req));
}
