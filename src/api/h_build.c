/* SPDX-License-Identifier: Apache-2.0 */
/* POST /v1/templates/build?name=NAME[&replace=true][&shared=true][&dockerfile=PATH]
 * [&runtime=ns|gvisor]: a template from the Dockerfile subset (runtime: its sandboxes' default
 * isolation backend). The body is the Dockerfile itself, or (Content-Type
 * application/x-tar, optionally gzip or zstd) a build context holding it, streamed to a file
 * first. The answer streams the build as NDJSON: step events, the steps' output, then one `done`
 * or `error` event. Errors found before the first step (a name taken, checked before the body is
 * read; a bad Dockerfile) are a plain JSON error with their status. If the client leaves, the
 * build goes on. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../core/images.h"
#include "../core/manager.h"
#include "../core/space.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "api_int.h"
#include "http.h"

#define MAX_DOCKERFILE (1u << 20)
#define MAX_CONTEXT    (4ull << 30)

struct build_ctx {
    struct wr_api *api;
    struct wr_http_req *req; /* NULL once the client left */
    char team[128];
    char *name, *dockerfile_path, *tar_path, *runtime;
    bool replace, shared, streaming, admin;
    int fd; /* the context being received */
    uint64_t received;
    uint8_t carry[3][4];
    size_t ncarry[3];
};

static void build_ctx_free(struct build_ctx *b)
{
    if (b->fd >= 0)
        close(b->fd);
    free(b->name);
    free(b->dockerfile_path);
    free(b->tar_path);
    free(b->runtime);
    free(b);
}

static void client_left(struct wr_http_req *req, void *data, bool aborted)
{
    struct build_ctx *b = data;
    b->req = NULL;
}

static void send_event(struct build_ctx *b, json_t *ev)
{
    char *s;

    if (b->req == NULL) {
        json_decref(ev);
        return;
    }
    if (!b->streaming) {
        wr_http_resp_start(b->req, 200, "application/x-ndjson", -1);
        b->streaming = true;
    }
    s = json_dumps(ev, JSON_COMPACT);
    wr_http_resp_write(b->req, s, strlen(s));
    wr_http_resp_write(b->req, "\n", 1);
    free(s);
    json_decref(ev);
}

static void on_step(void *ctx, size_t i, size_t n, unsigned line, const char *text, bool cached)
{
    send_event(ctx, json_pack("{s:s,s:I,s:I,s:I,s:s,s:b}", "type", "step", "step",
                              (json_int_t)i + 1, "of", (json_int_t)n, "line", (json_int_t)line,
                              "instruction", text, "cached", cached));
}

static void on_output(void *ctx, int stream, const uint8_t *p, size_t len)
{
    struct build_ctx *b = ctx;
    struct wr_buf out = {0};
    int idx = stream == 2 ? 2 : 1;

    if (b->req == NULL)
        return;
    api_utf8_append(&out, b->carry[idx], &b->ncarry[idx], p, len, false);
    if (out.len > 0)
        send_event(b, json_pack("{s:s,s:s%}", "type", idx == 2 ? "stderr" : "stdout", "data",
                                (const char *)out.data, out.len));
    free(out.data);
}

static void on_done(void *ctx, const struct wr_image_rec *tpl, const struct wr_build_fail *fail,
                    const struct wr_err *err)
{
    struct build_ctx *b = ctx;
    json_t *j;

    if (b->req != NULL) {
        wr_http_req_set_data(b->req, NULL, NULL);
        if (err == NULL) {
            j = json_loads(tpl->layers_json, 0, NULL);
            send_event(b, json_pack("{s:s,s:{s:s,s:s,s:b,s:I,s:I}}", "type", "done", "template",
                                    "name", tpl->name, "kind", "template", "shared", tpl->shared,
                                    "size_bytes", (json_int_t)tpl->size_bytes, "layers",
                                    (json_int_t)json_array_size(j)));
            json_decref(j);
            wr_http_resp_end(b->req);
        } else if (b->streaming) {
            const char *code;
            int status = api_error_status(err, &code);
            j = json_pack("{s:s,s:s,s:o,s:i}", "type", "error", "code", code, "message",
                          api_json_message(err->msg), "status", status);
            if (fail != NULL) {
                if (fail->step)
                    json_object_set_new(j, "step", json_integer(fail->step));
                json_object_set_new(j, "line", json_integer(fail->line));
                if (fail->step && (fail->exit_code || fail->signal))
                    json_object_set_new(j, "exit_code", json_integer(fail->exit_code));
            }
            send_event(b, j);
            wr_http_resp_end(b->req);
        } else {
            api_error(b->req, err);
        }
    }
    build_ctx_free(b);
}

static const struct wr_build_events events = {
    .on_step = on_step,
    .on_output = on_output,
    .on_done = on_done,
};

static void run_build(struct build_ctx *b, const char *dockerfile)
{
    struct wr_build_req br = {
        .team = b->team,
        .name = b->name,
        .dockerfile = dockerfile,
        .dockerfile_path = b->dockerfile_path,
        .context_tar = b->tar_path,
        .replace = b->replace,
        .shared = b->shared,
        .admin = b->admin,
        .runtime = b->runtime,
    };

    if (b->fd >= 0) {
        close(b->fd);
        b->fd = -1;
    }
    if (b->req != NULL)
        wr_http_req_set_data(b->req, b, client_left);
    wr_manager_build(b->api->mgr, &br, &events, b);
}

static void dockerfile_body(struct wr_http_req *req, const char *body, size_t len)
{
    struct build_ctx *b = wr_http_req_data(req);
    run_build(b, body);
}

static void context_data(struct wr_http_req *req, const char *p, size_t n)
{
    struct build_ctx *b = wr_http_req_data(req);
    struct wr_err err = {0};

    if (b->fd < 0)
        return;
    b->received += n;
    if (b->received > MAX_CONTEXT ||
        wr_space_admit(b->api->space, "store the build context", n, &err) < 0 ||
        wr_write_all(b->fd, p, n) < 0) {
        if (b->received <= MAX_CONTEXT && err.kind == WR_EOK)
            wr_err_sys(&err, "store the build context");
        close(b->fd);
        b->fd = -1;
        (void)unlink(b->tar_path);
        if (b->received > MAX_CONTEXT)
            api_fail(req, WR_ETOOBIG, "the build context is over %llu GiB",
                     (unsigned long long)(MAX_CONTEXT >> 30));
        else
            api_error(req, &err);
    }
}

static void context_end(struct wr_http_req *req)
{
    struct build_ctx *b = wr_http_req_data(req);

    if (b->fd < 0)
        return; /* answered already */
    run_build(b, NULL);
}

static void upload_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct build_ctx *b = data;
    if (b->tar_path != NULL)
        (void)unlink(b->tar_path);
    build_ctx_free(b);
}

static bool is_archive(const char *ct)
{
    static const char *const types[] = {"application/x-tar", "application/tar",
                                        "application/gzip",  "application/x-gzip",
                                        "application/zstd",  NULL};
    if (ct == NULL)
        return false;
    for (const char *const *t = types; *t; t++)
        if (strncasecmp(ct, *t, strlen(*t)) == 0)
            return true;
    return false;
}

void api_template_build(struct api_call *call)
{
    struct wr_api *api = call->api;
    struct wr_http_req *req = call->req;
    const struct wr_caller *who = &call->who;
    const char *name = wr_http_req_query(req, "name");
    const char *replace = wr_http_req_query(req, "replace");
    const char *shared = wr_http_req_query(req, "shared");
    const char *dfpath = wr_http_req_query(req, "dockerfile");
    const char *runtime = wr_http_req_query(req, "runtime");
    _cleanup_free_ char *replaces = NULL;
    struct build_ctx *b;
    struct wr_err err;

    if (name == NULL || name[0] == '\0') {
        api_fail(req, WR_EINVAL, "`name` (query) names the template to build");
        return;
    }
    for (int i = 0; i < 2; i++) {
        const char *v = i == 0 ? replace : shared;
        if (v != NULL && strcmp(v, "true") != 0 && strcmp(v, "false") != 0) {
            api_fail(req, WR_EINVAL, "`%s` is true or false", i == 0 ? "replace" : "shared");
            return;
        }
    }
    if (shared != NULL && strcmp(shared, "true") == 0 && !who->admin) {
        api_forbid_shared(req);
        return;
    }
    if (runtime != NULL && wr_manager_runtime_allowed(api->mgr, runtime, &err) < 0) {
        api_error(req, &err);
        return;
    }
    /* Before reading a large context: is the name the team's to take? */
    {
        struct wr_images_claim c = {.team = who->team,
                                    .name = name,
                                    .replace = replace != NULL && strcmp(replace, "true") == 0,
                                    .shared = shared != NULL && strcmp(shared, "true") == 0};
        if (wr_images_claim(api->images, &c, &replaces, &err) < 0) {
            api_error(req, &err);
            return;
        }
    }
    b = xcalloc(1, sizeof(*b));
    b->api = api;
    b->req = req;
    b->fd = -1;
    snprintf(b->team, sizeof(b->team), "%s", who->team);
    b->admin = who->admin;
    b->name = xstrdup(name);
    b->replace = replace != NULL && strcmp(replace, "true") == 0;
    b->shared = shared != NULL && strcmp(shared, "true") == 0;
    b->dockerfile_path = dfpath ? xstrdup(dfpath) : NULL;
    b->runtime = runtime ? xstrdup(runtime) : NULL;
    if (!is_archive(wr_http_req_header(req, "Content-Type"))) {
        wr_http_req_set_data(req, b, upload_closed);
        wr_http_req_read_body(req, MAX_DOCKERFILE, dockerfile_body);
        return;
    }
    {
        _cleanup_free_ char *tmp = wr_images_tmp(api->images);
        b->tar_path = xasprintf("%s.tar", tmp);
    }
    b->fd = open(b->tar_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (b->fd < 0) {
        api_fail(req, WR_ESYS, "store the build context: %s", strerror(errno));
        free(b->tar_path);
        b->tar_path = NULL;
        build_ctx_free(b);
        return;
    }
    wr_http_req_set_data(req, b, upload_closed);
    wr_http_req_stream_body(req, context_data, context_end);
}
