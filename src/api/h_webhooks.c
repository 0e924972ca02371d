/* SPDX-License-Identifier: Apache-2.0 */
/* /v1/webhooks: a team's webhooks (core/webhooks.h) and their deliveries. The secret is shown
 * once, in the answer of the create (or of a PATCH that sets a new one); a team sees and
 * changes only its own webhooks, an admin key any team's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/webhooks.h"
#include "../util/parse.h"
#include "../util/xalloc.h"
#include "api_int.h"

static json_t *api_webhook_json(const struct wr_webhook_rec *w)
{
    char created[32], updated[32];
    json_t *ev = json_loads(w->events ? w->events : "[]", 0, NULL);

    api_time(w->created_ms, created);
    api_time(w->updated_ms, updated);
    return json_pack("{s:s,s:s,s:s,s:s,s:o,s:b,s:s,s:s,s:s}", "id", w->id, "team", w->team, "name",
                     w->name ? w->name : "", "url", w->url, "events",
                     json_is_array(ev) ? ev : (json_decref(ev), json_array()), "enabled",
                     w->enabled, "format", w->format, "created_at", created, "updated_at", updated);
}

static json_t *delivery_json(const struct wr_delivery_rec *d)
{
    char created[32], last[32], next[32], eid[24];
    json_t *body = json_loads(d->body ? d->body : "null", 0, NULL);
    bool pending = strcmp(d->state, "pending") == 0;

    api_time(d->created_ms, created);
    api_time(d->last_ms, last);
    api_time(d->next_ms, next);
    snprintf(eid, sizeof(eid), "%" PRId64, d->event_id);
    return json_pack("{s:I,s:s,s:s,s:s,s:s,s:s,s:I,s:s,s:s?,s:s?,s:I,s:s,s:o}", "id",
                     (json_int_t)d->id, "delivery_id", d->uuid, "webhook_id", d->webhook_id,
                     "event_id", eid, "type", d->type, "state", d->state, "attempts",
                     (json_int_t)d->attempts, "created_at", created, "last_attempt_at",
                     d->last_ms > 0 ? last : NULL, "next_attempt_at", pending ? next : NULL,
                     "last_status", (json_int_t)d->last_status, "last_error",
                     d->last_error ? d->last_error : "", "body", body ? body : json_null());
}

/* The body's fields into r (borrowed strings are copied). Returns 0, or -1 answered. */
static int fields(struct api_call *c, json_t *j, struct wr_webhook_rec *r, bool create)
{
    static const char *const allowed[] = {"team",   "name",    "url", "events",
                                          "secret", "enabled", NULL};
    json_t *v;
    struct wr_err err;

    if (api_only_keys(c->req, j, allowed) < 0)
        return -1;
    if ((v = json_object_get(j, "url")) != NULL || create) {
        if (!json_is_string(v)) {
            api_fail(c->req, WR_EINVAL, "`url` must be a string");
            return -1;
        }
        free(r->url);
        r->url = xstrdup(json_string_value(v));
    }
    if ((v = json_object_get(j, "name")) != NULL) {
        if (!json_is_string(v)) {
            api_fail(c->req, WR_EINVAL, "`name` must be a string");
            return -1;
        }
        free(r->name);
        r->name = xstrdup(json_string_value(v));
    }
    if ((v = json_object_get(j, "secret")) != NULL) {
        if (!json_is_string(v)) {
            api_fail(c->req, WR_EINVAL, "`secret` must be a string");
            return -1;
        }
        free(r->secret);
        r->secret = xstrdup(json_string_value(v));
    }
    if ((v = json_object_get(j, "enabled")) != NULL) {
        if (!json_is_boolean(v)) {
            api_fail(c->req, WR_EINVAL, "`enabled` must be a boolean");
            return -1;
        }
        r->enabled = json_is_true(v);
    }
    if ((v = json_object_get(j, "events")) != NULL) {
        if (wr_webhooks_events_check(v, &err) < 0) {
            api_error(c->req, &err);
            return -1;
        }
        free(r->events);
        r->events = json_dumps(v, JSON_COMPACT);
    }
    return 0;
}

void api_webhook_create(struct api_call *c)
{
    struct wr_webhook_rec r = {.enabled = true};
    const char *team = c->who.team;
    struct wr_err err;
    json_t *j, *out;

    j = api_parse_object(c->req, c->body, c->len);
    if (j == NULL)
        return;
    if (json_object_get(j, "team") != NULL) {
        const char *t = json_string_value(json_object_get(j, "team"));
        if (t == NULL || (!c->who.admin && strcmp(t, c->who.team) != 0)) {
            api_fail(c->req, t ? WR_EFORBIDDEN : WR_EINVAL,
                     t ? "only an admin key may register another team's webhooks"
                       : "`team` must be a string");
            goto out;
        }
        team = t;
    }
    if (fields(c, j, &r, true) < 0)
        goto out;
    r.team = xstrdup(team);
    r.format = xstrdup("warren");
    if (wr_webhooks_create(c->api->mgr, &r, &err) < 0) {
        api_error(c->req, &err);
        goto out;
    }
    api_note_object(c->req, r.id);
    out = api_webhook_json(&r);
    json_object_set_new(out, "secret", json_string(r.secret));
    wr_http_respond_json(c->req, 201, out);
out:
    wr_webhook_rec_fini(&r);
    json_decref(j);
}

void api_webhooks_list(struct api_call *c)
{
    struct wr_webhook_rec *v = NULL;
    size_t n = 0;
    struct wr_err err;
    json_t *arr;

    if (wr_webhooks_list(c->api->mgr, c->team, &v, &n, &err) < 0) {
        api_error(c->req, &err);
        return;
    }
    arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, api_webhook_json(&v[i]));
        wr_webhook_rec_fini(&v[i]);
    }
    free(v);
    wr_http_respond_json(c->req, 200, json_pack("{s:o}", "webhooks", arr));
}

void api_webhook_get(struct api_call *c)
{
    struct wr_webhook_rec r;
    struct wr_err err;

    if (wr_webhooks_get(c->api->mgr, c->team, c->seg[1], &r, &err) < 0) {
        api_error(c->req, &err);
        return;
    }
    wr_http_respond_json(c->req, 200, api_webhook_json(&r));
    wr_webhook_rec_fini(&r);
}

void api_webhook_update(struct api_call *c)
{
    struct wr_webhook_rec r;
    struct wr_err err;
    bool new_secret;
    json_t *j, *out;

    j = api_parse_object(c->req, c->body, c->len);
    if (j == NULL)
        return;
    if (wr_webhooks_get(c->api->mgr, c->team, c->seg[1], &r, &err) < 0) {
        api_error(c->req, &err);
        json_decref(j);
        return;
    }
    if (json_object_get(j, "team") != NULL) {
        api_fail(c->req, WR_EINVAL, "a webhook's team does not change");
        goto out;
    }
    new_secret = json_object_get(j, "secret") != NULL;
    if (fields(c, j, &r, false) < 0)
        goto out;
    if (wr_webhooks_update(c->api->mgr, &r, &err) < 0) {
        api_error(c->req, &err);
        goto out;
    }
    out = api_webhook_json(&r);
    if (new_secret)
        json_object_set_new(out, "secret", json_string(r.secret));
    wr_http_respond_json(c->req, 200, out);
out:
    wr_webhook_rec_fini(&r);
    json_decref(j);
}

void api_webhook_delete(struct api_call *c)
{
    struct wr_err err;

    if (wr_webhooks_delete(c->api->mgr, c->team, c->seg[1], &err) < 0)
        api_error(c->req, &err);
    else
        wr_http_respond(c->req, 204, NULL, NULL, 0);
}

void api_webhook_deliveries(struct api_call *c)
{
    struct wr_delivery_filter f = {.team = c->team, .webhook_id = c->seg[1], .limit = 100};
    struct wr_delivery_rec *v = NULL;
    struct wr_webhook_rec w;
    size_t n = 0;
    const char *q;
    uint64_t u;
    struct wr_err err;
    json_t *arr;
    char next[24];

    if (wr_webhooks_get(c->api->mgr, c->team, c->seg[1], &w, &err) < 0) {
        api_error(c->req, &err);
        return;
    }
    wr_webhook_rec_fini(&w);
    if ((q = wr_http_req_query(c->req, "state")) != NULL) {
        if (strcmp(q, "pending") != 0 && strcmp(q, "delivered") != 0 && strcmp(q, "dead") != 0) {
            api_fail(c->req, WR_EINVAL, "`state` must be pending, delivered or dead");
            return;
        }
        f.state = q;
    }
    if ((q = wr_http_req_query(c->req, "after")) != NULL && *q != '\0') {
        if (wr_parse_uint(q, INT64_MAX, &u, &err) < 0) {
            api_fail(c->req, WR_EINVAL, "`after` is not a delivery id");
            return;
        }
        f.after = (int64_t)u;
    }
    if ((q = wr_http_req_query(c->req, "limit")) != NULL) {
        if (wr_parse_uint(q, 1000, &u, &err) < 0 || u == 0) {
            api_fail(c->req, WR_EINVAL, "`limit` must be 1 to 1000");
            return;
        }
        f.limit = (size_t)u;
    }
    if (wr_webhooks_deliveries(c->api->mgr, &f, &v, &n, &err) < 0) {
        api_error(c->req, &err);
        return;
    }
    arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, delivery_json(&v[i]));
    }
    snprintf(next, sizeof(next), "%" PRId64, n > 0 ? v[n - 1].id : f.after);
    for (size_t i = 0; i < n; i++)
        wr_delivery_rec_fini(&v[i]);
    free(v);
    wr_http_respond_json(
        c->req, 200,
        json_pack("{s:o,s:s?}", "deliveries", arr, "next_cursor", n == f.limit ? next : NULL));
}

void api_webhook_redeliver(struct api_call *c)
{
    uint64_t id;
    struct wr_err err;

    if (wr_parse_uint(c->seg[3], INT64_MAX, &id, &err) < 0) {
        api_fail(c->req, WR_ENOTFOUND, "no delivery `%s`", c->seg[3]);
        return;
    }
    if (wr_webhooks_redeliver(c->api->mgr, c->team, c->seg[1], (int64_t)id, &err) < 0) {
        api_error(c->req, &err);
        return;
    }
    wr_http_respond_json(c->req, 202,
                         json_pack("{s:I,s:s}", "id", (json_int_t)id, "state", "pending"));
}
