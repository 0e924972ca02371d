/* SPDX-License-Identifier: Apache-2.0 */
/* The error type: its table (every kind has a name, status and Connect code; names are unique),
 * the errno classifier, and messages that chain. */
#include <errno.h>
#include <string.h>

#include "../../src/util/err.h"
#include "tap.h"

/* The codes of the Connect protocol (connectrpc.com/docs/protocol#error-codes). */
static const char *const connect_codes[] = {
    "canceled",
    "unknown",
    "invalid_argument",
    "deadline_exceeded",
    "not_found",
    "already_exists",
    "permission_denied",
    "resource_exhausted",
    "failed_precondition",
    "aborted",
    "out_of_range",
    "unimplemented",
    "internal",
    "unavailable",
    "data_loss",
    "unauthenticated",
};

static int is_connect_code(const char *c)
{
    for (size_t i = 0; i < sizeof(connect_codes) / sizeof(connect_codes[0]); i++)
        if (c != NULL && strcmp(c, connect_codes[i]) == 0)
            return 1;
    return 0;
}

static void table(void)
{
    int bad_name = 0, bad_status = 0, bad_connect = 0, dup = 0;

    for (int k = 0; k < WR_ERR_NKINDS; k++) {
        const char *n = wr_err_kind_name(k);
        int st = wr_err_kind_status(k);
        if (n == NULL || n[0] == '\0' || strspn(n, "abcdefghijklmnopqrstuvwxyz_") != strlen(n))
            bad_name++;
        if (st < 400 || st > 599)
            bad_status++;
        if (!is_connect_code(wr_err_kind_connect(k)))
            bad_connect++;
        for (int j = 0; j < k; j++)
            if (n != NULL && strcmp(n, wr_err_kind_name(j)) == 0)
                dup++;
    }
    is_int(bad_name, 0, "every kind has a lowercase name");
    is_int(bad_status, 0, "every kind has an HTTP error status");
    is_int(bad_connect, 0, "every kind has a Connect code");
    is_int(dup, 0, "names are unique");
    is_int(WR_EOK, 0, "WR_EOK is 0 (a zeroed wr_err is no error)");

    /* The codes and statuses docs/openapi.yaml lists. */
    is_str(wr_err_kind_name(WR_EINVAL), "invalid", "invalid");
    is_int(wr_err_kind_status(WR_EINVAL), 400, "invalid is 400");
    is_int(wr_err_kind_status(WR_EUNAUTHORIZED), 401, "unauthorized is 401");
    is_int(wr_err_kind_status(WR_EFORBIDDEN), 403, "forbidden is 403");
    is_int(wr_err_kind_status(WR_ENOTFOUND), 404, "not_found is 404");
    is_str(wr_err_kind_name(WR_EMETHOD), "method_not_allowed", "method_not_allowed");
    is_int(wr_err_kind_status(WR_EMETHOD), 405, "method_not_allowed is 405");
    is_int(wr_err_kind_status(WR_ECONFLICT), 409, "conflict is 409");
    is_int(wr_err_kind_status(WR_ETOOBIG), 413, "too_large is 413");
    is_int(wr_err_kind_status(WR_EBADDATA), 422, "bad_content is 422");
    is_int(wr_err_kind_status(WR_ESYS), 500, "system is 500");
    is_int(wr_err_kind_status(WR_EUNSUPPORTED), 501, "unsupported is 501");
    is_int(wr_err_kind_status(WR_EPROTO), 502, "protocol is 502");
    is_str(wr_err_kind_name(WR_EUPSTREAM), "upstream", "upstream");
    is_int(wr_err_kind_status(WR_EUPSTREAM), 502, "upstream is 502");
    is_int(wr_err_kind_status(WR_ELIMIT), 503, "limit is 503");
    is_int(wr_err_kind_status(WR_ETIMEOUT), 504, "timeout is 504");
    is_str(wr_err_kind_name(WR_ENOSPACE), "no_space", "no_space");
    is_int(wr_err_kind_status(WR_ENOSPACE), 507, "no_space is 507");
    is_str(wr_err_kind_connect(WR_ETOOBIG), "invalid_argument",
           "too_large is not resource_exhausted over Connect (the SDKs retry that)");
    is_str(wr_err_kind_name((enum wr_err_kind)999), "internal", "out of range reads as internal");
}

static void classifier(void)
{
    static const struct {
        int errnum;
        enum wr_err_kind kind;
    } want[] = {
        {ENOENT, WR_ENOTFOUND},
        {ESRCH, WR_ENOTFOUND},
        {EEXIST, WR_ECONFLICT},
        {ENOTEMPTY, WR_ECONFLICT},
        {EBUSY, WR_ECONFLICT},
        {EISDIR, WR_ECONFLICT},
        {ENOTDIR, WR_ECONFLICT},
        {ENOTTY, WR_ECONFLICT},
        {EXDEV, WR_ECONFLICT},
        {EACCES, WR_EFORBIDDEN},
        {EPERM, WR_EFORBIDDEN},
        {EINVAL, WR_EINVAL},
        {ENAMETOOLONG, WR_EINVAL},
        {ELOOP, WR_EINVAL},
        {ENOSPC, WR_ENOSPACE},
        {EDQUOT, WR_ENOSPACE},
        {EIO, WR_ESYS},
        {ECONNRESET, WR_ESYS},
        {0, WR_ESYS},
    };
    struct wr_err e;

    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        ok(wr_err_kind_of_errno(want[i].errnum) == want[i].kind, "%s is %s",
           strerror(want[i].errnum), wr_err_kind_name(want[i].kind));

    wr_err_set(&e, WR_ESYS, ENOENT, "open x");
    is_int(wr_err_class(&e), WR_ENOTFOUND, "a failed call's ENOENT answers not_found");
    wr_err_set(&e, WR_ESYS, EIO, "read x");
    is_int(wr_err_class(&e), WR_ESYS, "EIO stays system");
    wr_err_set(&e, WR_EUNSUPPORTED, EPERM, "unshare");
    is_int(wr_err_class(&e), WR_EUNSUPPORTED, "a kind other than system keeps its own");
    wr_err_set(&e, WR_EINVAL, ENOENT, "exec");
    is_str(wr_err_connect_code(&e), "invalid_argument", "a missing command is invalid_argument");

    /* Connect: the kind's code, refined by the errno where Connect says more. */
    wr_err_set(&e, WR_ECONFLICT, EEXIST, "mkdir");
    is_str(wr_err_connect_code(&e), "already_exists", "EEXIST is already_exists");
    wr_err_set(&e, WR_ECONFLICT, ENOTEMPTY, "rename");
    is_str(wr_err_connect_code(&e), "failed_precondition", "ENOTEMPTY is failed_precondition");
    is_int(wr_err_kind_status(wr_err_class(&e)), 409, "and 409 natively");
    wr_err_set(&e, WR_ESYS, EXDEV, "rename");
    is_str(wr_err_connect_code(&e), "failed_precondition", "EXDEV is failed_precondition");
    wr_err_set(&e, WR_ECONFLICT, ENOTDIR, "list");
    is_str(wr_err_connect_code(&e), "invalid_argument", "ENOTDIR is invalid_argument, as envd");
    wr_err_set(&e, WR_ESYS, EACCES, "open");
    is_str(wr_err_connect_code(&e), "permission_denied", "EACCES is permission_denied");
    wr_err_set(&e, WR_ESYS, ENOSPC, "write");
    is_str(wr_err_connect_code(&e), "resource_exhausted", "ENOSPC is resource_exhausted");
    wr_err_set(&e, WR_ECONFLICT, 0, "sandbox is paused");
    is_str(wr_err_connect_code(&e), "failed_precondition", "a conflict is failed_precondition");
    wr_err_set(&e, WR_ESYS, ECONNRESET, "agent");
    is_str(wr_err_connect_code(&e), "internal", "an unknown errno is internal");
}

static int vset(struct wr_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int vset(struct wr_err *e, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = wr_err_vset(e, WR_ELIMIT, 0, fmt, ap);
    va_end(ap);
    return rc;
}

static void constructors(void)
{
    struct wr_err e;
    char big[600];

    is_int(wr_err_set(NULL, WR_EINVAL, 0, "dropped"), -1, "set(NULL) returns -1");
    is_int(wr_err_sys(NULL, "dropped"), -1, "sys(NULL) returns -1");
    is_int(wr_err_wrap(NULL, "dropped"), -1, "wrap(NULL) returns -1");
    wr_err_clear(NULL);
    ok(1, "clear(NULL) is safe");

    is_int(vset(&e, "%d sandboxes", 3), -1, "vset returns -1");
    ok(e.kind == WR_ELIMIT && strcmp(e.msg, "3 sandboxes") == 0, "vset formats");

    errno = EACCES;
    wr_err_sys(&e, "mount %s", "/proc");
    ok(e.kind == WR_ESYS && e.sys_errno == EACCES, "sys takes errno");
    is_str(e.msg, "mount /proc: Permission denied", "sys appends strerror");

    wr_err_set(&e, WR_ENOTFOUND, ENOENT, "open `%s`", "/x");
    wr_err_wrap(&e, "image %s", "base");
    wr_err_wrap(&e, "create sandbox %s", "sb1");
    is_str(e.msg, "create sandbox sb1: image base: open `/x`: No such file or directory",
           "wrap chains fragments");
    ok(e.kind == WR_ENOTFOUND && e.sys_errno == ENOENT, "wrap keeps kind and errno");

    wr_err_clear(&e);
    ok(e.kind == WR_EOK && e.sys_errno == 0 && e.msg[0] == '\0', "clear resets");
    wr_err_wrap(&e, "context");
    is_int(e.kind, WR_EINTERNAL, "wrapping no error is a bug: internal");

    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    wr_err_set(&e, WR_EINVAL, 0, "%s", big);
    wr_err_wrap(&e, "%s", big);
    is_int(strlen(e.msg), sizeof(e.msg) - 1, "a long chain is cut to the buffer");
}

int main(void)
{
    table();
    classifier();
    constructors();
    return done();
}
