/* SPDX-License-Identifier: Apache-2.0 */
/* Users and groups from the sandbox's own /etc/passwd and /etc/group (fgetpwent/fgetgrent: a
 * static binary has no NSS), and switching the filesystem identity for file operations. */
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "init.h"

#define MAX_GROUPS 1024

static gid_t *saved_groups;
static int nsaved_groups;

/* Parse a decimal id; false if s is not entirely digits or out of range. */
static bool parse_id(const char *s, unsigned long *out)
{
    char *end;

    if (*s < '0' || *s > '9')
        return false;
    errno = 0;
    *out = strtoul(s, &end, 10);
    return errno == 0 && *end == '\0' && *out < UINT32_MAX;
}

/* Find a passwd entry by name (name != NULL) or uid. Fills u->name/home/uid/gid. */
static bool passwd_find(const char *name, uid_t uid, struct init_user *u)
{
    _cleanup_fclose_ FILE *f = fopen("/etc/passwd", "re");
    struct passwd *pw;

    if (f == NULL)
        return false;
    while ((pw = fgetpwent(f)) != NULL) {
        if (name != NULL ? strcmp(pw->pw_name, name) == 0 : pw->pw_uid == uid) {
            u->uid = pw->pw_uid;
            u->gid = pw->pw_gid;
            u->name = xstrdup(pw->pw_name);
            u->home = xstrdup(pw->pw_dir[0] != '\0' ? pw->pw_dir : "/");
            u->shell = pw->pw_shell[0] != '\0' ? xstrdup(pw->pw_shell) : NULL;
            return true;
        }
    }
    return false;
}

static bool group_find(const char *name, gid_t *gid)
{
    _cleanup_fclose_ FILE *f = fopen("/etc/group", "re");
    struct group *gr;

    if (f == NULL)
        return false;
    while ((gr = fgetgrent(f)) != NULL) {
        if (strcmp(gr->gr_name, name) == 0) {
            *gid = gr->gr_gid;
            return true;
        }
    }
    return false;
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

/* The primary group, then every group in /etc/group that lists the user. */
static void collect_groups(struct init_user *u)
{
    add_group(u, u->gid);
    if (u->name == NULL)
        return;
    _cleanup_fclose_ FILE *f = fopen("/etc/group", "re");
    struct group *gr;
    if (f == NULL)
        return;
    while ((gr = fgetgrent(f)) != NULL)
        for (char **m = gr->gr_mem; m != NULL && *m != NULL; m++)
            if (strcmp(*m, u->name) == 0)
                add_group(u, gr->gr_gid);
}

int init_user_resolve(const char *spec, int64_t uid, int64_t gid, struct init_user *u,
                      struct wr_err *err)
{
    _cleanup_free_ char *user = NULL;
    const char *group = NULL;
    unsigned long id;

    memset(u, 0, sizeof(*u));
    if (spec == NULL && uid < 0)
        spec = init_cfg.user;
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
        if (parse_id(user, &id)) {
            if (!passwd_find(NULL, (uid_t)id, u)) {
                u->uid = (uid_t)id;
                u->gid = 0;
            }
        } else if (!passwd_find(user, 0, u)) {
            return wr_err_set(err, WR_ENOTFOUND, 0, "unknown user `%s`", user);
        }
    } else if (uid >= 0) {
        if (uid > (int64_t)UINT32_MAX - 1)
            return wr_err_set(err, WR_EINVAL, 0, "bad uid %lld", (long long)uid);
        if (!passwd_find(NULL, (uid_t)uid, u)) {
            u->uid = (uid_t)uid;
            u->gid = 0;
        }
    } else if (!passwd_find(NULL, 0, u)) {
        u->uid = 0;
        u->gid = 0;
    }

    if (group != NULL) {
        gid_t g;
        if (parse_id(group, &id))
            u->gid = (gid_t)id;
        else if (group_find(group, &g))
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
    collect_groups(u);
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

int init_fs_enter(const struct init_user *u)
{
    /* setgroups fails with EPERM where the user namespace denies it; fsuid/fsgid still apply. */
    if (setgroups(u->ngroups, u->groups) < 0 && errno != EPERM)
        return -1;
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
    (void)setfsuid(0);
    (void)setfsgid(0);
    (void)setgroups((size_t)nsaved_groups, saved_groups);
}
