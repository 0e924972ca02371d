/* SPDX-License-Identifier: Apache-2.0 */
/* The native REST API v1 (docs/openapi.yaml): routing, auth, and the handlers, on top of the
 * HTTP server (http.h) and the sandbox manager (core/). */
#pragma once

#include "../core/manager.h"
#include "../store/store.h"
#include "http.h"

struct wr_images;

struct wr_api {
    struct wr_manager *mgr;
    struct wr_images *images;
    struct wr_store *store;
    uv_loop_t *loop;
    const char *version;
};

/* The server's handler: ctx is a struct wr_api. */
void wr_api_handle(struct wr_http_req *req, void *ctx);
