/* SPDX-License-Identifier: Apache-2.0 */
/* Named volumes: a team's directories under <volumes_dir>/<id>/data that outlive sandboxes.
 * Their files are stored with sandbox-side ids (the directory is 0:0), and the runtime mounts
 * them idmapped to each sandbox's user namespace, so every sandbox sees them as its own. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "core_int.h"
#include "images.h"

_Static_assert(WR_MAX_VOLUMES == WR_MAX_MOUNTS, "the API's limit is the runtime's");

void wr__mounts_free(struct wr_mount_spec *mounts, size_t n)
{
    for (size_t i = 0; mounts != NULL && i < n; i++) {
        free((char *)mounts[i].host_dir);
        free((char *)mounts[i].target);
    }
    free(mounts);
}

/* Template and volume names: 1-64 of [A-Za-z0-9_.-], not starting with `.` or `-` (never a
 * path component of their own, nor an option). */
bool wr_volume_name_valid(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 64 || s[0] == '.' || s[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_' || s[i] == '.'))
            return false;
    return true;
}

int wr__volumes_resolve(struct wr_manager *m, const char *team, const struct wr_volume_mount *v,
                        size_t n, char **out, struct wr_err *err)
{
    const struct wr_manager_config *cfg = wr__core_config(m);
    struct wr_mount_spec ms[WR_MAX_MOUNTS] = {0};
    json_t *arr;

    *out = NULL;
    if (n > WR_MAX_MOUNTS)
        return wr_err_set(err, WR_EINVAL, 0, "at most %d volumes per sandbox, not %zu",
                          WR_MAX_MOUNTS, n);
    for (size_t i = 0; i < n; i++)
        ms[i].target = v[i].path;
    if (wr_mounts_check(ms, n, err) < 0)
        return -1;
    arr = json_array();
    for (size_t i = 0; i < n; i++) {
        struct wr_volume_rec rec;

        if (v[i].name == NULL || !wr_volume_name_valid(v[i].name)) {
            json_decref(arr);
            return wr_err_set(err, WR_EINVAL, 0, "volume name `%s` is not valid",
                              v[i].name ? v[i].name : "");
        }
        if (wr_store_volume_get(cfg->store, team, v[i].name, &rec, err) < 0) {
            json_decref(arr);
            return -1;
        }
        json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:b}", "id", rec.id, "name", rec.name,
                                             "path", v[i].path, "readonly", v[i].readonly));
        wr_volume_rec_fini(&rec);
    }
    *out = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    return 0;
}

int wr__mounts_of(struct wr_manager *m, const char *volumes_json, struct wr_mount_spec **mounts,
                  size_t *n, struct wr_err *err)
{
    const struct wr_manager_config *cfg = wr__core_config(m);
    json_t *arr = json_loads(volumes_json ? volumes_json : "[]", 0, NULL), *v;
    struct wr_mount_spec *ms;
    size_t i;

    *mounts = NULL;
    *n = 0;
    if (!json_is_array(arr) || json_array_size(arr) > WR_MAX_MOUNTS) {
        json_decref(arr);
        return wr_err_set(err, WR_EINTERNAL, 0, "a sandbox record's volumes are not valid");
    }
    ms = json_array_size(arr) ? xcalloc(json_array_size(arr), sizeof(*ms)) : NULL;
    json_array_foreach(arr, i, v)
    {
        const char *id = json_string_value(json_object_get(v, "id"));
        const char *path = json_string_value(json_object_get(v, "path"));

        if (id == NULL || path == NULL) {
            wr__mounts_free(ms, i);
            json_decref(arr);
            return wr_err_set(err, WR_EINTERNAL, 0, "a sandbox record's volumes are not valid");
        }
        ms[i].host_dir = xasprintf("%s/%s/data", cfg->volumes_dir, id);
        ms[i].target = xstrdup(path);
        ms[i].readonly = json_is_true(json_object_get(v, "readonly"));
    }
    *mounts = ms;
    *n = json_array_size(arr);
    json_decref(arr);
    return 0;
}

/* The volume's root is as wr_manager_volume_create made it: owned by root, and empty. */
static bool untouched(int fd)
{
    _cleanup_closedir_ DIR *d = NULL;
    struct stat st;
    int dup_fd;

    if (fstat(fd, &st) < 0 || st.st_uid != 0 || st.st_gid != 0)
        return false;
    dup_fd = dup(fd);
    if (dup_fd < 0 || (d = fdopendir(dup_fd)) == NULL) {
        if (dup_fd >= 0)
            close(dup_fd);
        return false;
    }
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            return false;
    return true;
}

/* Docker gives a new named volume the owner of the image's mount point (else root), which
 * suits images whose service runs as root; Warren's default user is not root (E2B's `user`), so
 * an empty, root-owned volume goes to the default user of the sandbox that mounts it read-write
 * (one whose default user is root leaves it as it is). Once it holds anything or has another
 * owner it is never given again: sandboxes of other images keep what the first one got. */
void wr__volumes_give(struct wr_manager *m, const struct start_spec *ss)
{
    bool resolved = false;
    uid_t uid = 0;
    gid_t gid = 0;
    struct wr_err err;

    for (size_t i = 0; i < ss->n_mounts; i++) {
        const char *dir = ss->mounts[i].host_dir;
        _cleanup_close_ int fd = -1;

        if (ss->mounts[i].readonly)
            continue;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || !untouched(fd))
            continue;
        if (!resolved) {
            if (wr_images_user_ids(ss->layers, ss->n_layers, ss->user, &uid, &gid, &err) < 0) {
                log_warn("sandbox %s: volume %s stays root's: %s", ss->id, dir, err.msg);
                return;
            }
            resolved = true;
        }
        if (uid == 0 && gid == 0)
            return;
        if (fchown(fd, uid, gid) < 0)
            log_warn("sandbox %s: give volume %s to %u:%u: %s", ss->id, dir, (unsigned)uid,
                     (unsigned)gid, strerror(errno));
        else
            log_info("sandbox %s: volume %s given to its default user (%u:%u)", ss->id, dir,
                     (unsigned)uid, (unsigned)gid);
    }
}

int wr_manager_volume_list(struct wr_manager *m, const char *team, struct wr_volume_rec **out,
                           size_t *n, struct wr_err *err)
{
    return wr_store_volume_list(m->cfg.store, team, out, n, err);
}

int wr_manager_volume_create(struct wr_manager *m, const char *team, const char *name,
                             struct wr_volume_rec *rec, struct wr_err *err)
{
    const struct wr_manager_config *cfg = wr__core_config(m);
    _cleanup_close_ int root = -1, dir = -1;
    struct wr_volume_rec v;
    struct wr_err e2;
    char id[21];

    if (name == NULL || !wr_volume_name_valid(name))
        return wr_err_set(err, WR_EINVAL, 0,
                          "volume name `%s` must be 1-64 of [A-Za-z0-9_.-], not starting with . "
                          "or -",
                          name ? name : "");
    if (wr_store_volume_get(cfg->store, team, name, &v, err) == 0) {
        wr_volume_rec_fini(&v);
        return wr_err_set(err, WR_ECONFLICT, 0, "volume `%s` already exists", name);
    }
    if (err->kind != WR_ENOTFOUND)
        return -1;
    wr__core_new_id(id);
    root = open(cfg->volumes_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return wr_err_sys(err, "open `%s`", cfg->volumes_dir);
    /* <id> is the host's (0700); <id>/data is the volume's root as the sandboxes see it:
     * 0:0 on disk is their own root through the idmap. */
    if (mkdirat(root, id, 0700) < 0)
        return wr_err_sys(err, "create volume directory `%s/%s`", cfg->volumes_dir, id);
    dir = openat(root, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0 || mkdirat(dir, "data", 0755) < 0) {
        wr_err_sys(err, "create volume directory `%s/%s/data`", cfg->volumes_dir, id);
        goto undo;
    }
    v = (struct wr_volume_rec){
        .id = id, .team = (char *)team, .name = (char *)name, .created_ms = wr__core_now_ms()};
    if (wr_store_volume_insert(cfg->store, &v, err) < 0)
        goto undo;
    if (wr_store_volume_get(cfg->store, team, name, rec, err) < 0)
        return -1;
    log_info("volume %s of team %s: created (%s)", name, team, id);
    return 0;
undo:
    if (wr_rm_rf_at(root, id, &e2) < 0)
        log_warn("volume %s: %s", name, e2.msg);
    return -1;
}

/* ---- delete: the files go on a worker ------------------------------------------------------ */

struct vol_work {
    uv_work_t w;
    struct wr_manager *m;
    struct wr_volume_rec rec;
    uint64_t bytes;
    int rc;
    struct wr_err err;
    void (*del_cb)(void *ctx, const struct wr_err *err);
    wr_manager_volume_cb get_cb;
    void *ctx;
};

static void delete_run(uv_work_t *w)
{
    struct vol_work *vw = w->data;
    const char *dir = wr__core_config(vw->m)->volumes_dir;
    _cleanup_close_ int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (root < 0)
        vw->rc = wr_err_sys(&vw->err, "open `%s`", dir);
    else
        vw->rc = wr_rm_rf_at(root, vw->rec.id, &vw->err);
}

static void vol_work_done(uv_work_t *w, int status)
{
    struct vol_work *vw = w->data;
    struct wr_manager *m = vw->m;

    if (vw->del_cb != NULL) {
        if (vw->rc < 0)
            log_warn("volume %s (%s): remove files: %s", vw->rec.name, vw->rec.id, vw->err.msg);
        else
            log_info("volume %s of team %s: deleted", vw->rec.name, vw->rec.team);
        vw->del_cb(vw->ctx, vw->rc < 0 ? &vw->err : NULL);
    } else {
        vw->get_cb(vw->ctx, vw->rc < 0 ? NULL : &vw->rec, vw->bytes, vw->rc < 0 ? &vw->err : NULL);
    }
    wr_volume_rec_fini(&vw->rec);
    free(vw);
    wr__work_done(m);
}

void wr_manager_volume_delete(struct wr_manager *m, const char *team, const char *name,
                              void (*cb)(void *ctx, const struct wr_err *err), void *ctx)
{
    struct vol_work *vw = xcalloc(1, sizeof(*vw));

    vw->m = m;
    vw->del_cb = cb;
    vw->ctx = ctx;
    if (wr_store_volume_delete(wr__core_config(m)->store, team, name, &vw->rec, &vw->err) < 0) {
        cb(ctx, &vw->err);
        free(vw);
        return;
    }
    vw->w.data = vw;
    wr__queue_work(m, &vw->w, delete_run, vol_work_done);
}

/* ---- get, with the disk use ------------------------------------------------------------------ */

static void usage_run(uv_work_t *w)
{
    struct vol_work *vw = w->data;
    const char *dir = wr__core_config(vw->m)->volumes_dir;
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, vw->rec.id);
    _cleanup_close_ int d = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (d < 0 && errno == ENOENT) /* deleted since the lookup */
        vw->rc = wr_err_set(&vw->err, WR_ENOTFOUND, 0, "volume `%s` not found", vw->rec.name);
    else if (d < 0)
        vw->rc = wr_err_sys(&vw->err, "open `%s`", path);
    else
        vw->rc = wr_disk_usage_at(d, "data", &vw->bytes, &vw->err);
}

void wr_manager_volume_get(struct wr_manager *m, const char *team, const char *name,
                           wr_manager_volume_cb cb, void *ctx)
{
    struct vol_work *vw = xcalloc(1, sizeof(*vw));

    vw->m = m;
    vw->get_cb = cb;
    vw->ctx = ctx;
    if (wr_store_volume_get(wr__core_config(m)->store, team, name, &vw->rec, &vw->err) < 0) {
        cb(ctx, NULL, 0, &vw->err);
        free(vw);
        return;
    }
    vw->w.data = vw;
    wr__queue_work(m, &vw->w, usage_run, vol_work_done);
}

/* ---- open ------------------------------------------------------------------------------------ */

void wr__volumes_sweep(struct wr_manager *m)
{
    const struct wr_manager_config *cfg = wr__core_config(m);
    _cleanup_closedir_ DIR *d = opendir(cfg->volumes_dir);
    struct wr_volume_rec *recs = NULL;
    struct wr_err err;
    size_t n = 0;

    if (d == NULL || wr_store_volume_list(cfg->store, NULL, &recs, &n, &err) < 0)
        return;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        bool known = de->d_name[0] == '.';
        for (size_t i = 0; i < n && !known; i++)
            known = strcmp(recs[i].id, de->d_name) == 0;
        if (known)
            continue;
        log_warn("volume directory %s/%s has no record: removing it", cfg->volumes_dir, de->d_name);
        if (wr_rm_rf_at(dirfd(d), de->d_name, &err) < 0)
            log_warn("%s", err.msg);
    }
    for (size_t i = 0; i < n; i++)
        wr_volume_rec_fini(&recs[i]);
    free(recs);
}
