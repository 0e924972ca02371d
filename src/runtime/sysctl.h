/* SPDX-License-Identifier: Apache-2.0 */
/* Host kernel limits that many sandboxes run into (see docs/operations.md). */
#pragma once

#include "../util/err.h"

/* Raise kernel.pid_max, kernel.threads-max, fs.inotify.max_user_instances,
 * fs.inotify.max_user_watches, fs.file-max, fs.aio-max-nr, kernel.pty.max, user.max_*_namespaces
 * and fs.mount-max when they are below what tens of thousands of sandboxes need; never lower
 * them. Each one raised is logged (info). A limit that cannot be raised is logged
 * and left as it is. Returns 0. */
int wr_sysctl_raise_limits(struct wr_err *err);
