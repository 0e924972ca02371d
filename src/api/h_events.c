/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/events: the team's lifecycle events (core/events.h), a page at a time by cursor; GET
 * /v1/events/stream: the same as Server-Sent Events, the stored ones after the cursor (`after`,
 * or the Last-Event-ID a reconnecting client sends) first, then each as it happens, until the
 * client leaves or the daemon stops. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/events.h"
#include "../util/parse.h"
#include "../util/xalloc.h"
#include "api_int.h"

/* A follower whose client reads slower than events come is let go above this. */
#define STREAM_PENDING_MAX (4u << 20)

/* The filter of the query: team (admins: team=, none for every team), sandbox, type and the
 * cursor (after; for the stream also Last-Event-ID). Returns 0, or -1 answered. */
static int filter_of(struct api_call *c, struct wr_event_filter *f, bool stream)
{
    struct wr_http_req *req = c->req;
    const char *q;
    uint64_t u;
    struct wr_err err;

    *f = (struct wr_event_filter){.team = c->who.admin ? NULL : c->who.team, .limit = 100};
    if ((q = wr_http_req_query(req, "team")) != NULL) {
        if (!c->who.admin && strcmp(q, c->who.team) != 0) {
            api_fail(req, WR_EFORBIDDEN, "only an admin key may read another team's events");
            return -1;
        }
        f->team = *q ? q : NULL;
    }
    f->sandbox_id = wr_http_req_query(req, "sandbox");
    f->type = wr_http_req_query(req, "type");
    q = wr_http_req_query(req, "after");
    if (q == NULL && stream)
        q = wr_http_req_header(req, "Last-Event-ID");
    if (q != NULL && *q != '\0') {
        if (wr_parse_uint(q, INT64_MAX, &u, &err) < 0) {
            api_fail(req, WR_EINVAL, "`after` is not an event id");
            return -1;
        }
        f->after = (int64_t)u;
    }
    if ((q = wr_http_req_query(req, "limit")) != NULL) {
        if (wr_parse_uint(q, 1000, &u, &err) < 0 || u == 0) {
            api_fail(req, WR_EINVAL, "`limit` must be 1 to 1000");
            return -1;
        }
        f->limit = (size_t)u;
    }
    return 0;
}

void api_events_list(struct api_call *c)
{
    struct wr_event_filter f;
    struct wr_event_rec *v = NULL;
    struct wr_err err;
    size_t n = 0;
    json_t *arr;
    char next[24];

    if (filter_of(c, &f, false) < 0)
        return;
    if (wr_events_list(c->api->mgr, &f, &v, &n, &err) < 0) {
        api_error(c->req, &err);
        return;
    }
    arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, wr_events_json(&v[i]));
    /* A full page may have more after it: its last id is the next cursor. */
    snprintf(next, sizeof(next), "%" PRId64, n > 0 ? v[n - 1].id : f.after);
    for (size_t i = 0; i < n; i++)
        wr_event_rec_fini(&v[i]);
    free(v);
    wr_http_respond_json(
        c->req, 200,
        json_pack("{s:o,s:s?}", "events", arr, "next_cursor", n == f.limit ? next : NULL));
}

struct stream {
    struct wr_http_req *req;
    struct wr_events_sub *sub; /* NULL before the follow returns and once it ended */
    bool ended;
};

static void stream_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct stream *s = data;

    wr_events_unfollow(s->sub);
    free(s);
}

static void stream_event(void *ctx, const struct wr_event_rec *r)
{
    struct stream *s = ctx;
    json_t *j;
    char *text, head[96];

    if (r == NULL) { /* the daemon stops: the stream ends (the follower is freed) */
        s->sub = NULL;
        s->ended = true;
        wr_http_resp_end(s->req);
        return;
    }
    if (s->ended)
        return;
    j = wr_events_json(r);
    text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (text == NULL)
        return;
    snprintf(head, sizeof(head), "id: %" PRId64 "\nevent: %s\ndata: ", r->id, r->type);
    wr_http_resp_write(s->req, head, strlen(head));
    wr_http_resp_write(s->req, text, strlen(text));
    free(text);
    if (wr_http_resp_write(s->req, "\n\n", 2) > STREAM_PENDING_MAX) {
        /* The client does not keep up: end its stream (it reconnects with Last-Event-ID). */
        s->ended = true;
        wr_events_unfollow(s->sub);
        s->sub = NULL;
        wr_http_resp_end(s->req);
    }
}

void api_events_stream(struct api_call *c)
{
    struct wr_event_filter f;
    struct stream *s;
    struct wr_err err;

    if (filter_of(c, &f, true) < 0)
        return;
    s = xcalloc(1, sizeof(*s));
    s->req = c->req;
    wr_http_req_set_data(c->req, s, stream_closed);
    wr_http_resp_start(c->req, 200, "text/event-stream", -1);
    /* A comment first, so that the client sees the stream open before any event. */
    wr_http_resp_write(c->req, ": warren events\n\n", 17);
    if (wr_events_follow(c->api->mgr, &f, stream_event, s, &s->sub, &err) == 0) {
        if (s->ended) { /* ended during its backlog */
            wr_events_unfollow(s->sub);
            s->sub = NULL;
        }
    } else if (!s->ended) {
        char line[sizeof(err.msg) + 32];
        s->ended = true;
        snprintf(line, sizeof(line), "event: error\ndata: %s\n\n", err.msg);
        wr_http_resp_write(c->req, line, strlen(line));
        wr_http_resp_end(c->req);
    }
}
