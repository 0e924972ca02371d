/* SPDX-License-Identifier: Apache-2.0 */
/* The credentials of the daemon's own writes of tenant data: a sandbox's files copied into a
 * layer, image layers unpacked from a registry or an archive, a build's context. Such a write
 * runs with CAP_SYS_RESOURCE out of the effective set and an fsuid and fsgid that are neither
 * root's nor any sandbox's (WR_TENANT_FSID), so the filesystem refuses it where it refuses a
 * sandbox's own writes: blocks reserved for root (ext4's `tune2fs -m`, which resuid/resgid may
 * also grant) and quota limits stay out of its reach, and a tenant cannot fill the state
 * filesystem through the daemon. Every other capability stays effective: owners, modes, device
 * nodes and trusted.* xattrs are set as before. Files created meanwhile are owned by
 * WR_TENANT_FSID until chowned.
 *
 * Linux credentials belong to the thread: these change the calling thread's only, and must be
 * undone on the same thread (the loop's workers are reused). */
#pragma once

#include <linux/capability.h>
#include <stdbool.h>

#include "../util/err.h"

#define WR_TENANT_FSID 4294967294u /* (uid_t)-2: no range of the id pool reaches it */

struct wr_creds_saved {
    struct __user_cap_data_struct caps[2];
    bool active;
};

/* Switch the calling thread to the credentials of tenant writes; *saved restores them. */
int wr_creds_tenant_begin(struct wr_creds_saved *saved, struct wr_err *err);
/* Restore what wr_creds_tenant_begin saved (a no-op if it failed or was not called). */
void wr_creds_tenant_end(struct wr_creds_saved *saved);
