/* SPDX-License-Identifier: Apache-2.0 */
/* Disk limits: btrfs qgroups and project quotas (see quota.h). */
#include "quota.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/quota.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../util/cleanup.h"

#ifndef XFS_SUPER_MAGIC
#define XFS_SUPER_MAGIC 0x58465342
#endif

static int sys_quotactl_fd(int fd, unsigned cmd, int id, void *addr)
{
    return (int)syscall(SYS_quotactl_fd, fd, cmd, id, addr);
}

/* Project quotas are on: the filesystem answers for them. 0, or the errno. */
static int project_quota_on(int fd)
{
    struct if_dqinfo info;
    return sys_quotactl_fd(fd, QCMD(Q_GETINFO, PRJQUOTA), 0, &info) == 0 ? 0 : errno;
}

const char *wr_quota_method(const char *dir, const char **why)
{
    _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct statfs sf;
    int e;

    *why = NULL;
    if (fd < 0 || fstatfs(fd, &sf) < 0) {
        *why = "its filesystem cannot be inspected";
        return NULL;
    }
    if ((unsigned long)sf.f_type == BTRFS_SUPER_MAGIC)
        return "btrfs-qgroup";
    e = project_quota_on(fd);
    if (e == 0)
        return "project-quota";
    if (e == ENOSYS)
        *why = "this kernel has no quota support (CONFIG_QUOTA), and the state directory is not "
               "on btrfs";
    else if ((unsigned long)sf.f_type == EXT4_SUPER_MAGIC ||
             (unsigned long)sf.f_type == XFS_SUPER_MAGIC)
        *why = "the state directory's filesystem is not mounted with project quotas (prjquota)";
    else
        *why = "the state directory's filesystem has neither btrfs qgroups nor project quotas";
    return NULL;
}

static int btrfs_limit(int fd, const char *home, uint64_t bytes, struct wr_err *err)
{
    struct btrfs_ioctl_quota_ctl_args ctl = {.cmd = BTRFS_QUOTA_CTL_ENABLE};
    struct btrfs_ioctl_qgroup_limit_args lim = {
        .qgroupid = 0, /* the subvolume of fd */
        .lim = {.flags = BTRFS_QGROUP_LIMIT_MAX_RFER, .max_rfer = bytes},
    };

    /* Quotas are enabled once per filesystem; enabling them again is harmless. */
    if (ioctl(fd, BTRFS_IOC_QUOTA_CTL, &ctl) < 0 && errno != EEXIST)
        return wr_err_sys(err, "enable btrfs quotas for `%s`", home);
    if (ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &lim) < 0)
        return wr_err_sys(err, "limit `%s` (btrfs qgroup)", home);
    return 0;
}

static int project_limit(int fd, const char *home, uint64_t bytes, uint32_t project,
                         struct wr_err *err)
{
    struct fsxattr fsx;
    struct if_dqblk dq = {
        .dqb_bhardlimit = (bytes + 1023) / 1024, /* in 1 KiB quota blocks */
        .dqb_bsoftlimit = (bytes + 1023) / 1024,
        .dqb_valid = QIF_BLIMITS,
    };

    if (ioctl(fd, FS_IOC_FSGETXATTR, &fsx) < 0)
        return wr_err_sys(err, "read the project of `%s`", home);
    fsx.fsx_projid = project;
    fsx.fsx_xflags |= FS_XFLAG_PROJINHERIT;
    if (ioctl(fd, FS_IOC_FSSETXATTR, &fsx) < 0)
        return wr_err_sys(err, "set project %u on `%s`", project, home);
    if (sys_quotactl_fd(fd, QCMD(Q_SETQUOTA, PRJQUOTA), (int)project, &dq) < 0)
        return wr_err_sys(err, "set the quota of project %u", project);
    return 0;
}

int wr_quota_limit(const char *home, uint64_t bytes, uint32_t project, struct wr_err *err)
{
    _cleanup_close_ int fd = open(home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const char *why, *method;

    if (fd < 0)
        return wr_err_sys(err, "open `%s`", home);
    method = wr_quota_method(home, &why);
    if (method == NULL)
        return wr_err_set(err, WR_EUNSUPPORTED, 0, "a disk limit cannot be enforced: %s", why);
    if (strcmp(method, "btrfs-qgroup") == 0)
        return btrfs_limit(fd, home, bytes, err);
    if (project == 0)
        return wr_err_set(err, WR_EINVAL, 0, "project id 0 is not usable for a quota");
    return project_limit(fd, home, bytes, project, err);
}
