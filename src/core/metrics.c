/* SPDX-License-Identifier: Apache-2.0 */
/* The manager's metrics (metrics.h, core_int.h). */
#include "metrics.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "../util/cleanup.h"
#include "../util/metrics.h"
#include "core_int.h"
#include "images.h"

/* The manager read by the scrape's callbacks (loop thread), or NULL once it closes. */
static struct wr_manager *scraped;

static struct wr_metric *m_creates, *m_create_fail, *m_create_dur, *m_exits, *m_deletes, *m_execs,
    *m_exec_dur, *m_pauses, *m_resumes, *m_limits;

/* Buckets of create and pause durations: 0.5 ms to 10 s. */
static const double create_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                        0.1,    0.25,  0.5,    1,     2.5,  5,     10};
/* Exec start (request to process started): 0.1 ms to 5 s. */
static const double exec_buckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                      0.025,  0.05,    0.1,    0.25,  0.5,    1,     5};

static const char *const live_states[] = {"creating", "running", "paused", "paused_disk",
                                          "stopping"};

static void read_sandboxes(struct wr_metric_emitter *e, void *ctx)
{
    double n[WR_ARRAY_SIZE(live_states)] = {0};

    (void)ctx;
    if (scraped == NULL)
        return;
    for (size_t b = 0; b < NBUCKETS; b++)
        for (struct wr_live_sb *sb = scraped->buckets[b]; sb != NULL; sb = sb->hnext)
            if ((size_t)sb->state < WR_ARRAY_SIZE(live_states))
                n[sb->state]++;
    for (size_t i = 0; i < WR_ARRAY_SIZE(live_states); i++)
        wr_metric_emit(e, n[i], (const char *const[]){live_states[i]});
}

static void read_committed(struct wr_metric_emitter *e, void *ctx)
{
    (void)ctx;
    if (scraped != NULL)
        wr_metric_emit(e, (double)scraped->committed, NULL);
}

static void read_capacity_memory(struct wr_metric_emitter *e, void *ctx)
{
    (void)ctx;
    if (scraped != NULL)
        wr_metric_emit(e, (double)scraped->cfg.max_memory_bytes, NULL);
}

static void read_capacity_sandboxes(struct wr_metric_emitter *e, void *ctx)
{
    (void)ctx;
    if (scraped != NULL)
        wr_metric_emit(e, (double)scraped->cfg.max_sandboxes, NULL);
}

static void read_warm(struct wr_metric_emitter *e, void *ctx)
{
    struct wr_warm_pool_info info[64];
    size_t n;

    (void)ctx;
    if (scraped == NULL)
        return;
    n = wr_manager_warm_pools(scraped, info, WR_ARRAY_SIZE(info));
    if (n > WR_ARRAY_SIZE(info))
        n = WR_ARRAY_SIZE(info);
    for (size_t i = 0; i < n; i++)
        wr_metric_emit(e, info[i].ready, (const char *const[]){info[i].template_name});
}

static void read_warm_target(struct wr_metric_emitter *e, void *ctx)
{
    struct wr_warm_pool_info info[64];
    size_t n;

    (void)ctx;
    if (scraped == NULL)
        return;
    n = wr_manager_warm_pools(scraped, info, WR_ARRAY_SIZE(info));
    if (n > WR_ARRAY_SIZE(info))
        n = WR_ARRAY_SIZE(info);
    for (size_t i = 0; i < n; i++)
        wr_metric_emit(e, info[i].target, (const char *const[]){info[i].template_name});
}

static void read_layers(struct wr_metric_emitter *e, void *ctx)
{
    uint64_t bytes = 0, count = 0;
    struct wr_err err;

    (void)ctx;
    if (scraped != NULL && wr_store_layers_total(scraped->cfg.store, &bytes, &count, &err) == 0)
        wr_metric_emit(e, (double)bytes, NULL);
}

static void read_layer_count(struct wr_metric_emitter *e, void *ctx)
{
    uint64_t bytes = 0, count = 0;
    struct wr_err err;

    (void)ctx;
    if (scraped != NULL && wr_store_layers_total(scraped->cfg.store, &bytes, &count, &err) == 0)
        wr_metric_emit(e, (double)count, NULL);
}

void wr__metrics_open(struct wr_manager *m)
{
    static const char *const source_result[] = {"source", "result", NULL};
    static const char *const source[] = {"source", NULL};
    static const char *const reason[] = {"reason", NULL};
    static const char *const result[] = {"result", NULL};
    static const char *const mode[] = {"mode", NULL};
    static const char *const state[] = {"state", NULL};
    static const char *const tmpl[] = {"template", NULL};
    static const char *const policy_reason[] = {"policy", "reason", NULL};

    scraped = m;
    m_creates = wr_metric_counter("warrend_sandbox_creates_total",
                                  "Sandbox creates answered, by where the sandbox came from "
                                  "(warm: a warm pool; cold: started for the create) and result.",
                                  source_result);
    m_create_fail = wr_metric_counter("warrend_sandbox_create_failures_total",
                                      "Sandbox creates that failed, by the error's code.", reason);
    m_create_dur = wr_metric_histogram(
        "warrend_sandbox_create_duration_seconds",
        "Time from a create's request to its sandbox running (successful creates).", source,
        create_buckets, WR_ARRAY_SIZE(create_buckets));
    m_exits = wr_metric_counter("warrend_sandbox_exits_total",
                                "Sandboxes ended, by why (deleted, timeout, died, store).", reason);
    m_deletes =
        wr_metric_counter("warrend_sandbox_deletes_total", "Sandboxes ended by a delete.", NULL);
    m_execs = wr_metric_counter("warrend_execs_total", "Commands started, by result.", result);
    m_exec_dur = wr_metric_histogram("warrend_exec_start_duration_seconds",
                                     "Time from asking the sandbox's init to start a command to "
                                     "its start being confirmed.",
                                     NULL, exec_buckets, WR_ARRAY_SIZE(exec_buckets));
    m_pauses = wr_metric_counter("warrend_sandbox_pauses_total",
                                 "Pauses asked for, by mode (memory, disk).", mode);
    m_resumes = wr_metric_counter("warrend_sandbox_resumes_total",
                                  "Resumes asked for, by where from (memory, disk).", mode);
    m_limits =
        wr_metric_counter("warrend_limit_rejections_total",
                          "Requests turned away by a limit, by policy and reason.", policy_reason);
    wr_metric_gauge_fn("warrend_sandboxes", "Sandboxes the manager holds, by state.", state,
                       read_sandboxes, NULL);
    wr_metric_gauge_fn("warrend_committed_memory_bytes",
                       "Memory limits of the sandboxes in memory (what the host has committed).",
                       NULL, read_committed, NULL);
    wr_metric_gauge_fn("warrend_capacity_memory_bytes",
                       "Memory that may be committed to sandboxes at most (--max-memory).", NULL,
                       read_capacity_memory, NULL);
    wr_metric_gauge_fn("warrend_capacity_sandboxes", "Sandboxes at most (--max-sandboxes).", NULL,
                       read_capacity_sandboxes, NULL);
    wr_metric_gauge_fn("warrend_warm_sandboxes", "Warm sandboxes ready to be taken, by template.",
                       tmpl, read_warm, NULL);
    wr_metric_gauge_fn("warrend_warm_target_sandboxes",
                       "Warm sandboxes each pool keeps (--warm), by template.", tmpl,
                       read_warm_target, NULL);
    wr_metric_gauge_fn("warrend_layer_store_bytes", "Bytes of the layers in the layer store.", NULL,
                       read_layers, NULL);
    wr_metric_gauge_fn("warrend_layer_store_layers", "Layers in the layer store.", NULL,
                       read_layer_count, NULL);
}

void wr__metrics_close(struct wr_manager *m)
{
    if (scraped == m)
        scraped = NULL;
}

void wr__metric_create(bool warm, const struct wr_err *err, uint64_t t0_ns)
{
    const char *src = warm ? "warm" : "cold";

    wr_metric_inc(m_creates, (const char *const[]){src, err ? "error" : "ok"});
    if (err != NULL) {
        wr_metric_inc(m_create_fail, (const char *const[]){wr_err_kind_name(err->kind)});
        return;
    }
    wr_metric_observe(m_create_dur, (const char *const[]){src},
                      (double)(uv_hrtime() - t0_ns) / 1e9);
}

void wr__metric_exit(const char *reason)
{
    const char *r = "died";

    if (reason != NULL && strcmp(reason, "deleted") == 0)
        wr_metric_inc(m_deletes, NULL);
    if (reason != NULL && (strcmp(reason, "deleted") == 0 || strcmp(reason, "timeout") == 0))
        r = reason;
    else if (reason != NULL && strcmp(reason, "store failure") == 0)
        r = "store";
    wr_metric_inc(m_exits, (const char *const[]){r});
}

void wr__metric_exec(const struct wr_err *err, uint64_t t0_ns)
{
    wr_metric_inc(m_execs, (const char *const[]){err ? "error" : "ok"});
    if (err == NULL)
        wr_metric_observe(m_exec_dur, NULL, (double)(uv_hrtime() - t0_ns) / 1e9);
}

void wr__metric_pause(bool disk)
{
    wr_metric_inc(m_pauses, (const char *const[]){disk ? "disk" : "memory"});
}

void wr__metric_resume(bool disk)
{
    wr_metric_inc(m_resumes, (const char *const[]){disk ? "disk" : "memory"});
}

void wr_core_metric_limit_rejected(const char *policy, const char *reason)
{
    if (m_limits == NULL)
        m_limits = wr_metric_counter("warrend_limit_rejections_total",
                                     "Requests turned away by a limit, by policy and reason.",
                                     (const char *const[]){"policy", "reason", NULL});
    wr_metric_inc(m_limits, (const char *const[]){policy, reason});
}
