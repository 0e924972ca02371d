/* SPDX-License-Identifier: Apache-2.0 */
/* The native REST API v1 (docs/openapi.yaml): routing, auth, and the handlers, on top of the
 * HTTP server (http.h) and the sandbox manager (core/). */
#pragma once

#include "../core/manager.h"
#include "http.h"

struct wr_images;
struct wr_space;
struct wr_e2b;
struct wr_audit;

/* The per-team limits (limits.c, docs/operations.md): token buckets (GCRA) of API requests,
 * of creates (a fork of N costs N) and of file bytes moved, and quotas of concurrent sandboxes
 * and of their memory. A rate of 0 turns a bucket off; a quota of 0 is none. */
enum wr_api_policy { WR_POL_REQUESTS, WR_POL_CREATES, WR_POL_BYTES, WR_POL_N };
struct wr_api_rate {
    double rate;    /* tokens per second */
    uint64_t burst; /* the bucket's size */
};
struct wr_api_limits_cfg {
    struct wr_api_rate rate[WR_POL_N];
    uint32_t max_sandboxes;    /* per team */
    uint64_t max_memory_bytes; /* per team: the sum of its sandboxes' memory limits */
    /* Tests only (WR_TESTING builds): the buckets' clock is the number of milliseconds written
     * in this file, read at each check, instead of CLOCK_MONOTONIC. */
    const char *clock_path;
};
struct api_limits;

/* A size preset of a create (`size`, `warren create --size`): its cpus and memory. */
#define WR_API_SIZES_MAX 8
struct wr_api_size {
    char name[32];
    uint32_t cpu_millis;
    uint64_t memory_bytes;
};
/* The presets a daemon starts with (docs/operations.md): small, medium, large. */
extern const struct wr_api_size wr_api_default_sizes[3];
/* Parse --size NAME=CPUS:MEMORY (e.g. "xl=8:16G") into *out. Returns 0 or -1 (WR_EINVAL). */
int wr_api_size_parse(const char *s, struct wr_api_size *out, struct wr_err *err);

struct wr_api {
    struct wr_manager *mgr;
    struct wr_images *images;
    struct wr_space *space; /* the state filesystem's space (core/space.h), or NULL */
    uv_loop_t *loop;
    const char *version;
    struct wr_e2b *e2b; /* the E2B-compatible API's state (wr_api_e2b_open), or NULL: off */
    /* The domain sandboxes' ports are served under (<port>-<id>.<domain>, E2B's `domain`), or
     * NULL (--domain). */
    const char *domain;
    /* Exposed ports (ports.c): concurrent connections to one sandbox's ports, beyond which a
     * new one is answered 429; 0: WR_API_PORT_CONN_LIMIT. */
    uint32_t port_conn_limit;
    /* The MCP server (mcp.c): the Origin values it accepts besides none (--mcp-origin). */
    const char *const *mcp_origins;
    size_t n_mcp_origins;
    /* Set as warrend starts to stop (its manager is closed next): nothing new may reach the
     * manager, and the MCP tools start no more sub-requests. */
    bool stopping;
    /* The audit trail (core/audit.h) state-changing requests are written to, or NULL: none. */
    struct wr_audit *audit;
    struct wr_api_limits_cfg limits; /* the operator's defaults for every team */
    bool limits_off; /* --limits off: no team's buckets or quotas are checked (nor headers sent) */
    struct api_limits *lim; /* the teams' buckets (limits.c), made at first use */
    struct wr_api_size sizes[WR_API_SIZES_MAX]; /* the create's size presets */
    size_t n_sizes;
    /* What GET /v1/usage bills as a vCPU-second: "allocated", "measured" or "max"
     * (--billed-seconds; NULL: allocated). */
    const char *billed_seconds;
    /* The web console's files (console.c, docs/console.md), served under /console/; NULL or a
     * missing directory: /console/ answers 404 saying so (--console-dir). */
    const char *console_dir;
    /* The node role (h_node.c, docs/deploy.md): this node's id, its labels (a JSON object's
     * text), and the secret a gateway presents (--node-token-file); node_token NULL: not a
     * node, /node/ answers 404. */
    const char *node_id;
    const char *node_incarnation; /* new at every start: a gateway sees a restart */
    const char *node_labels;
    const char *node_token;
    const char *object_store; /* --object-store URL, said in /node/info; NULL: none */
};
#define WR_API_PORT_CONN_LIMIT 1000

/* The node's id that sandboxes' JSON names (`node`), or NULL off the node role (set once, before
 * the server starts). */
extern const char *wr_api_node_id;

/* The server's handler: ctx is a struct wr_api. */
void wr_api_handle(struct wr_http_req *req, void *ctx);
/* The server's on_finish (ctx: a struct wr_api): the request's metrics, its access line (info)
 * and, for a state-changing request, its audit record. */
void wr_api_on_finish(struct wr_http_req *req, const struct wr_http_finish *f, void *ctx);
/* Register the API's metric families (once, before serving). */
void wr_api_metrics_register(void);
/* The handler of the metrics listener (ctx unused): GET /metrics, the registry in the text
 * format; anything else 404 (405 for another method on /metrics). */
void wr_api_metrics_handle(struct wr_http_req *req, void *ctx);

/* Serve the E2B-compatible API (docs/e2b.md) on the same listeners: load the secret that envd
 * access tokens derive from from <state_dir>/e2b.secret (made, 32 random bytes, mode 0600, if
 * missing). Returns 0 or -1 with err. */
int wr_api_e2b_open(struct wr_api *api, const char *state_dir, struct wr_err *err);
/* Free its state (after the HTTP server stopped). NULL-safe on api->e2b. */
void wr_api_e2b_close(struct wr_api *api);

/* Free the teams' buckets (after the HTTP server stopped). */
void wr_api_limits_close(struct wr_api *api);
/* Parse "RATE/s:BURST" (RATE a decimal number, BURST an integer; "0" or "off": no bucket) for
 * --team-rate-*; sizes (RATE and BURST in bytes: K, M, G suffixes) when bytes. Returns 0 or -1
 * with err (WR_EINVAL). */
int wr_api_rate_parse(const char *s, bool bytes, struct wr_api_rate *out, struct wr_err *err);
