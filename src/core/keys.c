/* SPDX-License-Identifier: Apache-2.0 */
/* API keys (see keys.h). */
#include "keys.h"

#include "core_int.h"

int wr_keys_create(struct wr_manager *m, const char *team, const char *name, bool admin,
                   char **secret, struct wr_key_info *info, struct wr_err *err)
{
    return wr_store_key_create(m->cfg.store, team, name, admin, secret, info, err);
}

int wr_keys_lookup(struct wr_manager *m, const char *secret, struct wr_key_info *info,
                   struct wr_err *err)
{
    return wr_store_key_lookup(m->cfg.store, secret, info, err);
}

int wr_keys_list(struct wr_manager *m, const char *team, struct wr_key_info **out, size_t *n,
                 struct wr_err *err)
{
    return wr_store_key_list(m->cfg.store, team, out, n, err);
}

int wr_keys_delete(struct wr_manager *m, const char *team, const char *key_id, struct wr_err *err)
{
    return wr_store_key_delete(m->cfg.store, team, key_id, err);
}

int wr_keys_team_limits_get(struct wr_manager *m, const char *team, char **json, struct wr_err *err)
{
    return wr_store_team_limits_get(m->cfg.store, team, json, err);
}

int wr_keys_team_limits_put(struct wr_manager *m, const char *team, const char *json,
                            struct wr_err *err)
{
    return wr_store_team_limits_put(m->cfg.store, team, json, err);
}
