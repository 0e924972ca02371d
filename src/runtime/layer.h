/* SPDX-License-Identifier: Apache-2.0 */
/* Layer directories on disk: the writable layer of a sandbox ("home": upper/ and work/ of its
 * overlay) and the read-only layers captured from it (snapshots, build steps) or unpacked from
 * images. A layer directory holds the layer's tree in fs/, stored with the sandbox-side ids
 * (root is 0:0): sandboxes see it through idmapped mounts, so one copy serves every uid range.
 *
 * Where the directory is on btrfs, a home is a subvolume and a capture is a snapshot of it:
 * constant time whatever the size of the changes. Elsewhere a capture copies the tree, cloning
 * each file's extents (FICLONE) where the filesystem can (XFS with reflink, btrfs) and copying
 * the bytes otherwise. wr_fs_probe says which path is active.
 *
 * Trees are walked with src/util/walk.h, whatever the sandbox made of them: no recursion, one fd
 * per level, nothing followed, mount points refused. Digests, copies and usage enter at most
 * WR_WALK_MAX_DEPTH (1024) levels and fail past them with WR_EINVAL naming the limit and the
 * path; removal goes all the way down whatever the depth.
 *
 * All functions block on disk I/O: run them on worker threads. They are thread-safe for
 * different paths. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "../util/err.h"

enum wr_fs_kind { WR_FS_OTHER, WR_FS_BTRFS, WR_FS_XFS, WR_FS_EXT4, WR_FS_TMPFS };

struct wr_fs_info {
    enum wr_fs_kind kind;
    bool subvolumes; /* homes are btrfs subvolumes; captures are snapshots */
    bool reflink;    /* copies clone extents */
};

/* What the filesystem holding dir (an existing directory) can do. */
int wr_fs_probe(const char *dir, struct wr_fs_info *info, struct wr_err *err);
/* "btrfs", "xfs", "ext4", "tmpfs" or "other". */
const char *wr_fs_kind_name(enum wr_fs_kind kind);
/* The capture path in use: "btrfs-snapshot", "reflink-copy" or "copy". */
const char *wr_fs_capture_name(const struct wr_fs_info *info);

/* Make path (which must not exist) the home of a writable layer: a btrfs subvolume when
 * info->subvolumes, else a directory; mode 0700, owned by root. upper/ and work/ are made by
 * the runtime when it builds the overlay. */
int wr_layer_home_create(const char *path, const struct wr_fs_info *info, struct wr_err *err);

/* Capture the upper/ of the writable layer at home into dst (which must not exist) as a layer
 * directory (dst/fs). The caller keeps the sandbox frozen during the call: a btrfs home is
 * snapshotted (dst is a writable subvolume until wr_layer_seal; wr_layer_capture_finish
 * completes it once the sandbox is thawed), any other is copied, keeping
 * owners, modes, times, hard links, device nodes (overlay whiteouts) and extended attributes
 * (the opaque-directory mark) except overlayfs' private bookkeeping ones. On failure nothing is
 * left at dst. */
int wr_layer_capture(const char *home, const char *dst, const struct wr_fs_info *info,
                     struct wr_err *err);
/* After the sandbox is thawed again: finish the layer wr_layer_capture made at dst (a btrfs
 * snapshot still holds the home's upper/ and work/: the rest of the arranging is kept out of
 * the freeze). On failure dst is removed. */
int wr_layer_capture_finish(const char *dst, struct wr_err *err);

/* Before a freeze: write out the dirty data of the home's filesystem (btrfs only), so that the
 * snapshot taken while the sandbox is frozen has little left to flush. Elsewhere a no-op: a
 * copy reads the page cache anyway. */
void wr_layer_presync(const char *home, const struct wr_fs_info *info);

/* Copy the tree at src into dst/fs (dst must not exist) the way wr_layer_capture copies, for
 * trees that are not homes (an unpacked image, a directory template). */
int wr_layer_copy_tree(const char *src, const char *dst, const struct wr_fs_info *info,
                       struct wr_err *err);

/* A layer at dst/fs (dst must not exist) holding the tree at src (a layer's fs, or a directory
 * template's root) below prefix (absolute, e.g. "/.warren/services/db"): the root of a Compose
 * service inside its sandbox. Regular files are hard links to src's where the filesystem allows
 * (read-only layers share inodes), copies elsewhere; the prefix's directories are 0:0, 0755. */
int wr_layer_relocate(const char *src, const char *dst, const char *prefix,
                      const struct wr_fs_info *info, struct wr_err *err);

/* The content digest of the layer at dir ("sha256:" + 64 hex; 72 bytes with the NUL): a SHA-256
 * over its tree in name order, covering each entry's name, type, mode, owner, device number,
 * link target, content and extended attributes (not times). *bytes gets the apparent size of its
 * files. Equal trees give equal digests, whatever their path or filesystem. WR_EINVAL past 1024
 * levels or for a directory with more than WR_WALK_MAX_NAMES bytes of names. */
int wr_layer_digest(const char *dir, char digest[72], uint64_t *bytes, struct wr_err *err);

/* Make a captured layer read-only where the filesystem can (a btrfs subvolume's ro flag). */
int wr_layer_seal(const char *dir, struct wr_err *err);

/* Undo wr_layer_seal (a read-only subvolume cannot be renamed, e.g. out of the store). */
int wr_layer_unseal(const char *dir, struct wr_err *err);

/* Remove a layer directory or a home: subvolumes are deleted as subvolumes (whole, unless they
 * hold subvolumes of their own, which go first), other trees entry by entry, whatever their
 * depth. 0 also when it does not exist. */
int wr_layer_remove(const char *dir, struct wr_err *err);

/* Bytes in use by the tree at dir (allocated blocks, each hard-linked inode once). The tree may
 * be a running sandbox's: WR_ELIMIT past WR_WALK_LIVE_ENTRIES entries. */
int wr_layer_usage(const char *dir, uint64_t *bytes, struct wr_err *err);
