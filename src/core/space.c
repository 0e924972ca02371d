/* SPDX-License-Identifier: Apache-2.0 */
/* The state filesystem's space and the daemon's reserve in it (see space.h). */
#include "space.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"

struct wr_space {
    char *dir;
    uint64_t reserve;
    bool daemon_uses_held; /* the daemon may write into the blocks the filesystem keeps back */
};

struct fs_space {
    uint64_t avail; /* for unprivileged writers */
    uint64_t held;  /* free, but kept back from them by the filesystem */
};

static int read_space(const char *dir, struct fs_space *out)
{
    struct statvfs sv;

    if (statvfs(dir, &sv) < 0)
        return -1;
    out->avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    out->held = sv.f_bfree > sv.f_bavail ? (uint64_t)(sv.f_bfree - sv.f_bavail) * sv.f_frsize : 0;
    return 0;
}

static uint64_t room_of(const struct wr_space *s, const struct fs_space *fs)
{
    uint64_t held = s->daemon_uses_held ? fs->held : 0;
    uint64_t unheld = s->reserve > held ? s->reserve - held : 0;
    return fs->avail > unheld ? fs->avail - unheld : 0;
}

static bool has_sys_resource(void)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct data[2];

    return syscall(SYS_capget, &hdr, data) == 0 &&
           (data[CAP_TO_INDEX(CAP_SYS_RESOURCE)].effective & CAP_TO_MASK(CAP_SYS_RESOURCE));
}

/* The super options of the filesystem holding dir (from its line in mountinfo), or NULL. */
static char *super_options(const char *dir)
{
    _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
    _cleanup_free_ char *line = NULL;
    size_t cap = 0;
    struct stat st;

    if (f == NULL || stat(dir, &st) < 0)
        return NULL;
    while (getline(&line, &cap, f) > 0) {
        unsigned maj, min;
        char *sep = strstr(line, " - "), *opts;
        if (sep == NULL || sscanf(line, "%*u %*u %u:%u", &maj, &min) != 2 ||
            makedev(maj, min) != st.st_dev)
            continue;
        /* "... - fstype source options" */
        opts = strchr(sep + 3, ' ');
        opts = opts ? strchr(opts + 1, ' ') : NULL;
        if (opts == NULL)
            return NULL;
        opts[strcspn(opts, "\n")] = '\0';
        return xstrdup(opts + 1);
    }
    return NULL;
}

/* The number after `key` (`resuid=`) in comma-separated options; 0 if absent. */
static long option_id(const char *opts, const char *key)
{
    const char *p = strstr(opts, key);
    return p != NULL && (p == opts || p[-1] == ',') ? strtol(p + strlen(key), NULL, 10) : 0;
}

/* ext4 gives the blocks it keeps back to CAP_SYS_RESOURCE, to the fsuid `resuid` and to the
 * members of the group `resgid` (both root unless mounted otherwise, and a resgid of root is no
 * way in); the daemon writes as root. Other filesystems keep nothing back from root. */
static bool uses_held(const char *dir)
{
    _cleanup_free_ char *opts = NULL;
    gid_t groups[256];
    long resgid;
    int n;

    if (has_sys_resource())
        return true;
    opts = super_options(dir);
    if (opts == NULL)
        return false;
    if (option_id(opts, "resuid=") == 0)
        return true;
    resgid = option_id(opts, "resgid=");
    if (resgid == 0)
        return false;
    n = getgroups((int)WR_ARRAY_SIZE(groups), groups);
    for (int i = 0; i < n; i++)
        if ((long)groups[i] == resgid)
            return true;
    return (long)getegid() == resgid;
}

int wr_space_open(const char *dir, uint64_t reserve_bytes, struct wr_space **out,
                  struct wr_err *err)
{
    struct wr_space *s;
    struct fs_space fs;

    struct statvfs sv;

    if (statvfs(dir, &sv) < 0 || read_space(dir, &fs) < 0)
        return wr_err_sys(err, "statvfs `%s`", dir);
    if (reserve_bytes == WR_SPACE_RESERVE_DEFAULT) {
        uint64_t size = (uint64_t)sv.f_blocks * sv.f_frsize;
        reserve_bytes = size / 20 < (1ull << 30) ? size / 20 : 1ull << 30;
    }
    s = xcalloc(1, sizeof(*s));
    s->dir = xstrdup(dir);
    s->reserve = reserve_bytes;
    s->daemon_uses_held = uses_held(dir);
    if (s->daemon_uses_held && fs.held >= reserve_bytes)
        log_info("disk: %" PRIu64
                 " MiB free for sandboxes and images; the filesystem keeps %" PRIu64
                 " MiB back from them, which holds the daemon's reserve of %" PRIu64 " MiB",
                 room_of(s, &fs) >> 20, fs.held >> 20, reserve_bytes >> 20);
    else
        log_warn("disk: %" PRIu64 " MiB free for sandboxes and images; the daemon's reserve of "
                 "%" PRIu64 " MiB is held by admission only (the filesystem of %s keeps %" PRIu64
                 " MiB back from sandboxes' writes%s): nothing new starts below the reserve, but "
                 "a running sandbox can write into it (docs/operations.md, \"Disk space\")",
                 room_of(s, &fs) >> 20, reserve_bytes >> 20, dir, fs.held >> 20,
                 s->daemon_uses_held || fs.held == 0 ? "" : ", and from the daemon's too");
    *out = s;
    return 0;
}

void wr_space_free(struct wr_space *s)
{
    if (s == NULL)
        return;
    free(s->dir);
    free(s);
}

uint64_t wr_space_room(const struct wr_space *s)
{
    struct fs_space fs;

    if (read_space(s->dir, &fs) < 0)
        return 0;
    return room_of(s, &fs);
}

int wr_space_admit(const struct wr_space *s, const char *what, uint64_t need, struct wr_err *err)
{
    uint64_t room;

    if (s == NULL)
        return 0;
    if (need < WR_SPACE_MIN_ROOM)
        need = WR_SPACE_MIN_ROOM;
    room = wr_space_room(s);
    if (room >= need)
        return 0;
    return wr_err_set(err, WR_ESYS, ENOSPC,
                      "%s: the state filesystem has %" PRIu64 " MiB left for sandboxes and images "
                      "(%" PRIu64 " MiB needed; %" PRIu64 " MiB are kept for the daemon)",
                      what, room >> 20, (need + (1 << 20) - 1) >> 20, s->reserve >> 20);
}
