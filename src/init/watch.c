/* SPDX-License-Identifier: Apache-2.0 */
/* FILE_WATCH and CANCEL: directory watches with inotify. Each watch has its own inotify instance,
 * so its backpressure, its queue overflow and its end (CANCEL, the connection closing) concern
 * nothing else, and closing the one fd removes every kernel watch it holds. A recursive watch
 * follows the tree: directories that appear get watches, directories that leave lose theirs. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/log.h"
#include "../util/xalloc.h"
#include "init.h"

/* IN_MODIFY and IN_CLOSE_WRITE both mean WRITE. IN_EXCL_UNLINK: writes to a file that was
 * already removed from the tree are not news. */
#define WATCH_MASK                                                                                 \
    (IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |            \
     IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)

/* One watched directory: the kernel's watch descriptor and the path relative to the root. */
struct wd_ent {
    int wd; /* 0: free slot (the kernel's descriptors start at 1) */
    char *rel;
};

struct init_fswatch {
    struct init_fswatch *next;
    struct init_conn *c;
    struct init_fdw w; /* the inotify instance */
    uint32_t id;
    bool recursive;
    bool ended; /* final reply queued, or the connection is gone; freed by the pump */
    char *root; /* PATH as requested */
    dev_t dev;  /* a recursive watch stays on the root's filesystem */
    struct init_user user;
    struct wd_ent *tab; /* open addressing, linear probing, at most half full */
    size_t cap;
    size_t n;
    /* The last event queued from the current read, to fold repeated WRITE and CHMOD. */
    enum wr_watch_op last_op;
    char last[WR_MAX_PATH + 1];
};

/* ---- wd -> path ---------------------------------------------------------------------------- */

static size_t wd_slot(const struct init_fswatch *fw, int wd)
{
    return ((uint32_t)wd * 2654435761u) & (fw->cap - 1);
}

static struct wd_ent *wd_find(struct init_fswatch *fw, int wd)
{
    if (fw->cap == 0 || wd <= 0)
        return NULL;
    for (size_t i = wd_slot(fw, wd); fw->tab[i].wd != 0; i = (i + 1) & (fw->cap - 1))
        if (fw->tab[i].wd == wd)
            return &fw->tab[i];
    return NULL;
}

/* Takes ownership of rel. wd must not be in the table. */
static void wd_put(struct init_fswatch *fw, int wd, char *rel)
{
    size_t i;

    if ((fw->n + 1) * 2 > fw->cap) {
        struct wd_ent *old = fw->tab;
        size_t oldcap = fw->cap;

        fw->cap = oldcap ? oldcap * 2 : 16;
        fw->tab = xcalloc(fw->cap, sizeof(*fw->tab));
        for (size_t j = 0; j < oldcap; j++) {
            if (old[j].wd == 0)
                continue;
            for (i = wd_slot(fw, old[j].wd); fw->tab[i].wd != 0; i = (i + 1) & (fw->cap - 1))
                ;
            fw->tab[i] = old[j];
        }
        free(old);
    }
    for (i = wd_slot(fw, wd); fw->tab[i].wd != 0; i = (i + 1) & (fw->cap - 1))
        ;
    fw->tab[i].wd = wd;
    fw->tab[i].rel = rel;
    fw->n++;
}

/* Remove wd, shifting later entries of its probe run back so lookups need no tombstones. */
static void wd_del(struct init_fswatch *fw, int wd)
{
    struct wd_ent *e = wd_find(fw, wd);
    size_t mask = fw->cap - 1, i, j;

    if (e == NULL)
        return;
    free(e->rel);
    i = (size_t)(e - fw->tab);
    for (j = (i + 1) & mask; fw->tab[j].wd != 0; j = (j + 1) & mask) {
        size_t k = wd_slot(fw, fw->tab[j].wd);
        /* Entry j may fill the hole at i unless its home slot k lies cyclically in (i, j]. */
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            fw->tab[i] = fw->tab[j];
            i = j;
        }
    }
    fw->tab[i].wd = 0;
    fw->tab[i].rel = NULL;
    fw->n--;
}

/* ---- events -------------------------------------------------------------------------------- */

static void stop(struct init_fswatch *fw)
{
    fw->ended = true;
    init_fdw_close(&fw->w);
}

/* End the watch with ERROR errnum (the message names the root and `why`). */
static void end(struct init_fswatch *fw, int errnum, const char *why)
{
    if (fw->ended)
        return;
    init_conn_errorf(fw->c, fw->id, errnum, "watch `%s`: %s", fw->root, why);
    stop(fw);
}

static char *join(const char *dir, const char *name)
{
    if (dir[0] == '\0')
        return xstrdup(name);
    return xasprintf("%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name);
}

static void emit(struct init_fswatch *fw, enum wr_watch_op op, const char *rel)
{
    struct wr_watch_event ev = {.op = op, .name = (char *)rel};
    size_t len = strlen(rel);

    if (len > WR_MAX_PATH) {
        log_debug("watch %u: name of %zu bytes dropped", fw->id, len);
        return;
    }
    /* IN_MODIFY then IN_CLOSE_WRITE (and chmod's several IN_ATTRIB) read together are one
     * change to the client. */
    if ((op == WR_WATCH_WRITE || op == WR_WATCH_CHMOD) && fw->last_op == op &&
        strcmp(fw->last, rel) == 0)
        return;
    fw->last_op = op;
    memcpy(fw->last, rel, len + 1);
    wr_watch_event_encode(&fw->c->out, fw->id, &ev);
}

static void push(char ***v, size_t *n, size_t *cap, char *s)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *v = xrealloc(*v, *cap * sizeof(**v));
    }
    (*v)[(*n)++] = s;
}

static bool is_subdir(struct init_fswatch *fw, int dfd, const struct dirent *de)
{
    struct stat st;

    if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
        return false;
    return fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
           st.st_dev == fw->dev;
}

/* Watch the directory `start` (relative to the root; "" is the root) and, for a recursive watch,
 * every directory below it on the root's filesystem, breadth first with one directory open at a
 * time. With `synth`, queue a CREATE for every entry found: they appeared in a new directory
 * before its watch existed. Entries that vanish or that the user cannot read are skipped; only
 * the root's own failure counts. Runs under the user's identity. Returns 0, or -1 with errno:
 * the root's error, EMFILE past INIT_WATCH_MAX_DIRS, ENOSPC at the kernel's watch limit, ENOBUFS
 * when synthetic events push the connection's queue past INIT_CONN_OUT_HIGH. */
static int add_tree(struct init_fswatch *fw, const char *start, bool synth)
{
    char **todo = NULL;
    size_t ntodo = 0, captodo = 0;
    int rc = 0, saved = 0;

    push(&todo, &ntodo, &captodo, xstrdup(start));
    while (ntodo > 0 && rc == 0) {
        char *rel = todo[--ntodo];
        char *full = rel[0] ? join(fw->root, rel) : xstrdup(fw->root);
        uint32_t mask = WATCH_MASK | (rel[0] ? IN_DONT_FOLLOW : 0);
        struct wd_ent *e;
        struct dirent *de;
        DIR *d = NULL;
        int wd, fd;

        if (fw->n >= INIT_WATCH_MAX_DIRS) {
            saved = EMFILE;
            rc = -1;
        } else if ((wd = inotify_add_watch(fw->w.fd, full, mask)) < 0) {
            /* Elsewhere: gone meanwhile, replaced by a symlink, not readable by the user. */
            if (rel[0] == '\0' || errno == ENOSPC || errno == ENOMEM) {
                saved = errno;
                rc = -1;
            }
        } else if ((e = wd_find(fw, wd)) == NULL || strcmp(e->rel, rel) == 0) {
            /* A directory seen under a second path (a bind mount) keeps its first one; seen
             * again under the same path (created while its parent was being read) it is read
             * again, so nothing created inside it meanwhile goes unreported. */
            if (e == NULL)
                wd_put(fw, wd, xstrdup(rel));
            fd = fw->recursive
                     ? open(full, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (rel[0] ? O_NOFOLLOW : 0))
                     : -1;
            d = fd >= 0 ? fdopendir(fd) : NULL;
            if (d == NULL && fd >= 0)
                (void)close(fd);
        }
        while (d != NULL && rc == 0 && (de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            char *child = join(rel, de->d_name);
            if (synth) {
                emit(fw, WR_WATCH_CREATE, child);
                if (init_conn_queued(fw->c) > INIT_CONN_OUT_HIGH) {
                    saved = ENOBUFS;
                    rc = -1;
                }
            }
            if (strlen(child) >= WR_MAX_PATH || !is_subdir(fw, dirfd(d), de)) {
                free(child);
            } else if (fw->n + ntodo >= INIT_WATCH_MAX_DIRS) {
                /* Past the limit already: a directory of a million subdirectories must not
                 * make PID 1 hold a million paths first. */
                free(child);
                saved = EMFILE;
                rc = -1;
            } else {
                push(&todo, &ntodo, &captodo, child);
            }
        }
        if (d != NULL)
            (void)closedir(d);
        free(full);
        free(rel);
    }
    while (ntodo > 0)
        free(todo[--ntodo]);
    free(todo);
    errno = saved;
    return rc;
}

/* A directory left the tree (moved away): forget the watches on it and below it. */
static void drop_tree(struct init_fswatch *fw, const char *rel)
{
    size_t len = strlen(rel), n = 0;
    int *wds = xcalloc(fw->n + 1, sizeof(int));

    for (size_t i = 0; i < fw->cap; i++) {
        const char *r = fw->tab[i].rel;
        if (fw->tab[i].wd != 0 && strncmp(r, rel, len) == 0 && (r[len] == '\0' || r[len] == '/'))
            wds[n++] = fw->tab[i].wd;
    }
    for (size_t i = 0; i < n; i++) {
        (void)inotify_rm_watch(fw->w.fd, wds[i]);
        wd_del(fw, wds[i]);
    }
    free(wds);
}

/* Watch a directory that appeared (created, or moved in) under a recursive watch. */
static void follow(struct init_fswatch *fw, const char *rel, bool synth)
{
    int rc, saved;

    if (init_fs_enter(&fw->user) < 0) {
        end(fw, errno, "switch user");
        return;
    }
    rc = add_tree(fw, rel, synth);
    saved = errno;
    init_fs_leave();
    if (rc == 0)
        return;
    if (saved == ENOBUFS)
        end(fw, ENOBUFS, "events were lost");
    else if (saved == EMFILE || saved == ENOSPC)
        end(fw, EMFILE, "too many directories");
    else
        end(fw, saved, "add watch");
}

static void handle(struct init_fswatch *fw, const struct inotify_event *ev)
{
    struct wd_ent *e;
    char *rel;

    if (ev->mask & IN_Q_OVERFLOW) {
        end(fw, ENOBUFS, "events were lost");
        return;
    }
    e = wd_find(fw, ev->wd);
    if (e == NULL)
        return; /* a directory we stopped watching */
    if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)) {
        if (e->rel[0] == '\0')
            end(fw, ENOENT,
                ev->mask & IN_MOVE_SELF ? "directory was moved" : "directory was removed");
        else if (!(ev->mask & IN_MOVE_SELF))
            wd_del(fw, ev->wd); /* the parent reported it; the kernel dropped the watch */
        return;
    }
    if (ev->len == 0 || ev->name[0] == '\0')
        return; /* the directory itself: its parent's watch reports it */

    rel = join(e->rel, ev->name);
    bool dir = (ev->mask & IN_ISDIR) && fw->recursive;
    if (ev->mask & IN_CREATE) {
        emit(fw, WR_WATCH_CREATE, rel);
        if (dir)
            follow(fw, rel, true);
    } else if (ev->mask & (IN_MODIFY | IN_CLOSE_WRITE)) {
        emit(fw, WR_WATCH_WRITE, rel);
    } else if (ev->mask & IN_DELETE) {
        emit(fw, WR_WATCH_REMOVE, rel);
    } else if (ev->mask & IN_MOVED_FROM) {
        emit(fw, WR_WATCH_RENAME, rel);
        if (dir)
            drop_tree(fw, rel);
    } else if (ev->mask & IN_MOVED_TO) {
        emit(fw, WR_WATCH_RENAME, rel);
        if (dir)
            follow(fw, rel, false);
    } else if (ev->mask & IN_ATTRIB) {
        emit(fw, WR_WATCH_CHMOD, rel);
    }
    free(rel);
}

static void on_inotify(struct init_fdw *w, uint32_t events)
{
    struct init_fswatch *fw = w->owner;
    static char buf[16 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));

    /* A few reads per wakeup; level-triggered epoll brings us back for the rest. */
    for (int i = 0; i < 4 && !fw->ended; i++) {
        ssize_t n;

        /* Over the limit the kernel keeps the events; past its own limit it reports
         * IN_Q_OVERFLOW, which ends the watch with ENOBUFS. The pump resumes reading. */
        if (init_conn_queued(fw->c) >= INIT_CONN_OUT_PRODUCE) {
            init_fdw_set(w, 0);
            return;
        }
        n = read(w->fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) {
            end(fw, n < 0 ? errno : EIO, "read events");
            return;
        }
        fw->last_op = 0;
        for (char *p = buf; p < buf + n && !fw->ended;) {
            const struct inotify_event *ev = (const struct inotify_event *)(void *)p;
            handle(fw, ev);
            p += sizeof(*ev) + ev->len;
        }
    }
}

/* ---- requests ------------------------------------------------------------------------------ */

static struct init_fswatch *find_watch(struct init_conn *c, uint32_t id)
{
    for (struct init_fswatch *fw = c->watches; fw != NULL; fw = fw->next)
        if (!fw->ended && fw->id == id)
            return fw;
    return NULL;
}

static void fswatch_free(struct init_fswatch *fw)
{
    init_fdw_close(&fw->w);
    for (size_t i = 0; i < fw->cap; i++)
        free(fw->tab[i].rel);
    free(fw->tab);
    free(fw->root);
    init_user_fini(&fw->user);
    free(fw);
}

static void watch_start(struct init_conn *c, uint32_t id, const struct wr_file_req *r,
                        const struct init_user *u)
{
    struct init_fswatch *fw;
    unsigned active = 0;
    struct stat st;
    int rc, saved;

    for (struct init_fswatch *o = c->watches; o != NULL; o = o->next)
        active += !o->ended;
    if (active >= INIT_MAX_WATCHES) {
        init_conn_errorf(c, id, EMFILE, "watch `%s`: too many watches on this connection", r->path);
        return;
    }
    if (find_watch(c, id) != NULL) {
        init_conn_errorf(c, id, EBUSY, "watch `%s`: request id in use", r->path);
        return;
    }
    fw = xcalloc(1, sizeof(*fw));
    fw->c = c;
    fw->id = id;
    fw->recursive = r->recursive;
    fw->root = xstrdup(r->path);
    init_user_copy(&fw->user, u);
    fw->w.cb = on_inotify;
    fw->w.owner = fw;
    fw->w.fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fw->w.fd < 0) {
        /* EMFILE: the sandbox's inotify instances (or init's fds) are used up. */
        init_conn_errorf(c, id, errno, "watch `%s`: inotify_init1", r->path);
        fswatch_free(fw);
        return;
    }
    if (init_fs_enter(u) < 0) {
        init_conn_errorf(c, id, errno, "switch to uid %u", (unsigned)u->uid);
        fswatch_free(fw);
        return;
    }
    if (stat(r->path, &st) < 0) {
        rc = -1;
    } else if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        rc = -1;
    } else {
        fw->dev = st.st_dev;
        rc = add_tree(fw, "", false);
    }
    saved = errno;
    init_fs_leave();
    if (rc < 0) {
        if (saved == EMFILE || saved == ENOSPC)
            init_conn_errorf(c, id, EMFILE,
                             "watch `%s`: more than %d directories, or the "
                             "sandbox's inotify watch limit reached",
                             r->path, INIT_WATCH_MAX_DIRS);
        else
            init_conn_errorf(c, id, saved, "watch `%s`", r->path);
        fswatch_free(fw);
        return;
    }
    /* Events the kernel queued meanwhile are read later, so they follow this OK. */
    wr_msg_ok(&c->out, id);
    fw->next = c->watches;
    c->watches = fw;
    init_fdw_set(&fw->w, EPOLLIN);
}

static void watch_cancel(struct init_conn *c, uint32_t id)
{
    struct init_fswatch *fw = find_watch(c, id);

    if (fw == NULL) {
        init_conn_errorf(c, id, ESRCH, "cancel %u: no such watch", id);
        return;
    }
    stop(fw);
    wr_msg_ok(&c->out, id);
}

void init_fswatch_request(struct init_conn *c, const struct wr_frame_hdr *h, const uint8_t *p)
{
    struct wr_file_req r;
    struct init_user u = {0};

    if (h->type == WR_MSG_CANCEL) {
        watch_cancel(c, h->id);
        return;
    }
    if (init_path_req(c, h, p, &r, &u) < 0)
        return;
    watch_start(c, h->id, &r, &u);
    init_user_fini(&u);
    wr_file_req_fini(&r);
}

void init_fswatch_pump(struct init_conn *c)
{
    struct init_fswatch **pp = &c->watches;
    bool produce = !c->dead && !c->drain && init_conn_queued(c) < INIT_CONN_OUT_PRODUCE;

    while (*pp != NULL) {
        struct init_fswatch *fw = *pp;
        if (fw->ended) {
            *pp = fw->next;
            fswatch_free(fw);
            continue;
        }
        init_fdw_set(&fw->w, produce ? EPOLLIN : 0);
        pp = &fw->next;
    }
}

void init_fswatch_conn_gone(struct init_conn *c)
{
    for (struct init_fswatch *fw = c->watches; fw != NULL; fw = fw->next)
        stop(fw);
}
