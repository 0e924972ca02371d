/* SPDX-License-Identifier: Apache-2.0 */
/* Images: what a sandbox starts from. An image is an ordered stack of read-only layers, bottom
 * first, plus a config ({"env": {...}, "cwd": "...", "user": "...", "setuid": bool}). Three
 * kinds reach wr_images_resolve, and all start through the same code path:
 *
 *   - directory templates: <templates>/<name>/rootfs (+ config.json), used in place (the base
 *     template that run.sh builds); their layer ref is "dir:<absolute path>";
 *   - templates recorded in the store (builds, imports): a name and layers of the store;
 *   - snapshots: a sandbox's image plus its writable layer captured as one more layer.
 *
 * Layers Warren makes live in the layer store, <state>/layers/<hex>/fs, named by their content
 * digest (ref "sha256:<hex>"), shared by every image and sandbox that uses them, and removed by
 * wr_images_gc once nothing refers to them. A sandbox's writable layer is its home,
 * <state>/sandboxes/<id> (see src/runtime/layer.h).
 *
 * Loop thread only, except where a function says it runs on a worker. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "../store/store.h"
#include "../util/err.h"

struct wr_images;

/* Open the layer store under state_dir: make layers/ and sandboxes/, drop what an interrupted
 * capture left in layers/.tmp, and probe the filesystem (logged: which capture path is
 * active). */
int wr_images_open(uv_loop_t *loop, struct wr_store *store, const char *state_dir,
                   const char *templates_dir, struct wr_images **out, struct wr_err *err);
void wr_images_close(struct wr_images *im);

struct wr_fs_info; /* src/runtime/layer.h */
const struct wr_fs_info *wr_images_fs(const struct wr_images *im);
/* How captures are made ("btrfs-snapshot", "reflink-copy", "copy"). */
const char *wr_images_capture_name(const struct wr_images *im);
/* How disk limits are enforced on writable layers ("btrfs-qgroup", "project-quota"), or NULL
 * with *why saying why they cannot be. */
const char *wr_images_quota_method(const struct wr_images *im, const char **why);
/* <state>/sandboxes/<id>: the home of a sandbox's writable layer (a new string). */
char *wr_images_home(const struct wr_images *im, const char *id);
/* A fresh path under <state>/layers/.tmp for a layer being made (not created; a new string). */
char *wr_images_tmp(const struct wr_images *im);

/* A resolved image. */
struct wr_image {
    char *name;     /* the ref as recorded on sandboxes: template name or snapshot id */
    char *kind;     /* "dir", "template" or "snapshot" */
    json_t *layers; /* array of refs, bottom first */
    json_t *config; /* object */
};
void wr_image_fini(struct wr_image *img);

/* Names. Templates and snapshots belong to the team that made them, and a team sees only its
 * own; the shared templates are every team's: the directory templates of the host and the
 * templates an admin shared. A name leads, for a team, to its own image (a snapshot by id or
 * name, a template by name), else to a directory template, else to a shared template. No team
 * may give an image a shared template's name (wr_images_claim), so a team's name never hides a
 * shared one but where it was there first (a template made before names were per team). */

/* The image `ref` names for team, in that order. WR_ENOTFOUND, WR_EINVAL for a malformed name. */
int wr_images_resolve(struct wr_images *im, const char *team, const char *ref, struct wr_image *out,
                      struct wr_err *err);

/* Whether name is a shared template's: a directory template (*dir set) or one an admin shared. */
/* The store's images, for the API (see wr_store_image_list, _get and _users in store/store.h). */
int wr_images_list(struct wr_images *im, const char *team, const char *kind, const char *source,
                   struct wr_image_rec **out, size_t *n, struct wr_err *err);
int wr_images_get(struct wr_images *im, const char *team, const char *ref, struct wr_image_rec *r,
                  struct wr_err *err);
/* Number of live sandboxes of team (NULL: any) started from image `name`; 0 on a failure. */
int64_t wr_images_users(struct wr_images *im, const char *team, const char *name);
bool wr_images_shared_name(struct wr_images *im, const char *name, bool *dir);

/* A name about to be given to a new image. */
struct wr_images_claim {
    const char *team; /* the team that makes it */
    const char *name; /* NULL: an unnamed snapshot (always free) */
    bool snapshot;    /* a snapshot's name, else a template's */
    bool replace;     /* an image of that name may be replaced (a template only) */
    bool shared;      /* a shared template (the caller checked that an admin asks) */
};
/* The one check every route that makes or replaces an image passes (builds, imports, pulls,
 * snapshot names, at the start and again just before recording). 0 if the name may be taken,
 * *replaces then the id of the record the new image replaces (a new string) or NULL. WR_EINVAL
 * for a malformed name. WR_ECONFLICT for a shared template's name (but a shared template an
 * admin replaces, which needs shared and replace) and for a name of the team's own images
 * (but its own template with replace). Other teams' images are never looked at: their names
 * are free, and no answer says they exist. */
int wr_images_claim(struct wr_images *im, const struct wr_images_claim *c, char **replaces,
                    struct wr_err *err);
/* Drop the record of the image being replaced (id from wr_images_claim; NULL: none), just before
 * the new one is recorded; its layers stay until the collection after that. */
int wr_images_replace(struct wr_images *im, const char *id, struct wr_err *err);

/* The template `name` as team sees it: its own, else a directory template (*dir set, rec
 * empty), else a shared one; with any_team (for an admin), else another team's if only one
 * team has one of that name (WR_ECONFLICT if several do). WR_ENOTFOUND. */
int wr_images_template(struct wr_images *im, const char *team, const char *name, bool any_team,
                       struct wr_image_rec *rec, bool *dir, struct wr_err *err);

/* Names of the directory templates (those with a rootfs/), sorted: *names is an array of *n
 * strings (free each and the array). */
int wr_images_dir_names(const struct wr_images *im, char ***names, size_t *n);

/* A stack of layer refs (a JSON array, bottom first) as it may be mounted: each ref once, at
 * its topmost place (a lower copy of a layer under an upper one adds nothing, and overlayfs
 * refuses a directory twice). A new array. */
json_t *wr_images_stack_clean(const json_t *layers);
/* Put layer digest on top of the stack layers (a clean one stays clean: a copy lower down goes).
 * NULL or "" (a capture that held nothing) adds nothing. */
void wr_images_stack_push(json_t *layers, const char *digest);

/* Layer directories for refs (a JSON array), bottom first, cleaned as wr_images_stack_clean
 * does (records written before it may name a layer twice): *paths is an array of *n strings
 * (free each and the array). WR_ENOTFOUND if a layer is gone. */
int wr_images_layer_paths(const struct wr_images *im, const json_t *layers, char ***paths,
                          size_t *n, struct wr_err *err);

/* The file at path (relative: "etc/passwd") of the image whose layer directories are layers
 * (bottom first, n of them), as its sandboxes see it: the topmost layer that has it gives it,
 * and a whiteout or an opaque directory above hides the layers below (src/core/imagefs.c).
 * Nothing is followed: a symlink on the way, or anything but a regular file, is as if the file
 * were not there. NULL if it is not, or is over max bytes; else its text (free it). */
char *wr_images_read_file(char *const *layers, size_t n, const char *path, size_t max);
/* The ids a user spec of an image's config ("user", "1000", "user:group", "1000:1000"; NULL or
 * "": root) stands for in that image, resolved against its /etc/passwd and /etc/group as
 * warren-init does (a number not in passwd: that uid and group 0). WR_ENOTFOUND for a name the
 * image does not have. */
int wr_images_user_ids(char *const *layers, size_t n, const char *spec, uid_t *uid, gid_t *gid,
                       struct wr_err *err);

/* Worker thread: move the layer made at tmp (tmp/fs filled) into the store under its digest,
 * sealed; if the store has that layer already, tmp is removed. A layer that holds nothing
 * (tmp/fs empty) is not installed: tmp is removed and digest is "". */
int wr_images_install(const struct wr_images *im, const char *tmp, char digest[72], uint64_t *bytes,
                      struct wr_err *err);

/* Loop: record an installed layer, then an image on top of base layers plus (if digest is not
 * NULL or "") that layer, the stack cleaned (wr_images_stack_clean, _push). img->id, kind,
 * team, config_json are the caller's; layers_json and size are filled here. WR_ENOTFOUND if the
 * layer vanished meanwhile (collected: try again); WR_ECONFLICT if the stack would be deeper
 * than a sandbox can mount (WR_MAX_LAYERS): no image that cannot start is recorded. */
int wr_images_record(struct wr_images *im, struct wr_image_rec *img, const json_t *base_layers,
                     const char *digest, uint64_t bytes, struct wr_err *err);

/* Loop: a layer wr_images_install put into the store for an image that will not be recorded:
 * recorded and collected at once, unless something else refers to it. digest NULL or "": none. */
void wr_images_forget(struct wr_images *im, const char *digest, uint64_t bytes);

/* Delete a snapshot (id or name) of team (NULL: any), or (kind "template") a template as
 * wr_images_delete_template does without admin: the record goes at once; sandboxes started from
 * it keep their layers until they end. */
int wr_images_delete(struct wr_images *im, const char *team, const char *kind, const char *ref,
                     struct wr_err *err);
/* Delete the template `name` that wr_images_template (any_team only with admin) finds.
 * WR_ECONFLICT for a directory template (removed on the host), and for a shared template
 * unless admin. */
int wr_images_delete_template(struct wr_images *im, const char *team, const char *name, bool admin,
                              bool any_team, struct wr_err *err);

/* Forget team's build cache (team NULL: every team's) and collect the layers nothing else
 * refers to. *n gets how many cached steps were forgotten. */
int wr_images_prune_cache(struct wr_images *im, const char *team, int64_t *n, struct wr_err *err);

/* Remove, on a worker, the layers nothing refers to any more. Cheap when there are none; call
 * it after anything that may drop a reference (an image deleted, a sandbox ended). */
void wr_images_gc(struct wr_images *im);

/* 1 to 64 of [A-Za-z0-9._-], not starting with `.`. */
bool wr_images_name_valid(const char *name);
/* A name a user may give a new template or snapshot: wr_images_name_valid, and not starting with
 * "snap-", the prefix of generated snapshot ids. NULL is not one. */
bool wr_images_user_name_valid(const char *name);

/* A random id: prefix + 16 characters of [a-z0-9]. */
char *wr_images_new_id(const char *prefix);
