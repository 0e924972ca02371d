/* SPDX-License-Identifier: Apache-2.0 */
/* The audit trail (docs/operations.md, "Audit log"): every state-changing API request, one row
 * in the state database each (store.h, struct wr_audit_rec), queued on the loop thread when its
 * answer is complete and written in one transaction with the others queued within
 * WR_AUDIT_FLUSH_MS (or WR_AUDIT_BATCH of them), and listed per team: a second commit per
 * request would halve the daemon's rate of state-changing requests (docs/benchmarks.md). A
 * daemon killed with -9 loses the records of at most its last WR_AUDIT_FLUSH_MS. Rows older than
 * the retention are deleted by a task that runs on a worker thread, on a database connection of its
 * own, at start and every hour.
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
#define WR_AUDIT_FLUSH_MS       20
#define WR_AUDIT_BATCH          256

/* Start the trail on store (the daemon's connection), with the prune's own connection opened on
 * db_path when it first runs. retention_days: 1 or more. *out is freed by wr_audit_close. */
int wr_audit_open(uv_loop_t *loop, struct wr_store *store, const char *db_path,
                  uint32_t retention_days, struct wr_audit **out, struct wr_err *err);
/* Queue a copy of r (r->time_ms 0: now) to be written. A batch that cannot be written is
 * logged and counted (warrend_audit_write_errors_total), once per record. */
void wr_audit_append(struct wr_audit *a, const struct wr_audit_rec *r);
/* The rows that match f (wr_store_audit_list), after writing what is queued. */
int wr_audit_list(struct wr_audit *a, const struct wr_audit_filter *f, struct wr_audit_rec **out,
                  size_t *n, struct wr_err *err);
/* Run the prune now (tests, through the daemon): it goes to a worker unless one runs. */
void wr_audit_prune_now(struct wr_audit *a);
/* Write what is queued, stop the timers; a prune in flight finishes and then frees it.
 * NULL-safe. */
void wr_audit_close(struct wr_audit *a);
