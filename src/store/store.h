/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's state in SQLite (WAL): teams, API keys, sandboxes, volumes. The only folder that
 * includes sqlite3.h. Every function runs one statement or one transaction; a store is used from
 * one thread. Strings returned in records are owned by the record (free with the _fini). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../util/err.h"

struct wr_store;

/* Open (creating, mode 0600) the database at path, apply migrations, WAL mode, foreign keys on.
 * WR_EUNSUPPORTED if the file was migrated by a newer build; WR_ESYS on other failures. */
int wr_store_open(const char *path, struct wr_store **out, struct wr_err *err);
/* Another connection to a database that this process has open already (wr_store_open), for a
 * worker thread: no migrations, and no spare room written (on a full filesystem that write
 * would grow the WAL past the room the first connection keeps, and take it from the daemon's
 * own next commit). */
int wr_store_open_more(const char *path, struct wr_store **out, struct wr_err *err);
void wr_store_close(struct wr_store *s);

/* ---- teams and API keys ------------------------------------------------------------------- */

struct wr_key_info {
    char *id;   /* public key id, e.g. "k_3f9a..." */
    char *team; /* team name */
    char *name; /* label */
    bool admin;
    int64_t created_ms;
};
void wr_key_info_fini(struct wr_key_info *k);

/* Make a key for `team` (the team is created if new). The secret is random (256 bits), shown
 * once in *secret ("wr_" + 64 hex, free it), and stored only as its SHA-256. A NULL name is
 * stored as "". WR_EINVAL if team is NULL or empty. */
int wr_store_key_create(struct wr_store *s, const char *team, const char *name, bool admin,
                        char **secret, struct wr_key_info *info, struct wr_err *err);
/* Find the key whose secret this is (constant-time compare of the hash). WR_ENOTFOUND if none. */
int wr_store_key_lookup(struct wr_store *s, const char *secret, struct wr_key_info *info,
                        struct wr_err *err);
/* Keys of a team (team NULL: all). *out is an array of *n infos; free each and the array. */
int wr_store_key_list(struct wr_store *s, const char *team, struct wr_key_info **out, size_t *n,
                      struct wr_err *err);
/* Delete a key (of `team` unless team is NULL). WR_ENOTFOUND if there is none. */
int wr_store_key_delete(struct wr_store *s, const char *team, const char *key_id,
                        struct wr_err *err);
/* Number of keys in the store. */
int wr_store_key_count(struct wr_store *s, int64_t *n, struct wr_err *err);

/* ---- sandboxes ------------------------------------------------------------------------------ */

/* A sandbox record's state (docs/architecture.md): creating → running ⇄ paused → stopped, and
 * error. The names are the SQL column's and the API's. */
enum wr_sb_state {
    WR_SB_CREATING,
    WR_SB_RUNNING,
    WR_SB_PAUSED,
    WR_SB_STOPPED,
    WR_SB_ERROR,
};
#define WR_SB_NSTATES 5
#define WR_SB_BIT(s)  (1u << (s))
#define WR_SB_LIVE    (WR_SB_BIT(WR_SB_CREATING) | WR_SB_BIT(WR_SB_RUNNING) | WR_SB_BIT(WR_SB_PAUSED))
/* What a sandbox's deadline does. */
enum wr_sb_on_timeout {
    WR_SB_TIMEOUT_KILL,
    WR_SB_TIMEOUT_PAUSE,
};
/* Where a paused sandbox is kept: NONE unless paused. */
enum wr_sb_paused_mode {
    WR_SB_PAUSED_NONE,
    WR_SB_PAUSED_MEMORY,
    WR_SB_PAUSED_DISK,
};

/* The names ("creating", ..., "kill", "pause", "memory", "disk"; NULL for WR_SB_PAUSED_NONE and
 * values out of range), and their parsers: 0 with *out set, or -1 for a name that is none. */
static inline const char *wr_sb_state_name(enum wr_sb_state s)
{
    static const char *const names[] = {"creating", "running", "paused", "stopped", "error"};
    return (unsigned)s < WR_SB_NSTATES ? names[s] : NULL;
}
static inline int wr_sb_state_parse(const char *name, enum wr_sb_state *out)
{
    for (unsigned i = 0; name != NULL && i < WR_SB_NSTATES; i++)
        if (strcmp(name, wr_sb_state_name((enum wr_sb_state)i)) == 0) {
            *out = (enum wr_sb_state)i;
            return 0;
        }
    return -1;
}
static inline const char *wr_sb_on_timeout_name(enum wr_sb_on_timeout t)
{
    return t == WR_SB_TIMEOUT_PAUSE ? "pause" : t == WR_SB_TIMEOUT_KILL ? "kill" : NULL;
}
static inline int wr_sb_on_timeout_parse(const char *name, enum wr_sb_on_timeout *out)
{
    if (name != NULL && strcmp(name, "kill") == 0)
        *out = WR_SB_TIMEOUT_KILL;
    else if (name != NULL && strcmp(name, "pause") == 0)
        *out = WR_SB_TIMEOUT_PAUSE;
    else
        return -1;
    return 0;
}
static inline const char *wr_sb_paused_mode_name(enum wr_sb_paused_mode m)
{
    return m == WR_SB_PAUSED_MEMORY ? "memory" : m == WR_SB_PAUSED_DISK ? "disk" : NULL;
}
static inline int wr_sb_paused_mode_parse(const char *name, enum wr_sb_paused_mode *out)
{
    if (name != NULL && strcmp(name, "memory") == 0)
        *out = WR_SB_PAUSED_MEMORY;
    else if (name != NULL && strcmp(name, "disk") == 0)
        *out = WR_SB_PAUSED_DISK;
    else
        return -1;
    return 0;
}

struct wr_sandbox_rec {
    char *id;
    char *team;
    char *template_name;
    enum wr_sb_state state;
    char *reason; /* NULL unless stopped or error */
    uint32_t cpu_millis;
    uint64_t memory_bytes;
    int64_t created_ms;  /* wall clock, ms since the epoch */
    int64_t deadline_ms; /* wall clock */
    char *metadata_json; /* a JSON object of strings, "{}" if none */
    char *env_json;      /* a JSON object of strings */
    char *idem_key;      /* Idempotency-Key, or NULL */
    int64_t init_pid;    /* host pid of warren-init, 0 if none */
    int64_t uid_base;
    int64_t seq;                        /* insertion order, for stable pagination */
    enum wr_sb_on_timeout on_timeout;   /* what the deadline does */
    uint32_t timeout_s;                 /* the timeout given at create */
    enum wr_sb_paused_mode paused_mode; /* while paused; else NONE */
    int64_t remaining_ms; /* while paused: the stopped deadline clock's time left; else -1 */
    /* The image it runs: {"layers": [refs, bottom first], "config": {...}} (see images.h in
     * src/core); "{}" for sandboxes made before layers were recorded. */
    char *image_json;
    char *volumes_json;  /* what it mounts: [{"id","name","path","readonly"}], "[]" if none */
    uint64_t disk_bytes; /* the disk limit of its writable layer; 0: none */
    char *net_json;      /* its network (core/net.c's JSON), NULL: loopback only */
    int64_t net_slot;    /* the slot of the network pool it holds, -1: none */
    /* Its isolation backend (src/runtime/runtime.h, enum wr_backend): "ns" or "gvisor"; NULL on
     * insert stores "ns". */
    char *runtime;
    char *devices_json; /* the host devices it holds (core/cdi.h): JSON array of names, or NULL */
    char *compose_json; /* its Compose services as resolved at create (core/services.c), or NULL */
};
void wr_sandbox_rec_fini(struct wr_sandbox_rec *r);

/* Insert a new sandbox (r->seq is assigned; seqs are never reused). NULL metadata_json or
 * env_json store "{}", NULL volumes_json "[]". WR_ECONFLICT if the id, or the (team, idem_key)
 * pair, exists; WR_EINVAL if id, team or template_name is NULL or a JSON column is not an
 * object. */
int wr_store_sandbox_insert(struct wr_store *s, struct wr_sandbox_rec *r, struct wr_err *err);
/* Get by id; team NULL: any team, else WR_ENOTFOUND for another team's sandbox. */
int wr_store_sandbox_get(struct wr_store *s, const char *team, const char *id,
                         struct wr_sandbox_rec *r, struct wr_err *err);
/* Get by idempotency key of a team. WR_ENOTFOUND if none. */
int wr_store_sandbox_get_idem(struct wr_store *s, const char *team, const char *idem_key,
                              struct wr_sandbox_rec *r, struct wr_err *err);
/* Updates and delete by id (any team: check ownership with _get first). WR_ENOTFOUND if there
 * is no such sandbox. */
/* Any state but paused also clears paused_mode and remaining_ms. */
int wr_store_sandbox_set_state(struct wr_store *s, const char *id, enum wr_sb_state state,
                               const char *reason, struct wr_err *err);
/* State paused in `mode` (WR_EINVAL for NONE), with reason (NULL: none) and the deadline's time
 * left. */
int wr_store_sandbox_set_paused(struct wr_store *s, const char *id, enum wr_sb_paused_mode mode,
                                const char *reason, int64_t remaining_ms, struct wr_err *err);
/* State running again with a new deadline; clears reason, paused_mode and remaining_ms. */
int wr_store_sandbox_set_resumed(struct wr_store *s, const char *id, int64_t deadline_ms,
                                 struct wr_err *err);
int wr_store_sandbox_set_deadline(struct wr_store *s, const char *id, int64_t deadline_ms,
                                  struct wr_err *err);
int wr_store_sandbox_set_runtime(struct wr_store *s, const char *id, int64_t init_pid,
                                 int64_t uid_base, struct wr_err *err);
/* Its network (NULL: loopback only) and slot (-1: none); a slot is released by setting -1. */
int wr_store_sandbox_set_net(struct wr_store *s, const char *id, const char *net_json,
                             int64_t net_slot, struct wr_err *err);
/* Forget the record's idempotency key, so that a new create can take it. */
int wr_store_sandbox_release_idem(struct wr_store *s, const char *id, struct wr_err *err);
int wr_store_sandbox_delete(struct wr_store *s, const char *id, struct wr_err *err);

struct wr_sandbox_filter {
    const char *team;             /* NULL: every team */
    unsigned states;              /* WR_SB_BIT()s of the states; 0: all but stopped and error */
    const char *const *meta_keys; /* n_meta pairs: metadata[key] == value (string values) */
    const char *const *meta_values;
    size_t n_meta;
    int64_t after_seq; /* pagination cursor: only seq > after_seq */
    size_t limit;      /* at most this many (0: no limit) */
};
/* Matching sandboxes in seq order. *out is an array of *n records (fini each, free the array). */
int wr_store_sandbox_list(struct wr_store *s, const struct wr_sandbox_filter *f,
                          struct wr_sandbox_rec **out, size_t *n, struct wr_err *err);

/* ---- layers and images (templates, snapshots) ---------------------------------------------- */

/* A layer in the store: <state>/layers/<hex of digest>/fs. */
struct wr_layer_rec {
    char *digest; /* "sha256:<hex>" */
    uint64_t size_bytes;
    int64_t created_ms;
};
/* Record a layer (nothing happens if it is recorded already). */
int wr_store_layer_put(struct wr_store *s, const char *digest, uint64_t size_bytes,
                       struct wr_err *err);
int wr_store_layer_delete(struct wr_store *s, const char *digest, struct wr_err *err);
/* Layers that no image and no live sandbox (creating, running, paused) refers to: *out is an
 * array of *n digests (free each and the array). */
int wr_store_layers_unreferenced(struct wr_store *s, char ***out, size_t *n, struct wr_err *err);
/* Sum of the sizes of the recorded layers in a JSON array of refs. */
int wr_store_layers_size(struct wr_store *s, const char *layers_json, uint64_t *bytes,
                         struct wr_err *err);

struct wr_image_rec {
    char *id;          /* "tpl-<random>" ("tpl-<name>" before names were per team) or
                          "snap-<random>" */
    char *kind;        /* "template" or "snapshot" */
    char *name;        /* a template's name; a snapshot's optional name, else NULL */
    char *team;        /* the team that made it */
    char *layers_json; /* JSON array of layer refs, bottom first */
    char *config_json; /* JSON object: env, cwd, user, setuid */
    char *source;      /* the sandbox a snapshot was taken of, or how a template was made */
    uint64_t size_bytes;
    int64_t created_ms;
    bool shared; /* a template every team may use (an admin's); never a snapshot */
};
void wr_image_rec_fini(struct wr_image_rec *r);

/* Insert an image. WR_ECONFLICT if its id, the name of a template of its team, a shared
 * template's name (shared) or a team's snapshot name is taken. */
int wr_store_image_insert(struct wr_store *s, const struct wr_image_rec *r, struct wr_err *err);
/* An image of `team` by id or name: a snapshot (id or name), or a template (name; its id too);
 * the shared templates of other teams are not looked at (see _get_shared). team NULL: any
 * team's, an id first, then a snapshot. WR_ENOTFOUND. */
int wr_store_image_get(struct wr_store *s, const char *team, const char *ref,
                       struct wr_image_rec *r, struct wr_err *err);
/* The shared template named `name`. WR_ENOTFOUND. */
int wr_store_image_get_shared(struct wr_store *s, const char *name, struct wr_image_rec *r,
                              struct wr_err *err);
/* Images of a kind ("template", "snapshot"; NULL: both) of `team` and the shared templates
 * (team NULL: every team's); source (NULL: any) filters snapshots by sandbox. Newest first. */
int wr_store_image_list(struct wr_store *s, const char *team, const char *kind, const char *source,
                        struct wr_image_rec **out, size_t *n, struct wr_err *err);
int wr_store_image_delete(struct wr_store *s, const char *id, struct wr_err *err);
/* The build cache: a step's key (64 hex) → the layer it made, or "" for a step that changed
 * nothing (and made no layer). A cached layer stays in the store while its row does; _get is
 * WR_ENOTFOUND when the key is unknown or its layer is gone. */
int wr_store_build_cache_put(struct wr_store *s, const char *key, const char *digest,
                             const char *team, struct wr_err *err);
/* Forget team's cache rows (team NULL: every team's); *n gets how many. Their layers are then
 * collected unless something else refers to them. */
int wr_store_build_cache_prune(struct wr_store *s, const char *team, int64_t *n,
                               struct wr_err *err);
int wr_store_build_cache_get(struct wr_store *s, const char *key, char digest[80],
                             struct wr_err *err);

/* Number of live sandboxes (creating, running, paused) of team (NULL: any) started from image
 * `name`. */
int wr_store_image_users(struct wr_store *s, const char *team, const char *name, int64_t *n,
                         struct wr_err *err);

/* ---- volumes -------------------------------------------------------------------------------- */

struct wr_volume_rec {
    char *id;   /* [a-z0-9]{20}: names its directory */
    char *team; /* the team that owns it */
    char *name; /* unique within the team */
    int64_t created_ms;
};
void wr_volume_rec_fini(struct wr_volume_rec *v);

/* Insert a volume (id, team, name, created_ms set by the caller). WR_ECONFLICT if the team has
 * a volume of that name (or the id exists). */
int wr_store_volume_insert(struct wr_store *s, const struct wr_volume_rec *v, struct wr_err *err);
/* A team's volume by name; WR_ENOTFOUND if the team has none of that name. */
int wr_store_volume_get(struct wr_store *s, const char *team, const char *name,
                        struct wr_volume_rec *v, struct wr_err *err);
/* Volumes of a team (NULL: every team), by name. *out is an array of *n records (fini each, free
 * the array). */
int wr_store_volume_list(struct wr_store *s, const char *team, struct wr_volume_rec **out,
                         size_t *n, struct wr_err *err);
/* Delete a team's volume by name, in one transaction with the check that no sandbox in state
 * creating, running or paused mounts it: WR_ECONFLICT naming such a sandbox, WR_ENOTFOUND if
 * there is no such volume. On success *v holds the deleted record (fini it). */
int wr_store_volume_delete(struct wr_store *s, const char *team, const char *name,
                           struct wr_volume_rec *v, struct wr_err *err);

/* ---- the egress log (store/netlog.c) --------------------------------------------------------- */

/* One entry of a sandbox's egress log (net/peer.h and core/netlog.h say what the fields mean). */
struct wr_netlog_rec {
    int64_t id;       /* the cursor: assigned at insert, ascending, never reused */
    char *sandbox_id; /* required at insert */
    char *team;       /* read: the sandbox's team (insert takes it from the sandbox's record) */
    int64_t time_ms;
    char *proto; /* required at insert */
    uint32_t addr;
    uint16_t port;
    char *name; /* or NULL */
    uint64_t bytes_out, bytes_in;
    bool allowed;
    char *rule; /* NULL is stored as "" */
};
void wr_netlog_rec_fini(struct wr_netlog_rec *r);

/* Insert n entries in one transaction. An entry whose sandbox has no record is not stored (its
 * id is set to 0); the others get their ids. *stored (may be NULL) gets how many were. */
int wr_store_netlog_insert(struct wr_store *s, struct wr_netlog_rec *rows, size_t n, size_t *stored,
                           struct wr_err *err);
/* How many entries the sandbox has. */
int wr_store_netlog_count(struct wr_store *s, const char *sandbox_id, int64_t *n,
                          struct wr_err *err);
/* Delete the sandbox's n oldest entries (*deleted: how many there were). */
int wr_store_netlog_trim(struct wr_store *s, const char *sandbox_id, int64_t n, int64_t *deleted,
                         struct wr_err *err);
/* The sandbox's entries with id > after, oldest first, at most limit (1 to 1000; 0: 1000).
 * *out is an array of *n records (fini each, free the array). The rows go with the sandbox's
 * record (wr_store_sandbox_delete). */
int wr_store_netlog_list(struct wr_store *s, const char *sandbox_id, int64_t after, size_t limit,
                         struct wr_netlog_rec **out, size_t *n, struct wr_err *err);

/* ---- the audit trail (store/audit.c) -------------------------------------------------------- */

/* One state-changing API request: who (team, key id), from where (peer), what (action, the
 * object's kind and id, method and route pattern) and the result (HTTP status, error code). */
struct wr_audit_rec {
    int64_t id; /* the cursor: assigned at insert, ascending, never reused */
    int64_t time_ms;
    char *request_id, *team, *key_id, *peer, *action, *object_kind, *object_id, *method, *route;
    int status;
    char *code; /* the error's code ("" on success) */
};
void wr_audit_rec_fini(struct wr_audit_rec *r);

/* Append r (every string required; NULL is stored as ""); r->id gets its id. */
int wr_store_audit_insert(struct wr_store *s, struct wr_audit_rec *r, struct wr_err *err);
/* Append n records in one transaction (all or none); each gets its id. */
int wr_store_audit_insert_n(struct wr_store *s, struct wr_audit_rec *rows, size_t n,
                            struct wr_err *err);

/* A lifecycle event (migration 14). */
struct wr_event_rec {
    int64_t id; /* the cursor: assigned at insert, ascending, never reused */
    int64_t time_ms;
    char *team, *sandbox_id;
    char *type; /* "sandbox.created", ... (core/events.h) */
    char *data; /* a JSON object */
};
void wr_event_rec_fini(struct wr_event_rec *r);

/* Append r (strings required but data, NULL: "{}"); r->id gets its id. */
int wr_store_event_insert(struct wr_store *s, struct wr_event_rec *r, struct wr_err *err);

struct wr_event_filter {
    const char *team;       /* NULL: every team */
    const char *sandbox_id; /* NULL: every sandbox */
    const char *type;       /* exact, or a prefix ending in '.'; NULL: any */
    int64_t after;          /* id > after: the cursor */
    size_t limit;           /* 1 to 1000; 0: 100 */
};
/* The events that match f, by ascending id. *out: an array of *n records (fini each, free the
 * array). */
int wr_store_event_list(struct wr_store *s, const struct wr_event_filter *f,
                        struct wr_event_rec **out, size_t *n, struct wr_err *err);
/* Delete at most max events older than before_ms, oldest first; *deleted: how many. */
int wr_store_event_prune(struct wr_store *s, int64_t before_ms, int64_t max, int64_t *deleted,
                         struct wr_err *err);

/* A team's webhook (migration 16). */
struct wr_webhook_rec {
    char *id, *team, *name, *url;
    char *events; /* a JSON array of event types; "[]": every event */
    char *secret;
    char *format; /* "warren" or "e2b": the body's shape */
    bool enabled;
    int64_t created_ms, updated_ms;
};
void wr_webhook_rec_fini(struct wr_webhook_rec *r);
/* Add r (every string set). WR_ECONFLICT if its id exists. */
int wr_store_webhook_insert(struct wr_store *s, const struct wr_webhook_rec *r, struct wr_err *err);
/* The webhook id of team (NULL: of any team) into *out (fini it); WR_ENOTFOUND if none. */
int wr_store_webhook_get(struct wr_store *s, const char *team, const char *id,
                         struct wr_webhook_rec *out, struct wr_err *err);
/* The webhooks of team (NULL: every team), oldest first; *out: *n records (fini each, free). */
int wr_store_webhook_list(struct wr_store *s, const char *team, struct wr_webhook_rec **out,
                          size_t *n, struct wr_err *err);
/* Replace the name, url, events, secret, enabled and updated_ms of r's id (of r->team). */
int wr_store_webhook_update(struct wr_store *s, const struct wr_webhook_rec *r, struct wr_err *err);
/* Delete the webhook id of team (NULL: any team) and its deliveries; WR_ENOTFOUND if none. */
int wr_store_webhook_delete(struct wr_store *s, const char *team, const char *id,
                            struct wr_err *err);

/* A delivery of an event to a webhook (migration 16). */
struct wr_delivery_rec {
    int64_t id;
    char *uuid; /* the delivery id the receiver sees */
    char *webhook_id, *team, *type, *body;
    char *state; /* "pending", "delivered", "dead" */
    int64_t event_id, created_ms, next_ms, last_ms;
    int64_t attempts, last_status;
    char *last_error;
    char *url, *secret; /* the webhook's, in wr_store_delivery_due's rows only */
};
void wr_delivery_rec_fini(struct wr_delivery_rec *r);
/* Add r as pending, due at r->next_ms; r->id gets its id. */
int wr_store_delivery_insert(struct wr_store *s, struct wr_delivery_rec *r, struct wr_err *err);
/* The earliest due pending delivery (by due time, then id) of each of at most max enabled
 * webhooks that have one, with its webhook's url and secret. */
int wr_store_delivery_due(struct wr_store *s, int64_t now, size_t max, struct wr_delivery_rec **out,
                          size_t *n, struct wr_err *err);
/* Lease the delivery id for an attempt: its next_ms moves to until_ms (due again then, if the
 * attempt's outcome is never recorded). */
int wr_store_delivery_lease(struct wr_store *s, int64_t id, int64_t until_ms, struct wr_err *err);
/* When the earliest pending delivery of an enabled webhook is due into *at_ms; -1 if none. */
int wr_store_delivery_next(struct wr_store *s, int64_t *at_ms, struct wr_err *err);
/* Record an attempt's outcome: the new state, attempts, next_ms, and the attempt's time, HTTP
 * status (0: none) and error text. */
int wr_store_delivery_result(struct wr_store *s, const struct wr_delivery_rec *r,
                             struct wr_err *err);
struct wr_delivery_filter {
    const char *team;       /* NULL: every team */
    const char *webhook_id; /* NULL: every webhook */
    const char *state;      /* NULL: any */
    int64_t after;          /* id > after: the cursor */
    size_t limit;           /* 1 to 1000; 0: 100 */
};
/* The deliveries that match f, by ascending id (fini each, free the array). */
int wr_store_delivery_list(struct wr_store *s, const struct wr_delivery_filter *f,
                           struct wr_delivery_rec **out, size_t *n, struct wr_err *err);
/* Make the delivery id of webhook_id (of team, NULL: any) pending again with no attempts, due
 * at now; WR_ENOTFOUND if none, WR_ECONFLICT if it is pending. */
int wr_store_delivery_redeliver(struct wr_store *s, const char *team, const char *webhook_id,
                                int64_t id, int64_t now, struct wr_err *err);
/* Delete at most max finished deliveries (delivered or dead) older than before_ms. */
int wr_store_delivery_prune(struct wr_store *s, int64_t before_ms, int64_t max, int64_t *deleted,
                            struct wr_err *err);
/* The events of one sandbox or of a team for the E2B events API: those whose type is one of
 * the JSON array types, newest first unless asc, skipping offset, at most limit. */
int wr_store_event_page(struct wr_store *s, const char *team, const char *sandbox_id,
                        const char *types, bool asc, int64_t offset, size_t limit,
                        struct wr_event_rec **out, size_t *n, struct wr_err *err);
/* The data of the first event of sandbox_id of type into *data (free it); NULL if none. */
int wr_store_event_first_data(struct wr_store *s, const char *sandbox_id, const char *type,
                              char **data, struct wr_err *err);

struct wr_audit_filter {
    const char *team;   /* NULL: every team */
    int64_t from_ms;    /* time_ms >= from_ms (0: no bound) */
    int64_t to_ms;      /* time_ms < to_ms (0: no bound) */
    const char *action; /* exact, or a prefix ending in '.' ("sandbox."); NULL: any */
    const char *object; /* object_id, exact; NULL: any */
    int64_t after;      /* id > after: the cursor */
    size_t limit;       /* 1 to 1000; 0: 100 */
};
/* The rows that match f, oldest first (by id), at most f->limit. *out is an array of *n records
 * (fini each, free the array). */
int wr_store_audit_list(struct wr_store *s, const struct wr_audit_filter *f,
                        struct wr_audit_rec **out, size_t *n, struct wr_err *err);
/* Delete the rows older than before_ms among the max oldest (by id; rows are appended in time
 * order, so fewer than max deleted means none older is left); *deleted gets how many. */
int wr_store_audit_prune(struct wr_store *s, int64_t before_ms, int64_t max, int64_t *deleted,
                         struct wr_err *err);

/* The layer store's total: bytes and layers recorded. */
int wr_store_layers_total(struct wr_store *s, uint64_t *bytes, uint64_t *count, struct wr_err *err);
/* ---- budgets (store/budgets.c) ---------------------------------------------------------- */

/* The budget of kind ("team" or "sandbox") owner (the team, or the sandbox's id), a JSON
 * object's text, into *json (free it), or NULL when it has none. */
int wr_store_budget_get(struct wr_store *s, const char *kind, const char *owner, char **json,
                        struct wr_err *err);
/* Record json (a JSON object's text) as owner's budget of its team, replacing any; NULL deletes
 * it. A sandbox's budget is deleted with its record. */
int wr_store_budget_put(struct wr_store *s, const char *kind, const char *owner, const char *team,
                        const char *json, struct wr_err *err);
/* The ledger's closed intervals of team (sandbox NULL) or of sandbox that start at from_ms or
 * later, summed: billed vCPU-seconds (billed: "allocated", "measured" or "max"; NULL: allocated)
 * and allocated GiB-seconds. */
int wr_store_budget_spend(struct wr_store *s, const char *team, const char *sandbox,
                          int64_t from_ms, const char *billed, double *vcpu_seconds,
                          double *gib_seconds, struct wr_err *err);

/* ---- per-team limits (store/limits.c) ------------------------------------------------------ */

/* The operator's overrides of team's limits, a JSON object's text, into *json (free it), or
 * NULL when the team has none. */
int wr_store_team_limits_get(struct wr_store *s, const char *team, char **json, struct wr_err *err);
/* Record json (a JSON object's text) as team's overrides, replacing any; NULL deletes them. */
int wr_store_team_limits_put(struct wr_store *s, const char *team, const char *json,
                             struct wr_err *err);

/* ---- the usage ledger (store/usage.c, docs/usage.md) ---------------------------------------- */

/* One closed interval of a sandbox: running (allocated and measured use) or paused. */
struct wr_usage_interval {
    const char *sandbox, *team, *template_name;
    int64_t seq; /* 1, 2, ... per sandbox */
    int64_t start_ms, end_ms;
    bool running;
    uint32_t cpu_millis;
    uint64_t memory_bytes;               /* the memory limit */
    double vcpu_seconds, gib_seconds;    /* allocated: limits x running seconds */
    double cpu_seconds, mem_gib_seconds; /* measured: CPU time, memory integrated over time */
    uint64_t peak_memory_bytes;
    uint64_t net_bytes_in, net_bytes_out;
    uint64_t cpu_end_ns, net_out_end; /* the cumulative counters at end_ms */
};
/* Insert n intervals in one transaction; one whose (sandbox, seq) is stored already is left as
 * it is (never counted twice). */
int wr_store_usage_insert(struct wr_store *s, const struct wr_usage_interval *v, size_t n,
                          struct wr_err *err);
/* The sandbox's last interval: returns 1 and fills *seq, *end_ms, *cpu_end_ns, *net_out_end, or
 * 0 if it has none. */
int wr_store_usage_last(struct wr_store *s, const char *sandbox, int64_t *seq, int64_t *end_ms,
                        uint64_t *cpu_end_ns, uint64_t *net_out_end, struct wr_err *err);

enum wr_usage_group { WR_USAGE_BY_SANDBOX, WR_USAGE_BY_TEMPLATE, WR_USAGE_BY_DAY };
/* The sums of a group of intervals. */
struct wr_usage_sum {
    char *key; /* the sandbox id, template name or day (YYYY-MM-DD, UTC) */
    char *team;
    char *template_name;       /* a sandbox's or template's; NULL for a day */
    int64_t first_ms, last_ms; /* the earliest start and latest end */
    int64_t intervals;
    double running_seconds, paused_seconds;
    double vcpu_seconds, gib_seconds, cpu_seconds, mem_gib_seconds;
    double max_seconds; /* per interval the larger of vcpu_seconds and cpu_seconds, summed */
    uint64_t peak_memory_bytes, net_bytes_in, net_bytes_out;
};
void wr_usage_sum_fini(struct wr_usage_sum *u);
/* The intervals of team (NULL: every team) that start in [from_ms, to_ms) (0: no bound),
 * grouped by g (with the team: a day's row is per team), ordered by team and key. *out is an
 * array of *n sums (fini each, free the array). */
int wr_store_usage_sum(struct wr_store *s, const char *team, int64_t from_ms, int64_t to_ms,
                       enum wr_usage_group g, struct wr_usage_sum **out, size_t *n,
                       struct wr_err *err);

/* Bytes stored by a team of one kind ("template", "snapshot", "paused", "volume"). */
struct wr_usage_storage {
    int64_t time_ms;
    char *team;
    char *kind;
    uint64_t bytes;
};
void wr_usage_storage_fini(struct wr_usage_storage *u);
/* Insert a sample of n rows in one transaction (a row at the same team, time and kind is
 * replaced). */
int wr_store_storage_insert(struct wr_store *s, const struct wr_usage_storage *v, size_t n,
                            struct wr_err *err);
/* The bytes of templates and snapshots (images) per team now: rows with time_ms 0, kinds
 * "template" and "snapshot". *out as for wr_store_storage_list. */
int wr_store_storage_images(struct wr_store *s, struct wr_usage_storage **out, size_t *n,
                            struct wr_err *err);
/* The samples of team (NULL: every team) taken in [from_ms, to_ms) (0: no bound), by team,
 * time and kind. *out is an array of *n rows (fini each, free the array). */
int wr_store_storage_list(struct wr_store *s, const char *team, int64_t from_ms, int64_t to_ms,
                          struct wr_usage_storage **out, size_t *n, struct wr_err *err);
