/* SPDX-License-Identifier: Apache-2.0 */
/* The error type's constructors. */
#include "err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void append_errno(struct wr_err *e, int errnum)
{
    size_t n = strlen(e->msg);
    if (errnum != 0 && n < sizeof(e->msg) - 1)
        snprintf(e->msg + n, sizeof(e->msg) - n, ": %s", strerror(errnum));
}

int wr_err_set(struct wr_err *e, enum wr_err_kind kind, int errnum, const char *fmt, ...)
{
    va_list ap;

    if (e == NULL)
        return -1;
    e->kind = kind;
    e->sys_errno = errnum;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
    append_errno(e, errnum);
    return -1;
}

int wr_err_sys(struct wr_err *e, const char *fmt, ...)
{
    int errnum = errno;
    va_list ap;

    if (e == NULL)
        return -1;
    e->kind = WR_ESYS;
    e->sys_errno = errnum;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
    append_errno(e, errnum);
    return -1;
}

int wr_err_wrap(struct wr_err *e, const char *fmt, ...)
{
    char prefix[256], old[sizeof(e->msg)];
    va_list ap;

    if (e == NULL)
        return -1;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof(old));
    {
        size_t pl = strlen(prefix), ol = strlen(old), cap = sizeof(e->msg) - 1;
        if (pl > cap - 2)
            pl = cap - 2;
        memcpy(e->msg, prefix, pl);
        memcpy(e->msg + pl, ": ", 2);
        if (ol > cap - pl - 2)
            ol = cap - pl - 2;
        memcpy(e->msg + pl + 2, old, ol);
        e->msg[pl + 2 + ol] = '\0';
    }
    if (e->kind == WR_EOK)
        e->kind = WR_EINTERNAL;
    return -1;
}

void wr_err_clear(struct wr_err *e)
{
    e->kind = WR_EOK;
    e->sys_errno = 0;
    e->msg[0] = '\0';
}

const char *wr_err_kind_name(enum wr_err_kind kind)
{
    switch (kind) {
    case WR_EOK:
        return "ok";
    case WR_EINVAL:
        return "invalid";
    case WR_ENOTFOUND:
        return "not_found";
    case WR_ECONFLICT:
        return "conflict";
    case WR_ELIMIT:
        return "limit";
    case WR_EUNSUPPORTED:
        return "unsupported";
    case WR_ESYS:
        return "system";
    case WR_EPROTO:
        return "protocol";
    case WR_EINTERNAL:
        return "internal";
    case WR_EBADDATA:
        return "bad_content";
    case WR_ETOOBIG:
        return "too_large";
    }
    return "internal";
}
