/* SPDX-License-Identifier: Apache-2.0 */
/* File operations in a running sandbox (src/core/files.c): the daemon's side of the FILE_*
 * requests of src/proto/proto.h, with typed results. Every path is resolved by warren-init inside
 * the sandbox, as the request's user (struct wr_file_req: path, user or uid/gid, and the fields of
 * the operation).
 *
 * Short operations (stat, list, mkdir, remove, rename) go on the sandbox's control connection.
 * Transfers and watches go on a connection of their own (struct wr_fconn), so a slow client of
 * one cannot hold up anything else.
 *
 * Callbacks: results (stats, events, data) are valid during the call. An operation that returns
 * 0 gets its final callback (cb or on_done) exactly once, never before the call returns (none
 * once its connection is closed with wr_fconn_close); one that returns -1 (err set) gets none. All
 * calls on the loop thread. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/proto.h"
#include "../util/err.h"

struct wr_live_sb;
struct wr_fconn;

/* A stat (st) or why there is none (err; sys_errno has warren-init's errno, e.g. ENOENT). */
typedef void (*wr_file_stat_cb)(void *ctx, const struct wr_stat *st, const struct wr_err *err);
/* An operation's end: err NULL on success. */
typedef void (*wr_file_done_cb)(void *ctx, const struct wr_err *err);

/* ---- on the control connection ------------------------------------------------------------- */

/* The errors of every call here: WR_ECONFLICT "the sandbox's agent is not connected" (not
 * running, or its agent is reconnecting), or the request did not encode. */

/* FILE_STAT (r->nofollow: of a symlink itself). */
int wr_live_sb_file_stat(struct wr_live_sb *sb, const struct wr_file_req *r, wr_file_stat_cb cb,
                         void *ctx, struct wr_err *err);
/* FILE_LIST to r->depth (0: 1): on_entry for each entry (st->name relative to r->path), then
 * on_done. */
int wr_live_sb_file_list(struct wr_live_sb *sb, const struct wr_file_req *r,
                         void (*on_entry)(void *ctx, const struct wr_stat *st),
                         wr_file_done_cb on_done, void *ctx, struct wr_err *err);
/* FILE_MKDIR (r->mode if has_mode, r->parents), FILE_REMOVE (r->recursive), FILE_RENAME to
 * r->dest. */
int wr_live_sb_file_mkdir(struct wr_live_sb *sb, const struct wr_file_req *r, wr_file_done_cb cb,
                          void *ctx, struct wr_err *err);
int wr_live_sb_file_remove(struct wr_live_sb *sb, const struct wr_file_req *r, wr_file_done_cb cb,
                           void *ctx, struct wr_err *err);
int wr_live_sb_file_rename(struct wr_live_sb *sb, const struct wr_file_req *r, wr_file_done_cb cb,
                           void *ctx, struct wr_err *err);

/* ---- on a connection of its own ------------------------------------------------------------ */

struct wr_fconn_cbs {
    /* The connection is up (err NULL: operations may start), or could not be made. */
    void (*on_ready)(void *ctx, const struct wr_err *err);
    /* An established connection was lost (WR_EPROTO "the sandbox's agent closed the connection:
     * <why>"), after the final callbacks of its pending operations. */
    void (*on_lost)(void *ctx, const struct wr_err *err);
    /* Optional: the queue to warren-init was full (wr_fconn_full) and has drained. */
    void (*on_drain)(void *ctx);
};

/* Open a connection to sb's warren-init (sb is referenced until wr_fconn_close). Returns 0
 * (on_ready follows) or -1 with err (WR_ECONFLICT: the sandbox is not running). */
int wr_live_sb_fconn_open(struct wr_live_sb *sb, const struct wr_fconn_cbs *cbs, void *ctx,
                          struct wr_fconn **out, struct wr_err *err);
/* Close and free: no callback of the connection or of its operations comes after (a write in
 * progress is abandoned: warren-init removes its temporary file). NULL is accepted. May be called
 * from inside any of its callbacks. */
void wr_fconn_close(struct wr_fconn *fc);

/* FILE_STAT, as wr_live_sb_file_stat. Errors of these calls: the connection is not up, or the
 * request did not encode. */
int wr_fconn_stat(struct wr_fconn *fc, const struct wr_file_req *r, wr_file_stat_cb cb, void *ctx,
                  struct wr_err *err);

/* FILE_READ of r->length bytes (UINT64_MAX: to the end) from r->offset. */
struct wr_file_read_cbs {
    void (*on_stat)(void *ctx, const struct wr_stat *st); /* first: the file's stat */
    void (*on_data)(void *ctx, const uint8_t *p, size_t n);
    wr_file_done_cb on_done; /* all sent, or why not */
};
int wr_fconn_read(struct wr_fconn *fc, const struct wr_file_req *r,
                  const struct wr_file_read_cbs *cbs, void *ctx, struct wr_err *err);
/* Stop or resume reading from warren-init (a slow consumer of a read). */
void wr_fconn_pause(struct wr_fconn *fc);
void wr_fconn_resume(struct wr_fconn *fc);

/* FILE_WRITE of r->path (r->mode if has_mode, r->flags: WR_WRITE_*), one at a time on a
 * connection: on_open once warren-init takes the bytes, then wr_fconn_write_data as they come and
 * wr_fconn_write_end; on_done when the file is written, or with an error at any point (bytes
 * given after it are dropped). */
struct wr_file_write_cbs {
    void (*on_open)(void *ctx);
    wr_file_done_cb on_done;
};
int wr_fconn_write(struct wr_fconn *fc, const struct wr_file_req *r,
                   const struct wr_file_write_cbs *cbs, void *ctx, struct wr_err *err);
/* Bytes of the write in progress (copied). Pace them with wr_fconn_full and on_drain. */
void wr_fconn_write_data(struct wr_fconn *fc, const void *p, size_t n);
void wr_fconn_write_end(struct wr_fconn *fc);
/* Whether the queue to warren-init is at its high-water mark: hold further bytes until
 * on_drain. */
bool wr_fconn_full(const struct wr_fconn *fc);

/* FILE_WATCH of the directory r->path (r->recursive: and those below it): on_watching once the
 * watch is set, on_event per change, on_done when it ends (err NULL: warren-init ended it with
 * no error; ENOBUFS: events were lost; or the directory went away). */
struct wr_file_watch_cbs {
    void (*on_watching)(void *ctx);
    void (*on_event)(void *ctx, const struct wr_watch_event *ev);
    wr_file_done_cb on_done;
};
int wr_fconn_watch(struct wr_fconn *fc, const struct wr_file_req *r,
                   const struct wr_file_watch_cbs *cbs, void *ctx, struct wr_err *err);
