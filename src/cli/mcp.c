/* SPDX-License-Identifier: Apache-2.0 */
/* `warren mcp`: an MCP server on stdio (docs/mcp.md) for clients that start their servers as
 * processes. Each JSON-RPC line from stdin is POSTed to the daemon's /mcp with the CLI's
 * endpoint and key (the tool table lives in the daemon, src/api/mcp_tools.c), and each answer
 * is written to stdout as one line; stdout carries nothing else, messages for people go to
 * stderr. initialize, notifications and responses are forwarded in order on the main thread;
 * every other request gets a thread and a connection of its own (at most MAX_INFLIGHT at once),
 * so a long tool call does not hold back the next one, and notifications/cancelled reaches the
 * daemon (which gives the call up) while the call runs; a cancelled call's answer is not
 * written. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/cleanup.h"
#include "../util/json_cleanup.h"
#include "../util/xalloc.h"
#include "cli.h"
#include "client.h"

#define VERB         "mcp"
#define MAX_INFLIGHT 16

static const char usage_text[] =
    "usage: warren mcp\n\n"
    "Serve MCP (Model Context Protocol) on stdin and stdout, forwarding each message to\n"
    "warrend's /mcp with the configured endpoint and key (WARREN_API_URL, WARREN_API_KEY or\n"
    "`warren login`). Logs go to stderr. Example .mcp.json entry:\n"
    "  {\"mcpServers\": {\"warren\": {\"command\": \"warren\", \"args\": [\"mcp\"]}}}\n";

/* The requests in flight on threads of their own. */
struct pending {
    json_t *id;
    bool cancelled;
    struct pending *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* stdout, the session, the pending */
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static struct pending *pending;
static unsigned inflight;

/* Write one message line to stdout. */
static void emit(json_t *msg)
{
    _cleanup_free_ char *s = json_dumps(msg, JSON_COMPACT);

    if (s == NULL)
        return;
    pthread_mutex_lock(&lock);
    fputs(s, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    pthread_mutex_unlock(&lock);
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
    struct cli_http *http; /* the main thread's connection */
    char *session_id;      /* Mcp-Session-Id from initialize */
    char *version;         /* the protocol version initialize agreed */
};

static bool is_cancelled(struct pending *p)
{
    bool c;

    if (p == NULL)
        return false;
    pthread_mutex_lock(&lock);
    c = p->cancelled;
    pthread_mutex_unlock(&lock);
    return c;
}

/* Forward one message on connection http and write its answer (none for a request that was
 * cancelled meanwhile, p). */
static void forward(struct session *s, struct cli_http *http, const char *line, size_t len,
                    struct pending *p)
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
    pthread_mutex_lock(&lock);
    if (s->session_id != NULL)
        extra[n++] = sid_h = xasprintf("Mcp-Session-Id: %s", s->session_id);
    if (s->version != NULL)
        extra[n++] = ver_h = xasprintf("MCP-Protocol-Version: %s", s->version);
    pthread_mutex_unlock(&lock);
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
    if (cli_http_request(http, &req, &resp, &err) < 0) {
        if (is_cancelled(p))
            return;
        cli_errorf(VERB ": %s", err.msg);
        emit_error(id, -32603, err.msg);
        return;
    }
    if (is_cancelled(p)) {
        cli_http_resp_fini(&resp);
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
        pthread_mutex_lock(&lock);
        free(s->session_id);
        free(s->version);
        s->session_id = sid && !strpbrk(sid, "\r\n") ? xstrdup(sid) : NULL;
        s->version = v && !strpbrk(v, "\r\n") ? xstrdup(v) : NULL;
        pthread_mutex_unlock(&lock);
    }
    emit(ans);
    cli_http_resp_fini(&resp);
}

struct job {
    struct session *s;
    struct pending *p;
    char *line;
    size_t len;
};

static void *job_run(void *arg)
{
    struct job *j = arg;
    struct cli_http *http = NULL;
    struct wr_err err;

    if (cli_connect(&http, &err) < 0) {
        cli_errorf(VERB ": %s", err.msg);
        if (!is_cancelled(j->p))
            emit_error(j->p->id, -32603, err.msg);
    } else {
        forward(j->s, http, j->line, j->len, j->p);
        cli_http_close(http);
    }
    pthread_mutex_lock(&lock);
    for (struct pending **pp = &pending; *pp != NULL; pp = &(*pp)->next)
        if (*pp == j->p) {
            *pp = j->p->next;
            break;
        }
    inflight--;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    json_decref(j->p->id);
    free(j->p);
    free(j->line);
    free(j);
    return NULL;
}

/* A request other than initialize: on a thread of its own. Returns false if none could be
 * started (then the caller forwards it itself). */
static bool start_job(struct session *s, json_t *id, const char *line, size_t len)
{
    struct job *j = xcalloc(1, sizeof(*j));
    pthread_attr_t attr;
    pthread_t t;
    int rc;

    j->s = s;
    j->p = xcalloc(1, sizeof(*j->p));
    j->p->id = json_incref(id);
    j->line = xmalloc(len + 1);
    memcpy(j->line, line, len);
    j->line[len] = '\0';
    j->len = len;
    pthread_mutex_lock(&lock);
    while (inflight >= MAX_INFLIGHT)
        pthread_cond_wait(&changed, &lock);
    j->p->next = pending;
    pending = j->p;
    inflight++;
    pthread_mutex_unlock(&lock);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, job_run, j);
    pthread_attr_destroy(&attr);
    if (rc == 0)
        return true;
    pthread_mutex_lock(&lock);
    pending = j->p->next;
    inflight--;
    pthread_mutex_unlock(&lock);
    json_decref(j->p->id);
    free(j->p);
    free(j->line);
    free(j);
    return false;
}

/* notifications/cancelled: the request's answer, if it is still to come, is not written. */
static void mark_cancelled(json_t *msg)
{
    json_t *rid = json_object_get(json_object_get(msg, "params"), "requestId");

    pthread_mutex_lock(&lock);
    for (struct pending *p = pending; p != NULL && rid != NULL; p = p->next)
        if (json_equal(p->id, rid))
            p->cancelled = true;
    pthread_mutex_unlock(&lock);
}

/* One line from stdin. */
static void handle(struct session *s, const char *line, size_t len)
{
    _cleanup_json_ json_t *msg = json_loadb(line, len, 0, NULL);
    const char *method = json_string_value(json_object_get(msg, "method"));
    json_t *id = json_object_get(msg, "id");

    if (method != NULL && id == NULL && strcmp(method, "notifications/cancelled") == 0)
        mark_cancelled(msg);
    if (method != NULL && id != NULL && strcmp(method, "initialize") != 0 &&
        start_job(s, id, line, len))
        return;
    forward(s, s->http, line, len, NULL);
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
        handle(&s, line, len);
    }
    if (ferror(stdin))
        cli_errorf(VERB ": stdin: %s", strerror(errno));
    /* The answers still to come are written before the end. */
    pthread_mutex_lock(&lock);
    while (inflight > 0)
        pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
    free(s.session_id);
    free(s.version);
    cli_http_close(s.http);
    return 0;
}
