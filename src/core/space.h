/* SPDX-License-Identifier: Apache-2.0 */
/* The state filesystem's space, which the daemon (its database and records) shares with its
 * tenants: sandboxes' writable layers and volumes, and the layers captured, built, pulled or
 * imported for them. The daemon keeps a reserve for itself, held in two ways:
 *
 *  - by the filesystem, where it keeps blocks back from ordinary writers and lets the daemon
 *    write there (ext4's reserved blocks, `tune2fs -m`, for root unless `resuid`/`resgid`
 *    give them to someone else). Tenants never write as root: sandboxes through overlayfs (which
 *    never uses reserved space) and through volumes as their own uids, the daemon's copies of
 *    their data under wr_creds_tenant (runtime/creds.h). So they stop at that line, and the
 *    daemon alone writes below it;
 *  - by admission: below the reserve the daemon starts nothing that writes for a tenant
 *    (wr_space_admit, answered 507). Where the filesystem keeps less than the reserve back, this
 *    is all that holds the difference, and a sandbox already running can write into it;
 *    wr_space_open says so at start.
 *
 * The database keeps spare pages of its own besides (store.c), so a full filesystem does not
 * stop it recording deadlines and deletes. See docs/operations.md ("Disk space"). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "../util/err.h"

/* New work that writes for a tenant an amount not known ahead needs at least this much room. */
#define WR_SPACE_MIN_ROOM (16ull << 20)

struct wr_space;

/* reserve_bytes for "the default": 1 GiB, or 5% of the filesystem where that is less. */
#define WR_SPACE_RESERVE_DEFAULT UINT64_MAX

/* Watch the filesystem of dir, keeping reserve_bytes for the daemon; logs how the reserve is
 * held. */
int wr_space_open(const char *dir, uint64_t reserve_bytes, struct wr_space **out,
                  struct wr_err *err);
void wr_space_free(struct wr_space *s);

/* Bytes tenants may still take: what the filesystem gives unprivileged writers, less the part of
 * the reserve that it does not keep back itself. 0 when the filesystem cannot be read. */
uint64_t wr_space_room(const struct wr_space *s);

/* 0 if `what` (a create, a snapshot, a build ...), which will write `need` bytes for a tenant
 * (0: an amount not known ahead, WR_SPACE_MIN_ROOM), fits above the reserve; else -1 with
 * WR_ESYS/ENOSPC (answered 507 `no_space`) saying what is left. s may be NULL (no check). */
int wr_space_admit(const struct wr_space *s, const char *what, uint64_t need, struct wr_err *err);
