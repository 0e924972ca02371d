/* SPDX-License-Identifier: Apache-2.0 */
/* Small file helpers shared by the daemon side and warren-init. All fds are O_CLOEXEC. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

/* Write the whole string to dirfd/path (O_WRONLY|O_TRUNC, no O_CREAT unless create is set).
 * Returns 0, or -1 with err. */
int wr_write_fileat(int dirfd, const char *path, const char *s, bool create, struct wr_err *err);

/* Read up to size-1 bytes of a small file into buf and NUL-terminate. Returns the length, or -1
 * with err. */
ssize_t wr_read_fileat(int dirfd, const char *path, char *buf, size_t size, struct wr_err *err);

/* write(2) the whole buffer, retrying on EINTR and short writes. Returns 0 or -1 (errno set). */
int wr_write_all(int fd, const void *p, size_t n);

/* read(2) exactly n bytes. Returns n, fewer at end of file, or -1 (errno set). */
ssize_t wr_read_all(int fd, void *p, size_t n);

/* mkdir -p with mode for every created component (path shorter than PATH_MAX). Returns 0 or -1
 * with err. */
int wr_mkdir_p(const char *path, mode_t mode, struct wr_err *err);

/* rm -rf below dirfd/name without following symlinks and without crossing mount points (a
 * mount point inside fails it, WR_ECONFLICT): a bounded walk (walk.h) that no depth stops.
 * Returns 0 (also when it did not exist) or -1 with err. */
int wr_rm_rf_at(int dfd, const char *name, struct wr_err *err);

/* Disk space used by dirfd/name and everything below it (allocated blocks, in bytes), without
 * following symbolic links or crossing mount points; a file with several links counts once per
 * link. Returns 0 (*bytes 0 when it does not exist) or -1 with err: WR_EINVAL for a tree deeper
 * than WR_WALK_MAX_DEPTH, WR_ELIMIT past WR_WALK_LIVE_ENTRIES entries (walk.h). */
int wr_disk_usage_at(int dfd, const char *name, uint64_t *bytes, struct wr_err *err);
