/* SPDX-License-Identifier: Apache-2.0 */
/* Process exits on the whole host, from the kernel's process events connector (netlink,
 * CONFIG_PROC_EVENTS, CAP_NET_ADMIN): one socket tells the daemon which sandbox's warren-init has
 * ended, where a pidfd per sandbox would hold one of its file descriptors each (tens of thousands
 * of sandboxes do not fit under a hard RLIMIT_NOFILE of 20,000). See docs/design/density.md. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../util/err.h"

struct wr_exits;

/* Subscribe to the host's process exits. WR_EUNSUPPORTED when the kernel has no connector or
 * the caller may not listen to it (no CAP_NET_ADMIN): watch each process's pidfd instead. */
int wr_exits_open(struct wr_exits **out, struct wr_err *err);
void wr_exits_close(struct wr_exits *x);
/* The socket, nonblocking: poll it for reading, then call wr_exits_read. */
int wr_exits_fd(const struct wr_exits *x);

/* Read what has arrived, without blocking: fn(pid, arg) for each thread-group leader (a process,
 * not one of its threads) that exited. Each is a hint, not a proof: check the process before
 * acting on it (wr_sandbox_alive), as anyone on the host with CAP_NET_ADMIN can send to the
 * socket. *lost is set when the kernel dropped events (the socket's buffer filled): the caller
 * must then check every process it watches itself. Returns the number of exits seen, or -1. */
int wr_exits_read(struct wr_exits *x, void (*fn)(pid_t pid, void *arg), void *arg, bool *lost,
                  struct wr_err *err);
