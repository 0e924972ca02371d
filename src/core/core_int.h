/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the files of src/core/ that make up the manager: manager.c, lifecycle.c,
 * create.c, pause.c, usage.c, reconcile.c, procs.c, volumes.c, warm.c, snapshot.c, events.c. */
#pragma once

#include <jansson.h>

#include "../runtime/runtime.h"
#include "agent.h"
#include "budget.h"
#include "manager.h"

struct wr_sandbox;

#define NBUCKETS         4096
#define TEAM_USE_BUCKETS 256
struct wr_team_use {
    struct wr_team_use *next;
    char *team;
    uint32_t sandboxes;
    uint64_t memory_bytes;
};

struct wr_manager {
    struct wr_manager_config cfg;
    uv_loop_t *loop;
    struct wr_live_sb *buckets[NBUCKETS];
    uint64_t count;     /* sandboxes in memory: creating or running */
    uint64_t committed; /* their memory limits */
    unsigned inflight;  /* works queued on the pool: m is freed after the last one's done */
    bool closing;
    uv_timer_t *sampler;      /* every WR_USAGE_PERIOD_MS: a usage sample of each running sandbox */
    struct wr_warm *warm;     /* warm.c; NULL without --warm */
    struct wr_net *net;       /* net.c; NULL with networking off */
    struct wr_cdi *cdi;       /* cdi.c: the host's devices and who holds them; never NULL */
    struct wr_netlog *netlog; /* netlog.c: the egress log's sink, or NULL */
    struct wr_events *events; /* events.c: lifecycle events; NULL while closing */
    struct wr_webhooks *webhooks; /* webhooks.c: their deliveries; NULL while closing */
    /* The usage ledger (usage.c): every usage_interval_ms the open intervals are closed, at
     * most WR_LEDGER_BATCH sandboxes per loop turn (ledger_next: the bucket the walk goes on
     * at; ledger_more: the turn after). storage: the storage sample's timer. */
    uv_timer_t *ledger, *ledger_more, *storage;
    unsigned ledger_next;
    bool storage_busy;
    bool sampling;              /* a round of usage samples is being read (usage.c) */
    unsigned sample_round;      /* rounds of the sampler so far */
    struct wr_budgets *budgets; /* budget.c: the teams' running totals; NULL until needed */
    /* Ends of warren-init seen through cfg.exits (lifecycle.c): the watched sandboxes by the
     * host pid of their warren-init. */
    uv_poll_t *exits_poll;
    struct wr_live_sb *by_pid[NBUCKETS];
    /* Adoption after a restart (lifecycle.c): agents connect at most WR_ADOPT_PARALLEL at a
     * time, the others wait in adopt_queue (oldest first, through anext). */
    unsigned adopting;
    struct wr_live_sb *adopt_queue, **adopt_tail;
    /* What each team's counted sandboxes hold (manager.c), for quotas without a walk. */
    struct wr_team_use *teams[TEAM_USE_BUCKETS];
};
#define WR_ADOPT_PARALLEL     128
#define WR_AGENT_IDLE_MS      10000
#define WR_LEDGER_BATCH       64
#define WR_LEDGER_INTERVAL_MS 60000
#define WR_STORAGE_PERIOD_MS  (3600 * 1000)
#define WR_USAGE_PERIOD_MS    5000
#define WR_IDLE_SAMPLE_EVERY  12 /* an idle sandbox's sample: every 12th round (60 s) */

/* A sample of a running sandbox's resource use (see wr_manager_metrics). */
#define WR_USAGE_SAMPLES 120
struct wr_usage_sample {
    int64_t at_ms;   /* wall clock */
    uint64_t cpu_ns; /* cumulative */
    uint64_t mem_bytes;
};

/* A create with the idempotency key of one still being made: it gets that one's outcome. */
struct wr_create_waiter {
    wr_manager_create_cb cb;
    void *ctx;
    struct wr_create_waiter *next;
};

/* A delete that waits for a sandbox that is ending to be gone. */
struct wr_delete_waiter {
    void (*cb)(void *ctx, const struct wr_err *err);
    void *ctx;
    struct wr_delete_waiter *next;
};

/* A managed sandbox's state. wr__live_sb_set_state (lifecycle.c) is the one place it changes; it
 * allows only these transitions. CREATING goes to RUNNING, or (taken back after a restart) to
 * PAUSED or ON_DISK, or to ENDING. RUNNING goes to PAUSED, ON_DISK or ENDING. PAUSED and ON_DISK go
 * back to RUNNING, or to ENDING. ENDING is final. A worker's work on it (busy) runs within a state:
 * the create in CREATING, a freeze or thaw in PAUSED, a pause to disk and a resume from it in
 * ON_DISK, a snapshot in RUNNING or PAUSED, the destroy in ENDING. An end asked for meanwhile
 * waits in pending_end. */
enum live_sb_state {
    LIVE_SB_CREATING, /* a worker starts it; not watched yet */
    LIVE_SB_RUNNING,  /* watched, its deadline armed: requests may use it */
    /* Frozen, or being frozen or thawed: watched, its clock stopped, and nothing may be sent to
     * its agent (a frozen warren-init does not read, so a request would wait for the thaw, or
     * time out wrongly). */
    LIVE_SB_PAUSED,
    LIVE_SB_ON_DISK, /* paused to disk, or going there or back: no processes (rt NULL), its
                      * files kept */
    LIVE_SB_ENDING,  /* being destroyed (or let go at shutdown): no longer watched */
};

/* A sandbox the manager holds in its table, from its create until it is gone (the store's
 * record, struct wr_sandbox_rec, outlives it; the runtime's, struct wr_sandbox, lives only
 * while it has processes). */
struct wr_live_sb {
    struct wr_manager *m;
    struct wr_live_sb *hnext; /* hash chain */
    struct wr_live_sb *pnext; /* by_pid's chain, while pid_indexed */
    struct wr_live_sb *anext; /* adopt_queue, while adopt_queued */
    pid_t init_pid;
    bool pid_indexed, adopt_queued, adopt_counted;
    char *id;
    char *team;
    int refs;
    enum live_sb_state state;
    bool busy;         /* a worker works on it (see enum live_sb_state) */
    bool stopped;      /* ENDING, and its record already says stopped (deadline, init died) */
    bool adopted;      /* taken back after a daemon restart */
    bool relist;       /* its processes came back (a gvisor restore): listed as at adoption */
    bool polling;      /* pidfd_poll is open */
    bool counted;      /* counts in m->count and m->committed (not while on disk) */
    bool store_layers; /* its image has layers of the store (its end may free some) */
    struct wr_delete_waiter *delete_waiters;
    struct wr_create_waiter *create_waiters; /* while being created */
    /* Resource samples, oldest first from (usage_head - usage_n) mod WR_USAGE_SAMPLES. */
    struct wr_usage_sample usage[WR_USAGE_SAMPLES];
    unsigned usage_head, usage_n;
    uint32_t cpu_millis;
    /* Its open interval of the usage ledger (usage.c): from start_ms, running or paused; cpu0
     * and net0 (in0) the cumulative sent (received) counters at its start; memory integrated since
     * (mem_gib_s, up to mem_at_ms, the last reading mem_last) and its peak. seq: the last closed
     * interval's. loaded: the store's last interval was read (at the first open; an adopted sandbox
     * goes on from its end). cpu_last: the last CPU reading (for a close without processes). */
    struct {
        bool open, running, loaded;
        int64_t seq, start_ms, mem_at_ms;
        uint64_t cpu0, net0, in0, cpu_last, mem_last, peak;
        double mem_gib_s;
        char *template_name;
    } led;
    /* Its own budget (budget.c), read from the store once (loaded), and its spend: the billed
     * vCPU-seconds and GiB-seconds of its closed intervals. warned: the soft cap's event was
     * written; due: past the hard cap, to be paused. */
    struct {
        bool loaded, set, warned, due;
        struct wr_budget b;
        double vcpu, gib;
    } bud;
    enum wr_sb_on_timeout on_timeout; /* what its deadline does */
    uint32_t timeout_s;               /* the create timeout, for a resume after a deadline pause */
    int64_t deadline_ms;              /* wall clock, while running */
    int64_t remaining_ms;             /* the deadline's time left, while paused */
    /* An end asked for while busy, run when the worker is done (forget: the record goes, else
     * it says final_state). */
    struct {
        bool due;
        bool forget;
        enum wr_sb_state final_state;
        char *reason;
        void (*cb)(void *ctx, const struct wr_err *err);
        void *ctx;
    } pending_end;
    /* A resume of an adopted sandbox answers once its agent (connected at the thaw) is ready. */
    wr_manager_state_cb resume_cb;
    void *resume_ctx;
    int open_handles;
    uint64_t memory_bytes;
    enum wr_backend backend; /* its isolation backend, as its record says */
    struct wr_sandbox *rt;
    struct wr_agent *agent;
    /* Networking (net.c): its slot in the pool and the sandbox's address there (host byte order),
     * or -1 and 0 for a sandbox with loopback only; its effective egress policy (NULL: none). */
    int32_t net_slot;
    uint32_t net_addr;
    struct wr_net_policy *net;
    /* Its exposed ports (E2B's allowPublicTraffic: false): requests need its traffic token. */
    bool ports_private;
    char *mask_host; /* E2B's maskRequestHost ("${PORT}" replaced), or NULL */
    uv_timer_t deadline;
    uv_poll_t pidfd_poll;
    /* processes started through the API, by id */
    struct wr_proc **procs;
    size_t nprocs, capprocs;
};

/* Watched (RUNNING or PAUSED): its handles are open, requests may hold it. */
static inline bool wr__live_sb_watched(const struct wr_live_sb *sb)
{
    return sb->state == LIVE_SB_RUNNING || sb->state == LIVE_SB_PAUSED;
}
/* Paused, in memory or on disk: nothing may be sent to its agent, its clock is stopped. */
static inline bool wr__live_sb_paused(const struct wr_live_sb *sb)
{
    return sb->state == LIVE_SB_PAUSED || sb->state == LIVE_SB_ON_DISK;
}
/* Being destroyed, or to be once its worker is done. */
static inline bool wr__live_sb_ending(const struct wr_live_sb *sb)
{
    return sb->state == LIVE_SB_ENDING || sb->pending_end.due;
}

int64_t wr__core_now_ms(void);
/* Run work on the loop's pool; the done callback ends with wr__work_done (m may be freed). */
void wr__queue_work(struct wr_manager *m, uv_work_t *w, uv_work_cb run, uv_after_work_cb done);
void wr__work_done(struct wr_manager *m);
/* The sandbox `id` of team (NULL: any) in memory, in any state; or NULL with WR_ENOTFOUND, or
 * WR_ECONFLICT naming the state of one that is only a record (stopped, error). */
struct wr_live_sb *wr__lookup(struct wr_manager *m, const char *team, const char *id,
                              struct wr_err *err);
/* Why a sandbox cannot change state now (being created, deleted, paused, resumed), or 0. */
int wr__check_settled(const struct wr_live_sb *sb, struct wr_err *err);
/* After work on a busy sandbox: run the end that was asked for meanwhile, if any (true). */
bool wr__run_pending_end(struct wr_live_sb *sb);
/* procs.c: the sandbox's processes hear that it is gone; free them all; take back the processes
 * of an adopted sandbox (LIST + ATTACH). */
void wr__procs_lost(struct wr_live_sb *sb, const struct wr_err *why);
void wr__procs_free(struct wr_live_sb *sb);
void wr__procs_adopt(struct wr_live_sb *sb);
/* The sandbox is being frozen: stop the exec timeouts of its processes, keeping their time left;
 * and thawed: start them again with it. */
void wr__procs_pause(struct wr_live_sb *sb);
void wr__procs_resume(struct wr_live_sb *sb);
/* Tag a process (NULL: none; see wr_proc_tag). */
void wr__proc_set_tag(struct wr_proc *p, const char *tag);
/* The last (at most) cap bytes of the process's kept output, both streams in order, into out;
 * returns how many. */
size_t wr__proc_tail(const struct wr_proc *p, char *out, size_t cap);
/* Whether a process of the sandbox has the tag. */
bool wr__procs_tagged(const struct wr_live_sb *sb, const char *tag);

/* manager.c */
const struct wr_manager_config *wr__core_config(const struct wr_manager *m);
/* The table of sandboxes in memory, by id: get, put (the sandbox counts against the host's
 * limits from then on) and delete (it no longer counts). */
struct wr_live_sb *wr__table_get(struct wr_manager *m, const char *id);
void wr__table_put(struct wr_manager *m, struct wr_live_sb *sb);
void wr__table_del(struct wr_manager *m, struct wr_live_sb *sb);

/* metrics.c: the manager's families (registered by wr_manager_open, read at scrape time until
 * wr_manager_close), and the updates of the places where the events happen. t0_ns: uv_hrtime()
 * when the create or spawn was asked for. */
void wr__metrics_open(struct wr_manager *m);
void wr__metrics_close(struct wr_manager *m);
void wr__metric_create(bool warm, const struct wr_err *err, uint64_t t0_ns);
void wr__metric_exit(const char *reason);
void wr__metric_exec(const struct wr_err *err, uint64_t t0_ns);
void wr__metric_pause(bool disk);  /* a pause asked for (memory or disk) */
void wr__metric_resume(bool disk); /* a resume asked for (from memory or disk) */
/* Whether the sandbox counts in m->count and m->committed: not while it is paused to disk (it
 * holds no memory and no processes). */
void wr__account(struct wr_live_sb *sb, bool counted);

/* lifecycle.c: a managed sandbox's life. */
/* The one place a managed sandbox changes state (enum live_sb_state lists the allowed transitions).
 * Another is a bug: a test build aborts on it; other builds log it as an error and go on, so that
 * one sandbox's bug does not stop the daemon for every team. */
void wr__live_sb_set_state(struct wr_live_sb *sb, enum live_sb_state to);
/* A new sandbox of the table, CREATING, with the table's reference. */
struct wr_live_sb *wr__live_sb_new(struct wr_manager *m, const char *id, const char *team,
                                   uint64_t memory_bytes, uint32_t cpu_millis);
/* Whether an image_json refers to layers of the store (its end may leave layers to collect). */
bool wr__uses_store_layers(const char *image_json);
/* Open its control agent: on its connected socket, or by path (after a restart). */
void wr__live_sb_connect(struct wr_live_sb *sb, bool by_path);
/* Give sb to another team (a warm sandbox taken by a create), moving its counts. */
void wr__live_sb_set_team(struct wr_live_sb *sb, const char *team);
/* Adoption's bound on connecting agents (lifecycle.c): one is done (its processes are listed,
 * or its agent failed), and whether any is still connecting or queued. */
void wr__adopt_done(struct wr_live_sb *sb);
bool wr__adopting(const struct wr_manager *m);
/* Watching the ends of warren-init through cfg.exits, from manager open to close. */
void wr__exits_start(struct wr_manager *m);
void wr__exits_stop(struct wr_manager *m);
/* Start its deadline timer for the time left until sb->deadline_ms. */
void wr__arm_deadline(struct wr_live_sb *sb);
/* To RUNNING or PAUSED: watch its end; when RUNNING, arm its deadline and connect its agent. */
void wr__live_sb_start_watching(struct wr_live_sb *sb, enum live_sb_state to, int64_t deadline_ms,
                                bool connect_by_path);
/* To ON_DISK or ENDING: stop everything that refers to it on the loop; its processes hear why. */
void wr__live_sb_stop_watching(struct wr_live_sb *sb, enum live_sb_state to,
                               const struct wr_err *why);
/* Answer a resume that waits for the agent (resume_cb), if any: err, or the record. */
void wr__resume_answer(struct wr_live_sb *sb, const struct wr_err *err);
/* End a sandbox (forget: the record goes, else it says final_state), or, while a worker works
 * on it, once that is done; cb (or NULL) hears when it is gone. */
void wr__live_sb_end(struct wr_live_sb *sb, bool forget, enum wr_sb_state final_state,
                     const char *reason, void (*cb)(void *ctx, const struct wr_err *err),
                     void *ctx);
/* Let go of a sandbox without killing it (the daemon stops; sandboxes outlive it). */
void wr__live_sb_let_go(struct wr_live_sb *sb);

/* pause.c: from now on nothing is sent to the agent and no clock of the sandbox runs; freeze it
 * on a worker, recording remaining_ms and reason (NULL: none). cb (or NULL) hears the end. */
void wr__pause_start(struct wr_live_sb *sb, const char *reason, int64_t remaining_ms,
                     wr_manager_state_cb cb, void *ctx);

/* usage.c: take a usage sample of a running sandbox; the sampler's timer callback (all of them)
 * and its close callback (frees the handle). */
void wr__sample(struct wr_live_sb *sb);
void wr__on_sample(uv_timer_t *t);
void wr__sampler_closed(uv_handle_t *h);
/* memory.c: whether a sandbox of this memory limit may start (a create, a resume from disk):
 * the commit under --max-memory and MemAvailable above --memory-reserve; WR_ELIMIT naming
 * which, else 0. */
int wr__memory_admit(struct wr_manager *m, uint64_t memory, const char *what, struct wr_err *err);
/* net.c: the bytes its slot's counters saw so far: sent (accepted egress) and received (through
 * the host's forwarding); 0 without a slot of its own or before the table is built. The
 * counters start at 0 with each daemon's table. */
void wr__net_bytes(struct wr_live_sb *sb, uint64_t *out, uint64_t *in);
/* usage.c, the ledger: a state change from `from` to sb's state now closes its open interval
 * (one row, written at once) and opens the next (RUNNING: running, PAUSED or ON_DISK: paused;
 * none for ENDING). */
void wr__ledger_state(struct wr_live_sb *sb, enum live_sb_state from);
/* Start the ledger's and the storage sample's timers; stop them and close their handles. */
void wr__ledger_start(struct wr_manager *m);
void wr__ledger_stop(struct wr_manager *m);

/* reconcile.c: take back one sandbox found in the store at open (adopt it, or end what is left
 * of it). */
void wr__reconcile_one(struct wr_manager *m, struct wr_sandbox_rec *r);
/* create.c: what a sandbox starts from: its image's layers and config with the record's env on top,
 * its home, volumes and limits. */
struct start_spec {
    char *id;
    enum wr_backend backend; /* the record's runtime */
    char **layers;           /* bottom first */
    size_t n_layers;
    char **env; /* NULL-terminated KEY=VALUE */
    char *cwd, *user;
    bool allow_setuid;
    char *home;                   /* the writable layer */
    bool home_exists;             /* resume from disk: it holds the sandbox's files */
    struct wr_mount_spec *mounts; /* its volumes */
    size_t n_mounts;
    struct wr_device_node *devices; /* its host devices (devices.c), with their env in env */
    size_t n_devices;
    struct wr_bind_spec *binds; /* and the host files they need */
    size_t n_binds;
    struct wr_symlink_spec *symlinks; /* and the links to them */
    size_t n_symlinks;
    struct wr_inner_bind *inner; /* its services' roots' mounts (services.c) */
    size_t n_inner;
    uint64_t memory_bytes, disk_bytes;
    uint32_t cpu_millis, pids_max;
    uint32_t project; /* for a project quota: unique per sandbox */
    int32_t net_slot; /* the network slot it joins, -1: loopback only */
    bool net_make;    /* the worker makes that slot first (none was ready) */
    bool net_pooled;  /* a child waits in that slot (wr_runtime_prewarm_net): the create takes it */
    /* gvisor, resumed from disk: the checkpoint its processes continue from (<home>/checkpoint,
     * wr__checkpoint_dir), removed once they run again; NULL: a fresh init */
    char *restore_image;
};
/* The project id of a sandbox's project quota: its record's seq, unique and never reused, with
 * the high bit set to keep apart from projects an administrator numbers by hand. */
uint32_t wr__project_of(int64_t seq);
/* Where a gvisor sandbox paused to disk keeps its processes' checkpoint: inside its writable
 * layer's directory (its disk limit counts it; it goes with the layer). Caller frees. */
char *wr__checkpoint_dir(const char *home);
/* Pause to disk and resume from it without the API's checks, events and metrics (a fork on
 * gvisor: pause.c). */
void wr__pause_to_disk(struct wr_live_sb *sb, const char *reason, wr_manager_state_cb cb,
                       void *ctx);
void wr__resume_from_disk(struct wr_live_sb *sb, wr_manager_state_cb cb, void *ctx);
/* The backend of a create that names none and whose template names none: "ns", unless the
 * daemon does not allow it (--runtimes; the first it allows then). */
const char *wr__default_runtime(const struct wr_manager *m);
/* The isolation backend of a record (its runtime; NULL: ns); WR_EINTERNAL for a name that is
 * none. */
int wr__rec_backend(const struct wr_sandbox_rec *rec, enum wr_backend *out, struct wr_err *err);
/* Host devices (devices.c, over cdi.c). The names of a record's devices_json (NULL: none), a
 * NULL-terminated list; NULL with err if it is not a list of strings. */
char **wr__devices_names(const char *devices_json, struct wr_err *err);
/* Give a restarted daemon's sandbox its devices back (logged if it cannot: the sandbox goes on,
 * its next start fails naming the device). */
void wr__devices_adopt(struct wr_manager *m, const struct wr_sandbox_rec *rec);
/* Define a sandbox's Compose services (a record's compose_json) to its warren-init, each with a
 * cgroup of its own, and start them; cb(ctx, NULL) once warren-init took them (they start in
 * their order from then on), or why not. sb's agent is ready. */
typedef void (*wr__services_cb)(void *ctx, const struct wr_err *err);
void wr__services_start(struct wr_live_sb *sb, const char *compose_json, wr__services_cb cb,
                        void *ctx);
/* The mounts of a record's Compose services' roots (services.c) into ss. */
int wr__services_spec(const struct wr_sandbox_rec *rec, struct start_spec *ss, struct wr_err *err);
/* The nodes and env of a record's devices into ss. */
int wr__devices_spec(struct wr_manager *m, const struct wr_sandbox_rec *rec, struct start_spec *ss,
                     struct wr_err *err);
/* The start spec of a sandbox record (free with wr__start_spec_fini). */
int wr__start_spec_of(struct wr_manager *m, const struct wr_sandbox_rec *rec, struct start_spec *ss,
                      struct wr_err *err);
void wr__start_spec_fini(struct start_spec *ss);
/* Worker: make the writable layer (unless it holds a paused sandbox's files) and start the
 * sandbox. On failure a new home is removed again. */
int wr__start_sandbox(struct wr_manager *m, const struct start_spec *ss, struct wr_sandbox **out,
                      struct wr_err *err);
/* lifecycle.c: everything a sandbox holds on the host goes: its processes (through rt_sb, thawed
 * first if thaw; with no handle, every process left in its cgroup), its cgroups, run directory and
 * id range, and its writable layer at home (NULL: kept). The one teardown of every end: a delete,
 * a deadline, a dead init, what a killed daemon left, a warm sandbox. What is already gone is
 * not an error. Blocking: a worker, or the loop at open and close. */
int wr__sandbox_teardown(struct wr_manager *m, const char *id, struct wr_sandbox *rt_sb, bool thaw,
                         const char *home, struct wr_err *err);
/* The template name recorded for a build's step sandboxes: this prefix and the template's
 * name (build.c). No template name has a colon. */
#define WR_BUILD_TEMPLATE_PREFIX "build:"
/* manager.c: 20 random characters of [a-z0-9]. */
void wr__core_new_id(char out[21]);

/* events.c (events.h): record a lifecycle event of sandbox_id of team (NULL: "") of type, with
 * data (a JSON object, stolen; NULL: {}), and tell the followers. A store failure is logged.
 * wr__events_open/close: at the manager's open and close (followers hear the end). */
void wr__event(struct wr_manager *m, const char *team, const char *sandbox_id, const char *type,
               json_t *data);
void wr__events_open(struct wr_manager *m);

/* Budgets (budget.c). wr__budget_account: an interval of sb just closed (its team's and its
 * own totals grow; a cap passed is announced, or pauses sb). wr__budget_over: sb is past its
 * own hard cap. wr__budget_close: at the manager's close. */
void wr__budget_account(struct wr_live_sb *sb, const struct wr_usage_interval *iv);
bool wr__budget_over(struct wr_live_sb *sb);
void wr__budget_close(struct wr_manager *m);
/* Pause a running sandbox to disk for its budget (the record's reason "budget", a
 * sandbox.paused event): 1 started (cb hears the end), 0 not now (busy: try again), -1 never
 * (it is not running). */
int wr__pause_budget(struct wr_live_sb *sb, wr_manager_state_cb cb, void *ctx);
void wr__events_close(struct wr_manager *m);
/* webhooks.c (webhooks.h): wr__webhooks_event queues the deliveries of the event r (just
 * stored) to its team's webhooks; open and close at the manager's (close puts the attempts in
 * flight back as due). */
void wr__webhooks_event(struct wr_manager *m, const struct wr_event_rec *r);
void wr__webhooks_open(struct wr_manager *m);
void wr__webhooks_close(struct wr_manager *m);
/* Replace a manager call's callback (*cb, *ctx) by one that records the call's event on its
 * success, then calls it: type for a pause or resume (sandbox.paused, sandbox.resumed, with the
 * record's paused_mode), sandbox.snapshotted (the snapshot's id and name) and sandbox.forked
 * (the children's ids) of sandbox_id. */
void wr__events_wrap_state(struct wr_manager *m, const char *type, wr_manager_state_cb *cb,
                           void **ctx);
void wr__events_wrap_snapshot(struct wr_manager *m, const char *sandbox_id,
                              wr_manager_snapshot_cb *cb, void **ctx);
void wr__events_wrap_fork(struct wr_manager *m, const char *sandbox_id, wr_manager_fork_cb *cb,
                          void **ctx);

/* warm.c: sandboxes of a template started ahead of creates (see there), one pool per template
 * (warrend --warm N for base, --warm NAME=N).
 * wr__warm_open: remove the warm sandboxes a killed daemon left (after reconcile), start
 * filling. wr__warm_close: destroy them (blocking; at shutdown). wr__warm_take: a warm sandbox
 * of template tname for a create of image_json (the record's) with the default limits and no
 * env, volume or disk limit, or NULL; *id is its id, which the create's record must take; *sb
 * is its live sandbox (CREATING, not in the table, its agent connected and its start process
 * running) when the template has a start command, else NULL. want_net: the create wants a
 * network slot; a warm sandbox that holds one (*net_slot, no policy bound: the create binds its
 * own) serves only such creates, one without only the others. wr__warm_recorded: the record of
 * the one taken with id is in the store; wr__warm_drop: destroy the one taken with id instead
 * (its create failed), on a worker (sb, or NULL, is let go first; net_slot, or -1, is released
 * once it is gone). */
void wr__warm_open(struct wr_manager *m);
void wr__warm_close(struct wr_manager *m);
struct wr_sandbox *wr__warm_take(struct wr_manager *m, const char *tname, const char *image_json,
                                 bool want_net, char id[21], struct wr_live_sb **sb,
                                 int32_t *net_slot);
void wr__warm_recorded(struct wr_manager *m, const char *id);
void wr__warm_drop(struct wr_manager *m, const char *id, struct wr_sandbox *rt,
                   struct wr_live_sb *sb, int32_t net_slot);

/* volumes.c: check the team's volumes `v` (names, paths, limits) and resolve them to the
 * record's volumes_json (*out, free it): [{"id","name","path","readonly"}]. WR_EINVAL for bad
 * names or paths, WR_ENOTFOUND for a volume the team does not have. */
int wr__volumes_resolve(struct wr_manager *m, const char *team, const struct wr_volume_mount *v,
                        size_t n, char **out, struct wr_err *err);
/* The mounts of a record's volumes_json (NULL: none): *mounts holds *n specs whose strings it
 * owns; free with wr__mounts_free. */
int wr__mounts_of(struct wr_manager *m, const char *volumes_json, struct wr_mount_spec **mounts,
                  size_t *n, struct wr_err *err);
void wr__mounts_free(struct wr_mount_spec *mounts, size_t n);
/* Loop: a volume ss mounts read-write that nobody has written to (its root empty and owned by
 * root, as made) goes to ss's default user (its uid and primary group in ss's image), so that
 * user can write there; root can anyway. One that holds anything keeps its owner. */
void wr__volumes_give(struct wr_manager *m, const struct start_spec *ss);
/* Remove the directories of volumes that have no record (a daemon that died while deleting or
 * creating one). Called at open. */
void wr__volumes_sweep(struct wr_manager *m);

/* ---- net.c: networking ------------------------------------------------------------------------
 */

struct wr_net_policy;
/* At open, before the records are reconciled: the pool and the slots a previous daemon left. */
int wr__net_init(struct wr_manager *m, struct wr_err *err);
/* After: the whole nftables table from the adopted sandboxes, in one transaction; then the pool
 * is filled. */
int wr__net_start(struct wr_manager *m, struct wr_err *err);
void wr__net_close(struct wr_manager *m); /* stop filling and resting */
void wr__net_free(struct wr_manager *m);  /* once no work item is left */
/* A request's network as a validated policy (*p, fini it), and whether it gets a slot (at
 * create; a replacement always keeps its slot). */
int wr__net_request(struct wr_manager *m, const struct wr_net_req *req, bool create,
                    struct wr_net_policy *p, bool *slot, struct wr_err *err);
/* The record's net_json of a sandbox on slot with policy p. */
char *wr__net_json(const struct wr_manager *m, const struct wr_net_policy *p, int32_t slot,
                   bool ports_public, const char *mask_host);
/* A slot for a create: a ready one (pooled: with a child pre-cloned into it, which the create
 * takes), or (make) one its worker makes. WR_ELIMIT if none is left. */
int wr__net_take(struct wr_manager *m, bool child_ok, int32_t *slot, bool *make, bool *pooled,
                 struct wr_err *err);
/* sb holds slot with policy p (moved into sb->net; p is zeroed) and its port options; programs
 * the kernel's rules (but at start, when wr__net_start builds them all). */
int wr__net_bind(struct wr_manager *m, struct wr_live_sb *sb, int32_t slot, struct wr_net_policy *p,
                 bool ports_public, const char *mask_host, struct wr_err *err);
void wr__net_slot_made(struct wr_manager *m, int32_t slot);
/* A taken slot no sandbox was bound to (a create that failed early) goes back. */
void wr__net_release_slot(struct wr_manager *m, int32_t slot, bool made);
/* sb's end: its rules go, its slot rests then is ready again, its record forgets the slot. */
void wr__net_release(struct wr_manager *m, struct wr_live_sb *sb);
/* An imported sandbox (move.c) on slot (from wr__net_take, made): the policy of its network
 * record from another node (net_json; one that does not parse: internet off, logged) bound as
 * wr__net_bind does, and its record's network and slot written. */
int wr__net_import(struct wr_manager *m, struct wr_live_sb *sb, int32_t slot, const char *net_json,
                   struct wr_err *err);
/* A reconciled record's slot and policy back on sb (-1 if it could not be). */
int wr__net_adopt(struct wr_manager *m, struct wr_live_sb *sb, const struct wr_sandbox_rec *r);
/* The sandbox whose slot address saddr is (false if none). */
bool wr__net_lookup(struct wr_manager *m, uint32_t saddr, struct wr_live_sb **out);
uint32_t wr__net_sandbox_addr(const struct wr_net_config *cfg, int32_t slot);
/* The address a sandbox on slot names as its resolver (its gateway), 0 for -1. */
uint32_t wr__net_resolver(const struct wr_manager *m, int32_t slot);
/* A create's request for the network a record's net_json says (NULL: loopback only), for a
 * fork's copies: the parent's policy and ports, in slots of their own. The strings point into
 * b, which lives until the create has been called. -1: not a network record. */
struct wr__net_req_buf {
    struct wr_net_req req;
    json_t *j;
    const char **allow, **deny;
};
int wr__net_req_of_json(const char *net_json, struct wr__net_req_buf *b);
void wr__net_req_buf_fini(struct wr__net_req_buf *b);
/* Worker: the slot's namespace as an fd for the runtime (made first if make; else readdressed
 * first if readdress: a gvisor sandbox's start, which finds the slot as its last runsc left it,
 * wr_netslot_readdress). */
int wr__net_open_fd(struct wr_manager *m, int32_t slot, bool make, bool readdress,
                    struct wr_err *err);
