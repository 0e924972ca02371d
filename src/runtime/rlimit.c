/* SPDX-License-Identifier: Apache-2.0 */
/* The rlimits a sandbox's processes start with. */
#include "rlimit.h"

#include <errno.h>
#include <stddef.h>
#include <sys/resource.h>

#define MIB (1024ul * 1024ul)

static const struct {
    __rlimit_resource_t resource;
    rlim_t soft, hard;
} limits[] = {
    /* 1024 keeps select() working; a program that needs more raises its soft limit itself (as
     * systemd's and Docker's defaults expect). struct file is charged to the sandbox's memory
     * cgroup, which bounds the total across its processes. */
    {RLIMIT_NOFILE, 1024, 524288},
    /* Counted per user of the sandbox's user namespace; the pids cgroup is the limit. */
    {RLIMIT_NPROC, RLIM_INFINITY, RLIM_INFINITY},
    /* These three are also the sandbox-wide totals, taken from the creator's (the zygote's)
     * limits when the user namespace is made: charged per user and, above it, to the
     * namespace's owner on the host, the range's root. */
    {RLIMIT_MEMLOCK, WR_RLIMIT_MEMLOCK, WR_RLIMIT_MEMLOCK},
    {RLIMIT_MSGQUEUE, 819200, 819200},
    {RLIMIT_SIGPENDING, 65536, 65536},
    {RLIMIT_CORE, 0, RLIM_INFINITY},
    {RLIMIT_STACK, 8 * MIB, RLIM_INFINITY},
    {RLIMIT_CPU, RLIM_INFINITY, RLIM_INFINITY},
    {RLIMIT_FSIZE, RLIM_INFINITY, RLIM_INFINITY},
    {RLIMIT_DATA, RLIM_INFINITY, RLIM_INFINITY},
    {RLIMIT_AS, RLIM_INFINITY, RLIM_INFINITY},
    {RLIMIT_RSS, RLIM_INFINITY, RLIM_INFINITY},
    {RLIMIT_LOCKS, RLIM_INFINITY, RLIM_INFINITY},
    {RLIMIT_NICE, 0, 0},
    {RLIMIT_RTPRIO, 0, 0},
    {RLIMIT_RTTIME, RLIM_INFINITY, RLIM_INFINITY},
};

int wr_rlimits_apply(void)
{
    int first = 0;

    for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
        struct rlimit cur, r = {limits[i].soft, limits[i].hard};

        if (getrlimit(limits[i].resource, &cur) < 0) {
            first = first ? first : -errno;
            continue;
        }
        if (r.rlim_max > cur.rlim_max)
            r.rlim_max = cur.rlim_max;
        if (r.rlim_cur > r.rlim_max)
            r.rlim_cur = r.rlim_max;
        if (setrlimit(limits[i].resource, &r) < 0 && first == 0)
            first = -errno;
    }
    return first;
}
