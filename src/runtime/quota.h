/* SPDX-License-Identifier: Apache-2.0 */
/* Disk limits for a sandbox's writable layer (its home, see layer.h): a btrfs qgroup on the
 * home's subvolume, or a project quota where the filesystem (ext4, XFS) is mounted with project
 * quotas on. Where neither is possible the limit is refused, never ignored. Blocking; thread-safe
 * for different homes. */
#pragma once

#include <stdint.h>

#include "../util/err.h"

/* How the filesystem holding dir can enforce a limit: "btrfs-qgroup", "project-quota", or NULL
 * with *why set to the reason it cannot. */
const char *wr_quota_method(const char *dir, const char **why);

/* Limit the home (a btrfs subvolume, or a directory on a project-quota filesystem, still empty)
 * to bytes. project is the project id to use for project quotas (unique per sandbox, never 0).
 * WR_EUNSUPPORTED, saying why, where the filesystem cannot enforce it. */
int wr_quota_limit(const char *home, uint64_t bytes, uint32_t project, struct wr_err *err);
