/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox's Compose services (docs/compose.md): GET /v1/sandboxes/{id}/services, their states
 * as warren-init has them, and GET .../services/{name}/logs, what a service wrote (its log file,
 * WR_SERVICES_LOGS/<name>.log in the sandbox). */
#include <stdlib.h>
#include <string.h>

#include "../util/xalloc.h"
#include "api_int.h"

struct svc_req {
    struct wr_http_req *req; /* NULL once the client left */
};

static void svc_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct svc_req *s = data;
    s->req = NULL;
}

static void services_listed(void *ctx, json_t *services, const struct wr_err *err)
{
    struct svc_req *s = ctx;

    if (s->req != NULL) {
        wr_http_req_set_data(s->req, NULL, NULL);
        if (err != NULL)
            api_error(s->req, err);
        else
            wr_http_respond_json(s->req, 200, json_pack("{s:O}", "services", services));
    }
    free(s);
}

void api_services_list(struct api_call *c)
{
    struct svc_req *s = xcalloc(1, sizeof(*s));

    s->req = c->req;
    wr_http_req_set_data(c->req, s, svc_closed);
    wr_manager_services(c->sb, services_listed, s);
}

void api_service_logs(struct api_call *c)
{
    const char *name = c->seg[3];
    char path[128];

    if (!api_service_name_ok(name)) {
        api_fail(c->req, WR_EINVAL, "`%s` is not a service's name", name);
        return;
    }
    if (!wr_manager_sandbox_has_service(c->api->mgr, c->sb, name)) {
        api_fail(c->req, WR_ENOTFOUND, "sandbox `%s` has no service `%s`", c->seg[1], name);
        return;
    }
    snprintf(path, sizeof(path), "%s/%s.log", WR_SERVICES_LOGS, name);
    api_file_download(c->req, c->sb, path, "0"); /* the sandbox's root, whatever its passwd says */
}
