/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the files of src/image/. */
#pragma once

#include <openssl/evp.h>
#include <stdbool.h>

#include "image.h"

/* Unpack the tar read from fd (any compression libarchive knows) into the directory root. A
 * layer keeps owners, devices and converts whiteouts; otherwise (the outer tar of an archive)
 * only files, directories and symlinks are made, owned by root. With want_digest, the SHA-256
 * of every byte read from fd must match it. what names the tar in errors. */
int wr__unpack_tar(int fd, int root, bool layer, const char *want_digest, const char *what,
                   struct wr_err *err);

/* "sha256:<hex>" of what md has hashed. */
void wr__digest_final(EVP_MD_CTX *md, char out[72]);
/* "sha256:<hex>" of a buffer. */
void wr__digest_buf(const void *p, size_t n, char out[72]);
/* A digest as descriptors carry it: "sha256:" and 64 lowercase hex digits. */
bool wr__valid_digest(const char *d);
/* Whether a media type is one of a layer's (tar, maybe gzip or zstd compressed). */
bool wr__layer_media_type(const char *mt);
/* Add a layer to img. */
void wr__image_add_layer(struct wr_oci_image *img, const char *path, const char *digest,
                         const char *media_type);
/* Of an index's or manifest list's manifests: the only one, or the one for linux/amd64 (NULL
 * with WR_ENOTFOUND). */
const json_t *wr__pick_amd64(const json_t *manifests, struct wr_err *err);
