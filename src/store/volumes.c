/* SPDX-License-Identifier: Apache-2.0 */
/* Volume records: insert, get, list, and the delete that refuses a volume in use. */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/xalloc.h"

#define VOL_COLS "id, team, name, created_ms"

/* Sandboxes in these states hold their volumes. */
#define LIVE_STATES "('creating', 'running', 'paused')"

void wr_volume_rec_fini(struct wr_volume_rec *v)
{
    if (v == NULL)
        return;
    free(v->id);
    free(v->team);
    free(v->name);
    memset(v, 0, sizeof(*v));
}

static void read_vol(sqlite3_stmt *st, struct wr_volume_rec *v)
{
    v->id = wr__col_text(st, 0);
    v->team = wr__col_text(st, 1);
    v->name = wr__col_text(st, 2);
    v->created_ms = sqlite3_column_int64(st, 3);
}

int wr_store_volume_insert(struct wr_store *s, const struct wr_volume_rec *v, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_VOL_INSERT,
                 "INSERT INTO volumes (id, team, name, created_ms) VALUES (?1, ?2, ?3, ?4)", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, v->id);
    wr__bind_text(st, 2, v->team);
    wr__bind_text(st, 3, v->name);
    wr__bind_int64(st, 4, v->created_ms);
    if (sqlite3_step(st) != SQLITE_DONE) {
        if (sqlite3_extended_errcode(s->db) == SQLITE_CONSTRAINT_UNIQUE ||
            sqlite3_extended_errcode(s->db) == SQLITE_CONSTRAINT_PRIMARYKEY)
            return wr_err_set(err, WR_ECONFLICT, 0, "volume `%s` already exists", v->name);
        return wr__store_fail(s->db, err, "insert volume %s", v->name ? v->name : "(null)");
    }
    return 0;
}

/* Step a statement selecting VOL_COLS of at most one row into *v. */
static int get_vol(struct wr_store *s, sqlite3_stmt *st, const char *name, struct wr_volume_rec *v,
                   struct wr_err *err)
{
    int rc = sqlite3_step(st);

    if (rc == SQLITE_DONE)
        return wr_err_set(err, WR_ENOTFOUND, 0, "volume `%s` not found", name);
    if (rc != SQLITE_ROW)
        return wr__store_fail(s->db, err, "get volume %s", name);
    read_vol(st, v);
    return 0;
}

int wr_store_volume_get(struct wr_store *s, const char *team, const char *name,
                        struct wr_volume_rec *v, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(
        s, WR_ST_VOL_GET, "SELECT " VOL_COLS " FROM volumes WHERE team = ?1 AND name = ?2", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, team);
    wr__bind_text(st, 2, name);
    /* Another team's volume reads as absent, like its sandboxes. */
    return get_vol(s, st, name ? name : "(null)", v, err);
}

int wr_store_volume_list(struct wr_store *s, const char *team, struct wr_volume_rec **out,
                         size_t *n, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        team ? wr__stmt(s, WR_ST_VOL_LIST_TEAM,
                        "SELECT " VOL_COLS " FROM volumes WHERE team = ?1 ORDER BY name", err)
             : wr__stmt(s, WR_ST_VOL_LIST_ALL,
                        "SELECT " VOL_COLS " FROM volumes ORDER BY team, name", err);
    struct wr_volume_rec *v = NULL;
    size_t cnt = 0, cap = 0;
    int rc;

    *out = NULL;
    *n = 0;
    if (st == NULL)
        return -1;
    if (team != NULL)
        wr__bind_text(st, 1, team);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            v = xrealloc(v, cap * sizeof(*v));
        }
        read_vol(st, &v[cnt++]);
    }
    if (rc != SQLITE_DONE) {
        wr__store_fail(s->db, err, "list volumes");
        for (size_t i = 0; i < cnt; i++)
            wr_volume_rec_fini(&v[i]);
        free(v);
        return -1;
    }
    *out = v;
    *n = cnt;
    return 0;
}

/* A sandbox in a live state that mounts volume `id`, into user (NUL-terminated); 1 if one does,
 * 0 if none, -1 on error. */
static int volume_user(struct wr_store *s, const char *id, char *user, size_t size,
                       struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_VOL_USER,
                 "SELECT s.id FROM sandboxes AS s, json_each(s.volumes_json) AS m WHERE s.state "
                 "IN " LIVE_STATES " AND json_extract(m.value, '$.id') = ?1 ORDER BY s.seq LIMIT 1",
                 err);
    int rc;

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, id);
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        return 0;
    if (rc != SQLITE_ROW)
        return wr__store_fail(s->db, err, "find users of volume");
    snprintf(user, size, "%s", (const char *)sqlite3_column_text(st, 0));
    return 1;
}

int wr_store_volume_delete(struct wr_store *s, const char *team, const char *name,
                           struct wr_volume_rec *v, struct wr_err *err)
{
    _cleanup_txn_ struct wr__txn tx = {s};
    struct wr_volume_rec got = {0};
    char user[128];
    int r;

    if (wr__txn_begin(&tx, err) < 0 || wr_store_volume_get(s, team, name, &got, err) < 0)
        return -1;
    r = volume_user(s, got.id, user, sizeof(user), err);
    if (r > 0)
        wr_err_set(err, WR_ECONFLICT, 0, "volume `%s` is in use by sandbox %s", name, user);
    if (r != 0)
        goto fail;
    {
        _cleanup_stmt_ sqlite3_stmt *st =
            wr__stmt(s, WR_ST_VOL_DELETE, "DELETE FROM volumes WHERE id = ?1", err);
        if (st == NULL)
            goto fail;
        wr__bind_text(st, 1, got.id);
        if (wr__step_done(s->db, st, "delete volume", err) < 0)
            goto fail;
    }
    if (wr__txn_commit(&tx, err) < 0)
        goto fail;
    *v = got;
    return 0;
fail:
    wr_volume_rec_fini(&got);
    return -1;
}
