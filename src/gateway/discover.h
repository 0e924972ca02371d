/* SPDX-License-Identifier: Apache-2.0 */
/* Where the gateway finds node daemons (docs/deploy.md "Discovery"). The only code that knows
 * an engine: each source gives {id, addr}; health, capacity and labels always come from the
 * node's own /node/info.
 *
 *   static:ID@HOST:PORT[,ID@HOST:PORT...]       a fixed list (bare metal, tests)
 *   kubernetes:NAMESPACE/LABEL_SELECTOR[@PORT]  the pods of the node DaemonSet, listed through
 *                                               the Kubernetes API with the pod's service
 *                                               account (KUBERNETES_SERVICE_HOST/_PORT, the
 *                                               token and CA under
 *                                               /var/run/secrets/kubernetes.io/serviceaccount);
 *                                               id: spec.nodeName, addr: status.podIP (the
 *                                               host's, with hostNetwork) and PORT (default
 *                                               7070); pods not Running, being deleted
 *                                               (deletionTimestamp set), without an IP or on a
 *                                               node whose name is not a valid id are left out
 *
 * Functions block (network): call them from a worker thread. */
#pragma once

#include <stddef.h>

#include "../util/err.h"

struct wr_node_addr {
    char id[64];    /* [A-Za-z0-9._-], 1..63 bytes */
    char host[256]; /* an IPv4 or IPv6 literal (without brackets: put them back in a URL when
                     * host holds ':') or a DNS name */
    int port;
};

struct wr_discovery;

/* Parse a source (the grammar above). WR_EINVAL with a message naming the bad part. */
int wr_discovery_new(const char *spec, struct wr_discovery **out, struct wr_err *err);
void wr_discovery_free(struct wr_discovery *d);
/* The nodes now: *out is an array of *n (free it). A static list never fails. */
int wr_discovery_list(struct wr_discovery *d, struct wr_node_addr **out, size_t *n,
                      struct wr_err *err);

/* The nodes of a Kubernetes PodList's JSON text (the API's documented shape, as
 * GET /api/v1/namespaces/NS/pods?labelSelector=... answers), with port as their port: what the
 * kubernetes source does with the API's answer (exposed for the unit test). */
int wr_discovery_parse_podlist(const char *json, size_t len, int port, struct wr_node_addr **out,
                               size_t *n, struct wr_err *err);
