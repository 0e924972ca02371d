/* SPDX-License-Identifier: Apache-2.0 */
/* The MCP server's tools (docs/mcp.md): the one table that `/mcp` and `warren mcp` serve, in
 * the order tools/list gives it. Each tool is a sequence of sub-requests of the native API
 * (docs/openapi.yaml) made with the caller's credential (mcp.c: mcp_sub_*), so a tool does
 * exactly what the REST call does, for the caller's team only: sandbox_exec is POST
 * /v1/sandboxes/{id}/exec, sandbox_read_file GET .../files, and so on. Each answer is a
 * structuredContent object mirrored as JSON text; a failure of the API is a tool error
 * (isError) carrying its code and message. */
#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>

#include "../util/b64.h"
#include "../util/cleanup.h"
#include "../util/json_cleanup.h"
#include "../util/utf8.h"
#include "../util/xalloc.h"
#include "mcp_int.h"

#define OUT_DEFAULT   65536       /* output bytes per stream a tool gives back by default */
#define OUT_MAX       (4u << 20)  /* at most */
#define FILE_DEFAULT  (1u << 20)  /* file bytes sandbox_read_file gives back by default */
#define FILE_MAX      (16u << 20) /* at most */
#define ATTACH_KEEP   (8u << 20)  /* of an attach stream (JSON lines) */
#define CODE_TEMPLATE "code-interpreter-v1"

/* The shell line every command runs through: bash as a login shell where there is one. */
#define SHELL_WRAP "command -v bash >/dev/null 2>&1 && exec bash -lc \"$1\"; exec sh -c \"$1\""

/* ---- helpers ------------------------------------------------------------------------------- */

static const char *arg_str(struct mcp_call *mc, const char *k)
{
    return json_string_value(json_object_get(mc->args, k));
}

static json_t *arg(struct mcp_call *mc, const char *k)
{
    json_t *v = json_object_get(mc->args, k);
    return v && !json_is_null(v) ? v : NULL;
}

/* Copy args[from] into body[to] when given. */
static void copy_arg(struct mcp_call *mc, json_t *body, const char *from, const char *to)
{
    json_t *v = arg(mc, from);
    if (v != NULL)
        json_object_set(body, to, v);
}

/* "/v1/sandboxes/<id><rest>" */
static char *sb_path(const char *id, const char *rest)
{
    struct wr_buf b = {0};

    wr_buf_puts(&b, "/v1/sandboxes/");
    mcp_esc(&b, id);
    wr_buf_puts(&b, rest);
    return wr_buf_steal_str(&b);
}

static const char *sid(struct mcp_call *mc)
{
    return mc->sandbox_id ? mc->sandbox_id : arg_str(mc, "sandbox_id");
}

/* The API's sandbox object as the tools show it. */
static json_t *sandbox_brief(json_t *s)
{
    json_t *o = json_object();
    static const char *const keys[] = {"template",  "state",    "expires_at",  "cpus",
                                       "memory_mb", "metadata", "paused_mode", NULL};

    json_object_set(o, "sandbox_id", json_object_get(s, "id"));
    for (const char *const *k = keys; *k; k++)
        if (json_object_get(s, *k) != NULL && !json_is_null(json_object_get(s, *k)))
            json_object_set(o, *k, json_object_get(s, *k));
    return o;
}

/* The argv of a shell command line. */
static json_t *shell_cmd(const char *command)
{
    return json_pack("[s,s,s,s,s]", "/bin/sh", "-c", SHELL_WRAP, "sh", command);
}

/* The exec body of a command tool: cmd, cwd, env, user. */
static json_t *exec_body(struct mcp_call *mc)
{
    json_t *b = json_pack("{s:o}", "cmd", shell_cmd(arg_str(mc, "command")));

    copy_arg(mc, b, "cwd", "cwd");
    copy_arg(mc, b, "env", "env");
    copy_arg(mc, b, "user", "user");
    return b;
}

static size_t arg_size(struct mcp_call *mc, const char *k, size_t def)
{
    json_t *v = arg(mc, k);
    return v && json_is_integer(v) ? (size_t)json_integer_value(v) : def;
}

/* ---- sandbox_create ------------------------------------------------------------------------ */

static void create_done(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    _cleanup_json_ json_t *j = NULL;

    if (mcp_api_failed(mc, r))
        return;
    j = mcp_resp_json(r);
    mcp_done(mc, sandbox_brief(j), NULL, false);
}

static void t_create(struct mcp_call *mc)
{
    json_t *b = json_object();

    copy_arg(mc, b, "template", "template");
    copy_arg(mc, b, "timeout_s", "timeout");
    copy_arg(mc, b, "env", "env");
    copy_arg(mc, b, "metadata", "metadata");
    copy_arg(mc, b, "cpus", "cpus");
    copy_arg(mc, b, "memory_mb", "memory_mb");
    if (arg(mc, "internet") != NULL)
        json_object_set_new(b, "network", json_pack("{s:O}", "enabled", arg(mc, "internet")));
    mcp_sub_json(mc, "POST", "/v1/sandboxes", b, create_done);
}

/* ---- sandbox_list -------------------------------------------------------------------------- */

static void list_done(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    _cleanup_json_ json_t *j = NULL;
    json_t *out = json_array(), *s;
    size_t i;

    if (mcp_api_failed(mc, r)) {
        json_decref(out);
        return;
    }
    j = mcp_resp_json(r);
    json_array_foreach(json_object_get(j, "sandboxes"), i, s)
        json_array_append_new(out, sandbox_brief(s));
    mcp_done(mc, json_pack("{s:o}", "sandboxes", out), NULL, false);
}

static void t_list(struct mcp_call *mc)
{
    _cleanup_buf_ struct wr_buf t = {0};
    const char *k;
    json_t *v;

    wr_buf_puts(&t, "/v1/sandboxes?limit=1000");
    if (arg_str(mc, "state") != NULL) {
        wr_buf_puts(&t, "&state=");
        mcp_esc(&t, arg_str(mc, "state"));
    }
    json_object_foreach(arg(mc, "metadata"), k, v)
    {
        _cleanup_free_ char *kv = xasprintf("%s=%s", k, json_string_value(v));
        wr_buf_puts(&t, "&metadata=");
        mcp_esc(&t, kv);
    }
    mcp_sub_json(mc, "GET", wr_buf_str(&t), NULL, list_done);
}

/* ---- sandbox_kill -------------------------------------------------------------------------- */

static void kill_done(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    if (mcp_api_failed(mc, r))
        return;
    mcp_done(mc, json_pack("{s:s,s:b}", "sandbox_id", sid(mc), "killed", true), NULL, false);
}

static void t_kill(struct mcp_call *mc)
{
    _cleanup_free_ char *p = sb_path(sid(mc), "");
    mcp_sub_json(mc, "DELETE", p, NULL, kill_done);
}

/* ---- sandbox_exec and sandbox_start_process ---------------------------------------------------
 */

/* sandbox_exec streams the command's events (POST .../exec, mode stream), so that it knows the
 * pid from the start: a client that leaves before the end has the command killed. Output past
 * max_output_bytes is counted out, not kept. */

/* Keep what fits of p in stream idx. */
static void exec_keep(struct mcp_call *mc, int idx, const char *p, size_t n)
{
    size_t max = arg_size(mc, "max_output_bytes", OUT_DEFAULT);
    size_t room = max > mc->out[idx].len ? max - mc->out[idx].len : 0;

    if (mc->trunc[idx])
        return;
    if (n > room) {
        /* At a UTF-8 boundary: the text stays text. */
        while (room > 0 && ((unsigned char)p[room] & 0xC0) == 0x80)
            room--;
        mc->trunc[idx] = true;
        n = room;
    }
    wr_buf_append(&mc->out[idx], p, n);
}

/* The complete lines of the stream so far; returns how many bytes they took. Keeps the exit
 * event in mc->acc. */
static size_t exec_lines(struct mcp_call *mc, const char *body, size_t len)
{
    const char *s = body, *end = body + len;

    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        if (nl == NULL)
            break;
        _cleanup_json_ json_t *ev = json_loadb(s, (size_t)(nl - s), 0, NULL);
        const char *type = json_string_value(json_object_get(ev, "type"));
        json_t *data = json_object_get(ev, "data");
        s = nl + 1;
        if (type == NULL)
            continue;
        if (strcmp(type, "start") == 0)
            mc->pid = json_integer_value(json_object_get(ev, "pid"));
        else if ((strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) &&
                 json_is_string(data))
            exec_keep(mc, type[3] == 'e' ? 1 : 0, json_string_value(data),
                      json_string_length(data));
        else if (strcmp(type, "exit") == 0 || strcmp(type, "error") == 0) {
            mc->ended = true;
            json_decref(mc->acc);
            mc->acc = json_incref(ev);
        }
    }
    return (size_t)(s - body);
}

static void exec_data(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    if (r->status >= 200 && r->status < 300)
        mcp_sub_consume(mc, exec_lines(mc, r->body, r->len));
}

static void exec_abandoned(struct mcp_call *mc)
{
    _cleanup_free_ char *rest = NULL, *p = NULL;

    if (mc->pid <= 0 || mc->ended)
        return;
    rest = xasprintf("/processes/%lld/signal", (long long)mc->pid);
    p = sb_path(sid(mc), rest);
    mcp_sub_detached(mc, "POST", p, json_pack("{s:s}", "signal", "KILL"));
}

static void exec_done(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    json_t *ev, *o, *code;

    if (mcp_api_failed(mc, r))
        return;
    exec_lines(mc, r->body, r->len);
    ev = mc->acc;
    if (ev == NULL || strcmp(json_string_value(json_object_get(ev, "type")), "exit") != 0) {
        const char *msg = json_string_value(json_object_get(ev, "message"));
        mcp_fail(mc, "the command's end was not seen: %s", msg ? msg : "the stream broke off");
        return;
    }
    code = json_object_get(ev, "exit_code");
    o = json_pack("{s:O*,s:O*,s:s%,s:s%,s:b,s:b,s:b,s:O*}", "exit_code", code, "signal",
                  json_object_get(ev, "signal"), "stdout", (const char *)wr_buf_str(&mc->out[0]),
                  mc->out[0].len, "stderr", (const char *)wr_buf_str(&mc->out[1]), mc->out[1].len,
                  "truncated", mc->trunc[0] || mc->trunc[1], "stdout_truncated", mc->trunc[0],
                  "stderr_truncated", mc->trunc[1], "timed_out", json_object_get(ev, "timed_out"));
    mcp_done(mc, o, NULL, !json_is_integer(code) || json_integer_value(code) != 0);
}

static void t_exec(struct mcp_call *mc)
{
    _cleanup_free_ char *p = sb_path(sid(mc), "/exec");
    json_t *b = exec_body(mc);

    json_object_set_new(b, "mode", json_string("stream"));
    json_object_set_new(b, "timeout", json_integer((json_int_t)arg_size(mc, "timeout_s", 60)));
    copy_arg(mc, b, "stdin", "stdin");
    mcp_sub_json(mc, "POST", p, b, exec_done);
    mc->on_data = exec_data;
    mc->on_abandon = exec_abandoned;
}

static void start_done(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    _cleanup_json_ json_t *j = NULL;

    if (mcp_api_failed(mc, r))
        return;
    j = mcp_resp_json(r);
    mcp_done(mc,
             json_pack("{s:s,s:O,s:O}", "sandbox_id", sid(mc), "pid", json_object_get(j, "pid"),
                       "running", json_object_get(j, "running")),
             NULL, false);
}

static void t_start_process(struct mcp_call *mc)
{
    _cleanup_free_ char *p = sb_path(sid(mc), "/exec");
    json_t *b = exec_body(mc);

    json_object_set_new(b, "mode", json_string("background"));
    copy_arg(mc, b, "timeout_s", "timeout");
    mcp_sub_json(mc, "POST", p, b, start_done);
}

/* ---- sandbox_read_output: attach, take what came, then the process's state ------------------- */

/* The last `max` bytes of s (at a UTF-8 boundary), into o[key]; *cut when some were left out. */
static void tail_into(json_t *o, const char *key, struct wr_buf *s, size_t max, bool *cut)
{
    size_t off = 0;

    if (s->len > max) {
        off = s->len - max;
        while (off < s->len && (s->data[off] & 0xC0) == 0x80)
            off++;
        *cut = true;
    }
    json_object_set_new(o, key, json_stringn((const char *)s->data + off, s->len - off));
}

static void output_state(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    _cleanup_json_ json_t *j = NULL;
    json_t *o = mc->acc;

    if (mcp_api_failed(mc, r))
        return;
    j = mcp_resp_json(r);
    json_object_set(o, "running", json_object_get(j, "running"));
    json_object_set(o, "exit_code", json_object_get(j, "exit_code"));
    json_object_set(o, "signal", json_object_get(j, "signal"));
    mc->acc = NULL;
    mcp_done(mc, o, NULL, false);
}

/* The attach stream's lines so far: its stdout and stderr. */
static void output_collect(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    _cleanup_buf_ struct wr_buf out = {0};
    _cleanup_buf_ struct wr_buf err = {0};
    _cleanup_free_ char *p = NULL;
    size_t max = arg_size(mc, "max_bytes", OUT_DEFAULT);
    const char *s = r->body, *end = r->body + r->len;
    bool cut = r->truncated;
    char *pid;

    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        if (nl == NULL)
            break; /* a line cut short: not complete yet */
        _cleanup_json_ json_t *ev = json_loadb(s, (size_t)(nl - s), 0, NULL);
        const char *type = json_string_value(json_object_get(ev, "type"));
        const char *data = json_string_value(json_object_get(ev, "data"));
        if (type != NULL && data != NULL && strcmp(type, "stdout") == 0)
            wr_buf_append(&out, data, json_string_length(json_object_get(ev, "data")));
        else if (type != NULL && data != NULL && strcmp(type, "stderr") == 0)
            wr_buf_append(&err, data, json_string_length(json_object_get(ev, "data")));
        s = nl + 1;
    }
    mc->acc = json_pack("{s:s,s:O}", "sandbox_id", sid(mc), "pid", arg(mc, "pid"));
    tail_into(mc->acc, "stdout", &out, max, &cut);
    tail_into(mc->acc, "stderr", &err, max, &cut);
    json_object_set_new(mc->acc, "truncated", json_boolean(cut));
    pid = xasprintf("/processes/%lld", (long long)json_integer_value(arg(mc, "pid")));
    p = sb_path(sid(mc), pid);
    free(pid);
    mcp_sub_json(mc, "GET", p, NULL, output_state);
}

static void output_ended(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    mcp_timer_stop(mc);
    if (mcp_api_failed(mc, r))
        return;
    output_collect(mc, r);
}

/* The wait is over (or the output outgrew what is kept): take what came. */
static void output_enough(struct mcp_call *mc)
{
    struct wr_http_sub_resp r;
    _cleanup_free_ char *copy = NULL;

    mcp_timer_stop(mc);
    mcp_sub_peek(mc, &r);
    copy = xmalloc(r.len + 1);
    memcpy(copy, r.body, r.len);
    copy[r.len] = '\0';
    r.body = copy;
    mcp_sub_cancel(mc);
    if (r.status != 0 && mcp_api_failed(mc, &r))
        return;
    output_collect(mc, &r);
}

static void output_data(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    if (r->truncated)
        output_enough(mc);
}

static void t_read_output(struct mcp_call *mc)
{
    _cleanup_free_ char *rest =
        xasprintf("/processes/%lld/attach", (long long)json_integer_value(arg(mc, "pid")));
    _cleanup_free_ char *p = sb_path(sid(mc), rest);
    json_t *w = arg(mc, "wait_s");
    uint64_t ms = w ? (uint64_t)json_integer_value(w) * 1000 : 0;

    mcp_sub_raw(mc, "GET", p, NULL, 0, NULL, ATTACH_KEEP, output_ended);
    mc->on_data = output_data;
    /* The output kept so far comes with the attach's first answer, in this loop iteration. */
    mcp_timer(mc, ms ? ms : 1, output_enough);
}

/* ---- files --------------------------------------------------------------------------------- */

static const char *image_type(const unsigned char *p, size_t n)
{
    if (n >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0)
        return "image/png";
    if (n >= 3 && memcmp(p, "\xff\xd8\xff", 3) == 0)
        return "image/jpeg";
    if (n >= 6 && (memcmp(p, "GIF87a", 6) == 0 || memcmp(p, "GIF89a", 6) == 0))
        return "image/gif";
    if (n >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WEBP", 4) == 0)
        return "image/webp";
    return NULL;
}

/* Text: UTF-8 without NUL bytes. */
static bool text_ok(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        int l = p[i] == 0 ? 0 : wr_utf8_seq(p + i, n - i);
        if (l <= 0)
            return false;
        i += (size_t)l;
    }
    return true;
}

static void read_answer(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    const unsigned char *p = (const unsigned char *)r->body;
    size_t max = arg_size(mc, "max_bytes", FILE_DEFAULT);
    size_t n = r->len > max ? max : r->len;
    bool cut = r->truncated || r->len > max;
    const char *enc = arg_str(mc, "encoding");
    const char *img = image_type(p, n);
    json_t *o = json_pack("{s:s,s:I,s:b}", "path", arg_str(mc, "path"), "bytes", (json_int_t)n,
                          "truncated", cut);

    if (img != NULL && !cut && (enc == NULL || strcmp(enc, "auto") == 0)) {
        json_object_set_new(o, "mime_type", json_string(img));
        mcp_done(mc, o,
                 json_pack("[{s:s,s:o,s:s}]", "type", "image", "data", api_json_b64(p, n),
                           "mimeType", img),
                 false);
        return;
    }
    if ((enc == NULL || strcmp(enc, "base64") != 0) && text_ok(p, n)) {
        json_object_set_new(o, "encoding", json_string("utf8"));
        json_object_set_new(o, "content", json_stringn((const char *)p, n));
    } else if (enc != NULL && strcmp(enc, "utf8") == 0) {
        _cleanup_free_ char *s = xmalloc(n + 1);
        memcpy(s, p, n);
        s[n] = '\0';
        json_object_set_new(o, "encoding", json_string("utf8"));
        json_object_set_new(o, "content", api_json_text(s));
    } else {
        json_object_set_new(o, "encoding", json_string("base64"));
        json_object_set_new(o, "content", api_json_b64(p, n));
    }
    mcp_done(mc, o, NULL, false);
}

static void read_done(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    if (mcp_api_failed(mc, r))
        return;
    read_answer(mc, r);
}

/* Past max_bytes: no need for the rest of the file. */
static void read_data(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    struct wr_http_sub_resp copy;
    _cleanup_free_ char *body = NULL;

    if (!r->truncated || r->status < 200 || r->status >= 300)
        return;
    copy = *r;
    body = xmalloc(r->len + 1);
    memcpy(body, r->body, r->len);
    body[r->len] = '\0';
    copy.body = body;
    mcp_sub_cancel(mc);
    read_answer(mc, &copy);
}

static void t_read_file(struct mcp_call *mc)
{
    _cleanup_buf_ struct wr_buf t = {0};
    _cleanup_free_ char *p = sb_path(sid(mc), "/files?path=");

    wr_buf_puts(&t, p);
    mcp_esc(&t, arg_str(mc, "path"));
    mcp_sub_raw(mc, "GET", wr_buf_str(&t), NULL, 0, NULL,
                arg_size(mc, "max_bytes", FILE_DEFAULT) + 1, read_done);
    mc->on_data = read_data;
}

static void write_done(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    _cleanup_json_ json_t *j = NULL;

    if (mcp_api_failed(mc, r))
        return;
    j = mcp_resp_json(r);
    mcp_done(mc,
             json_pack("{s:O,s:O,s:O}", "path", json_object_get(j, "path"), "bytes",
                       json_object_get(j, "size"), "mode", json_object_get(j, "mode")),
             NULL, false);
}

static void t_write_file(struct mcp_call *mc)
{
    _cleanup_buf_ struct wr_buf t = {0};
    _cleanup_buf_ struct wr_buf data = {0};
    _cleanup_free_ char *p = sb_path(sid(mc), "/files?path=");
    const char *enc = arg_str(mc, "encoding");
    json_t *c = arg(mc, "content");

    if (enc != NULL && strcmp(enc, "base64") == 0) {
        if (wr_b64_decode_buf(json_string_value(c), json_string_length(c), WR_B64_STRICT, &data) <
            0) {
            mcp_fail(mc, "`content` is not valid base64");
            return;
        }
    } else {
        wr_buf_append(&data, json_string_value(c), json_string_length(c));
    }
    wr_buf_puts(&t, p);
    mcp_esc(&t, arg_str(mc, "path"));
    if (arg_str(mc, "mode") != NULL) {
        wr_buf_puts(&t, "&mode=");
        mcp_esc(&t, arg_str(mc, "mode"));
    }
    mcp_sub_raw(mc, "PUT", wr_buf_str(&t), data.data, data.len, "application/octet-stream", 0,
                write_done);
}

static void list_files_done(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    _cleanup_json_ json_t *j = NULL;
    json_t *out = json_array(), *e;
    size_t i;

    if (mcp_api_failed(mc, r)) {
        json_decref(out);
        return;
    }
    j = mcp_resp_json(r);
    json_array_foreach(json_object_get(j, "entries"), i, e) json_array_append_new(
        out, json_pack("{s:O,s:O,s:O,s:O,s:O}", "name", json_object_get(e, "name"), "path",
                       json_object_get(e, "path"), "type", json_object_get(e, "type"), "size",
                       json_object_get(e, "size"), "mode", json_object_get(e, "mode")));
    mcp_done(mc, json_pack("{s:s,s:o}", "path", arg_str(mc, "path"), "entries", out), NULL, false);
}

static void t_list_files(struct mcp_call *mc)
{
    _cleanup_buf_ struct wr_buf t = {0};
    _cleanup_free_ char *p = sb_path(sid(mc), "/files/list?path=");

    wr_buf_puts(&t, p);
    mcp_esc(&t, arg_str(mc, "path"));
    wr_buf_printf(&t, "&depth=%zu", arg_size(mc, "depth", 1));
    mcp_sub_json(mc, "GET", wr_buf_str(&t), NULL, list_files_done);
}

/* ---- pause, resume, snapshot, fork ------------------------------------------------------------
 */

static void sandbox_done(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    _cleanup_json_ json_t *j = NULL;
    json_t *o;

    if (mcp_api_failed(mc, r))
        return;
    j = mcp_resp_json(r);
    o = sandbox_brief(j);
    if (json_object_get(j, "processes_kept") != NULL)
        json_object_set(o, "processes_kept", json_object_get(j, "processes_kept"));
    mcp_done(mc, o, NULL, false);
}

static void t_pause(struct mcp_call *mc)
{
    _cleanup_free_ char *p = sb_path(sid(mc), "/pause");
    json_t *b = json_object();

    copy_arg(mc, b, "mode", "mode");
    mcp_sub_json(mc, "POST", p, b, sandbox_done);
}

static void t_resume(struct mcp_call *mc)
{
    _cleanup_free_ char *p = sb_path(sid(mc), "/resume");
    json_t *b = json_object();

    copy_arg(mc, b, "timeout_s", "timeout");
    mcp_sub_json(mc, "POST", p, b, sandbox_done);
}

static void snapshot_done(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    _cleanup_json_ json_t *j = NULL;

    if (mcp_api_failed(mc, r))
        return;
    j = mcp_resp_json(r);
    mcp_done(mc,
             json_pack("{s:O,s:O,s:s}", "snapshot_id", json_object_get(j, "id"), "name",
                       json_object_get(j, "name"), "sandbox_id", sid(mc)),
             NULL, false);
}

static void t_snapshot(struct mcp_call *mc)
{
    _cleanup_free_ char *p = sb_path(sid(mc), "/snapshots");
    json_t *b = json_object();

    copy_arg(mc, b, "name", "name");
    mcp_sub_json(mc, "POST", p, b, snapshot_done);
}

static void fork_done(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    _cleanup_json_ json_t *j = NULL;
    json_t *ids = json_array(), *s;
    size_t i;

    if (mcp_api_failed(mc, r)) {
        json_decref(ids);
        return;
    }
    j = mcp_resp_json(r);
    json_array_foreach(json_object_get(j, "sandboxes"), i, s)
        json_array_append(ids, json_object_get(s, "id"));
    mcp_done(mc,
             json_pack("{s:o,s:O}", "sandbox_ids", ids, "errors",
                       json_object_get(j, "errors") ? json_object_get(j, "errors") : json_array()),
             NULL, json_array_size(ids) == 0);
}

static void t_fork(struct mcp_call *mc)
{
    _cleanup_free_ char *p = sb_path(sid(mc), "/fork");
    json_t *b = json_object();

    copy_arg(mc, b, "count", "count");
    copy_arg(mc, b, "timeout_s", "timeout");
    mcp_sub_json(mc, "POST", p, b, fork_done);
}

/* ---- sandbox_port_url ---------------------------------------------------------------------- */

static void port_done(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    _cleanup_json_ json_t *j = NULL;
    json_int_t port = json_integer_value(arg(mc, "port"));
    bool listening = false;
    _cleanup_free_ char *native = NULL, *host = NULL, *url = NULL;
    _cleanup_buf_ struct wr_buf n = {0};
    json_t *e, *o;
    size_t i;

    if (mcp_api_failed(mc, r))
        return;
    j = mcp_resp_json(r);
    json_array_foreach(json_object_get(j, "ports"), i,
                       e) if (json_integer_value(json_object_get(e, "port")) == port) listening =
        true;
    wr_buf_puts(&n, mc->base_url);
    wr_buf_puts(&n, "/v1/sandboxes/");
    mcp_esc(&n, sid(mc));
    wr_buf_printf(&n, "/ports/%lld/", (long long)port);
    native = wr_buf_steal_str(&n);
    if (mc->api->domain != NULL) {
        host = xasprintf("%lld-%s.%s", (long long)port, sid(mc), mc->api->domain);
        url = xasprintf("https://%s/", host);
    }
    o = json_pack("{s:s,s:s,s:s,s:I,s:b}", "url", url ? url : native, "native_url", native,
                  "sandbox_id", sid(mc), "port", port, "listening", listening);
    json_object_set_new(o, "host", host ? json_string(host) : json_null());
    json_object_set_new(o, "needs_api_key", json_boolean(url == NULL));
    mcp_done(mc, o, NULL, false);
}

static void t_port_url(struct mcp_call *mc)
{
    _cleanup_free_ char *p = sb_path(sid(mc), "/ports");
    mcp_sub_json(mc, "GET", p, NULL, port_done);
}

/* ---- run_code (the code interpreter's API) --------------------------------------------------- */

/* The sandbox run_code made for a call that failed is gone: the failure, as the API said it. */
static void code_cleaned(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    json_t *e = mc->acc;

    mc->acc = NULL;
    mcp_done(mc, e, NULL, true);
}

static void code_done(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    _cleanup_buf_ struct wr_buf out = {0};
    _cleanup_buf_ struct wr_buf err = {0};
    json_t *results, *images, *error = NULL, *count = NULL, *o;
    const char *s = r->body, *end = r->body + r->len;

    if (mc->created && (r->status < 200 || r->status >= 300)) {
        _cleanup_json_ json_t *j = mcp_resp_json(r);
        _cleanup_free_ char *p = sb_path(sid(mc), "");
        const char *msg = json_string_value(json_object_get(j, "message"));
        const char *code = json_string_value(json_object_get(j, "code"));
        mc->acc = json_pack("{s:s,s:s,s:i}", "error", msg ? msg : "the code API failed", "code",
                            code ? code : "error", "status", r->status);
        mcp_sub_json(mc, "DELETE", p, NULL, code_cleaned);
        return;
    }
    if (mcp_api_failed(mc, r))
        return;
    results = json_array();
    images = json_array();
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *le = nl ? nl : end;
        _cleanup_json_ json_t *ev = json_loadb(s, (size_t)(le - s), 0, NULL);
        const char *type = json_string_value(json_object_get(ev, "type"));
        json_t *text = json_object_get(ev, "text");
        s = nl ? nl + 1 : end;
        if (type == NULL)
            continue;
        if (strcmp(type, "stdout") == 0 && json_is_string(text))
            wr_buf_append(&out, json_string_value(text), json_string_length(text));
        else if (strcmp(type, "stderr") == 0 && json_is_string(text))
            wr_buf_append(&err, json_string_value(text), json_string_length(text));
        else if (strcmp(type, "number_of_executions") == 0)
            count = json_object_get(ev, "execution_count")
                        ? json_incref(json_object_get(ev, "execution_count"))
                        : count;
        else if (strcmp(type, "error") == 0 && error == NULL)
            error = json_pack("{s:O*,s:O*,s:O*}", "name", json_object_get(ev, "name"), "value",
                              json_object_get(ev, "value"), "traceback",
                              json_object_get(ev, "traceback"));
        else if (strcmp(type, "result") == 0) {
            json_t *res = json_deep_copy(ev);
            json_object_del(res, "type");
            if (json_is_string(json_object_get(ev, "png"))) {
                json_array_append_new(images, json_pack("{s:s,s:O,s:s}", "type", "image", "data",
                                                        json_object_get(ev, "png"), "mimeType",
                                                        "image/png"));
                json_object_set_new(res, "png", json_string("(the image content of this result)"));
            }
            json_array_append_new(results, res);
        }
    }
    o = json_pack("{s:s,s:o,s:s%,s:s%}", "sandbox_id", sid(mc), "results", results, "stdout",
                  out.len ? (const char *)out.data : "", out.len, "stderr",
                  err.len ? (const char *)err.data : "", err.len);
    json_object_set_new(o, "execution_count", count ? count : json_null());
    json_object_set_new(o, "error", error ? error : json_null());
    json_object_set_new(o, "sandbox_created", json_boolean(mc->created));
    mcp_done(mc, o, images, error != NULL);
}

static void code_run(struct mcp_call *mc)
{
    _cleanup_free_ char *p = sb_path(sid(mc), "/code");
    json_t *b = json_pack("{s:O}", "code", arg(mc, "code"));

    copy_arg(mc, b, "language", "language");
    copy_arg(mc, b, "context_id", "context_id");
    copy_arg(mc, b, "env", "env");
    copy_arg(mc, b, "timeout_s", "timeout");
    mcp_sub_json(mc, "POST", p, b, code_done);
}

static void code_created(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    _cleanup_json_ json_t *j = NULL;

    if (mcp_api_failed(mc, r))
        return;
    j = mcp_resp_json(r);
    if (!json_is_string(json_object_get(j, "id"))) {
        mcp_fail(mc, "the create answer has no id");
        return;
    }
    mc->sandbox_id = xstrdup(json_string_value(json_object_get(j, "id")));
    mc->created = true;
    code_run(mc);
}

static void t_run_code(struct mcp_call *mc)
{
    if (arg_str(mc, "sandbox_id") != NULL) {
        code_run(mc);
        return;
    }
    mcp_sub_json(mc, "POST", "/v1/sandboxes", json_pack("{s:s}", "template", CODE_TEMPLATE),
                 code_created);
}

/* ---- sandbox_diff ---------------------------------------------------------------------------- */

static void diff_done(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    json_t *j;

    if (mcp_api_failed(mc, r))
        return;
    j = mcp_resp_json(r);
    if (!json_is_object(j)) {
        json_decref(j);
        mcp_fail(mc, "the diff answer was not understood");
        return;
    }
    mcp_done(mc, j, NULL, false);
}

static void t_diff(struct mcp_call *mc)
{
    _cleanup_buf_ struct wr_buf t = {0};
    _cleanup_free_ char *p = sb_path(sid(mc), "/diff");
    char sep = '?';

    wr_buf_puts(&t, p);
    if (arg_str(mc, "against") != NULL) {
        wr_buf_printf(&t, "%cagainst=", sep);
        mcp_esc(&t, arg_str(mc, "against"));
        sep = '&';
    }
    if (arg_str(mc, "path") != NULL) {
        wr_buf_printf(&t, "%cpath=", sep);
        mcp_esc(&t, arg_str(mc, "path"));
        wr_buf_puts(&t, "&content=1");
    }
    mcp_sub_json(mc, "GET", wr_buf_str(&t), NULL, diff_done);
}

/* ---- desktop ------------------------------------------------------------------------------- */

/* A desktop call: the desktop is started (POST .../desktop/start, idempotent) when the first
 * try finds it not running, then the call is made again. mc->acc keeps the call. */
static void desk_send(struct mcp_call *mc, mcp_cont_fn cont)
{
    json_t *a = mc->acc;
    json_t *body = json_object_get(a, "body");

    if (body != NULL)
        mcp_sub_json(mc, json_string_value(json_object_get(a, "method")),
                     json_string_value(json_object_get(a, "target")), json_incref(body), cont);
    else
        mcp_sub_raw(mc, json_string_value(json_object_get(a, "method")),
                    json_string_value(json_object_get(a, "target")), NULL, 0, NULL, 64u << 20,
                    cont);
}

static void desk_last(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    mc->next(mc, r);
}

static void desk_started(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    if (mcp_api_failed(mc, r))
        return;
    desk_send(mc, desk_last);
}

static void desk_first(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    _cleanup_json_ json_t *j = NULL;
    const char *msg;

    if (r->status == 409) {
        j = mcp_resp_json(r);
        msg = json_string_value(json_object_get(j, "message"));
        if (msg != NULL && strstr(msg, "desktop/start") != NULL) {
            _cleanup_free_ char *p = sb_path(sid(mc), "/desktop/start");
            mcp_sub_json(mc, "POST", p, json_object(), desk_started);
            return;
        }
    }
    mc->next(mc, r);
}

static void desk_call(struct mcp_call *mc, const char *method, const char *rest, json_t *body,
                      mcp_cont_fn cont)
{
    _cleanup_free_ char *p = sb_path(sid(mc), rest);

    mc->acc = json_pack("{s:s,s:s}", "method", method, "target", p);
    if (body != NULL)
        json_object_set_new(mc->acc, "body", body);
    mc->next = cont;
    desk_send(mc, desk_first);
}

static void shot_done(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    const unsigned char *p = (const unsigned char *)r->body;

    if (mcp_api_failed(mc, r))
        return;
    if (image_type(p, r->len) == NULL || strcmp(image_type(p, r->len), "image/png") != 0) {
        mcp_fail(mc, "the screenshot is not a PNG");
        return;
    }
    mcp_done(mc,
             json_pack("{s:s,s:s,s:I}", "sandbox_id", sid(mc), "mime_type", "image/png", "bytes",
                       (json_int_t)r->len),
             json_pack("[{s:s,s:o,s:s}]", "type", "image", "data", api_json_b64(p, r->len),
                       "mimeType", "image/png"),
             false);
}

static void t_screenshot(struct mcp_call *mc)
{
    desk_call(mc, "GET", "/desktop/screenshot", NULL, shot_done);
}

static void action_done(struct mcp_call *mc, const struct wr_http_sub_resp *r)
{
    _cleanup_json_ json_t *j = NULL;
    json_t *o;

    if (mcp_api_failed(mc, r))
        return;
    j = mcp_resp_json(r);
    o = json_pack("{s:s,s:b,s:s}", "sandbox_id", sid(mc), "ok", true, "action",
                  arg_str(mc, "action"));
    if (json_object_get(j, "x") != NULL) {
        json_object_set(o, "x", json_object_get(j, "x"));
        json_object_set(o, "y", json_object_get(j, "y"));
    }
    mcp_done(mc, o, NULL, false);
}

static void t_action(struct mcp_call *mc)
{
    static const char *const mouse_args[] = {"x",      "y",    "button", "direction",
                                             "amount", "to_x", "to_y",   NULL};
    const char *action = arg_str(mc, "action");
    json_t *b;

    if (strcmp(action, "type") == 0 || strcmp(action, "key") == 0) {
        const char *k = strcmp(action, "type") == 0 ? "text" : "keys";
        if (arg(mc, k) == NULL) {
            mcp_fail(mc, "action `%s` needs `%s`", action, k);
            return;
        }
        desk_call(mc, "POST", "/desktop/keyboard", json_pack("{s:O}", k, arg(mc, k)), action_done);
        return;
    }
    b = json_pack("{s:s}", "action", action);
    for (const char *const *k = mouse_args; *k; k++)
        copy_arg(mc, b, *k, *k);
    desk_call(mc, "POST", "/desktop/mouse", b, action_done);
}

/* ---- the table ----------------------------------------------------------------------------- */

#define SID_PROP                                                                                   \
    "\"sandbox_id\":{\"type\":\"string\",\"pattern\":\"^[A-Za-z0-9_-]{1,64}$\",\"description\":"   \
    "\"The sandbox's id, as sandbox_create or sandbox_list gave it.\"}"
#define STRMAP(what)                                                                               \
    "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},\"description\":\"" what  \
    "\"}"
#define CMD_PROPS                                                                                  \
    "\"command\":{\"type\":\"string\",\"minLength\":1,\"description\":\"A shell command line, "    \
    "run with bash -lc (sh -c where there is no bash).\"},"                                        \
    "\"cwd\":{\"type\":\"string\",\"description\":\"Its working directory (absolute).\"},"         \
    "\"env\":" STRMAP(                                                                             \
        "Environment variables for it.") ","                                                       \
                                         "\"user\":{\"type\":\"string\",\"description\":\"The "    \
                                         "user to run it as (default: the "                        \
                                         "template's).\"}"

const struct mcp_tool mcp_tools[] = {
    {"sandbox_create", "Create a sandbox",
     "Start a new sandbox (an isolated Linux machine) from a template (default `base`, Debian "
     "with bash and Python) or a snapshot id, and return its sandbox_id. It is killed after "
     "timeout_s (default: the server's, 300) unless paused or killed first.",
     "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
     "\"template\":{\"type\":\"string\",\"description\":\"A template name or a snapshot id "
     "(default base).\"},"
     "\"timeout_s\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"Seconds it lives.\"},"
     "\"env\":" STRMAP(
         "Environment variables of every command in it.") ","
                                                          "\"metadata\":" STRMAP(
                                                              "Labels, for sandbox_list to filter "
                                                              "on.") ","
                                                                     "\"cpus\":{\"type\":"
                                                                     "\"number\",\"minimum\":0.01},"
                                                                     "\"memory_mb\":{\"type\":"
                                                                     "\"integer\",\"minimum\":16},"
                                                                     "\"internet\":{\"type\":"
                                                                     "\"boolean\",\"description\":"
                                                                     "\"Whether it may reach the "
                                                                     "internet "
                                                                     "(default: the "
                                                                     "server's).\"}}}",
     false, false, false, false, t_create},
    {"sandbox_list", "List sandboxes",
     "The sandboxes of your team: id, template, state, expiry and metadata.",
     "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
     "\"state\":{\"type\":\"string\",\"description\":\"Comma-separated states: creating, "
     "running, paused, stopped, error (default: all but stopped and error).\"},"
     "\"metadata\":" STRMAP("Only those with these labels.") "}}",
     true, false, true, false, t_list},
    {"sandbox_kill", "Kill a sandbox", "Kill a sandbox and delete it with its files and processes.",
     "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\"],"
     "\"properties\":{" SID_PROP "}}",
     false, true, true, false, t_kill},
    {"sandbox_exec", "Run a command",
     "Run a shell command in a sandbox and wait for it: exit code, stdout and stderr (each cut "
     "to max_output_bytes). It is killed after timeout_s (default 60). A non-zero exit is "
     "reported as an error result. For a server or a long job use sandbox_start_process.",
     "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\","
     "\"command\"],\"properties\":{" SID_PROP "," CMD_PROPS ","
     "\"timeout_s\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":86400,\"description\":"
     "\"Seconds before it is killed (default 60).\"},"
     "\"max_output_bytes\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":4194304,"
     "\"description\":\"Bytes of each of stdout and stderr kept (default 65536).\"},"
     "\"stdin\":{\"type\":\"string\",\"description\":\"Text for its standard input.\"}}}",
     false, true, false, true, t_exec},
    {"sandbox_start_process", "Start a background process",
     "Start a shell command in the background (a server, a long build) and return its pid at "
     "once; read its output with sandbox_read_output.",
     "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\","
     "\"command\"],\"properties\":{" SID_PROP "," CMD_PROPS ","
     "\"timeout_s\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"Seconds before it is "
     "killed (default: none).\"}}}",
     false, true, false, true, t_start_process},
    {"sandbox_read_output", "Read a process's output",
     "The output of a process started with sandbox_start_process so far (the last max_bytes of "
     "each stream), and whether it still runs (else its exit code). With wait_s, waits up to "
     "that long for it to end first.",
     "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\","
     "\"pid\"],\"properties\":{" SID_PROP ","
     "\"pid\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"As sandbox_start_process "
     "gave it.\"},"
     "\"wait_s\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":300,\"description\":\"Seconds "
     "to wait for its end (default 0).\"},"
     "\"max_bytes\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":4194304,\"description\":"
     "\"The most of each stream given back (its end; default 65536).\"}}}",
     true, false, false, false, t_read_output},
    {"sandbox_read_file", "Read a file",
     "Read a file of a sandbox: text as it is, an image (PNG, JPEG, GIF, WebP) as an image, "
     "other bytes as base64; at most max_bytes (default 1 MiB).",
     "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\","
     "\"path\"],\"properties\":{" SID_PROP ","
     "\"path\":{\"type\":\"string\",\"minLength\":1,\"description\":\"Absolute path.\"},"
     "\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":16777216},"
     "\"encoding\":{\"type\":\"string\",\"enum\":[\"auto\",\"utf8\",\"base64\"],"
     "\"description\":\"auto (default): text, image or base64 as the bytes are.\"}}}",
     true, false, true, false, t_read_file},
    {"sandbox_write_file", "Write a file",
     "Write a file in a sandbox (replacing it; missing directories are made).",
     "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\","
     "\"path\",\"content\"],\"properties\":{" SID_PROP ","
     "\"path\":{\"type\":\"string\",\"minLength\":1,\"description\":\"Absolute path.\"},"
     "\"content\":{\"type\":\"string\"},"
     "\"encoding\":{\"type\":\"string\",\"enum\":[\"utf8\",\"base64\"],\"description\":\"How "
     "content is given (default utf8).\"},"
     "\"mode\":{\"type\":\"string\",\"description\":\"Octal permissions of a new file, e.g. "
     "0755.\"}}}",
     false, true, true, false, t_write_file},
    {"sandbox_list_files", "List a directory",
     "The entries of a directory of a sandbox (name, path, type, size, mode), depth levels "
     "down.",
     "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\","
     "\"path\"],\"properties\":{" SID_PROP ","
     "\"path\":{\"type\":\"string\",\"minLength\":1},"
     "\"depth\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":16}}}",
     true, false, true, false, t_list_files},
    {"sandbox_pause", "Pause a sandbox",
     "Freeze a sandbox (memory: its processes keep their state; disk: only its files are kept). "
     "Its clock stops until sandbox_resume.",
     "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\"],"
     "\"properties\":{" SID_PROP ","
     "\"mode\":{\"type\":\"string\",\"enum\":[\"memory\",\"disk\"]}}}",
     false, false, false, false, t_pause},
    {"sandbox_resume", "Resume a sandbox", "Resume a paused sandbox.",
     "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\"],"
     "\"properties\":{" SID_PROP ","
     "\"timeout_s\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"Seconds it lives from "
     "now (default: what it had left).\"}}}",
     false, false, false, false, t_resume},
    {"sandbox_snapshot", "Snapshot a sandbox",
     "Capture a sandbox's files as a snapshot; sandbox_create with template = the snapshot id "
     "starts new sandboxes from it.",
     "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\"],"
     "\"properties\":{" SID_PROP ","
     "\"name\":{\"type\":\"string\",\"description\":\"Optional, usable instead of the id.\"}}}",
     false, false, false, false, t_snapshot},
    {"sandbox_fork", "Fork a sandbox",
     "Copy a running sandbox (its files and settings) into count new ones, and return their "
     "ids.",
     "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\"],"
     "\"properties\":{" SID_PROP ","
     "\"count\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100},"
     "\"timeout_s\":{\"type\":\"integer\",\"minimum\":1}}}",
     false, false, false, false, t_fork},
    {"sandbox_port_url", "URL of a sandbox port",
     "The URL at which a TCP port of a sandbox (a server started in it) is served, and whether "
     "something listens on it now.",
     "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\","
     "\"port\"],\"properties\":{" SID_PROP ","
     "\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535}}}",
     true, false, true, false, t_port_url},
    {"run_code", "Run code",
     "Run code in a stateful code interpreter (Jupyter-style: variables persist between "
     "calls; the last expression is the result; charts come back as images). Without "
     "sandbox_id a code-interpreter-v1 sandbox is created; its id is in the answer.",
     "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"code\"],"
     "\"properties\":{" SID_PROP ","
     "\"code\":{\"type\":\"string\"},"
     "\"language\":{\"type\":\"string\",\"description\":\"python (default), or another kernel's "
     "language.\"},"
     "\"context_id\":{\"type\":\"string\"},"
     "\"env\":" STRMAP("Environment variables for this run.") ","
                                                              "\"timeout_s\":{\"type\":\"integer\","
                                                              "\"minimum\":1}}}",
     false, true, false, true, t_run_code},
    {"sandbox_diff", "What changed in a sandbox",
     "The files a sandbox added, modified or deleted against its template (or a snapshot or "
     "sandbox named by against); with path, the unified diff of that file.",
     "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\"],"
     "\"properties\":{" SID_PROP ","
     "\"against\":{\"type\":\"string\",\"description\":\"A snapshot or sandbox id.\"},"
     "\"path\":{\"type\":\"string\"}}}",
     true, false, true, false, t_diff},
    {"desktop_screenshot", "Screenshot", "A PNG screenshot of a desktop sandbox's screen.",
     "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\"],"
     "\"properties\":{" SID_PROP "}}",
     true, false, true, false, t_screenshot},
    {"desktop_action", "Mouse or keyboard action",
     "Act on a desktop sandbox: click, double_click, move, scroll or drag the mouse (x, y, "
     "button, direction, amount, to_x, to_y), type text, or press a key chord (keys).",
     "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\","
     "\"action\"],\"properties\":{" SID_PROP ","
     "\"action\":{\"type\":\"string\",\"enum\":[\"click\",\"double_click\",\"move\",\"type\","
     "\"key\",\"scroll\",\"drag\"]},"
     "\"x\":{\"type\":\"integer\",\"minimum\":0},\"y\":{\"type\":\"integer\",\"minimum\":0},"
     "\"text\":{\"type\":\"string\"},"
     "\"keys\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"description\":\"One "
     "chord, e.g. [\\\"ctrl\\\", \\\"c\\\"].\"},"
     "\"button\":{\"type\":\"string\",\"enum\":[\"left\",\"middle\",\"right\"]},"
     "\"direction\":{\"type\":\"string\",\"enum\":[\"up\",\"down\"]},"
     "\"amount\":{\"type\":\"integer\",\"minimum\":1},"
     "\"to_x\":{\"type\":\"integer\",\"minimum\":0},\"to_y\":{\"type\":\"integer\","
     "\"minimum\":0}}}",
     false, true, false, false, t_action},
};
const size_t mcp_ntools = WR_ARRAY_SIZE(mcp_tools);

/* ---- checking arguments against a tool's schema --------------------------------------------- */

static bool type_ok(const char *type, json_t *v)
{
    if (strcmp(type, "string") == 0)
        return json_is_string(v);
    if (strcmp(type, "integer") == 0)
        return json_is_integer(v);
    if (strcmp(type, "number") == 0)
        return json_is_number(v);
    if (strcmp(type, "boolean") == 0)
        return json_is_boolean(v);
    if (strcmp(type, "array") == 0)
        return json_is_array(v);
    if (strcmp(type, "object") == 0)
        return json_is_object(v);
    return true;
}

static int check_value(json_t *s, json_t *v, const char *name, char *msg, size_t n)
{
    const char *type = json_string_value(json_object_get(s, "type"));
    json_t *en = json_object_get(s, "enum"), *lim, *sub, *x;
    const char *k;
    size_t i;

    if (type != NULL && !type_ok(type, v)) {
        snprintf(msg, n, "`%s` must be %s %s", name, strchr("aeiou", type[0]) ? "an" : "a", type);
        return -1;
    }
    if (en != NULL) {
        bool found = false;
        json_array_foreach(en, i, x) if (json_equal(x, v)) found = true;
        if (!found) {
            _cleanup_free_ char *list = json_dumps(en, JSON_COMPACT);
            snprintf(msg, n, "`%s` must be one of %s", name, list ? list : "the listed values");
            return -1;
        }
    }
    if (json_is_number(v) && (lim = json_object_get(s, "minimum")) != NULL &&
        json_number_value(v) < json_number_value(lim)) {
        snprintf(msg, n, "`%s` must be at least %g", name, json_number_value(lim));
        return -1;
    }
    if (json_is_number(v) && (lim = json_object_get(s, "maximum")) != NULL &&
        json_number_value(v) > json_number_value(lim)) {
        snprintf(msg, n, "`%s` must be at most %g", name, json_number_value(lim));
        return -1;
    }
    if (json_is_string(v) && json_is_string(lim = json_object_get(s, "pattern"))) {
        regex_t re;
        int rc = regcomp(&re, json_string_value(lim), REG_EXTENDED | REG_NOSUB);
        if (rc == 0) {
            rc = strlen(json_string_value(v)) != json_string_length(v) ||
                 regexec(&re, json_string_value(v), 0, NULL, 0) != 0;
            regfree(&re);
        }
        if (rc != 0) {
            snprintf(msg, n, "`%s` must match %s", name, json_string_value(lim));
            return -1;
        }
    }
    if (json_is_string(v) && (lim = json_object_get(s, "minLength")) != NULL &&
        json_string_length(v) < (size_t)json_integer_value(lim)) {
        snprintf(msg, n, "`%s` must not be empty", name);
        return -1;
    }
    if (json_is_array(v) && (sub = json_object_get(s, "items")) != NULL)
        json_array_foreach(v, i, x) if (check_value(sub, x, name, msg, n) < 0) return -1;
    if (json_is_object(v) && json_is_object(sub = json_object_get(s, "additionalProperties")))
        json_object_foreach(v, k, x) if (check_value(sub, x, name, msg, n) < 0) return -1;
    return 0;
}

int mcp_check_args(const char *schema, json_t *args, char *msg, size_t n)
{
    _cleanup_json_ json_t *s = json_loads(schema, 0, NULL);
    json_t *props = json_object_get(s, "properties"), *v, *ps;
    const char *k;
    size_t i;

    if (s == NULL) {
        snprintf(msg, n, "the tool's schema is broken");
        return -1;
    }
    json_array_foreach(json_object_get(s, "required"), i, v)
    {
        json_t *a = json_object_get(args, json_string_value(v));
        if (a == NULL || json_is_null(a)) {
            snprintf(msg, n, "`%s` is required", json_string_value(v));
            return -1;
        }
    }
    json_object_foreach(args, k, v)
    {
        ps = json_object_get(props, k);
        if (ps == NULL) {
            snprintf(msg, n, "unknown argument `%s`", k);
            return -1;
        }
        if (json_is_null(v))
            continue;
        if (check_value(ps, v, k, msg, n) < 0)
            return -1;
    }
    return 0;
}
