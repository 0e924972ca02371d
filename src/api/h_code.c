/* SPDX-License-Identifier: Apache-2.0 */
/* The native code-interpreter API: POST /v1/sandboxes/{id}/code (a cell, answered with the
 * NDJSON lines of E2B's /execute, streamed) and the contexts under .../code/contexts. Each is
 * a request to warren-interp, the server of the code-interpreter-v1 template on port 49999
 * inside the sandbox (src/interp/), through the exposed-port proxy (ports.c): the body goes as
 * it is (the server takes the native names `env` and `timeout` beside E2B's), the answer comes
 * back as it is, its errors already in the API's {"code","message"} shape. */
#include <string.h>

#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "api_int.h"

/* A context id as the server makes them (a UUID): letters, digits and '-', so it goes into
 * the upstream path as it is. */
static bool context_id_ok(const char *s)
{
    size_t n = strlen(s);

    return n > 0 && n <= 64 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") == n;
}

void api_code_execute(struct api_call *c)
{
    api_port_code(c->api, c->req, c->sb, "/execute");
}

void api_code_contexts_list(struct api_call *c)
{
    api_port_code(c->api, c->req, c->sb, "/contexts");
}

void api_code_context_create(struct api_call *c)
{
    api_port_code(c->api, c->req, c->sb, "/contexts");
}

/* seg: sandboxes/{id}/code/contexts/{ctx}[/restart] */
static void context_call(struct api_call *c, const char *suffix)
{
    const char *ctx = c->seg[4];

    if (!context_id_ok(ctx)) {
        api_fail(c->req, WR_ENOTFOUND, "context `%s` not found", ctx);
        return;
    }
    _cleanup_free_ char *target = xasprintf("/contexts/%s%s", ctx, suffix);
    api_port_code(c->api, c->req, c->sb, target);
}

void api_code_context_delete(struct api_call *c)
{
    context_call(c, "");
}

void api_code_context_restart(struct api_call *c)
{
    context_call(c, "/restart");
}
