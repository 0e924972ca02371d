/* SPDX-License-Identifier: Apache-2.0 */
/* The logging module. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "buf.h"

enum wr_log_level wr_log_min = WR_LOG_WARN;
static enum wr_log_format log_format = WR_LOG_TEXT;

static const char *const level_names[] = {"debug", "info", "warn", "error", "off"};

static _Thread_local struct {
    const char *request_id, *team, *sandbox;
} log_ctx;

void wr_log_set_level(const char *name)
{
    if (name == NULL)
        return;
    for (unsigned i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
        if (strcmp(name, level_names[i]) == 0)
            wr_log_min = (enum wr_log_level)i;
}

int wr_log_set_format(const char *name)
{
    if (name != NULL && strcmp(name, "text") == 0)
        log_format = WR_LOG_TEXT;
    else if (name != NULL && strcmp(name, "json") == 0)
        log_format = WR_LOG_JSON;
    else
        return -1;
    return 0;
}

void wr_log_ctx_set(const char *request_id, const char *team, const char *sandbox)
{
    log_ctx.request_id = request_id;
    log_ctx.team = team;
    log_ctx.sandbox = sandbox;
}

void wr_log_ctx_clear(void)
{
    wr_log_ctx_set(NULL, NULL, NULL);
}

/* A JSON string (quoted): control characters escaped; other bytes as they are. */
static void json_str(struct wr_buf *b, const char *s)
{
    wr_buf_puts(b, "\"");
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            char e[2] = {'\\', (char)ch};
            wr_buf_append(b, e, 2);
        } else if (ch == '\n') {
            wr_buf_puts(b, "\\n");
        } else if (ch == '\t') {
            wr_buf_puts(b, "\\t");
        } else if (ch < 0x20 || ch == 0x7f) {
            wr_buf_printf(b, "\\u%04x", ch);
        } else {
            wr_buf_append(b, s, 1);
        }
    }
    wr_buf_puts(b, "\"");
}

/* A text value: quoted when it has a space, a quote or '=' (quotes and backslashes escaped). */
static void text_val(struct wr_buf *b, const char *s)
{
    if (*s != '\0' && strpbrk(s, " \"=\\\n") == NULL) {
        wr_buf_puts(b, s);
        return;
    }
    wr_buf_puts(b, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            wr_buf_append(b, "\\", 1);
        if (*s == '\n')
            wr_buf_puts(b, "\\n");
        else
            wr_buf_append(b, s, 1);
    }
    wr_buf_puts(b, "\"");
}

static void put_time(struct wr_buf *b)
{
    struct timespec ts;
    struct tm tm;
    char t[32];

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%S", &tm);
    wr_buf_printf(b, "%s.%03ldZ", t, ts.tv_nsec / 1000000);
}

/* The start of a line: time, level, msg, at (func may be NULL), the context's ids. */
static void line_start(struct wr_buf *b, enum wr_log_level lvl, const char *msg, const char *func,
                       int line)
{
    const char *ctx_keys[] = {"request_id", "team", "sandbox"};
    const char *ctx_vals[] = {log_ctx.request_id, log_ctx.team, log_ctx.sandbox};

    if (log_format == WR_LOG_JSON) {
        wr_buf_puts(b, "{\"time\":\"");
        put_time(b);
        wr_buf_printf(b, "\",\"level\":\"%s\",\"msg\":", level_names[lvl]);
        json_str(b, msg);
        if (func != NULL)
            wr_buf_printf(b, ",\"at\":\"%s:%d\"", func, line);
        for (size_t i = 0; i < 3; i++)
            if (ctx_vals[i] != NULL) {
                wr_buf_printf(b, ",\"%s\":", ctx_keys[i]);
                json_str(b, ctx_vals[i]);
            }
        return;
    }
    wr_buf_printf(b, "level=%s", level_names[lvl]);
    if (func != NULL)
        wr_buf_printf(b, " at=%s:%d", func, line);
    wr_buf_printf(b, " msg=\"%s\"", msg);
    for (size_t i = 0; i < 3; i++)
        if (ctx_vals[i] != NULL) {
            wr_buf_printf(b, " %s=", ctx_keys[i]);
            text_val(b, ctx_vals[i]);
        }
}

static void line_end(struct wr_buf *b)
{
    wr_buf_puts(b, log_format == WR_LOG_JSON ? "}\n" : "\n");
    /* One write per line: lines of several threads never interleave. */
    fwrite(b->data, 1, b->len, stderr);
    wr_buf_fini(b);
}

void wr_log_emit(enum wr_log_level lvl, const char *func, int line, const char *fmt, ...)
{
    struct wr_buf b = {0};
    char buf[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    line_start(&b, lvl, buf, func, line);
    line_end(&b);
}

/* A number: an integer as one (the cheap conversion), anything else with 9 digits. */
static void put_num(struct wr_buf *b, double v)
{
    if (v == (double)(long long)v && v > -9e15 && v < 9e15)
        wr_buf_printf(b, "%lld", (long long)v);
    else
        wr_buf_printf(b, "%.9g", v);
}

void wr_log_fields(enum wr_log_level lvl, const char *msg, const struct wr_log_field *f, size_t n)
{
    struct wr_buf b = {0};

    if (lvl < wr_log_min)
        return;
    line_start(&b, lvl, msg, NULL, 0);
    for (size_t i = 0; i < n; i++) {
        if (log_format == WR_LOG_JSON) {
            wr_buf_printf(&b, ",\"%s\":", f[i].key);
            if (f[i].str != NULL)
                json_str(&b, f[i].str);
            else
                put_num(&b, f[i].num);
        } else {
            wr_buf_printf(&b, " %s=", f[i].key);
            if (f[i].str != NULL)
                text_val(&b, f[i].str);
            else
                put_num(&b, f[i].num);
        }
    }
    line_end(&b);
}
