/* SPDX-License-Identifier: Apache-2.0 */
/* E2B's lifecycle events API and its webhooks (docs/e2b.md), served from the native events
 * (core/events.h) and webhooks (core/webhooks.h):
 *   GET /events/sandboxes[/{sandboxID}]?offset&limit&orderAsc&types  -> [SandboxEvent]
 *   POST /events/webhooks {name, url, enabled, events, signatureSecret} -> 201 webhook
 *   GET /events/webhooks, GET|PATCH|DELETE /events/webhooks/{id}
 * A webhook registered here gets E2B's body (SandboxEvent) and only the events E2B knows; it is
 * one of the team's webhooks (listed by /v1/webhooks too). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/events.h"
#include "../core/webhooks.h"
#include "../util/parse.h"
#include "../util/xalloc.h"
#include "api_int.h"
#include "e2b_int.h"

#define E2B_EVENTS_MAX_BODY (64u << 10)
#define E2B_TYPES_MAX       16

static json_t *hook_json(const struct wr_webhook_rec *w)
{
    char at[32];
    json_t *ev = json_loads(w->events ? w->events : "[]", 0, NULL);

    api_time(w->created_ms, at);
    return json_pack("{s:s,s:s,s:s,s:s,s:b,s:s,s:o}", "id", w->id, "teamID", w->team, "name",
                     w->name ? w->name : "", "createdAt", at, "enabled", w->enabled, "url", w->url,
                     "events", json_is_array(ev) ? ev : (json_decref(ev), json_array()));
}

static void events_list(struct wr_api *api, struct wr_http_req *req, const char *team,
                        const char *sandbox_id)
{
    const char *types[E2B_TYPES_MAX], *q;
    size_t nt = wr_http_req_query_all(req, "types", types, E2B_TYPES_MAX);
    uint64_t offset = 0, limit = 10;
    bool asc = false;
    struct wr_event_rec *v = NULL;
    size_t n = 0;
    struct wr_err err;
    json_t *tj, *arr;

    if ((q = wr_http_req_query(req, "offset")) != NULL &&
        wr_parse_uint(q, INT32_MAX, &offset, &err) < 0) {
        api_fail(req, WR_EINVAL, "offset must be an integer of at least 0");
        return;
    }
    if ((q = wr_http_req_query(req, "limit")) != NULL &&
        (wr_parse_uint(q, 100, &limit, &err) < 0 || limit == 0)) {
        api_fail(req, WR_EINVAL, "limit must be 1 to 100");
        return;
    }
    if ((q = wr_http_req_query(req, "orderAsc")) != NULL) {
        if (strcmp(q, "true") != 0 && strcmp(q, "false") != 0) {
            api_fail(req, WR_EINVAL, "orderAsc must be true or false");
            return;
        }
        asc = strcmp(q, "true") == 0;
    }
    if (nt > E2B_TYPES_MAX) {
        api_fail(req, WR_EINVAL, "at most %d types", E2B_TYPES_MAX);
        return;
    }
    tj = json_array();
    for (size_t i = 0; i < nt; i++) {
        /* A comma-separated value is several types, as a repeated one. */
        char *copy = xstrdup(types[i]), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save))
            json_array_append_new(tj, json_string(t));
        free(copy);
    }
    {
        size_t i;
        json_t *t;
        json_array_foreach(tj, i, t)
        {
            json_t *one = json_pack("[O]", t);
            int bad = strncmp(json_string_value(t), "sandbox.lifecycle.", 18) != 0 ||
                      wr_webhooks_events_check(one, &err) < 0;
            json_decref(one);
            if (bad) {
                api_fail(req, WR_EINVAL, "unknown event type `%s`", json_string_value(t));
                json_decref(tj);
                return;
            }
        }
    }
    if (wr_events_e2b_page(api->mgr, team, sandbox_id, tj, asc, (int64_t)offset, (size_t)limit, &v,
                           &n, &err) < 0) {
        json_decref(tj);
        api_error(req, &err);
        return;
    }
    json_decref(tj);
    arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, wr_events_e2b_json(api->mgr, &v[i]));
        wr_event_rec_fini(&v[i]);
    }
    free(v);
    wr_http_respond_json(req, 200, arr);
}

struct hook_op {
    struct wr_api *api;
    char team[128];
    bool any_team;
    char id[64]; /* "" for a create */
};

static void hook_op_closed(struct wr_http_req *req, void *data, bool aborted)
{
    (void)req;
    (void)aborted;
    free(data);
}

/* E2B's fields of body into r. Returns 0, or -1 answered. */
static int hook_fields(struct wr_http_req *req, json_t *j, struct wr_webhook_rec *r, bool create)
{
    static const char *const allowed[] = {"name", "url", "enabled", "events", "signatureSecret",
                                          NULL};
    json_t *v;
    struct wr_err err;

    if (api_only_keys(req, j, allowed) < 0)
        return -1;
    if ((v = json_object_get(j, "url")) != NULL || create) {
        if (!json_is_string(v)) {
            api_fail(req, WR_EINVAL, "url must be a string");
            return -1;
        }
        free(r->url);
        r->url = xstrdup(json_string_value(v));
    }
    if ((v = json_object_get(j, "name")) != NULL) {
        if (!json_is_string(v)) {
            api_fail(req, WR_EINVAL, "name must be a string");
            return -1;
        }
        free(r->name);
        r->name = xstrdup(json_string_value(v));
    }
    if ((v = json_object_get(j, "signatureSecret")) != NULL) {
        if (!json_is_string(v)) {
            api_fail(req, WR_EINVAL, "signatureSecret must be a string");
            return -1;
        }
        free(r->secret);
        r->secret = xstrdup(json_string_value(v));
    }
    if ((v = json_object_get(j, "enabled")) != NULL) {
        if (!json_is_boolean(v)) {
            api_fail(req, WR_EINVAL, "enabled must be a boolean");
            return -1;
        }
        r->enabled = json_is_true(v);
    }
    if ((v = json_object_get(j, "events")) != NULL) {
        if (wr_webhooks_events_check(v, &err) < 0) {
            api_error(req, &err);
            return -1;
        }
        free(r->events);
        r->events = json_dumps(v, JSON_COMPACT);
    }
    return 0;
}

static void hook_body(struct wr_http_req *req, const char *body, size_t len)
{
    struct hook_op *o = wr_http_req_data(req);
    const char *team = o->any_team ? NULL : o->team;
    struct wr_webhook_rec r = {.enabled = true};
    struct wr_err err;
    bool create = o->id[0] == '\0';
    json_t *j = api_parse_object(req, body, len);

    if (j == NULL)
        return;
    if (!create && wr_webhooks_get(o->api->mgr, team, o->id, &r, &err) < 0) {
        api_error(req, &err);
        goto out;
    }
    if (hook_fields(req, j, &r, create) < 0)
        goto out;
    if (create) {
        r.team = xstrdup(o->team);
        r.format = xstrdup("e2b");
        if (r.secret == NULL) {
            api_fail(req, WR_EINVAL, "signatureSecret is required");
            goto out;
        }
        if (wr_webhooks_create(o->api->mgr, &r, &err) < 0) {
            api_error(req, &err);
            goto out;
        }
        api_note_object(req, r.id);
        wr_http_respond_json(req, 201, hook_json(&r));
    } else if (wr_webhooks_update(o->api->mgr, &r, &err) < 0) {
        api_error(req, &err);
    } else {
        wr_http_respond_json(req, 200, hook_json(&r));
    }
out:
    wr_webhook_rec_fini(&r);
    json_decref(j);
}

static void with_hook_body(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                           const char *id)
{
    struct hook_op *o = xcalloc(1, sizeof(*o));

    o->api = api;
    snprintf(o->team, sizeof(o->team), "%s", who->team);
    o->any_team = who->admin;
    snprintf(o->id, sizeof(o->id), "%s", id ? id : "");
    wr_http_req_set_data(req, o, hook_op_closed);
    wr_http_req_read_body(req, E2B_EVENTS_MAX_BODY, hook_body);
}

static void hooks_list(struct wr_api *api, struct wr_http_req *req, const char *team)
{
    struct wr_webhook_rec *v = NULL;
    size_t n = 0;
    struct wr_err err;
    json_t *arr;

    if (wr_webhooks_list(api->mgr, team, &v, &n, &err) < 0) {
        api_error(req, &err);
        return;
    }
    arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, hook_json(&v[i]));
        wr_webhook_rec_fini(&v[i]);
    }
    free(v);
    wr_http_respond_json(req, 200, arr);
}

static void method_ok(struct wr_http_req *req, const char *allow)
{
    api_fail(req, WR_EMETHOD, "use %s", allow);
}

void e2b_events(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                char **seg, size_t nseg)
{
    const char *method = wr_http_req_method(req);
    const char *team = who->admin ? NULL : who->team;
    struct wr_webhook_rec r;
    struct wr_err err;

    if (nseg >= 2 && strcmp(seg[1], "sandboxes") == 0 && nseg <= 3) {
        if (strcmp(method, "GET") != 0) {
            wr_http_resp_header(req, "Allow", "GET");
            method_ok(req, "GET");
            return;
        }
        events_list(api, req, team, nseg == 3 ? seg[2] : NULL);
        return;
    }
    if (nseg >= 2 && strcmp(seg[1], "webhooks") == 0 && nseg == 2) {
        if (strcmp(method, "POST") == 0) {
            with_hook_body(api, req, who, NULL);
        } else if (strcmp(method, "GET") == 0) {
            hooks_list(api, req, team);
        } else {
            wr_http_resp_header(req, "Allow", "GET, POST");
            method_ok(req, "GET or POST");
        }
        return;
    }
    if (nseg == 3 && strcmp(seg[1], "webhooks") == 0) {
        if (strcmp(method, "PATCH") == 0) {
            with_hook_body(api, req, who, seg[2]);
        } else if (strcmp(method, "GET") == 0 || strcmp(method, "DELETE") == 0) {
            if (wr_webhooks_get(api->mgr, team, seg[2], &r, &err) < 0) {
                api_error(req, &err);
                return;
            }
            if (strcmp(method, "DELETE") == 0 &&
                wr_webhooks_delete(api->mgr, team, seg[2], &err) < 0)
                api_error(req, &err);
            else
                wr_http_respond_json(req, 200, hook_json(&r));
            wr_webhook_rec_fini(&r);
        } else {
            wr_http_resp_header(req, "Allow", "GET, PATCH, DELETE");
            method_ok(req, "GET, PATCH or DELETE");
        }
        return;
    }
    api_fail(req, WR_ENOTFOUND, "no such endpoint: %s %s", method, wr_http_req_path(req));
}
