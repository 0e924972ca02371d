/* SPDX-License-Identifier: Apache-2.0 */
/* The one error type: a kind (what the caller can act on), the errno if a system call failed, and
 * a message built from lowercase fragments that chain as the error travels up
 * ("create sandbox x: cgroup: write memory.limit_in_bytes: Device or resource busy").
 * See docs/design/errors.md for the contract. */
#pragma once

#include <stddef.h>

enum wr_err_kind {
    WR_EOK = 0,
    WR_EINVAL,       /* the caller's input is wrong */
    WR_ENOTFOUND,    /* the thing named does not exist */
    WR_ECONFLICT,    /* the thing exists or is in the wrong state */
    WR_ELIMIT,       /* a capacity or quota stops it; retrying later may work */
    WR_EUNSUPPORTED, /* this host or backend cannot do it */
    WR_ESYS,         /* a system call failed unexpectedly */
    WR_EPROTO,       /* a peer sent something malformed */
    WR_EINTERNAL,    /* a bug */
    WR_EBADDATA,     /* content that fails its checks: a bad archive, a digest mismatch */
    WR_ETOOBIG,      /* over a limit of size: the request as it is never fits (not a capacity
                      * that may clear, which is WR_ELIMIT) */
};

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

/* Shorthand for wr_err_set(e, WR_ESYS, errno, ...). Reads errno before anything else. */
int wr_err_sys(struct wr_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepend "<context>: " to an error already set, keeping its kind and errno. Returns -1. */
int wr_err_wrap(struct wr_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reset to WR_EOK with an empty message. */
void wr_err_clear(struct wr_err *e);

/* A stable lowercase name for a kind ("invalid", "not_found", ...), used as API error codes. */
const char *wr_err_kind_name(enum wr_err_kind kind);
