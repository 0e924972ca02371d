/* SPDX-License-Identifier: Apache-2.0 */
/* E2B's control plane (REST, e2b-dev/infra spec/openapi.yml) on the sandbox manager: create,
 * connect, list, get, kill, timeout, pause, resume, metrics. Errors are {"code": <status>,
 * "message": ...}; the SDKs test the body's code (404: not found, 409 on pause: already
 * paused). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/parse.h"
#include "../util/xalloc.h"
#include "../core/images.h"
#include "e2b_int.h"

#define MAX_BODY   (64u * 1024)
#define LIST_LIMIT 100

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* E2B knows two states: a sandbox being created already counts as running. */
static const char *e2b_state(const struct wr_sandbox_rec *r)
{
    switch (r->state) {
    case WR_SB_PAUSED:
        return "paused";
    case WR_SB_CREATING:
    case WR_SB_RUNNING:
        return "running";
    case WR_SB_STOPPED:
    case WR_SB_ERROR:
        break;
    }
    return NULL;
}

/* The record's network: its policy, and whether its ports need the traffic token. */
static json_t *record_network(const struct wr_sandbox_rec *r, bool *internet, bool *public)
{
    json_t *n = api_network_json(r), *ports = json_object_get(n, "ports");

    *internet = json_is_true(json_object_get(n, "internet"));
    *public = !json_is_false(json_object_get(ports, "public"));
    return n;
}

/* Sandbox: what create, connect and resume answer. */
static json_t *sandbox_json(struct wr_api *api, const struct wr_sandbox_rec *r)
{
    char token[E2B_TOKEN_HEX + 1], traffic[E2B_TOKEN_HEX + 1];
    bool internet, public;
    json_t *n = record_network(r, &internet, &public);

    json_decref(n);
    e2b_token(api, r->id, token);
    wr_e2b_traffic_token(api, r->id, traffic);
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s?,s:s?}", "sandboxID", r->id, "clientID",
                     "warren", "templateID", r->template_name, "alias", r->template_name,
                     "envdVersion", E2B_ENVD_VERSION, "envdAccessToken", token, "domain",
                     api->domain, "trafficAccessToken", public ? NULL : traffic);
}

/* The record's mounts as E2B shows them: [{"name", "path"}]. */
static json_t *volume_mounts_json(const char *stored)
{
    json_t *in = json_loads(stored ? stored : "[]", 0, NULL), *out = json_array(), *m;
    size_t i;

    json_array_foreach(in, i, m)
    {
        json_t *e = json_pack("{s:O,s:O}", "name", json_object_get(m, "name"), "path",
                              json_object_get(m, "path"));
        if (e != NULL)
            json_array_append_new(out, e);
    }
    json_decref(in);
    return out;
}

/* ListedSandbox, and SandboxDetail (detail: with the token and lifecycle). */
static json_t *listed_json(struct wr_api *api, const struct wr_sandbox_rec *r, bool detail)
{
    char started[32], end[32];
    bool paused = r->state == WR_SB_PAUSED && r->remaining_ms >= 0;
    json_t *meta = json_loads(r->metadata_json ? r->metadata_json : "{}", 0, NULL);
    json_t *j;

    if (!json_is_object(meta)) {
        json_decref(meta);
        meta = json_object();
    }
    api_time(r->created_ms, started);
    api_time(paused ? now_ms() + r->remaining_ms : r->deadline_ms, end);
    j = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:i,s:s,s:o}", "sandboxID", r->id,
                  "clientID", "warren", "templateID", r->template_name, "alias", r->template_name,
                  "startedAt", started, "endAt", end, "state", e2b_state(r), "cpuCount",
                  (json_int_t)((r->cpu_millis + 999) / 1000), "memoryMB",
                  (json_int_t)(r->memory_bytes >> 20), "diskSizeMB", 0, "envdVersion",
                  E2B_ENVD_VERSION, "metadata", meta);
    json_object_set_new(j, "volumeMounts", volume_mounts_json(r->volumes_json));
    if (detail) {
        char token[E2B_TOKEN_HEX + 1];
        e2b_token(api, r->id, token);
        bool internet, public;
        json_t *n = record_network(r, &internet, &public);
        json_t *mask = json_object_get(json_object_get(n, "ports"), "mask_host");

        json_object_set_new(j, "envdAccessToken", json_string(token));
        json_object_set_new(j, "domain", api->domain ? json_string(api->domain) : json_null());
        json_object_set_new(j, "allowInternetAccess", json_boolean(internet));
        json_object_set_new(j, "network",
                            json_pack("{s:O,s:O,s:b,s:O?}", "allowOut",
                                      json_object_get(n, "allow_out"), "denyOut",
                                      json_object_get(n, "deny_out"), "allowPublicTraffic", public,
                                      "maskRequestHost", json_is_string(mask) ? mask : NULL));
        json_decref(n);
        json_object_set_new(j, "lifecycle",
                            json_pack("{s:s,s:b}", "onTimeout",
                                      wr_sb_on_timeout_name(r->on_timeout), "autoResume", 0));
    }
    return j;
}

/* The record of a sandbox the caller may see, in an E2B state; else answers 404. */
/* GET /sandboxes/{id}/metrics?start=&end= (unix seconds): SandboxMetric[] from the manager's
 * samples. Disk use is not sampled (measuring it walks the files): diskUsed and diskTotal are
 * 0. */
static void metrics(struct wr_api *api, struct wr_http_req *req, const char *team, const char *id)
{
    const char *qs = wr_http_req_query(req, "start"), *qe = wr_http_req_query(req, "end");
    int64_t from = qs ? strtoll(qs, NULL, 10) * 1000 : 0,
            to = qe ? strtoll(qe, NULL, 10) * 1000 : 0;
    struct wr_usage u[WR_USAGE_MAX];
    struct wr_err err;
    json_t *arr;
    int n;

    if (to != 0)
        to += 999; /* the whole last second */
    n = wr_manager_metrics(api->mgr, team, id, from, to, u, WR_USAGE_MAX, &err);
    if (n < 0) {
        api_error(req, &err);
        return;
    }
    arr = json_array();
    for (int i = 0; i < n; i++) {
        char at[32];
        api_time(u[i].at_ms, at);
        json_array_append_new(arr, json_pack("{s:s,s:I,s:I,s:f,s:I,s:I,s:I,s:I,s:I}", "timestamp",
                                             at, "timestampUnix", (json_int_t)(u[i].at_ms / 1000),
                                             "cpuCount", (json_int_t)u[i].cpu_count, "cpuUsedPct",
                                             u[i].cpu_pct, "memUsed", (json_int_t)u[i].mem_bytes,
                                             "memTotal", (json_int_t)u[i].mem_limit, "memCache",
                                             (json_int_t)0, "diskUsed", (json_int_t)0, "diskTotal",
                                             (json_int_t)0));
    }
    wr_http_respond_json(req, 200, arr);
}

static int get_visible(struct wr_api *api, struct wr_http_req *req, const char *team,
                       const char *id, struct wr_sandbox_rec *rec)
{
    struct wr_err err;

    if (wr_manager_get(api->mgr, team, id, rec, &err) < 0) {
        api_error(req, &err);
        return -1;
    }
    if (e2b_state(rec) == NULL) {
        api_fail(req, WR_ENOTFOUND, "sandbox `%s` is %s%s%s", id, wr_sb_state_name(rec->state),
                 rec->reason ? ": " : "", rec->reason ? rec->reason : "");
        wr_sandbox_rec_fini(rec);
        return -1;
    }
    return 0;
}

/* ---- requests with a body, and answers that come later ------------------------------------ */

enum op {
    OP_CREATE,
    OP_CONNECT,
    OP_RESUME,
    OP_PAUSE,
    OP_TIMEOUT,
    OP_REFRESH,
    OP_SNAPSHOT,
    OP_NETWORK,
    OP_FORK
};

struct op_ctx {
    struct wr_api *api;
    struct wr_http_req *req; /* NULL once the client left */
    enum op op;
    char team[128]; /* the caller's team */
    bool any_team;  /* an admin acts on any team's sandbox */
    char id[72];
    bool pending; /* a manager call will answer */
};

static void op_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct op_ctx *o = data;

    /* What was asked goes on; nobody hears the answer. Before that, nothing was asked. */
    if (o->pending)
        o->req = NULL;
    else
        free(o);
}

/* The manager's callback answers: the request keeps a pointer to o until then. */
static void op_wait(struct op_ctx *o)
{
    o->pending = true;
    wr_http_req_set_data(o->req, o, op_closed);
}

static void op_release(struct op_ctx *o)
{
    if (o->req != NULL)
        wr_http_req_set_data(o->req, NULL, NULL);
    free(o);
}

static void created(void *ctx, struct wr_sandbox_rec *rec, bool existed, const struct wr_err *err,
                    unsigned retry_after_s)
{
    struct op_ctx *o = ctx;

    if (o->req != NULL) {
        struct wr_http_req *req = o->req;
        wr_http_req_set_data(req, NULL, NULL);
        o->req = NULL;
        if (err != NULL && err->kind == WR_ELIMIT) {
            api_limits_capacity(req, err, retry_after_s);
        } else if (err != NULL) {
            api_error(req, err);
        } else {
            wr_http_respond_json(req, 201, sandbox_json(o->api, rec));
        }
    }
    if (rec != NULL) {
        wr_sandbox_rec_fini(rec);
        free(rec);
    }
    op_release(o);
}

/* After a pause (204) or a resume (201 with the sandbox). */
static void state_changed(void *ctx, const struct wr_sandbox_rec *rec, const struct wr_err *err)
{
    struct op_ctx *o = ctx;

    if (o->req != NULL) {
        struct wr_http_req *req = o->req;
        wr_http_req_set_data(req, NULL, NULL);
        o->req = NULL;
        if (err != NULL)
            api_error(req, err);
        else if (o->op == OP_PAUSE)
            wr_http_respond(req, 204, NULL, NULL, 0);
        else
            wr_http_respond_json(req, 201, sandbox_json(o->api, rec));
    }
    op_release(o);
}

/* E2B's SnapshotInfo. */
static json_t *snapshot_json(const struct wr_image_rec *snap)
{
    return json_pack("{s:s,s:[s?]}", "snapshotID", snap->id, "names", snap->name);
}

static void snapshotted(void *ctx, const struct wr_image_rec *snap,
                        const struct wr_snapshot_info *info, const struct wr_err *err)
{
    struct op_ctx *o = ctx;

    if (o->req != NULL) {
        struct wr_http_req *req = o->req;
        wr_http_req_set_data(req, NULL, NULL);
        o->req = NULL;
        if (err != NULL)
            api_error(req, err);
        else
            wr_http_respond_json(req, 201, snapshot_json(snap));
    }
    op_release(o);
}

/* One entry per fork asked: {"sandbox": Sandbox} or {"error": {"code": status, ...}}. */
static void forked(void *ctx, struct wr_sandbox_rec *recs, size_t n, const struct wr_err *errs,
                   size_t nerrs, const struct wr_snapshot_info *info, const struct wr_err *err)
{
    struct op_ctx *o = ctx;

    if (o->req != NULL) {
        struct wr_http_req *req = o->req;
        wr_http_req_set_data(req, NULL, NULL);
        o->req = NULL;
        if (err != NULL) {
            api_error(req, err);
        } else {
            json_t *arr = json_array();
            for (size_t i = 0; i < n; i++)
                json_array_append_new(
                    arr, json_pack("{s:o}", "sandbox", sandbox_json(o->api, &recs[i])));
            for (size_t i = 0; i < nerrs; i++)
                json_array_append_new(arr, json_pack("{s:{s:i,s:o}}", "error", "code",
                                                     wr_err_kind_status(errs[i].kind), "message",
                                                     api_json_message(errs[i].msg)));
            wr_http_respond_json(req, 201, arr);
        }
    }
    op_release(o);
}

/* body[key] as a whole number of seconds: 0 if absent, -1 having answered if not valid. */
static int64_t seconds(struct wr_http_req *req, json_t *body, const char *key)
{
    json_t *v = json_object_get(body, key);

    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX) {
        api_fail(req, WR_EINVAL, "`%s` must be a number of seconds", key);
        return -1;
    }
    return json_integer_value(v);
}

static void create(struct op_ctx *o, json_t *j)
{
    struct wr_http_req *req = o->req;
    struct wr_create_req cr = {.team = o->team};
    _cleanup_free_ char *env = NULL, *meta = NULL;
    const char *tpl = e2b_str(j, "templateID", "template_id");
    struct wr_volume_mount vols[WR_MAX_VOLUMES];
    struct api_net_req net = {0};
    json_t *v;
    int64_t t;

    if (json_object_get(j, "templateID") != NULL && tpl == NULL) {
        api_fail(req, WR_EINVAL, "`templateID` must be a string");
        goto fail;
    }
    cr.template_name = tpl;
    if ((t = seconds(req, j, "timeout")) < 0)
        goto fail;
    cr.timeout_s = (uint32_t)t;
    if (api_string_map(req, j, "metadata", &meta) < 0 ||
        api_string_map(req, j, "envVars", &env) < 0)
        goto fail;
    cr.metadata_json = meta;
    cr.env_json = env;
    v = json_object_get(j, "autoPause");
    if (v != NULL && !json_is_null(v) && !json_is_boolean(v)) {
        api_fail(req, WR_EINVAL, "`autoPause` must be a boolean");
        goto fail;
    }
    cr.on_timeout = json_is_true(v) ? WR_SB_TIMEOUT_PAUSE : WR_SB_TIMEOUT_KILL;
    /* E2B's volumeMounts [{name, path}] name volumes of the team (made with /v1/volumes). */
    if (api_volume_list(req, j, "volumeMounts", vols, &cr.n_volumes) < 0)
        goto fail;
    cr.volumes = vols;
    if (api_net_parse_e2b(req, j, true, &net) < 0)
        goto fail;
    cr.net = &net.r;
    {
        struct wr_caller who = {.admin = o->any_team};
        snprintf(who.team, sizeof(who.team), "%s", o->team);
        if (api_limits_take(o->api, req, &who, WR_POL_CREATES, 1) < 0 ||
            api_limits_quota(o->api, req, &who, 1, wr_manager_default_memory(o->api->mgr)) < 0)
            goto fail;
    }
    op_wait(o);
    wr_manager_create(o->api->mgr, &cr, created, o);
    api_net_req_fini(&net);
    return;
fail:
    op_release(o);
}

/* PUT /sandboxes/{id}/network: replace the egress rules ("Omitting a field clears it"), 204. */
static void update_network(struct op_ctx *o, json_t *j)
{
    struct wr_http_req *req = o->req;
    const char *team = o->any_team ? NULL : o->team;
    struct api_net_req net;
    struct wr_sandbox_rec rec;
    struct wr_err err;
    json_t *body = json_pack("{s:O?,s:O}", "allow_internet_access",
                             json_object_get(j, "allow_internet_access"), "network", j);

    /* The update's fields sit at the top level: allowOut, denyOut (and E2B's others). */
    json_object_del(json_object_get(body, "network"), "allow_internet_access");
    if (get_visible(o->api, req, team, o->id, &rec) < 0)
        goto out;
    wr_sandbox_rec_fini(&rec);
    if (api_net_parse_e2b(req, body, false, &net) < 0)
        goto out;
    if (wr_manager_set_network(o->api->mgr, team, o->id, &net.r, &rec, &err) < 0) {
        api_error(req, &err);
    } else {
        wr_http_respond(req, 204, NULL, NULL, 0);
        wr_sandbox_rec_fini(&rec);
    }
    api_net_req_fini(&net);
out:
    json_decref(body);
}

/* A sandbox paused to disk counts against its team's quotas again when it is resumed (one in
 * memory never stopped counting): -1 when the team is over one (answered 429). */
static int quota_from_disk(struct op_ctx *o)
{
    struct wr_caller who = {.admin = o->any_team};
    struct wr_sandbox_rec rec;
    uint64_t mem;

    if (wr_manager_get(o->api->mgr, o->any_team ? NULL : o->team, o->id, &rec, NULL) < 0)
        return 0; /* the resume says what is wrong */
    mem = rec.memory_bytes;
    if (rec.paused_mode != WR_SB_PAUSED_DISK) {
        wr_sandbox_rec_fini(&rec);
        return 0;
    }
    snprintf(who.team, sizeof(who.team), "%s", rec.team);
    wr_sandbox_rec_fini(&rec);
    return api_limits_quota(o->api, o->req, &who, 1, mem);
}

/* E2B's connect (KeepAliveFor with allowShorter false, in e2b-dev/infra's sandbox_connect.go):
 * the sandbox is kept for `timeout` seconds at least, and its deadline never moves earlier, so
 * the 300 s every SDK connect sends does not cut a sandbox made for an hour. A paused one is
 * resumed with its time left, raised to `timeout` if that is longer. */
static void connect_sandbox(struct op_ctx *o, json_t *j)
{
    struct wr_http_req *req = o->req;
    const char *team = o->any_team ? NULL : o->team;
    struct wr_sandbox_rec rec;
    struct wr_err err;
    bool paused;
    int64_t t;

    if ((t = seconds(req, j, "timeout")) < 0)
        goto out;
    if (get_visible(o->api, req, team, o->id, &rec) < 0)
        goto out;
    paused = strcmp(e2b_state(&rec), "paused") == 0;
    wr_sandbox_rec_fini(&rec);
    if (paused && quota_from_disk(o) < 0)
        goto out;
    if (wr_manager_extend_timeout(o->api->mgr, team, o->id, (uint32_t)t, &rec, &err) < 0) {
        api_error(req, &err);
        goto out;
    }
    if (paused) {
        /* `memory: false` (reboot) resumes it too: a sandbox paused to disk starts afresh on its
         * files anyway, one paused in memory goes on where it was. */
        wr_sandbox_rec_fini(&rec);
        op_wait(o);
        wr_manager_resume(o->api->mgr, team, o->id, 0, state_changed, o);
        return;
    }
    wr_http_respond_json(req, 200, sandbox_json(o->api, &rec));
    wr_sandbox_rec_fini(&rec);
out:
    op_release(o);
}

/* POST /sandboxes/{id}/timeout sets the deadline to now + timeout, earlier or later (E2B's
 * setTimeout, the one call that may shorten it). POST /sandboxes/{id}/refreshes only extends it,
 * as connect does: by `duration` seconds (0 to 3600), at least E2B's default of 15. */
#define REFRESH_MIN 15
#define REFRESH_MAX 3600

static void timeout_or_refresh(struct op_ctx *o, json_t *j)
{
    struct wr_http_req *req = o->req;
    const char *team = o->any_team ? NULL : o->team;
    bool refresh = o->op == OP_REFRESH;
    struct wr_sandbox_rec rec;
    struct wr_err err;
    int64_t t = seconds(req, j, refresh ? "duration" : "timeout");
    int rc;

    if (t < 0)
        return;
    if (!refresh && t == 0) {
        api_fail(req, WR_EINVAL, "`timeout` must be a positive number");
        return;
    }
    if (refresh && t > REFRESH_MAX) {
        api_fail(req, WR_EINVAL, "`duration` must be 0 to %d seconds", REFRESH_MAX);
        return;
    }
    if (refresh)
        rc = wr_manager_extend_timeout(o->api->mgr, team, o->id,
                                       t < REFRESH_MIN ? REFRESH_MIN : (uint32_t)t, &rec, &err);
    else
        rc = wr_manager_set_timeout(o->api->mgr, team, o->id, (uint32_t)t, &rec, &err);
    if (rc < 0) {
        api_error(req, &err);
        return;
    }
    wr_sandbox_rec_fini(&rec);
    wr_http_respond(req, 204, NULL, NULL, 0);
}

static void op_body(struct wr_http_req *req, const char *body, size_t len)
{
    struct op_ctx *o = wr_http_req_data(req);
    const char *team;
    json_t *j, *v;
    int64_t t;

    wr_http_req_set_data(req, NULL, NULL);
    o->req = req;
    team = o->any_team ? NULL : o->team;
    j = api_parse_object(req, body, len);
    if (j == NULL) {
        op_release(o);
        return;
    }
    switch (o->op) {
    case OP_CREATE:
        create(o, j);
        break;
    case OP_CONNECT:
        connect_sandbox(o, j);
        break;
    case OP_RESUME:
        if ((t = seconds(req, j, "timeout")) < 0 || quota_from_disk(o) < 0) {
            op_release(o);
            break;
        }
        op_wait(o);
        wr_manager_resume(o->api->mgr, team, o->id, (uint32_t)t, state_changed, o);
        break;
    case OP_PAUSE:
        v = json_object_get(j, "memory");
        if (v != NULL && !json_is_null(v) && !json_is_boolean(v)) {
            api_fail(req, WR_EINVAL, "`memory` must be a boolean");
            op_release(o);
            break;
        }
        op_wait(o);
        wr_manager_pause(o->api->mgr, team, o->id,
                         json_is_false(v) ? WR_SB_PAUSED_DISK : WR_SB_PAUSED_MEMORY, state_changed,
                         o);
        break;
    case OP_SNAPSHOT:
        v = json_object_get(j, "name");
        if (v != NULL && !json_is_null(v) && !json_is_string(v)) {
            api_fail(req, WR_EINVAL, "`name` must be a string");
            op_release(o);
            break;
        }
        op_wait(o);
        wr_manager_snapshot(o->api->mgr, team, o->id, json_string_value(v), snapshotted, o);
        break;
    case OP_FORK: {
        struct wr_fork_req fr = {.team = team, .id = o->id, .count = 1};
        v = json_object_get(j, "count");
        if (v != NULL && !json_is_null(v) &&
            (!json_is_integer(v) || json_integer_value(v) < 1 ||
             json_integer_value(v) > WR_FORK_MAX)) {
            api_fail(req, WR_EINVAL, "`count` must be 1 to %d", WR_FORK_MAX);
            op_release(o);
            break;
        }
        if (json_is_integer(v))
            fr.count = (uint32_t)json_integer_value(v);
        if ((t = seconds(req, j, "timeout")) < 0) {
            op_release(o);
            break;
        }
        fr.timeout_s = (uint32_t)t;
        op_wait(o);
        wr_manager_fork(o->api->mgr, &fr, forked, o);
        break;
    }
    case OP_TIMEOUT:
    case OP_REFRESH:
        timeout_or_refresh(o, j);
        op_release(o);
        break;
    case OP_NETWORK:
        update_network(o, j);
        op_release(o);
        break;
    }
    json_decref(j);
}

static void with_body(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                      enum op op, const char *id)
{
    struct op_ctx *o = xcalloc(1, sizeof(*o));

    o->api = api;
    o->op = op;
    snprintf(o->team, sizeof(o->team), "%s", who->team);
    o->any_team = who->admin;
    snprintf(o->id, sizeof(o->id), "%s", id ? id : "");
    wr_http_req_set_data(req, o, op_closed);
    o->req = req;
    wr_http_req_read_body(req, MAX_BODY, op_body);
}

/* ---- list ------------------------------------------------------------------------------------ */

/* Percent-decode in place ('+' is a space); false if malformed. */
static bool form_decode(char *s)
{
    char *w = s;

    for (char *r = s; *r; r++) {
        if (*r == '+') {
            *w++ = ' ';
        } else if (*r == '%') {
            unsigned v;
            if (sscanf(r + 1, "%2x", &v) != 1 || !r[1] || !r[2])
                return false;
            *w++ = (char)v;
            r += 2;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
    return true;
}

static void list(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who, bool v2)
{
    const char *keys[16], *vals[16];
    struct wr_sandbox_filter f = {.team = who->team};
    struct wr_sandbox_rec *recs = NULL;
    _cleanup_free_ char *mbuf = NULL, *sbuf = NULL;
    uint64_t limit = LIST_LIMIT, cursor = 0;
    struct wr_err err;
    size_t n = 0, shown = 0;
    const char *q;
    json_t *arr;

    if ((q = wr_http_req_query(req, "metadata")) != NULL && q[0] != '\0') {
        char *save = NULL;
        mbuf = xstrdup(q);
        for (char *kv = strtok_r(mbuf, "&", &save); kv != NULL; kv = strtok_r(NULL, "&", &save)) {
            char *eq = strchr(kv, '=');
            if (eq == NULL || eq == kv || f.n_meta == 16) {
                api_fail(req, WR_EINVAL,
                         "`metadata` must be key=value pairs joined by &, at most 16");
                return;
            }
            *eq = '\0';
            if (!form_decode(kv) || !form_decode(eq + 1)) {
                api_fail(req, WR_EINVAL, "`metadata` is not URL-encoded");
                return;
            }
            keys[f.n_meta] = kv;
            vals[f.n_meta++] = eq + 1;
        }
    }
    f.meta_keys = keys;
    f.meta_values = vals;
    /* Warren's paused sandboxes are "paused"; its running ones may still be "creating". */
    if ((q = wr_http_req_query(req, "state")) != NULL && q[0] != '\0') {
        char *save = NULL;
        bool running = false, paused = false;
        sbuf = xstrdup(q);
        for (char *s = strtok_r(sbuf, ",", &save); s != NULL; s = strtok_r(NULL, ",", &save)) {
            if (strcmp(s, "running") == 0)
                running = true;
            else if (strcmp(s, "paused") == 0)
                paused = true;
            else {
                api_fail(req, WR_EINVAL, "unknown state `%s`", s);
                return;
            }
        }
        if (running)
            f.states |= WR_SB_BIT(WR_SB_RUNNING) | WR_SB_BIT(WR_SB_CREATING);
        if (paused)
            f.states |= WR_SB_BIT(WR_SB_PAUSED);
        /* 0 here: a `state` that names none matches nothing. */
    } else if (v2) {
        f.states = WR_SB_LIVE;
    } else {
        f.states = WR_SB_BIT(WR_SB_RUNNING) | WR_SB_BIT(WR_SB_CREATING);
    }
    if ((q = wr_http_req_query(req, "limit")) != NULL &&
        (wr_parse_uint(q, 1000, &limit, &err) < 0 || limit == 0)) {
        api_fail(req, WR_EINVAL, "`limit` must be 1 to 1000");
        return;
    }
    if ((q = wr_http_req_query(req, "nextToken")) != NULL && q[0] != '\0' &&
        wr_parse_uint(q, INT64_MAX, &cursor, &err) < 0) {
        api_fail(req, WR_EINVAL, "`nextToken` is not valid");
        return;
    }
    f.after_seq = (int64_t)cursor;
    f.limit = (size_t)limit + 1; /* one more tells whether there is a next page */
    if (f.states != 0 && wr_manager_list(api->mgr, &f, &recs, &n, &err) < 0) {
        api_error(req, &err);
        return;
    }
    arr = json_array();
    for (shown = 0; shown < n && shown < limit; shown++)
        json_array_append_new(arr, listed_json(api, &recs[shown], false));
    if (n > limit) {
        char next[32];
        snprintf(next, sizeof(next), "%" PRId64, recs[limit - 1].seq);
        wr_http_resp_header(req, "X-Next-Token", next);
    }
    wr_http_respond_json(req, 200, arr);
    for (size_t i = 0; i < n; i++)
        wr_sandbox_rec_fini(&recs[i]);
    free(recs);
}

/* ---- snapshots ------------------------------------------------------------------------------- */

static void list_snapshots(struct wr_api *api, struct wr_http_req *req, const char *team)
{
    const char *name = wr_http_req_query(req, "name"), *q;
    struct wr_image_rec *recs = NULL;
    uint64_t limit = LIST_LIMIT, start = 0;
    struct wr_err err;
    size_t n = 0, seen = 0;
    json_t *arr;

    if ((q = wr_http_req_query(req, "limit")) != NULL &&
        (wr_parse_uint(q, 1000, &limit, &err) < 0 || limit == 0)) {
        api_fail(req, WR_EINVAL, "`limit` must be 1 to 1000");
        return;
    }
    if ((q = wr_http_req_query(req, "nextToken")) != NULL && q[0] != '\0' &&
        wr_parse_uint(q, INT64_MAX, &start, &err) < 0) {
        api_fail(req, WR_EINVAL, "`nextToken` is not valid");
        return;
    }
    if (wr_images_list(api->images, team, "snapshot", wr_http_req_query(req, "sandboxID"), &recs,
                       &n, &err) < 0) {
        api_error(req, &err);
        return;
    }
    /* Newest first; the token is how many matching snapshots came before. */
    arr = json_array();
    for (size_t i = 0; i < n; i++) {
        if (name != NULL && (recs[i].name == NULL || strcmp(recs[i].name, name) != 0))
            continue;
        if (seen >= start && json_array_size(arr) < limit) {
            json_array_append_new(arr, snapshot_json(&recs[i]));
        } else if (seen >= start) {
            char next[32];
            snprintf(next, sizeof(next), "%zu", seen);
            wr_http_resp_header(req, "X-Next-Token", next);
            break;
        }
        seen++;
    }
    for (size_t i = 0; i < n; i++)
        wr_image_rec_fini(&recs[i]);
    free(recs);
    wr_http_respond_json(req, 200, arr);
}

/* ---- kill ------------------------------------------------------------------------------------ */

/* ---- routing --------------------------------------------------------------------------------- */

static void unsupported(struct wr_http_req *req, const char *what)
{
    api_fail(req, WR_EUNSUPPORTED, "%s not supported yet", what);
}

static bool method_is(struct wr_http_req *req, const char *want)
{
    if (strcmp(wr_http_req_method(req), want) == 0)
        return true;
    wr_http_resp_header(req, "Allow", want);
    api_fail(req, WR_EMETHOD, "use %s", want);
    return false;
}

void e2b_control(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who)
{
    const char *path = wr_http_req_path(req);
    const char *method = wr_http_req_method(req);
    const char *team = who->admin ? NULL : who->team;
    char buf[256], *seg[4] = {NULL};
    size_t nseg = 0;
    bool v2 = strncmp(path, "/v2/", 4) == 0;
    struct wr_sandbox_rec rec;
    char *save = NULL;

    if (strlen(path) >= sizeof(buf)) {
        api_fail(req, WR_ENOTFOUND, "no such endpoint");
        return;
    }
    snprintf(buf, sizeof(buf), "%s", v2 ? path + 3 : path);
    for (char *p = strtok_r(buf, "/", &save); p != NULL; p = strtok_r(NULL, "/", &save)) {
        if (nseg == 4)
            goto notfound;
        seg[nseg++] = p;
    }
    if (nseg == 0)
        goto notfound;
    if (strcmp(seg[0], "events") == 0 && !v2) {
        e2b_events(api, req, who, seg, nseg);
        return;
    }
    if (strcmp(seg[0], "snapshots") == 0 && nseg == 1) {
        if (method_is(req, "GET"))
            list_snapshots(api, req, team);
        return;
    }
    if (strcmp(seg[0], "templates") == 0) {
        struct wr_err err;
        /* Only a snapshot is deleted here (deleteSnapshot); templates are the host's. */
        if (nseg != 2 || strcmp(method, "DELETE") != 0) {
            unsupported(req, "templates through the E2B API are");
        } else if (wr_images_delete(api->images, team, "snapshot", seg[1], &err) < 0) {
            api_error(req, &err);
        } else {
            wr_http_respond(req, 204, NULL, NULL, 0);
        }
        return;
    }
    if (strcmp(seg[0], "sandboxes") != 0)
        goto notfound;
    if (nseg == 1) {
        if (strcmp(method, "POST") == 0)
            with_body(api, req, who, OP_CREATE, NULL);
        else if (method_is(req, "GET"))
            list(api, req, who, v2);
        return;
    }
    if (nseg == 2) {
        if (strcmp(method, "DELETE") == 0) {
            wr_manager_delete(api->mgr, team, seg[1], api_pending_deleted, api_pending_new(req));
        } else if (method_is(req, "GET")) {
            if (get_visible(api, req, team, seg[1], &rec) < 0)
                return;
            wr_http_respond_json(req, 200, listed_json(api, &rec, true));
            wr_sandbox_rec_fini(&rec);
        }
        return;
    }
    if (nseg != 3)
        goto notfound;
    if (strcmp(seg[2], "connect") == 0) {
        if (method_is(req, "POST"))
            with_body(api, req, who, OP_CONNECT, seg[1]);
    } else if (v2) {
        goto notfound;
    } else if (strcmp(seg[2], "timeout") == 0) {
        if (method_is(req, "POST"))
            with_body(api, req, who, OP_TIMEOUT, seg[1]);
    } else if (strcmp(seg[2], "refreshes") == 0) {
        if (method_is(req, "POST"))
            with_body(api, req, who, OP_REFRESH, seg[1]);
    } else if (strcmp(seg[2], "pause") == 0) {
        if (method_is(req, "POST"))
            with_body(api, req, who, OP_PAUSE, seg[1]);
    } else if (strcmp(seg[2], "resume") == 0) {
        if (method_is(req, "POST"))
            with_body(api, req, who, OP_RESUME, seg[1]);
    } else if (strcmp(seg[2], "metrics") == 0) {
        if (method_is(req, "GET") && get_visible(api, req, team, seg[1], &rec) == 0) {
            wr_sandbox_rec_fini(&rec);
            metrics(api, req, team, seg[1]);
        }
    } else if (strcmp(seg[2], "fork") == 0) {
        if (method_is(req, "POST"))
            with_body(api, req, who, OP_FORK, seg[1]);
    } else if (strcmp(seg[2], "snapshots") == 0) {
        if (method_is(req, "POST"))
            with_body(api, req, who, OP_SNAPSHOT, seg[1]);
    } else if (strcmp(seg[2], "network") == 0) {
        if (method_is(req, "PUT"))
            with_body(api, req, who, OP_NETWORK, seg[1]);
    } else {
        goto notfound;
    }
    return;
notfound:
    api_fail(req, WR_ENOTFOUND, "no such endpoint: %s %s", method, path);
}
