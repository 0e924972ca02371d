/* SPDX-License-Identifier: Apache-2.0 */
/* Routing and auth of the native API, and the helpers every handler uses. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../core/keys.h"
#include "../util/b64.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/utf8.h"
#include "../util/xalloc.h"
#include "api_int.h"

struct api_pending {
    struct wr_http_req *req; /* NULL once the client left */
};

static void pending_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct api_pending *p = data;
    p->req = NULL;
}

struct api_pending *api_pending_new(struct wr_http_req *req)
{
    struct api_pending *p = xcalloc(1, sizeof(*p));

    p->req = req;
    wr_http_req_set_data(req, p, pending_closed);
    return p;
}

struct wr_http_req *api_pending_end(struct api_pending *p)
{
    struct wr_http_req *req = p->req;

    if (req != NULL)
        wr_http_req_set_data(req, NULL, NULL);
    free(p);
    return req;
}

void api_pending_deleted(void *ctx, const struct wr_err *err)
{
    struct wr_http_req *req = api_pending_end(ctx);

    if (req == NULL)
        return;
    if (err != NULL)
        api_error(req, err);
    else
        wr_http_respond(req, 204, NULL, NULL, 0);
}

int api_error_status(const struct wr_err *err, const char **code)
{
    enum wr_err_kind kind = wr_err_class(err);

    *code = wr_err_kind_name(kind);
    return wr_err_kind_status(kind);
}

void api_error(struct wr_http_req *req, const struct wr_err *err)
{
    const char *code;
    int status = api_error_status(err, &code);

    wr_http_respond_error(req, status, code, "%s", err->msg);
}

void api_fail(struct wr_http_req *req, enum wr_err_kind kind, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    wr_http_respond_error(req, wr_err_kind_status(kind), wr_err_kind_name(kind), "%s", msg);
}

json_t *api_json_text(const char *s)
{
    _cleanup_free_ char *t = wr_utf8_fix(s ? s : "", WR_UTF8_REPLACE);
    return json_string(t);
}

json_t *api_json_b64(const uint8_t *p, size_t n)
{
    _cleanup_free_ char *enc = xmalloc(WR_B64_ENCODED_LEN(n) + 1);
    size_t len = wr_b64_encode(p, n, enc);

    return json_stringn(enc, len);
}

json_t *api_json_message(const char *s)
{
    _cleanup_free_ char *t = wr_utf8_fix(s ? s : "", WR_UTF8_ESCAPE);
    return json_string(t);
}

void api_time(int64_t ms, char out[32])
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    size_t n;

    if (ms < 0)
        s = 0, ms = 0;
    gmtime_r(&s, &tm);
    n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03uZ", (unsigned)(ms % 1000));
}

json_t *api_parse_object(struct wr_http_req *req, const char *body, size_t len)
{
    json_error_t je;
    json_t *j;

    if (len == 0)
        return json_object();
    j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (j == NULL) {
        wr_http_respond_error(req, 400, "invalid", "malformed JSON at line %d column %d: %s",
                              je.line, je.column, je.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        wr_http_respond_error(req, 400, "invalid", "the body must be a JSON object");
        return NULL;
    }
    return j;
}

int api_only_keys(struct wr_http_req *req, json_t *obj, const char *const *allowed)
{
    const char *k;
    json_t *v;

    json_object_foreach(obj, k, v)
    {
        bool ok = false;
        for (const char *const *a = allowed; *a != NULL; a++)
            if (strcmp(k, *a) == 0)
                ok = true;
        if (!ok) {
            wr_http_respond_error(req, 400, "invalid", "unknown field `%s`", k);
            return -1;
        }
    }
    return 0;
}

/* Split "/v1/a/b/c" into segments after "v1". Returns false if it is not a /v1 path or has too
 * many segments. Empty segments (//) are not allowed. */
static bool split_route(const char *path, struct api_route *rt)
{
    size_t n = strlen(path);
    char *p, *save = NULL;

    if (n >= sizeof(rt->buf) || strncmp(path, "/v1/", 4) != 0)
        return false;
    memcpy(rt->buf, path + 4, n - 3);
    rt->nseg = 0;
    if (rt->buf[0] == '\0' || strstr(rt->buf, "//") != NULL)
        return false;
    for (p = strtok_r(rt->buf, "/", &save); p != NULL; p = strtok_r(NULL, "/", &save)) {
        if (rt->nseg == API_MAX_SEGS)
            return false;
        rt->seg[rt->nseg++] = p;
    }
    return rt->nseg > 0;
}

/* The key from Authorization: Bearer or X-API-Key. */
static const char *presented_key(struct wr_http_req *req)
{
    const char *h = wr_http_req_header(req, "Authorization");

    if (h != NULL && strncasecmp(h, "Bearer ", 7) == 0) {
        h += 7;
        while (*h == ' ')
            h++;
        return h;
    }
    return wr_http_req_header(req, "X-API-Key");
}

int api_authenticate(struct wr_api *api, struct wr_http_req *req, struct wr_caller *who)
{
    const char *key = presented_key(req);
    struct wr_key_info ki;
    struct wr_err err;

    if (key == NULL && wr_http_req_is_unix(req)) {
        snprintf(who->team, sizeof(who->team), "admin");
        who->admin = true;
        return 0;
    }
    if (key == NULL) {
        wr_http_respond_error(req, 401, "unauthorized",
                              "an API key is required (Authorization: Bearer <key>)");
        return -1;
    }
    if (wr_keys_lookup(api->mgr, key, &ki, &err) < 0) {
        if (err.kind == WR_ENOTFOUND)
            wr_http_respond_error(req, 401, "unauthorized", "the API key is not valid");
        else
            api_error(req, &err);
        return -1;
    }
    snprintf(who->team, sizeof(who->team), "%s", ki.team);
    who->admin = ki.admin;
    wr_key_info_fini(&ki);
    return 0;
}

void wr_api_handle(struct wr_http_req *req, void *ctx)
{
    struct wr_api *api = ctx;
    const char *method = wr_http_req_method(req);
    const char *path = wr_http_req_path(req);
    struct api_route rt;
    struct wr_caller who;

    /* The E2B-compatible API (e2b.c) shares the port: its paths are not under /v1. */
    if (e2b_handle(api, req))
        return;
    if (strcmp(path, "/v1/health") == 0) {
        if (strcmp(method, "GET") != 0) {
            wr_http_respond_error(req, 405, "method_not_allowed", "use GET");
            return;
        }
        wr_http_respond_json(req, 200, json_pack("{s:s}", "status", "ok"));
        return;
    }
    if (!split_route(path, &rt)) {
        wr_http_respond_error(req, 404, "not_found", "no such endpoint: %s %s", method, path);
        return;
    }
    if (api_authenticate(api, req, &who) < 0)
        return;

    if (rt.nseg == 1 && strcmp(rt.seg[0], "version") == 0) {
        if (strcmp(method, "GET") != 0) {
            wr_http_respond_error(req, 405, "method_not_allowed", "use GET");
            return;
        }
        wr_http_respond_json(req, 200,
                             json_pack("{s:s,s:s,s:s,s:s}", "version", api->version, "api", "1",
                                       "runtime", "ns", "cgroup",
                                       wr_manager_cgroup_version(api->mgr)));
        return;
    }
    if (strcmp(rt.seg[0], "sandboxes") == 0) {
        api_sandboxes(api, req, &who, &rt);
        return;
    }
    if (strcmp(rt.seg[0], "keys") == 0) {
        api_keys(api, req, &who, &rt);
        return;
    }
    if (strcmp(rt.seg[0], "templates") == 0) {
        api_templates(api, req, &who, &rt);
        return;
    }
    if (strcmp(rt.seg[0], "snapshots") == 0) {
        api_snapshots(api, req, &who, &rt);
        return;
    }
    if (strcmp(rt.seg[0], "volumes") == 0) {
        api_volumes(api, req, &who, &rt);
        return;
    }
    wr_http_respond_error(req, 404, "not_found", "no such endpoint: %s %s", method, path);
}
