/* SPDX-License-Identifier: Apache-2.0 */
/* The egress log's rows (see store.h and migration 10). */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#include "../util/xalloc.h"

#define NETLOG_LIST_MAX 1000

void wr_netlog_rec_fini(struct wr_netlog_rec *r)
{
    if (r == NULL)
        return;
    free(r->sandbox_id);
    free(r->team);
    free(r->proto);
    free(r->name);
    free(r->rule);
    memset(r, 0, sizeof(*r));
}

int wr_store_netlog_insert(struct wr_store *s, struct wr_netlog_rec *rows, size_t n, size_t *stored,
                           struct wr_err *err)
{
    _cleanup_txn_ struct wr__txn tx = {s};
    size_t count = 0;

    if (stored != NULL)
        *stored = 0;
    if (n == 0)
        return 0;
    if (wr__txn_begin(&tx, err) < 0)
        return wr_err_wrap(err, "insert egress log");
    for (size_t i = 0; i < n; i++) {
        /* The team comes from the sandbox's record; no record, no row. */
        _cleanup_stmt_ sqlite3_stmt *st =
            wr__stmt(s, WR_ST_NETLOG_INSERT,
                     "INSERT INTO netlog (sandbox, team, time_ms, proto, addr, port, name,"
                     " bytes_out, bytes_in, allowed, rule) SELECT ?1, team, ?2, ?3, ?4, ?5, ?6,"
                     " ?7, ?8, ?9, ?10 FROM sandboxes WHERE id = ?1 RETURNING id",
                     err);
        struct wr_netlog_rec *r = &rows[i];
        int rc;

        if (st == NULL)
            return -1;
        r->id = 0;
        wr__bind_text(st, 1, r->sandbox_id);
        wr__bind_int64(st, 2, r->time_ms);
        wr__bind_text(st, 3, r->proto);
        wr__bind_int64(st, 4, r->addr);
        wr__bind_int64(st, 5, r->port);
        wr__bind_text(st, 6, r->name);
        /* Stored signed; read back with the cast that restores them. */
        wr__bind_int64(st, 7, (int64_t)r->bytes_out);
        wr__bind_int64(st, 8, (int64_t)r->bytes_in);
        wr__bind_int64(st, 9, r->allowed ? 1 : 0);
        wr__bind_text(st, 10, r->rule ? r->rule : "");
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            r->id = sqlite3_column_int64(st, 0);
            count++;
            rc = sqlite3_step(st);
        }
        if (rc != SQLITE_DONE)
            return wr__store_fail(s->db, err, "insert egress log of %s",
                                  r->sandbox_id ? r->sandbox_id : "(null)");
    }
    if (wr__txn_commit(&tx, err) < 0)
        return wr_err_wrap(err, "insert egress log");
    if (stored != NULL)
        *stored = count;
    return 0;
}

int wr_store_netlog_count(struct wr_store *s, const char *sandbox_id, int64_t *n,
                          struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_NETLOG_COUNT, "SELECT count(*) FROM netlog WHERE sandbox = ?1", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, sandbox_id);
    if (sqlite3_step(st) != SQLITE_ROW)
        return wr__store_fail(s->db, err, "count egress log of %s", sandbox_id);
    *n = sqlite3_column_int64(st, 0);
    return 0;
}

int wr_store_netlog_trim(struct wr_store *s, const char *sandbox_id, int64_t n, int64_t *deleted,
                         struct wr_err *err)
{
    /* The oldest n through the (sandbox, id) index: as many steps as rows deleted. */
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_NETLOG_TRIM,
                 "DELETE FROM netlog WHERE id IN (SELECT id FROM netlog WHERE sandbox = ?1"
                 " ORDER BY id LIMIT ?2)",
                 err);

    if (deleted != NULL)
        *deleted = 0;
    if (st == NULL)
        return -1;
    if (n <= 0)
        return 0;
    wr__bind_text(st, 1, sandbox_id);
    wr__bind_int64(st, 2, n);
    if (wr__step_done(s->db, st, "trim egress log", err) < 0)
        return -1;
    if (deleted != NULL)
        *deleted = sqlite3_changes(s->db);
    return 0;
}

int wr_store_netlog_list(struct wr_store *s, const char *sandbox_id, int64_t after, size_t limit,
                         struct wr_netlog_rec **out, size_t *n, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_NETLOG_LIST,
                 "SELECT id, sandbox, team, time_ms, proto, addr, port, name, bytes_out, bytes_in,"
                 " allowed, rule FROM netlog WHERE sandbox = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
                 err);
    struct wr_netlog_rec *v = NULL;
    size_t cnt = 0, cap = 0;
    int rc;

    *out = NULL;
    *n = 0;
    if (st == NULL)
        return -1;
    if (limit == 0 || limit > NETLOG_LIST_MAX)
        limit = NETLOG_LIST_MAX;
    wr__bind_text(st, 1, sandbox_id);
    wr__bind_int64(st, 2, after);
    wr__bind_int64(st, 3, (int64_t)limit);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct wr_netlog_rec *r;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            v = xrealloc(v, cap * sizeof(*v));
        }
        r = &v[cnt++];
        r->id = sqlite3_column_int64(st, 0);
        r->sandbox_id = wr__col_text(st, 1);
        r->team = wr__col_text(st, 2);
        r->time_ms = sqlite3_column_int64(st, 3);
        r->proto = wr__col_text(st, 4);
        r->addr = (uint32_t)sqlite3_column_int64(st, 5);
        r->port = (uint16_t)sqlite3_column_int64(st, 6);
        r->name = wr__col_text(st, 7);
        r->bytes_out = (uint64_t)sqlite3_column_int64(st, 8);
        r->bytes_in = (uint64_t)sqlite3_column_int64(st, 9);
        r->allowed = sqlite3_column_int64(st, 10) != 0;
        r->rule = wr__col_text(st, 11);
    }
    if (rc != SQLITE_DONE) {
        for (size_t i = 0; i < cnt; i++)
            wr_netlog_rec_fini(&v[i]);
        free(v);
        return wr__store_fail(s->db, err, "list egress log of %s", sandbox_id);
    }
    *out = v;
    *n = cnt;
    return 0;
}
