/* SPDX-License-Identifier: Apache-2.0 */
/* Templates from OCI images: POST /v1/templates/import?name=N (the tarball as the body, streamed
 * to a file under <state>/layers/.tmp) and POST /v1/templates/pull {"name", "image", ...}. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/images.h"
#include "../core/oci.h"
#include "../core/space.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/xalloc.h"
#include "api_int.h"
#include "http.h"

/* One import or pull; if the client leaves, the work goes on and nobody hears of it. */
struct oci_ctx {
    struct wr_api *api;
    struct wr_http_req *req;
    struct wr_caller who;
    bool replace, shared, running;
    char *name;
    /* import: the body's file */
    char *path;
    int fd;
    struct wr_err werr; /* a failed write of the body */
    bool failed;
};

static void oci_ctx_free(struct oci_ctx *c)
{
    if (c->fd >= 0)
        close(c->fd);
    if (c->path != NULL)
        (void)unlink(c->path);
    free(c->path);
    free(c->name);
    free(c);
}

static void oci_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct oci_ctx *c = data;

    c->req = NULL;
    if (!c->running)
        oci_ctx_free(c);
}

static void oci_error(struct wr_http_req *req, const struct wr_err *err)
{
    struct wr_err e = *err;

    /* Names from an archive or a registry may be any bytes: the message must be valid JSON. */
    for (char *p = e.msg; *p; p++)
        if ((unsigned char)*p >= 0x80 || (unsigned char)*p < 0x20)
            *p = '?';
    /* The registry's own refusal (401, 403, unreachable) is the upstream's, not ours. */
    if (e.kind == WR_EPROTO)
        api_fail(req, WR_EUPSTREAM, "%s", e.msg);
    else
        api_error(req, &e);
}

static void oci_done(void *ctx, const struct wr_image_rec *tpl, const struct wr_err *err)
{
    struct oci_ctx *c = ctx;
    struct wr_http_req *req = c->req;

    if (req != NULL) {
        wr_http_req_set_data(req, NULL, NULL);
        if (err != NULL)
            oci_error(req, err);
        else
            wr_http_respond_json(req, 201, api_template_json(c->api, &c->who, tpl));
    }
    c->running = false;
    oci_ctx_free(c);
}

static bool truthy(const char *v)
{
    return v != NULL && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

/* ---- import -------------------------------------------------------------------------------- */

static void import_data(struct wr_http_req *req, const char *p, size_t n)
{
    struct oci_ctx *c = wr_http_req_data(req);

    if (c == NULL || c->failed)
        return;
    if (wr_space_admit(c->api->space, "store the archive", n, &c->werr) < 0)
        c->failed = true;
    else if (wr_write_all(c->fd, p, n) < 0) {
        wr_err_sys(&c->werr, "store the archive");
        c->failed = true;
    }
}

static void import_end(struct wr_http_req *req)
{
    struct oci_ctx *c = wr_http_req_data(req);
    _cleanup_free_ char *path = NULL;
    struct wr_oci_request r;

    if (c == NULL)
        return;
    close(c->fd);
    c->fd = -1;
    if (c->failed) {
        wr_http_req_set_data(req, NULL, NULL);
        api_error(req, &c->werr);
        oci_ctx_free(c);
        return;
    }
    /* The core owns the file from here, and removes it. */
    path = steal_pointer(&c->path);
    r = (struct wr_oci_request){.name = c->name,
                                .team = c->who.team,
                                .admin = c->who.admin,
                                .replace = c->replace,
                                .shared = c->shared,
                                .archive = path};
    c->running = true;
    wr_oci_start(c->api->mgr, &r, oci_done, c);
}

void api_template_import(struct api_call *call)
{
    struct wr_api *api = call->api;
    struct wr_http_req *req = call->req;
    const struct wr_caller *who = &call->who;
    struct wr_oci_request r = {.name = wr_http_req_query(req, "name"),
                               .team = who->team,
                               .admin = who->admin,
                               .replace = truthy(wr_http_req_query(req, "replace")),
                               .shared = truthy(wr_http_req_query(req, "shared"))};
    struct oci_ctx *c;
    struct wr_err err;

    if (r.name == NULL) {
        api_fail(req, WR_EINVAL, "the query parameter `name` is required");
        return;
    }
    if (r.shared && !who->admin) {
        api_forbid_shared(req);
        return;
    }
    /* Before reading a large body: is the name right and free? */
    if (wr_oci_check(api->mgr, &r, &err) < 0) {
        api_error(req, &err);
        return;
    }
    c = xcalloc(1, sizeof(*c));
    c->api = api;
    c->req = req;
    c->who = *who;
    c->replace = r.replace;
    c->shared = r.shared;
    c->name = xstrdup(r.name);
    c->path = wr_images_tmp(api->images);
    c->fd = open(c->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (c->fd < 0) {
        wr_err_sys(&err, "store the archive");
        free(c->path);
        c->path = NULL;
        oci_ctx_free(c);
        api_error(req, &err);
        return;
    }
    wr_http_req_set_data(req, c, oci_closed);
    wr_http_req_stream_body(req, import_data, import_end);
}

/* ---- pull ---------------------------------------------------------------------------------- */

void api_template_pull(struct api_call *call)
{
    static const char *const allowed[] = {"name",     "image",   "username", "password",
                                          "insecure", "replace", "shared",   NULL};
    static const char *const strings[] = {"name", "image", "username", "password"};
    struct wr_http_req *req = call->req;
    struct wr_oci_request r = {0};
    struct oci_ctx *c;
    json_t *j, *v;

    j = api_parse_object(req, call->body, call->len);
    if (j == NULL || api_only_keys(req, j, allowed) < 0)
        goto out;
    for (size_t i = 0; i < WR_ARRAY_SIZE(strings); i++) {
        v = json_object_get(j, strings[i]);
        if (v != NULL && !json_is_null(v) && !json_is_string(v)) {
            api_fail(req, WR_EINVAL, "`%s` must be a string", strings[i]);
            goto out;
        }
    }
    for (size_t i = 0; i < 3; i++) {
        const char *k = i == 0 ? "insecure" : i == 1 ? "replace" : "shared";
        v = json_object_get(j, k);
        if (v != NULL && !json_is_null(v) && !json_is_boolean(v)) {
            api_fail(req, WR_EINVAL, "`%s` must be a boolean", k);
            goto out;
        }
    }
    r.name = json_string_value(json_object_get(j, "name"));
    r.image = json_string_value(json_object_get(j, "image"));
    r.username = json_string_value(json_object_get(j, "username"));
    r.password = json_string_value(json_object_get(j, "password"));
    r.insecure = json_is_true(json_object_get(j, "insecure"));
    r.replace = json_is_true(json_object_get(j, "replace"));
    r.shared = json_is_true(json_object_get(j, "shared"));
    r.team = call->who.team;
    r.admin = call->who.admin;
    if (r.name == NULL || r.image == NULL || r.image[0] == '\0') {
        api_fail(req, WR_EINVAL, "`name` and `image` are required");
        goto out;
    }
    if (r.shared && !r.admin) {
        api_forbid_shared(req);
        goto out;
    }
    c = xcalloc(1, sizeof(*c));
    c->api = call->api;
    c->req = req;
    c->who = call->who;
    c->fd = -1;
    c->running = true;
    wr_http_req_set_data(req, c, oci_closed);
    wr_oci_start(call->api->mgr, &r, oci_done, c);
out:
    json_decref(j);
}
