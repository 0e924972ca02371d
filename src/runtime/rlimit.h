/* SPDX-License-Identifier: Apache-2.0 */
/* Resource limits of a sandbox's processes: set explicitly in every sandbox's child, never
 * inherited from whoever created it (the daemon raises its own RLIMIT_NOFILE, a user's shell may
 * have any limits at all). See docs/design/isolation.md, "Shared kernel counters". */
#pragma once

/* Locked memory of a sandbox's process, soft and hard (also the gvisor backend's hard limit
 * for warren-init to set: runsc's default is 64 KiB). */
#define WR_RLIMIT_MEMLOCK (8ul * 1024ul * 1024ul)

/* Set every rlimit of the calling process to the sandbox's value, each clamped to the hard limit
 * it has now (raising a hard limit takes CAP_SYS_RESOURCE in the host's user namespace, which a
 * sandbox never has). Async-signal-safe, no allocation. Tries every one; returns 0 or the first
 * -errno (gVisor's kernel refuses some).
 *
 * Called in the child before it becomes warren-init, so every process of the sandbox starts
 * from these, and by the zygote on itself at start: a user namespace takes its sandbox-wide
 * caps on locked memory, message queues and pending signals from its creator's limits. */
int wr_rlimits_apply(void);
