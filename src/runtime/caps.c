/* SPDX-License-Identifier: Apache-2.0 */
/* Capability limits for sandboxes: the kept set, and dropping everything else from the
 * bounding, ambient and inheritable sets with raw prctl/capget/capset (no libcap, no
 * allocation), so it can run in the child between clone and exec. */
#include "caps.h"

#include <errno.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BIT(c) (UINT64_C(1) << (c))

uint64_t wr_caps_sandbox_mask(void)
{
    /* Docker's default set, plus SYS_PTRACE so root in a sandbox can debug its own processes
     * (strace, gdb); the sandbox's PID 1 is protected separately. Notably absent: SYS_ADMIN
     * (mount, namespaces), NET_ADMIN, SYS_MODULE, SYS_RAWIO, SYS_RESOURCE, DAC_READ_SEARCH
     * (open_by_handle_at). */
    return BIT(CAP_CHOWN) | BIT(CAP_DAC_OVERRIDE) | BIT(CAP_FSETID) | BIT(CAP_FOWNER) |
           BIT(CAP_MKNOD) | BIT(CAP_NET_RAW) | BIT(CAP_SETGID) | BIT(CAP_SETUID) |
           BIT(CAP_SETFCAP) | BIT(CAP_SETPCAP) | BIT(CAP_NET_BIND_SERVICE) | BIT(CAP_SYS_CHROOT) |
           BIT(CAP_KILL) | BIT(CAP_AUDIT_WRITE) | BIT(CAP_SYS_PTRACE);
}

int wr_caps_limit(uint64_t keep)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

    /* Walk every possible capability number rather than read /proc/sys/kernel/cap_last_cap
     * (a file read here is neither cheap nor guaranteed to work in a half-built sandbox); the
     * kernel answers EINVAL past the last one. Dropping CAP_SETPCAP from the bounding set
     * leaves it effective, so the loop can go on. */
    for (int cap = 0; cap < 64; cap++) {
        if (keep & BIT(cap))
            continue;
        if (prctl(PR_CAPBSET_DROP, (unsigned long)cap, 0, 0, 0) < 0) {
            if (errno == EINVAL)
                break;
            return -errno;
        }
    }
    /* Ambient capabilities survive exec for non-root programs; none are wanted. EINVAL: a
     * kernel before 4.3 has no ambient set. */
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return -errno;
    if (syscall(SYS_capget, &hdr, data) < 0)
        return -errno;
    data[0].inheritable &= (uint32_t)keep;
    data[1].inheritable &= (uint32_t)(keep >> 32);
    if (syscall(SYS_capset, &hdr, data) < 0)
        return -errno;
    return 0;
}
