/* SPDX-License-Identifier: Apache-2.0 */
/* The host's memory, which every sandbox shares. A sandbox's memory limit is a cap, not a
 * reservation: most sandboxes sit idle far below theirs. So admission looks at two things
 * (docs/operations.md, "Memory"):
 *
 *  - what is committed: the limits of the sandboxes that hold memory (running or paused in
 *    memory), summed, against --max-memory, which defaults to the host's RAM times
 *    --memory-overcommit (100: 32,752 idle sandboxes of 64 MiB fit in 24 GiB);
 *  - what is really in use: the kernel's MemAvailable must stay above --memory-reserve (5 % of
 *    RAM, at least 256 MiB, at most 4 GiB) before a sandbox starts, so that a host whose
 *    sandboxes do use their memory stops admitting before it swaps or OOM-kills.
 *
 * Both refusals are 503 `capacity` (the host's, not the team's). */
#pragma once

#include <stdint.h>

#include "../util/err.h"

/* The defaults of the daemon's flags. */
#define WR_MEMORY_OVERCOMMIT  100.0
#define WR_MEMORY_RESERVE_PCT 5
#define WR_MEMORY_RESERVE_MIN (256ull << 20)
#define WR_MEMORY_RESERVE_MAX (4ull << 30)

/* The host's RAM in bytes (sysinfo), 0 if unknown. */
uint64_t wr_memory_total(void);

/* The kernel's MemAvailable in bytes (/proc/meminfo), read at most every 200 ms (a burst of
 * creates reads it once); -1 with err if it cannot be read. */
int wr_memory_available(uint64_t *bytes, struct wr_err *err);
