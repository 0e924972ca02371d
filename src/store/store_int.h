/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the store's files (store.c, migrate.c, keys.c, sandboxes.c,
 * volumes.c): the handle,
 * the prepared-statement cache, transactions and the mapping of SQLite errors to wr_err. Not
 * for use outside src/store/ (tests excepted), since it includes sqlite3.h. */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "../util/cleanup.h"
#include "store.h"

/* One slot per statement the store runs more than once. Each id is used from one place only,
 * with one SQL text (see wr__stmt). */
enum wr__stmt_id {
    WR_ST_BEGIN,
    WR_ST_COMMIT,
    WR_ST_ROLLBACK,
    WR_ST_TEAM_ENSURE,
    WR_ST_KEY_INSERT,
    WR_ST_KEY_BY_HASH,
    WR_ST_KEY_LIST,
    WR_ST_KEY_DELETE,
    WR_ST_KEY_COUNT,
    WR_ST_SB_INSERT,
    WR_ST_SB_GET,
    WR_ST_SB_GET_IDEM,
    WR_ST_SB_SET_STATE,
    WR_ST_SB_SET_PAUSED,
    WR_ST_SB_SET_RESUMED,
    WR_ST_SB_SET_DEADLINE,
    WR_ST_SB_SET_RUNTIME,
    WR_ST_SB_SET_NET,
    WR_ST_SB_RELEASE_IDEM,
    WR_ST_SB_DELETE,
    WR_ST_SB_LIST_TEAM,
    WR_ST_SB_LIST_ALL,
    WR_ST_LAYER_PUT,
    WR_ST_LAYER_DELETE,
    WR_ST_LAYER_UNREF,
    WR_ST_LAYER_SIZE,
    WR_ST_IMG_INSERT,
    WR_ST_IMG_GET,
    WR_ST_IMG_GET_SHARED,
    WR_ST_IMG_LIST,
    WR_ST_IMG_DELETE,
    WR_ST_IMG_USERS,
    WR_ST_VOL_INSERT,
    WR_ST_VOL_GET,
    WR_ST_VOL_LIST_TEAM,
    WR_ST_VOL_LIST_ALL,
    WR_ST_VOL_USER,
    WR_ST_VOL_DELETE,
    WR_ST_CACHE_PUT,
    WR_ST_CACHE_GET,
    WR_ST_CACHE_PRUNE,
    WR_ST_NETLOG_INSERT,
    WR_ST_NETLOG_COUNT,
    WR_ST_NETLOG_TRIM,
    WR_ST_NETLOG_LIST,
    WR_ST_AUDIT_INSERT,
    WR_ST_AUDIT_PRUNE,
    WR_ST_AUDIT_LIST,
    WR_ST_EVENT_INSERT,
    WR_ST_EVENT_LIST,
    WR_ST_EVENT_PRUNE,
    WR_ST_LAYERS_TOTAL,
    WR_ST_TLIM_GET,
    WR_ST_TLIM_PUT,
    WR_ST_TLIM_DELETE,
    WR_ST_USAGE_INSERT,
    WR_ST_USAGE_LAST,
    WR_ST_STORAGE_INSERT,
    WR_ST_BUDGET_GET,
    WR_ST_BUDGET_PUT,
    WR_ST_BUDGET_DELETE,
    WR_ST_WH_INSERT,
    WR_ST_WH_GET,
    WR_ST_WH_LIST,
    WR_ST_WH_UPDATE,
    WR_ST_WH_DELETE,
    WR_ST_WD_INSERT,
    WR_ST_WD_DUE,
    WR_ST_WD_DUE_HOOK,
    WR_ST_WD_LEASE,
    WR_ST_WD_NEXT,
    WR_ST_WD_RESULT,
    WR_ST_WD_LIST,
    WR_ST_WD_REDELIVER,
    WR_ST_WD_PRUNE,
    WR_ST_EVENT_PAGE_ASC,
    WR_ST_EVENT_PAGE_DESC,
    WR_ST_EVENT_FIRST,
    WR_ST__COUNT,
};

struct wr_store {
    sqlite3 *db;
    sqlite3_stmt *stmt[WR_ST__COUNT]; /* prepared on first use, finalized at close */
};

/* A numbered schema change. `sql` may hold several statements; it runs inside the transaction
 * that also records `version` in schema_version. */
struct wr__migration {
    int version;
    const char *sql;
};

/* The migrations this build knows, in order (migrate.c). */
extern const struct wr__migration wr__migrations[];
extern const size_t wr__n_migrations;

/* Bring the schema up to the last of `m[0..n)` (versions ascending, starting at 1): every
 * pending migration runs in one IMMEDIATE transaction, so a failure leaves the schema as it
 * was. WR_EUNSUPPORTED if the database is newer than the list; WR_ESYS on SQLite errors. */
int wr__store_migrate(sqlite3 *db, const struct wr__migration *m, size_t n, struct wr_err *err);

/* The highest applied migration (0 for an empty database) into *version. */
int wr__store_schema_version(sqlite3 *db, int *version, struct wr_err *err);

/* The cached statement for `id`, prepared from `sql` on first use. NULL (err set) if it does
 * not prepare. The caller binds, steps, and must reset it: declare it _cleanup_stmt_. */
sqlite3_stmt *wr__stmt(struct wr_store *s, enum wr__stmt_id id, const char *sql,
                       struct wr_err *err);

/* Fill err from SQLite's last error on s->db, after the context "<fmt>": a constraint is
 * WR_ECONFLICT (CHECK and NOT NULL: WR_EINVAL), anything else WR_ESYS. Returns -1. Call it
 * before the statement is reset, which would replace the message. */
int wr__store_fail(sqlite3 *db, struct wr_err *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Step a statement that returns no rows (or whose rows are not wanted) to completion.
 * Returns 0, or -1 with err set from the SQLite error, context `what`. */
int wr__step_done(sqlite3 *db, sqlite3_stmt *st, const char *what, struct wr_err *err);

/* Bind helpers: text is copied (SQLITE_TRANSIENT), NULL binds SQL NULL. Binding errors are
 * bugs (wrong index) or OOM; they surface at sqlite3_step as SQLITE_RANGE/NOMEM anyway. */
static inline void wr__bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (v == NULL)
        (void)sqlite3_bind_null(st, i);
    else
        (void)sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
}

static inline void wr__bind_int64(sqlite3_stmt *st, int i, int64_t v)
{
    (void)sqlite3_bind_int64(st, i, v);
}

/* A copy of a text column (xstrdup), NULL for SQL NULL. */
char *wr__col_text(sqlite3_stmt *st, int i);
/* events.c: the rows of a statement that selects (id, time_ms, team, sandbox_id, type, data)
 * of events, as records in *out (n of them; free each with wr_event_rec_fini); -1 with err
 * ("<what>: ...") on a failed step. */
int wr__event_rows(struct wr_store *s, sqlite3_stmt *st, struct wr_event_rec **out, size_t *n,
                   const char *what, struct wr_err *err);

/* Reset and clear a cached statement when it leaves scope, so the next user finds it clean and
 * no read transaction stays open. */
static inline void wr__stmt_resetp(sqlite3_stmt **st)
{
    if (*st != NULL) {
        (void)sqlite3_reset(*st);
        (void)sqlite3_clear_bindings(*st);
    }
}
#define _cleanup_stmt_ _cleanup_(wr__stmt_resetp)

/* A write transaction that rolls back when it leaves scope unless committed:
 *     _cleanup_txn_ struct wr__txn tx = {s};
 *     if (wr__txn_begin(&tx, err) < 0) return -1;
 *     ... statements ...
 *     return wr__txn_commit(&tx, err); */
struct wr__txn {
    struct wr_store *s;
    bool active;
};
/* BEGIN IMMEDIATE: takes the write lock now (waiting up to busy_timeout), so the transaction
 * never fails later for lock upgrade reasons. */
int wr__txn_begin(struct wr__txn *t, struct wr_err *err);
int wr__txn_commit(struct wr__txn *t, struct wr_err *err);
void wr__txn_end(struct wr__txn *t);
#define _cleanup_txn_ _cleanup_(wr__txn_end)

/* Wall clock in ms since the epoch. */
int64_t wr__now_ms(void);
