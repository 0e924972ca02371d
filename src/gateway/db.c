/* SPDX-License-Identifier: Apache-2.0 */
/* The gateway's PostgreSQL (see db.h): a connection per thread, parameters always bound
 * ($1...), never spliced into the SQL. */
#include <libpq-fe.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/parse.h"
#include "../util/xalloc.h"
#include "db.h"

static char *db_dsn;
static __thread PGconn *tl_conn;

/* Each version's statements, applied in order, once (schema_migrations). */
static const char *const migrations[] = {
    /* 1: teams and keys, nodes, sandboxes, snapshots, audit */
    "CREATE TABLE teams (\n"
    "    name TEXT PRIMARY KEY,\n"
    "    created_at TIMESTAMPTZ NOT NULL DEFAULT now()\n"
    ");\n"
    "CREATE TABLE api_keys (\n"
    "    id TEXT PRIMARY KEY,\n"
    "    team TEXT NOT NULL REFERENCES teams (name),\n"
    "    name TEXT NOT NULL,\n"
    "    admin BOOLEAN NOT NULL,\n"
    "    hash TEXT NOT NULL UNIQUE CHECK (length(hash) = 64),\n"
    "    created_at TIMESTAMPTZ NOT NULL DEFAULT now()\n"
    ");\n"
    "CREATE TABLE nodes (\n"
    "    id TEXT PRIMARY KEY,\n"
    "    addr TEXT NOT NULL,\n"
    "    state TEXT NOT NULL,\n"
    "    incarnation TEXT,\n"
    "    info JSONB,\n"
    "    last_seen TIMESTAMPTZ,\n"
    "    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()\n"
    ");\n"
    "CREATE TABLE sandboxes (\n"
    "    id TEXT PRIMARY KEY,\n"
    "    team TEXT NOT NULL,\n"
    "    node_id TEXT NOT NULL,\n"
    "    state TEXT NOT NULL,\n"
    "    reason TEXT,\n"
    "    generation BIGINT NOT NULL DEFAULT 1,\n"
    "    manifest TEXT,\n"
    "    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),\n"
    "    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()\n"
    ");\n"
    "CREATE INDEX sandboxes_node ON sandboxes (node_id);\n"
    "CREATE INDEX sandboxes_team ON sandboxes (team);\n"
    "CREATE TABLE snapshots (\n"
    "    id TEXT PRIMARY KEY,\n"
    "    name TEXT,\n"
    "    team TEXT NOT NULL,\n"
    "    node_id TEXT NOT NULL,\n"
    "    manifest TEXT,\n"
    "    created_at TIMESTAMPTZ NOT NULL DEFAULT now()\n"
    ");\n"
    "CREATE INDEX snapshots_name ON snapshots (team, name);\n"
    "CREATE TABLE audit (\n"
    "    id BIGSERIAL PRIMARY KEY,\n"
    "    at TIMESTAMPTZ NOT NULL DEFAULT now(),\n"
    "    team TEXT,\n"
    "    key_id TEXT,\n"
    "    method TEXT NOT NULL,\n"
    "    path TEXT NOT NULL,\n"
    "    status INTEGER NOT NULL,\n"
    "    sandbox_id TEXT\n"
    ");\n"
    "CREATE INDEX audit_team_at ON audit (team, at);\n",
};

/* Any number: the lock every gateway takes to migrate. */
#define MIGRATE_LOCK "7310243911"

static void result_free(PGresult **r)
{
    if (*r != NULL)
        PQclear(*r);
}
#define _cleanup_result_ __attribute__((cleanup(result_free)))

/* The length of a libpq message's first line. */
static int first_line(const char *m)
{
    return (int)strcspn(m, "\n");
}

/* A count or id column's value (the server's, always digits). */
static int64_t num(const char *s)
{
    uint64_t v = 0;
    struct wr_err e;

    (void)wr_parse_uint(s, INT64_MAX, &v, &e);
    return (int64_t)v;
}

/* The server's notices ("relation ... already exists, skipping") are not errors. */
static void on_notice(void *arg, const char *msg)
{
    (void)arg;
    log_debug("database: %.*s", (int)strcspn(msg, "\n"), msg);
}

static PGconn *conn(struct wr_err *err)
{
    if (tl_conn != NULL && PQstatus(tl_conn) != CONNECTION_OK) {
        PQreset(tl_conn);
        if (PQstatus(tl_conn) != CONNECTION_OK) {
            PQfinish(tl_conn);
            tl_conn = NULL;
        }
    }
    if (tl_conn == NULL) {
        tl_conn = PQconnectdb(db_dsn);
        if (PQstatus(tl_conn) != CONNECTION_OK) {
            wr_err_set(err, WR_EUPSTREAM, 0, "database: %.*s", first_line(PQerrorMessage(tl_conn)),
                       PQerrorMessage(tl_conn));
            PQfinish(tl_conn);
            tl_conn = NULL;
            return NULL;
        }
        PQsetNoticeProcessor(tl_conn, on_notice, NULL);
    }
    return tl_conn;
}

/* Run sql with n text parameters (NULL: SQL NULL). Returns the result, or NULL with err. */
static PGresult *q(const char *what, const char *sql, int n, const char *const *params,
                   struct wr_err *err)
{
    PGconn *c = conn(err);
    PGresult *r;
    ExecStatusType st;

    if (c == NULL)
        return NULL;
    /* A migration is several statements, which only the simple protocol runs. */
    r = n == 0 ? PQexec(c, sql) : PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
    st = PQresultStatus(r);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
        return r;
    {
        const char *m = r ? PQresultErrorMessage(r) : PQerrorMessage(c);
        wr_err_set(err, WR_EUPSTREAM, 0, "database: %s: %.*s", what, first_line(m), m);
    }
    PQclear(r);
    return NULL;
}

static int exec(const char *what, const char *sql, int n, const char *const *params,
                struct wr_err *err)
{
    _cleanup_result_ PGresult *r = q(what, sql, n, params, err);

    return r == NULL ? -1 : 0;
}

static int migrate(struct wr_err *err)
{
    char v[16];
    int have;

    if (exec("lock", "SELECT pg_advisory_lock(" MIGRATE_LOCK ")", 0, NULL, err) < 0)
        return -1;
    if (exec("schema_migrations",
             "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
             " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
             0, NULL, err) < 0)
        goto fail;
    {
        _cleanup_result_ PGresult *r =
            q("version", "SELECT coalesce(max(version), 0) FROM schema_migrations", 0, NULL, err);
        if (r == NULL)
            goto fail;
        have = (int)num(PQgetvalue(r, 0, 0));
    }
    if (have > (int)WR_ARRAY_SIZE(migrations)) {
        wr_err_set(err, WR_EUPSTREAM, 0,
                   "database: schema version %d is newer than this gateway's %zu", have,
                   WR_ARRAY_SIZE(migrations));
        goto fail;
    }
    for (size_t i = (size_t)have; i < WR_ARRAY_SIZE(migrations); i++) {
        const char *p[1] = {v};
        snprintf(v, sizeof(v), "%zu", i + 1);
        if (exec("begin", "BEGIN", 0, NULL, err) < 0)
            goto fail;
        if (exec("migrate", migrations[i], 0, NULL, err) < 0 ||
            exec("record", "INSERT INTO schema_migrations (version) VALUES ($1)", 1, p, err) < 0 ||
            exec("commit", "COMMIT", 0, NULL, err) < 0) {
            struct wr_err e2;
            (void)exec("rollback", "ROLLBACK", 0, NULL, &e2);
            goto fail;
        }
    }
    return exec("unlock", "SELECT pg_advisory_unlock(" MIGRATE_LOCK ")", 0, NULL, err);
fail : {
    struct wr_err e2;
    (void)exec("unlock", "SELECT pg_advisory_unlock(" MIGRATE_LOCK ")", 0, NULL, &e2);
    return wr_err_wrap(err, "migrate");
}
}

void gw_db_thread_done(void)
{
    if (tl_conn != NULL)
        PQfinish(tl_conn);
    tl_conn = NULL;
}

int gw_db_open(const char *dsn, struct wr_err *err)
{
    free(db_dsn);
    db_dsn = xstrdup(dsn);
    return migrate(err);
}

/* ---- keys ---------------------------------------------------------------------------------- */

static void hex(const unsigned char *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* SHA-256 of secret as 64 hex digits, as the nodes' SQLite keeps keys (store/keys.c). */
static void hash_secret(const char *secret, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;

    if (EVP_Digest(secret, strlen(secret), md, &n, EVP_sha256(), NULL) != 1 || n != 32)
        abort();
    hex(md, 32, out);
}

static void random_hex(char *out, size_t nbytes)
{
    unsigned char b[32];

    if (nbytes > sizeof(b) || getrandom(b, nbytes, 0) != (ssize_t)nbytes)
        abort();
    hex(b, nbytes, out);
}

int gw_db_key_lookup(const char *secret, struct gw_key *out, struct wr_err *err)
{
    char h[65];
    const char *p[1] = {h};
    _cleanup_result_ PGresult *r = NULL;

    hash_secret(secret, h);
    r = q("key", "SELECT id, team, admin FROM api_keys WHERE hash = $1", 1, p, err);
    if (r == NULL)
        return -1;
    if (PQntuples(r) == 0)
        return wr_err_set(err, WR_ENOTFOUND, 0, "no such api key");
    snprintf(out->id, sizeof(out->id), "%s", PQgetvalue(r, 0, 0));
    snprintf(out->team, sizeof(out->team), "%s", PQgetvalue(r, 0, 1));
    out->admin = strcmp(PQgetvalue(r, 0, 2), "t") == 0;
    return 0;
}

static json_t *key_json(PGresult *r, int row)
{
    return json_pack("{s:s,s:s,s:s,s:b,s:s}", "id", PQgetvalue(r, row, 0), "team",
                     PQgetvalue(r, row, 1), "name", PQgetvalue(r, row, 2), "admin",
                     strcmp(PQgetvalue(r, row, 3), "t") == 0, "created_at", PQgetvalue(r, row, 4));
}

#define KEY_COLS                                                                                   \
    "id, team, name, admin, to_char(created_at AT TIME ZONE 'UTC', "                               \
    "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"

static int key_insert(const char *secret, const char *team, const char *name, bool admin,
                      json_t **info, struct wr_err *err)
{
    char h[65], id[19] = "k_";
    const char *pt[1] = {team};
    const char *p[5] = {id, team, name, admin ? "true" : "false", h};
    _cleanup_result_ PGresult *r = NULL;

    hash_secret(secret, h);
    random_hex(id + 2, 8);
    if (exec("team", "INSERT INTO teams (name) VALUES ($1) ON CONFLICT DO NOTHING", 1, pt, err) < 0)
        return -1;
    r = q("key",
          "INSERT INTO api_keys (id, team, name, admin, hash) VALUES ($1, $2, $3, $4, $5)"
          " RETURNING " KEY_COLS,
          5, p, err);
    if (r == NULL)
        return -1;
    if (info != NULL)
        *info = key_json(r, 0);
    return 0;
}

int gw_db_key_create(const char *team, const char *name, bool admin, char **secret, json_t **info,
                     struct wr_err *err)
{
    char *s = xmalloc(3 + 64 + 1);

    memcpy(s, "wr_", 3);
    random_hex(s + 3, 32);
    if (key_insert(s, team, name ? name : "", admin, info, err) < 0) {
        free(s);
        return wr_err_wrap(err, "create key for team %s", team);
    }
    *secret = s;
    return 0;
}

int gw_db_key_ensure_admin(const char *secret, struct wr_err *err)
{
    struct gw_key k;

    if (gw_db_key_lookup(secret, &k, err) == 0)
        return 0;
    if (err->kind != WR_ENOTFOUND)
        return -1;
    return key_insert(secret, "admin", "first admin key", true, NULL, err);
}

int gw_db_key_list(const char *team, json_t **out, struct wr_err *err)
{
    const char *p[1] = {team};
    _cleanup_result_ PGresult *r =
        q("keys",
          "SELECT " KEY_COLS " FROM api_keys WHERE $1::text IS NULL OR team = $1"
          " ORDER BY created_at, id",
          1, p, err);

    if (r == NULL)
        return -1;
    *out = json_array();
    for (int i = 0; i < PQntuples(r); i++)
        json_array_append_new(*out, key_json(r, i));
    return 0;
}

int gw_db_key_delete(const char *team, const char *id, struct wr_err *err)
{
    const char *p[2] = {id, team};
    _cleanup_result_ PGresult *r =
        q("delete key", "DELETE FROM api_keys WHERE id = $1 AND ($2::text IS NULL OR team = $2)", 2,
          p, err);

    if (r == NULL)
        return -1;
    if ((int)num(PQcmdTuples(r)) == 0)
        return wr_err_set(err, WR_ENOTFOUND, 0, "no such api key");
    return 0;
}

/* ---- nodes ---------------------------------------------------------------------------------- */

int gw_db_node_seen(const char *id, const char *addr, const char *state, const char *incarnation,
                    const char *info, struct wr_err *err)
{
    const char *p[5] = {id, addr, state, incarnation, info};

    return exec("node",
                "INSERT INTO nodes (id, addr, state, incarnation, info, last_seen)"
                " VALUES ($1, $2, $3, $4, $5::jsonb, CASE WHEN $5 IS NULL THEN NULL ELSE now() END)"
                " ON CONFLICT (id) DO UPDATE SET addr = $2, state = $3,"
                " incarnation = coalesce($4, nodes.incarnation), info = coalesce($5::jsonb,"
                " nodes.info), last_seen = CASE WHEN $5 IS NULL THEN nodes.last_seen ELSE now()"
                " END, updated_at = now()",
                5, p, err);
}

int gw_db_node_list(json_t **out, struct wr_err *err)
{
    _cleanup_result_ PGresult *r =
        q("nodes",
          "SELECT n.id, n.addr, n.state, coalesce(n.incarnation, ''), coalesce(n.info::text,"
          " '{}'), coalesce(to_char(n.last_seen AT TIME ZONE 'UTC',"
          " 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), ''), (SELECT count(*) FROM sandboxes s WHERE"
          " s.node_id = n.id AND s.state <> 'lost') FROM nodes n ORDER BY n.id",
          0, NULL, err);

    if (r == NULL)
        return -1;
    *out = json_array();
    for (int i = 0; i < PQntuples(r); i++) {
        json_t *info = json_loads(PQgetvalue(r, i, 4), 0, NULL);
        json_array_append_new(
            *out, json_pack("{s:s,s:s,s:s,s:s,s:o,s:s?,s:I}", "id", PQgetvalue(r, i, 0), "addr",
                            PQgetvalue(r, i, 1), "state", PQgetvalue(r, i, 2), "incarnation",
                            PQgetvalue(r, i, 3), "info", info ? info : json_object(), "last_seen",
                            PQgetvalue(r, i, 5)[0] ? PQgetvalue(r, i, 5) : NULL, "sandboxes",
                            (json_int_t)num(PQgetvalue(r, i, 6))));
    }
    return 0;
}

/* ---- sandboxes ------------------------------------------------------------------------------ */

int gw_db_sandbox_get(const char *team, const char *id, struct gw_sandbox *out, struct wr_err *err)
{
    const char *p[2] = {id, team};
    _cleanup_result_ PGresult *r =
        q("sandbox",
          "SELECT id, team, node_id, state, coalesce(reason, ''), coalesce(manifest, ''),"
          " generation FROM sandboxes WHERE id = $1 AND ($2::text IS NULL OR team = $2)"
          " AND state <> 'deleting'",
          2, p, err);

    if (r == NULL)
        return -1;
    if (PQntuples(r) == 0)
        return wr_err_set(err, WR_ENOTFOUND, 0, "no such sandbox: %s", id);
    snprintf(out->id, sizeof(out->id), "%s", PQgetvalue(r, 0, 0));
    snprintf(out->team, sizeof(out->team), "%s", PQgetvalue(r, 0, 1));
    snprintf(out->node, sizeof(out->node), "%s", PQgetvalue(r, 0, 2));
    snprintf(out->state, sizeof(out->state), "%s", PQgetvalue(r, 0, 3));
    snprintf(out->reason, sizeof(out->reason), "%s", PQgetvalue(r, 0, 4));
    snprintf(out->manifest, sizeof(out->manifest), "%s", PQgetvalue(r, 0, 5));
    out->generation = num(PQgetvalue(r, 0, 6));
    return 0;
}

int gw_db_sandbox_put(const char *id, const char *team, const char *node, const char *state,
                      bool *other, struct wr_err *err)
{
    const char *p[4] = {id, team, node, state};
    _cleanup_result_ PGresult *r =
        q("sandbox",
          "INSERT INTO sandboxes (id, team, node_id, state) VALUES ($1, $2, $3, $4)"
          " ON CONFLICT (id) DO UPDATE SET state = $4, reason = NULL, updated_at = now()"
          " WHERE sandboxes.node_id = $3 AND sandboxes.state <> 'deleting' RETURNING id",
          4, p, err);

    if (r == NULL)
        return -1;
    if (other != NULL)
        *other = PQntuples(r) == 0;
    return 0;
}

int gw_db_sandbox_state(const char *id, const char *node, const char *state, const char *reason,
                        struct wr_err *err)
{
    const char *p[4] = {id, node, state, reason};

    return exec("sandbox state",
                "UPDATE sandboxes SET state = $3, reason = $4, updated_at = now()"
                " WHERE id = $1 AND node_id = $2",
                4, p, err);
}

int gw_db_sandbox_set_manifest(const char *id, const char *manifest, struct wr_err *err)
{
    const char *p[2] = {id, manifest};

    return exec("sandbox manifest", "UPDATE sandboxes SET manifest = $2 WHERE id = $1", 2, p, err);
}

int gw_db_sandbox_move(const char *id, int64_t generation, const char *to, struct wr_err *err)
{
    char g[24];
    const char *p[3] = {id, g, to};
    _cleanup_result_ PGresult *r = NULL;

    snprintf(g, sizeof(g), "%lld", (long long)generation);
    r = q("move",
          "UPDATE sandboxes SET node_id = $3, generation = generation + 1, state = 'paused',"
          " reason = NULL, updated_at = now() WHERE id = $1 AND generation = $2::bigint",
          3, p, err);
    if (r == NULL)
        return -1;
    if ((int)num(PQcmdTuples(r)) == 0)
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox %s moved meanwhile", id);
    return 0;
}

int gw_db_sandbox_delete(const char *id, struct wr_err *err)
{
    const char *p[1] = {id};

    return exec("delete sandbox", "DELETE FROM sandboxes WHERE id = $1", 1, p, err);
}

int gw_db_sandbox_tombstone(const char *id, struct wr_err *err)
{
    const char *p[1] = {id};

    return exec("delete sandbox",
                "UPDATE sandboxes SET state = 'deleting', updated_at = now() WHERE id = $1", 1, p,
                err);
}

int gw_db_sandbox_forget(const char *id, const char *node, struct wr_err *err)
{
    const char *p[2] = {id, node};

    return exec("forget sandbox",
                "DELETE FROM sandboxes WHERE id = $1 AND node_id = $2 AND state = 'deleting'", 2, p,
                err);
}

int gw_db_sandbox_ids(const char *node, json_t **out, struct wr_err *err)
{
    const char *p[1] = {node};
    _cleanup_result_ PGresult *r =
        q("sandboxes",
          "SELECT id, state, updated_at < now() - interval '5 seconds' FROM sandboxes"
          " WHERE node_id = $1",
          1, p, err);

    if (r == NULL)
        return -1;
    *out = json_array();
    for (int i = 0; i < PQntuples(r); i++)
        json_array_append_new(*out, json_pack("{s:s,s:s,s:b}", "id", PQgetvalue(r, i, 0), "state",
                                              PQgetvalue(r, i, 1), "settled",
                                              strcmp(PQgetvalue(r, i, 2), "t") == 0));
    return 0;
}

int gw_db_sandbox_lose(const char *node, const char *reason, struct wr_err *err)
{
    const char *p[2] = {node, reason};
    _cleanup_result_ PGresult *r =
        q("lose",
          "UPDATE sandboxes SET state = 'lost', reason = $2, updated_at = now()"
          " WHERE node_id = $1 AND state NOT IN ('lost', 'deleting')",
          2, p, err);

    return r == NULL ? -1 : (int)num(PQcmdTuples(r));
}

int gw_db_sandbox_lost(const char *team, json_t **out, struct wr_err *err)
{
    const char *p[1] = {team};
    _cleanup_result_ PGresult *r =
        q("lost",
          "SELECT id, team, node_id, coalesce(reason, '') FROM sandboxes WHERE state = 'lost'"
          " AND ($1::text IS NULL OR team = $1) ORDER BY created_at, id",
          1, p, err);

    if (r == NULL)
        return -1;
    *out = json_array();
    for (int i = 0; i < PQntuples(r); i++)
        json_array_append_new(*out,
                              json_pack("{s:s,s:s,s:s,s:s,s:s}", "id", PQgetvalue(r, i, 0), "team",
                                        PQgetvalue(r, i, 1), "node", PQgetvalue(r, i, 2), "state",
                                        "lost", "reason", PQgetvalue(r, i, 3)));
    return 0;
}

/* ---- snapshots and audit --------------------------------------------------------------------- */

int gw_db_snapshot_put(const char *id, const char *name, const char *team, const char *node,
                       struct wr_err *err)
{
    const char *p[4] = {id, name, team, node};

    return exec("snapshot",
                "INSERT INTO snapshots (id, name, team, node_id) VALUES ($1, $2, $3, $4)"
                " ON CONFLICT (id) DO UPDATE SET node_id = $4",
                4, p, err);
}

int gw_db_snapshot_set_manifest(const char *id, const char *manifest, struct wr_err *err)
{
    const char *p[2] = {id, manifest};

    return exec("snapshot manifest", "UPDATE snapshots SET manifest = $2 WHERE id = $1", 2, p, err);
}

int gw_db_snapshot_get(const char *team, const char *ref, struct gw_snapshot *out,
                       struct wr_err *err)
{
    const char *p[2] = {team, ref};
    _cleanup_result_ PGresult *r =
        q("snapshot",
          "SELECT id, node_id, coalesce(manifest, '') FROM snapshots WHERE team = $1"
          " AND (id = $2 OR name = $2) ORDER BY created_at DESC LIMIT 1",
          2, p, err);

    if (r == NULL)
        return -1;
    if (PQntuples(r) == 0)
        return wr_err_set(err, WR_ENOTFOUND, 0, "no such snapshot: %s", ref);
    snprintf(out->id, sizeof(out->id), "%s", PQgetvalue(r, 0, 0));
    snprintf(out->node, sizeof(out->node), "%s", PQgetvalue(r, 0, 1));
    snprintf(out->manifest, sizeof(out->manifest), "%s", PQgetvalue(r, 0, 2));
    return 0;
}

int gw_db_snapshot_delete(const char *team, const char *ref, struct wr_err *err)
{
    const char *p[2] = {team, ref};

    return exec("delete snapshot",
                "DELETE FROM snapshots WHERE ($1::text IS NULL OR team = $1) AND (id = $2 OR"
                " name = $2)",
                2, p, err);
}

int gw_db_audit(const char *team, const char *key_id, const char *method, const char *path,
                int status, const char *sandbox, struct wr_err *err)
{
    char st[16];
    const char *p[6] = {team, key_id, method, path, st, sandbox};

    snprintf(st, sizeof(st), "%d", status);
    return exec("audit",
                "INSERT INTO audit (team, key_id, method, path, status, sandbox_id)"
                " VALUES ($1, $2, $3, $4, $5::integer, $6)",
                6, p, err);
}
