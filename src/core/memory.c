/* SPDX-License-Identifier: Apache-2.0 */
#include "memory.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <time.h>

#include "../util/cleanup.h"
#include "core_int.h"

#define AVAILABLE_TTL_NS (200ull * 1000 * 1000)

uint64_t wr_memory_total(void)
{
    struct sysinfo si;

    if (sysinfo(&si) != 0)
        return 0;
    return (uint64_t)si.totalram * si.mem_unit;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int wr_memory_available(uint64_t *bytes, struct wr_err *err)
{
    /* The loop thread's cache (admission runs there). */
    static uint64_t cached, read_at;
    uint64_t now = mono_ns();
    _cleanup_fclose_ FILE *f = NULL;
    char line[128];
    uint64_t kb;

    if (read_at != 0 && now - read_at < AVAILABLE_TTL_NS) {
        *bytes = cached;
        return 0;
    }
    f = fopen("/proc/meminfo", "re");
    if (f == NULL)
        return wr_err_sys(err, "open /proc/meminfo");
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "MemAvailable: %" SCNu64 " kB", &kb) == 1) {
            cached = kb << 10;
            read_at = now;
            *bytes = cached;
            return 0;
        }
    return wr_err_set(err, WR_EUNSUPPORTED, 0, "/proc/meminfo has no MemAvailable");
}

int wr__memory_admit(struct wr_manager *m, uint64_t memory, const char *what, struct wr_err *err)
{
    uint64_t avail;
    struct wr_err e2;

    if (m->committed + memory > m->cfg.max_memory_bytes) {
        uint64_t have =
            m->cfg.max_memory_bytes > m->committed ? m->cfg.max_memory_bytes - m->committed : 0;
        return wr_err_set(err, WR_ELIMIT, 0,
                          "not enough memory to commit for the %s: %" PRIu64 " MiB asked, %" PRIu64
                          " MiB left",
                          what, memory >> 20, have >> 20);
    }
    /* An unreadable /proc/meminfo leaves the commit check alone to decide. */
    if (wr_memory_available(&avail, &e2) == 0 && avail < m->cfg.memory_reserve_bytes)
        return wr_err_set(err, WR_ELIMIT, 0,
                          "the host's memory is in use: %" PRIu64
                          " MiB available, below the %" PRIu64
                          " MiB kept free (--memory-reserve); the %s waits",
                          avail >> 20, m->cfg.memory_reserve_bytes >> 20, what);
    return 0;
}
