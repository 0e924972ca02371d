/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's root filesystem: an overlay whose lower layers are the image's directories,
 * each idmapped to the sandbox's user namespace, and whose upper layer is private. The parent
 * builds the overlay as a detached mount (it never appears in the host's mount table) and hands
 * its fd to the child, which attaches it, adds /proc, /sys, /dev and the masks, and
 * pivots into it. See docs/design/isolation.md. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "../util/err.h"
#include "runtime.h"

/* overlayfs stacks at most 500 lower layers; 128 is plenty for images and snapshots. A root
 * stacks one more: the gvisor backend's layer of mount points (gvisor.c). */
#define WR_MAX_LAYERS 128
#define WR_MAX_STACK  (WR_MAX_LAYERS + 1)

/* The detached mounts an overlay was built from (the layers' idmapped clones, the writable
 * layer's mount), no longer needed once it exists. Closing the last fd of a detached mount
 * dissolves it, and that waits for an RCU grace period (about 1 ms on this machine type), so
 * the caller closes them where the wait costs nothing: after "go", while the child sets up. */
struct wr_rootfs_spent {
    int fds[WR_MAX_STACK + 1];
    size_t n;
};
void wr_rootfs_spent_close(struct wr_rootfs_spent *s);

/* Parent side. Build the detached overlay for a child whose user namespace is userns_fd (its
 * uid and gid maps already written), or, with userns_fd -1, without any idmap (the gvisor
 * backend: the sandbox's ids are the host's as stored). layers: bottom first, WR_MAX_STACK at most.
 * upper_dir: NULL for a private tmpfs of tmpfs_bytes (owned by host_root), else a directory in
 * which `upper` and `work` are created if missing, stored with sandbox-side ids and used through an
 * idmapped clone (see layer.h). Returns 0 with *overlay_fd (O_CLOEXEC) and the mounts it was built
 * from in *spent (for wr_rootfs_spent_close; close-on-exec, and never handed to the child), or -1
 * with err and nothing left open. */
int wr_rootfs_build(const char *const *layers, size_t n_layers, int userns_fd,
                    const char *upper_dir, uint64_t tmpfs_bytes, uid_t host_root, int *overlay_fd,
                    struct wr_rootfs_spent *spent, struct wr_err *err);

/* An O_PATH fd of the directory target (absolute, checked) below root_fd, creating missing
 * directories and never following a symbolic link (an image or a writable layer could point
 * one at the host's tree): the mount point of a volume. -errno with *step naming what failed. */
int wr_mount_point_open(int root_fd, const char *target, const char **step);

/* Parent side. Detached clones of each mount's host directory, idmapped to the child's user
 * namespace (userns_fd, maps written), nosuid, nodev, and read-only where asked: the sandbox's
 * view of a volume. fds[0..n) receive O_CLOEXEC fds; on failure none is left open and err names
 * the directory. Such an fd must reach no process of the sandbox but its setup: through the
 * idmap the sandbox's root owns the mount, so whoever holds it can clear its read-only flag
 * with mount_setattr. */
int wr_mounts_build(const struct wr_mount_spec *mounts, size_t n, int userns_fd, int *fds,
                    struct wr_err *err);

/* Parent side. Device nodes of the sandbox's own (runtime.h, struct wr_device_node, checked by
 * wr_devices_check): made on a detached tmpfs of the host's root, owned by the sandbox-side
 * uid and gid through the range at uid_base, one detached clone each in fds[0..n). On failure
 * none is left open. */
int wr_device_mounts_build(const struct wr_device_node *d, size_t n, uid_t uid_base, int *fds,
                           struct wr_err *err);

/* Parent side. Detached read-only (nosuid, nodev) clones of each bind's host path, not
 * recursive, in fds[0..n); is_dir[i] says which are directories. On failure none is left open. */
int wr_binds_build(const struct wr_bind_spec *binds, size_t n, int *fds, unsigned char *is_dir,
                   struct wr_err *err);

/* The mounts the child attaches in its new root: fds from wr_mounts_build and their targets
 * (checked by wr_mounts_check), then fds from wr_device_mounts_build and their paths, then fds
 * from wr_binds_build, their targets and which are directories. */
struct wr_rootfs_mounts {
    const int *fds;
    const char *const *targets;
    size_t n;
    const int *dev_fds;
    const char *const *dev_paths;
    size_t n_devs;
    const int *bind_fds;
    const char *const *bind_targets;
    const unsigned char *bind_dirs;
    size_t n_binds;
    /* then the symbolic links to make (wr_symlinks_check) */
    const char *const *link_targets;
    const char *const *links;
    size_t n_links;
};

/* A detached, read-only (nosuid, nodev, noexec) sysfs of the network namespace netns_fd, made
 * on the calling thread (which goes into that namespace for the call and back): the /sys of a
 * sandbox that joins a network namespace its user namespace does not own, where it may not
 * mount sysfs itself. Returns an O_CLOEXEC mount fd, or -1 with err. */
int wr_sysfs_build(int netns_fd, struct wr_err *err);

/* Child side, after setresuid(0) in the new user namespace: attach overlay_fd at stage (an
 * existing empty directory), mount /proc, /sys (read-only; sysfs_fd from wr_sysfs_build
 * attached instead if it is not -1, and closed), /dev, /dev/pts (its own instance,
 * at most WR_PTYS_MAX terminals), /dev/shm (a tmpfs of shm_bytes), create /tmp (mode 1777) in
 * the writable layer if the image lacks it, attach each of `mounts` at its target (creating
 * the mount point, never through a symbolic link) and close its fd, mask the usual paths,
 * pivot_root into it and detach the old root. Async-signal-safe; returns 0, or -errno with
 * *step naming what failed. */
/* Child side, after wr_rootfs_enter (so every path resolves in the sandbox's tree): the n inner
 * binds (runtime.h, struct wr_inner_bind; checked), in order. -errno with *step. */
int wr_inner_binds_make(const char *const *src, const char *const *dst, const unsigned char *ro,
                        size_t n, const char **step);

#define WR_PTYS_MAX 1024
int wr_rootfs_enter(int overlay_fd, int sysfs_fd, const struct wr_rootfs_mounts *mounts,
                    const char *stage, uint64_t shm_bytes, const char **step);
