/* SPDX-License-Identifier: Apache-2.0 */
/* The gateway's shared state in PostgreSQL (libpq): teams and keys, nodes, where each sandbox
 * is, snapshots' nodes, the audit trail. Migrations are versioned like the SQLite ones
 * (store/migrate.c) and run under an advisory lock, so gateways starting together apply each
 * once. Nodes keep their own SQLite for what they run; the nodes are the truth of what runs, and
 * these rows are the gateway's view of it (reconciled in nodes.c).
 *
 * Every function blocks on the database: call it from a worker thread (or before the loop
 * runs). Each thread has its own connection, made at its first call and made again after a
 * failure. Errors: WR_ENOTFOUND (no such row), WR_ECONFLICT (a compare-and-set lost),
 * WR_EUPSTREAM (the database refused or is unreachable). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../util/err.h"

/* Set the connection string and bring the schema up to date. */
int gw_db_open(const char *dsn, struct wr_err *err);
/* Close the calling thread's connection (a thread that ends calls it). */
void gw_db_thread_done(void);

/* ---- keys ---------------------------------------------------------------------------------- */

struct gw_key {
    char id[64];
    char team[128];
    bool admin;
};
/* The key whose secret this is. WR_ENOTFOUND if none. */
int gw_db_key_lookup(const char *secret, struct gw_key *out, struct wr_err *err);
/* A new key of team (made if new): *secret shown once (free it), *info its JSON (id, team,
 * name, admin, created_at). */
int gw_db_key_create(const char *team, const char *name, bool admin, char **secret, json_t **info,
                     struct wr_err *err);
/* Make secret an admin key of team "admin" unless it is a key already (the bootstrap). */
int gw_db_key_ensure_admin(const char *secret, struct wr_err *err);
/* The keys of team (NULL: all), as a JSON array. */
int gw_db_key_list(const char *team, json_t **out, struct wr_err *err);
/* Delete key id (of team unless NULL). WR_ENOTFOUND if none. */
int gw_db_key_delete(const char *team, const char *id, struct wr_err *err);

/* ---- nodes ---------------------------------------------------------------------------------- */

/* Record what a node said (info: its /node/info JSON text, or NULL) or that it is silent. */
int gw_db_node_seen(const char *id, const char *addr, const char *state, const char *incarnation,
                    const char *info, struct wr_err *err);
/* Every node: [{id, addr, state, incarnation, info, last_seen, sandboxes}]. */
int gw_db_node_list(json_t **out, struct wr_err *err);

/* ---- sandboxes ------------------------------------------------------------------------------ */

struct gw_sandbox {
    char id[128];
    char team[128];
    char node[64];
    char state[16]; /* a node's state name, or "lost" */
    char reason[256];
    char manifest[512]; /* its export in the object store, or "" */
    int64_t generation; /* bumped at every move to another node */
};
/* The sandbox id (of team unless NULL). WR_ENOTFOUND if none. */
int gw_db_sandbox_get(const char *team, const char *id, struct gw_sandbox *out, struct wr_err *err);
/* A sandbox a node holds, made or updated: a row of another node (a stale copy after a move)
 * or one being deleted is left alone, and *other (if given) set: the node's copy must go. */
int gw_db_sandbox_put(const char *id, const char *team, const char *node, const char *state,
                      bool *other, struct wr_err *err);
/* Its state (and reason, NULL: none) on node (a row now of another node is left alone). */
int gw_db_sandbox_state(const char *id, const char *node, const char *state, const char *reason,
                        struct wr_err *err);
int gw_db_sandbox_set_manifest(const char *id, const char *manifest, struct wr_err *err);
/* Move it to node `to` if its generation is still `generation` (WR_ECONFLICT if not). */
int gw_db_sandbox_move(const char *id, int64_t generation, const char *to, struct wr_err *err);
int gw_db_sandbox_delete(const char *id, struct wr_err *err);
/* A sandbox deleted while its node is away: hidden at once, and deleted on the node when it
 * answers again (gw_db_sandbox_put then says *other), then forgotten. */
int gw_db_sandbox_tombstone(const char *id, struct wr_err *err);
int gw_db_sandbox_forget(const char *id, const char *node, struct wr_err *err);
/* The sandboxes recorded on node: a JSON array of {id, state}. */
int gw_db_sandbox_ids(const char *node, json_t **out, struct wr_err *err);
/* Every sandbox of node not yet lost becomes lost with reason; returns how many (or -1). */
int gw_db_sandbox_lose(const char *node, const char *reason, struct wr_err *err);
/* The lost sandboxes of team (NULL: all): a JSON array of {id, team, node, state, reason}. */
int gw_db_sandbox_lost(const char *team, json_t **out, struct wr_err *err);

/* ---- snapshots and audit --------------------------------------------------------------------- */

/* Where a snapshot was taken, and its export in the object store (for a create from it on
 * another node). */
struct gw_snapshot {
    char id[128];
    char node[64];
    char manifest[512]; /* "" if it was not exported */
};
int gw_db_snapshot_put(const char *id, const char *name, const char *team, const char *node,
                       struct wr_err *err);
int gw_db_snapshot_set_manifest(const char *id, const char *manifest, struct wr_err *err);
/* The snapshot ref (its id or name) of team. WR_ENOTFOUND if none. */
int gw_db_snapshot_get(const char *team, const char *ref, struct gw_snapshot *out,
                       struct wr_err *err);
/* Forget it (of team unless NULL): deleted on its node. */
int gw_db_snapshot_delete(const char *team, const char *ref, struct wr_err *err);

/* One audited request (best effort: the caller logs a failure). */
int gw_db_audit(const char *team, const char *key_id, const char *method, const char *path,
                int status, const char *sandbox, struct wr_err *err);
