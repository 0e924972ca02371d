/* SPDX-License-Identifier: Apache-2.0 */
/* Files of an image read on the host, through its stack of layer directories as overlayfs
 * would show them, and the default user's ids from its /etc/passwd and /etc/group (see
 * images.h). The layers may hold anything a team put there: nothing is followed (no symlink,
 * nothing but regular files opened), and a file is read only up to a bound. */
#include "images.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/parse.h"
#include "../util/xalloc.h"

#define ID_FILE_MAX (1u << 20)

enum lookup { FOUND, ABSENT /* look lower down */, HIDDEN /* deleted or hidden above */ };

static bool whiteout(const struct stat *st)
{
    return S_ISCHR(st->st_mode) && major(st->st_rdev) == 0 && minor(st->st_rdev) == 0;
}

static bool opaque(int dirfd)
{
    char v[2];
    return fgetxattr(dirfd, "trusted.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y';
}

/* path (relative, components without `.` or `..`) in the one layer directory `layer`. FOUND:
 * its content is in buf (*len bytes). */
static enum lookup layer_lookup(const char *layer, const char *path, char *buf, size_t max,
                                size_t *len)
{
    _cleanup_close_ int dir = open(layer, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_free_ char *copy = xstrdup(path);
    char *save = NULL, *comp = strtok_r(copy, "/", &save);
    bool dir_opaque = false; /* the layer's root cannot be opaque */

    if (dir < 0)
        return HIDDEN;
    while (comp != NULL) {
        char *next = strtok_r(NULL, "/", &save);
        _cleanup_close_ int fd = -1;
        struct stat st, st2;
        ssize_t n;

        if (fstatat(dir, comp, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return errno == ENOENT && !dir_opaque ? ABSENT : HIDDEN;
        if (whiteout(&st))
            return HIDDEN;
        if (next != NULL) {
            /* A file (or a link: not followed) hides the directories below it. */
            if (!S_ISDIR(st.st_mode))
                return HIDDEN;
            fd = openat(dir, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0)
                return HIDDEN;
            dir_opaque = opaque(fd);
            close(dir);
            dir = steal_fd(&fd);
            comp = next;
            continue;
        }
        /* Never open a device or a fifo of the host's view of a layer. */
        if (!S_ISREG(st.st_mode) || (size_t)st.st_size > max)
            return HIDDEN;
        fd = openat(dir, comp, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st2) < 0 || !S_ISREG(st2.st_mode) || st2.st_ino != st.st_ino)
            return HIDDEN;
        n = wr_read_all(fd, buf, max);
        if (n < 0 || (size_t)n == max)
            return HIDDEN;
        *len = (size_t)n;
        return FOUND;
    }
    return HIDDEN;
}

char *wr_images_read_file(char *const *layers, size_t n, const char *path, size_t max)
{
    char *buf = xmalloc(max + 1);
    size_t len = 0;

    for (size_t i = n; i-- > 0;) {
        enum lookup r = layer_lookup(layers[i], path, buf, max + 1, &len);
        if (r == ABSENT)
            continue;
        if (r == HIDDEN)
            break;
        buf[len] = '\0';
        return buf;
    }
    free(buf);
    return NULL;
}

/* ---- users -------------------------------------------------------------------------------- */

/* In text (an /etc/passwd or an /etc/group), the entry named name (NULL: the one whose third
 * field is id): *id3 gets its third field (the uid, or the group's gid), *id4 (if not NULL) its
 * fourth as a number (passwd's primary gid; 0 if it is not one). */
static bool find_entry(const char *text, const char *name, unsigned long id, unsigned long *id3,
                       unsigned long *id4)
{
    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        _cleanup_free_ char *l = xstrndup(line, end ? (size_t)(end - line) : strlen(line));
        char *f[5] = {l};
        unsigned long v3, v4;
        size_t k = 1;

        line = end ? end + 1 : NULL;
        for (char *p = l; *p != '\0' && k < 5; p++)
            if (*p == ':') {
                *p = '\0';
                f[k++] = p + 1;
            }
        if (l[0] == '#' || k < 3 || !wr_parse_id(f[2], &v3))
            continue;
        if (name != NULL ? strcmp(f[0], name) != 0 : v3 != id)
            continue;
        *id3 = v3;
        if (id4 != NULL)
            *id4 = k >= 4 && wr_parse_id(f[3], &v4) ? v4 : 0;
        return true;
    }
    return false;
}

int wr_images_user_ids(char *const *layers, size_t n, const char *spec, uid_t *uid, gid_t *gid,
                       struct wr_err *err)
{
    _cleanup_free_ char *user = xstrdup(spec ? spec : ""), *passwd = NULL;
    char *group = strchr(user, ':');
    unsigned long id, g = 0, v;

    *uid = 0;
    *gid = 0;
    if (group != NULL)
        *group++ = '\0';
    if (user[0] == '\0')
        return 0; /* no user: root, as warren-init runs it */
    passwd = wr_images_read_file(layers, n, "etc/passwd", ID_FILE_MAX);
    if (wr_parse_id(user, &id)) {
        /* A number: its passwd entry's group if it has one, else 0 (as warren-init does). */
        if (passwd == NULL || !find_entry(passwd, NULL, id, &v, &g))
            g = 0;
    } else if (passwd == NULL || !find_entry(passwd, user, 0, &id, &g)) {
        return wr_err_set(err, WR_ENOTFOUND, 0, "user `%s` is not in the image's /etc/passwd",
                          user);
    }
    if (group != NULL && group[0] != '\0' && !wr_parse_id(group, &g)) {
        _cleanup_free_ char *groups = wr_images_read_file(layers, n, "etc/group", ID_FILE_MAX);
        if (groups == NULL || !find_entry(groups, group, 0, &g, NULL))
            return wr_err_set(err, WR_ENOTFOUND, 0, "group `%s` is not in the image's /etc/group",
                              group);
    }
    *uid = (uid_t)id;
    *gid = (gid_t)g;
    return 0;
}
