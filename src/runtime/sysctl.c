/* SPDX-License-Identifier: Apache-2.0 */
/* Raise host-wide kernel limits that many sandboxes share (numbers from
 * /work/shared/research/perf-namespaces.md: 128 inotify instances break file watchers after
 * about 100 sandboxes; pid_max 32768 is the next cap). Never lowers a value. */
#include "sysctl.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "../util/fs.h"
#include "../util/log.h"

static const struct {
    const char *path;
    const char *name;
    uint64_t min;
} limits[] = {
    /* 4194304 is PID_MAX_LIMIT on 64-bit. Since 6.14 pid_max is per pid namespace: run this
     * in the initial one. */
    {"/proc/sys/kernel/pid_max", "kernel.pid_max", 4194304},
    /* Charged per user of the initial user namespace, so shared by every sandbox whose root
     * maps to the same host uid. */
    {"/proc/sys/fs/inotify/max_user_instances", "fs.inotify.max_user_instances", 8192},
    {"/proc/sys/fs/inotify/max_user_watches", "fs.inotify.max_user_watches", 1048576},
};

int wr_sysctl_raise_limits(struct wr_err *err)
{
    for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
        struct wr_err e = {0};
        char buf[64];
        uint64_t cur;

        if (wr_read_fileat(AT_FDCWD, limits[i].path, buf, sizeof(buf), &e) < 0) {
            log_warn("sysctl %s: %s; left as it is", limits[i].name, e.msg);
            continue;
        }
        cur = strtoull(buf, NULL, 10);
        if (cur >= limits[i].min)
            continue;
        snprintf(buf, sizeof(buf), "%" PRIu64, limits[i].min);
        if (wr_write_fileat(AT_FDCWD, limits[i].path, buf, false, &e) < 0) {
            log_warn("sysctl %s: raise %" PRIu64 " to %s: %s; left as it is", limits[i].name, cur,
                     buf, e.msg);
            continue;
        }
        log_info("sysctl %s: raised %" PRIu64 " to %s", limits[i].name, cur, buf);
    }
    return 0;
}
