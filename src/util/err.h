/* SPDX-License-Identifier: Apache-2.0 */
/* The one error type: a kind (what the caller can act on), the errno if a system call failed, and
 * a message built from lowercase fragments that chain as the error travels up
 * ("create sandbox x: cgroup: write memory.limit_in_bytes: Device or resource busy").
 * See docs/design/errors.md for the contract. */
#pragma once

#include <stdarg.h>
#include <stddef.h>

/* Every kind, once: XX(suffix, name, HTTP status, Connect code). The name is the native API's
 * error code; the Connect code is what the E2B envd surface answers (connectrpc.com/docs/protocol).
 * Both answers of a kind come from this table, so they cannot disagree. */
#define WR_ERR_MAP(XX)                                                                             \
    /* no error: answering with it is a bug, hence 500 */                                          \
    XX(OK, "ok", 500, "internal")                                                                  \
    /* the caller's input is wrong */                                                              \
    XX(INVAL, "invalid", 400, "invalid_argument")                                                  \
    /* the thing named does not exist */                                                           \
    XX(NOTFOUND, "not_found", 404, "not_found")                                                    \
    /* the thing exists or is in the wrong state */                                                \
    XX(CONFLICT, "conflict", 409, "failed_precondition")                                           \
    /* a capacity or quota stops it; retrying later may work (429 with Retry-After for creates) */ \
    XX(LIMIT, "limit", 503, "resource_exhausted")                                                  \
    /* this host or backend cannot do it */                                                        \
    XX(UNSUPPORTED, "unsupported", 501, "unimplemented")                                           \
    /* a system call failed unexpectedly */                                                        \
    XX(SYS, "system", 500, "internal")                                                             \
    /* a peer sent something malformed (the sandbox's agent) */                                    \
    XX(PROTO, "protocol", 502, "unavailable")                                                      \
    /* a bug */                                                                                    \
    XX(INTERNAL, "internal", 500, "internal")                                                      \
    /* content that fails its checks: a bad archive, a digest mismatch */                          \
    XX(BADDATA, "bad_content", 422, "invalid_argument")                                            \
    /* over a limit of size: the request as it is never fits (not a capacity that may clear,       \
     * which is LIMIT); not resource_exhausted, which the SDKs take for a rate limit to retry */   \
    XX(TOOBIG, "too_large", 413, "invalid_argument")                                               \
    /* no valid API key */                                                                         \
    XX(UNAUTHORIZED, "unauthorized", 401, "unauthenticated")                                       \
    /* the caller may not do this (EACCES, EPERM; a team key where an admin one is needed) */      \
    XX(FORBIDDEN, "forbidden", 403, "permission_denied")                                           \
    /* the path exists, the method does not */                                                     \
    XX(METHOD, "method_not_allowed", 405, "unimplemented")                                         \
    /* a disk is full: the sandbox's, or the state filesystem down to its reserve */               \
    XX(NOSPACE, "no_space", 507, "resource_exhausted")                                             \
    /* a server we called refused or did not answer (a registry) */                                \
    XX(UPSTREAM, "upstream", 502, "unavailable")                                                   \
    /* it did not finish in the time allowed */                                                    \
    XX(TIMEOUT, "timeout", 504, "deadline_exceeded")                                               \
    /* a template's start command failed or did not become ready (docs/templates.md) */            \
    XX(STARTFAILED, "start_failed", 502, "unavailable")

enum wr_err_kind {
#define WR__ERR_KIND(k, name, status, connect) WR_E##k,
    WR_ERR_MAP(WR__ERR_KIND)
#undef WR__ERR_KIND
};

/* How many kinds there are (a bound for loops over them). */
#define WR__ERR_ONE(k, name, status, connect) +1
enum { WR_ERR_NKINDS = 0 WR_ERR_MAP(WR__ERR_ONE) };
#undef WR__ERR_ONE

struct wr_err {
    enum wr_err_kind kind;
    int sys_errno;
    char msg[512];
};

/* Fill `e` with `kind`, `errnum` (0 if none) and a formatted message; when errnum is non-zero,
 * ": <strerror>" is appended. Always returns -1 so callers can write `return wr_err_set(...)`.
 * `e` may be NULL (the error is then dropped). */
int wr_err_set(struct wr_err *e, enum wr_err_kind kind, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* wr_err_set with a va_list. */
int wr_err_vset(struct wr_err *e, enum wr_err_kind kind, int errnum, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* Shorthand for wr_err_set(e, WR_ESYS, errno, ...). Reads errno before anything else. */
int wr_err_sys(struct wr_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepend "<context>: " to an error already set, keeping its kind and errno. Returns -1. */
int wr_err_wrap(struct wr_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reset to WR_EOK with an empty message. `e` may be NULL. */
void wr_err_clear(struct wr_err *e);

/* The table's columns for a kind: its stable lowercase name ("invalid", "not_found", ...; the
 * API's error codes), its HTTP status, its Connect code. A value out of range reads as
 * WR_EINTERNAL. */
const char *wr_err_kind_name(enum wr_err_kind kind);
int wr_err_kind_status(enum wr_err_kind kind);
const char *wr_err_kind_connect(enum wr_err_kind kind);

/* The kind an errno means to a caller: ENOENT/ESRCH not_found; EEXIST, ENOTEMPTY, EBUSY,
 * EISDIR, ENOTDIR, ENOTTY, EXDEV conflict; EACCES/EPERM forbidden; EINVAL, ENAMETOOLONG, ELOOP
 * invalid; ENOSPC/EDQUOT no_space; any other (and 0) WR_ESYS. */
enum wr_err_kind wr_err_kind_of_errno(int errnum);

/* The kind to answer `e` with: its own, except that a WR_ESYS or WR_EINTERNAL error carrying an
 * errno the classifier knows takes that errno's kind (a file the sandbox lacks is not_found,
 * not a failed system call). */
enum wr_err_kind wr_err_class(const struct wr_err *e);

/* The Connect code to answer `e` with: its class's, refined by the errno where Connect has a
 * finer code than the kind (EEXIST already_exists; ENOTDIR/EISDIR invalid_argument, as envd
 * answers "path is not a directory"). */
const char *wr_err_connect_code(const struct wr_err *e);
