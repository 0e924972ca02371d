/* SPDX-License-Identifier: Apache-2.0 */
/* Moving a sandbox paused to disk from one node to another through shared object storage
 * (warrend --role node --object-store URL; docs/architecture.md, "Moving a sandbox between
 * nodes"). The node that holds it exports it: each layer of its image and its writable layer
 * go to the store as tars (the form wr_oci_unpack_layer reads, src/image/image.h) under
 * content-addressed keys
 * "blobs/sha256/<hex of the tar>", and a manifest that names them, with what the sandbox's
 * record needs to be made again, under "sandboxes/<id>/<hex of the manifest>.json". Another
 * node imports that manifest: the layers it lacks go into its layer store, the writable layer
 * becomes the sandbox's home, and the sandbox is recorded with the same id and team, paused to
 * disk with the time it had left, so that a resume there starts it on its files.
 *
 * Moved: the image's layers and config, the writable layer (upper/), cpus, memory, disk limit,
 * env, metadata, timeout, time left, on_timeout, runtime, Compose services, and the network
 * policy (the imported sandbox gets a slot of the importing node's pool, so a new address).
 * Refused at export: a sandbox with volumes or host devices (they belong to the host). A gvisor
 * sandbox's checkpoint stays behind: it resumes with a fresh warren-init.
 *
 * The store is src/image/objstore.h's (file:// or s3://), opened on the worker for each move.
 * Loop thread; the disk and the store are worked on libuv workers. */
#pragma once

#include <stdint.h>

#include "manager.h"

/* Export's answer: the manifest's key (valid during the call), how many layers (the image's
 * and the writable one) and the bytes of their tars. */
struct wr_move_export_result {
    const char *manifest;
    size_t layers;
    uint64_t bytes;
};
typedef void (*wr_move_export_cb)(void *ctx, const struct wr_move_export_result *res,
                                  const struct wr_err *err);

/* Export sandbox id of team (NULL: any) to the store at store_url. It must be paused to disk;
 * meanwhile it is busy (a resume or a pause answers WR_ECONFLICT; a delete waits for the end).
 * WR_ENOTFOUND; WR_ECONFLICT if it is not paused to disk, busy, or holds volumes or devices;
 * WR_EUNSUPPORTED without a store; the store's errors (objstore.h), WR_ESYS for the disk. cb is
 * always called, possibly before this returns. */
void wr_move_export(struct wr_manager *m, const char *store_url, const char *team, const char *id,
                    wr_move_export_cb cb, void *ctx);

/* Import the sandbox whose manifest is at key in the store at store_url. team (NULL: any, an
 * admin) must be the manifest's. The sandbox is recorded paused to disk, its record given to cb
 * (valid during the call). WR_EINVAL for a malformed key, WR_ENOTFOUND for a key or blob the
 * store does not have (or another team's manifest), WR_EBADDATA for a manifest or blob that
 * fails its checks, WR_ECONFLICT if a sandbox with its id exists here. On failure nothing of it
 * stays: no record, home or layer but those something else uses. */
void wr_move_import(struct wr_manager *m, const char *store_url, const char *team, const char *key,
                    wr_manager_state_cb cb, void *ctx);

/* Images (templates and snapshots of the layer store) move the same way: export writes each
 * layer and a manifest of the record (id, kind, name, team, shared, source, config) under
 * "images/<image id>/<hex of the manifest>.json"; import puts the layers the node lacks into its
 * store and records the image with the same id, kind, name and team. */

/* Export the image ref (an id, or a name wr_images_get finds) of team (NULL: any).
 * WR_ENOTFOUND; WR_ECONFLICT for a directory template (each node has its own). */
void wr_move_image_export(struct wr_manager *m, const char *store_url, const char *team,
                          const char *ref, wr_move_export_cb cb, void *ctx);
/* The record of an imported image (valid during the call), or an error. */
typedef void (*wr_move_image_cb)(void *ctx, const struct wr_image_rec *rec,
                                 const struct wr_err *err);
/* Import the image whose manifest is at key ("images/<id>/<hex>.json"); team (NULL: any) must
 * be the manifest's. Errors as wr_move_import's, and WR_ECONFLICT for an image of that id here,
 * or a name wr_images_claim refuses. A failure leaves no layer nothing else uses. */
void wr_move_image_import(struct wr_manager *m, const char *store_url, const char *team,
                          const char *key, wr_move_image_cb cb, void *ctx);
