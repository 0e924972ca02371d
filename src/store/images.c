/* SPDX-License-Identifier: Apache-2.0 */
/* Layers and images (templates and snapshots) in the store. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/xalloc.h"
#include "store_int.h"

#define IMG_COLS                                                                                   \
    "id, kind, name, team, layers_json, config_json, source, size_bytes, created_ms, shared"

/* Live sandboxes: their layers must stay. */
#define LIVE "('creating', 'running', 'paused')"

void wr_image_rec_fini(struct wr_image_rec *r)
{
    if (r == NULL)
        return;
    free(r->id);
    free(r->kind);
    free(r->name);
    free(r->team);
    free(r->layers_json);
    free(r->config_json);
    free(r->source);
    memset(r, 0, sizeof(*r));
}

int wr_store_layer_put(struct wr_store *s, const char *digest, uint64_t size_bytes,
                       struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(
        s, WR_ST_LAYER_PUT,
        "INSERT OR IGNORE INTO layers (digest, size_bytes, created_ms) VALUES (?1, ?2, ?3)", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, digest);
    wr__bind_int64(st, 2, (int64_t)size_bytes);
    wr__bind_int64(st, 3, wr__now_ms());
    return wr__step_done(s->db, st, "record layer", err);
}

int wr_store_layer_delete(struct wr_store *s, const char *digest, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_LAYER_DELETE, "DELETE FROM layers WHERE digest = ?1", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, digest);
    return wr__step_done(s->db, st, "delete layer", err);
}

int wr_store_layers_unreferenced(struct wr_store *s, char ***out, size_t *n, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_LAYER_UNREF,
                 "SELECT digest FROM layers WHERE digest NOT IN ("
                 " SELECT j.value FROM images, json_each(images.layers_json) AS j"
                 " UNION SELECT digest FROM build_cache"
                 " UNION SELECT j.value FROM sandboxes,"
                 "  json_each(CASE WHEN json_type(sandboxes.image_json, '$.layers') = 'array'"
                 "   THEN json_extract(sandboxes.image_json, '$.layers') ELSE '[]' END) AS j"
                 "  WHERE sandboxes.state IN " LIVE ")",
                 err);
    size_t cap = 0;
    int rc;

    *out = NULL;
    *n = 0;
    if (st == NULL)
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            *out = xrealloc(*out, cap * sizeof(char *));
        }
        (*out)[(*n)++] = wr__col_text(st, 0);
    }
    if (rc != SQLITE_DONE) {
        wr__store_fail(s->db, err, "list unreferenced layers");
        for (size_t i = 0; i < *n; i++)
            free((*out)[i]);
        free(*out);
        *out = NULL;
        *n = 0;
        return -1;
    }
    return 0;
}

int wr_store_layers_size(struct wr_store *s, const char *layers_json, uint64_t *bytes,
                         struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_LAYER_SIZE,
                 "SELECT coalesce(sum(size_bytes), 0) FROM layers WHERE digest IN"
                 " (SELECT value FROM json_each(?1))",
                 err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, layers_json);
    if (sqlite3_step(st) != SQLITE_ROW)
        return wr__store_fail(s->db, err, "size of layers");
    *bytes = (uint64_t)sqlite3_column_int64(st, 0);
    return 0;
}

static void read_img(sqlite3_stmt *st, struct wr_image_rec *r)
{
    r->id = wr__col_text(st, 0);
    r->kind = wr__col_text(st, 1);
    r->name = wr__col_text(st, 2);
    r->team = wr__col_text(st, 3);
    r->layers_json = wr__col_text(st, 4);
    r->config_json = wr__col_text(st, 5);
    r->source = wr__col_text(st, 6);
    r->size_bytes = (uint64_t)sqlite3_column_int64(st, 7);
    r->created_ms = sqlite3_column_int64(st, 8);
    r->shared = sqlite3_column_int(st, 9) != 0;
}

int wr_store_image_insert(struct wr_store *s, const struct wr_image_rec *r, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(
        s, WR_ST_IMG_INSERT,
        "INSERT INTO images (" IMG_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, r->id);
    wr__bind_text(st, 2, r->kind);
    wr__bind_text(st, 3, r->name);
    wr__bind_text(st, 4, r->team);
    wr__bind_text(st, 5, r->layers_json);
    wr__bind_text(st, 6, r->config_json ? r->config_json : "{}");
    wr__bind_text(st, 7, r->source);
    wr__bind_int64(st, 8, (int64_t)r->size_bytes);
    wr__bind_int64(st, 9, r->created_ms ? r->created_ms : wr__now_ms());
    wr__bind_int64(st, 10, r->shared ? 1 : 0);
    return wr__step_done(s->db, st, "insert image", err);
}

static int get_one(struct wr_store *s, sqlite3_stmt *st, const char *ref, struct wr_image_rec *r,
                   struct wr_err *err)
{
    int rc = sqlite3_step(st);

    if (rc == SQLITE_DONE)
        return wr_err_set(err, WR_ENOTFOUND, 0, "image `%s` not found", ref);
    if (rc != SQLITE_ROW)
        return wr__store_fail(s->db, err, "get image %s", ref);
    read_img(st, r);
    return 0;
}

int wr_store_image_get(struct wr_store *s, const char *team, const char *ref,
                       struct wr_image_rec *r, struct wr_err *err)
{
    /* An id first, then a name; another team's image reads as absent. */
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_IMG_GET,
                 "SELECT " IMG_COLS " FROM images WHERE (id = ?1 OR name = ?1)"
                 " AND (?2 IS NULL OR team = ?2)"
                 " ORDER BY id = ?1 DESC, kind = 'snapshot' DESC, shared DESC LIMIT 1",
                 err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, ref);
    wr__bind_text(st, 2, team);
    return get_one(s, st, ref, r, err);
}

int wr_store_image_get_shared(struct wr_store *s, const char *name, struct wr_image_rec *r,
                              struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(s, WR_ST_IMG_GET_SHARED,
                                               "SELECT " IMG_COLS " FROM images WHERE name = ?1"
                                               " AND kind = 'template' AND shared = 1",
                                               err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, name);
    return get_one(s, st, name, r, err);
}

int wr_store_image_list(struct wr_store *s, const char *team, const char *kind, const char *source,
                        struct wr_image_rec **out, size_t *n, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_IMG_LIST,
                 "SELECT " IMG_COLS " FROM images WHERE (?1 IS NULL OR kind = ?1)"
                 " AND (?2 IS NULL OR team = ?2 OR shared = 1)"
                 " AND (?3 IS NULL OR source = ?3) ORDER BY created_ms DESC, id",
                 err);
    size_t cap = 0;
    int rc;

    *out = NULL;
    *n = 0;
    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, kind);
    wr__bind_text(st, 2, team);
    wr__bind_text(st, 3, source);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            *out = xrealloc(*out, cap * sizeof(**out));
        }
        memset(&(*out)[*n], 0, sizeof(**out));
        read_img(st, &(*out)[(*n)++]);
    }
    if (rc != SQLITE_DONE) {
        wr__store_fail(s->db, err, "list images");
        for (size_t i = 0; i < *n; i++)
            wr_image_rec_fini(&(*out)[i]);
        free(*out);
        *out = NULL;
        *n = 0;
        return -1;
    }
    return 0;
}

int wr_store_image_delete(struct wr_store *s, const char *id, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_IMG_DELETE, "DELETE FROM images WHERE id = ?1", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, id);
    if (wr__step_done(s->db, st, "delete image", err) < 0)
        return -1;
    if (sqlite3_changes(s->db) == 0)
        return wr_err_set(err, WR_ENOTFOUND, 0, "image `%s` not found", id);
    return 0;
}

int wr_store_image_users(struct wr_store *s, const char *team, const char *name, int64_t *n,
                         struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_IMG_USERS,
                 "SELECT count(*) FROM sandboxes WHERE template_name = ?1"
                 " AND (?2 IS NULL OR team = ?2) AND state IN " LIVE,
                 err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, name);
    wr__bind_text(st, 2, team);
    if (sqlite3_step(st) != SQLITE_ROW)
        return wr__store_fail(s->db, err, "count users of image %s", name);
    *n = sqlite3_column_int64(st, 0);
    return 0;
}

int wr_store_build_cache_put(struct wr_store *s, const char *key, const char *digest,
                             const char *team, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(s, WR_ST_CACHE_PUT,
                                               "INSERT OR REPLACE INTO build_cache (key, digest,"
                                               " created_ms, team) VALUES (?1, ?2, ?3, ?4)",
                                               err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, key);
    wr__bind_text(st, 2, digest);
    wr__bind_int64(st, 3, wr__now_ms());
    wr__bind_text(st, 4, team);
    return wr__step_done(s->db, st, "cache a build step", err);
}

int wr_store_build_cache_prune(struct wr_store *s, const char *team, int64_t *n, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st = wr__stmt(
        s, WR_ST_CACHE_PRUNE, "DELETE FROM build_cache WHERE ?1 IS NULL OR team = ?1", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, team);
    if (wr__step_done(s->db, st, "prune the build cache", err) < 0)
        return -1;
    *n = sqlite3_changes(s->db);
    return 0;
}

int wr_store_build_cache_get(struct wr_store *s, const char *key, char digest[80],
                             struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_CACHE_GET,
                 "SELECT c.digest FROM build_cache AS c LEFT JOIN layers AS l"
                 " ON l.digest = c.digest WHERE c.key = ?1"
                 " AND (c.digest = '' OR l.digest IS NOT NULL)",
                 err);
    int rc;

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, key);
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        return wr_err_set(err, WR_ENOTFOUND, 0, "no cached step %s", key);
    if (rc != SQLITE_ROW)
        return wr__store_fail(s->db, err, "read the build cache");
    snprintf(digest, 80, "%s", (const char *)sqlite3_column_text(st, 0));
    return 0;
}
