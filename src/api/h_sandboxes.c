/* SPDX-License-Identifier: Apache-2.0 */
/* /v1/sandboxes: create, list, get, delete, timeout, pause, resume, metrics, disk (the routes are
 * in router.c; processes are h_exec.c's, files h_files.c's). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/budget.h"
#include "../core/compose.h"
#include "../core/metrics.h"
#include "../util/log.h"
#include "../util/parse.h"
#include "../util/xalloc.h"
#include "api_int.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The record's mounts as the API shows them: [{"name", "path", "readonly"}]. */
static json_t *volumes_json(const char *stored)
{
    json_t *in = json_loads(stored ? stored : "[]", 0, NULL), *out = json_array(), *m;
    size_t i;

    json_array_foreach(in, i, m)
    {
        json_array_append_new(out, json_pack("{s:O,s:O,s:b}", "name", json_object_get(m, "name"),
                                             "path", json_object_get(m, "path"), "readonly",
                                             json_is_true(json_object_get(m, "readonly"))));
    }
    json_decref(in);
    return out;
}

json_t *api_sandbox_json(const struct wr_sandbox_rec *r)
{
    char created[32], expires[32];
    json_t *meta = json_loads(r->metadata_json ? r->metadata_json : "{}", 0, NULL);
    bool paused = r->remaining_ms >= 0 && r->state == WR_SB_PAUSED;
    json_t *j;

    api_time(r->created_ms, created);
    /* A paused sandbox's clock is stopped: it would expire this long after a resume now. */
    api_time(paused ? now_ms() + r->remaining_ms : r->deadline_ms, expires);
    if (!json_is_object(meta)) {
        json_decref(meta);
        meta = json_object();
    }
    j = json_pack("{s:s,s:s,s:s,s:o?,s:f,s:I,s:s,s:s,s:o,s:s,s:I,s:s?}", "id", r->id, "template",
                  r->template_name, "state", wr_sb_state_name(r->state), "reason",
                  r->reason ? api_json_message(r->reason) : NULL, "cpus", r->cpu_millis / 1000.0,
                  "memory_mb", (json_int_t)(r->memory_bytes >> 20), "created_at", created,
                  "expires_at", expires, "metadata", meta, "on_timeout",
                  wr_sb_on_timeout_name(r->on_timeout), "timeout", (json_int_t)r->timeout_s,
                  "paused_mode", paused ? wr_sb_paused_mode_name(r->paused_mode) : NULL);
    json_object_set_new(j, "remaining_ms",
                        paused ? json_integer((json_int_t)r->remaining_ms) : json_null());
    json_object_set_new(j, "volumes", volumes_json(r->volumes_json));
    json_object_set_new(j, "disk_mb",
                        r->disk_bytes ? json_integer((json_int_t)(r->disk_bytes >> 20))
                                      : json_null());
    json_object_set_new(j, "network", api_network_json(r));
    json_object_set_new(j, "runtime", json_string(r->runtime ? r->runtime : "ns"));
    if (wr_api_node_id != NULL)
        json_object_set_new(j, "node", json_string(wr_api_node_id));
    {
        json_t *d = r->devices_json ? json_loads(r->devices_json, 0, NULL) : NULL;
        json_object_set_new(j, "devices", json_is_array(d) ? d : json_array());
        if (!json_is_array(d))
            json_decref(d);
    }
    {
        json_t *spec = r->compose_json ? json_loads(r->compose_json, 0, NULL) : NULL, *s;
        json_t *names = json_array();
        size_t i;
        json_array_foreach(json_object_get(spec, "services"), i, s)
            json_array_append(names, json_object_get(s, "name"));
        json_object_set_new(j, "services", names);
        json_decref(spec);
    }
    /* Why it is paused: "timeout", "budget", or null (asked for). */
    json_object_set_new(j, "paused_reason",
                        r->state == WR_SB_PAUSED && r->reason ? json_string(r->reason)
                                                              : json_null());
    return j;
}

/* ---- create ---------------------------------------------------------------------------------- */

struct create_args;

struct create_ctx {
    struct wr_api *api;
    struct wr_http_req *req;
    struct create_args *args; /* until the create starts */
    bool gone;                /* the client left before the answer */
    bool has_budget;          /* the create asked for a budget of its own */
    struct wr_budget budget;
};

static void create_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct create_ctx *c = data;
    /* The create goes on (the sandbox will exist, with its deadline); nobody hears of it
     * unless the same Idempotency-Key is retried. */
    c->gone = true;
    c->req = NULL;
}

static void create_answered(void *ctx, struct wr_sandbox_rec *rec, bool existed,
                            const struct wr_err *err, unsigned retry_after_s)
{
    struct create_ctx *c = ctx;
    struct wr_err berr;

    /* Before any interval of the new sandbox closes (this is the loop thread). A retry with the
     * same Idempotency-Key keeps the budget of the first. */
    if (err == NULL && rec != NULL && !existed && c->has_budget &&
        wr_manager_sandbox_budget_set(c->api->mgr, NULL, rec->id, &c->budget, NULL, &berr) < 0)
        log_error("sandbox %s: its budget: %s", rec->id, berr.msg);
    if (!c->gone) {
        if (err != NULL) {
            if (err->kind == WR_ELIMIT) {
                api_limits_capacity(c->req, err, retry_after_s);
            } else {
                api_error(c->req, err);
            }
        } else {
            json_t *j = api_sandbox_json(rec);
            api_note_object(c->req, rec->id);
            json_object_set_new(j, "budget", api_sandbox_budget_json(c->api, rec->id));
            wr_http_respond_json(c->req, existed ? 200 : 201, j);
        }
        wr_http_req_set_data(c->req, NULL, NULL);
    }
    if (rec != NULL) {
        wr_sandbox_rec_fini(rec);
        free(rec);
    }
    free(c);
}

int api_opt_seconds(struct wr_http_req *req, json_t *body, const char *key, uint32_t *out)
{
    json_t *v = json_object_get(body, key);

    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > UINT32_MAX) {
        api_fail(req, WR_EINVAL, "`%s` must be a positive integer", key);
        return -1;
    }
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

int api_string_map(struct wr_http_req *req, json_t *body, const char *key, char **out)
{
    json_t *m = json_object_get(body, key);
    const char *k;
    json_t *v;

    *out = NULL;
    if (m == NULL || json_is_null(m))
        return 0;
    if (!json_is_object(m)) {
        api_fail(req, WR_EINVAL, "`%s` must be an object of strings", key);
        return -1;
    }
    json_object_foreach(m, k, v)
    {
        if (!json_is_string(v) || k[0] == '\0' || strlen(k) > 256 ||
            json_string_length(v) > 65536 ||
            ((strcmp(key, "env") == 0 || strcmp(key, "envVars") == 0) &&
             (strchr(k, '=') != NULL))) {
            api_fail(req, WR_EINVAL, "`%s.%s` must be a string", key, k);
            return -1;
        }
    }
    if (json_object_size(m) > 256) {
        api_fail(req, WR_EINVAL, "`%s` has more than 256 entries", key);
        return -1;
    }
    *out = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
    return 0;
}

int api_volume_list(struct wr_http_req *req, json_t *body, const char *key,
                    struct wr_volume_mount *v, size_t *n)
{
    static const char *const allowed[] = {"name", "path", "readonly", NULL};
    json_t *a = json_object_get(body, key), *m;
    size_t i;

    *n = 0;
    if (a == NULL || json_is_null(a))
        return 0;
    if (!json_is_array(a)) {
        api_fail(req, WR_EINVAL, "`%s` must be an array", key);
        return -1;
    }
    if (json_array_size(a) > WR_MAX_VOLUMES) {
        api_fail(req, WR_EINVAL, "at most %d volumes per sandbox, not %zu", WR_MAX_VOLUMES,
                 json_array_size(a));
        return -1;
    }
    json_array_foreach(a, i, m)
    {
        json_t *ro = json_object_get(m, "readonly");
        if (!json_is_object(m) || api_only_keys(req, m, allowed) < 0) {
            if (!json_is_object(m))
                api_fail(req, WR_EINVAL, "`%s[%zu]` must be an object", key, i);
            return -1;
        }
        v[i].name = json_string_value(json_object_get(m, "name"));
        v[i].path = json_string_value(json_object_get(m, "path"));
        if (v[i].name == NULL || v[i].path == NULL || (ro != NULL && !json_is_boolean(ro))) {
            api_fail(req, WR_EINVAL,
                     "`%s[%zu]` needs a string `name` and `path`, and "
                     "`readonly` is a boolean",
                     key, i);
            return -1;
        }
        v[i].readonly = json_is_true(ro);
    }
    *n = json_array_size(a);
    return 0;
}

/* A create's request, kept while a Compose file's services are prepared: the strings point into
 * the body j. */
struct create_args {
    struct wr_create_req cr;
    struct wr_volume_mount vols[WR_MAX_VOLUMES];
    const char *devs[WR_CDI_MAX_DEVICES];
    struct api_net_req net;
    char *env, *meta, *idem, *team;
    json_t *j;
    json_t *spec;                    /* the Compose file's, normalized */
    struct wr_compose_pull pull;     /* its images' pulls (strings in j) */
    char *vol_paths[WR_MAX_VOLUMES]; /* where its external volumes are mounted */
    char *image_json, *compose_json; /* the prepare's */
};

static void create_args_free(struct create_args *a)
{
    if (a == NULL)
        return;
    api_net_req_fini(&a->net);
    free(a->env);
    free(a->meta);
    free(a->idem);
    free(a->team);
    free(a->image_json);
    free(a->compose_json);
    json_decref(a->j);
    json_decref(a->spec);
    for (size_t i = 0; i < WR_MAX_VOLUMES; i++)
        free(a->vol_paths[i]);
    free(a);
}

bool api_service_name_ok(const char *s)
{
    size_t n = s != NULL ? strlen(s) : 0;

    if (n == 0 || n > 63 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
              s[i] == '.' || s[i] == '-'))
            return false;
    return true;
}

/* `compose`: the file's text, or {"file", "env", "context"}. The normalized spec, or NULL with
 * the answer (400 naming the refused key and its line, 413 for a file too large). */
static json_t *compose_parse(struct wr_http_req *req, json_t *v, json_t **context,
                             struct wr_compose_pull *pull)
{
    static const char *const allowed[] = {"file", "env", "context", "pull", NULL};
    static const char *const pull_keys[] = {"insecure", "username", "password", NULL};
    json_t *file = v, *env = NULL, *spec;
    const char *k;
    json_t *x;
    struct wr_err err;

    *context = NULL;
    if (json_is_object(v)) {
        if (api_only_keys(req, v, allowed) < 0)
            return NULL;
        json_t *pv = json_object_get(v, "pull");
        file = json_object_get(v, "file");
        env = json_object_get(v, "env");
        *context = json_object_get(v, "context");
        if (pv != NULL && !json_is_null(pv)) {
            json_t *ins = json_object_get(pv, "insecure"), *u = json_object_get(pv, "username");
            json_t *pw = json_object_get(pv, "password");
            if (!json_is_object(pv) || api_only_keys(req, pv, pull_keys) < 0 ||
                (ins != NULL && !json_is_boolean(ins)) || (u != NULL && !json_is_string(u)) ||
                (pw != NULL && !json_is_string(pw))) {
                if (!json_is_object(pv) || (ins == NULL || json_is_boolean(ins)))
                    api_fail(req, WR_EINVAL,
                             "`compose.pull` must be {insecure: boolean, username, password: "
                             "strings}");
                else
                    api_fail(req, WR_EINVAL, "`compose.pull.insecure` must be a boolean");
                return NULL;
            }
            pull->insecure = json_is_true(ins);
            pull->username = json_string_value(u);
            pull->password = json_string_value(pw);
        }
    }
    if (!json_is_string(file)) {
        api_fail(req, WR_EINVAL,
                 "`compose` must be the Compose file's text, or an object with `file` (the text), "
                 "`env` and `context`");
        return NULL;
    }
    if (env != NULL && !json_is_null(env)) {
        if (!json_is_object(env)) {
            api_fail(req, WR_EINVAL, "`compose.env` must be an object of strings");
            return NULL;
        }
        json_object_foreach(env, k, x) if (!json_is_string(x))
        {
            api_fail(req, WR_EINVAL, "`compose.env.%s` must be a string", k);
            return NULL;
        }
    } else {
        env = NULL;
    }
    if (*context != NULL && json_is_null(*context))
        *context = NULL;
    if (*context != NULL && !json_is_object(*context)) {
        api_fail(req, WR_EINVAL, "`compose.context` must be an object from path to content");
        return NULL;
    }
    if (*context != NULL) {
        size_t bytes = 0;
        json_object_foreach(*context, k, x) bytes += strlen(k) + json_string_length(x);
        if (json_object_size(*context) > WR_COMPOSE_CONTEXT_MAX_FILES ||
            bytes > WR_COMPOSE_CONTEXT_MAX_BYTES) {
            wr_http_respond_error(req, 413, wr_err_kind_name(WR_ETOOBIG),
                                  "`compose.context` holds more than %d files or %d MiB",
                                  WR_COMPOSE_CONTEXT_MAX_FILES, WR_COMPOSE_CONTEXT_MAX_BYTES >> 20);
            return NULL;
        }
    }
    spec = wr_compose_parse(json_string_value(file), json_string_length(file), env, *context, NULL,
                            &err);
    if (spec == NULL) {
        if (err.kind == WR_EUNSUPPORTED)
            wr_http_respond_error(req, 400, wr_err_kind_name(err.kind), "%s", err.msg);
        else
            api_error(req, &err);
    }
    return spec;
}

/* A Compose file's external volumes (the team's Warren volumes) mounted where its services'
 * roots bind them from (docs/compose.md), after the create's own volumes. */
static int compose_volumes(struct wr_http_req *req, const json_t *spec, struct create_args *a)
{
    const char *k;
    json_t *v;

    json_object_foreach((json_t *)json_object_get(spec, "external_volumes"), k, v)
    {
        size_t i = a->cr.n_volumes;
        if (i == WR_MAX_VOLUMES) {
            api_fail(req, WR_EINVAL, "at most %d volumes per sandbox, the Compose file's included",
                     WR_MAX_VOLUMES);
            return -1;
        }
        a->vol_paths[i] = xasprintf("%s/%s", WR_COMPOSE_VOLUMES, k);
        a->vols[i] =
            (struct wr_volume_mount){.name = json_string_value(v), .path = a->vol_paths[i]};
        a->cr.n_volumes++;
    }
    return 0;
}

static void create_go(struct create_ctx *c)
{
    struct create_args *a = c->args;

    c->args = NULL;
    wr_manager_create(c->api->mgr, &a->cr, create_answered, c);
    create_args_free(a);
}

static void compose_prepared(void *ctx, char *image_json, char *compose_json,
                             const struct wr_err *err)
{
    struct create_ctx *c = ctx;

    if (err != NULL) {
        if (!c->gone) {
            api_error(c->req, err);
            wr_http_req_set_data(c->req, NULL, NULL);
        }
        create_args_free(c->args);
        free(c);
        return;
    }
    c->args->image_json = xstrdup(image_json);
    c->args->compose_json = xstrdup(compose_json);
    c->args->cr.image_json = c->args->image_json;
    c->args->cr.compose_json = c->args->compose_json;
    create_go(c);
}

void api_sandbox_create(struct api_call *call)
{
    static const char *const allowed[] = {"template", "cpus",       "memory_mb", "disk_mb",
                                          "timeout",  "env",        "metadata",  "volumes",
                                          "network",  "on_timeout", "size",      "budget",
                                          "runtime",  "devices",    "compose",   NULL};
    struct wr_http_req *req = call->req;
    struct wr_api *api = call->api;
    struct create_ctx *c;
    struct create_args *a = xcalloc(1, sizeof(*a));
    struct wr_budget budget;
    bool has_budget;
    json_t *j, *v, *spec = NULL, *context = NULL;
    const char *idem;

    j = a->j = api_parse_object(req, call->body, call->len);
    if (j == NULL) {
        create_args_free(a);
        return;
    }
    if (api_only_keys(req, j, allowed) < 0)
        goto out;
    if ((v = json_object_get(j, "template")) != NULL && !json_is_null(v)) {
        if (!json_is_string(v)) {
            api_fail(req, WR_EINVAL, "`template` must be a string");
            goto out;
        }
        a->cr.template_name = json_string_value(v);
    }
    if ((v = json_object_get(j, "runtime")) != NULL && !json_is_null(v)) {
        /* The name is checked by core, which knows the backends and the daemon's --runtimes. */
        if (!json_is_string(v)) {
            api_fail(req, WR_EINVAL, "`runtime` must be a string");
            goto out;
        }
        a->cr.runtime = json_string_value(v);
    }
    if ((v = json_object_get(j, "devices")) != NULL && !json_is_null(v)) {
        json_t *d;
        size_t i;
        if (!json_is_array(v) || json_array_size(v) > WR_CDI_MAX_DEVICES) {
            api_fail(req, WR_EINVAL, "`devices` must be a list of at most %d device names",
                     WR_CDI_MAX_DEVICES);
            goto out;
        }
        json_array_foreach(v, i, d)
        {
            if (!json_is_string(d)) {
                api_fail(req, WR_EINVAL, "`devices[%zu]` must be a string (vendor.com/class=name)",
                         i);
                goto out;
            }
            a->devs[i] = json_string_value(d);
        }
        a->cr.devices = a->devs;
        a->cr.n_devices = json_array_size(v);
    }
    if ((v = json_object_get(j, "compose")) != NULL && !json_is_null(v) &&
        (spec = a->spec = compose_parse(req, v, &context, &a->pull)) == NULL)
        goto out;
    if ((v = json_object_get(j, "cpus")) != NULL && !json_is_null(v)) {
        double cpus = json_number_value(v);
        if (!json_is_number(v) || !(cpus >= 0.01) || cpus > 1024) {
            api_fail(req, WR_EINVAL, "`cpus` must be a number from 0.01 to 1024");
            goto out;
        }
        a->cr.cpu_millis = (uint32_t)(cpus * 1000 + 0.5);
    }
    if ((v = json_object_get(j, "memory_mb")) != NULL && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 16 ||
            json_integer_value(v) > (1 << 24)) {
            api_fail(req, WR_EINVAL, "`memory_mb` must be an integer >= 16");
            goto out;
        }
        a->cr.memory_bytes = (uint64_t)json_integer_value(v) << 20;
    }
    if (api_opt_seconds(req, j, "timeout", &a->cr.timeout_s) < 0)
        goto out;
    if ((v = json_object_get(j, "disk_mb")) != NULL && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 16 ||
            json_integer_value(v) > (1ll << 30)) {
            api_fail(req, WR_EINVAL, "`disk_mb` must be an integer >= 16");
            goto out;
        }
        a->cr.disk_bytes = (uint64_t)json_integer_value(v) << 20;
    }
    if ((v = json_object_get(j, "on_timeout")) != NULL && !json_is_null(v)) {
        const char *p = json_string_value(v);
        if (wr_sb_on_timeout_parse(p, &a->cr.on_timeout) < 0) {
            api_fail(req, WR_EINVAL, "`on_timeout` must be kill or pause");
            goto out;
        }
    }
    if (api_string_map(req, j, "env", &a->env) < 0 ||
        api_string_map(req, j, "metadata", &a->meta) < 0)
        goto out;
    if (api_volume_list(req, j, "volumes", a->vols, &a->cr.n_volumes) < 0 ||
        compose_volumes(req, spec, a) < 0)
        goto out;
    a->cr.volumes = a->vols;
    a->cr.env_json = a->env;
    a->cr.metadata_json = a->meta;
    if ((v = json_object_get(j, "network")) != NULL && !json_is_null(v)) {
        if (api_net_parse_native(req, v, true, &a->net) < 0)
            goto out;
        a->cr.net = &a->net.r;
    }
    if ((idem = wr_http_req_header(req, "Idempotency-Key")) != NULL)
        a->cr.idem_key = a->idem = xstrdup(idem);
    if (a->cr.idem_key != NULL && (strlen(a->cr.idem_key) == 0 || strlen(a->cr.idem_key) > 128)) {
        api_fail(req, WR_EINVAL, "Idempotency-Key must be 1 to 128 bytes");
        goto out;
    }
    if (api_apply_size(api, req, j, &a->cr.cpu_millis, &a->cr.memory_bytes) < 0 ||
        api_sandbox_budget_parse(api, req, j, &budget, &has_budget) < 0)
        goto out;
    /* After the request is valid: the team's create rate, its quotas and budget, then (the
     * manager) the host's capacity. */
    if (api_limits_take(api, req, &call->who, WR_POL_CREATES, 1) < 0 ||
        api_limits_quota(api, req, &call->who, 1,
                         a->cr.memory_bytes ? a->cr.memory_bytes
                                            : wr_manager_default_memory(api->mgr)) < 0)
        goto out;
    a->cr.team = a->team = xstrdup(call->who.team);
    c = xcalloc(1, sizeof(*c));
    c->api = api;
    c->req = req;
    c->has_budget = has_budget;
    if (has_budget)
        c->budget = budget;
    c->args = a;
    wr_http_req_set_data(req, c, create_closed);
    if (spec != NULL) {
        /* The services' images are resolved and their roots made first (on a worker). */
        a->pull.admin = call->who.admin;
        wr_manager_compose_prepare(api->mgr, a->cr.team, a->cr.template_name, spec, context,
                                   &a->pull, compose_prepared, c);
        return;
    }
    create_go(c);
    return;
out:
    create_args_free(a);
}

/* ---- list, get, delete, timeout -------------------------------------------------------------- */

void api_sandboxes_list(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    const struct wr_caller *who = &c->who;
    const char *metas[16];
    const char *keys[16], *vals[16];
    char *mbuf[16] = {NULL};
    char statebuf[128];
    bool none = false;
    struct wr_sandbox_filter f = {.team = who->admin && wr_http_req_query(req, "all") ? NULL
                                                                                      : who->team};
    struct wr_sandbox_rec *recs = NULL;
    struct wr_err err;
    size_t n = 0, nm;
    uint64_t limit = 100, cursor = 0;
    const char *q;
    json_t *arr;

    nm = wr_http_req_query_all(req, "metadata", metas, 16);
    if (nm > 16) {
        api_fail(req, WR_EINVAL, "at most 16 metadata filters");
        return;
    }
    for (size_t i = 0; i < nm; i++) {
        char *eq;
        mbuf[i] = xstrdup(metas[i]);
        eq = strchr(mbuf[i], '=');
        if (eq == NULL || eq == mbuf[i]) {
            api_fail(req, WR_EINVAL, "metadata filter `%s` must be key=value", metas[i]);
            goto out;
        }
        *eq = '\0';
        keys[i] = mbuf[i];
        vals[i] = eq + 1;
    }
    f.meta_keys = keys;
    f.meta_values = vals;
    f.n_meta = nm;
    if ((q = wr_http_req_query(req, "state")) != NULL) {
        size_t ns = 0;
        char *save = NULL;
        snprintf(statebuf, sizeof(statebuf), "%s", q);
        for (char *s = strtok_r(statebuf, ",", &save); s != NULL; s = strtok_r(NULL, ",", &save)) {
            enum wr_sb_state st;
            if (wr_sb_state_parse(s, &st) < 0 || ns == 7) {
                api_fail(req, WR_EINVAL, "unknown state `%s`", s);
                goto out;
            }
            ns++;
            f.states |= WR_SB_BIT(st);
        }
        none = f.states == 0; /* a `state` that names none matches nothing */
    }
    if ((q = wr_http_req_query(req, "limit")) != NULL &&
        (wr_parse_uint(q, 1000, &limit, &err) < 0 || limit == 0)) {
        api_fail(req, WR_EINVAL, "`limit` must be 1 to 1000");
        goto out;
    }
    if ((q = wr_http_req_query(req, "cursor")) != NULL &&
        wr_parse_uint(q, INT64_MAX, &cursor, &err) < 0) {
        api_fail(req, WR_EINVAL, "`cursor` is not valid");
        goto out;
    }
    f.after_seq = (int64_t)cursor;
    f.limit = (size_t)limit + 1; /* one more tells whether there is a next page */
    if (!none && wr_manager_list(c->api->mgr, &f, &recs, &n, &err) < 0) {
        api_error(req, &err);
        goto out;
    }
    arr = json_array();
    for (size_t i = 0; i < n && i < limit; i++)
        json_array_append_new(arr, api_sandbox_json(&recs[i]));
    if (n > limit) {
        char next[32];
        snprintf(next, sizeof(next), "%" PRId64, recs[limit - 1].seq);
        wr_http_respond_json(req, 200,
                             json_pack("{s:o,s:s}", "sandboxes", arr, "next_cursor", next));
    } else {
        wr_http_respond_json(req, 200, json_pack("{s:o,s:n}", "sandboxes", arr, "next_cursor"));
    }
    for (size_t i = 0; i < n; i++)
        wr_sandbox_rec_fini(&recs[i]);
    free(recs);
out:
    for (size_t i = 0; i < 16; i++)
        free(mbuf[i]);
}

void api_sandbox_timeout(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    struct wr_sandbox_rec rec;
    struct wr_err err;
    json_t *j, *v;

    j = api_parse_object(req, c->body, c->len);
    if (j == NULL)
        return;
    v = json_object_get(j, "timeout");
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > UINT32_MAX) {
        api_fail(req, WR_EINVAL, "`timeout` must be a positive integer");
    } else if (wr_manager_set_timeout(c->api->mgr, c->team, c->seg[1],
                                      (uint32_t)json_integer_value(v), &rec, &err) < 0) {
        api_error(req, &err);
    } else {
        wr_http_respond_json(req, 200, api_sandbox_json(&rec));
        wr_sandbox_rec_fini(&rec);
    }
    json_decref(j);
}

/* ---- pause, resume ---------------------------------------------------------------------- */

/* The answer of a pause or resume; if the client left meanwhile, the change still happens. */
struct state_ctx {
    struct wr_http_req *req;
    int kept; /* resume: 1 processes kept (memory), 0 not (disk), -1 not a resume */
};

static void state_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct state_ctx *s = data;
    s->req = NULL;
}

static void state_done(void *ctx, const struct wr_sandbox_rec *rec, const struct wr_err *err)
{
    struct state_ctx *s = ctx;

    if (s->req != NULL) {
        wr_http_req_set_data(s->req, NULL, NULL);
        if (err != NULL) {
            api_error(s->req, err);
        } else {
            json_t *j = api_sandbox_json(rec);
            if (s->kept >= 0)
                json_object_set_new(j, "processes_kept", json_boolean(s->kept));
            wr_http_respond_json(s->req, 200, j);
        }
    }
    free(s);
}

static struct state_ctx *state_ctx_new(struct wr_http_req *req)
{
    struct state_ctx *s = xcalloc(1, sizeof(*s));

    s->req = req;
    s->kept = -1;
    wr_http_req_set_data(req, s, state_closed);
    return s;
}

/* GET /v1/sandboxes/{id}/metrics: its usage samples (the last 10 minutes, every 5 s). */
void api_sandbox_metrics(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    struct wr_usage u[WR_USAGE_MAX];
    struct wr_err err;
    json_t *arr;
    int n;

    n = wr_manager_metrics(c->api->mgr, c->team, c->seg[1], 0, 0, u, WR_USAGE_MAX, &err);
    if (n < 0) {
        api_error(req, &err);
        return;
    }
    arr = json_array();
    for (int i = 0; i < n; i++) {
        char at[32];
        api_time(u[i].at_ms, at);
        json_array_append_new(arr, json_pack("{s:s,s:f,s:I,s:I,s:I}", "timestamp", at, "cpu_pct",
                                             u[i].cpu_pct, "cpu_count", (json_int_t)u[i].cpu_count,
                                             "memory_bytes", (json_int_t)u[i].mem_bytes,
                                             "memory_limit_bytes", (json_int_t)u[i].mem_limit));
    }
    wr_http_respond_json(req, 200, json_pack("{s:o}", "samples", arr));
}

static void disk_done(void *ctx, uint64_t used, uint64_t limit, const char *how,
                      const struct wr_err *err)
{
    struct wr_http_req *req = api_pending_end(ctx);

    if (req == NULL)
        return;
    if (err != NULL)
        api_error(req, err);
    else
        wr_http_respond_json(
            req, 200,
            json_pack("{s:I,s:o,s:s?}", "used_bytes", (json_int_t)used, "limit_bytes",
                      limit ? json_integer((json_int_t)limit) : json_null(), "enforced_by", how));
}

void api_sandbox_disk(struct api_call *c)
{
    wr_manager_disk(c->api->mgr, c->team, c->seg[1], disk_done, api_pending_new(c->req));
}

void api_sandbox_pause(struct api_call *c)
{
    static const char *const allowed[] = {"mode", NULL};
    struct wr_http_req *req = c->req;
    enum wr_sb_paused_mode mode = WR_SB_PAUSED_MEMORY;
    json_t *j, *v;

    j = api_parse_object(req, c->body, c->len);
    if (j == NULL)
        goto out;
    if (api_only_keys(req, j, allowed) < 0)
        goto out;
    if ((v = json_object_get(j, "mode")) != NULL && !json_is_null(v)) {
        const char *m = json_string_value(v);
        if (wr_sb_paused_mode_parse(m, &mode) < 0) {
            api_fail(req, WR_EINVAL, "`mode` must be memory or disk");
            goto out;
        }
    }
    wr_manager_pause(c->api->mgr, c->team, c->seg[1], mode, state_done, state_ctx_new(req));
out:
    json_decref(j);
}

void api_sandbox_resume(struct api_call *c)
{
    static const char *const allowed[] = {"timeout", NULL};
    struct wr_http_req *req = c->req;
    uint32_t timeout_s = 0;
    json_t *j;

    j = api_parse_object(req, c->body, c->len);
    if (j == NULL)
        goto out;
    if (api_only_keys(req, j, allowed) < 0)
        goto out;
    if (api_opt_seconds(req, j, "timeout", &timeout_s) < 0)
        goto out;
    {
        struct wr_budget_state st;
        struct state_ctx *s;
        struct wr_sandbox_rec rec;
        int kept = -1;
        /* Past its own hard cap it stays paused: 429 budget, until the cap is raised. */
        if (wr_manager_sandbox_budget(c->api->mgr, c->team, c->seg[1], &st, NULL) == 0 &&
            st.level == WR_BUDGET_HARD) {
            char msg[256];
            snprintf(msg, sizeof(msg),
                     "sandbox `%s` is past its own budget (%.6g of %.6g %s): raise it "
                     "(PUT /v1/sandboxes/{id}/budget) to resume",
                     c->seg[1], st.used, st.b.hard, wr_budget_unit_name(st.b.unit));
            api_limits_budget(req, 3600, msg);
            goto out;
        }
        /* A sandbox paused to disk starts again with a fresh init: its processes are gone. It
         * counts against its team's quotas (and budget) again (one in memory never stopped
         * counting). */
        if (wr_manager_get(c->api->mgr, c->team, c->seg[1], &rec, NULL) == 0) {
            bool on_disk = rec.paused_mode == WR_SB_PAUSED_DISK;
            uint64_t mem = rec.memory_bytes;
            /* A gvisor sandbox paused to disk continues its checkpoint (or the resume fails,
             * and it stays paused). */
            kept = !on_disk || wr_manager_sandbox_checkpointed(c->api->mgr, c->seg[1]);
            wr_sandbox_rec_fini(&rec);
            if (on_disk && api_limits_quota(c->api, req, &c->who, 1, mem) < 0)
                goto out;
        }
        s = state_ctx_new(req);
        s->kept = kept;
        wr_manager_resume(c->api->mgr, c->team, c->seg[1], timeout_s, state_done, s);
    }
out:
    json_decref(j);
}

void api_sandbox_get(struct api_call *c)
{
    struct wr_sandbox_rec rec;
    struct wr_err err;

    if (wr_manager_get(c->api->mgr, c->team, c->seg[1], &rec, &err) < 0) {
        api_error(c->req, &err);
        return;
    }
    {
        json_t *j = api_sandbox_json(&rec);
        json_object_set_new(j, "budget", api_sandbox_budget_json(c->api, rec.id));
        wr_http_respond_json(c->req, 200, j);
    }
    wr_sandbox_rec_fini(&rec);
}

void api_sandbox_delete(struct api_call *c)
{
    /* If the client leaves, the delete completes; the answer goes nowhere. */
    wr_manager_delete(c->api->mgr, c->team, c->seg[1], api_pending_deleted,
                      api_pending_new(c->req));
}
