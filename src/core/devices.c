/* SPDX-License-Identifier: Apache-2.0 */
/* Host devices in the manager (docs/devices.md): a create's `devices` taken from the registry of
 * CDI specs (cdi.h) for the sandbox alone, recorded (devices_json), their nodes and env put into
 * each start of the sandbox, given back when it ends, taken again by a restarted daemon. */
#include <stdlib.h>
#include <string.h>

#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/strv.h"
#include "../util/xalloc.h"
#include "cdi.h"
#include "core_int.h"

char **wr__devices_names(const char *devices_json, struct wr_err *err)
{
    json_t *j, *v;
    char **names;
    size_t i;

    if (devices_json == NULL)
        return xcalloc(1, sizeof(char *));
    j = json_loads(devices_json, 0, NULL);
    if (!json_is_array(j)) {
        json_decref(j);
        wr_err_set(err, WR_EINTERNAL, 0, "a sandbox's devices are not a list");
        return NULL;
    }
    names = xcalloc(json_array_size(j) + 1, sizeof(char *));
    json_array_foreach(j, i, v)
    {
        if (!json_is_string(v)) {
            wr_strv_free(names);
            json_decref(j);
            wr_err_set(err, WR_EINTERNAL, 0, "a sandbox's devices are not a list of names");
            return NULL;
        }
        names[i] = xstrdup(json_string_value(v));
    }
    json_decref(j);
    return names;
}

void wr__devices_adopt(struct wr_manager *m, const struct wr_sandbox_rec *rec)
{
    _cleanup_strv_ char **names = NULL;
    struct wr_cdi_edits e;
    struct wr_err err;

    if (rec->devices_json == NULL)
        return;
    if ((names = wr__devices_names(rec->devices_json, &err)) == NULL ||
        wr_cdi_take(m->cdi, rec->id, (const char *const *)names, wr_strv_len(names), &e, &err) <
            0) {
        log_warn("sandbox %s: its devices: %s", rec->id, err.msg);
        return;
    }
    wr_cdi_edits_fini(&e);
}

int wr__devices_spec(struct wr_manager *m, const struct wr_sandbox_rec *rec, struct start_spec *ss,
                     struct wr_err *err)
{
    _cleanup_strv_ char **names = NULL;
    struct wr_cdi_edits e;
    size_t n_env = wr_strv_len(ss->env), n_add;

    if (rec->devices_json == NULL)
        return 0;
    if ((names = wr__devices_names(rec->devices_json, err)) == NULL ||
        wr_cdi_edits_of(m->cdi, (const char *const *)names, wr_strv_len(names), &e, err) < 0)
        return wr_err_wrap(err, "sandbox %s", rec->id);
    /* The devices' env after the sandbox's own, as a runtime appends a CDI spec's. */
    n_add = wr_strv_len(e.env);
    ss->env = xrealloc(ss->env, (n_env + n_add + 1) * sizeof(char *));
    for (size_t i = 0; i < n_add; i++)
        ss->env[n_env + i] = steal_pointer(&e.env[i]);
    ss->env[n_env + n_add] = NULL;
    ss->devices = e.nodes;
    ss->n_devices = e.n_nodes;
    ss->binds = e.binds;
    ss->n_binds = e.n_binds;
    ss->symlinks = e.links;
    ss->n_symlinks = e.n_links;
    e.links = NULL;
    e.n_links = 0;
    e.nodes = NULL;
    e.n_nodes = 0;
    e.binds = NULL;
    e.n_binds = 0;
    wr_cdi_edits_fini(&e);
    return 0;
}

void wr_manager_reload_devices(struct wr_manager *m)
{
    struct wr_err err;

    if (wr_cdi_reload(m->cdi, m->cfg.cdi_spec_dirs, &err) < 0)
        log_warn("cdi: reload: %s; the devices are as they were", err.msg);
    else
        log_info("cdi: specs read again");
}

json_t *wr_manager_devices(struct wr_manager *m)
{
    return wr_cdi_list(m->cdi);
}
