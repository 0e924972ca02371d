/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox manager: the daemon's model of every sandbox and the only code that changes
 * one. It validates requests against quotas, drives the state machine
 *
 *     creating → running ⇄ paused
 *                   ↓        ↓
 *                 stopped   stopped        (and error, always with a reason)
 *
 * keeps the state in the store, starts, freezes, thaws and destroys sandboxes through the
 * runtime on the loop's worker threads, arms each sandbox's deadline, and holds one agent per
 * running sandbox (its connection closed while the sandbox is idle: docs/design/density.md). A
 * paused sandbox is frozen in memory (cgroup freezer): its deadline clock stops, and nothing is
 * sent to its agent until it is resumed. On open it reconciles with the store: sandboxes whose
 * warren-init still runs are adopted again (paused ones stay frozen, their agent connected at
 * resume; one whose create was cut short if its warren-init answers), the others are torn down
 * completely and marked stopped (or error, for a create cut short) with a reason; a build's step
 * sandboxes go with their records. It knows no HTTP.
 *
 * All functions run on the loop thread. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "../proto/proto.h"
#include "../store/store.h"
#include "../util/err.h"
#include "../util/inet.h"
#include "webhooks.h"

struct wr_agent;
struct wr_runtime;
struct wr_space;
struct wr_manager;
struct wr_live_sb; /* a sandbox in the manager's table (core_int.h) */
struct wr_proc;    /* a process started through the API */

/* Networking (src/core/net.c, docs/networking.md). */
struct wr_net_config {
    bool enabled;                /* false: every sandbox has loopback only (--net-pool none) */
    struct wr_cidr4 pool;        /* slot i: host end pool+2i, sandbox pool+2i+1 (--net-pool) */
    const char *table;           /* the nftables table, and the slots' directory (--net-table) */
    bool default_internet;       /* a create that does not say (--net-default) */
    const struct wr_cidr4 *deny; /* never reachable, besides the built-in list (--net-deny) */
    size_t n_deny;
    const char *const *dns_upstreams; /* "ADDR" or "ADDR:PORT"; none: /etc/resolv.conf's */
    size_t n_dns_upstreams;
    uint32_t max_connections; /* concurrent egress connections per sandbox; 0: 2500 */
    uint32_t ready;           /* slots kept made ahead of creates; 0: 16 */
    uint32_t children;        /* of them, with a sandbox child pre-cloned into them (0: none) */
    const char *run_dir;      /* where slots are held (<run_dir>/net/<table>/) */
};

/* A pool of warm sandboxes: this many of the template (a directory or shared template). */
struct wr_warm_pool_cfg {
    const char *template_name;
    uint32_t target;
};
#define WR_WARM_POOLS_MAX 16

struct wr_manager_config {
    uv_loop_t *loop;
    struct wr_store *store;
    struct wr_runtime *rt;
    struct wr_images *images;   /* images, the layer store and writable layers (images.h) */
    struct wr_space *space;     /* the state filesystem's space (space.h); NULL: unchecked */
    const char *volumes_dir;    /* <dir>/<volume id>/data: the volumes' files */
    uint32_t default_timeout_s; /* 0: 300 */
    uint32_t max_timeout_s;     /* 0: 86400 */
    uint32_t max_sandboxes;     /* 0: WR_UID_SLOTS (runtime.h) */
    /* The host's process exits (src/runtime/exits.h; the manager does not own it), where a
     * running sandbox's end is seen; NULL: a pidfd per sandbox, held by the daemon. */
    struct wr_exits *exits;
    /* An idle sandbox's agent connection is closed after agent_idle_ms (0: 10 s) and opened
     * again by the next request; with more than agent_crowd of them open (0: none), at once. */
    uint32_t agent_idle_ms, agent_crowd;
    uint64_t max_memory_bytes;     /* committed memory limit; 0: RAM x memory_overcommit */
    double memory_overcommit;      /* 0: WR_MEMORY_OVERCOMMIT (memory.h) */
    uint64_t memory_reserve_bytes; /* MemAvailable kept free by admission; 0: the default */
    uint32_t default_cpu_millis;   /* 0: 1000 */
    uint64_t default_memory_bytes; /* 0: 512 MiB */
    uint32_t pids_max;             /* per sandbox; 0: 4096 */
    /* Where the CDI specs of the host's devices are (core/cdi.h): colon-separated absolute
     * directories, the later winning; NULL or "": no devices. */
    const char *cdi_spec_dirs;
    /* Warm sandboxes (warm.c): this many of the default template kept started ahead of
     * creates (0: none), with their markers in warm_dir (required if warm > 0). */
    uint32_t warm;
    const char *warm_dir;
    /* More pools of warm sandboxes, one per template (warrend --warm NAME=N): a pool for
     * "base" here replaces `warm`. A template with a start command has its warm sandboxes run
     * it, and pass its readiness check, before a create can take one. */
    const struct wr_warm_pool_cfg *warm_pools;
    size_t n_warm_pools;
    struct wr_net_config net;
    uint32_t usage_interval_ms; /* the ledger closes running intervals this often; 0: 60000 */
    bool no_ledger;             /* keep no usage ledger (--metering off): nothing is written */
    uint32_t storage_period_ms; /* the storage sample's period; 0: an hour */
    /* Budgets (budget.h): what a billed vCPU-second is ("allocated", "measured", "max"; NULL:
     * allocated), and the prices of a vCPU-second and of a GiB-second of memory, in currency
     * (a name for display, e.g. "USD"; NULL: none). */
    const char *billed_seconds;
    double price_vcpu_second, price_gib_second;
    const char *currency;
    struct wr_webhooks_config webhooks; /* webhooks.h */
    /* The isolation backends a create may ask for (warrend --runtimes): bit 1u << b of each
     * enum wr_backend b (src/runtime/runtime.h) allowed; 0: every one. default_runtime: the
     * enum wr_backend of a create that names none and whose template names none. */
    unsigned runtimes;
    unsigned default_runtime;
};

int wr_manager_open(const struct wr_manager_config *cfg, struct wr_manager **out,
                    struct wr_err *err);

/* The warm pools (GET /v1/warm-pools): each template's target and how many are ready to be
 * taken now (started, and past their start command's readiness check). */
struct wr_warm_pool_info {
    const char *template_name; /* valid until the next call on the loop */
    uint32_t target;
    uint32_t ready;
};
/* Fills at most cap entries of out, in the order the pools were configured; returns how many
 * pools there are. */
size_t wr_manager_warm_pools(const struct wr_manager *m, struct wr_warm_pool_info *out, size_t cap);
/* What this host holds and may still take (a node's /node/info, docs/deploy.md): sandboxes in
 * memory and the most there may be, their committed memory and its limit. */
struct wr_manager_capacity {
    uint64_t sandboxes, sandboxes_max;
    uint64_t memory_committed, memory_max;
};
void wr_manager_capacity(const struct wr_manager *m, struct wr_manager_capacity *out);
/* Stop managing: close agents and timers. Sandboxes keep running (they outlive the daemon);
 * warm sandboxes, which no create has taken, are destroyed. */
void wr_manager_close(struct wr_manager *m);

/* A volume to mount in a new sandbox; at most WR_MAX_VOLUMES per sandbox. */
#define WR_MAX_VOLUMES 16
struct wr_volume_mount {
    const char *name; /* the team's volume */
    const char *path; /* absolute path inside the sandbox (wr_mount_target_check) */
    bool readonly;
};

/* A network asked for at create, or a replacement of a sandbox's policy (PUT). Entries of
 * allow_out: an IPv4 address, a CIDR block, a name or "*.name"; of deny_out: addresses and blocks
 * only. Validated by core (E2B's rules and texts): WR_EINVAL names the bad entry. */
struct wr_net_req {
    int enabled;  /* a slot of its own (1), loopback only (0), -1: a slot if the request gives a
                   * network or the daemon's default is internet on */
    int internet; /* -1: the daemon's default (at create; a replacement: on) */
    const char *const *allow_out;
    size_t n_allow_out;
    const char *const *deny_out;
    size_t n_deny_out;
    uint32_t max_connections; /* 0: the daemon's */
    int ports_public;         /* -1: default (public); 0: requests need the traffic token */
    const char *mask_host;    /* Host sent to its ports ("${PORT}" replaced), or NULL */
};

struct wr_create_req {
    const char *team;
    const char *template_name;             /* NULL: "base" */
    uint32_t cpu_millis;                   /* 0: default */
    uint64_t memory_bytes;                 /* 0: default */
    uint32_t timeout_s;                    /* 0: default */
    const char *env_json;                  /* JSON object of strings, or NULL */
    const char *metadata_json;             /* JSON object of strings, or NULL */
    const char *idem_key;                  /* or NULL */
    enum wr_sb_on_timeout on_timeout;      /* at the deadline: kill, or pause (in memory) */
    const struct wr_volume_mount *volumes; /* of the team; at most WR_MAX_VOLUMES */
    /* A disk limit for its writable layer (0: none); WR_EUNSUPPORTED where the state
     * directory's filesystem cannot enforce one. */
    uint64_t disk_bytes;
    size_t n_volumes;
    /* Its network; NULL: the daemon's default. */
    const struct wr_net_req *net;
    /* Internal (builds): start from this image ({"layers": [...], "config": {...}}) instead of
     * resolving template_name, which is then only recorded. */
    const char *image_json;
    /* Internal (builds): a host directory mounted read-only at WR_BUILD_CONTEXT. */
    const char *context_dir;
    /* Its isolation backend, "ns" or "gvisor"; NULL: its template's config's "runtime", else
     * "ns". WR_EINVAL for another name or one the daemon does not allow (--runtimes);
     * WR_EUNSUPPORTED where the backend cannot run (no runsc), or for what it cannot do
     * (gvisor: devices). */
    const char *runtime;
    /* Host devices for it alone while it lives, by CDI name ("vendor.com/class=name", GET
     * /v1/devices), at most WR_CDI_MAX_DEVICES: WR_EINVAL for an unknown or refused one,
     * WR_ELIMIT for one another sandbox holds. */
    const char *const *devices;
    size_t n_devices;
    /* Internal (forks on gvisor): continue the processes of this checkpoint (runtime.h,
     * wr_sandbox_spec.restore_image) instead of starting afresh; the template's start command
     * does not run again. */
    const char *restore_image;
    /* Its Compose services as wr_manager_compose_prepare resolved them (with image_json, the
     * image it answered), or NULL: recorded, and started by warren-init once it is up. */
    const char *compose_json;
};

/* A sandbox's Compose services as they are now: [{name, image, ports, state, pid, restarts,
 * exit_code, signal, message}] in start order ("state" as warren-init names it: waiting,
 * starting, running, healthy, unhealthy, restarting, exited, failed), [] for a sandbox of none;
 * services (a borrowed reference) or err. */
typedef void (*wr_manager_services_cb)(void *ctx, json_t *services, const struct wr_err *err);
void wr_manager_services(struct wr_live_sb *sb, wr_manager_services_cb cb, void *ctx);

/* Where a Compose service's root is in its sandbox: WR_SERVICES_DIR "/<name>"; and what it
 * writes (stdout and stderr, and warren-init's lines about it): WR_SERVICES_LOGS "/<name>.log". */
#define WR_SERVICES_DIR  "/.warren/services"
#define WR_SERVICES_LOGS "/.warren/logs"
/* And where its named volumes are: directories of the sandbox, or its team's Warren volumes (a
 * Compose file's `external: true`) mounted there. */
#define WR_COMPOSE_VOLUMES "/.warren/volumes"
/* Whether sb's record has a Compose service of that name. */
bool wr_manager_sandbox_has_service(struct wr_manager *m, struct wr_live_sb *sb, const char *name);
/* image_json and compose_json (the caller's to free) or err. */
typedef void (*wr_manager_compose_cb)(void *ctx, char *image_json, char *compose_json,
                                      const struct wr_err *err);
/* Prepare a create of team's from a Compose spec (core/compose.h, wr_compose_parse) on the
 * image template_name (NULL: "base"): every service's image is resolved (WR_ENOTFOUND naming
 * it) and its root made into layers below WR_SERVICES_DIR/<name> (cached: the first create of
 * an image under a name copies it, on a worker), the context's files (an object from relative
 * path to content, or NULL) into a layer at /.warren/context. An image that is no template or
 * snapshot of the team's but an OCI reference (with a `/`) is pulled first (with pull's options;
 * NULL: none) into the team's template `pulled-<16 hex of its hash>`, which later creates find. cb
 * gets the image to create the sandbox from (wr_create_req.image_json) and the resolved services
 * (.compose_json): each service with its root, argv, env, working_dir and user from its image's
 * config under the file's. cb may run before this returns (an early error). */
struct wr_compose_pull {
    bool admin;    /* the caller's an admin key: a registry at a private address */
    bool insecure; /* plain http */
    const char *username, *password; /* or NULL */
};
void wr_manager_compose_prepare(struct wr_manager *m, const char *team, const char *template_name,
                                const json_t *spec, const json_t *context,
                                const struct wr_compose_pull *pull, wr_manager_compose_cb cb,
                                void *ctx);
/* The host's devices (core/cdi.h), as [{name, kind, in_use, refused?}]: a new reference. */
#define WR_CDI_MAX_DEVICES 16 /* per sandbox */
json_t *wr_manager_devices(struct wr_manager *m);
/* Read the CDI specs again (cdi.h, wr_cdi_reload): warrend does on SIGHUP. */
void wr_manager_reload_devices(struct wr_manager *m);

/* Under /dev/shm, a tmpfs of the sandbox's own: the mount point is not captured into the step's
 * layer (/tmp is the writable layer's). */
#define WR_BUILD_CONTEXT "/dev/shm/.warren-build-context"

/* Called with the sandbox's record (owned by the callee after the call: fini it) or an error.
 * existed: an idempotency key matched an earlier create. retry_after_s: set with WR_ELIMIT.
 * With an idempotency key: the earlier create's sandbox, in its state now (one still being
 * made: once it is, or that create's error); one in error releases the key and a new sandbox
 * is made for it. */
typedef void (*wr_manager_create_cb)(void *ctx, struct wr_sandbox_rec *rec, bool existed,
                                     const struct wr_err *err, unsigned retry_after_s);
/* Start creating; cb is always called (possibly before this returns, for early errors). */
void wr_manager_create(struct wr_manager *m, const struct wr_create_req *req,
                       wr_manager_create_cb cb, void *ctx);

/* Kill and forget a sandbox of team (NULL: any), in any state: everything it holds on the host
 * goes, then its record. One being created, paused or resumed goes once that is done (a create
 * it interrupts fails with WR_ECONFLICT). cb(ctx, err) when it is gone. */
void wr_manager_delete(struct wr_manager *m, const char *team, const char *id,
                       void (*cb)(void *ctx, const struct wr_err *err), void *ctx);

/* Records from the store (team NULL: any). */
int wr_manager_get(struct wr_manager *m, const char *team, const char *id,
                   struct wr_sandbox_rec *rec, struct wr_err *err);
/* The records that match f, in seq order (see wr_store_sandbox_list): *out is an array of *n
 * records (fini each, free the array). */
int wr_manager_list(struct wr_manager *m, const struct wr_sandbox_filter *f,
                    struct wr_sandbox_rec **out, size_t *n, struct wr_err *err);
/* Deadline = now + timeout_s (bounded by the maximum) for a running sandbox; for a paused one,
 * the time it will have left when resumed. Returns the updated record. */
int wr_manager_set_timeout(struct wr_manager *m, const char *team, const char *id,
                           uint32_t timeout_s, struct wr_sandbox_rec *rec, struct wr_err *err);

/* As wr_manager_set_timeout, but never shortens (E2B's keep-alive): the deadline becomes
 * now + timeout_s only if that is later than it is; a paused sandbox's time left only grows.
 * timeout_s 0 changes nothing. WR_EINVAL above the maximum. Returns the record. */
int wr_manager_extend_timeout(struct wr_manager *m, const char *team, const char *id,
                              uint32_t timeout_s, struct wr_sandbox_rec *rec, struct wr_err *err);

/* Called with the sandbox's record after the change (valid during the call), or an error. */
typedef void (*wr_manager_state_cb)(void *ctx, const struct wr_sandbox_rec *rec,
                                    const struct wr_err *err);
/* Pause a running sandbox of team (NULL: any): freeze every process, stop the deadline clock
 * (keeping its time left) and its API processes' exec timeouts. `mode` says how the pause keeps
 * it: in memory (frozen; its processes go on at resume), or on disk (its files are kept, its
 * processes end and its memory is freed; resume starts a fresh warren-init on the same files,
 * and it does not count against the host's limits meanwhile); NONE is memory. WR_ENOTFOUND;
 * WR_ECONFLICT if it is not running (already paused, being created, paused, resumed or deleted,
 * stopped). cb is always called, possibly before this returns. */
void wr_manager_pause(struct wr_manager *m, const char *team, const char *id,
                      enum wr_sb_paused_mode mode, wr_manager_state_cb cb, void *ctx);
/* Resume a paused sandbox: thaw it; deadline = now + timeout_s, or (timeout_s 0) + the time it
 * had left (a sandbox paused by its deadline has its create timeout again). WR_ECONFLICT if it
 * is not paused; WR_EINVAL for a timeout above the maximum; WR_ELIMIT if a sandbox paused to
 * disk does not fit in the host's limits now. */
void wr_manager_resume(struct wr_manager *m, const char *team, const char *id, uint32_t timeout_s,
                       wr_manager_state_cb cb, void *ctx);

/* ---- snapshots and forks (src/core/snapshot.c) ---------------------------------------------- */

struct wr_snapshot_info {
    const char *capture; /* "btrfs-snapshot", "reflink-copy" or "copy" */
    double freeze_ms;    /* how long the sandbox's processes were frozen (0 if it was paused) */
    double capture_ms;   /* of which the capture itself */
    double total_ms;     /* freeze, capture, digest and install */
    /* The layer the capture added ("sha256:..."), or NULL: the sandbox had changed nothing,
     * and the snapshot is its image as it was. */
    const char *layer;
    /* A fork of a running gvisor sandbox: the copies continue its processes and memory (a
     * checkpoint of it); freeze_ms is then its whole stop (checkpoint, capture, restore). */
    bool processes_kept;
};
/* Called with the snapshot's record and timings (valid during the call), or an error. */
typedef void (*wr_manager_snapshot_cb)(void *ctx, const struct wr_image_rec *snap,
                                       const struct wr_snapshot_info *info,
                                       const struct wr_err *err);
/* Capture the files of sandbox `id` of team (NULL: any) as a snapshot named name (NULL: none):
 * its processes are frozen while its writable layer is captured (a paused sandbox stays as it
 * is), then thawed; the layer goes into the store and the snapshot is recorded as the
 * sandbox's image plus that layer, with its env. WR_ENOTFOUND; WR_ECONFLICT if it is busy,
 * stopped, or the name is taken; WR_EINVAL for a bad name. */
void wr_manager_snapshot(struct wr_manager *m, const char *team, const char *id, const char *name,
                         wr_manager_snapshot_cb cb, void *ctx);

#define WR_FORK_MAX 100
struct wr_fork_req {
    const char *team; /* NULL: any */
    const char *id;
    uint32_t count;            /* 1 to WR_FORK_MAX */
    uint32_t timeout_s;        /* 0: the parent's create timeout */
    const char *metadata_json; /* NULL: the parent's */
};
/* recs: the copies made (owned by the callee: valid during the call); errs: why the others
 * were not (e.g. the host's limits); err: the whole fork failed (nothing was made). */
typedef void (*wr_manager_fork_cb)(void *ctx, struct wr_sandbox_rec *recs, size_t n,
                                   const struct wr_err *errs, size_t nerrs,
                                   const struct wr_snapshot_info *info, const struct wr_err *err);
/* Fork a sandbox into count copies: a snapshot (the parent frozen only while its writable layer
 * is captured), then count creates from it with the parent's limits, config and env. The
 * snapshot's record is dropped once the copies are made; they hold its layer. */
void wr_manager_fork(struct wr_manager *m, const struct wr_fork_req *req, wr_manager_fork_cb cb,
                     void *ctx);

/* ---- filesystem diff (src/core/diff.c) ------------------------------------------------------ */

/* One side's entry of a change (src/runtime/ovldiff.h): type "file", "dir", "symlink" or "other";
 * mode the permission bits; size a file's bytes or a symlink target's length; ids sandbox-side. */
struct wr_diff_entry {
    const char *type;
    uint64_t size;
    unsigned mode;
    uint32_t uid, gid;
};
struct wr_diff_change {
    const char *path;         /* "/etc/motd" */
    const char *change;       /* "added", "modified", "deleted" or "renamed" */
    const char *from;         /* renamed: the old path; else NULL */
    struct wr_diff_entry now; /* the new tree's entry (deleted: the old tree's) */
    struct wr_diff_entry old; /* modified, renamed (has_old) */
    bool has_old;
};
struct wr_diff_result {
    const char *sandbox_id;
    const char *against_kind; /* "template", "snapshot" or "sandbox" */
    const char *against_name;
    /* A listing (content false): the changes, sorted by path. */
    const struct wr_diff_change *changes;
    size_t n;
    bool truncated;
    /* One file's content (content true): change as above, binary / too_large (text NULL), or
     * the unified diff in text ("" when only its metadata changed). */
    bool content;
    struct wr_diff_change file;
    bool binary, too_large;
    const char *text;
};
struct wr_diff_req {
    const char *team; /* NULL: any */
    const char *id;
    const char *against; /* NULL: the sandbox's image; else a snapshot, sandbox or template */
    const char *path;    /* NULL: everything; else an absolute path (a scope, or content's file) */
    bool content;        /* the unified diff of path (needs path) */
    size_t limit;        /* most changes listed (0: 10000) */
};
/* What sandbox id (running or paused) changed against its image, or against another image or
 * sandbox that shares its bottom layer (the walk runs on a worker): cb(ctx, result, NULL), the
 * result valid during the call, or cb(ctx, NULL, err). WR_ENOTFOUND for the sandbox, for an
 * unknown `against`, and (content) for a path in neither tree or unchanged; WR_ECONFLICT if a
 * sandbox's files are gone (stopped, being deleted) or not there yet (being created), or the two
 * share no layer; WR_EINVAL for a bad path or a
 * directory's content. */
typedef void (*wr_manager_diff_cb)(void *ctx, const struct wr_diff_result *r,
                                   const struct wr_err *err);
void wr_manager_diff(struct wr_manager *m, const struct wr_diff_req *req, wr_manager_diff_cb cb,
                     void *ctx);

/* ---- template builds (src/core/build.c) ------------------------------------------------------ */

struct wr_build_req {
    const char *team;
    const char *name;            /* the template to make */
    const char *dockerfile;      /* the Dockerfile subset (dockerfile.h), or NULL: in the context */
    const char *dockerfile_path; /* with no dockerfile: its path in the context ("Dockerfile") */
    bool admin;                  /* the caller's key is an admin's (FROM may pull from private
                                  * addresses) */
    /* The build context for COPY: a tar archive (plain, gzip or zstd), removed when the build
     * ends; or NULL (COPY then fails). */
    const char *context_tar;
    bool replace;            /* replace a template of that name (else WR_ECONFLICT) */
    bool shared;             /* a shared template (every team's; the caller checked: an admin) */
    uint32_t step_timeout_s; /* 0: 3600 */
    uint32_t cpu_millis;     /* of each step's sandbox; 0: default */
    uint64_t memory_bytes;   /* 0: default */
    /* The template's default isolation backend (its config's "runtime"; checked as
     * wr_manager_runtime_allowed), or NULL: the base image's. The steps run on the daemon's
     * default backend whatever it says (they need a network: gvisor has none yet). */
    const char *runtime;
};
/* Where a build failed: step is 1-based (0: before any step ran), line in the Dockerfile;
 * exit_code and signal of the step's command when it ran and failed. */
struct wr_build_fail {
    unsigned step, line;
    int64_t exit_code, signal;
};
struct wr_build_events {
    /* Step i (0-based) of n, at line, starts; cached: its layer comes from the cache. */
    void (*on_step)(void *ctx, size_t i, size_t n, unsigned line, const char *text, bool cached);
    /* Output of the step's command (stream 1 stdout, 2 stderr). */
    void (*on_output)(void *ctx, int stream, const uint8_t *p, size_t len);
    /* The end: the template made (valid during the call), or err (fail set when a step or a
     * line is to blame). Called once; ctx is not used after it. */
    void (*on_done)(void *ctx, const struct wr_image_rec *tpl, const struct wr_build_fail *fail,
                    const struct wr_err *err);
};
/* Build a template: the name is claimed (wr_images_claim) at the start and again when the
 * template is recorded; FROM resolves like a create; RUN, WORKDIR and COPY run in a sandbox of
 * the image so far (cached by a key chained over the team, the base image and every step), and
 * add a layer when they changed something; ENV and USER change its config. The events may come
 * before this returns (a bad name, a parse error, a fully cached build). */
void wr_manager_build(struct wr_manager *m, const struct wr_build_req *req,
                      const struct wr_build_events *ev, void *ctx);

/* The running sandbox `id` of team (NULL: any): WR_ENOTFOUND, or WR_ECONFLICT if it is not
 * running (a paused one: "sandbox `id` is paused"). The pointer is valid until the loop next
 * runs a delete or a death of it; take wr_live_sb_ref for longer. */
struct wr_live_sb *wr_manager_find(struct wr_manager *m, const char *team, const char *id,
                                   struct wr_err *err);
void wr_live_sb_ref(struct wr_live_sb *sb);
void wr_live_sb_unref(struct wr_live_sb *sb);
bool wr_live_sb_alive(const struct wr_live_sb *sb);
const char *wr_live_sb_id(const struct wr_live_sb *sb);
/* The control agent (ready once the sandbox runs), and the path for extra connections. */
struct wr_agent *wr_live_sb_agent(struct wr_live_sb *sb);
const char *wr_live_sb_ctl_path(const struct wr_live_sb *sb);
uv_loop_t *wr_live_sb_loop(const struct wr_live_sb *sb);

/* ---- volumes -------------------------------------------------------------------------------- */

/* Whether name can name a volume: 1-64 of [A-Za-z0-9_.-], not starting with `.` or `-`. */
bool wr_volume_name_valid(const char *name);

/* Volumes of a team (NULL: every team), by name (see wr_store_volume_list). */
int wr_manager_volume_list(struct wr_manager *m, const char *team, struct wr_volume_rec **out,
                           size_t *n, struct wr_err *err);
/* Make an empty volume of team: a new directory, then its record (*rec, fini it). WR_EINVAL for
 * a bad name, WR_ECONFLICT if the team has one of that name. */
int wr_manager_volume_create(struct wr_manager *m, const char *team, const char *name,
                             struct wr_volume_rec *rec, struct wr_err *err);
/* Delete team's volume and all its files. WR_ENOTFOUND; WR_ECONFLICT (naming the sandbox) while
 * a sandbox that is creating, running or paused mounts it. The record goes at once (the name is
 * free again); the files are removed on a worker thread, and cb(ctx, err) is called once they
 * are gone. cb is always called, possibly before this returns. */
void wr_manager_volume_delete(struct wr_manager *m, const char *team, const char *name,
                              void (*cb)(void *ctx, const struct wr_err *err), void *ctx);
/* Team's volume with the disk space its files use (measured on a worker thread): cb(ctx, rec,
 * bytes, NULL) or cb(ctx, NULL, 0, err); rec is valid during the call. */
typedef void (*wr_manager_volume_cb)(void *ctx, const struct wr_volume_rec *rec, uint64_t bytes,
                                     const struct wr_err *err);
void wr_manager_volume_get(struct wr_manager *m, const char *team, const char *name,
                           wr_manager_volume_cb cb, void *ctx);

/* Resource use of a sandbox over time: samples taken every 5 s while it runs (the last 10
 * minutes are kept), plus one taken now if it runs. cpu_pct is the share of its CPU limit used
 * since the previous sample. Samples between from_ms and to_ms (wall clock; 0: unbounded) go
 * into out (at most max); returns how many, or -1 with err (WR_ENOTFOUND). */
struct wr_usage {
    int64_t at_ms;
    double cpu_pct;
    uint32_t cpu_count;
    uint64_t mem_bytes, mem_limit;
};
#define WR_USAGE_MAX 128 /* room for every sample wr_manager_metrics can return */
int wr_manager_metrics(struct wr_manager *m, const char *team, const char *id, int64_t from_ms,
                       int64_t to_ms, struct wr_usage *out, size_t max, struct wr_err *err);

/* Disk use of a sandbox's writable layer (measured on a worker): cb(ctx, used, limit, method,
 * NULL) with its limit (0: none) and how it is enforced (NULL if none), or cb(..., err).
 * WR_ENOTFOUND; WR_ECONFLICT for a stopped sandbox (its files are gone). */
typedef void (*wr_manager_disk_cb)(void *ctx, uint64_t used, uint64_t limit, const char *method,
                                   const struct wr_err *err);
void wr_manager_disk(struct wr_manager *m, const char *team, const char *id, wr_manager_disk_cb cb,
                     void *ctx);

/* What team's sandboxes hold of the host's limits now: how many count (creating, running,
 * paused in memory; not paused to disk) and the sum of their memory limits. A walk of the table,
 * for creates, not for every request. */
void wr_manager_team_usage(const struct wr_manager *m, const char *team, uint32_t *sandboxes,
                           uint64_t *memory_bytes);
/* The memory limit of a sandbox created without one. */
uint64_t wr_manager_default_memory(const struct wr_manager *m);
/* Whether a create may name the isolation backend `name` here: 0, or WR_EINVAL naming the
 * choices, or saying that the daemon does not allow it (--runtimes). Whether it can run (runsc
 * found) is the create's to find out. */
int wr_manager_runtime_allowed(const struct wr_manager *m, const char *name, struct wr_err *err);
/* The backend of a create that names none and whose template names none ("ns", unless the
 * daemon does not allow it); and the names of the backends a create may ask for here that can
 * run (at most cap into names; returns how many there are). */
const char *wr_manager_default_runtime(const struct wr_manager *m);
size_t wr_manager_runtimes(const struct wr_manager *m, const char **names, size_t cap);
const char *wr_manager_cgroup_version(const struct wr_manager *m);

/* ---- processes (src/core/procs.c) ---------------------------------------------------------- */

/* Someone who wants a process's events: the exec response, an attach stream, a terminal. */
struct wr_proc_sub {
    /* Deliver output. Return true if the subscriber is congested: the process's output is then
     * not acknowledged to warren-init (so the process slows down) until wr_proc_sub_drained. */
    bool (*on_output)(struct wr_proc_sub *sub, int stream, const uint8_t *p, size_t n);
    /* The process ended (after all output). timed_out: killed by its exec timeout. */
    void (*on_exit)(struct wr_proc_sub *sub, const struct wr_exit *ex, bool timed_out);
    /* The sandbox or its agent went away before the process's end. */
    void (*on_lost)(struct wr_proc_sub *sub, const struct wr_err *err);
    /* private */
    struct wr_proc *proc;
    struct wr_proc_sub *next;
    bool congested;
};

/* Spawn through the sandbox's agent; cb(ctx, proc, err) once started (proc owned by the
 * sandbox; NULL on error). timeout_ms > 0 kills it (SIGKILL) after that long. */
void wr_live_sb_spawn(struct wr_live_sb *sb, const struct wr_spawn *sp, uint64_t timeout_ms,
                      void (*cb)(void *ctx, struct wr_proc *proc, const struct wr_err *err),
                      void *ctx);
/* A command's own limits and accounting (docs/usage.md, "Per-command usage"): with cgroup
 * set, it runs in a cgroup of its own under the sandbox's, which it joins before it runs any
 * of its code, limited to memory_bytes and cpu_millis (0: the sandbox's), and its exit's usage
 * is that cgroup's (from_cgroup); the cgroup is removed at its end. Limits above the
 * sandbox's are refused (WR_EINVAL). */
struct wr_cmd_limits {
    bool cgroup;
    uint64_t memory_bytes;
    uint32_t cpu_millis;
};
void wr_live_sb_spawn_limited(struct wr_live_sb *sb, const struct wr_spawn *sp, uint64_t timeout_ms,
                              const struct wr_cmd_limits *lim,
                              void (*cb)(void *ctx, struct wr_proc *proc, const struct wr_err *err),
                              void *ctx);
/* The sandbox's own limits (0: none). */
void wr_live_sb_limits(const struct wr_live_sb *sb, uint32_t *cpu_millis, uint64_t *memory_bytes);
struct wr_proc *wr_live_sb_proc(struct wr_live_sb *sb, uint32_t id);
/* Procs in id order: call fn for each. */
void wr_live_sb_procs_foreach(struct wr_live_sb *sb, void (*fn)(struct wr_proc *p, void *ctx),
                              void *ctx);

/* Subscribe. With replay, the output buffered since the process started (the most recent
 * WR_PROC_REPLAY bytes) is delivered first. An ended process gets on_exit right away. */
#define WR_PROC_REPLAY (1u << 20)
void wr_proc_subscribe(struct wr_proc *p, struct wr_proc_sub *sub, bool replay);
void wr_proc_unsubscribe(struct wr_proc_sub *sub);
void wr_proc_sub_drained(struct wr_proc_sub *sub);

uint32_t wr_proc_id(const struct wr_proc *p);
int64_t wr_proc_os_pid(const struct wr_proc *p);
char *const *wr_proc_argv(const struct wr_proc *p);
bool wr_proc_pty(const struct wr_proc *p);
/* What the daemon started it as: "start" for a template's start command, or NULL. */
const char *wr_proc_tag(const struct wr_proc *p);
bool wr_proc_running(const struct wr_proc *p);
const struct wr_exit *wr_proc_exit(const struct wr_proc *p);

void wr_proc_stdin(struct wr_proc *p, const void *data, size_t n);
/* Bytes queued to the sandbox's control connection and not yet written (0 without one): what a
 * writer of stdin paces itself by. */
size_t wr_live_sb_pending(struct wr_live_sb *sb);
/* Requests answered through cb(ctx, err) (err NULL on success). */
void wr_proc_stdin_close(struct wr_proc *p, void (*cb)(void *ctx, const struct wr_err *err),
                         void *ctx);
void wr_proc_signal(struct wr_proc *p, int sig, void (*cb)(void *ctx, const struct wr_err *err),
                    void *ctx);
void wr_proc_resize(struct wr_proc *p, uint16_t rows, uint16_t cols,
                    void (*cb)(void *ctx, const struct wr_err *err), void *ctx);
/* Forget an ended process (WR_ECONFLICT while it runs). */
int wr_proc_release(struct wr_proc *p, struct wr_err *err);

/* ---- networking (src/core/net.c) --------------------------------------------------------------
 */

/* Replace a running or paused sandbox's egress policy (PUT .../network): the whole policy, as at
 * create (what the request leaves out is cleared; internet -1 means on). Open connections that
 * the new policy denies are not cut. WR_ENOTFOUND; WR_ECONFLICT for a sandbox made without a
 * network of its own (loopback only) or one that is not running or paused; WR_EINVAL for a bad
 * entry. Returns the record after the change. */
int wr_manager_set_network(struct wr_manager *m, const char *team, const char *id,
                           const struct wr_net_req *req, struct wr_sandbox_rec *rec,
                           struct wr_err *err);

/* The NFLOG group the nftables table logs refused connections to (for the egress log), or 0
 * with networking off. */
uint16_t wr_manager_net_log_group(const struct wr_manager *m);

struct wr_net_stats {
    uint64_t packets_out, bytes_out;         /* accepted from the sandbox */
    uint64_t packets_dropped, bytes_dropped; /* denied by its policy or the always-denied list */
    uint64_t packets_in, bytes_in;           /* forwarded to it (the answers to the above) */
};
/* The counters of a sandbox's traffic (WR_ECONFLICT without a network of its own); they start
 * at 0 with each start of the daemon. */
int wr_manager_network_stats(struct wr_manager *m, const char *team, const char *id,
                             struct wr_net_stats *st, struct wr_err *err);

/* ---- the usage ledger (usage.c, docs/usage.md) ---------------------------------------------- */

/* The ledger's intervals of team (NULL: every team) starting in [from_ms, to_ms) (0: no bound),
 * grouped (wr_store_usage_sum). Running intervals still open are not in it. */
int wr_manager_usage(struct wr_manager *m, const char *team, int64_t from_ms, int64_t to_ms,
                     enum wr_usage_group g, struct wr_usage_sum **out, size_t *n,
                     struct wr_err *err);
/* The storage samples of team (NULL: every team) in [from_ms, to_ms) (wr_store_storage_list). */
int wr_manager_storage(struct wr_manager *m, const char *team, int64_t from_ms, int64_t to_ms,
                       struct wr_usage_storage **out, size_t *n, struct wr_err *err);

/* Whether sandbox id (paused to disk, gvisor) has a checkpoint of its processes that its
 * resume continues (processes_kept). One stat; any thread. */
bool wr_manager_sandbox_checkpointed(struct wr_manager *m, const char *id);
