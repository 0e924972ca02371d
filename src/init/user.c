/* SPDX-License-Identifier: Apache-2.0 */
/* Users and groups from the sandbox's own /etc/passwd and /etc/group, or a service's (parsed
 * here: a static binary has no NSS), and switching the filesystem identity for file
 * operations. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/parse.h"
#include "../util/xalloc.h"
#include "init.h"

#define MAX_GROUPS 1024

static gid_t *saved_groups;
static int nsaved_groups;

/* The sandbox's /etc/passwd and /etc/group, read whole with no stdio: the first command in a
 * new sandbox resolves its user here, and on this path every page of code or buffer touched for
 * the first time costs a fault (docs/benchmarks.md). */
#define ID_FILE_MAX (16u << 20)

/* Split line at ':' into at most n fields. Returns the number of fields found. */
static size_t split_fields(char *line, char **f, size_t n)
{
    size_t k = 0;

    f[k++] = line;
    for (char *p = line; *p != '\0' && k < n; p++) {
        if (*p == ':') {
            *p = '\0';
            f[k++] = p + 1;
        }
    }
    return k;
}

/* Open /etc/<name> of the tree at root (NULL: the sandbox's own), without blocking (a FIFO
 * put there cannot stall init). A service's root is a directory in the sandbox: its files
 * resolve inside it (RESOLVE_IN_ROOT: an absolute symbolic link there points into the service,
 * as it would for the service's own processes). Where openat2 is missing (gVisor), the path
 * is joined instead. Returns an fd, or -1 with errno. */
static int open_etc(const char *root, const char *name)
{
    char path[32];
    _cleanup_close_ int dfd = -1;
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK, .resolve = RESOLVE_IN_ROOT};
    long fd;

    (void)snprintf(path, sizeof(path), "/etc/%s", name);
    if (root == NULL || strcmp(root, "/") == 0)
        return open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    dfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    fd = syscall(SYS_openat2, dfd, path + 1, &how, sizeof(how));
    if (fd < 0 && errno == ENOSYS)
        fd = openat(dfd, path + 1, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    return (int)fd;
}

/* Call fn(line, arg) for each line of /etc/<name> under root (NUL-terminated, without its
 * newline) until fn returns true. Returns false if the file cannot be read, is not a regular
 * file or is over ID_FILE_MAX. */
static bool scan_lines(const char *root, const char *name, bool (*fn)(char *line, void *arg),
                       void *arg)
{
    _cleanup_close_ int fd = open_etc(root, name);
    _cleanup_free_ char *buf = NULL;
    size_t len = 0, cap;
    struct stat st;

    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return false;
    cap = st.st_size > 0 && (uint64_t)st.st_size < ID_FILE_MAX ? (size_t)st.st_size + 1 : 4096;
    buf = xmalloc(cap + 1);
    for (;;) {
        ssize_t n;
        if (len == cap) { /* it grew since fstat */
            if (cap >= ID_FILE_MAX)
                return false;
            cap *= 2;
            buf = xrealloc(buf, cap + 1);
        }
        n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return false;
        if (n == 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    for (char *p = buf, *end = buf + len; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl != NULL)
            *nl = '\0';
        if (fn(p, arg))
            break;
        p = nl != NULL ? nl + 1 : end;
    }
    return true;
}

struct passwd_query {
    const char *name; /* by name, or by uid when NULL */
    uid_t uid;
    struct init_user *u;
    bool found;
};

static bool passwd_line(char *line, void *arg)
{
    struct passwd_query *q = arg;
    char *f[7];
    unsigned long uid, gid;

    /* name:password:uid:gid:gecos:home:shell */
    if (line[0] == '#' || split_fields(line, f, 7) < 7 || !wr_parse_id(f[2], &uid) ||
        !wr_parse_id(f[3], &gid))
        return false;
    if (q->name != NULL ? strcmp(f[0], q->name) != 0 : uid != q->uid)
        return false;
    q->u->uid = (uid_t)uid;
    q->u->gid = (gid_t)gid;
    q->u->name = xstrdup(f[0]);
    q->u->home = xstrdup(f[5][0] != '\0' ? f[5] : "/");
    q->u->shell = f[6][0] != '\0' ? xstrdup(f[6]) : NULL;
    q->found = true;
    return true;
}

/* Find a passwd entry of root's tree by name (name != NULL) or uid. Fills
 * u->name/home/shell/uid/gid. */
static bool passwd_find(const char *root, const char *name, uid_t uid, struct init_user *u)
{
    struct passwd_query q = {.name = name, .uid = uid, .u = u};

    (void)scan_lines(root, "passwd", passwd_line, &q);
    return q.found;
}

struct group_query {
    const char *name; /* group_find: the group's name */
    gid_t gid;
    bool found;
    struct init_user *u; /* collect_groups: the member */
};

static bool group_line(char *line, void *arg)
{
    struct group_query *q = arg;
    char *f[4];
    unsigned long gid;

    /* name:password:gid:member,member,... */
    if (line[0] == '#' || split_fields(line, f, 4) < 4 || !wr_parse_id(f[2], &gid))
        return false;
    if (strcmp(f[0], q->name) != 0)
        return false;
    q->gid = (gid_t)gid;
    q->found = true;
    return true;
}

static bool group_find(const char *root, const char *name, gid_t *gid)
{
    struct group_query q = {.name = name};

    (void)scan_lines(root, "group", group_line, &q);
    *gid = q.gid;
    return q.found;
}

static void add_group(struct init_user *u, gid_t g)
{
    for (size_t i = 0; i < u->ngroups; i++)
        if (u->groups[i] == g)
            return;
    if (u->ngroups >= MAX_GROUPS)
        return;
    u->groups = xrealloc(u->groups, (u->ngroups + 1) * sizeof(gid_t));
    u->groups[u->ngroups++] = g;
}

static bool member_line(char *line, void *arg)
{
    struct group_query *q = arg;
    char *f[4], *save = NULL;
    unsigned long gid;

    if (line[0] == '#' || split_fields(line, f, 4) < 4 || !wr_parse_id(f[2], &gid))
        return false;
    for (char *m = strtok_r(f[3], ",", &save); m != NULL; m = strtok_r(NULL, ",", &save))
        if (strcmp(m, q->u->name) == 0)
            add_group(q->u, (gid_t)gid);
    return false;
}

/* The primary group, then every group in /etc/group that lists the user. */
static void collect_groups(const char *root, struct init_user *u)
{
    struct group_query q = {.u = u};

    add_group(u, u->gid);
    if (u->name != NULL)
        (void)scan_lines(root, "group", member_line, &q);
}

int init_user_resolve(const char *spec, int64_t uid, int64_t gid, struct init_user *u,
                      struct wr_err *err)
{
    return init_user_resolve_in(NULL, spec, uid, gid, init_cfg.user, u, err);
}

int init_user_resolve_in(const char *root, const char *spec, int64_t uid, int64_t gid,
                         const char *dflt, struct init_user *u, struct wr_err *err)
{
    _cleanup_free_ char *user = NULL;
    const char *group = NULL;
    unsigned long id;

    memset(u, 0, sizeof(*u));
    if (spec == NULL && uid < 0)
        spec = dflt;
    if (spec != NULL) {
        char *colon;
        user = xstrdup(spec);
        colon = strchr(user, ':');
        if (colon != NULL) {
            *colon = '\0';
            group = colon + 1;
        }
        if (user[0] == '\0')
            return wr_err_set(err, WR_EINVAL, 0, "empty user");
        if (wr_parse_id(user, &id)) {
            if (!passwd_find(root, NULL, (uid_t)id, u)) {
                u->uid = (uid_t)id;
                u->gid = 0;
            }
        } else if (!passwd_find(root, user, 0, u)) {
            return wr_err_set(err, WR_ENOTFOUND, 0, "unknown user `%s`", user);
        }
    } else if (uid >= 0) {
        if (uid > (int64_t)UINT32_MAX - 1)
            return wr_err_set(err, WR_EINVAL, 0, "bad uid %lld", (long long)uid);
        if (!passwd_find(root, NULL, (uid_t)uid, u)) {
            u->uid = (uid_t)uid;
            u->gid = 0;
        }
    } else if (!passwd_find(root, NULL, 0, u)) {
        u->uid = 0;
        u->gid = 0;
    }

    if (group != NULL) {
        gid_t g;
        if (wr_parse_id(group, &id))
            u->gid = (gid_t)id;
        else if (group_find(root, group, &g))
            u->gid = g;
        else {
            init_user_fini(u);
            return wr_err_set(err, WR_ENOTFOUND, 0, "unknown group `%s`", group);
        }
    } else if (gid >= 0) {
        if (gid > (int64_t)UINT32_MAX - 1) {
            init_user_fini(u);
            return wr_err_set(err, WR_EINVAL, 0, "bad gid %lld", (long long)gid);
        }
        u->gid = (gid_t)gid;
    }
    collect_groups(root, u);
    return 0;
}

void init_user_fini(struct init_user *u)
{
    free(u->groups);
    free(u->name);
    free(u->home);
    free(u->shell);
    memset(u, 0, sizeof(*u));
}

void init_user_copy(struct init_user *dst, const struct init_user *src)
{
    *dst = *src;
    dst->groups = xmalloc((src->ngroups ? src->ngroups : 1) * sizeof(gid_t));
    if (src->ngroups > 0)
        memcpy(dst->groups, src->groups, src->ngroups * sizeof(gid_t));
    dst->name = src->name ? xstrdup(src->name) : NULL;
    dst->home = src->home ? xstrdup(src->home) : NULL;
    dst->shell = src->shell ? xstrdup(src->shell) : NULL;
}

void init_fs_save(void)
{
    int n = getgroups(0, NULL);

    if (n <= 0)
        return;
    saved_groups = xcalloc((size_t)n, sizeof(gid_t));
    nsaved_groups = getgroups(n, saved_groups);
    if (nsaved_groups < 0)
        nsaved_groups = 0;
}

/* Whether the kernel has setfsuid: gVisor (the gvisor backend) answers ENOSYS. Init is one
 * thread, so the effective ids (its saved ids stay 0) do the same job there. */
static bool no_fsuid(void)
{
    static int known = -1;

    if (known < 0) {
        errno = 0;
        known = syscall(SYS_setfsuid, (uid_t)-1) == -1 && errno == ENOSYS;
    }
    return known;
}

int init_fs_enter(const struct init_user *u)
{
    /* setgroups fails with EPERM where the user namespace denies it; fsuid/fsgid still apply. */
    if (setgroups(u->ngroups, u->groups) < 0 && errno != EPERM)
        return -1;
    if (no_fsuid()) {
        if (syscall(SYS_setresgid, -1, u->gid, -1) < 0 ||
            syscall(SYS_setresuid, -1, u->uid, -1) < 0) {
            init_fs_leave();
            return -1;
        }
        return 0;
    }
    (void)setfsgid(u->gid);
    (void)setfsuid(u->uid);
    /* setfsuid reports the previous id, not failure: read the current one back. */
    if ((uid_t)setfsuid((uid_t)-1) != u->uid || (gid_t)setfsgid((gid_t)-1) != u->gid) {
        init_fs_leave();
        errno = EPERM;
        return -1;
    }
    return 0;
}

void init_fs_leave(void)
{
    if (no_fsuid()) {
        (void)syscall(SYS_setresuid, -1, 0, -1);
        (void)syscall(SYS_setresgid, -1, 0, -1);
        (void)setgroups((size_t)nsaved_groups, saved_groups);
        return;
    }
    (void)setfsuid(0);
    (void)setfsgid(0);
    (void)setgroups((size_t)nsaved_groups, saved_groups);
}
