/* SPDX-License-Identifier: Apache-2.0 */
/* The gateway's nodes: who they are (discovery), whether they answer, what they hold (health
 * and reconciliation), where a create goes (placement), and calls to them (libcurl, blocking:
 * worker threads only). The table is shared by the loop and the workers under a mutex. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"
#include "discover.h"

#define GW_NODES_MAX 256

struct gw_node {
    struct wr_node_addr addr;
    bool healthy;       /* its /node/info answered within the dead-after time */
    bool known;         /* answered once since this gateway started */
    int64_t last_ok_ms; /* CLOCK_MONOTONIC ms of its last answer */
    char incarnation[40];
    uint64_t sandboxes, sandboxes_max, mem_committed, mem_max;
    uint32_t inflight; /* creates this gateway sent it and has not heard back from */
    json_t *templates; /* its template names (an array), or NULL */
    json_t *runtimes;
    json_t *labels;
};

struct gw_nodes;

struct gw_nodes_config {
    struct wr_discovery *discovery;
    const char *node_token;
    uint32_t dead_after_ms;
};
struct gw_nodes *gw_nodes_new(const struct gw_nodes_config *cfg);
void gw_nodes_free(struct gw_nodes *ns);

/* One round: list the nodes, read each one's /node/info and /node/sandboxes, record what they
 * say and reconcile the sandboxes' rows (a node that holds a sandbox recorded on another, a
 * stale copy after a move, is told to delete it; one silent past dead_after_ms has its
 * sandboxes reported lost). Blocking. */
void gw_nodes_round(struct gw_nodes *ns);

/* The node id's address (host, port): false if it is not known or not healthy. */
bool gw_nodes_addr(struct gw_nodes *ns, const char *id, struct wr_node_addr *out, bool *healthy);
/* The healthy nodes' ids, up to max; returns how many. */
size_t gw_nodes_healthy(struct gw_nodes *ns, char (*ids)[64], size_t max);

/* Candidates for a create, best first: healthy nodes with runtime (NULL: any) and a free slot,
 * those that have template, or are `prefer`, scored ahead (best of K by load); only `only` if
 * given. Returns how many (at most max). */
size_t gw_nodes_place(struct gw_nodes *ns, const char *template_name, const char *runtime,
                      const char *only, const char *prefer, char (*ids)[64], size_t max);
/* A create sent to / answered by node id (its in-flight count). */
void gw_nodes_inflight(struct gw_nodes *ns, const char *id, int delta);
/* A sandbox made on node id: counted in its load at once (its next /node/info corrects it). */
void gw_nodes_placed(struct gw_nodes *ns, const char *id, uint64_t memory_bytes);

/* A call to a node's API as team (admin: Warren-Admin: 1; team NULL: the node's admin). The
 * answer's status, body (NUL-terminated; free it) and Content-Type (free it). -1 with
 * WR_EUPSTREAM when the node did not answer. */
struct gw_answer {
    long status;
    char *body;
    size_t len;
    char *content_type;
};
void gw_answer_fini(struct gw_answer *a);
int gw_node_call(struct gw_nodes *ns, const struct wr_node_addr *node, const char *method,
                 const char *target, const char *team, bool admin, const char *body, size_t len,
                 const char *content_type, bool e2b, struct gw_answer *out, struct wr_err *err);
/* The same with a timeout of the whole call (gw_node_call's is 5 minutes: a create). */
int gw_node_call_timeout(struct gw_nodes *ns, const struct wr_node_addr *node, const char *method,
                         const char *target, const char *team, bool admin, const char *body,
                         size_t len, const char *content_type, bool e2b, long timeout_ms,
                         struct gw_answer *out, struct wr_err *err);
