/* SPDX-License-Identifier: Apache-2.0 */
/* Raise host-wide kernel limits that many sandboxes share, where what they count is bounded per
 * sandbox some other way (docs/design/isolation.md, "Shared kernel counters"). Never lowers a
 * value. */
#include "sysctl.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "../util/fs.h"
#include "../util/log.h"

#define UNBOUNDED 9223372036854775807ull /* LONG_MAX: what systemd sets fs.file-max to */

static const struct {
    const char *path;
    const char *name;
    uint64_t min;
} limits[] = {
    /* 4194304 is PID_MAX_LIMIT on 64-bit. Since 6.14 pid_max is per pid namespace: run this
     * in the initial one. A sandbox's share is its pids cgroup. */
    {"/proc/sys/kernel/pid_max", "kernel.pid_max", 4194304},
    /* Counted for everyone (root too), and sized by default to an eighth of memory in kernel
     * stacks; each sandbox's tasks are bounded by its pids cgroup and their stacks are charged
     * to its memory cgroup, so pid_max is the real cap. */
    {"/proc/sys/kernel/threads-max", "kernel.threads-max", 4194304},
    /* Per user: charged to the (host) owner of each sandbox's user namespace, its range's root,
     * so these are each sandbox's own limits. */
    {"/proc/sys/fs/inotify/max_user_instances", "fs.inotify.max_user_instances", 8192},
    {"/proc/sys/fs/inotify/max_user_watches", "fs.inotify.max_user_watches", 1048576},
    /* Global counts of objects charged to the memory cgroup of whoever made them (struct file,
     * aio rings, ttys): once one sandbox reached the host's count, every process without
     * CAP_SYS_ADMIN on the host (all other sandboxes) got ENFILE, EAGAIN or ENOSPC. Each
     * sandbox's memory limit bounds them instead (and for terminals its devpts max=). */
    {"/proc/sys/fs/file-max", "fs.file-max", UNBOUNDED},
    {"/proc/sys/fs/aio-max-nr", "fs.aio-max-nr", UNBOUNDED},
    {"/proc/sys/kernel/pty/max", "kernel.pty.max", 1048576}, /* the kernel's maximum */
    /* Per user in the initial user namespace, and the daemon (root) makes every sandbox's user
     * namespace and every network slot's namespace (a networked sandbox joins its slot's): the
     * defaults (threads-max / 2: 96,367 on a 24 GiB host, far less on a small one) hold the
     * count of sandboxes. 65,536 is the id pool's 32,752 sandboxes twice over. A sandbox's own
     * namespaces are charged to its range's root, and nested ones are denied by seccomp.
     * Raising them takes CAP_SYS_RESOURCE. */
    {"/proc/sys/user/max_user_namespaces", "user.max_user_namespaces", 65536},
    {"/proc/sys/user/max_net_namespaces", "user.max_net_namespaces", 65536},
    {"/proc/sys/user/max_mnt_namespaces", "user.max_mnt_namespaces", 65536},
    {"/proc/sys/user/max_pid_namespaces", "user.max_pid_namespaces", 65536},
    {"/proc/sys/user/max_ipc_namespaces", "user.max_ipc_namespaces", 65536},
    {"/proc/sys/user/max_uts_namespaces", "user.max_uts_namespaces", 65536},
    {"/proc/sys/user/max_cgroup_namespaces", "user.max_cgroup_namespaces", 65536},
    /* Mounts per mount namespace: the host's holds a bind mount per network slot (and what
     * propagates into it); a mount is charged to the memory cgroup of whoever made it. */
    {"/proc/sys/fs/mount-max", "fs.mount-max", 1048576},
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
