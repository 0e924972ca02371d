/* SPDX-License-Identifier: Apache-2.0 */
/* What differs between two overlay trees that share their bottom layers: a sandbox's files
 * against its image (the image's layers against the same layers plus the writable layer's
 * upper/), against a snapshot of it, or against another sandbox of the same image (two forks of
 * one parent: the parent's capture under each fork's upper/).
 *
 * A side is a stack of layer directories, bottom first, merged as overlayfs merges them: the
 * topmost layer that has a name gives it; a whiteout (a character device 0:0, or an empty file
 * with the trusted.overlay.whiteout xattr) hides the name in the layers below; a directory
 * marked opaque (trusted.overlay.opaque "y") hides the directories of the layers below; a
 * directory over a non-directory (or the reverse) hides what is below. The user.overlay.* marks
 * count for nothing, as on the kernel's overlays without userxattr (warrend makes no other): a
 * sandbox can set user.* xattrs, and would otherwise hide files from its diff. Redirects
 * (redirect_dir) and metacopy are not followed: warrend mounts overlays with neither, and a
 * sandbox cannot set trusted.* xattrs.
 *
 * The bottom layers that both sides name by the same path are shared: what only they hold is the
 * same on both sides and is never read, so the walk costs in proportion to what the other layers
 * hold (the upper/ of a sandbox, a snapshot's capture), plus the directories of the shared
 * layers that an opaque directory or a whiteout over a directory hides on one side only.
 *
 * Every entry is reached from its parent directory's fd (openat with O_NOFOLLOW, fstatat with
 * AT_SYMLINK_NOFOLLOW, only regular files opened, with O_NONBLOCK): nothing is followed, and a
 * running sandbox renaming its files while it is walked cannot lead the walk out of its layers.
 * An entry that vanishes meanwhile is as if it were not there. Blocking: run on a worker
 * thread. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../util/err.h"

/* The deepest directory the walk enters (the root is 0). */
#define WR_OVL_MAX_DEPTH 256
/* The bytes of file content compared or hashed by one diff; past it, files of equal size in
 * different layers count as modified, and renames are not looked for. */
#define WR_OVL_COMPARE_BUDGET (512ull << 20)

enum wr_ovl_change_kind { WR_OVL_ADDED, WR_OVL_MODIFIED, WR_OVL_DELETED, WR_OVL_RENAMED };
enum wr_ovl_type { WR_OVL_FILE, WR_OVL_DIR, WR_OVL_SYMLINK, WR_OVL_OTHER };

/* "added", "modified", "deleted", "renamed". */
const char *wr_ovl_change_name(enum wr_ovl_change_kind k);
/* "file", "dir", "symlink", "other". */
const char *wr_ovl_type_name(enum wr_ovl_type t);

struct wr_ovl_entry {
    enum wr_ovl_type type;
    uint64_t size; /* regular file: bytes; symlink: the target's length; else 0 */
    mode_t mode;   /* permission bits (07777) */
    uid_t uid;     /* as stored in the layer: the sandbox-side ids */
    gid_t gid;
};

struct wr_ovl_change {
    char *path; /* "/etc/motd" */
    char *from; /* renamed: the path it had in the old tree; else NULL */
    enum wr_ovl_change_kind change;
    struct wr_ovl_entry now; /* the new tree's entry (deleted: the old tree's) */
    struct wr_ovl_entry old; /* modified, renamed: the old tree's */
};

struct wr_ovl_diff {
    struct wr_ovl_change *changes; /* sorted by path (strcmp) */
    size_t n;
    bool truncated; /* more changes than max: the walk stopped there */
};
void wr_ovl_diff_fini(struct wr_ovl_diff *d);

/* A stack of layer directories, bottom first (the directories of the layers' trees: a layer's
 * fs/, a template's rootfs, a home's upper/). */
struct wr_ovl_stack {
    const char *const *dirs;
    size_t n;
};

/* The changes from tree old to tree new, at and below scope (an absolute path, "/" or NULL:
 * everything; its ancestors are never reported), at most max of them (0: 10000):
 *
 *   added     the path is in new only (a directory added: each entry below it too);
 *   deleted   in old only (a directory deleted: each entry below it too);
 *   modified  in both, with another type, mode, owner, size, content or link target (a file
 *             copied up unchanged, e.g. touched, is not modified; a directory whose entries
 *             changed is not, unless its own mode or owner did);
 *   renamed   a regular file of new that is not in old, with the same content (size > 0, equal
 *             SHA-256) as a deleted regular file of old, which is then not reported: `from` names
 *             it (the first one by path when several match). Anything else that moved (a
 *             directory, an empty file, a file changed as it moved) is added + deleted: overlayfs
 *             without redirect_dir records a rename as a new copy and a whiteout, and nothing
 *             else proves one.
 *
 * Fills *out (free with wr_ovl_diff_fini). -1 with err: WR_ECONFLICT if a layer directory is
 * missing (removed meanwhile), WR_EINVAL past WR_OVL_MAX_DEPTH, WR_ELIMIT past WR_WALK_LIVE_ENTRIES
 * entries read, WR_ESYS. */
int wr_ovl_diff(const struct wr_ovl_stack *old, const struct wr_ovl_stack *new, const char *scope,
                size_t max, struct wr_ovl_diff *out, struct wr_err *err);

/* The content of one path in both trees, for a text diff. */
struct wr_ovl_content {
    enum wr_ovl_change_kind change; /* added, deleted or modified */
    struct wr_ovl_entry now, old;   /* now: the new tree's (deleted: the old's), old: modified */
    bool binary;                    /* a side holds a NUL byte or is not UTF-8: no diff */
    bool too_large;                 /* a side is over max bytes: no diff */
    char *diff; /* unified diff ("--- a/p", "+++ b/p", /dev/null for a missing side; a
                 * symlink's text is its target); NULL when binary or too_large, "" when
                 * only the metadata differ */
};
void wr_ovl_content_fini(struct wr_ovl_content *c);

/* The unified diff of path (absolute) between the two trees, each side read up to max bytes (0:
 * 1 MiB). The diff is made by /usr/bin/diff (src/runtime/textdiff.h) from copies of the bytes.
 * -1 with err: WR_ENOTFOUND if path is in neither tree or is the same in both ("has not
 * changed"), WR_EINVAL if it is a directory on either side, WR_EUNSUPPORTED without
 * /usr/bin/diff, else as wr_ovl_diff. */
int wr_ovl_content(const struct wr_ovl_stack *old, const struct wr_ovl_stack *new, const char *path,
                   size_t max, struct wr_ovl_content *out, struct wr_err *err);

/* Normalise a path a client gave: absolute, no "." or ".." component, no NUL; repeated and
 * trailing slashes dropped ("/" stays "/"). A new string, or NULL with WR_EINVAL. */
char *wr_ovl_path_clean(const char *path, struct wr_err *err);
