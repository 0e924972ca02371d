/* SPDX-License-Identifier: Apache-2.0 */
/* Per-thread credentials for the daemon's writes of tenant data (see creds.h). The kernel keeps
 * credentials per thread; the raw system calls change the caller's only, as create_as in mount.c
 * does. */
#include "creds.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int capget_self(struct __user_cap_data_struct caps[2])
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
    return (int)syscall(SYS_capget, &hdr, caps);
}

static int capset_self(const struct __user_cap_data_struct caps[2])
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
    return (int)syscall(SYS_capset, &hdr, caps);
}

int wr_creds_tenant_begin(struct wr_creds_saved *saved, struct wr_err *err)
{
    struct __user_cap_data_struct caps[2];

    saved->active = false;
    if (capget_self(saved->caps) < 0)
        return wr_err_sys(err, "capget");
    /* Leaving fsuid 0 drops the filesystem capabilities from the effective set; the capset
     * after it raises them again, all but CAP_SYS_RESOURCE. */
    (void)syscall(SYS_setfsgid, WR_TENANT_FSID);
    (void)syscall(SYS_setfsuid, WR_TENANT_FSID);
    memcpy(caps, saved->caps, sizeof(caps));
    for (int i = 0; i < 2; i++)
        caps[i].effective = caps[i].permitted;
    caps[CAP_TO_INDEX(CAP_SYS_RESOURCE)].effective &= ~CAP_TO_MASK(CAP_SYS_RESOURCE);
    if (capset_self(caps) < 0) {
        int e = errno;
        (void)syscall(SYS_setfsuid, 0);
        (void)syscall(SYS_setfsgid, 0);
        (void)capset_self(saved->caps);
        return wr_err_set(err, WR_ESYS, e, "capset");
    }
    saved->active = true;
    return 0;
}

void wr_creds_tenant_end(struct wr_creds_saved *saved)
{
    if (!saved->active)
        return;
    saved->active = false;
    (void)syscall(SYS_setfsuid, 0);
    (void)syscall(SYS_setfsgid, 0);
    (void)capset_self(saved->caps);
}
