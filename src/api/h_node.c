/* SPDX-License-Identifier: Apache-2.0 */
/* The node role (warrend --role node, docs/deploy.md): what a gateway asks a node. A gateway
 * authenticates its clients itself and calls the node's native API with the node token
 * (--node-token-file) and the caller's team in Warren-Team; GET /node/info says the node's
 * health, capacity, labels and templates; GET /node/sandboxes lists every sandbox it holds, the
 * truth the gateway reconciles its records against. /healthz answers anyone, on every role. */
#include <string.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/json_cleanup.h"
#include "../core/images.h"
#include "../core/memory.h"
#include "api_int.h"

const char *wr_api_node_id;

bool api_node_token_matches(const struct wr_api *api, const char *key)
{
    size_t n, m;
    unsigned char diff = 0;

    if (api->node_token == NULL || key == NULL)
        return false;
    n = strlen(api->node_token);
    m = strlen(key);
    /* Constant time over the token's length: the caller learns no prefix. */
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(api->node_token[i] ^ (i < m ? key[i] : 0));
    return diff == 0 && n == m;
}

/* A team name as the store takes it: 1..127 bytes, printable ASCII without spaces. */
static bool team_valid(const char *t)
{
    size_t n = strlen(t);

    if (n == 0 || n >= sizeof(((struct wr_caller *)0)->team))
        return false;
    for (size_t i = 0; i < n; i++)
        if (t[i] <= ' ' || t[i] > '~')
            return false;
    return true;
}

int api_node_caller(struct wr_api *api, struct wr_http_req *req, struct wr_caller *who)
{
    const char *team = wr_http_req_header(req, "Warren-Team");
    const char *admin = wr_http_req_header(req, "Warren-Admin");

    (void)api;
    if (team == NULL)
        team = "admin";
    if (!team_valid(team)) {
        api_fail(req, WR_EINVAL, "Warren-Team must name a team");
        return -1;
    }
    snprintf(who->team, sizeof(who->team), "%s", team);
    snprintf(who->key_id, sizeof(who->key_id), "node-token");
    who->admin = (admin != NULL && strcmp(admin, "1") == 0) || strcmp(team, "admin") == 0;
    api_note_caller(req, who);
    return 0;
}

/* The templates this node has, by name (every team's, once each): where a gateway prefers to
 * place a create. */
static json_t *templates_json(struct wr_api *api)
{
    struct wr_image_rec *recs = NULL;
    char **dirs = NULL;
    size_t n = 0, nd = 0;
    struct wr_err err;
    json_t *names = json_object(), *arr = json_array();
    const char *k;
    json_t *v;

    if (wr_images_list(api->images, NULL, "template", NULL, &recs, &n, &err) == 0) {
        for (size_t i = 0; i < n; i++) {
            json_object_set_new(names, recs[i].name, json_true());
            wr_image_rec_fini(&recs[i]);
        }
        free(recs);
    }
    if (wr_images_dir_names(api->images, &dirs, &nd) == 0) {
        for (size_t i = 0; i < nd; i++) {
            json_object_set_new(names, dirs[i], json_true());
            free(dirs[i]);
        }
        free(dirs);
    }
    json_object_foreach(names, k, v) json_array_append_new(arr, json_string(k));
    json_decref(names);
    return arr;
}

static void node_info(struct wr_api *api, struct wr_http_req *req)
{
    struct wr_manager_capacity cap;
    const char *names[8];
    size_t n = wr_manager_runtimes(api->mgr, names, 8);
    json_t *runtimes = json_array(), *labels;
    uint64_t avail = 0;
    struct wr_err err;

    for (size_t i = 0; i < n && i < 8; i++)
        json_array_append_new(runtimes, json_string(names[i]));
    wr_manager_capacity(api->mgr, &cap);
    (void)wr_memory_available(&avail, &err);
    labels = json_loads(api->node_labels ? api->node_labels : "{}", 0, NULL);
    wr_http_respond_json(
        req, 200,
        json_pack("{s:s,s:s,s:s,s:s,s:o,s:o,s:{s:I,s:I,s:I,s:I,s:I,s:I},s:o,s:s?}", "id",
                  api->node_id, "incarnation", api->node_incarnation, "version", api->version,
                  "state", api->stopping ? "draining" : "ready", "labels",
                  labels ? labels : json_object(), "runtimes", runtimes, "capacity", "sandboxes",
                  (json_int_t)cap.sandboxes, "sandboxes_max", (json_int_t)cap.sandboxes_max, "cpus",
                  (json_int_t)sysconf(_SC_NPROCESSORS_ONLN), "memory_bytes",
                  (json_int_t)wr_memory_total(), "memory_committed_bytes",
                  (json_int_t)cap.memory_committed, "memory_available_bytes", (json_int_t)avail,
                  "templates", templates_json(api), "object_store", api->object_store));
}

/* Every sandbox the node holds, of every team, stopped ones too: id, team, state, template. */
static void node_sandboxes(struct wr_api *api, struct wr_http_req *req)
{
    struct wr_sandbox_filter f = {.states = ~0u};
    struct wr_sandbox_rec *recs = NULL;
    size_t n = 0;
    struct wr_err err;
    json_t *arr;

    if (wr_manager_list(api->mgr, &f, &recs, &n, &err) < 0) {
        api_error(req, &err);
        return;
    }
    arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *j = api_sandbox_json(&recs[i]);
        json_object_set_new(j, "team", json_string(recs[i].team));
        json_array_append_new(arr, j);
        wr_sandbox_rec_fini(&recs[i]);
    }
    free(recs);
    wr_http_respond_json(req, 200, json_pack("{s:s,s:o}", "node", api->node_id, "sandboxes", arr));
}

/* "/node/sandboxes/{id}/export" -> id (in buf), or NULL. */
static const char *export_id(const char *path, char *buf, size_t size)
{
    const char *p = path + strlen("/node/sandboxes/");
    const char *slash = strchr(p, '/');
    size_t n;

    if (slash == NULL || strcmp(slash, "/export") != 0)
        return NULL;
    n = (size_t)(slash - p);
    if (n == 0 || n >= size)
        return NULL;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return buf;
}

bool api_node_handle(struct wr_api *api, struct wr_http_req *req)
{
    const char *path = wr_http_req_path(req);
    const char *method = wr_http_req_method(req);
    struct wr_caller who;
    char id[128];
    bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;

    if (strcmp(path, "/healthz") == 0) {
        wr_http_respond_json(req, 200, json_pack("{s:s}", "status", "ok"));
        return true;
    }
    if (strncmp(path, "/node/", 6) != 0 && strcmp(path, "/node") != 0)
        return false;
    if (api->node_token == NULL) {
        api_fail(req, WR_ENOTFOUND, "not a node: this warrend runs with --role all");
        return true;
    }
    if (api_authenticate(api, req, &who) < 0)
        return true;
    if (strcmp(who.key_id, "node-token") != 0 && !who.admin) {
        api_fail(req, WR_EFORBIDDEN, "the node API takes the node token or an admin key");
        return true;
    }
    if (get && strcmp(path, "/node/info") == 0)
        node_info(api, req);
    else if (get && strcmp(path, "/node/sandboxes") == 0)
        node_sandboxes(api, req);
    else if (post && strcmp(path, "/node/sandboxes/import") == 0)
        api_node_import(api, req, &who);
    else if (post && strncmp(path, "/node/sandboxes/", 16) == 0 &&
             export_id(path, id, sizeof(id)) != NULL)
        api_node_export(api, req, &who, id);
    else if (post && strcmp(path, "/node/images/export") == 0)
        api_node_image_export(api, req, &who);
    else if (post && strcmp(path, "/node/images/import") == 0)
        api_node_image_import(api, req, &who);
    else
        api_fail(req, WR_ENOTFOUND, "no such endpoint: %s %s", method, path);
    return true;
}
