/* SPDX-License-Identifier: Apache-2.0 */
/* Where and how to reach warrend when the caller does not say: the `warren` command's config
 * file, overridden by WARREN_API_URL and WARREN_API_KEY, else the default socket with no key.
 * One resolution for the command and the library, so both find the same daemon. */
#pragma once

#include "../util/err.h"

#define WL_DEFAULT_ENDPOINT "unix:///run/warrend/warrend.sock"

struct wl_config {
    char *endpoint, *key; /* key NULL: none */
    /* Which source each came from: "env WARREN_API_URL", "config", "default" ("none" for no
     * key); static strings. */
    const char *endpoint_from, *key_from;
    char *path; /* the config file's path: $XDG_CONFIG_HOME/warren/config.json, else
                 * ~/.config/warren/config.json */
};

/* The config file's path (the caller frees it). */
char *wl_config_path(void);

/* Resolve the configuration into cfg. Returns 0 (a missing file is no error) or -1 with err
 * (unreadable or malformed file; cfg then holds nothing). wl_config_fini frees it. */
int wl_config_load(struct wl_config *cfg, struct wr_err *err);

/* Free what cfg holds and zero it. */
void wl_config_fini(struct wl_config *cfg);
