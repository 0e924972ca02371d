/* SPDX-License-Identifier: Apache-2.0 */
/* The schema, as a list of numbered migrations applied at open. To change the schema, append a
 * migration; never edit one that has shipped (docs/design/store.md, "Adding a migration"). */
#include "store_int.h"

#include <stdio.h>

/* Version 1: teams, API keys, sandboxes.
 * - api_keys.hash is the SHA-256 of the secret, lowercase hex; the secret itself is never
 *   stored. Lookup goes through its UNIQUE index.
 * - sandboxes.seq orders rows for pagination. It comes from sandbox_seq, a one-row counter
 *   bumped by a trigger, so a seq is never reused, even after the newest row is deleted (a
 *   reused seq would hide new rows from a client holding an older cursor).
 * - sandboxes.team is not a foreign key: a sandbox's team is the one of the key that made it,
 *   and records stay readable if keys and teams are ever pruned.
 * - CHECKs keep the JSON columns objects; CASE, because json_type() raises an error rather
 *   than returning NULL on malformed JSON. */
static const char migration_1[] =
    "CREATE TABLE teams (\n"
    "    name TEXT PRIMARY KEY NOT NULL,\n"
    "    created_ms INTEGER NOT NULL\n"
    ");\n"
    "CREATE TABLE api_keys (\n"
    "    id TEXT PRIMARY KEY NOT NULL,\n"
    "    team TEXT NOT NULL REFERENCES teams (name),\n"
    "    name TEXT NOT NULL,\n"
    "    admin INTEGER NOT NULL CHECK (admin IN (0, 1)),\n"
    "    hash TEXT NOT NULL UNIQUE CHECK (length(hash) = 64),\n"
    "    created_ms INTEGER NOT NULL\n"
    ");\n"
    "CREATE INDEX api_keys_team ON api_keys (team);\n"
    "CREATE TABLE sandboxes (\n"
    "    id TEXT PRIMARY KEY NOT NULL,\n"
    "    seq INTEGER NOT NULL UNIQUE,\n"
    "    team TEXT NOT NULL,\n"
    "    template_name TEXT NOT NULL,\n"
    "    state TEXT NOT NULL,\n"
    "    reason TEXT,\n"
    "    cpu_millis INTEGER NOT NULL,\n"
    "    memory_bytes INTEGER NOT NULL,\n"
    "    created_ms INTEGER NOT NULL,\n"
    "    deadline_ms INTEGER NOT NULL,\n"
    "    metadata_json TEXT NOT NULL DEFAULT '{}' CHECK (\n"
    "        CASE WHEN json_valid(metadata_json) THEN json_type(metadata_json) = 'object'\n"
    "             ELSE 0 END),\n"
    "    env_json TEXT NOT NULL DEFAULT '{}' CHECK (\n"
    "        CASE WHEN json_valid(env_json) THEN json_type(env_json) = 'object' ELSE 0 END),\n"
    "    idem_key TEXT,\n"
    "    init_pid INTEGER NOT NULL DEFAULT 0,\n"
    "    uid_base INTEGER NOT NULL DEFAULT 0\n"
    ");\n"
    "CREATE UNIQUE INDEX sandboxes_team_idem ON sandboxes (team, idem_key)\n"
    "    WHERE idem_key IS NOT NULL;\n"
    "CREATE INDEX sandboxes_team_seq ON sandboxes (team, seq);\n"
    "CREATE TABLE sandbox_seq (last INTEGER NOT NULL);\n"
    "INSERT INTO sandbox_seq (last) VALUES (0);\n"
    "CREATE TRIGGER sandboxes_seq AFTER INSERT ON sandboxes BEGIN\n"
    "    UPDATE sandbox_seq SET last = max(last, NEW.seq);\n"
    "END;\n";

/* Version 2: pause and the timeout policy.
 * - on_timeout: what the deadline does, kill (the default, as before) or pause.
 * - timeout_s: the timeout given at create; a sandbox paused by its deadline gets it again
 *   when resumed. Rows from version 1 get the span between their creation and deadline.
 * - paused_mode ("memory") and remaining_ms (the deadline clock's time left, which stops while
 *   paused) are NULL unless the sandbox is paused. */
static const char migration_2[] =
    "ALTER TABLE sandboxes ADD COLUMN on_timeout TEXT NOT NULL DEFAULT 'kill'\n"
    "    CHECK (on_timeout IN ('kill', 'pause'));\n"
    "ALTER TABLE sandboxes ADD COLUMN timeout_s INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE sandboxes ADD COLUMN paused_mode TEXT;\n"
    "ALTER TABLE sandboxes ADD COLUMN remaining_ms INTEGER;\n"
    "UPDATE sandboxes SET timeout_s = max(1, (deadline_ms - created_ms + 999) / 1000);\n";

/* Version 3: the layer store and images.
 * - layers: the layers Warren made (snapshots, builds, imports), by content digest; the tree is
 *   <state>/layers/<hex>/fs. Directory templates are not layers here: they are used in place.
 * - images: templates (a global name) and snapshots (a team's; an optional name unique in the
 *   team), each a JSON array of layer refs ("sha256:<hex>" or "dir:<absolute path>") plus a
 *   config. A layer is referenced by images and by live sandboxes (sandboxes.image_json), and
 *   collected when neither refers to it any more.
 * - sandboxes.image_json: {"layers": [...], "config": {...}}, what a sandbox was started from,
 *   so a sandbox paused to disk starts again on the same image. */
static const char migration_3[] =
    "CREATE TABLE layers (\n"
    "    digest TEXT PRIMARY KEY NOT NULL CHECK (digest LIKE 'sha256:%'),\n"
    "    size_bytes INTEGER NOT NULL,\n"
    "    created_ms INTEGER NOT NULL\n"
    ");\n"
    "CREATE TABLE images (\n"
    "    id TEXT PRIMARY KEY NOT NULL,\n"
    "    kind TEXT NOT NULL CHECK (kind IN ('template', 'snapshot')),\n"
    "    name TEXT,\n"
    "    team TEXT NOT NULL,\n"
    "    layers_json TEXT NOT NULL CHECK (\n"
    "        CASE WHEN json_valid(layers_json) THEN json_type(layers_json) = 'array' ELSE 0 END),\n"
    "    config_json TEXT NOT NULL DEFAULT '{}' CHECK (\n"
    "        CASE WHEN json_valid(config_json) THEN json_type(config_json) = 'object' ELSE 0 "
    "END),\n"
    "    source TEXT,\n"
    "    size_bytes INTEGER NOT NULL DEFAULT 0,\n"
    "    created_ms INTEGER NOT NULL\n"
    ");\n"
    "CREATE UNIQUE INDEX images_template_name ON images (name) WHERE kind = 'template';\n"
    "CREATE UNIQUE INDEX images_snapshot_name ON images (team, name)\n"
    "    WHERE kind = 'snapshot' AND name IS NOT NULL;\n"
    "ALTER TABLE sandboxes ADD COLUMN image_json TEXT NOT NULL DEFAULT '{}' CHECK (\n"
    "    CASE WHEN json_valid(image_json) THEN json_type(image_json) = 'object' ELSE 0 END);\n";

/* Version 4: named volumes.
 * - volumes: a team's persistent directories. The name is unique within the team; the id
 *   (random, never reused) names the directory on disk, so a volume deleted and made again
 *   under the same name never meets the old one's files.
 * - sandboxes.volumes_json: what a sandbox mounts, an array of {"id", "name", "path",
 *   "readonly"}, kept for its whole life so that a volume stays in use while a sandbox that
 *   mounts it is creating, running or paused, also across daemon restarts. */
static const char migration_4[] =
    "CREATE TABLE volumes (\n"
    "    id TEXT PRIMARY KEY NOT NULL,\n"
    "    team TEXT NOT NULL,\n"
    "    name TEXT NOT NULL,\n"
    "    created_ms INTEGER NOT NULL,\n"
    "    UNIQUE (team, name)\n"
    ");\n"
    "ALTER TABLE sandboxes ADD COLUMN volumes_json TEXT NOT NULL DEFAULT '[]' CHECK (\n"
    "    CASE WHEN json_valid(volumes_json) THEN json_type(volumes_json) = 'array' ELSE 0 END);\n";

/* Version 5: the build cache. A row names the layer a build step made (key: a SHA-256 chained
 * over the base image and every step up to it); the layer stays in the store while the row
 * does (see wr_store_layers_unreferenced). */
static const char migration_5[] = "CREATE TABLE build_cache (\n"
                                  "    key TEXT PRIMARY KEY NOT NULL CHECK (length(key) = 64),\n"
                                  "    digest TEXT NOT NULL,\n"
                                  "    created_ms INTEGER NOT NULL\n"
                                  ");\n";

/* Version 6: a disk limit per sandbox (bytes; 0 for none), enforced on its writable layer by a
 * btrfs qgroup or a project quota. */
static const char migration_6[] =
    "ALTER TABLE sandboxes ADD COLUMN disk_bytes INTEGER NOT NULL DEFAULT 0;\n";

/* Version 7: whose build made a cache row, so that a team can prune its own cache. Rows from
 * before have no team (only a prune of every team's cache removes them). */
static const char migration_7[] = "ALTER TABLE build_cache ADD COLUMN team TEXT;\n";

/* Version 8: template names are per team, and shared templates are every team's.
 * - images.shared: 1 for a template an admin shared; every team resolves its name (after its
 *   own images and the directory templates), and no team may take it. Until now every template
 *   was global: those of the admin team (the first admin key's and the unix socket's) become
 *   shared, every other team's becomes that team's own (another team that used it loses it).
 * - A template's name is unique in its team (two teams may each have `myapp`), and a shared
 *   template's name unique among the shared ones. */
static const char migration_8[] =
    "ALTER TABLE images ADD COLUMN shared INTEGER NOT NULL DEFAULT 0 CHECK (shared IN (0, 1));\n"
    "UPDATE images SET shared = 1 WHERE kind = 'template' AND team = 'admin';\n"
    "DROP INDEX images_template_name;\n"
    "CREATE UNIQUE INDEX images_template_name ON images (team, name) WHERE kind = 'template';\n"
    "CREATE UNIQUE INDEX images_shared_name ON images (name)\n"
    "    WHERE kind = 'template' AND shared = 1;\n";

/* Version 9: networking. net_json is the sandbox's network as it was asked for and as it stands
 * (its egress policy, its exposed-port options; core/net.c writes and reads it), NULL for a
 * sandbox with loopback only; net_slot is the slot of the daemon's pool it holds while it lives
 * (-1: none), so that a restarted daemon gives every sandbox back its own address and rules. */
static const char migration_9[] = "ALTER TABLE sandboxes ADD COLUMN net_json TEXT CHECK (\n"
                                  "    net_json IS NULL OR json_type(net_json) = 'object');\n"
                                  "ALTER TABLE sandboxes ADD COLUMN net_slot INTEGER NOT NULL"
                                  " DEFAULT -1;\n";

/* Version 10: the egress log (store/netlog.c).
 * - netlog: one row per connection, DNS answer or denied packet of a sandbox. id is
 *   AUTOINCREMENT so that an id is never reused, even after the newest rows go (it is the API's
 *   cursor). addr is the IPv4 destination as an integer in host byte order (0: none). The daemon
 *   keeps the newest rows of each sandbox (10,000 by default) and deletes the older.
 * - The rows of a sandbox go with its record (the trigger), whichever code deletes it. */
static const char migration_10[] =
    "CREATE TABLE netlog (\n"
    "    id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "    sandbox TEXT NOT NULL,\n"
    "    team TEXT NOT NULL,\n"
    "    time_ms INTEGER NOT NULL,\n"
    "    proto TEXT NOT NULL,\n"
    "    addr INTEGER NOT NULL CHECK (addr BETWEEN 0 AND 4294967295),\n"
    "    port INTEGER NOT NULL CHECK (port BETWEEN 0 AND 65535),\n"
    "    name TEXT,\n"
    "    bytes_out INTEGER NOT NULL DEFAULT 0,\n"
    "    bytes_in INTEGER NOT NULL DEFAULT 0,\n"
    "    allowed INTEGER NOT NULL CHECK (allowed IN (0, 1)),\n"
    "    rule TEXT NOT NULL DEFAULT ''\n"
    ");\n"
    "CREATE INDEX netlog_sandbox ON netlog (sandbox, id);\n"
    "CREATE TRIGGER sandboxes_netlog AFTER DELETE ON sandboxes BEGIN\n"
    "    DELETE FROM netlog WHERE sandbox = OLD.id;\n"
    "END;\n";

/* Version 11: the usage ledger (store/usage.c, docs/usage.md).
 * - usage_intervals: one row per closed interval of a sandbox, keyed by (sandbox, seq): a
 *   daemon that writes a seq again (after a restart) changes nothing. running is 1 for a running
 *   interval, 0 for a paused one. cpu_end_ns and net_out_end are the sandbox's cumulative
 *   counters at end_ms, where a restarted daemon continues from. The rows outlive the sandbox's
 *   record (team and template are copied).
 * - usage_storage: bytes stored per team and kind (template, snapshot, paused, volume) at a
 *   sample time. */
static const char migration_11[] = "CREATE TABLE usage_intervals (\n"
                                   "    sandbox TEXT NOT NULL,\n"
                                   "    seq INTEGER NOT NULL,\n"
                                   "    team TEXT NOT NULL,\n"
                                   "    template TEXT NOT NULL,\n"
                                   "    start_ms INTEGER NOT NULL,\n"
                                   "    end_ms INTEGER NOT NULL,\n"
                                   "    running INTEGER NOT NULL,\n"
                                   "    cpu_millis INTEGER NOT NULL,\n"
                                   "    memory_bytes INTEGER NOT NULL,\n"
                                   "    vcpu_seconds REAL NOT NULL,\n"
                                   "    gib_seconds REAL NOT NULL,\n"
                                   "    cpu_seconds REAL NOT NULL,\n"
                                   "    mem_gib_seconds REAL NOT NULL,\n"
                                   "    peak_memory_bytes INTEGER NOT NULL,\n"
                                   "    net_bytes_in INTEGER NOT NULL,\n"
                                   "    net_bytes_out INTEGER NOT NULL,\n"
                                   "    cpu_end_ns INTEGER NOT NULL,\n"
                                   "    net_out_end INTEGER NOT NULL,\n"
                                   "    PRIMARY KEY (sandbox, seq)\n"
                                   ") WITHOUT ROWID;\n"
                                   "CREATE INDEX usage_intervals_team ON usage_intervals "
                                   "(team, start_ms);\n"
                                   "CREATE TABLE usage_storage (\n"
                                   "    time_ms INTEGER NOT NULL,\n"
                                   "    team TEXT NOT NULL,\n"
                                   "    kind TEXT NOT NULL,\n"
                                   "    bytes INTEGER NOT NULL,\n"
                                   "    PRIMARY KEY (team, time_ms, kind)\n"
                                   ") WITHOUT ROWID;\n";

/* Version 12: per-team limits (store/limits.c). limits is a JSON object of the operator's
 * overrides for the team (api/limits.c reads it: requests, creates, bytes as {rate, burst};
 * max_sandboxes; max_memory_mb); what it does not name keeps the daemon's defaults. */
static const char migration_12[] =
    "CREATE TABLE team_limits (\n"
    "    team TEXT PRIMARY KEY NOT NULL,\n"
    "    limits TEXT NOT NULL CHECK (json_type(limits) = 'object'),\n"
    "    updated_ms INTEGER NOT NULL\n"
    ");\n";

/* Version 13: the audit trail of the API's state-changing requests (store/audit.c).
 * - audit: one row per request, written when its answer is complete. id is AUTOINCREMENT (the
 *   API's cursor, never reused). key_id is the public id of the caller's key ("unix" for the
 *   admin on the unix socket), never the secret. peer is "tcp:ADDR", "unix" or "internal".
 * - Rows are never changed (the trigger); the periodic prune deletes those past the retention. */
static const char migration_13[] = "CREATE TABLE audit (\n"
                                   "    id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
                                   "    time_ms INTEGER NOT NULL,\n"
                                   "    request_id TEXT NOT NULL,\n"
                                   "    team TEXT NOT NULL,\n"
                                   "    key_id TEXT NOT NULL,\n"
                                   "    peer TEXT NOT NULL,\n"
                                   "    action TEXT NOT NULL,\n"
                                   "    object_kind TEXT NOT NULL,\n"
                                   "    object_id TEXT NOT NULL,\n"
                                   "    method TEXT NOT NULL,\n"
                                   "    route TEXT NOT NULL,\n"
                                   "    status INTEGER NOT NULL,\n"
                                   "    code TEXT NOT NULL DEFAULT ''\n"
                                   ");\n"
                                   "CREATE INDEX audit_team ON audit (team, id);\n"
                                   "CREATE TRIGGER audit_append_only BEFORE UPDATE ON audit BEGIN\n"
                                   "    SELECT RAISE(ABORT, 'the audit trail is append-only');\n"
                                   "END;\n";

/* Version 14: lifecycle events (store/events.c, core/events.h).
 * - events: one row per change of a sandbox's life (created, paused, resumed, snapshotted,
 *   forked, timed out, killed, stopped, failed), with its team, so that a team lists and
 *   follows its own. id is AUTOINCREMENT: the cursor and the SSE event id, never reused. data is
 *   a JSON object whose fields depend on the type. */
static const char migration_14[] = "CREATE TABLE events (\n"
                                   "    id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
                                   "    time_ms INTEGER NOT NULL,\n"
                                   "    team TEXT NOT NULL,\n"
                                   "    sandbox_id TEXT NOT NULL,\n"
                                   "    type TEXT NOT NULL,\n"
                                   "    data TEXT NOT NULL DEFAULT '{}'\n"
                                   ");\n"
                                   "CREATE INDEX events_team ON events (team, id);\n"
                                   "CREATE INDEX events_sandbox ON events (sandbox_id, id);\n";

/* Version 15: budgets (store/budgets.c, core/budget.c; docs/usage.md "Budgets").
 * - budgets: a spend cap of a team (kind 'team', owner the team) or of a sandbox (kind
 *   'sandbox', owner its id, team its team). budget is a JSON object {unit, soft, hard,
 *   period} as core/budget.c writes it. A sandbox's row goes with its record. */
static const char migration_15[] =
    "CREATE TABLE budgets (\n"
    "    kind TEXT NOT NULL CHECK (kind IN ('team', 'sandbox')),\n"
    "    owner TEXT NOT NULL,\n"
    "    team TEXT NOT NULL,\n"
    "    budget TEXT NOT NULL CHECK (json_type(budget) = 'object'),\n"
    "    updated_ms INTEGER NOT NULL,\n"
    "    PRIMARY KEY (kind, owner)\n"
    ");\n"
    "CREATE TRIGGER budgets_sandbox_gone AFTER DELETE ON sandboxes BEGIN\n"
    "    DELETE FROM budgets WHERE kind = 'sandbox' AND owner = OLD.id;\n"
    "END;\n";

/* Version 16: webhooks (store/webhooks.c, core/webhooks.h).
 * - webhooks: a team's endpoints. events is a JSON array of event types (native, prefixes
 *   ending in '.', or E2B's sandbox.lifecycle.*), [] for every event; format says the body's
 *   shape ("warren" or "e2b"); secret signs the deliveries.
 * - webhook_deliveries: one row per event and webhook, pending until delivered (2xx) or dead
 *   (its attempts spent): the dead-letter record. body is the exact JSON sent, so a redelivery
 *   sends the same bytes. next_ms is when the next attempt is due; an attempt in flight leases
 *   the row by moving next_ms past its timeout, so after a restart it is tried again. */
static const char migration_16[] =
    "CREATE TABLE webhooks (\n"
    "    id TEXT PRIMARY KEY NOT NULL,\n"
    "    team TEXT NOT NULL,\n"
    "    name TEXT NOT NULL DEFAULT '',\n"
    "    url TEXT NOT NULL,\n"
    "    events TEXT NOT NULL DEFAULT '[]',\n"
    "    secret TEXT NOT NULL,\n"
    "    format TEXT NOT NULL DEFAULT 'warren' CHECK (format IN ('warren', 'e2b')),\n"
    "    enabled INTEGER NOT NULL DEFAULT 1,\n"
    "    created_ms INTEGER NOT NULL,\n"
    "    updated_ms INTEGER NOT NULL\n"
    ");\n"
    "CREATE INDEX webhooks_team ON webhooks (team);\n"
    "CREATE TABLE webhook_deliveries (\n"
    "    id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "    uuid TEXT NOT NULL UNIQUE,\n"
    "    webhook_id TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,\n"
    "    team TEXT NOT NULL,\n"
    "    event_id INTEGER NOT NULL,\n"
    "    type TEXT NOT NULL,\n"
    "    body TEXT NOT NULL,\n"
    "    state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),\n"
    "    attempts INTEGER NOT NULL DEFAULT 0,\n"
    "    created_ms INTEGER NOT NULL,\n"
    "    next_ms INTEGER NOT NULL,\n"
    "    last_ms INTEGER NOT NULL DEFAULT 0,\n"
    "    last_status INTEGER NOT NULL DEFAULT 0,\n"
    "    last_error TEXT NOT NULL DEFAULT ''\n"
    ");\n"
    "CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_ms);\n"
    "CREATE INDEX webhook_deliveries_hook ON webhook_deliveries (webhook_id, id);\n"
    "CREATE INDEX webhook_deliveries_hook_due ON webhook_deliveries\n"
    "    (webhook_id, state, next_ms, id);\n";

/* Version 17: the isolation backend of each sandbox (src/runtime/runtime.h, enum wr_backend):
 * "ns" or "gvisor", as core names them. Rows from before ran on namespaces. No CHECK: the
 * store does not know the runtime's names, and a new backend would need a table rebuild. */
static const char migration_17[] =
    "ALTER TABLE sandboxes ADD COLUMN runtime TEXT NOT NULL DEFAULT 'ns';\n";

/* Version 18: the host devices a sandbox holds (core/cdi.h): a JSON array of CDI names, NULL
 * for none. */
static const char migration_18[] = "ALTER TABLE sandboxes ADD COLUMN devices_json TEXT CHECK (\n"
                                   "    devices_json IS NULL OR json_valid(devices_json));\n";

/* Version 19: a sandbox's Compose services (core/services.c): their spec as resolved at create,
 * JSON, NULL for a sandbox of none. */
static const char migration_19[] = "ALTER TABLE sandboxes ADD COLUMN compose_json TEXT CHECK (\n"
                                   "    compose_json IS NULL OR json_valid(compose_json));\n";

const struct wr__migration wr__migrations[] = {
    {1, migration_1},   {2, migration_2},   {3, migration_3},   {4, migration_4},
    {5, migration_5},   {6, migration_6},   {7, migration_7},   {8, migration_8},
    {9, migration_9},   {10, migration_10}, {11, migration_11}, {12, migration_12},
    {13, migration_13}, {14, migration_14}, {15, migration_15}, {16, migration_16},
    {17, migration_17}, {18, migration_18}, {19, migration_19},
};
const size_t wr__n_migrations = WR_ARRAY_SIZE(wr__migrations);

int wr__store_schema_version(sqlite3 *db, int *version, struct wr_err *err)
{
    static const char sql[] = "SELECT coalesce(max(version), 0) FROM schema_version";
    sqlite3_stmt *st = NULL;
    int ret = 0;

    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return wr__store_fail(db, err, "read schema version");
    if (sqlite3_step(st) == SQLITE_ROW)
        *version = sqlite3_column_int(st, 0);
    else
        ret = wr__store_fail(db, err, "read schema version");
    sqlite3_finalize(st);
    return ret;
}

static int record_version(sqlite3 *db, int version, struct wr_err *err)
{
    static const char sql[] = "INSERT INTO schema_version (version, applied_ms) VALUES (?1, ?2)";
    sqlite3_stmt *st = NULL;
    int ret;

    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return wr__store_fail(db, err, "record schema version %d", version);
    (void)sqlite3_bind_int(st, 1, version);
    (void)sqlite3_bind_int64(st, 2, wr__now_ms());
    ret = wr__step_done(db, st, "record schema version", err);
    sqlite3_finalize(st);
    return ret;
}

/* The body of the migration transaction; the caller commits or rolls back. */
static int migrate_locked(sqlite3 *db, const struct wr__migration *m, size_t n, struct wr_err *err)
{
    int version = 0;

    if (sqlite3_exec(db,
                     "CREATE TABLE IF NOT EXISTS schema_version (\n"
                     "    version INTEGER PRIMARY KEY NOT NULL,\n"
                     "    applied_ms INTEGER NOT NULL\n"
                     ")",
                     NULL, NULL, NULL) != SQLITE_OK)
        return wr__store_fail(db, err, "create schema_version");
    /* Read inside the write transaction: another process opening the same file at the same
     * moment waits for us and then sees our version. */
    if (wr__store_schema_version(db, &version, err) < 0)
        return -1;
    if (version > (int)n)
        return wr_err_set(err, WR_EUNSUPPORTED, 0,
                          "database schema version %d is newer than this build (%zu)", version, n);
    for (size_t i = (size_t)version; i < n; i++) {
        if (sqlite3_exec(db, m[i].sql, NULL, NULL, NULL) != SQLITE_OK)
            return wr__store_fail(db, err, "migration %d", m[i].version);
        if (record_version(db, m[i].version, err) < 0)
            return -1;
    }
    return 0;
}

int wr__store_migrate(sqlite3 *db, const struct wr__migration *m, size_t n, struct wr_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (m[i].version != (int)i + 1)
            return wr_err_set(err, WR_EINTERNAL, 0, "migration %zu is numbered %d", i + 1,
                              m[i].version);

    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return wr__store_fail(db, err, "migrate: begin");
    if (migrate_locked(db, m, n, err) < 0) {
        if (!sqlite3_get_autocommit(db))
            (void)sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return wr_err_wrap(err, "migrate");
    }
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        wr__store_fail(db, err, "migrate: commit");
        if (!sqlite3_get_autocommit(db))
            (void)sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return 0;
}
