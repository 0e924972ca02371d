/* SPDX-License-Identifier: Apache-2.0 */
/* Webhooks (docs/operations.md, "Webhooks"): a team registers URLs, each lifecycle event of the
 * team (events.h) is POSTed as JSON to each of its enabled webhooks whose filter matches,
 * signed with the webhook's secret (Warren-Signature: t=<unix s>,v1=<hex HMAC-SHA256 of
 * "<t>.<body>">, and E2B's e2b-signature: unpadded base64 of SHA-256(secret || body)). A
 * delivery is a row in the state database from the event on: attempted at once, retried with
 * exponential backoff after a failure (no 2xx, a transport error, a timeout), and after its last
 * attempt left dead, the dead-letter record the team lists and can redeliver. Attempts run on a
 * thread of their own (libcurl multi), never on the loop; a restart picks the pending ones up.
 *
 * The daemon fetches these URLs from the host: an address is reachable only if it is public
 * (not loopback, private, link-local, CGNAT, benchmarking, multicast or reserved) or the
 * operator allowed it (--webhook-allow CIDR or host name). A literal address or "localhost"
 * that is not allowed is refused at registration; a name's addresses are checked at each
 * connect (a refused one fails the attempt).
 *
 * All functions run on the loop thread. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../store/store.h"
#include "../util/err.h"

struct wr_manager;

#define WR_WEBHOOKS_PER_TEAM      20
#define WR_WEBHOOK_ALLOW_MAX      32
#define WR_WEBHOOK_SECRET_MAX     256
#define WR_WEBHOOK_URL_MAX        2048
#define WR_WEBHOOK_RETENTION_DAYS 7

/* The operator's settings (warrend --webhook-*). Zeros take the defaults. */
struct wr_webhooks_config {
    const char *const *allow; /* CIDRs (v4 or v6) and host names a URL may reach */
    size_t n_allow;
    uint32_t attempts;   /* per delivery; 0: 6 */
    uint32_t backoff_ms; /* before the 2nd attempt, doubling each time; 0: 10000 */
    uint32_t timeout_ms; /* per attempt; 0: 10000 */
};

/* Whether s is a valid --webhook-allow entry: a CIDR or address (v4 or v6), or a host name. */
int wr_webhooks_allow_check(const char *s, struct wr_err *err);

/* Register a webhook of r->team: r's name, url, events (a JSON array text, "[]": every
 * event), format and enabled are taken; a NULL secret is generated. The url must be http(s)
 * and allowed (WR_EINVAL says why not); events must name known types (WR_EINVAL). On success
 * r's id, secret and times are set (r owns them). */
int wr_webhooks_create(struct wr_manager *m, struct wr_webhook_rec *r, struct wr_err *err);
/* The webhook id of team (NULL: any team); WR_ENOTFOUND. */
int wr_webhooks_get(struct wr_manager *m, const char *team, const char *id,
                    struct wr_webhook_rec *out, struct wr_err *err);
/* The webhooks of team (NULL: every team); fini each, free the array. */
int wr_webhooks_list(struct wr_manager *m, const char *team, struct wr_webhook_rec **out, size_t *n,
                     struct wr_err *err);
/* Change the webhook r->id of r->team to r's fields (checked as at create; a NULL secret keeps
 * the old one). */
int wr_webhooks_update(struct wr_manager *m, struct wr_webhook_rec *r, struct wr_err *err);
/* Delete the webhook id of team (NULL: any) and its deliveries; WR_ENOTFOUND. */
int wr_webhooks_delete(struct wr_manager *m, const char *team, const char *id, struct wr_err *err);
/* The deliveries that match f (wr_store_delivery_list). */
int wr_webhooks_deliveries(struct wr_manager *m, const struct wr_delivery_filter *f,
                           struct wr_delivery_rec **out, size_t *n, struct wr_err *err);
/* Send the delivery id of webhook_id (of team, NULL: any) again, from its first attempt:
 * WR_ENOTFOUND, WR_ECONFLICT if it is still pending. */
int wr_webhooks_redeliver(struct wr_manager *m, const char *team, const char *webhook_id,
                          int64_t id, struct wr_err *err);
/* Whether events (a JSON array) names only known event types, native or E2B's (WR_EINVAL). */
int wr_webhooks_events_check(json_t *events, struct wr_err *err);

/* ---- E2B's view of the events (docs/e2b.md) ---------------------------------------------- */

/* E2B's type for a native event type ("sandbox.lifecycle.killed" for sandbox.killed,
 * sandbox.timed_out and sandbox.stopped, ...), or NULL if E2B has none. */
const char *wr_events_e2b_type(const char *type);
/* The event as E2B's SandboxEvent (version, id, type, eventData, sandboxId, ...). */
json_t *wr_events_e2b_json(struct wr_manager *m, const struct wr_event_rec *r);
/* A page of team's (NULL: every team's) events of sandbox_id (NULL: every sandbox) that E2B
 * knows, of the E2B types in types (a JSON array; NULL or empty: all), newest first unless
 * asc, skipping offset, at most limit. */
int wr_events_e2b_page(struct wr_manager *m, const char *team, const char *sandbox_id,
                       json_t *types, bool asc, int64_t offset, size_t limit,
                       struct wr_event_rec **out, size_t *n, struct wr_err *err);
