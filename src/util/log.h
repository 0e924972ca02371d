/* SPDX-License-Identifier: Apache-2.0 */
/* One logging module: one line per event on stderr, "level=... msg=..." with the call site.
 * The level is checked before anything is formatted. Never call from a signal handler or from
 * the child between clone and exec. */
#pragma once

enum wr_log_level { WR_LOG_DEBUG, WR_LOG_INFO, WR_LOG_WARN, WR_LOG_ERROR, WR_LOG_OFF };

extern enum wr_log_level wr_log_min;

/* Set the level from a name ("debug", "info", "warn", "error", "off"); unknown names keep it. */
void wr_log_set_level(const char *name);

void wr_log_emit(enum wr_log_level lvl, const char *func, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define wr_log(lvl, ...)                                                                           \
    do {                                                                                           \
        if ((lvl) >= wr_log_min)                                                                   \
            wr_log_emit((lvl), __func__, __LINE__, __VA_ARGS__);                                   \
    } while (0)
#define log_debug(...) wr_log(WR_LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  wr_log(WR_LOG_INFO, __VA_ARGS__)
#define log_warn(...)  wr_log(WR_LOG_WARN, __VA_ARGS__)
#define log_error(...) wr_log(WR_LOG_ERROR, __VA_ARGS__)
