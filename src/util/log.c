/* SPDX-License-Identifier: Apache-2.0 */
/* The logging module. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum wr_log_level wr_log_min = WR_LOG_WARN;

void wr_log_set_level(const char *name)
{
    static const char *const names[] = {"debug", "info", "warn", "error", "off"};

    if (name == NULL)
        return;
    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(name, names[i]) == 0)
            wr_log_min = (enum wr_log_level)i;
}

void wr_log_emit(enum wr_log_level lvl, const char *func, int line, const char *fmt, ...)
{
    static const char *const names[] = {"debug", "info", "warn", "error", "off"};
    char buf[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fprintf(stderr, "level=%s at=%s:%d msg=\"%s\"\n", names[lvl], func, line, buf);
}
