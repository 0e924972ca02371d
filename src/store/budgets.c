/* SPDX-License-Identifier: Apache-2.0 */
/* Budgets: the caps of teams and sandboxes (migration 15), and the ledger's sums they are
 * measured against (core/budget.c keeps the running totals). */
#include <string.h>

#include "../util/xalloc.h"
#include "store_int.h"

int wr_store_budget_get(struct wr_store *s, const char *kind, const char *owner, char **json,
                        struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(
        s, WR_ST_BUDGET_GET, "SELECT budget FROM budgets WHERE kind = ?1 AND owner = ?2", err);
    int rc;

    *json = NULL;
    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, kind);
    wr__bind_text(st, 2, owner);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *json = wr__col_text(st, 0);
        return 0;
    }
    if (rc == SQLITE_DONE)
        return 0;
    return wr__store_fail(s->db, err, "budget of %s `%s`", kind, owner);
}

int wr_store_budget_put(struct wr_store *s, const char *kind, const char *owner, const char *team,
                        const char *json, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        json != NULL ? wr__stmt(s, WR_ST_BUDGET_PUT,
                                "INSERT INTO budgets (kind, owner, team, budget, updated_ms)"
                                " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (kind, owner)"
                                " DO UPDATE SET budget = ?4, updated_ms = ?5",
                                err)
                     : wr__stmt(s, WR_ST_BUDGET_DELETE,
                                "DELETE FROM budgets WHERE kind = ?1 AND owner = ?2", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, kind);
    wr__bind_text(st, 2, owner);
    if (json != NULL) {
        wr__bind_text(st, 3, team);
        wr__bind_text(st, 4, json);
        wr__bind_int64(st, 5, wr__now_ms());
    }
    return wr__step_done(s->db, st, "budget", err);
}

int wr_store_budget_spend(struct wr_store *s, const char *team, const char *sandbox,
                          int64_t from_ms, const char *billed, double *vcpu_seconds,
                          double *gib_seconds, struct wr_err *err)
{
    /* Not cached: once per team or sandbox a period, at most. */
    const char *expr = billed != NULL && strcmp(billed, "measured") == 0 ? "cpu_seconds"
                       : billed != NULL && strcmp(billed, "max") == 0
                           ? "MAX(vcpu_seconds, cpu_seconds)"
                           : "vcpu_seconds";
    _cleanup_free_ char *sql =
        xasprintf("SELECT TOTAL(%s), TOTAL(gib_seconds) FROM usage_intervals WHERE %s = ?1"
                  " AND start_ms >= ?2",
                  expr, sandbox != NULL ? "sandbox" : "team");
    sqlite3_stmt *st = NULL;
    int rc;

    *vcpu_seconds = *gib_seconds = 0;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return wr__store_fail(s->db, err, "budget spend");
    wr__bind_text(st, 1, sandbox != NULL ? sandbox : team);
    wr__bind_int64(st, 2, from_ms);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *vcpu_seconds = sqlite3_column_double(st, 0);
        *gib_seconds = sqlite3_column_double(st, 1);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW)
        return wr__store_fail(s->db, err, "budget spend");
    return 0;
}
