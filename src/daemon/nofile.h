/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's file descriptors: RLIMIT_NOFILE raised at start, and how the limit is shared
 * between a fixed reserve, the sandboxes and the TCP connections of the API. */
#pragma once

#include <stdint.h>

/* Measured (docs/operations.md): a running sandbox holds 5 of the daemon's fds: two sockets to
 * its warren-init, its pidfd, its run directory's lock and its id range's lock. */
#define WR_FDS_PER_SANDBOX 5
/* A TCP connection, and the agent connection of the one download, upload or watch it may be
 * serving. */
#define WR_FDS_PER_CONN 2
/* Whatever is neither: the unix socket's connections, the state database and its WAL, the
 * listeners, the log, the zygote's channel, libuv's and the runtime's own. */
#define WR_FDS_RESERVED 256

struct wr_nofile {
    uint64_t soft_was, hard_was; /* as inherited */
    uint64_t soft, hard;         /* now */
};

/* Raise the soft limit to the hard one, and both to fs.nr_open first where the kernel lets us
 * (CAP_SYS_RESOURCE). Never lowers anything. Fills *out; returns 0, or -1 (errno) if even the
 * soft limit could not be raised. */
int wr_nofile_raise(struct wr_nofile *out);

/* TCP connections that `nofile` fds can serve beside WR_FDS_RESERVED and `sandboxes` sandboxes.
 * When they do not fit, a floor: a quarter of the fds past the reserve (then fewer sandboxes fit
 * than asked; see wr_nofile_sandboxes). */
uint32_t wr_nofile_tcp_conns(uint64_t nofile, uint64_t sandboxes);

/* Sandboxes that fit beside WR_FDS_RESERVED and `conns` TCP connections. */
uint64_t wr_nofile_sandboxes(uint64_t nofile, uint64_t conns);
