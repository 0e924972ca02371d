/* SPDX-License-Identifier: Apache-2.0 */
/* Walks of directory trees that someone else controls (a sandbox's files, a layer captured from
 * them, a volume), bounded whatever the tree holds:
 *
 * - stack: no recursion; the walk keeps a heap stack of frames, one per directory it is in;
 * - fds: each frame holds its directory's fd, so a walk enters at most max_depth levels (deeper
 *   fails with WR_EINVAL naming the limit and the path), except a removal, which moves what is
 *   deeper up to the top and goes on (WR_WALK_REMOVE);
 * - paths: every entry is reached from its parent's fd (openat, fstatat with O_NOFOLLOW,
 *   AT_SYMLINK_NOFOLLOW), never by a path from the top and never through "..": a path may be
 *   longer than PATH_MAX, a symlink is never followed, and a tree renamed while it is walked (a
 *   running sandbox) cannot lead the walk out of it. Mount points are refused (WR_ECONFLICT);
 * - time: linear in the number of entries and the length of their paths (built for messages and
 *   digests). An entry that vanishes while it is walked is skipped.
 *
 * Also a hash set of inodes, for the walks that see each hard-linked inode once. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "err.h"

/* The deepest directory a walk enters by default, the top being depth 0. */
#define WR_WALK_MAX_DEPTH 1024
/* How deep a removal goes before it moves a directory up (WR_WALK_REMOVE). */
#define WR_WALK_REMOVE_DEPTH 128
/* The names of one directory held at once by a sorted walk, in bytes (WR_EINVAL past it). */
#define WR_WALK_MAX_NAMES (256u << 20)
/* A budget of entries for walks of trees that may change as they are walked (WR_ELIMIT past
 * it): a running sandbox renaming entries ahead of the walk must not keep it going forever. */
#define WR_WALK_LIVE_ENTRIES (1u << 25)

/* A directory's entries in strcmp order (its names are read whole first: memory in proportion
 * to its width). Otherwise in the order the filesystem gives them, read as the walk goes. */
#define WR_WALK_SORTED (1u << 0)
/* A removal: a directory deeper than max_depth (or one that cannot be opened for want of fds)
 * is renamed into the nearest root (the top, or a directory entered with crossed set) under a
 * fresh name (.warren-deep-N), and that root is read again once done: nothing is left for want
 * of depth. Not with WR_WALK_SORTED. */
#define WR_WALK_REMOVE (1u << 1)
/* Enter a directory on another device that is not a mount point (a btrfs subvolume), with
 * crossed set. Otherwise any change of device is refused as a mount point. */
#define WR_WALK_CROSS (1u << 2)
/* A missing top is an empty walk (0), not an error. */
#define WR_WALK_MISSING_OK (1u << 3)

struct wr_walk_ent {
    int dirfd;        /* the directory holding the entry (for the top: the dfd given) */
    const char *name; /* the entry's name in dirfd (for the top: the name given) */
    const char *path; /* the prefix, then "/" and the entry's path below the top */
    size_t path_len;
    struct stat st; /* the entry's own (a directory's: of the fd opened) */
    int fd;         /* a directory: open O_RDONLY, owned by the walk; anything else: -1 */
    unsigned depth; /* the top is 0 */
    bool crossed;   /* a directory on another device than its parent (WR_WALK_CROSS) */
};

/* What visit() returns for a directory not to be entered. */
#define WR_WALK_SKIP 1

struct wr_walk {
    unsigned flags;
    unsigned max_depth;   /* 0: WR_WALK_MAX_DEPTH, or WR_WALK_REMOVE_DEPTH with WR_WALK_REMOVE */
    uint64_t max_entries; /* entries visited before WR_ELIMIT; 0: no limit */
    const char *prefix;   /* what paths start with; NULL: the top's name */
    /* Every entry, a directory before its entries: 0 to go on, WR_WALK_SKIP (a directory) not
     * to enter it, -1 with err to stop the walk. */
    int (*visit)(const struct wr_walk_ent *e, void *ctx, struct wr_err *err);
    /* Every directory entered, after its entries (NULL: nothing). 0, or -1 with err. */
    int (*leave)(const struct wr_walk_ent *e, void *ctx, struct wr_err *err);
    void *ctx;
};

/* Walk dfd/name (name may be a path, whose last component is not followed) and, for a
 * directory, everything below it. Returns 0, or -1 with err (the visitor's, or the walk's:
 * WR_EINVAL past max_depth or WR_WALK_MAX_NAMES, WR_ELIMIT past max_entries, WR_ECONFLICT at a
 * mount point, WR_ESYS). */
int wr_walk_at(int dfd, const char *name, const struct wr_walk *w, struct wr_err *err);

/* ---- a set of inodes --------------------------------------------------------------------- */

/* Open addressing on (dev, ino), at most half full: constant time per operation. Zero it to
 * start; wr_inodes_fini frees it. */
struct wr_inodes {
    struct wr_inode_slot *slot;
    size_t cap, n;
};

/* Add st's inode with value (a caller's number) and return true; false if it is in the set
 * already, with *old (when not NULL) the value it was added with. */
bool wr_inodes_add(struct wr_inodes *s, const struct stat *st, uint64_t value, uint64_t *old);

void wr_inodes_fini(struct wr_inodes *s);
