/* SPDX-License-Identifier: Apache-2.0 */
/* Templates from OCI images: an imported docker-archive or oci-archive, or a pull from a
 * registry. The format and network work (src/image/) runs on a worker: blobs are fetched or
 * extracted under <state>/layers/.tmp, each layer unpacked and checked against its digest, then
 * installed into the layer store; the template is recorded on the loop. On any failure nothing
 * stays: no temporary file, no layer directory, no row. Loop thread. */
#pragma once

#include <stdbool.h>

#include "../store/store.h"
#include "../util/err.h"
#include "manager.h"

struct wr_oci_request {
    const char *name;    /* the template's name */
    const char *team;    /* the team that makes it */
    bool admin;          /* an admin's: a pull may reach private addresses */
    bool replace;        /* a template of that name is replaced (else WR_ECONFLICT) */
    bool shared;         /* a shared template (every team's; the caller checked: an admin) */
    const char *archive; /* import: the tarball, a file under <state>/layers/.tmp (removed) */
    const char *image;   /* pull: "host[:port]/repo[:tag|@digest]" */
    const char *username, *password; /* pull: registry credentials, or NULL */
    bool insecure;                   /* pull: plain http */
};

/* The template made (tpl) or why not (err). */
typedef void (*wr_oci_cb)(void *ctx, const struct wr_image_rec *tpl, const struct wr_err *err);

/* Whether the request could go on: wr_images_claim of its name (checked again before the
 * template is recorded). */
int wr_oci_check(struct wr_manager *m, const struct wr_oci_request *req, struct wr_err *err);

/* Check the request (wr_oci_check), then import or pull on a worker and answer in cb;
 * cb may run before this returns (a bad request). The archive file is removed in every case. */
void wr_oci_start(struct wr_manager *m, const struct wr_oci_request *req, wr_oci_cb cb, void *ctx);
