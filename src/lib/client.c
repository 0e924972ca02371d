/* SPDX-License-Identifier: Apache-2.0 */
/* The client handle and the round trip every call makes (lib.h, include/warren.h). */
#include <stdlib.h>
#include <string.h>

#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "config.h"
#include "lib.h"

#define WL_STR_(x) #x
#define WL_STR(x)  WL_STR_(x)

const char *warren_version(void)
{
    return WL_STR(WARREN_VERSION_MAJOR) "." WL_STR(WARREN_VERSION_MINOR) "." WL_STR(
        WARREN_VERSION_PATCH);
}

int warren_connect(const char *url, const char *key, warren **out, warren_error *err)
{
    struct wl_config cfg = {0};
    const char *rid = getenv("WARREN_REQUEST_ID");
    struct wr_err e;
    warren *w;

    if (out == NULL)
        return wl_failf(err, WR_EINVAL, 0, "connect: no place for the client (out is NULL)");
    if (url == NULL || key == NULL) {
        if (wl_config_load(&cfg, &e) < 0)
            return wl_fail(err, &e, 0, NULL);
    }
    w = xcalloc(1, sizeof(*w));
    if (url == NULL)
        w->url = xstrdup(cfg.endpoint);
    else if (url[0] == '/')
        w->url = xasprintf("unix://%s", url);
    else
        w->url = xstrdup(url);
    key = key != NULL ? key : cfg.key;
    w->key = key != NULL && key[0] != '\0' ? xstrdup(key) : NULL;
    wl_config_fini(&cfg);
    if (wl_http_open(w->url, w->key, &w->http, &e) < 0) {
        warren_close(w);
        return wl_fail(err, &e, 0, NULL);
    }
    if (rid != NULL && rid[0] != '\0')
        warren_set_request_id(w, rid);
    wl_ok(err);
    *out = w;
    return 0;
}

void warren_close(warren *w)
{
    if (w == NULL)
        return;
    wl_http_close(w->http);
    free(w->url);
    free(w->key);
    free(w->request_id);
    free(w);
}

const char *warren_endpoint(const warren *w)
{
    return w->url;
}

void warren_set_request_id(warren *w, const char *id)
{
    free(w->request_id);
    w->request_id = id != NULL ? xstrdup(id) : NULL;
    wl_http_set_request_id(w->http, w->request_id);
}

int wl_http_again(const warren *w, struct wl_http **c, warren_error *out)
{
    struct wr_err e;

    if (wl_http_open(w->url, w->key, c, &e) < 0)
        return wl_fail(out, &e, 0, NULL);
    wl_http_set_request_id(*c, w->request_id);
    return 0;
}

int wl_api(warren *w, const char *method, const char *target, json_t *body,
           const char *const *extra, json_t **res, warren_error *out)
{
    struct wl_http_req req = {
        .method = method, .target = target, .extra = extra, .body_kind = WL_BODY_NONE};
    struct wl_http_resp resp;
    _cleanup_free_ char *text = NULL;
    struct wr_err e;
    int status;

    if (res != NULL)
        *res = NULL;
    if (body != NULL) {
        text = json_dumps(body, JSON_COMPACT);
        if (text == NULL)
            return wl_failf(out, WR_EINTERNAL, 0, "encode request");
        req.content_type = "application/json";
        req.body_kind = WL_BODY_MEM;
        req.body = text;
        req.body_len = strlen(text);
    }
    if (wl_http_request(w->http, &req, &resp, &e) < 0)
        return wl_fail(out, &e, 0, NULL);
    status = resp.status;
    if (status < 200 || status > 299) {
        wl_fail_resp(out, &resp);
        wl_http_resp_fini(&resp);
        return -1;
    }
    if (res != NULL && resp.body_len > 0) {
        json_error_t je;
        *res = json_loadb(resp.body, resp.body_len, 0, &je);
        if (*res == NULL) {
            wl_http_resp_fini(&resp);
            return wl_failf(out, WR_EPROTO, 0, "%s %s: bad JSON from warrend: %s", method, target,
                            je.text);
        }
    }
    wl_http_resp_fini(&resp);
    wl_ok(out);
    return status;
}

int wl_kv_object(const char *what, const char *const *kv, json_t *obj, warren_error *out)
{
    for (; kv != NULL && *kv != NULL; kv++) {
        const char *eq = strchr(*kv, '=');
        if (eq == NULL || eq == *kv)
            return wl_failf(out, WR_EINVAL, 0, "%s `%s` must be KEY=VALUE", what, *kv);
        _cleanup_free_ char *k = xstrndup(*kv, (size_t)(eq - *kv));
        json_t *v = json_string(eq + 1);
        if (v == NULL || json_object_set_new(obj, k, v) < 0)
            return wl_failf(out, WR_EINVAL, 0, "%s `%s` must be UTF-8", what, *kv);
    }
    return 0;
}

char *wl_files_target(const char *id, const char *rest, const char *path)
{
    struct wr_buf b = {0};

    wr_buf_printf(&b, "/v1/sandboxes/%s/%s?path=", id, rest);
    wl_buf_add_escaped(&b, path);
    return wr_buf_steal_str(&b);
}
