/* SPDX-License-Identifier: Apache-2.0 */
/* The pre-clone pool's driver: keeps `size` sandbox children cloned ahead by the runtime
 * (wr_runtime_prewarm), so that creates skip cloning. Beside warm.c, which keeps whole sandboxes
 * of the default template started; this pool holds bare children any create can use.
 *
 * Loop thread only, except wr_pool_taken. */
#pragma once

#include <stdint.h>
#include <uv.h>

struct wr_runtime;
struct wr_pool;

/* A pool driven from loop. Made before the runtime is opened, so that the runtime's
 * `pool_taken` callback can be wr_pool_taken with this pool as its argument. Never fails. */
struct wr_pool *wr_pool_new(uv_loop_t *loop);

/* Start keeping `size` children of rt (0: none, the pool then never runs). */
void wr_pool_start(struct wr_pool *p, struct wr_runtime *rt, uint32_t size);

/* wr_runtime_config.pool_taken: a create took a child. Any thread; quick. */
void wr_pool_taken(void *pool);

/* Stop refilling and close the pool's timer; a refill on a worker thread finishes on its own.
 * The pool's memory and its wake-up handle stay (a create still on a worker thread may call
 * wr_pool_taken); the handle is unreferenced, so it does not keep the loop running. */
void wr_pool_stop(struct wr_pool *p);
