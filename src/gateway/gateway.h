/* SPDX-License-Identifier: Apache-2.0 */
/* The gateway role (warrend --role gateway, docs/deploy.md): a stateless front for many node
 * daemons. It authenticates clients against the keys in PostgreSQL, places each create on a
 * node (filter, preference, best of K; a node that refuses sends it to the next), routes every
 * request for a sandbox to the node that holds it (its API paths, the E2B routes and
 * <port>-<id>.<domain> hosts), and reconciles its records against what the nodes say they hold.
 * Several gateways may share one database; a gateway holds nothing a restart would lose.
 *
 * It needs no privilege and never touches the kernel's sandboxes: HTTP and SQL only. */
#pragma once

#include <stdint.h>

struct wr_gateway_config {
    const char *version;
    const char *listen_host; /* the API's address (NULL: 0.0.0.0) */
    int listen_port;         /* 0: an ephemeral port, said on the ready line */
    const char *database;    /* a libpq connection string or postgresql:// URI */
    const char *discovery;   /* where the nodes are (gateway/discover.h) */
    const char *node_token;  /* the secret the nodes take (its text) */
    /* The first admin key: read from this file if it exists (and made an admin key of the
     * database if it is not one yet), else made and written here (mode 0600). */
    const char *admin_key_file;
    const char *domain;          /* <port>-<id>.<domain> hosts (and E2B's domain); NULL: none */
    const char *object_store;    /* where nodes publish moved sandboxes; NULL: no moves */
    const char *region;          /* named in Warren-Region on every response; NULL: none */
    uint32_t health_interval_ms; /* how often each node's /node/info is read (0: 2000) */
    uint32_t node_dead_after_ms; /* silence after which a node is unhealthy (0: 10000) */
};

/* Run the gateway until SIGTERM or SIGINT. Returns the process's exit status. */
int wr_gateway_main(const struct wr_gateway_config *cfg);
