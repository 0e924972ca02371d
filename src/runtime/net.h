/* SPDX-License-Identifier: Apache-2.0 */
/* Networking inside a sandbox's network namespace. For now: loopback only. */
#pragma once

/* Bring `lo` up in the calling process's network namespace. Async-signal-safe. Returns 0 or
 * -errno. */
int wr_net_loopback_up(void);
