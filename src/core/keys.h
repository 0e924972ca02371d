/* SPDX-License-Identifier: Apache-2.0 */
/* API keys for the API's authentication and its /v1/keys: the store's keys (store/keys.c), by
 * way of the manager, so that src/api/ calls no store function. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "../util/err.h"
#include "manager.h"

/* Make a key for `team` (the team is created if new): *secret is shown once (free it), *info
 * describes the key (fini it). A NULL name is "". WR_EINVAL if team is NULL or empty. */
int wr_keys_create(struct wr_manager *m, const char *team, const char *name, bool admin,
                   char **secret, struct wr_key_info *info, struct wr_err *err);
/* The key whose secret this is. WR_ENOTFOUND if none. */
int wr_keys_lookup(struct wr_manager *m, const char *secret, struct wr_key_info *info,
                   struct wr_err *err);
/* Keys of a team (team NULL: all): *out is an array of *n infos; fini each, free the array. */
int wr_keys_list(struct wr_manager *m, const char *team, struct wr_key_info **out, size_t *n,
                 struct wr_err *err);
/* Delete a key (of `team` unless team is NULL). WR_ENOTFOUND if there is none. */
int wr_keys_delete(struct wr_manager *m, const char *team, const char *key_id, struct wr_err *err);

/* A team's limits as the operator set them (store/limits.c): *json is a JSON object's text
 * (free it), or NULL when the team has the daemon's defaults. */
int wr_keys_team_limits_get(struct wr_manager *m, const char *team, char **json,
                            struct wr_err *err);
/* Set them (json: a JSON object's text), or go back to the defaults (json NULL). */
int wr_keys_team_limits_put(struct wr_manager *m, const char *team, const char *json,
                            struct wr_err *err);
