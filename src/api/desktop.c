/* SPDX-License-Identifier: Apache-2.0 */
/* The desktop and browser routes of the native API (docs/desktop.md): the request's checks and
 * the answers; the work is core/desktop.c's (the template's tools, run inside the sandbox). The
 * CDP WebSocket is proxied to Chromium's browser endpoint inside through the port proxy
 * (ports.c), with Host: localhost upstream; /cdp/json/version answers Chromium's own JSON with
 * its webSocketDebuggerUrl pointing at this daemon's /cdp. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/desktop.h"
#include "../util/cleanup.h"
#include "../util/json_cleanup.h"
#include "../util/xalloc.h"
#include "api_int.h"

#define DEFAULT_WIDTH  1024
#define DEFAULT_HEIGHT 768
#define DEFAULT_DPI    96

static json_t *info_json(const struct wr_desktop_info *info)
{
    return json_pack("{s:b,s:s,s:i,s:i}", "running", info->running, "display", WR_DESKTOP_DISPLAY,
                     "width", (int)info->width, "height", (int)info->height);
}

static void info_done(void *ctx, const struct wr_desktop_info *info, const struct wr_err *err)
{
    struct wr_http_req *req = api_pending_end(ctx);

    if (req == NULL)
        return;
    if (err != NULL)
        api_error(req, err);
    else
        wr_http_respond_json(req, 200, info_json(info));
}

void api_desktop_get(struct api_call *c)
{
    wr_desktop_info(c->sb, info_done, api_pending_new(c->req));
}

/* body[key], when present: an integer lo..hi into *out. Returns 0, or -1 having answered 400. */
static int opt_uint(struct wr_http_req *req, json_t *body, const char *key, unsigned lo,
                    unsigned hi, unsigned *out)
{
    json_t *v = json_object_get(body, key);

    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        api_fail(req, WR_EINVAL, "`%s` must be an integer from %u to %u", key, lo, hi);
        return -1;
    }
    *out = (unsigned)json_integer_value(v);
    return 0;
}

void api_desktop_start(struct api_call *c)
{
    static const char *const allowed[] = {"width", "height", "dpi", NULL};
    _cleanup_json_ json_t *j = api_parse_object(c->req, c->body, c->len);
    unsigned w = DEFAULT_WIDTH, h = DEFAULT_HEIGHT, dpi = DEFAULT_DPI;

    if (j == NULL || api_only_keys(c->req, j, allowed) < 0 ||
        opt_uint(c->req, j, "width", 16, WR_DESKTOP_MAX_DIM, &w) < 0 ||
        opt_uint(c->req, j, "height", 16, WR_DESKTOP_MAX_DIM, &h) < 0 ||
        opt_uint(c->req, j, "dpi", 10, 1000, &dpi) < 0)
        return;
    wr_desktop_start(c->sb, w, h, dpi, info_done, api_pending_new(c->req));
}

static void shot_done(void *ctx, const uint8_t *p, size_t n, const struct wr_err *err)
{
    struct wr_http_req *req = api_pending_end(ctx);

    if (req == NULL)
        return;
    if (err != NULL) {
        api_error(req, err);
        return;
    }
    wr_http_resp_header(req, "Cache-Control", "no-store");
    wr_http_respond(req, 200, "image/png", p, n);
}

/* A boolean query parameter: absent, 0, false: false; 1, true: true; else -1 (answered 400). */
static int query_bool(struct wr_http_req *req, const char *name)
{
    const char *v = wr_http_req_query(req, name);

    if (v == NULL || strcmp(v, "0") == 0 || strcmp(v, "false") == 0)
        return 0;
    if (strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || *v == '\0')
        return 1;
    api_fail(req, WR_EINVAL, "`%s` is 1, true, 0 or false", name);
    return -1;
}

void api_desktop_screenshot(struct api_call *c)
{
    int cursor = query_bool(c->req, "cursor");

    if (cursor < 0)
        return;
    wr_desktop_screenshot(c->sb, cursor == 1, shot_done, api_pending_new(c->req));
}

static void point_done(void *ctx, unsigned x, unsigned y, const struct wr_err *err)
{
    struct wr_http_req *req = api_pending_end(ctx);

    if (req == NULL)
        return;
    if (err != NULL)
        api_error(req, err);
    else
        wr_http_respond_json(req, 200, json_pack("{s:i,s:i}", "x", (int)x, "y", (int)y));
}

void api_desktop_mouse_get(struct api_call *c)
{
    wr_desktop_cursor(c->sb, point_done, api_pending_new(c->req));
}

/* body[key]: one of names (NULL-terminated), its index into *out; absent: *out unchanged. */
static int opt_name(struct wr_http_req *req, json_t *body, const char *key,
                    const char *const *names, unsigned *out)
{
    json_t *v = json_object_get(body, key);
    const char *s;

    if (v == NULL || json_is_null(v))
        return 0;
    s = json_string_value(v);
    for (unsigned i = 0; s != NULL && names[i] != NULL; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    {
        char list[160] = "";
        for (unsigned i = 0; names[i] != NULL; i++)
            snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "",
                     names[i]);
        api_fail(req, WR_EINVAL, "`%s` must be one of %s", key, list);
    }
    return -1;
}

static bool has(json_t *body, const char *key)
{
    json_t *v = json_object_get(body, key);
    return v != NULL && !json_is_null(v);
}

void api_desktop_mouse(struct api_call *c)
{
    static const char *const allowed[] = {"action", "x",    "y",    "button", "direction",
                                          "amount", "to_x", "to_y", NULL};
    static const char *const actions[] = {"move", "click",  "double_click", "down",
                                          "up",   "scroll", "drag",         NULL};
    static const char *const buttons[] = {"left", "middle", "right", NULL};
    static const char *const dirs[] = {"up", "down", NULL};
    _cleanup_json_ json_t *j = api_parse_object(c->req, c->body, c->len);
    struct wr_desktop_mouse m = {.button = 1, .amount = 1};
    unsigned action = 0, button = 0, dir = 1;
    const unsigned max = WR_DESKTOP_MAX_DIM - 1;

    if (j == NULL || api_only_keys(c->req, j, allowed) < 0)
        return;
    if (!has(j, "action")) {
        api_fail(c->req, WR_EINVAL,
                 "`action` is required (move, click, double_click, down, up, "
                 "scroll or drag)");
        return;
    }
    if (opt_name(c->req, j, "action", actions, &action) < 0 ||
        opt_name(c->req, j, "button", buttons, &button) < 0 ||
        opt_name(c->req, j, "direction", dirs, &dir) < 0 ||
        opt_uint(c->req, j, "x", 0, max, &m.x) < 0 || opt_uint(c->req, j, "y", 0, max, &m.y) < 0 ||
        opt_uint(c->req, j, "to_x", 0, max, &m.to_x) < 0 ||
        opt_uint(c->req, j, "to_y", 0, max, &m.to_y) < 0 ||
        opt_uint(c->req, j, "amount", 1, 100, &m.amount) < 0)
        return;
    m.action = (enum wr_mouse_action)action;
    m.button = button + 1; /* left 1, middle 2, right 3: X's numbers */
    m.up = dir == 0;
    if (has(j, "x") != has(j, "y")) {
        api_fail(c->req, WR_EINVAL, "`x` and `y` go together");
        return;
    }
    m.has_xy = has(j, "x");
    if ((m.action == WR_MOUSE_MOVE || m.action == WR_MOUSE_DRAG) && !m.has_xy) {
        api_fail(c->req, WR_EINVAL, "`%s` needs `x` and `y`", actions[action]);
        return;
    }
    if (m.action == WR_MOUSE_DRAG && (!has(j, "to_x") || !has(j, "to_y"))) {
        api_fail(c->req, WR_EINVAL, "`drag` needs `to_x` and `to_y`");
        return;
    }
    if (m.action != WR_MOUSE_DRAG && (has(j, "to_x") || has(j, "to_y"))) {
        api_fail(c->req, WR_EINVAL, "`to_x` and `to_y` are for `drag` only");
        return;
    }
    wr_desktop_mouse(c->sb, &m, point_done, api_pending_new(c->req));
}

static void done_204(void *ctx, const struct wr_err *err)
{
    struct wr_http_req *req = api_pending_end(ctx);

    if (req == NULL)
        return;
    if (err != NULL)
        api_error(req, err);
    else
        wr_http_respond(req, 204, NULL, NULL, 0);
}

void api_desktop_keyboard(struct api_call *c)
{
    static const char *const allowed[] = {"text", "keys", NULL};
    _cleanup_json_ json_t *j = api_parse_object(c->req, c->body, c->len);
    const char *keys[WR_DESKTOP_MAX_KEYS];
    json_t *text, *arr, *v;
    struct wr_err err;
    char sym[40];
    size_t i;

    if (j == NULL || api_only_keys(c->req, j, allowed) < 0)
        return;
    text = json_object_get(j, "text");
    arr = json_object_get(j, "keys");
    if ((text == NULL) == (arr == NULL)) {
        api_fail(c->req, WR_EINVAL, "give `text` (typed) or `keys` (one chord), not both");
        return;
    }
    if (text != NULL) {
        if (!json_is_string(text)) {
            api_fail(c->req, WR_EINVAL, "`text` must be a string");
            return;
        }
        if (strlen(json_string_value(text)) != json_string_length(text)) {
            api_fail(c->req, WR_EINVAL, "`text` must not contain NUL");
            return;
        }
        if (wr_desktop_text_check(json_string_value(text), json_string_length(text), &err) < 0) {
            api_error(c->req, &err);
            return;
        }
        wr_desktop_type(c->sb, json_string_value(text), done_204, api_pending_new(c->req));
        return;
    }
    if (!json_is_array(arr) || json_array_size(arr) == 0 ||
        json_array_size(arr) > WR_DESKTOP_MAX_KEYS) {
        api_fail(c->req, WR_EINVAL, "`keys` must be an array of 1 to %d key names",
                 WR_DESKTOP_MAX_KEYS);
        return;
    }
    json_array_foreach(arr, i, v)
    {
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
            api_fail(c->req, WR_EINVAL, "`keys[%zu]` must be a key name", i);
            return;
        }
        if (wr_desktop_key_map(json_string_value(v), sym, sizeof(sym), &err) < 0) {
            api_error(c->req, &err);
            return;
        }
        keys[i] = json_string_value(v);
    }
    wr_desktop_keys(c->sb, keys, json_array_size(arr), done_204, api_pending_new(c->req));
}

static void windows_done(void *ctx, const struct wr_desktop_window *w, size_t n,
                         const struct wr_err *err)
{
    struct wr_http_req *req = api_pending_end(ctx);
    json_t *arr;

    if (req == NULL)
        return;
    if (err != NULL) {
        api_error(req, err);
        return;
    }
    arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_pack("{s:s,s:o,s:o,s:b}", "id", w[i].id, "title",
                                             api_json_text(w[i].title), "class",
                                             api_json_text(w[i].cls), "focused", w[i].focused));
    wr_http_respond_json(req, 200, json_pack("{s:o}", "windows", arr));
}

void api_desktop_windows(struct api_call *c)
{
    wr_desktop_windows(c->sb, windows_done, api_pending_new(c->req));
}

/* ---- the browser --------------------------------------------------------------------------- */

/* ws://<the request's Host>/v1/sandboxes/{id}/cdp (wss behind a TLS proxy that says so). */
static char *cdp_url(struct wr_http_req *req, const char *id)
{
    const char *host = wr_http_req_header(req, "Host");
    const char *proto = wr_http_req_header(req, "X-Forwarded-Proto");

    if (host == NULL || *host == '\0' || strpbrk(host, "/?#\"\\ \r\n") != NULL)
        host = "localhost";
    return xasprintf("%s://%s/v1/sandboxes/%s/cdp",
                     proto != NULL && strcmp(proto, "https") == 0 ? "wss" : "ws", host, id);
}

struct browser_call {
    struct api_pending *pending;
    struct wr_api *api;
    struct wr_live_sb *sb; /* referenced */
    bool ws;               /* /cdp: proxy the upgrade once the path is known */
};

static void browser_call_free(struct browser_call *b)
{
    wr_live_sb_unref(b->sb);
    free(b);
}

static struct browser_call *browser_call_new(struct api_call *c, bool ws)
{
    struct browser_call *b = xcalloc(1, sizeof(*b));

    b->pending = api_pending_new(c->req);
    b->api = c->api;
    b->sb = c->sb;
    wr_live_sb_ref(b->sb);
    b->ws = ws;
    return b;
}

static void browser_started(void *ctx, const struct wr_err *err)
{
    struct browser_call *b = ctx;
    struct wr_http_req *req = api_pending_end(b->pending);

    if (req != NULL) {
        if (err != NULL) {
            api_error(req, err);
        } else {
            _cleanup_free_ char *url = cdp_url(req, wr_live_sb_id(b->sb));
            wr_http_respond_json(req, 200, json_pack("{s:s}", "cdp_url", url));
        }
    }
    browser_call_free(b);
}

void api_browser_start(struct api_call *c)
{
    _cleanup_json_ json_t *j = api_parse_object(c->req, c->body, c->len);
    static const char *const allowed[] = {NULL};

    if (j == NULL || api_only_keys(c->req, j, allowed) < 0)
        return;
    wr_browser_start(c->sb, browser_started, browser_call_new(c, false));
}

/* The path of Chromium's webSocketDebuggerUrl (ws://127.0.0.1:9222/devtools/browser/<id>), or
 * NULL. */
static const char *debugger_path(json_t *j)
{
    const char *u = json_string_value(json_object_get(j, "webSocketDebuggerUrl"));
    const char *p;

    if (u == NULL || strncmp(u, "ws://", 5) != 0 || (p = strchr(u + 5, '/')) == NULL)
        return NULL;
    if (strncmp(p, "/devtools/", 10) != 0 || strpbrk(p, " \r\n") != NULL)
        return NULL;
    return p;
}

static void version_got(void *ctx, const char *body, size_t n, const struct wr_err *err)
{
    struct browser_call *b = ctx;
    struct wr_http_req *req = api_pending_end(b->pending);
    _cleanup_json_ json_t *j = NULL;
    const char *path;

    if (req == NULL)
        goto out;
    if (err != NULL) {
        api_error(req, err);
        goto out;
    }
    j = json_loadb(body, n, 0, NULL);
    if (!json_is_object(j) || (path = debugger_path(j)) == NULL) {
        api_fail(req, WR_EUPSTREAM,
                 "the browser of sandbox %s answered /json/version without a browser endpoint",
                 wr_live_sb_id(b->sb));
        goto out;
    }
    if (b->ws) {
        /* Chromium's HTTP side refuses a Host that is not an IP or localhost. */
        api_port_proxy(b->api, req, b->sb, WR_BROWSER_CDP_PORT, path, "localhost");
    } else {
        _cleanup_free_ char *url = cdp_url(req, wr_live_sb_id(b->sb));
        json_object_set_new(j, "webSocketDebuggerUrl", json_string(url));
        wr_http_respond_json(req, 200, json_incref(j));
    }
out:
    browser_call_free(b);
}

void api_cdp(struct api_call *c)
{
    if (!wr_http_req_is_upgrade(c->req) || wr_http_req_header(c->req, "Upgrade") == NULL) {
        api_fail(c->req, WR_EINVAL,
                 "this is a WebSocket (Chrome DevTools Protocol): connect with Upgrade: "
                 "websocket, or read .../cdp/json/version");
        return;
    }
    wr_browser_version(c->sb, version_got, browser_call_new(c, true));
}

void api_cdp_version(struct api_call *c)
{
    wr_browser_version(c->sb, version_got, browser_call_new(c, false));
}
