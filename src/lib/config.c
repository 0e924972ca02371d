/* SPDX-License-Identifier: Apache-2.0 */
/* The endpoint and key defaults (config.h). */
#include "config.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/xalloc.h"

char *wl_config_path(void)
{
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");

    if (xdg != NULL && xdg[0] == '/')
        return xasprintf("%s/warren/config.json", xdg);
    /* No getpwuid(): warren is static, and NSS lookups need glibc's shared libraries. */
    if (home == NULL || home[0] == '\0')
        home = getuid() == 0 ? "/root" : "/";
    return xasprintf("%s/.config/warren/config.json", home);
}

int wl_config_load(struct wl_config *cfg, struct wr_err *err)
{
    const char *env_url = getenv("WARREN_API_URL"), *env_key = getenv("WARREN_API_KEY");
    const char *file_url, *file_key;
    json_t *j = NULL;
    json_error_t je;

    memset(cfg, 0, sizeof(*cfg));
    cfg->path = wl_config_path();
    if (access(cfg->path, F_OK) == 0) {
        j = json_load_file(cfg->path, 0, &je);
        if (j == NULL || !json_is_object(j)) {
            json_decref(j);
            wr_err_set(err, WR_EINVAL, 0, "config %s: %s", cfg->path,
                       j ? "not a JSON object" : je.text);
            /* On failure the caller has nothing to free. */
            free(cfg->path);
            cfg->path = NULL;
            return -1;
        }
    }
    file_url = json_string_value(json_object_get(j, "endpoint"));
    file_key = json_string_value(json_object_get(j, "key"));
    if (env_url != NULL && env_url[0] != '\0') {
        cfg->endpoint = xstrdup(env_url);
        cfg->endpoint_from = "env WARREN_API_URL";
    } else if (file_url != NULL) {
        cfg->endpoint = xstrdup(file_url);
        cfg->endpoint_from = "config";
    } else {
        cfg->endpoint = xstrdup(WL_DEFAULT_ENDPOINT);
        cfg->endpoint_from = "default";
    }
    if (env_key != NULL && env_key[0] != '\0') {
        cfg->key = xstrdup(env_key);
        cfg->key_from = "env WARREN_API_KEY";
    } else if (file_key != NULL && file_key[0] != '\0') {
        cfg->key = xstrdup(file_key);
        cfg->key_from = "config";
    } else {
        cfg->key_from = "none";
    }
    json_decref(j);
    return 0;
}

void wl_config_fini(struct wl_config *cfg)
{
    free(cfg->endpoint);
    free(cfg->key);
    free(cfg->path);
    memset(cfg, 0, sizeof(*cfg));
}
