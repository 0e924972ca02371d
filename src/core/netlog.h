/* SPDX-License-Identifier: Apache-2.0 */
/* The egress log's sink (docs/networking.md, "The egress log"): entries reported by the daemon's
 * services (the DNS stub and egress proxy, through a wr_netlog_fn of net/peer.h), the kernel's
 * conntrack DESTROY events of the pool's flows (connections the kernel's rules let through, with
 * their bytes) and the packets its rules logged to an NFLOG group (denied, the log prefix as the
 * rule) are buffered in memory and written to the store in batches: every second, or once 256 are
 * waiting, one transaction each. A burst beyond the buffer (8,192 entries) is dropped and counted.
 * Each sandbox keeps its newest 10,000 entries (wr_netlog_set_keep); they go with its record.
 * Followers of a sandbox's log get its backlog, then each entry once it is stored, until its record
 * goes.
 *
 * All functions run on the loop thread. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "../store/store.h"
#include "../util/err.h"
#include "../net/peer.h"
#include "../util/inet.h"

struct wr_manager;
struct wr_netlog;

/* The sandbox whose address (host byte order) saddr is: true with *sandbox_id (valid during the
 * call), false if no sandbox has it. The daemon's slot table answers it. */
typedef bool (*wr_netlog_lookup_fn)(void *arg, uint32_t saddr, const char **sandbox_id);

/* Longest name and rule kept (longer ones are cut). */
#define WR_NETLOG_NAME_MAX 253
#define WR_NETLOG_RULE_MAX 384

#define WR_NETLOG_KEEP_DEFAULT 10000
#define WR_NETLOG_BATCH        256
#define WR_NETLOG_PENDING_MAX  8192
#define WR_NETLOG_FLUSH_MS     1000

/* Open the sink on loop, writing to store. With a pool (not NULL), also subscribe to the conntrack
 * DESTROY events of flows from the pool (runtime/ctevents.h: sets nf_conntrack_acct and
 * nf_conntrack_timestamp) and map each to its sandbox with lookup(arg, ...); flows the kernel
 * redirected (to the DNS stub or the proxy, which log them themselves) and flows of addresses no
 * sandbox has are skipped. pool NULL: only what is reported through wr_netlog_add. *out: close
 * with wr_netlog_close. WR_ESYS if conntrack cannot be subscribed to. */
int wr_netlog_open(uv_loop_t *loop, struct wr_store *store, const struct wr_cidr4 *pool,
                   wr_netlog_lookup_fn lookup, void *arg, struct wr_netlog **out,
                   struct wr_err *err);
/* Also read NFLOG group `group` (the nft table's `log group G prefix "<rule>"`): each IPv4 packet
 * from a sandbox (by lookup) becomes a denied entry whose rule is the prefix. Needs the lookup
 * given at open. WR_ECONFLICT if another socket holds the group. */
int wr_netlog_listen_nflog(struct wr_netlog *nl, uint16_t group, struct wr_err *err);
/* Entries kept per sandbox (0: WR_NETLOG_KEEP_DEFAULT). */
void wr_netlog_set_keep(struct wr_netlog *nl, uint32_t keep);
/* Write what is buffered, end every follower (their callback gets NULL) and free. NULL-safe. */
void wr_netlog_close(struct wr_netlog *nl);

/* Slot address addr stops being sandbox_id's (its slot is being released). The conntrack flush
 * of the release ends the sandbox's last connections after the address stopped resolving through
 * the lookup; their events are still this sandbox's. Consulted only when the lookup finds nobody
 * (a new owner of the address wins), for 30 s. */
void wr_netlog_released(struct wr_netlog *nl, uint32_t addr, const char *sandbox_id);

/* The manager's versions, for core/net.c and warrend: a wr_netlog_fn whose arg is the manager
 * (the entry goes to its egress log as it is at the time of the call, none: dropped), a
 * wr_netlog_lookup_fn whose arg is the manager (the sandbox holding the slot address, from the
 * networking's slot table), and wr_netlog_released on the manager's log. */
void wr_netlog_manager_fn(void *m, const struct wr_netlog_entry *e);
bool wr_netlog_manager_lookup(void *m, uint32_t saddr, const char **sandbox_id);
void wr_manager_netlog_released(struct wr_manager *m, uint32_t addr, const char *sandbox_id);

/* Make nl the manager's egress log (NULL: none), for wr_netlog_add and the followers. */
void wr_manager_set_netlog(struct wr_manager *m, struct wr_netlog *nl);

/* Report an entry to the manager's egress log (copied; nothing happens without one). time_ms 0
 * is now. Never fails: an entry that does not fit the buffer is dropped and counted. */
void wr_netlog_add(struct wr_manager *m, const struct wr_netlog_entry *e);
/* The same as a wr_netlog_fn, for the services: arg is the struct wr_netlog. */
void wr_netlog_sink(void *arg, const struct wr_netlog_entry *e);

struct wr_netlog_stats {
    uint64_t stored;      /* entries written */
    uint64_t dropped;     /* entries dropped: the buffer was full */
    uint64_t orphaned;    /* entries of sandboxes that have no record (any more) */
    uint64_t unmatched;   /* kernel events of addresses no sandbox has */
    uint64_t kernel_lost; /* times the kernel dropped conntrack or NFLOG messages (full buffer) */
    uint64_t pending;     /* buffered now */
};
void wr_netlog_get_stats(const struct wr_netlog *nl, struct wr_netlog_stats *st);

/* A sandbox's entries with id > after, oldest first, at most limit (1 to 1000; 0: 1000), for
 * the sandbox `id` of team (NULL: any). Buffered entries are written first, so the answer holds
 * everything reported so far. *out: an array of *n records (fini each, free the array).
 * WR_ENOTFOUND if team has no such sandbox (its record may be stopped: the log outlives the
 * sandbox as long as the record). */
int wr_netlog_query(struct wr_manager *m, const char *team, const char *id, int64_t after,
                    size_t limit, struct wr_netlog_rec **out, size_t *n, struct wr_err *err);

/* A follower's callback: an entry (valid during the call), or NULL once, at the end: the
 * sandbox's record is gone or the log is closing. After NULL the follower is freed. */
typedef void (*wr_netlog_follow_fn)(void *ctx, const struct wr_netlog_rec *r);
struct wr_netlog_sub;
/* Follow sandbox `id` of team (NULL: any): cb gets every stored entry with id > after (the
 * backlog, during this call), then each new entry once it is written (within a second), in id
 * order, until the end. *out: the follower, for wr_netlog_unfollow. WR_ENOTFOUND as for
 * wr_netlog_query (cb is not called); WR_EUNSUPPORTED if the manager has no egress log. */
int wr_netlog_follow(struct wr_manager *m, const char *team, const char *id, int64_t after,
                     wr_netlog_follow_fn cb, void *ctx, struct wr_netlog_sub **out,
                     struct wr_err *err);
/* Stop following (cb is not called again, nor with NULL). Not after the end. */
void wr_netlog_unfollow(struct wr_netlog_sub *sub);
