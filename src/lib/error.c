/* SPDX-License-Identifier: Apache-2.0 */
/* warren_error: the project's error type as the public header shows it (lib.h). */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/cleanup.h"
#include "lib.h"

/* warren_code mirrors enum wr_err_kind value for value: the public header cannot include
 * util/err.h, so the two lists are kept in step here. */
#define WL__SAME(k, name, status, connect)                                                         \
    _Static_assert((int)WARREN_E##k == (int)WR_E##k, "warren_code " #k " != wr_err_kind");
WR_ERR_MAP(WL__SAME)
#undef WL__SAME
_Static_assert((int)WARREN_ESTARTFAILED + 1 == (int)WR_ERR_NKINDS, "warren_code lacks a kind");

const char *warren_strcode(warren_code code)
{
    static const char *const names[] = {
#define WL__NAME(k, name, status, connect) name,
        WR_ERR_MAP(WL__NAME)
#undef WL__NAME
    };
    if ((int)code < 0 || (size_t)code >= WR_ARRAY_SIZE(names))
        return "unknown";
    return names[code];
}

void warren_free(void *p)
{
    free(p);
}

void wl_ok(warren_error *out)
{
    if (out != NULL)
        memset(out, 0, sizeof(*out));
}

int wl_fail(warren_error *out, const struct wr_err *e, int status, const char *api_code)
{
    if (out == NULL)
        return -1;
    memset(out, 0, sizeof(*out));
    out->code = (warren_code)e->kind;
    out->sys_errno = e->sys_errno;
    out->status = status;
    snprintf(out->api_code, sizeof(out->api_code), "%s", api_code ? api_code : "");
    snprintf(out->message, sizeof(out->message), "%s", e->msg[0] ? e->msg : "unknown error");
    return -1;
}

int wl_failf(warren_error *out, enum wr_err_kind kind, int errnum, const char *fmt, ...)
{
    struct wr_err e;
    va_list ap;

    va_start(ap, fmt);
    wr_err_vset(&e, kind, errnum, fmt, ap);
    va_end(ap);
    return wl_fail(out, &e, 0, NULL);
}

int wl_fail_resp(warren_error *out, const struct wl_http_resp *resp)
{
    struct wr_err e;
    json_t *j = resp->body_len ? json_loadb(resp->body, resp->body_len, 0, NULL) : NULL;
    const char *code = json_string_value(json_object_get(j, "code"));
    int r;

    wl_http_error(resp, &e);
    r = wl_fail(out, &e, resp->status, code);
    json_decref(j);
    return r;
}

int wl_check_id(const char *id, warren_error *out)
{
    size_t n = id ? strlen(id) : 0;

    if (n >= 1 && n <= 64 &&
        strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == n)
        return 0;
    return wl_failf(out, WR_EINVAL, 0, "`%s` is not a sandbox id", id ? id : "(null)");
}

int wl_check_name(const char *what, const char *name, warren_error *out)
{
    size_t n = name ? strlen(name) : 0;

    if (n >= 1 && n <= 128 &&
        strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n &&
        strcmp(name, ".") != 0 && strcmp(name, "..") != 0)
        return 0;
    return wl_failf(out, WR_EINVAL, 0, "`%s` is not a %s", name ? name : "(null)", what);
}
