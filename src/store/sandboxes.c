/* SPDX-License-Identifier: Apache-2.0 */
/* Sandbox records: insert, get (by id or idempotency key), updates, delete, and the filtered,
 * paginated list. */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#include "../util/xalloc.h"

/* Column order read by read_rec(). */
#define SB_COLS                                                                                    \
    "id, team, template_name, state, reason, cpu_millis, memory_bytes, created_ms, deadline_ms,"   \
    " metadata_json, env_json, idem_key, init_pid, uid_base, seq, on_timeout, timeout_s,"          \
    " paused_mode, remaining_ms, image_json, volumes_json, disk_bytes, net_json, net_slot,"        \
    " runtime, devices_json, compose_json"

void wr_sandbox_rec_fini(struct wr_sandbox_rec *r)
{
    if (r == NULL)
        return;
    free(r->id);
    free(r->team);
    free(r->template_name);
    free(r->reason);
    free(r->metadata_json);
    free(r->env_json);
    free(r->idem_key);
    free(r->image_json);
    free(r->volumes_json);
    free(r->net_json);
    free(r->runtime);
    free(r->devices_json);
    free(r->compose_json);
    memset(r, 0, sizeof(*r));
}

/* The state, on_timeout and paused_mode columns hold the names of the enums; the schema's
 * CHECKs and the setters below write nothing else. A name that is none reads as error, kill
 * and none. */
static void read_rec(sqlite3_stmt *st, struct wr_sandbox_rec *r)
{
    const char *name;

    r->id = wr__col_text(st, 0);
    r->team = wr__col_text(st, 1);
    r->template_name = wr__col_text(st, 2);
    name = (const char *)sqlite3_column_text(st, 3);
    if (wr_sb_state_parse(name, &r->state) < 0)
        r->state = WR_SB_ERROR;
    r->reason = wr__col_text(st, 4);
    r->cpu_millis = (uint32_t)sqlite3_column_int64(st, 5);
    /* Stored as a signed 64-bit integer; the cast back restores values above INT64_MAX. */
    r->memory_bytes = (uint64_t)sqlite3_column_int64(st, 6);
    r->created_ms = sqlite3_column_int64(st, 7);
    r->deadline_ms = sqlite3_column_int64(st, 8);
    r->metadata_json = wr__col_text(st, 9);
    r->env_json = wr__col_text(st, 10);
    r->idem_key = wr__col_text(st, 11);
    r->init_pid = sqlite3_column_int64(st, 12);
    r->uid_base = sqlite3_column_int64(st, 13);
    r->seq = sqlite3_column_int64(st, 14);
    if (wr_sb_on_timeout_parse((const char *)sqlite3_column_text(st, 15), &r->on_timeout) < 0)
        r->on_timeout = WR_SB_TIMEOUT_KILL;
    r->timeout_s = (uint32_t)sqlite3_column_int64(st, 16);
    if (wr_sb_paused_mode_parse((const char *)sqlite3_column_text(st, 17), &r->paused_mode) < 0)
        r->paused_mode = WR_SB_PAUSED_NONE;
    r->remaining_ms =
        sqlite3_column_type(st, 18) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 18);
    r->image_json = wr__col_text(st, 19);
    r->volumes_json = wr__col_text(st, 20);
    r->disk_bytes = (uint64_t)sqlite3_column_int64(st, 21);
    r->net_json = wr__col_text(st, 22);
    r->net_slot = sqlite3_column_int64(st, 23);
    r->runtime = wr__col_text(st, 24);
    r->devices_json = wr__col_text(st, 25);
    r->compose_json = wr__col_text(st, 26);
}

int wr_store_sandbox_insert(struct wr_store *s, struct wr_sandbox_rec *r, struct wr_err *err)
{
    /* seq is the counter's next value; the sandboxes_seq trigger advances the counter in the
     * same statement, so there is no window where two rows could get the same seq. */
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(
        s, WR_ST_SB_INSERT,
        "INSERT INTO sandboxes (seq, id, team, template_name, state, reason, cpu_millis,"
        " memory_bytes, created_ms, deadline_ms, metadata_json, env_json, idem_key, init_pid,"
        " uid_base, on_timeout, timeout_s, image_json, volumes_json, disk_bytes, net_json, "
        "net_slot, runtime, devices_json, compose_json)"
        " VALUES ((SELECT last + 1 FROM sandbox_seq), ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,"
        " ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24) RETURNING seq",
        err);
    int64_t seq;

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, r->id);
    wr__bind_text(st, 2, r->team);
    wr__bind_text(st, 3, r->template_name);
    wr__bind_text(st, 4, wr_sb_state_name(r->state));
    wr__bind_text(st, 5, r->reason);
    wr__bind_int64(st, 6, r->cpu_millis);
    wr__bind_int64(st, 7, (int64_t)r->memory_bytes);
    wr__bind_int64(st, 8, r->created_ms);
    wr__bind_int64(st, 9, r->deadline_ms);
    wr__bind_text(st, 10, r->metadata_json ? r->metadata_json : "{}");
    wr__bind_text(st, 11, r->env_json ? r->env_json : "{}");
    wr__bind_text(st, 12, r->idem_key);
    wr__bind_int64(st, 13, r->init_pid);
    wr__bind_int64(st, 14, r->uid_base);
    wr__bind_text(st, 15, wr_sb_on_timeout_name(r->on_timeout));
    wr__bind_int64(st, 16, r->timeout_s);
    wr__bind_text(st, 17, r->image_json ? r->image_json : "{}");
    wr__bind_text(st, 18, r->volumes_json ? r->volumes_json : "[]");
    wr__bind_int64(st, 19, (int64_t)r->disk_bytes);
    wr__bind_text(st, 20, r->net_json);
    wr__bind_int64(st, 21, r->net_slot);
    wr__bind_text(st, 22, r->runtime ? r->runtime : "ns");
    wr__bind_text(st, 23, r->devices_json);
    wr__bind_text(st, 24, r->compose_json);
    if (sqlite3_step(st) != SQLITE_ROW)
        return wr__store_fail(s->db, err, "insert sandbox %s", r->id ? r->id : "(null)");
    seq = sqlite3_column_int64(st, 0);
    /* The statement (and its implicit transaction) completes at SQLITE_DONE. */
    if (wr__step_done(s->db, st, "insert sandbox", err) < 0)
        return -1;
    r->seq = seq;
    return 0;
}

/* Step a statement that selects SB_COLS of at most one row into *r. */
static int get_one(struct wr_store *s, sqlite3_stmt *st, struct wr_sandbox_rec *r, const char *what,
                   const char *name, struct wr_err *err)
{
    int rc = sqlite3_step(st);

    if (rc == SQLITE_DONE)
        return wr_err_set(err, WR_ENOTFOUND, 0, "%s %s not found", what, name);
    if (rc != SQLITE_ROW)
        return wr__store_fail(s->db, err, "get %s %s", what, name);
    read_rec(st, r);
    return 0;
}

int wr_store_sandbox_get(struct wr_store *s, const char *team, const char *id,
                         struct wr_sandbox_rec *r, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(
        s, WR_ST_SB_GET,
        "SELECT " SB_COLS " FROM sandboxes WHERE id = ?1 AND (?2 IS NULL OR team = ?2)", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, id);
    wr__bind_text(st, 2, team);
    /* Another team's sandbox reads as absent: its existence is not the caller's business. */
    return get_one(s, st, r, "sandbox", id ? id : "(null)", err);
}

int wr_store_sandbox_get_idem(struct wr_store *s, const char *team, const char *idem_key,
                              struct wr_sandbox_rec *r, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_SB_GET_IDEM,
                 "SELECT " SB_COLS " FROM sandboxes WHERE team = ?1 AND idem_key = ?2", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, team);
    wr__bind_text(st, 2, idem_key);
    return get_one(s, st, r, "sandbox with idempotency key", idem_key ? idem_key : "(null)", err);
}

/* Step an UPDATE or DELETE by id; WR_ENOTFOUND if it touched no row. */
static int change_one(struct wr_store *s, sqlite3_stmt *st, const char *what, const char *id,
                      struct wr_err *err)
{
    if (sqlite3_step(st) != SQLITE_DONE)
        return wr__store_fail(s->db, err, "%s %s", what, id ? id : "(null)");
    if (sqlite3_changes(s->db) == 0)
        return wr_err_set(err, WR_ENOTFOUND, 0, "%s %s: sandbox not found", what,
                          id ? id : "(null)");
    return 0;
}

int wr_store_sandbox_set_state(struct wr_store *s, const char *id, enum wr_sb_state state,
                               const char *reason, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_SB_SET_STATE,
                 "UPDATE sandboxes SET state = ?2, reason = ?3,"
                 " paused_mode = CASE WHEN ?2 = 'paused' THEN paused_mode END,"
                 " remaining_ms = CASE WHEN ?2 = 'paused' THEN remaining_ms END WHERE id = ?1",
                 err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, id);
    wr__bind_text(st, 2, wr_sb_state_name(state));
    wr__bind_text(st, 3, reason);
    return change_one(s, st, "set state of sandbox", id, err);
}

int wr_store_sandbox_set_paused(struct wr_store *s, const char *id, enum wr_sb_paused_mode mode,
                                const char *reason, int64_t remaining_ms, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = NULL;

    if (wr_sb_paused_mode_name(mode) == NULL || remaining_ms < 0)
        return wr_err_set(err, WR_EINVAL, 0, "pause sandbox %s: no mode or negative time left",
                          id ? id : "(null)");
    st = wr__stmt(s, WR_ST_SB_SET_PAUSED,
                  "UPDATE sandboxes SET state = 'paused', paused_mode = ?2, reason = ?3,"
                  " remaining_ms = ?4 WHERE id = ?1",
                  err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, id);
    wr__bind_text(st, 2, wr_sb_paused_mode_name(mode));
    wr__bind_text(st, 3, reason);
    wr__bind_int64(st, 4, remaining_ms);
    return change_one(s, st, "pause sandbox", id, err);
}

int wr_store_sandbox_set_resumed(struct wr_store *s, const char *id, int64_t deadline_ms,
                                 struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_SB_SET_RESUMED,
                 "UPDATE sandboxes SET state = 'running', reason = NULL, paused_mode = NULL,"
                 " remaining_ms = NULL, deadline_ms = ?2 WHERE id = ?1",
                 err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, id);
    wr__bind_int64(st, 2, deadline_ms);
    return change_one(s, st, "resume sandbox", id, err);
}

int wr_store_sandbox_set_deadline(struct wr_store *s, const char *id, int64_t deadline_ms,
                                  struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(
        s, WR_ST_SB_SET_DEADLINE, "UPDATE sandboxes SET deadline_ms = ?2 WHERE id = ?1", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, id);
    wr__bind_int64(st, 2, deadline_ms);
    return change_one(s, st, "set deadline of sandbox", id, err);
}

int wr_store_sandbox_set_runtime(struct wr_store *s, const char *id, int64_t init_pid,
                                 int64_t uid_base, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_SB_SET_RUNTIME,
                 "UPDATE sandboxes SET init_pid = ?2, uid_base = ?3 WHERE id = ?1", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, id);
    wr__bind_int64(st, 2, init_pid);
    wr__bind_int64(st, 3, uid_base);
    return change_one(s, st, "set runtime of sandbox", id, err);
}

int wr_store_sandbox_set_net(struct wr_store *s, const char *id, const char *net_json,
                             int64_t net_slot, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_SB_SET_NET,
                 "UPDATE sandboxes SET net_json = ?2, net_slot = ?3 WHERE id = ?1", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, id);
    wr__bind_text(st, 2, net_json);
    wr__bind_int64(st, 3, net_slot);
    return change_one(s, st, "set network of sandbox", id, err);
}

int wr_store_sandbox_release_idem(struct wr_store *s, const char *id, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(
        s, WR_ST_SB_RELEASE_IDEM, "UPDATE sandboxes SET idem_key = NULL WHERE id = ?1", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, id);
    return change_one(s, st, "release the idempotency key of sandbox", id, err);
}

int wr_store_sandbox_delete(struct wr_store *s, const char *id, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_SB_DELETE, "DELETE FROM sandboxes WHERE id = ?1", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, id);
    return change_one(s, st, "delete sandbox", id, err);
}

/* ---- list ------------------------------------------------------------------------------------ */

/* Append s as a JSON string literal at p; returns the new end. Needs up to 6 * strlen(s) + 2
 * bytes. Bytes >= 0x80 pass through: SQLite's JSON reader keeps them as they are, and both
 * sides of every comparison go through the same reader. */
static char *put_json_string(char *p, const char *s)
{
    static const char digits[] = "0123456789abcdef";

    *p++ = '"';
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = (char)c;
        } else if (c < 0x20) {
            memcpy(p, "\\u00", 4);
            p[4] = digits[c >> 4];
            p[5] = digits[c & 0xf];
            p += 6;
        } else {
            *p++ = (char)c;
        }
    }
    *p++ = '"';
    return p;
}

/* ["s1","s2",...] for the names of a set of WR_SB_BIT()s. */
static char *json_state_array(unsigned states)
{
    size_t need = 3;
    char *out, *p;
    bool first = true;

    for (unsigned i = 0; i < WR_SB_NSTATES; i++)
        need += strlen(wr_sb_state_name((enum wr_sb_state)i)) + 3;
    p = out = xmalloc(need);
    *p++ = '[';
    for (unsigned i = 0; i < WR_SB_NSTATES; i++) {
        if (!(states & WR_SB_BIT(i)))
            continue;
        if (!first)
            *p++ = ',';
        first = false;
        p = put_json_string(p, wr_sb_state_name((enum wr_sb_state)i));
    }
    *p++ = ']';
    *p = '\0';
    return out;
}

/* [["k1","v1"],["k2","v2"],...] */
static char *json_pair_array(const char *const *k, const char *const *v, size_t n)
{
    size_t need = 3;
    char *out, *p;

    for (size_t i = 0; i < n; i++)
        need += 6 * (strlen(k[i]) + strlen(v[i])) + 8;
    p = out = xmalloc(need);
    *p++ = '[';
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            *p++ = ',';
        *p++ = '[';
        p = put_json_string(p, k[i]);
        *p++ = ',';
        p = put_json_string(p, v[i]);
        *p++ = ']';
    }
    *p++ = ']';
    *p = '\0';
    return out;
}

/* The filter is one cached statement per team predicate. States (?3) and metadata pairs (?4)
 * arrive as bound JSON arrays read with json_each, so any number of them runs the same
 * prepared statement and no caller text is ever spliced into SQL. A row matches the metadata
 * filter when no pair is missing from its metadata_json; keys are compared as json_each
 * decodes them, so quotes, dots and unicode in keys need no JSON-path quoting. */
#define SB_LIST_SQL(team_pred)                                                                     \
    "SELECT " SB_COLS " FROM sandboxes"                                                            \
    " WHERE " team_pred " AND seq > ?2"                                                            \
    " AND CASE WHEN ?3 IS NULL THEN state NOT IN ('stopped', 'error')"                             \
    "          ELSE state IN (SELECT value FROM json_each(?3)) END"                                \
    " AND NOT EXISTS (SELECT 1 FROM json_each(?4) AS f WHERE NOT EXISTS ("                         \
    "     SELECT 1 FROM json_each(sandboxes.metadata_json) AS m"                                   \
    "     WHERE m.type = 'text' AND m.key = json_extract(f.value, '$[0]')"                         \
    "       AND m.value = json_extract(f.value, '$[1]')))"                                         \
    " ORDER BY seq LIMIT ?5"

int wr_store_sandbox_list(struct wr_store *s, const struct wr_sandbox_filter *f,
                          struct wr_sandbox_rec **out, size_t *n, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = NULL;
    _cleanup_free_ char *states = NULL, *meta = NULL;
    struct wr_sandbox_rec *v = NULL;
    size_t len = 0, cap = 0;
    int rc;

    for (size_t i = 0; i < f->n_meta; i++)
        if (f->meta_keys[i] == NULL || f->meta_values[i] == NULL)
            return wr_err_set(err, WR_EINVAL, 0, "list sandboxes: metadata filter %zu is NULL", i);
    if (f->team != NULL)
        st = wr__stmt(s, WR_ST_SB_LIST_TEAM, SB_LIST_SQL("team = ?1"), err);
    else
        st = wr__stmt(s, WR_ST_SB_LIST_ALL, SB_LIST_SQL("?1 IS NULL"), err);
    if (st == NULL)
        return -1;
    if (f->states != 0)
        states = json_state_array(f->states);
    if (f->n_meta > 0)
        meta = json_pair_array(f->meta_keys, f->meta_values, f->n_meta);
    wr__bind_text(st, 1, f->team);
    wr__bind_int64(st, 2, f->after_seq);
    wr__bind_text(st, 3, states);
    wr__bind_text(st, 4, meta);
    /* A negative LIMIT is no limit. */
    wr__bind_int64(st, 5, f->limit == 0 || f->limit > INT64_MAX ? -1 : (int64_t)f->limit);

    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (len == cap) {
            cap = cap ? 2 * cap : 16;
            v = xrealloc(v, cap * sizeof(*v));
        }
        read_rec(st, &v[len++]);
    }
    if (rc != SQLITE_DONE) {
        wr__store_fail(s->db, err, "list sandboxes");
        for (size_t i = 0; i < len; i++)
            wr_sandbox_rec_fini(&v[i]);
        free(v);
        return -1;
    }
    *out = v;
    *n = len;
    return 0;
}
