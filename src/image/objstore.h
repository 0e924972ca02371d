/* SPDX-License-Identifier: Apache-2.0 */
/* Object storage for what several hosts share: templates' and snapshots' layers and the
 * manifests that name them (docs/deploy.md "Object storage"). Keys are immutable and
 * content-addressed ("blobs/sha256/<hex>"), so a put of a key that exists is a no-op and a
 * reader never sees a half-written object.
 *
 * Two backends, chosen by the URL:
 *   file:///DIR                    a directory every host mounts (NFS, a shared volume): puts
 *                                  write a temporary file, fsync it and link it into place
 *                                  (link(2) never replaces a key that exists); keys are
 *                                  resolved below DIR without following a symlink
 *   s3://BUCKET[/PREFIX]?endpoint=URL[&region=R][&max-keys=N]
 *                                  an S3-compatible service, path-style requests signed with
 *                                  SigV4 by libcurl (CURLOPT_AWS_SIGV4); credentials from
 *                                  AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and
 *                                  AWS_SESSION_TOKEN) in the environment, read by open; region
 *                                  defaults to us-east-1; endpoint is http(s)://host[:port];
 *                                  max-keys is a listing's page size (1..1000, default 1000)
 *
 * Every function blocks (disk, network) and is thread-safe: call it from a worker thread.
 * Errors: WR_EINVAL for a bad URL, key or prefix, WR_ENOTFOUND for a missing object (or
 * bucket), WR_EUPSTREAM for a service that refuses or cannot be reached, WR_ESYS for a local
 * file, WR_EBADDATA for a key of a file:// store that holds something other than a regular file
 * (a symlink planted there). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"

struct wr_objstore;

/* Parse url and check it (for s3: the bucket answers a HEAD). */
int wr_objstore_open(const char *url, struct wr_objstore **out, struct wr_err *err);
void wr_objstore_free(struct wr_objstore *s);
/* The URL as given, for logs (never holds a secret). */
const char *wr_objstore_url(const struct wr_objstore *s);

/* A key is 1..512 bytes of [A-Za-z0-9._/-], with no empty, "." or ".." segment and no leading
 * slash. */
bool wr_objstore_key_valid(const char *key);

/* Store the file at path under key. If the key exists already, nothing is written (keys are
 * immutable) and *existed (if given) is set. */
int wr_objstore_put_file(struct wr_objstore *s, const char *key, const char *path, bool *existed,
                         struct wr_err *err);
/* Store bytes under key (for manifests), as put_file. */
int wr_objstore_put(struct wr_objstore *s, const char *key, const void *data, size_t len,
                    bool *existed, struct wr_err *err);
/* Fetch key into the file at path (written to a temporary beside it, then renamed). */
int wr_objstore_get_file(struct wr_objstore *s, const char *key, const char *path,
                         struct wr_err *err);
/* Fetch key into memory, at most max bytes (beyond: WR_ETOOBIG): *data (NUL-terminated after
 * its *len bytes; free it). */
int wr_objstore_get(struct wr_objstore *s, const char *key, size_t max, char **data, size_t *len,
                    struct wr_err *err);
/* 1 if key exists (with *size set if given), 0 if not, -1 on error. */
int wr_objstore_exists(struct wr_objstore *s, const char *key, uint64_t *size, struct wr_err *err);
/* Remove key (absent is not an error). */
int wr_objstore_delete(struct wr_objstore *s, const char *key, struct wr_err *err);
/* The keys that start with prefix ("" or the start of a valid key: "blobs/", "blobs/sha2"),
 * sorted by strcmp: *keys is a NULL-terminated array (free each and it; wr_strv_free). Past
 * 2^24 keys: WR_ELIMIT. */
int wr_objstore_list(struct wr_objstore *s, const char *prefix, char ***keys, struct wr_err *err);
