/* SPDX-License-Identifier: Apache-2.0 */
/* One logging module: one line per event on stderr, either text ("level=... at=... msg=...")
 * or JSON (one object per line: time, level, msg, at, and the request, team and sandbox ids of
 * the thread's log context when set). The level is checked before anything is formatted. Never
 * call from a signal handler or from the child between clone and exec. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

enum wr_log_level { WR_LOG_DEBUG, WR_LOG_INFO, WR_LOG_WARN, WR_LOG_ERROR, WR_LOG_OFF };
enum wr_log_format { WR_LOG_TEXT, WR_LOG_JSON };

extern enum wr_log_level wr_log_min;

/* Set the level from a name ("debug", "info", "warn", "error", "off"); unknown names keep it. */
void wr_log_set_level(const char *name);
/* Set the format from a name ("text", "json"). Returns 0, or -1 for an unknown name (kept). */
int wr_log_set_format(const char *name);

/* The calling thread's log context: the ids every line it logs carries until cleared (NULL: not
 * known). The strings must stay valid until wr_log_ctx_clear. */
void wr_log_ctx_set(const char *request_id, const char *team, const char *sandbox);
void wr_log_ctx_clear(void);

void wr_log_emit(enum wr_log_level lvl, const char *func, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A line with fields of its own (the access line): key=value in text, members in JSON. A field
 * with str NULL is the number num. */
struct wr_log_field {
    const char *key;
    const char *str;
    double num;
};
void wr_log_fields(enum wr_log_level lvl, const char *msg, const struct wr_log_field *f, size_t n);

#define wr_log(lvl, ...)                                                                           \
    do {                                                                                           \
        if ((lvl) >= wr_log_min)                                                                   \
            wr_log_emit((lvl), __func__, __LINE__, __VA_ARGS__);                                   \
    } while (0)
#define log_debug(...) wr_log(WR_LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  wr_log(WR_LOG_INFO, __VA_ARGS__)
#define log_warn(...)  wr_log(WR_LOG_WARN, __VA_ARGS__)
#define log_error(...) wr_log(WR_LOG_ERROR, __VA_ARGS__)
