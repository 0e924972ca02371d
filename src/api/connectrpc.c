/* SPDX-License-Identifier: Apache-2.0 */
/* The Connect protocol (connectrpc.com/docs/protocol) with the JSON codec, as envd's clients
 * speak it: unary calls are a bare JSON body and answer; server streams are envelopes
 * (flags:u8, length:u32 big-endian, payload) closed by an end-stream envelope (flag 0x02). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../util/cleanup.h"
#include "../util/utf8.h"
#include "../util/xalloc.h"
#include "e2b_int.h"

#define ENV_MESSAGE    0x00
#define ENV_COMPRESSED 0x01
#define ENV_END        0x02

static const struct {
    const char *code;
    int status;
} codes[] = {
    {"canceled", 499},
    {"unknown", 500},
    {"invalid_argument", 400},
    {"deadline_exceeded", 504},
    {"not_found", 404},
    {"already_exists", 409},
    {"permission_denied", 403},
    {"resource_exhausted", 429},
    {"failed_precondition", 400},
    {"aborted", 409},
    {"out_of_range", 400},
    {"unimplemented", 501},
    {"internal", 500},
    {"unavailable", 503},
    {"data_loss", 500},
    {"unauthenticated", 401},
};

int connect_http_status(const char *code)
{
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        if (strcmp(codes[i].code, code) == 0)
            return codes[i].status;
    return 500;
}

void connect_unary_ok(struct wr_http_req *req, json_t *msg)
{
    char *s = json_dumps(msg, JSON_COMPACT);

    json_decref(msg);
    if (s == NULL) {
        connect_unary_error(req, "internal", "the answer does not encode");
        return;
    }
    wr_http_respond(req, 200, "application/json", s, strlen(s));
    free(s);
}

/* Error messages are made UTF-8 (invalid bytes as \xNN): they carry paths and names. */
static void unary_error(struct wr_http_req *req, const char *code, const char *raw)
{
    _cleanup_free_ char *msg = wr_utf8_fix(raw, WR_UTF8_ESCAPE);
    json_t *j = json_pack("{s:s,s:s}", "code", code, "message", msg);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

    json_decref(j);
    if (s == NULL)
        s = xstrdup("{\"code\":\"internal\",\"message\":\"the error does not encode\"}");
    wr_http_respond(req, connect_http_status(code), "application/json", s, strlen(s));
    free(s);
}

void connect_unary_error(struct wr_http_req *req, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    unary_error(req, code, msg);
}

void connect_unary_err(struct wr_http_req *req, const struct wr_err *err)
{
    unary_error(req, wr_err_connect_code(err), err->msg);
}

void connect_stream_start(struct wr_http_req *req)
{
    if (!wr_http_resp_started(req))
        wr_http_resp_start(req, 200, "application/connect+json", -1);
}

static size_t envelope(struct wr_http_req *req, uint8_t flags, const char *p, size_t n)
{
    uint8_t h[5] = {flags, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};

    wr_http_resp_write(req, h, sizeof(h));
    return wr_http_resp_write(req, p, n);
}

size_t connect_stream_msg(struct wr_http_req *req, json_t *msg)
{
    char *s = json_dumps(msg, JSON_COMPACT);
    size_t queued = 0;

    json_decref(msg);
    connect_stream_start(req);
    if (s != NULL)
        queued = envelope(req, ENV_MESSAGE, s, strlen(s));
    free(s);
    return queued;
}

static void stream_end(struct wr_http_req *req, const char *code, const char *raw)
{
    _cleanup_free_ char *msg = wr_utf8_fix(raw, WR_UTF8_ESCAPE);
    json_t *j = code == NULL ? json_object()
                             : json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

    json_decref(j);
    connect_stream_start(req);
    if (s == NULL)
        s = xstrdup("{\"error\":{\"code\":\"internal\",\"message\":\"does not encode\"}}");
    envelope(req, ENV_END, s, strlen(s));
    free(s);
    wr_http_resp_end(req);
}

void connect_stream_end(struct wr_http_req *req, const char *code, const char *fmt, ...)
{
    char msg[1024] = "";
    va_list ap;

    if (fmt != NULL) {
        va_start(ap, fmt);
        (void)vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
    }
    stream_end(req, code, msg);
}

void connect_stream_end_err(struct wr_http_req *req, const struct wr_err *err)
{
    stream_end(req, wr_err_connect_code(err), err->msg);
}

static void decode_error(struct wr_http_req *req, bool streaming, const char *code, const char *msg)
{
    if (streaming)
        stream_end(req, code, msg);
    else
        unary_error(req, code, msg);
}

int connect_unwrap(const char *body, size_t len, const char **payload, size_t *n, const char **code,
                   const char **msg)
{
    uint32_t plen;

    *code = "invalid_argument";
    if (len < 5) {
        *msg = "the request is not a Connect envelope";
        return -1;
    }
    plen = (uint32_t)(uint8_t)body[1] << 24 | (uint32_t)(uint8_t)body[2] << 16 |
           (uint32_t)(uint8_t)body[3] << 8 | (uint32_t)(uint8_t)body[4];
    if (body[0] != ENV_MESSAGE) {
        if (body[0] & ENV_COMPRESSED) {
            *code = "unimplemented";
            *msg = "compressed envelopes are not supported";
        } else {
            *msg = "the request envelope has unknown flags";
        }
        return -1;
    }
    if ((size_t)plen != len - 5) {
        *msg = "a server-streaming request carries exactly one envelope";
        return -1;
    }
    *payload = body + 5;
    *n = plen;
    return 0;
}

/* Content-Type without parameters, compared case-insensitively. */
static bool type_is(const char *ct, const char *want)
{
    size_t n = strlen(want);
    return ct != NULL && strncasecmp(ct, want, n) == 0 &&
           (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

json_t *connect_decode(struct wr_http_req *req, bool streaming, const char *body, size_t len)
{
    const char *ct = wr_http_req_header(req, "Content-Type");
    const char *enc = wr_http_req_header(req, "Content-Encoding");
    const char *p = body;
    json_error_t je;
    size_t n = len;
    json_t *j;

    if (streaming ? !type_is(ct, "application/connect+json") : !type_is(ct, "application/json")) {
        decode_error(req, streaming, "invalid_argument",
                     streaming ? "Content-Type must be application/connect+json (the JSON codec)"
                               : "Content-Type must be application/json (the JSON codec)");
        return NULL;
    }
    if ((enc != NULL && strcasecmp(enc, "identity") != 0) ||
        (wr_http_req_header(req, "Connect-Content-Encoding") != NULL &&
         strcasecmp(wr_http_req_header(req, "Connect-Content-Encoding"), "identity") != 0)) {
        decode_error(req, streaming, "unimplemented", "compressed requests are not supported");
        return NULL;
    }
    if (streaming) {
        const char *code, *msg;
        if (connect_unwrap(body, len, &p, &n, &code, &msg) < 0) {
            decode_error(req, true, code, msg);
            return NULL;
        }
    }
    if (n == 0)
        return json_object();
    j = json_loadb(p, n, 0, &je);
    if (j == NULL || !json_is_object(j)) {
        char msg[256];
        if (j == NULL)
            snprintf(msg, sizeof(msg), "malformed JSON at line %d column %d: %s", je.line,
                     je.column, je.text);
        else
            snprintf(msg, sizeof(msg), "the message must be a JSON object");
        json_decref(j);
        decode_error(req, streaming, "invalid_argument", msg);
        return NULL;
    }
    return j;
}
