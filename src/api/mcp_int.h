/* SPDX-License-Identifier: Apache-2.0 */
/* The MCP server's internals: the transport and JSON-RPC (mcp.c) and the tool table
 * (mcp_tools.c). A tool does its work through sub-requests of the native API (http.h
 * wr_http_sub_*) made with the caller's own credentials, so it runs the same handler, with the
 * same checks and the same team, as the REST call it names. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../util/buf.h"
#include "api_int.h"

struct mcp_call;

/* A tool: its name, title and description, its input's JSON Schema (JSON text; the arguments
 * are checked against it before run), its annotations, and what it does. run answers through
 * mcp_done/mcp_fail, at once or after sub-requests. */
struct mcp_tool {
    const char *name;
    const char *title;
    const char *description;
    const char *input_schema;
    bool read_only, destructive, idempotent, open_world;
    void (*run)(struct mcp_call *mc);
};

/* The table, in the order tools/list gives it (mcp_tools.c). */
extern const struct mcp_tool mcp_tools[];
extern const size_t mcp_ntools;

/* What comes back from a sub-request: the answer, for the continuation to read. */
typedef void (*mcp_cont_fn)(struct mcp_call *mc, const struct wr_http_sub_resp *r);

/* One tools/call in progress. It is mcp.c's: a tool reads the fields above the line and keeps
 * its own state below it. */
struct mcp_call {
    struct wr_api *api;
    struct wr_http_req *req; /* NULL once the client left (then nothing more runs) */
    json_t *id;              /* the JSON-RPC id */
    const struct mcp_tool *tool;
    json_t *args;                 /* checked against the tool's schema; an object */
    char *auth_name, *auth_value; /* the caller's credential header, or NULL (unix socket) */
    bool is_unix;
    char *base_url; /* http://<Host of the MCP request> */
    char *session;  /* its Mcp-Session-Id, or NULL: what notifications/cancelled must name */
    struct mcp_call *lprev, *lnext; /* the calls in progress (mcp.c) */
    char req_id[72];
    struct wr_http_sub *sub; /* the sub-request in flight, or NULL */
    mcp_cont_fn cont;
    mcp_cont_fn on_data; /* optional: progress of the sub-request's body */
    uv_timer_t timer;    /* for the tools that wait (mcp_timer) */
    void (*on_timer)(struct mcp_call *mc);
    /* Called when the client leaves before the answer (optional): what to undo. */
    void (*on_abandon)(struct mcp_call *mc);
    /* ---- the tool's own state ---- */
    char *sandbox_id;     /* a sandbox the tool made or names */
    json_t *acc;          /* anything the tool accumulates (freed with the call) */
    bool created;         /* the tool made sandbox_id */
    mcp_cont_fn next;     /* a continuation the tool keeps for later */
    struct wr_buf out[2]; /* a command's stdout and stderr */
    bool trunc[2];
    json_int_t pid; /* the process a tool started (0: none yet) */
    bool ended;     /* it ended */
};

/* Send a sub-request of the native API as the caller: method, target (already escaped), a JSON
 * body (taken; NULL: none). cont gets the answer. */
void mcp_sub_json(struct mcp_call *mc, const char *method, const char *target, json_t *body,
                  mcp_cont_fn cont);
/* The same with raw body bytes (copied) and a cap on the answer kept (0: the default). */
void mcp_sub_raw(struct mcp_call *mc, const char *method, const char *target, const void *body,
                 size_t len, const char *content_type, size_t max_body, mcp_cont_fn cont);
/* Send a sub-request whose answer nobody waits for (it goes on after the call is over). */
void mcp_sub_detached(struct mcp_call *mc, const char *method, const char *target, json_t *body);
/* Drop the first n bytes of what the sub-request in flight answered so far. */
void mcp_sub_consume(struct mcp_call *mc, size_t n);
/* Give up the sub-request in flight (no continuation runs for it). */
void mcp_sub_cancel(struct mcp_call *mc);
/* What the sub-request in flight has answered so far. */
void mcp_sub_peek(struct mcp_call *mc, struct wr_http_sub_resp *out);
/* Call on_timer(mc) after ms (once; again replaces it); mcp_timer_stop stops it. */
void mcp_timer(struct mcp_call *mc, uint64_t ms, void (*on_timer)(struct mcp_call *mc));
void mcp_timer_stop(struct mcp_call *mc);

/* Finish the call with a result: structured (taken; an object) as structuredContent and as a
 * JSON text content item after the items of `content` (taken; an array or NULL). */
void mcp_done(struct mcp_call *mc, json_t *structured, json_t *content, bool is_error);
/* Finish it with a tool error (isError: true) whose text is the formatted message. */
void mcp_fail(struct mcp_call *mc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* If r is not a 2xx answer, finish the call with the API's error ({"code","message"}) as a tool
 * error and return true. */
bool mcp_api_failed(struct mcp_call *mc, const struct wr_http_sub_resp *r);
/* r's body parsed as JSON (a new reference), or NULL. */
json_t *mcp_resp_json(const struct wr_http_sub_resp *r);

/* Append s percent-encoded for a path segment or a query value. */
void mcp_esc(struct wr_buf *b, const char *s);

/* Check args against the JSON Schema text schema (the subset the table uses: object with
 * properties, required, additionalProperties false; string, integer, number, boolean, array,
 * object; enum, minimum, maximum, minLength, pattern (POSIX extended), items,
 * additionalProperties of a type). Returns 0,
 * or -1 with a message in msg. */
int mcp_check_args(const char *schema, json_t *args, char *msg, size_t n);
