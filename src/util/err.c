/* SPDX-License-Identifier: Apache-2.0 */
/* The error type's constructors, its table and the errno classifier. */
#include "err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int status;
    const char *connect;
} kinds[] = {
#define WR__ERR_ROW(k, name, status, connect) [WR_E##k] = {name, status, connect},
    WR_ERR_MAP(WR__ERR_ROW)
#undef WR__ERR_ROW
};

/* errno → kind, and the Connect code where Connect says more than the kind (NULL: the kind's).
 * An errno missing here is a failed system call (WR_ESYS). */
static const struct {
    int errnum;
    enum wr_err_kind kind;
    const char *connect;
} errnos[] = {
    {ENOENT, WR_ENOTFOUND, NULL},
    {ESRCH, WR_ENOTFOUND, NULL},
    {EEXIST, WR_ECONFLICT, "already_exists"},
    {ENOTEMPTY, WR_ECONFLICT, NULL},
    {EBUSY, WR_ECONFLICT, NULL},
    {EISDIR, WR_ECONFLICT, "invalid_argument"},
    {ENOTDIR, WR_ECONFLICT, "invalid_argument"},
    {ENOTTY, WR_ECONFLICT, NULL}, /* resizing a process that has no terminal */
    {EXDEV, WR_ECONFLICT, NULL},  /* a move across filesystems of the sandbox */
    {EACCES, WR_EFORBIDDEN, NULL},
    {EPERM, WR_EFORBIDDEN, NULL},
    {EINVAL, WR_EINVAL, NULL},
    {ENAMETOOLONG, WR_EINVAL, NULL},
    {ELOOP, WR_EINVAL, NULL},
    {ENOSPC, WR_ENOSPACE, NULL},
    {EDQUOT, WR_ENOSPACE, NULL},
};

static void append_errno(struct wr_err *e, int errnum)
{
    size_t n = strlen(e->msg);
    if (errnum != 0 && n < sizeof(e->msg) - 1)
        snprintf(e->msg + n, sizeof(e->msg) - n, ": %s", strerror(errnum));
}

int wr_err_vset(struct wr_err *e, enum wr_err_kind kind, int errnum, const char *fmt, va_list ap)
{
    if (e == NULL)
        return -1;
    e->kind = kind;
    e->sys_errno = errnum;
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    append_errno(e, errnum);
    return -1;
}

int wr_err_set(struct wr_err *e, enum wr_err_kind kind, int errnum, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    wr_err_vset(e, kind, errnum, fmt, ap);
    va_end(ap);
    return -1;
}

int wr_err_sys(struct wr_err *e, const char *fmt, ...)
{
    int errnum = errno;
    va_list ap;

    va_start(ap, fmt);
    wr_err_vset(e, WR_ESYS, errnum, fmt, ap);
    va_end(ap);
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
    if (e == NULL)
        return;
    e->kind = WR_EOK;
    e->sys_errno = 0;
    e->msg[0] = '\0';
}

static enum wr_err_kind in_range(enum wr_err_kind kind)
{
    return (unsigned)kind < WR_ERR_NKINDS ? kind : WR_EINTERNAL;
}

const char *wr_err_kind_name(enum wr_err_kind kind)
{
    return kinds[in_range(kind)].name;
}

int wr_err_kind_status(enum wr_err_kind kind)
{
    return kinds[in_range(kind)].status;
}

const char *wr_err_kind_connect(enum wr_err_kind kind)
{
    return kinds[in_range(kind)].connect;
}

static int errno_row(int errnum)
{
    for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
        if (errnos[i].errnum == errnum)
            return (int)i;
    return -1;
}

enum wr_err_kind wr_err_kind_of_errno(int errnum)
{
    int i = errno_row(errnum);
    return i < 0 ? WR_ESYS : errnos[i].kind;
}

enum wr_err_kind wr_err_class(const struct wr_err *e)
{
    enum wr_err_kind k;

    if (e->kind != WR_ESYS && e->kind != WR_EINTERNAL)
        return e->kind;
    k = wr_err_kind_of_errno(e->sys_errno);
    return k == WR_ESYS ? e->kind : k;
}

const char *wr_err_connect_code(const struct wr_err *e)
{
    enum wr_err_kind k = wr_err_class(e);
    int i = errno_row(e->sys_errno);

    if (i >= 0 && errnos[i].kind == k && errnos[i].connect != NULL)
        return errnos[i].connect;
    return wr_err_kind_connect(k);
}
