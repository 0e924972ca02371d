/* SPDX-License-Identifier: Apache-2.0 */
/* Capabilities of a sandbox. Root in a sandbox holds capabilities only inside the sandbox's own
 * user namespace; on top of that the bounding set is cut to Docker's default set plus
 * CAP_SYS_PTRACE, so nothing in a sandbox can mount, remount, or reconfigure its namespaces.
 * That is what keeps read-only mounts handed in as detached fds read-only (see
 * docs/design/isolation.md). */
#pragma once

#include <stdint.h>

/* The capabilities a sandbox keeps, as a bit mask of CAP_* numbers. */
uint64_t wr_caps_sandbox_mask(void);

/* Drop every capability not in keep from the bounding set, and from the ambient and inheritable
 * sets. Async-signal-safe (raw prctl/capset). Returns 0 or -errno. */
int wr_caps_limit(uint64_t keep);
