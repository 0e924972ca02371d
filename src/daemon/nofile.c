/* SPDX-License-Identifier: Apache-2.0 */
/* RLIMIT_NOFILE: systemd starts services with a soft limit of 1024 (for select(2), which
 * nothing here uses) and a hard limit of 524288. The daemon raises its own limit only after the
 * zygote is forked, so that sandboxes keep the inherited one. */
#include "nofile.h"

#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>

#define MIN_CONNS 16

static uint64_t nr_open(void)
{
    unsigned long long v = 0;
    FILE *f = fopen("/proc/sys/fs/nr_open", "re");

    if (f == NULL)
        return 1048576; /* the kernel's default */
    if (fscanf(f, "%llu", &v) != 1)
        v = 1048576;
    fclose(f);
    return v;
}

int wr_nofile_raise(struct wr_nofile *out)
{
    struct rlimit rl;
    uint64_t top = nr_open();

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -1;
    out->soft_was = out->soft = rl.rlim_cur;
    out->hard_was = out->hard = rl.rlim_max;
    if (rl.rlim_max < top) {
        struct rlimit up = {.rlim_cur = top, .rlim_max = top};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0) {
            out->soft = out->hard = top;
            return 0;
        }
    }
    /* The soft limit can be at most nr_open, even under an unlimited hard one. */
    rl.rlim_cur = rl.rlim_max < top ? rl.rlim_max : top;
    if (rl.rlim_cur <= out->soft)
        return 0;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -1;
    out->soft = rl.rlim_cur;
    return 0;
}

uint32_t wr_nofile_tcp_conns(uint64_t nofile, uint64_t sandboxes)
{
    uint64_t past = nofile > WR_FDS_RESERVED ? nofile - WR_FDS_RESERVED : 0;
    uint64_t want = sandboxes * WR_FDS_PER_SANDBOX;
    uint64_t conns = past > want ? (past - want) / WR_FDS_PER_CONN : 0;
    uint64_t floor = past / 4 / WR_FDS_PER_CONN;

    if (floor < MIN_CONNS)
        floor = MIN_CONNS;
    if (conns < floor)
        conns = floor;
    return conns > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)conns;
}

uint64_t wr_nofile_sandboxes(uint64_t nofile, uint64_t conns)
{
    uint64_t used = WR_FDS_RESERVED + conns * WR_FDS_PER_CONN;

    return nofile > used ? (nofile - used) / WR_FDS_PER_SANDBOX : 0;
}
