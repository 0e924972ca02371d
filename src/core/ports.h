/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox's TCP ports from the daemon (src/core/ports.c): a connected socket to a port inside
 * the sandbox, and the list of what listens there. Two ways in: a TCP connect to the sandbox's
 * slot address (a networked sandbox; the kernel's path), and warren-init's PORT_OPEN on a
 * connection of its own (init connects to the port on the sandbox's loopback and passes the
 * socket back with SCM_RIGHTS). The slot comes first; init is the way when the sandbox has no
 * slot or the slot address refuses (a server bound to 127.0.0.1). Either way the daemon holds a
 * socket to the server, with no relay inside the sandbox.
 *
 * All calls on the loop thread. A request that returns non-NULL gets its callback exactly once,
 * never before the call returns, unless it is cancelled first. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/proto.h"
#include "../util/err.h"

struct wr_manager;
struct wr_live_sb;
struct wr_port_req;

/* fd: a connected, nonblocking, close-on-exec TCP socket (the callee owns it), or -1 with err:
 * WR_EUPSTREAM with sys_errno ECONNREFUSED when nothing listens on the port ("port is not
 * open"); WR_ECONFLICT when the sandbox stopped or was paused meanwhile; WR_EUPSTREAM or
 * WR_EPROTO when its warren-init did not answer as it should; WR_ETIMEOUT after 10 s. */
typedef void (*wr_port_open_cb)(void *arg, int fd, const struct wr_err *err);

/* Open a connection to `port` (1-65535) of the running sandbox `id` of team (NULL: any).
 * Returns the request, or NULL with err: WR_ENOTFOUND, WR_ECONFLICT (paused, not running),
 * WR_EINVAL (port). */
struct wr_port_req *wr_manager_port_open(struct wr_manager *m, const char *team, const char *id,
                                         uint16_t port, wr_port_open_cb cb, void *arg,
                                         struct wr_err *err);
/* The same for a sandbox already found (wr_manager_find). */
struct wr_port_req *wr_live_sb_port_open(struct wr_live_sb *sb, uint16_t port, wr_port_open_cb cb,
                                         void *arg, struct wr_err *err);

/* The TCP sockets listening inside the sandbox (both families, every address, deduplicated):
 * items (valid during the call) or err. */
typedef void (*wr_ports_list_cb)(void *arg, const struct wr_port_listen *items, size_t n,
                                 const struct wr_err *err);
struct wr_port_req *wr_manager_ports_list(struct wr_manager *m, const char *team, const char *id,
                                          wr_ports_list_cb cb, void *arg, struct wr_err *err);
struct wr_port_req *wr_live_sb_ports_list(struct wr_live_sb *sb, wr_ports_list_cb cb, void *arg,
                                          struct wr_err *err);

/* Drop a request: its callback is not called; a socket it obtained is closed. NULL is fine. */
void wr_port_req_cancel(struct wr_port_req *r);

/* What the exposed-port proxy needs to know of a sandbox (valid while sb is). */
const char *wr_live_sb_team(const struct wr_live_sb *sb);
/* E2B's allowPublicTraffic: false: port requests need the sandbox's traffic token. */
bool wr_live_sb_ports_private(const struct wr_live_sb *sb);
/* E2B's maskRequestHost, "${PORT}" not yet replaced, or NULL. */
const char *wr_live_sb_mask_host(const struct wr_live_sb *sb);
/* The sandbox's slot address (host byte order), 0 without one. */
uint32_t wr_live_sb_net_addr(const struct wr_live_sb *sb);
