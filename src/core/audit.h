/* SPDX-License-Identifier: Apache-2.0 */
/* The audit trail (docs/operations.md, "Audit log"): every state-changing API request, one row
 * in the state database each (store.h, struct wr_audit_rec), written on the loop thread when its
 * answer is complete, and listed per team. Rows older than the retention are deleted by a task
 * that runs on a worker thread, on a database connection of its own, at start and every hour.
 *
 * All functions run on the loop thread. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "../store/store.h"
#include "../util/err.h"

struct wr_audit;

#define WR_AUDIT_RETENTION_DAYS 90
#define WR_AUDIT_PRUNE_MS       (3600 * 1000)

/* Start the trail on store (the daemon's connection), with the prune's own connection opened on
 * db_path when it first runs. retention_days: 1 or more. *out is freed by wr_audit_close. */
int wr_audit_open(uv_loop_t *loop, struct wr_store *store, const char *db_path,
                  uint32_t retention_days, struct wr_audit **out, struct wr_err *err);
/* Append r (r->time_ms 0: now); r->id gets its id. A failure is counted
 * (warrend_audit_write_errors_total) and logged by the caller. */
int wr_audit_append(struct wr_audit *a, struct wr_audit_rec *r, struct wr_err *err);
/* The rows that match f (wr_store_audit_list). */
int wr_audit_list(struct wr_audit *a, const struct wr_audit_filter *f, struct wr_audit_rec **out,
                  size_t *n, struct wr_err *err);
/* Run the prune now (tests, through the daemon): it goes to a worker unless one runs. */
void wr_audit_prune_now(struct wr_audit *a);
/* Stop the timer; a prune in flight finishes and then frees it. NULL-safe. */
void wr_audit_close(struct wr_audit *a);
