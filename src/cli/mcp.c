/* SPDX-License-Identifier: Apache-2.0 */
/* `warren mcp`: an MCP server on stdio (docs/mcp.md) for clients that start their servers as
 * processes. Each JSON-RPC line from stdin is POSTed to the daemon's /mcp with the CLI's
 * endpoint and key (the tool table lives in the daemon, src/api/mcp_tools.c), and each answer
 * is written to stdout as one line; stdout carries nothing else, messages for people go to
 * stderr. Lines are handled one at a time, in order. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/cleanup.h"
#include "../util/json_cleanup.h"
#include "../util/xalloc.h"
#include "cli.h"
#include "client.h"

#define VERB "mcp"

static const char usage_text[] =
    "usage: warren mcp\n\n"
    "Serve MCP (Model Context Protocol) on stdin and stdout, forwarding each message to\n"
    "warrend's /mcp with the configured endpoint and key (WARREN_API_URL, WARREN_API_KEY or\n"
    "`warren login`). Logs go to stderr. Example .mcp.json entry:\n"
    "  {\"mcpServers\": {\"warren\": {\"command\": \"warren\", \"args\": [\"mcp\"]}}}\n";

/* Write one message line to stdout. */
static void emit(json_t *msg)
{
    _cleanup_free_ char *s = json_dumps(msg, JSON_COMPACT);

    if (s == NULL)
        return;
    fputs(s, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

/* A JSON-RPC error for request id (nothing for a notification). */
static void emit_error(json_t *id, int code, const char *msg)
{
    if (id == NULL)
        return;
    json_t *m = json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id, "error", "code",
                          code, "message", msg);
    emit(m);
    json_decref(m);
}

struct session {
    struct cli_http *http;
    char *session_id; /* Mcp-Session-Id from initialize */
    char *version;    /* the protocol version initialize agreed */
};

static void forward(struct session *s, const char *line, size_t len)
{
    _cleanup_json_ json_t *msg = json_loadb(line, len, 0, NULL);
    _cleanup_json_ json_t *ans = NULL;
    _cleanup_free_ char *sid_h = NULL, *ver_h = NULL;
    json_t *id = json_object_get(msg, "id");
    const char *extra[3] = {NULL, NULL, NULL};
    struct cli_http_resp resp = {0};
    struct wr_err err;
    size_t n = 0;

    if (msg == NULL) {
        /* The daemon says what is wrong with it (-32700). */
        id = NULL;
    }
    if (s->session_id != NULL)
        extra[n++] = sid_h = xasprintf("Mcp-Session-Id: %s", s->session_id);
    if (s->version != NULL)
        extra[n++] = ver_h = xasprintf("MCP-Protocol-Version: %s", s->version);
    struct cli_http_req req = {
        .method = "POST",
        .target = "/mcp",
        .content_type = "application/json",
        .accept = "application/json, text/event-stream",
        .extra = extra,
        .body_kind = CLI_BODY_MEM,
        .body = line,
        .body_len = len,
    };
    if (cli_http_request(s->http, &req, &resp, &err) < 0) {
        cli_errorf(VERB ": %s", err.msg);
        emit_error(id, -32603, err.msg);
        return;
    }
    if (resp.status == 202 || resp.body_len == 0) {
        if (resp.status >= 300) {
            cli_errorf(VERB ": warrend answered %d", resp.status);
            emit_error(id, -32603, "warrend answered without a message");
        }
        cli_http_resp_fini(&resp);
        return;
    }
    ans = json_loadb(resp.body, resp.body_len, 0, NULL);
    if (!json_is_object(ans)) {
        cli_errorf(VERB ": warrend answered %d with something that is not JSON-RPC", resp.status);
        emit_error(id, -32603, "warrend's answer is not JSON-RPC");
        cli_http_resp_fini(&resp);
        return;
    }
    if (resp.status >= 400) {
        const char *m =
            json_string_value(json_object_get(json_object_get(ans, "error"), "message"));
        cli_errorf(VERB ": %d: %s", resp.status, m ? m : "(no message)");
    }
    /* An error the daemon could not tie to the request (401, 403, 400 before parsing): it is
     * this request's. */
    if (id != NULL && json_is_null(json_object_get(ans, "id")))
        json_object_set(ans, "id", id);
    if (resp.status == 200 && json_is_string(json_object_get(msg, "method")) &&
        strcmp(json_string_value(json_object_get(msg, "method")), "initialize") == 0) {
        const char *sid = cli_http_resp_header(&resp, "Mcp-Session-Id");
        const char *v =
            json_string_value(json_object_get(json_object_get(ans, "result"), "protocolVersion"));
        free(s->session_id);
        free(s->version);
        s->session_id = sid && !strpbrk(sid, "\r\n") ? xstrdup(sid) : NULL;
        s->version = v && !strpbrk(v, "\r\n") ? xstrdup(v) : NULL;
    }
    emit(ans);
    cli_http_resp_fini(&resp);
}

int cmd_mcp(int argc, char **argv)
{
    struct session s = {0};
    _cleanup_free_ char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc, i = cli_simple_opts(VERB, usage_text, argc, argv, NULL, &rc);

    if (i < 0)
        return rc;
    if (i < argc) {
        cli_errorf(VERB ": takes no arguments (see warren mcp --help)");
        return CLI_EXIT_USAGE;
    }
    s.http = cli_connect_or_complain(VERB);
    if (s.http == NULL)
        return CLI_EXIT_FAIL;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        size_t len = (size_t)n;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            len--;
        if (len == 0)
            continue;
        forward(&s, line, len);
    }
    if (ferror(stdin))
        cli_errorf(VERB ": stdin: %s", strerror(errno));
    free(s.session_id);
    free(s.version);
    cli_http_close(s.http);
    return 0;
}
