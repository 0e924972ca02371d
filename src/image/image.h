/* SPDX-License-Identifier: Apache-2.0 */
/* OCI images: reading docker-archive and oci-archive tarballs, pulling from a registry (v2 API),
 * and unpacking their layers into layer directories of the store (docs/design/images.md, "OCI").
 *
 * This folder knows formats and the network, nothing of HTTP servers, SQL or the sandbox
 * manager: src/core/oci.c runs these functions on worker threads and records the result. Every
 * function blocks (disk, network) and is thread-safe for different paths.
 *
 * Errors: WR_EINVAL for a malformed reference, WR_ENOTFOUND for an image or tag the registry
 * does not have, WR_EPROTO for a registry that refuses (401, 403) or cannot be reached or
 * answers nonsense, WR_EBADDATA for content that fails its checks (a bad archive, a blob whose
 * digest does not match its descriptor, an unsafe entry in a layer). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"

/* One layer: a blob on disk and the digest it must have. */
struct wr_oci_layer {
    char *path;       /* the blob (a tar, maybe compressed: gzip, zstd, ...) */
    char *digest;     /* "sha256:<hex>" of the blob's bytes as stored */
    char *media_type; /* as the manifest says ("" for a docker-archive's plain tar) */
};

/* An image read from an archive or a registry, ready to unpack. */
struct wr_oci_image {
    json_t *config; /* Warren's image config: {"env", "cwd", "user", "cmd", "entrypoint"} */
    struct wr_oci_layer *layers; /* bottom first */
    size_t nlayers;
};
void wr_oci_image_fini(struct wr_oci_image *img);

/* Warren's config ({"env": {...}, "cwd", "user", "cmd", "entrypoint"}) of an OCI image config
 * (its "config" object: Env, WorkingDir, User, Cmd, Entrypoint). A new reference. */
json_t *wr_oci_config_convert(const json_t *oci_config);

/* Read the image archive at path, a docker-archive (`docker save`: manifest.json) or an
 * oci-archive (an OCI layout: index.json, blobs/), by extracting it into workdir (an existing
 * empty directory that the caller removes). The config and manifests are checked against
 * their digests here; the layers when they are unpacked. */
int wr_oci_archive_read(const char *path, const char *workdir, struct wr_oci_image *img,
                        struct wr_err *err);

struct wr_registry_opts {
    const char *username, *password; /* NULL: anonymous */
    bool insecure;                   /* plain http instead of https */
    /* Connect to loopback, private and link-local addresses too (registry, token server and
     * redirects alike). Off, a pull cannot be turned against services on the daemon's host or
     * network (the daemon answers with the registry's words). */
    bool allow_private;
};

/* Pull ref ("host[:port]/repo[:tag]" or "...@sha256:<hex>"; no host means Docker Hub) from its
 * registry: ping /v2/, follow a Bearer or Basic challenge, fetch the manifest (an index or a
 * manifest list resolves to linux/amd64), the config and the layers into files under workdir
 * (an existing directory the caller removes), each checked against its digest as it arrives.
 * WR_EINVAL when a connection would go to an address opts do not allow. */
int wr_registry_pull(const char *ref, const struct wr_registry_opts *opts, const char *workdir,
                     struct wr_oci_image *img, struct wr_err *err);

/* Unpack a layer's blob into dir (an existing empty directory, the layer's fs/), checking the
 * blob's SHA-256 against l->digest as it is read. Entries keep their owners (the tar's ids, as
 * sandboxes see them), modes, times, extended attributes, hard links, symlinks and device
 * nodes; OCI whiteouts become overlayfs ones (`.wh.NAME` a 0:0 character device NAME,
 * `.wh..wh..opq` the xattr trusted.overlay.opaque=y on its directory). Every path is resolved
 * relative to dir without following any symlink, so no entry reaches outside it; absolute
 * paths and `..` are refused. On failure dir holds a partial tree: the caller removes it. */
int wr_oci_unpack_layer(const struct wr_oci_layer *l, const char *dir, struct wr_err *err);

/* Pack the tree at dir (a layer's fs/, a directory template's root, a writable layer's upper/)
 * into a plain tar at path (created 0600; it must not exist) that wr_oci_unpack_layer gives back
 * as it was: entries keep their numeric owners, modes, modification times, extended
 * attributes, hard links, symlinks and device nodes; overlayfs' whiteouts become OCI ones (a
 * 0:0 character device NAME is `.wh.NAME`, trusted.overlay.opaque=y is `.wh..wh..opq`) and its
 * other trusted.overlay.* attributes are left out; sockets are left out. Nothing is followed
 * (dir itself may be a symlink) and no other mount is entered. *digest gets "sha256:<hex>" of
 * the tar's bytes, *size their count. On failure nothing is left at path. WR_ESYS for the
 * disk, WR_EBADDATA for an entry a tar cannot hold. */
int wr_oci_pack_layer(const char *dir, const char *path, char digest[72], uint64_t *size,
                      struct wr_err *err);
/* "sha256:<hex>" of n bytes at p. */
void wr_oci_digest(const void *p, size_t n, char out[72]);
