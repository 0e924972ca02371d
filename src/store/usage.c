/* SPDX-License-Identifier: Apache-2.0 */
/* The usage ledger's rows (see store.h and migration 11). */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#include "../util/xalloc.h"

void wr_usage_sum_fini(struct wr_usage_sum *u)
{
    if (u == NULL)
        return;
    free(u->key);
    free(u->team);
    free(u->template_name);
    memset(u, 0, sizeof(*u));
}

void wr_usage_storage_fini(struct wr_usage_storage *u)
{
    if (u == NULL)
        return;
    free(u->team);
    free(u->kind);
    memset(u, 0, sizeof(*u));
}

int wr_store_usage_insert(struct wr_store *s, const struct wr_usage_interval *v, size_t n,
                          struct wr_err *err)
{
    _cleanup_txn_ struct wr__txn tx = {s};

    if (n == 0)
        return 0;
    if (wr__txn_begin(&tx, err) < 0)
        return wr_err_wrap(err, "insert usage intervals");
    for (size_t i = 0; i < n; i++) {
        _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(
            s, WR_ST_USAGE_INSERT,
            "INSERT OR IGNORE INTO usage_intervals (sandbox, seq, team, template, start_ms,"
            " end_ms, running, cpu_millis, memory_bytes, vcpu_seconds, gib_seconds, cpu_seconds,"
            " mem_gib_seconds, peak_memory_bytes, net_bytes_in, net_bytes_out, cpu_end_ns,"
            " net_out_end) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"
            " ?15, ?16, ?17, ?18)",
            err);
        const struct wr_usage_interval *r = &v[i];

        if (st == NULL)
            return -1;
        wr__bind_text(st, 1, r->sandbox);
        wr__bind_int64(st, 2, r->seq);
        wr__bind_text(st, 3, r->team);
        wr__bind_text(st, 4, r->template_name ? r->template_name : "");
        wr__bind_int64(st, 5, r->start_ms);
        wr__bind_int64(st, 6, r->end_ms);
        wr__bind_int64(st, 7, r->running ? 1 : 0);
        wr__bind_int64(st, 8, r->cpu_millis);
        wr__bind_int64(st, 9, (int64_t)r->memory_bytes);
        (void)sqlite3_bind_double(st, 10, r->vcpu_seconds);
        (void)sqlite3_bind_double(st, 11, r->gib_seconds);
        (void)sqlite3_bind_double(st, 12, r->cpu_seconds);
        (void)sqlite3_bind_double(st, 13, r->mem_gib_seconds);
        wr__bind_int64(st, 14, (int64_t)r->peak_memory_bytes);
        wr__bind_int64(st, 15, (int64_t)r->net_bytes_in);
        wr__bind_int64(st, 16, (int64_t)r->net_bytes_out);
        wr__bind_int64(st, 17, (int64_t)r->cpu_end_ns);
        wr__bind_int64(st, 18, (int64_t)r->net_out_end);
        if (wr__step_done(s->db, st, "insert usage interval", err) < 0)
            return -1;
    }
    return wr__txn_commit(&tx, err);
}

int wr_store_usage_last(struct wr_store *s, const char *sandbox, int64_t *seq, int64_t *end_ms,
                        uint64_t *cpu_end_ns, uint64_t *net_out_end, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_USAGE_LAST,
                 "SELECT seq, end_ms, cpu_end_ns, net_out_end FROM usage_intervals"
                 " WHERE sandbox = ?1 ORDER BY seq DESC LIMIT 1",
                 err);
    int rc;

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, sandbox);
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        return 0;
    if (rc != SQLITE_ROW)
        return wr__store_fail(s->db, err, "last usage interval of %s", sandbox);
    *seq = sqlite3_column_int64(st, 0);
    *end_ms = sqlite3_column_int64(st, 1);
    *cpu_end_ns = (uint64_t)sqlite3_column_int64(st, 2);
    *net_out_end = (uint64_t)sqlite3_column_int64(st, 3);
    return 1;
}

int wr_store_usage_sum(struct wr_store *s, const char *team, int64_t from_ms, int64_t to_ms,
                       enum wr_usage_group g, struct wr_usage_sum **out, size_t *n,
                       struct wr_err *err)
{
    static const char *const keys[] = {
        [WR_USAGE_BY_SANDBOX] = "sandbox",
        [WR_USAGE_BY_TEMPLATE] = "template",
        [WR_USAGE_BY_DAY] = "strftime('%Y-%m-%d', start_ms / 1000, 'unixepoch')",
    };
    _cleanup_free_ char *sql = xasprintf(
        "SELECT %s AS k, team, %s, min(start_ms), max(end_ms), count(*),"
        " total(CASE WHEN running THEN end_ms - start_ms ELSE 0 END) / 1000.0,"
        " total(CASE WHEN running THEN 0 ELSE end_ms - start_ms END) / 1000.0,"
        " total(vcpu_seconds), total(gib_seconds), total(cpu_seconds), total(mem_gib_seconds),"
        " max(peak_memory_bytes), total(net_bytes_in), total(net_bytes_out),"
        " total(max(vcpu_seconds, cpu_seconds))"
        " FROM usage_intervals WHERE (?1 IS NULL OR team = ?1) AND (?2 = 0 OR start_ms >= ?2)"
        " AND (?3 = 0 OR start_ms < ?3) GROUP BY team, k ORDER BY team, k",
        keys[g], g == WR_USAGE_BY_DAY ? "NULL" : "max(template)");
    sqlite3_stmt *st = NULL;
    struct wr_usage_sum *v = NULL;
    size_t cnt = 0, cap = 0;
    int rc;

    *out = NULL;
    *n = 0;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return wr__store_fail(s->db, err, "sum usage");
    wr__bind_text(st, 1, team);
    wr__bind_int64(st, 2, from_ms);
    wr__bind_int64(st, 3, to_ms);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct wr_usage_sum *u;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            v = xrealloc(v, cap * sizeof(*v));
        }
        u = &v[cnt++];
        u->key = wr__col_text(st, 0);
        u->team = wr__col_text(st, 1);
        u->template_name = sqlite3_column_type(st, 2) == SQLITE_NULL ? NULL : wr__col_text(st, 2);
        u->first_ms = sqlite3_column_int64(st, 3);
        u->last_ms = sqlite3_column_int64(st, 4);
        u->intervals = sqlite3_column_int64(st, 5);
        u->running_seconds = sqlite3_column_double(st, 6);
        u->paused_seconds = sqlite3_column_double(st, 7);
        u->vcpu_seconds = sqlite3_column_double(st, 8);
        u->gib_seconds = sqlite3_column_double(st, 9);
        u->cpu_seconds = sqlite3_column_double(st, 10);
        u->mem_gib_seconds = sqlite3_column_double(st, 11);
        u->peak_memory_bytes = (uint64_t)sqlite3_column_int64(st, 12);
        u->net_bytes_in = (uint64_t)sqlite3_column_double(st, 13);
        u->net_bytes_out = (uint64_t)sqlite3_column_double(st, 14);
        u->max_seconds = sqlite3_column_double(st, 15);
    }
    if (rc != SQLITE_DONE) {
        wr__store_fail(s->db, err, "sum usage");
        sqlite3_finalize(st);
        for (size_t i = 0; i < cnt; i++)
            wr_usage_sum_fini(&v[i]);
        free(v);
        return -1;
    }
    sqlite3_finalize(st);
    *out = v;
    *n = cnt;
    return 0;
}

int wr_store_storage_insert(struct wr_store *s, const struct wr_usage_storage *v, size_t n,
                            struct wr_err *err)
{
    _cleanup_txn_ struct wr__txn tx = {s};

    if (n == 0)
        return 0;
    if (wr__txn_begin(&tx, err) < 0)
        return wr_err_wrap(err, "insert storage usage");
    for (size_t i = 0; i < n; i++) {
        _cleanup_stmt_ sqlite3_stmt *st =
            wr__stmt(s, WR_ST_STORAGE_INSERT,
                     "INSERT OR REPLACE INTO usage_storage (time_ms, team, kind, bytes)"
                     " VALUES (?1, ?2, ?3, ?4)",
                     err);
        if (st == NULL)
            return -1;
        wr__bind_int64(st, 1, v[i].time_ms);
        wr__bind_text(st, 2, v[i].team);
        wr__bind_text(st, 3, v[i].kind);
        wr__bind_int64(st, 4, (int64_t)v[i].bytes);
        if (wr__step_done(s->db, st, "insert storage usage", err) < 0)
            return -1;
    }
    return wr__txn_commit(&tx, err);
}

static int storage_rows(struct wr_store *s, sqlite3_stmt *st, struct wr_usage_storage **out,
                        size_t *n, struct wr_err *err)
{
    struct wr_usage_storage *v = NULL;
    size_t cnt = 0, cap = 0;
    int rc;

    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            v = xrealloc(v, cap * sizeof(*v));
        }
        v[cnt++] = (struct wr_usage_storage){
            .time_ms = sqlite3_column_int64(st, 0),
            .team = wr__col_text(st, 1),
            .kind = wr__col_text(st, 2),
            .bytes = (uint64_t)sqlite3_column_int64(st, 3),
        };
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        for (size_t i = 0; i < cnt; i++)
            wr_usage_storage_fini(&v[i]);
        free(v);
        return wr__store_fail(s->db, err, "list storage usage");
    }
    *out = v;
    *n = cnt;
    return 0;
}

int wr_store_storage_images(struct wr_store *s, struct wr_usage_storage **out, size_t *n,
                            struct wr_err *err)
{
    sqlite3_stmt *st = NULL;

    *out = NULL;
    *n = 0;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT 0, team, kind, total(size_bytes) FROM images"
                           " WHERE team IS NOT NULL GROUP BY team, kind ORDER BY team, kind",
                           -1, &st, NULL) != SQLITE_OK)
        return wr__store_fail(s->db, err, "storage of images");
    return storage_rows(s, st, out, n, err);
}

int wr_store_storage_list(struct wr_store *s, const char *team, int64_t from_ms, int64_t to_ms,
                          struct wr_usage_storage **out, size_t *n, struct wr_err *err)
{
    sqlite3_stmt *st = NULL;

    *out = NULL;
    *n = 0;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT time_ms, team, kind, bytes FROM usage_storage"
                           " WHERE (?1 IS NULL OR team = ?1) AND (?2 = 0 OR time_ms >= ?2)"
                           " AND (?3 = 0 OR time_ms < ?3) ORDER BY team, time_ms, kind",
                           -1, &st, NULL) != SQLITE_OK)
        return wr__store_fail(s->db, err, "list storage usage");
    wr__bind_text(st, 1, team);
    wr__bind_int64(st, 2, from_ms);
    wr__bind_int64(st, 3, to_ms);
    return storage_rows(s, st, out, n, err);
}
