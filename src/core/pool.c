/* SPDX-License-Identifier: Apache-2.0 */
/* The pre-clone pool's driver (pool.h). The refills run on a worker thread: at start, and
 * POOL_DELAY_MS after a create took a child (wr_pool_taken, from any thread, wakes the loop
 * through `kick`). One that failed (limits, a full id pool) is retried after POOL_RETRY_MS. An
 * idle daemon does not wake up for the pool.
 *
 * Why the delay: a refill at once runs beside the create that took the child, and they contend
 * for the kernel's global locks (namespace_sem, rtnl, cgroup_mutex), even with the refill at
 * nice 19; measured with bench/run-api.sh, create → first output was 5-10% slower than with
 * the refill left for later. */
#include <stdbool.h>

#include "../runtime/runtime.h"
#include "../util/err.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "pool.h"

#define POOL_DELAY_MS 20
#define POOL_RETRY_MS 1000

struct wr_pool {
    uv_loop_t *loop;
    uv_async_t kick;  /* wr_pool_taken → the loop */
    uv_timer_t timer; /* the next refill */
    uv_work_t work;   /* a refill on a worker thread */
    struct wr_runtime *rt;
    uint32_t size;
    bool busy;     /* a refill is on a worker thread */
    bool again;    /* a child was taken while it ran */
    bool failed;   /* the last refill failed */
    bool stopping; /* wr_pool_stop was called */
};

static void refill(struct wr_pool *p);

static void on_timer(uv_timer_t *t)
{
    refill(t->data);
}

static void on_kick(uv_async_t *a)
{
    struct wr_pool *p = a->data;

    if (!p->stopping && p->size > 0 && !uv_is_active((uv_handle_t *)&p->timer))
        uv_timer_start(&p->timer, on_timer, POOL_DELAY_MS, 0);
}

/* Worker thread. */
static void run(uv_work_t *w)
{
    struct wr_pool *p = w->data;
    struct wr_err err;

    p->failed = wr_runtime_prewarm(p->rt, p->size, &err) < 0;
    if (p->failed)
        log_warn("pool: %s", err.msg);
}

static void done(uv_work_t *w, int status)
{
    struct wr_pool *p = w->data;

    p->busy = false;
    if (p->stopping)
        return;
    if (p->failed)
        uv_timer_start(&p->timer, on_timer, POOL_RETRY_MS, 0);
    else if (p->again)
        uv_timer_start(&p->timer, on_timer, POOL_DELAY_MS, 0);
}

static void refill(struct wr_pool *p)
{
    if (p->stopping)
        return;
    if (p->busy) {
        p->again = true;
        return;
    }
    p->busy = true;
    p->again = false;
    uv_queue_work(p->loop, &p->work, run, done);
}

struct wr_pool *wr_pool_new(uv_loop_t *loop)
{
    struct wr_pool *p = xcalloc(1, sizeof(*p));

    p->loop = loop;
    p->kick.data = p->timer.data = p->work.data = p;
    uv_async_init(loop, &p->kick, on_kick);
    uv_unref((uv_handle_t *)&p->kick);
    uv_timer_init(loop, &p->timer);
    return p;
}

void wr_pool_start(struct wr_pool *p, struct wr_runtime *rt, uint32_t size)
{
    p->rt = rt;
    p->size = size;
    if (size > 0)
        refill(p);
}

void wr_pool_taken(void *pool)
{
    struct wr_pool *p = pool;

    (void)uv_async_send(&p->kick);
}

static void timer_closed(uv_handle_t *h)
{
}

void wr_pool_stop(struct wr_pool *p)
{
    p->stopping = true;
    uv_timer_stop(&p->timer);
    uv_close((uv_handle_t *)&p->timer, timer_closed);
}
