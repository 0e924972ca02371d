/* SPDX-License-Identifier: Apache-2.0 */
/* The audit trail's rows (see store.h and migration 13). */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#include "../util/xalloc.h"

#define AUDIT_LIST_MAX     1000
#define AUDIT_LIST_DEFAULT 100

void wr_audit_rec_fini(struct wr_audit_rec *r)
{
    if (r == NULL)
        return;
    free(r->request_id);
    free(r->team);
    free(r->key_id);
    free(r->peer);
    free(r->action);
    free(r->object_kind);
    free(r->object_id);
    free(r->method);
    free(r->route);
    free(r->code);
    memset(r, 0, sizeof(*r));
}

static const char *or_empty(const char *s)
{
    return s ? s : "";
}

int wr_store_audit_insert(struct wr_store *s, struct wr_audit_rec *r, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_AUDIT_INSERT,
                 "INSERT INTO audit (time_ms, request_id, team, key_id, peer, action, object_kind,"
                 " object_id, method, route, status, code) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,"
                 " ?9, ?10, ?11, ?12)",
                 err);

    if (st == NULL)
        return -1;
    wr__bind_int64(st, 1, r->time_ms);
    wr__bind_text(st, 2, or_empty(r->request_id));
    wr__bind_text(st, 3, or_empty(r->team));
    wr__bind_text(st, 4, or_empty(r->key_id));
    wr__bind_text(st, 5, or_empty(r->peer));
    wr__bind_text(st, 6, or_empty(r->action));
    wr__bind_text(st, 7, or_empty(r->object_kind));
    wr__bind_text(st, 8, or_empty(r->object_id));
    wr__bind_text(st, 9, or_empty(r->method));
    wr__bind_text(st, 10, or_empty(r->route));
    wr__bind_int64(st, 11, r->status);
    wr__bind_text(st, 12, or_empty(r->code));
    if (wr__step_done(s->db, st, "insert audit record", err) < 0)
        return -1;
    r->id = sqlite3_last_insert_rowid(s->db);
    return 0;
}

int wr_store_audit_insert_n(struct wr_store *s, struct wr_audit_rec *rows, size_t n,
                            struct wr_err *err)
{
    _cleanup_txn_ struct wr__txn tx = {s};

    if (n == 0)
        return 0;
    if (wr__txn_begin(&tx, err) < 0)
        return wr_err_wrap(err, "insert audit records");
    for (size_t i = 0; i < n; i++)
        if (wr_store_audit_insert(s, &rows[i], err) < 0)
            return -1;
    return wr__txn_commit(&tx, err);
}

int wr_store_audit_list(struct wr_store *s, const struct wr_audit_filter *f,
                        struct wr_audit_rec **out, size_t *n, struct wr_err *err)
{
    /* An action ending in '.' is a prefix ("sandbox." for every sandbox action). */
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(
        s, WR_ST_AUDIT_LIST,
        "SELECT id, time_ms, request_id, team, key_id, peer, action, object_kind, object_id,"
        " method, route, status, code FROM audit WHERE (?1 IS NULL OR team = ?1)"
        " AND (?2 = 0 OR time_ms >= ?2) AND (?3 = 0 OR time_ms < ?3)"
        " AND (?4 IS NULL OR action = ?4 OR (substr(?4, -1) = '.'"
        " AND substr(action, 1, length(?4)) = ?4))"
        " AND (?5 IS NULL OR object_id = ?5) AND id > ?6 ORDER BY id LIMIT ?7",
        err);
    struct wr_audit_rec *v = NULL;
    size_t cnt = 0, cap = 0, limit = f->limit;
    int rc;

    *out = NULL;
    *n = 0;
    if (st == NULL)
        return -1;
    if (limit == 0)
        limit = AUDIT_LIST_DEFAULT;
    if (limit > AUDIT_LIST_MAX)
        limit = AUDIT_LIST_MAX;
    wr__bind_text(st, 1, f->team);
    wr__bind_int64(st, 2, f->from_ms);
    wr__bind_int64(st, 3, f->to_ms);
    wr__bind_text(st, 4, f->action);
    wr__bind_text(st, 5, f->object);
    wr__bind_int64(st, 6, f->after);
    wr__bind_int64(st, 7, (int64_t)limit);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct wr_audit_rec *r;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            v = xrealloc(v, cap * sizeof(*v));
        }
        r = &v[cnt++];
        r->id = sqlite3_column_int64(st, 0);
        r->time_ms = sqlite3_column_int64(st, 1);
        r->request_id = wr__col_text(st, 2);
        r->team = wr__col_text(st, 3);
        r->key_id = wr__col_text(st, 4);
        r->peer = wr__col_text(st, 5);
        r->action = wr__col_text(st, 6);
        r->object_kind = wr__col_text(st, 7);
        r->object_id = wr__col_text(st, 8);
        r->method = wr__col_text(st, 9);
        r->route = wr__col_text(st, 10);
        r->status = sqlite3_column_int(st, 11);
        r->code = wr__col_text(st, 12);
    }
    if (rc != SQLITE_DONE) {
        for (size_t i = 0; i < cnt; i++)
            wr_audit_rec_fini(&v[i]);
        free(v);
        return wr__store_fail(s->db, err, "list audit records");
    }
    *out = v;
    *n = cnt;
    return 0;
}

int wr_store_audit_prune(struct wr_store *s, int64_t before_ms, int64_t max, int64_t *deleted,
                         struct wr_err *err)
{
    /* Rows are appended in time order, so the old ones are the first ids: the statement reads
     * at most max rows (the oldest), and there is no time index to keep up on every insert. */
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_AUDIT_PRUNE,
                 "DELETE FROM audit WHERE id IN (SELECT id FROM (SELECT id, time_ms FROM audit"
                 " ORDER BY id LIMIT ?2) WHERE time_ms < ?1)",
                 err);

    *deleted = 0;
    if (st == NULL)
        return -1;
    wr__bind_int64(st, 1, before_ms);
    wr__bind_int64(st, 2, max);
    if (wr__step_done(s->db, st, "prune audit records", err) < 0)
        return -1;
    *deleted = sqlite3_changes(s->db);
    return 0;
}

int wr_store_layers_total(struct wr_store *s, uint64_t *bytes, uint64_t *count, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(
        s, WR_ST_LAYERS_TOTAL, "SELECT coalesce(sum(size_bytes), 0), count(*) FROM layers", err);

    if (st == NULL)
        return -1;
    if (sqlite3_step(st) != SQLITE_ROW)
        return wr__store_fail(s->db, err, "size of the layer store");
    *bytes = (uint64_t)sqlite3_column_int64(st, 0);
    *count = (uint64_t)sqlite3_column_int64(st, 1);
    return 0;
}
