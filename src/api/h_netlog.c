/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/sandboxes/{id}/network/log: a sandbox's egress log (core/netlog.h), a page at a time
 * or (follow=1) as NDJSON, the backlog after the cursor first, then each entry as it is written,
 * until the client leaves or the sandbox's record goes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/netlog.h"
#include "../util/inet.h"
#include "../util/parse.h"
#include "../util/xalloc.h"
#include "api_int.h"

/* A follower whose client reads slower than the log grows is let go above this. */
#define FOLLOW_PENDING_MAX (4u << 20)

static json_t *entry_json(const struct wr_netlog_rec *r)
{
    char id[24], at[32], addr[WR_INET4_STRLEN];

    snprintf(id, sizeof(id), "%" PRId64, r->id);
    api_time(r->time_ms, at);
    wr_inet4_format(r->addr, addr);
    return json_pack("{s:s,s:s,s:s,s:s,s:i,s:o,s:I,s:I,s:b,s:o}", "id", id, "time", at, "proto",
                     r->proto ? r->proto : "", "address", addr, "port", (int)r->port, "name",
                     r->name ? api_json_text(r->name) : json_null(), "bytes_out",
                     (json_int_t)r->bytes_out, "bytes_in", (json_int_t)r->bytes_in, "allowed",
                     r->allowed, "rule", api_json_text(r->rule ? r->rule : ""));
}

struct follow {
    struct wr_http_req *req; /* NULL once the client left */
    struct wr_netlog_sub *sub;
    bool ended;
};

static void follow_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct follow *f = data;

    if (!f->ended)
        wr_netlog_unfollow(f->sub);
    free(f);
}

static void follow_entry(void *ctx, const struct wr_netlog_rec *r)
{
    struct follow *f = ctx;
    json_t *j;
    char *s;

    if (r == NULL) {
        /* The record went (or the daemon is stopping): the stream ends. */
        f->ended = true;
        f->sub = NULL;
        if (!wr_http_resp_started(f->req))
            wr_http_resp_start(f->req, 200, "application/x-ndjson", -1);
        wr_http_resp_end(f->req);
        return;
    }
    if (f->ended)
        return;
    if (!wr_http_resp_started(f->req))
        wr_http_resp_start(f->req, 200, "application/x-ndjson", -1);
    j = entry_json(r);
    s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (s == NULL)
        return;
    wr_http_resp_write(f->req, s, strlen(s));
    if (wr_http_resp_write(f->req, "\n", 1) > FOLLOW_PENDING_MAX) {
        /* The client does not keep up: end its stream (it may follow again from its cursor). */
        f->ended = true;
        if (f->sub != NULL)
            wr_netlog_unfollow(f->sub);
        f->sub = NULL;
        wr_http_resp_end(f->req);
    }
    free(s);
}

void api_sandbox_netlog(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    struct wr_netlog_rec *v = NULL;
    struct wr_err err;
    uint64_t after = 0, limit = 100;
    const char *q;
    size_t n = 0;
    char next[24];
    json_t *arr;

    if ((q = wr_http_req_query(req, "after")) != NULL && *q != '\0' &&
        wr_parse_uint(q, INT64_MAX, &after, &err) < 0) {
        api_fail(req, WR_EINVAL, "`after` is not a cursor");
        return;
    }
    if ((q = wr_http_req_query(req, "limit")) != NULL &&
        (wr_parse_uint(q, 1000, &limit, &err) < 0 || limit == 0)) {
        api_fail(req, WR_EINVAL, "`limit` must be 1 to 1000");
        return;
    }
    q = wr_http_req_query(req, "follow");
    if (q != NULL && (strcmp(q, "1") == 0 || strcmp(q, "true") == 0)) {
        struct follow *f = xcalloc(1, sizeof(*f));
        f->req = req;
        /* Set first: the backlog is written during the follow call. */
        wr_http_req_set_data(req, f, follow_closed);
        if (wr_netlog_follow(c->api->mgr, c->team, c->seg[1], (int64_t)after, follow_entry, f,
                             &f->sub, &err) < 0) {
            f->ended = true;
            api_error(req, &err);
            return;
        }
        if (!f->ended && !wr_http_resp_started(req))
            wr_http_resp_start(req, 200, "application/x-ndjson", -1);
        return;
    }
    if (q != NULL && strcmp(q, "0") != 0 && strcmp(q, "false") != 0) {
        api_fail(req, WR_EINVAL, "`follow` must be 1 or 0");
        return;
    }
    if (wr_netlog_query(c->api->mgr, c->team, c->seg[1], (int64_t)after, (size_t)limit, &v, &n,
                        &err) < 0) {
        api_error(req, &err);
        return;
    }
    arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, entry_json(&v[i]));
    snprintf(next, sizeof(next), "%" PRId64, n > 0 ? v[n - 1].id : (int64_t)after);
    for (size_t i = 0; i < n; i++)
        wr_netlog_rec_fini(&v[i]);
    free(v);
    wr_http_respond_json(req, 200, json_pack("{s:o,s:s}", "entries", arr, "next", next));
}
