/* SPDX-License-Identifier: Apache-2.0 */
/* Lifecycle events (docs/operations.md, "Lifecycle events"): one row in the state database for
 * each change of a sandbox's life, with its team: sandbox.created, sandbox.failed (its create
 * did not come up), sandbox.paused, sandbox.resumed, sandbox.snapshotted, sandbox.forked,
 * sandbox.timed_out, sandbox.killed (deleted) and sandbox.stopped (it ended on its own: its
 * warren-init died). Written by the manager as each happens (core_int.h, wr__event), listed per
 * team, and followed: a follower gets the stored events after its cursor, then each new one as it
 * is written. Events older than WR_EVENTS_RETENTION_DAYS are deleted hourly.
 *
 * All functions run on the loop thread. */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../store/store.h"
#include "../util/err.h"

struct wr_manager;

#define WR_EVENTS_RETENTION_DAYS 7

/* The event as the API shows it: {id, time, type, sandbox_id, team, data} (a new reference);
 * also the body of a webhook's delivery. */
json_t *wr_events_json(const struct wr_event_rec *r);

/* The events that match f (wr_store_event_list). */
int wr_events_list(struct wr_manager *m, const struct wr_event_filter *f, struct wr_event_rec **out,
                   size_t *n, struct wr_err *err);

/* A follower's callback: an event (valid during the call), or NULL once at the end (the manager
 * closes); after NULL the follower is freed. */
typedef void (*wr_events_fn)(void *ctx, const struct wr_event_rec *r);
struct wr_events_sub;
/* Follow the events that match f (its limit is ignored): cb gets the stored ones after f->after
 * (the backlog, during this call), then each new one as it is written, in id order. *out: the
 * follower, for wr_events_unfollow. f's strings are copied. */
int wr_events_follow(struct wr_manager *m, const struct wr_event_filter *f, wr_events_fn cb,
                     void *ctx, struct wr_events_sub **out, struct wr_err *err);
/* Stop following: cb is not called again. Not after the end. */
void wr_events_unfollow(struct wr_events_sub *sub);
