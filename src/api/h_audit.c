/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/audit: the audit trail (core/audit.h), filtered and paged by cursor. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/audit.h"
#include "../util/parse.h"
#include "api_int.h"

/* A time: RFC 3339 in UTC ("2026-01-02T03:04:05Z", fractions of a second allowed) or an integer
 * of milliseconds since the epoch. Returns 0, or -1 if it is neither. */
static int parse_time(const char *s, int64_t *ms)
{
    struct tm tm = {0};
    const char *p;
    uint64_t v;
    struct wr_err err;
    int64_t frac = 0, scale = 100;

    if (wr_parse_uint(s, INT64_MAX, &v, &err) == 0) {
        *ms = (int64_t)v;
        return 0;
    }
    p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (p == NULL)
        return -1;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -1;
        for (; *p >= '0' && *p <= '9'; p++, scale /= 10)
            frac += scale > 0 ? (*p - '0') * scale : 0;
    }
    if (strcmp(p, "Z") != 0)
        return -1;
    *ms = (int64_t)timegm(&tm) * 1000 + frac;
    return 0;
}

static json_t *rec_json(const struct wr_audit_rec *r)
{
    char at[32], id[24];

    api_time(r->time_ms, at);
    snprintf(id, sizeof(id), "%" PRId64, r->id);
    return json_pack("{s:s,s:s,s:s,s:{s:s,s:s},s:s,s:s,s:{s:s,s:s},s:{s:s,s:s},s:{s:i,s:s?}}", "id",
                     id, "time", at, "request_id", r->request_id, "who", "team", r->team, "key_id",
                     r->key_id, "from", r->peer, "action", r->action, "object", "kind",
                     r->object_kind, "id", r->object_id, "request", "method", r->method, "route",
                     r->route, "result", "status", r->status, "code",
                     r->code && *r->code ? r->code : NULL);
}

void api_audit_list(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    struct wr_audit_filter f = {.team = c->who.team, .limit = 100};
    struct wr_audit_rec *v = NULL;
    struct wr_err err;
    const char *q;
    uint64_t u;
    size_t n = 0;
    json_t *arr;
    char next[24];

    if (c->api->audit == NULL) {
        api_fail(req, WR_EUNSUPPORTED, "this daemon keeps no audit trail");
        return;
    }
    if ((q = wr_http_req_query(req, "team")) != NULL) {
        if (!c->who.admin && strcmp(q, c->who.team) != 0) {
            api_fail(req, WR_EFORBIDDEN, "only an admin key may read another team's audit trail");
            return;
        }
        f.team = *q ? q : NULL; /* an admin's team= (empty: every team) */
    } else if (c->who.admin) {
        f.team = NULL;
    }
    if ((q = wr_http_req_query(req, "from")) != NULL && parse_time(q, &f.from_ms) < 0) {
        api_fail(req, WR_EINVAL, "`from` must be an RFC 3339 UTC time or milliseconds");
        return;
    }
    if ((q = wr_http_req_query(req, "to")) != NULL && parse_time(q, &f.to_ms) < 0) {
        api_fail(req, WR_EINVAL, "`to` must be an RFC 3339 UTC time or milliseconds");
        return;
    }
    if ((q = wr_http_req_query(req, "limit")) != NULL &&
        (wr_parse_uint(q, 1000, &u, &err) < 0 || u == 0)) {
        api_fail(req, WR_EINVAL, "`limit` must be 1 to 1000");
        return;
    } else if (q != NULL) {
        f.limit = (size_t)u;
    }
    if ((q = wr_http_req_query(req, "cursor")) != NULL && *q != '\0') {
        if (wr_parse_uint(q, INT64_MAX, &u, &err) < 0) {
            api_fail(req, WR_EINVAL, "`cursor` is not a cursor of this list");
            return;
        }
        f.after = (int64_t)u;
    }
    f.action = wr_http_req_query(req, "action");
    f.object = wr_http_req_query(req, "object");
    if (wr_audit_list(c->api->audit, &f, &v, &n, &err) < 0) {
        api_error(req, &err);
        return;
    }
    arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, rec_json(&v[i]));
    /* A full page may have more after it: its last id is the next cursor. */
    snprintf(next, sizeof(next), "%" PRId64, n > 0 ? v[n - 1].id : f.after);
    for (size_t i = 0; i < n; i++)
        wr_audit_rec_fini(&v[i]);
    free(v);
    wr_http_respond_json(
        req, 200,
        json_pack("{s:o,s:s?}", "events", arr, "next_cursor", n == f.limit ? next : NULL));
}
