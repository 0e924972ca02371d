/* SPDX-License-Identifier: Apache-2.0 */
/* Moves between nodes through the object store (core/move.h): the node routes' bodies and
 * answers. */
#include <stdlib.h>
#include <string.h>

#include "../core/move.h"
#include "../util/xalloc.h"
#include "api_int.h"

#define MOVE_MAX_BODY 4096

/* A request whose body is being read. */
struct move_req {
    struct wr_api *api;
    char team[128];
    bool admin;
    char id[128]; /* export: the sandbox */
};

static void move_closed(struct wr_http_req *req, void *data, bool aborted)
{
    free(data);
}

/* Take the request's context back from its data slot (the body is read). */
static struct move_req *move_take(struct wr_http_req *req)
{
    struct move_req *mr = wr_http_req_data(req);
    wr_http_req_set_data(req, NULL, NULL);
    return mr;
}

static void move_start(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                       const char *id, void (*body)(struct wr_http_req *, const char *, size_t))
{
    struct move_req *mr = xcalloc(1, sizeof(*mr));

    mr->api = api;
    snprintf(mr->team, sizeof(mr->team), "%s", who->team);
    mr->admin = who->admin;
    snprintf(mr->id, sizeof(mr->id), "%s", id ? id : "");
    wr_http_req_set_data(req, mr, move_closed);
    wr_http_req_read_body(req, MOVE_MAX_BODY, body);
}

/* ---- POST /node/sandboxes/{id}/export ---------------------------------------------------------
 */

static void exported(void *ctx, const struct wr_move_export_result *res, const struct wr_err *err)
{
    struct wr_http_req *req = api_pending_end(ctx);

    if (req == NULL)
        return;
    if (err != NULL)
        api_error(req, err);
    else
        wr_http_respond_json(req, 200,
                             json_pack("{s:s,s:I,s:I}", "manifest", res->manifest, "layers",
                                       (json_int_t)res->layers, "bytes", (json_int_t)res->bytes));
}

static void export_body(struct wr_http_req *req, const char *body, size_t len)
{
    static const char *const allowed[] = {NULL};
    struct move_req *mr = move_take(req);
    json_t *j = api_parse_object(req, len ? body : "{}", len ? len : 2);

    if (j != NULL && api_only_keys(req, j, allowed) == 0)
        wr_move_export(mr->api->mgr, mr->api->object_store, mr->admin ? NULL : mr->team, mr->id,
                       exported, api_pending_new(req));
    json_decref(j);
    free(mr);
}

void api_node_export(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                     const char *id)
{
    move_start(api, req, who, id, export_body);
}

/* ---- POST /node/sandboxes/import --------------------------------------------------------------
 */

static void imported(void *ctx, const struct wr_sandbox_rec *rec, const struct wr_err *err)
{
    struct wr_http_req *req = api_pending_end(ctx);
    json_t *j;

    if (req == NULL)
        return;
    if (err != NULL) {
        api_error(req, err);
        return;
    }
    j = api_sandbox_json(rec);
    json_object_set_new(j, "team", json_string(rec->team));
    wr_http_respond_json(req, 200, j);
}

static void import_body(struct wr_http_req *req, const char *body, size_t len)
{
    static const char *const allowed[] = {"manifest", NULL};
    struct move_req *mr = move_take(req);
    json_t *j = api_parse_object(req, body, len);
    const char *key;

    if (j == NULL || api_only_keys(req, j, allowed) < 0)
        goto out;
    key = json_string_value(json_object_get(j, "manifest"));
    if (key == NULL) {
        api_fail(req, WR_EINVAL, "`manifest` must be the key export answered");
        goto out;
    }
    wr_move_import(mr->api->mgr, mr->api->object_store, mr->admin ? NULL : mr->team, key, imported,
                   api_pending_new(req));
out:
    json_decref(j);
    free(mr);
}

void api_node_import(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who)
{
    move_start(api, req, who, NULL, import_body);
}

/* ---- POST /node/images/export and /node/images/import ------------------------------------------
 */

static void image_export_body(struct wr_http_req *req, const char *body, size_t len)
{
    static const char *const allowed[] = {"image", NULL};
    struct move_req *mr = move_take(req);
    json_t *j = api_parse_object(req, body, len);
    const char *ref;

    if (j == NULL || api_only_keys(req, j, allowed) < 0)
        goto out;
    ref = json_string_value(json_object_get(j, "image"));
    if (ref == NULL) {
        api_fail(req, WR_EINVAL, "`image` must name a template or a snapshot (its id or name)");
        goto out;
    }
    wr_move_image_export(mr->api->mgr, mr->api->object_store, mr->admin ? NULL : mr->team, ref,
                         exported, api_pending_new(req));
out:
    json_decref(j);
    free(mr);
}

void api_node_image_export(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who)
{
    move_start(api, req, who, NULL, image_export_body);
}

static void image_imported(void *ctx, const struct wr_image_rec *rec, const struct wr_err *err)
{
    struct wr_http_req *req = api_pending_end(ctx);

    if (req == NULL)
        return;
    if (err != NULL) {
        api_error(req, err);
        return;
    }
    wr_http_respond_json(req, 200,
                         json_pack("{s:s,s:s,s:s?,s:s,s:b,s:I}", "id", rec->id, "kind", rec->kind,
                                   "name", rec->name, "team", rec->team, "shared", rec->shared,
                                   "size_bytes", (json_int_t)rec->size_bytes));
}

static void image_import_body(struct wr_http_req *req, const char *body, size_t len)
{
    static const char *const allowed[] = {"manifest", NULL};
    struct move_req *mr = move_take(req);
    json_t *j = api_parse_object(req, body, len);
    const char *key;

    if (j == NULL || api_only_keys(req, j, allowed) < 0)
        goto out;
    key = json_string_value(json_object_get(j, "manifest"));
    if (key == NULL) {
        api_fail(req, WR_EINVAL, "`manifest` must be the key export answered");
        goto out;
    }
    wr_move_image_import(mr->api->mgr, mr->api->object_store, mr->admin ? NULL : mr->team, key,
                         image_imported, api_pending_new(req));
out:
    json_decref(j);
    free(mr);
}

void api_node_image_import(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who)
{
    move_start(api, req, who, NULL, image_import_body);
}
