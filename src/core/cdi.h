/* SPDX-License-Identifier: Apache-2.0 */
/* Devices from CDI specs (the Container Device Interface, spec 1.x: JSON or YAML files in
 * --cdi-spec-dirs, /etc/cdi and /var/run/cdi by default, the later directory winning): which
 * devices this host offers, what each one puts into a sandbox (device nodes, environment,
 * read-only mounts), and which sandbox holds each, one at a time (docs/devices.md).
 *
 * A spec is read only if it is a regular file owned by root and writable by nobody else (its
 * edits reach every sandbox that asks); a spec that fails any check is skipped whole and logged.
 * Its fields are a closed list: an unknown one is an error, as the CDI library does. Hooks run
 * programs as host root: Warren runs none. The two NVIDIA hooks a driver's spec needs are done
 * natively instead (nvidia-cdi-hook create-symlinks: links made in the sandbox's root;
 * update-ldcache: its folders on LD_LIBRARY_PATH, but for the linker's default directories,
 * searched without a cache). A device whose edits have another hook is listed, and a create
 * that names it is refused naming the hook.
 *
 * Every function runs on the loop thread. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../runtime/runtime.h"
#include "../util/err.h"
#include "manager.h"

struct wr_cdi;

/* What the devices a sandbox asked for put into it, merged in the order asked. */
struct wr_cdi_edits {
    char **env; /* KEY=VALUE, NULL-terminated (never NULL) */
    struct wr_device_node *nodes;
    size_t n_nodes;
    struct wr_bind_spec *binds; /* read-only mounts of host files or directories */
    size_t n_binds;
    struct wr_symlink_spec *links; /* NVIDIA's create-symlinks hook, done natively */
    size_t n_links;
};

/* Read the specs in dirs (colon-separated; "" or NULL: none). Never fails for a bad spec (it is
 * logged and skipped); -1 with err only when out of memory or dirs is malformed. */
int wr_cdi_open(const char *dirs, struct wr_cdi **out, struct wr_err *err);
void wr_cdi_close(struct wr_cdi *c);
/* Read the specs again (an operator's SIGHUP, after nvidia-cdi-refresh, say): the devices are
 * the specs' now; each sandbox keeps what it holds, a device whose spec has gone included (then
 * refused to anyone else). -1 with err only as wr_cdi_open fails, the registry left as it was. */
int wr_cdi_reload(struct wr_cdi *c, const char *dirs, struct wr_err *err);

/* The devices, as [{name, kind, in_use, refused}] (refused: why a create naming it is refused,
 * or absent). A new reference. */
json_t *wr_cdi_list(const struct wr_cdi *c);

/* Give the devices names[0..n) to sandbox id, with what they put into it in *out (the caller
 * frees it with wr_cdi_edits_fini). WR_EINVAL for a name that is not a known device, is given
 * twice or is refused (a hook); WR_ELIMIT when one is held by another sandbox. Nothing is taken
 * on failure. Taking what id holds already is not an error (a restarted daemon's adoption). */
int wr_cdi_take(struct wr_cdi *c, const char *id, const char *const *names, size_t n,
                struct wr_cdi_edits *out, struct wr_err *err);
/* The edits of names, without taking them (a resume of a sandbox that holds them). */
int wr_cdi_edits_of(const struct wr_cdi *c, const char *const *names, size_t n,
                    struct wr_cdi_edits *out, struct wr_err *err);
/* Whatever sandbox id holds goes back to the pool. */
void wr_cdi_release(struct wr_cdi *c, const char *id);
void wr_cdi_edits_fini(struct wr_cdi_edits *e);
