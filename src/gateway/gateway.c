/* SPDX-License-Identifier: Apache-2.0 */
/* The gateway role (see gateway.h, docs/deploy.md).
 *
 * One libuv loop moves bytes; every decision runs on a worker thread: the key checked against
 * PostgreSQL (cached a few seconds), the sandbox's node looked up, a create placed, a list
 * gathered from every node. Then, on the loop, either the answer is sent, or the client's
 * connection is taken over (wr_http_req_hijack) and tunnelled to the node that holds the
 * sandbox: its request head rewritten (the client's key replaced by the node token and the
 * caller's team, Connection: close), its body, the answer, a WebSocket or an upgraded port
 * all relayed as bytes. A tunnelled connection serves that one request. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "../api/http.h"
#include "../util/cleanup.h"
#include "../util/json_cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "db.h"
#include "gateway.h"
#include "nodes.h"

/* A create's body: as the nodes take it (a Compose file and its context). */
#define BODY_MAX (24u << 20)
/* A key found in the database is trusted this long before it is read again (a revoked key
 * works at most this long on a gateway that had seen it). */
#define KEY_TTL_MS 5000
#define KEY_SLOTS  256
/* Relayed bytes queued to one side beyond which the other side is not read. */
#define RELAY_HIGH (1u << 20)
#define MAX_TRIES  8

struct key_slot {
    char secret[128];
    struct gw_key who;
    int64_t until_ms;
};

struct gw {
    const struct wr_gateway_config *cfg;
    uv_loop_t *loop;
    struct wr_http_server *srv;
    struct wr_discovery *disc;
    struct gw_nodes *nodes;
    uv_timer_t health;
    uv_work_t health_w;
    bool health_busy, stopping;
    uv_signal_t sigterm, sigint;
    uv_mutex_t keys_mu;
    struct key_slot keys[KEY_SLOTS];
};

enum kind {
    K_HOST,    /* <port>-<id>.<domain> or E2b-Sandbox-Id: tunnelled unchanged */
    K_TUNNEL,  /* a sandbox's API route: authenticated, tunnelled with the node token */
    K_CREATE,  /* placed on a node */
    K_FORWARD, /* a sandbox's route the gateway must see the answer of */
    K_LIST,    /* gathered from every node */
    K_LOCAL,   /* answered from the database */
    K_SNAP,    /* a snapshot's route: asked of every node that may hold a copy */
};

enum op {
    OP_NONE,
    OP_GET,
    OP_DELETE,
    OP_PAUSE,
    OP_RESUME,
    OP_FORK,
    OP_SNAPSHOT,
    OP_VERSION,
    OP_KEYS,
    OP_NODES,
    OP_LIST_SB,
    OP_LIST_TPL,
    OP_LIST_SNAP,
    OP_LIST_E2B,
    OP_LIST_E2B_SNAP,
};

struct call {
    uv_work_t w;
    struct gw *g;
    struct wr_http_req *req; /* NULL once the client went away */
    enum kind kind;
    enum op op;
    bool e2b;      /* an E2B route: its errors and its key header are E2B's */
    bool key_in_x; /* the key came in X-API-Key (else Authorization: Bearer) */
    char *method, *target, *key, *sid, *ctype;
    char *body;
    size_t len;
    struct gw_key who;
    /* The answer: an error, a JSON body, or a node's answer as it was. */
    struct wr_err err;
    bool failed;
    int status;
    json_t *json;
    struct gw_answer ans;
    bool have_ans;
    struct wr_node_addr node; /* K_HOST, K_TUNNEL: where to */
};

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void call_free(struct call *c)
{
    free(c->method);
    free(c->target);
    if (c->key != NULL)
        OPENSSL_cleanse(c->key, strlen(c->key));
    free(c->key);
    free(c->sid);
    free(c->ctype);
    free(c->body);
    json_decref(c->json);
    gw_answer_fini(&c->ans);
    free(c);
}

static int fail(struct call *c, enum wr_err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct call *c, enum wr_err_kind kind, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    wr_err_vset(&c->err, kind, 0, fmt, ap);
    va_end(ap);
    c->failed = true;
    return -1;
}

static int fail_err(struct call *c, const struct wr_err *err)
{
    c->err = *err;
    c->failed = true;
    return -1;
}

/* ---- keys ------------------------------------------------------------------------------------ */

static size_t key_slot(const char *secret)
{
    uint32_t h = 2166136261u;

    for (const char *p = secret; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    return h % KEY_SLOTS;
}

/* Who c's key is: from the cache, else the database. */
static int authenticate(struct call *c)
{
    struct gw *g = c->g;
    struct key_slot *s;
    struct wr_err err;

    if (c->key == NULL || c->key[0] == '\0' || strlen(c->key) >= sizeof(s->secret))
        return fail(c, WR_EUNAUTHORIZED,
                    c->key ? "the API key is not valid"
                           : "an API key is required (Authorization: Bearer <key>)");
    s = &g->keys[key_slot(c->key)];
    uv_mutex_lock(&g->keys_mu);
    if (strcmp(s->secret, c->key) == 0 && s->until_ms > mono_ms()) {
        c->who = s->who;
        uv_mutex_unlock(&g->keys_mu);
        return 0;
    }
    uv_mutex_unlock(&g->keys_mu);
    if (gw_db_key_lookup(c->key, &c->who, &err) < 0) {
        if (err.kind == WR_ENOTFOUND)
            return fail(c, WR_EUNAUTHORIZED, "the API key is not valid");
        return fail_err(c, &err);
    }
    uv_mutex_lock(&g->keys_mu);
    snprintf(s->secret, sizeof(s->secret), "%s", c->key);
    s->who = c->who;
    s->until_ms = mono_ms() + KEY_TTL_MS;
    uv_mutex_unlock(&g->keys_mu);
    return 0;
}

static void forget_keys(struct gw *g)
{
    uv_mutex_lock(&g->keys_mu);
    memset(g->keys, 0, sizeof(g->keys));
    uv_mutex_unlock(&g->keys_mu);
}

/* ---- the worker's part ----------------------------------------------------------------------- */

static const char *team_of(const struct call *c)
{
    return c->who.admin ? NULL : c->who.team;
}

/* The sandbox c names, where it is. */
static int locate(struct call *c, struct gw_sandbox *sb, bool *healthy)
{
    struct wr_err err;

    if (gw_db_sandbox_get(c->kind == K_HOST ? NULL : team_of(c), c->sid, sb, &err) < 0)
        return fail_err(c, &err);
    /* Lost by any gateway's word (the database's), or by this one's. */
    if (!gw_nodes_addr(c->g->nodes, sb->node, &c->node, healthy) || strcmp(sb->state, "lost") == 0)
        *healthy = false;
    return 0;
}

/* Call node `id` with c's request (as c's caller), into c's answer. */
static int call_node(struct call *c, const struct wr_node_addr *node, const char *method,
                     const char *target, const char *body, size_t len)
{
    struct wr_err err;

    gw_answer_fini(&c->ans);
    c->have_ans = false;
    if (gw_node_call(c->g->nodes, node, method, target, c->who.team, c->who.admin, body, len,
                     c->ctype ? c->ctype : (body ? "application/json" : NULL), c->e2b, &c->ans,
                     &err) < 0)
        return fail_err(c, &err);
    c->have_ans = true;
    return 0;
}

static bool ok_status(long s)
{
    return s >= 200 && s < 300;
}

/* A node's refusal that another node may not give: full, or out of memory or disk. */
static bool capacity_refusal(long s)
{
    return s == 429 || s == 503 || s == 507;
}

/* Make the exported snapshot snap node a's before a create from it there (a node that has it
 * already says 409). */
static bool import_snapshot(struct call *c, const struct wr_node_addr *a,
                            const struct gw_snapshot *snap)
{
    json_auto_t *body = json_pack("{s:s}", "manifest", snap->manifest);
    _cleanup_free_ char *text = json_dumps(body, JSON_COMPACT);
    struct gw_answer ans;
    struct wr_err err;
    bool ok;

    if (gw_node_call(c->g->nodes, a, "POST", "/node/images/import", c->who.team, false, text,
                     strlen(text), "application/json", false, &ans, &err) < 0) {
        log_warn("import %s on %s: %s", snap->id, a->id, err.msg);
        return false;
    }
    ok = ok_status(ans.status) || ans.status == 409;
    if (!ok)
        log_warn("import %s on %s: %ld %.200s", snap->id, a->id, ans.status, ans.body);
    gw_answer_fini(&ans);
    return ok;
}

static void do_create(struct call *c)
{
    json_auto_t *req = json_loads(c->body ? c->body : "{}", 0, NULL);
    const char *tpl = json_string_value(json_object_get(req, c->e2b ? "templateID" : "template"));
    const char *runtime = json_string_value(json_object_get(req, "runtime"));
    char ids[MAX_TRIES][64];
    struct gw_snapshot snap;
    bool is_snap, pinned;
    size_t n;
    struct wr_err err;

    /* A snapshot is on the node it was taken on; exported, on any node that imports it. */
    is_snap = tpl != NULL && gw_db_snapshot_get(c->who.team, tpl, &snap, &err) == 0;
    pinned = is_snap && snap.manifest[0] == '\0';
    n = gw_nodes_place(c->g->nodes, tpl, runtime, pinned ? snap.node : NULL,
                       is_snap ? snap.node : NULL, ids, MAX_TRIES);
    if (n == 0) {
        if (pinned)
            fail(c, WR_ELIMIT, "node %s, which holds snapshot %s, is not available", snap.node,
                 tpl);
        else
            fail(c, WR_ELIMIT, "no node can take a sandbox now");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        struct wr_node_addr a;
        json_auto_t *j = NULL;
        const char *id;
        if (!gw_nodes_addr(c->g->nodes, ids[i], &a, NULL))
            continue;
        if (is_snap && strcmp(ids[i], snap.node) != 0 && !import_snapshot(c, &a, &snap))
            continue;
        c->failed = false;
        gw_nodes_inflight(c->g->nodes, ids[i], 1);
        (void)call_node(c, &a, "POST", c->target, c->body, c->len);
        gw_nodes_inflight(c->g->nodes, ids[i], -1);
        if (c->failed || capacity_refusal(c->ans.status)) {
            log_info("create: node %s refused (%s), trying the next", ids[i],
                     c->failed ? c->err.msg : "capacity");
            continue;
        }
        if (!ok_status(c->ans.status))
            return;
        j = json_loads(c->ans.body, 0, NULL);
        id = json_string_value(json_object_get(j, c->e2b ? "sandboxID" : "id"));
        gw_nodes_placed(
            c->g->nodes, ids[i],
            (uint64_t)json_integer_value(json_object_get(j, c->e2b ? "memoryMB" : "memory_mb"))
                << 20);
        if (id != NULL && gw_db_sandbox_put(id, c->who.team, ids[i], "running", NULL, &err) < 0)
            log_warn("create %s on %s: %s (the next round records it)", id, ids[i], err.msg);
        return;
    }
}

/* The answer for a sandbox the gateway knows is lost. */
static json_t *lost_json(const struct gw_sandbox *sb)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:s}", "id", sb->id, "team", sb->team, "node", sb->node,
                     "state", "lost", "reason", sb->reason);
}

/* Resume sb, whose node is gone, on another: imported there from its export, then resumed. */
static void resume_elsewhere(struct call *c, const struct gw_sandbox *sb)
{
    char ids[MAX_TRIES][64];
    size_t n;
    json_auto_t *body = json_pack("{s:s}", "manifest", sb->manifest);
    _cleanup_free_ char *text = json_dumps(body, JSON_COMPACT);
    struct wr_err err;

    if (sb->manifest[0] == '\0') {
        fail(c, WR_ECONFLICT, "sandbox %s is lost: %s; it was not exported, so it cannot move",
             sb->id, sb->reason[0] ? sb->reason : "its node does not answer");
        return;
    }
    n = gw_nodes_place(c->g->nodes, NULL, NULL, NULL, NULL, ids, MAX_TRIES);
    for (size_t i = 0; i < n; i++) {
        struct wr_node_addr a;
        if (strcmp(ids[i], sb->node) == 0 || !gw_nodes_addr(c->g->nodes, ids[i], &a, NULL))
            continue;
        c->failed = false;
        if (call_node(c, &a, "POST", "/node/sandboxes/import", text, strlen(text)) < 0 ||
            !ok_status(c->ans.status)) {
            log_warn("resume %s: import on %s failed: %s", sb->id, ids[i],
                     c->failed ? c->err.msg : c->ans.body);
            continue;
        }
        if (gw_db_sandbox_move(sb->id, sb->generation, ids[i], &err) < 0) {
            fail_err(c, &err);
            return;
        }
        log_info("sandbox %s moved from %s to %s", sb->id, sb->node, ids[i]);
        if (call_node(c, &a, "POST", c->target, c->body, c->len) == 0 && ok_status(c->ans.status))
            (void)gw_db_sandbox_state(sb->id, ids[i], "running", NULL, &err);
        return;
    }
    fail(c, WR_ELIMIT, "no node could take sandbox %s from its export", sb->id);
}

/* After a pause to disk, the sandbox's files go to the object store, so that another node can
 * resume it if this one is lost. */
static void export_after_pause(struct call *c, const struct gw_sandbox *sb)
{
    json_auto_t *j = NULL;
    const char *mode;
    struct gw_answer ans;
    _cleanup_free_ char *t = NULL;
    struct wr_err err;

    if (c->g->cfg->object_store == NULL)
        return;
    /* The native and the E2B answers differ: the sandbox's own JSON says how it paused. */
    t = xasprintf("/v1/sandboxes/%s", sb->id);
    if (gw_node_call(c->g->nodes, &c->node, "GET", t, sb->team, false, NULL, 0, NULL, false, &ans,
                     &err) < 0)
        return;
    j = json_loads(ans.body, 0, NULL);
    gw_answer_fini(&ans);
    mode = json_string_value(json_object_get(j, "paused_mode"));
    if (mode == NULL || strcmp(mode, "disk") != 0)
        return;
    free(t);
    t = xasprintf("/node/sandboxes/%s/export", sb->id);
    if (gw_node_call(c->g->nodes, &c->node, "POST", t, sb->team, false, "{}", 2, "application/json",
                     false, &ans, &err) < 0) {
        log_warn("export %s: %s", sb->id, err.msg);
        return;
    }
    if (ok_status(ans.status)) {
        json_auto_t *a = json_loads(ans.body, 0, NULL);
        const char *m = json_string_value(json_object_get(a, "manifest"));
        if (m != NULL && gw_db_sandbox_set_manifest(sb->id, m, &err) < 0)
            log_warn("export %s: %s", sb->id, err.msg);
    } else {
        log_warn("export %s: node %s answered %ld: %.200s", sb->id, sb->node, ans.status, ans.body);
    }
    gw_answer_fini(&ans);
}

/* A snapshot goes to the object store as it is taken, so that a create from it can be placed
 * on any node, its own included when it is gone. */
static void export_snapshot(struct call *c, const struct gw_sandbox *sb, const char *id)
{
    json_auto_t *body = json_pack("{s:s}", "image", id);
    _cleanup_free_ char *text = json_dumps(body, JSON_COMPACT);
    struct gw_answer ans;
    struct wr_err err;

    if (c->g->cfg->object_store == NULL)
        return;
    if (gw_node_call(c->g->nodes, &c->node, "POST", "/node/images/export", sb->team, false, text,
                     strlen(text), "application/json", false, &ans, &err) < 0) {
        log_warn("export snapshot %s: %s", id, err.msg);
        return;
    }
    if (ok_status(ans.status)) {
        json_auto_t *a = json_loads(ans.body, 0, NULL);
        const char *m = json_string_value(json_object_get(a, "manifest"));
        if (m != NULL && gw_db_snapshot_set_manifest(id, m, &err) < 0)
            log_warn("export snapshot %s: %s", id, err.msg);
    } else {
        log_warn("export snapshot %s: node %s answered %ld: %.200s", id, sb->node, ans.status,
                 ans.body);
    }
    gw_answer_fini(&ans);
}

/* New sandboxes or a snapshot a forward's answer names, recorded at once (the next round would
 * find them too). */
static void record_made(struct call *c, const struct gw_sandbox *sb)
{
    json_auto_t *j = json_loads(c->ans.body, 0, NULL);
    struct wr_err err;
    json_t *v;
    size_t i;

    if (c->op == OP_SNAPSHOT) {
        const char *id = json_string_value(json_object_get(j, "id"));
        if (id == NULL)
            id = json_string_value(json_object_get(j, "snapshotID"));
        if (id == NULL)
            return;
        if (gw_db_snapshot_put(id, json_string_value(json_object_get(j, "name")), sb->team,
                               sb->node, &err) < 0)
            log_warn("snapshot %s: %s", id, err.msg);
        else
            export_snapshot(c, sb, id);
        return;
    }
    json_array_foreach(json_object_get(j, "sandboxes"), i, v)
    {
        const char *id = json_string_value(json_object_get(v, "id"));
        if (id != NULL && gw_db_sandbox_put(id, sb->team, sb->node, "running", NULL, &err) < 0)
            log_warn("fork %s: %s", id, err.msg);
    }
}

static void do_forward(struct call *c)
{
    struct gw_sandbox sb;
    bool healthy = false;
    struct wr_err err;

    if (locate(c, &sb, &healthy) < 0)
        return;
    if (c->op == OP_DELETE && (strcmp(sb.state, "lost") == 0 || !healthy)) {
        if (gw_db_sandbox_tombstone(sb.id, &err) < 0) {
            fail_err(c, &err);
            return;
        }
        c->status = 204;
        return;
    }
    if (c->op == OP_GET && strcmp(sb.state, "lost") == 0) {
        c->status = 200;
        c->json = lost_json(&sb);
        return;
    }
    if (c->op == OP_RESUME && !healthy) {
        resume_elsewhere(c, &sb);
        return;
    }
    if (!healthy) {
        fail(c, WR_ECONFLICT, "sandbox %s is lost: %s", sb.id,
             sb.reason[0] ? sb.reason : "its node does not answer");
        return;
    }
    if (call_node(c, &c->node, c->method, c->target, c->body, c->len) < 0)
        return;
    if (c->op == OP_DELETE && (ok_status(c->ans.status) || c->ans.status == 404))
        (void)gw_db_sandbox_delete(sb.id, &err);
    else if (c->op == OP_PAUSE && ok_status(c->ans.status)) {
        (void)gw_db_sandbox_state(sb.id, sb.node, "paused", NULL, &err);
        export_after_pause(c, &sb);
    } else if (c->op == OP_RESUME && ok_status(c->ans.status))
        (void)gw_db_sandbox_state(sb.id, sb.node, "running", NULL, &err);
    else if ((c->op == OP_FORK || c->op == OP_SNAPSHOT) && ok_status(c->ans.status))
        record_made(c, &sb);
}

/* The member a list answer holds its items in (NULL: the answer is the array). */
static const char *list_member(enum op op)
{
    switch (op) {
    case OP_LIST_SB:
        return "sandboxes";
    case OP_LIST_TPL:
        return "templates";
    case OP_LIST_SNAP:
        return "snapshots";
    default:
        return NULL;
    }
}

/* A snapshot's GET or DELETE: its node and every node that imported it hold a copy. A GET
 * answers the first node's 200; a DELETE deletes every copy and answers the first success. */
static void do_snap(struct call *c)
{
    char ids[GW_NODES_MAX][64];
    size_t n = gw_nodes_healthy(c->g->nodes, ids, GW_NODES_MAX);
    bool get = strcmp(c->method, "GET") == 0, done = false;
    struct gw_answer keep = {0};
    struct wr_err err;

    for (size_t i = 0; i < n && !(get && done); i++) {
        struct wr_node_addr a;
        if (!gw_nodes_addr(c->g->nodes, ids[i], &a, NULL) ||
            call_node(c, &a, c->method, c->target, NULL, 0) < 0) {
            c->failed = false;
            continue;
        }
        if (ok_status(c->ans.status) && !done) {
            done = true;
            gw_answer_fini(&keep);
            keep = c->ans;
            memset(&c->ans, 0, sizeof(c->ans));
        } else if (!done && keep.body == NULL) {
            keep = c->ans;
            memset(&c->ans, 0, sizeof(c->ans));
        }
    }
    gw_answer_fini(&c->ans);
    c->ans = keep;
    c->have_ans = keep.body != NULL;
    if (!c->have_ans)
        fail(c, WR_ENOTFOUND, "no such snapshot: %s", c->sid);
    else if (!get && done && gw_db_snapshot_delete(team_of(c), c->sid, &err) < 0)
        log_warn("delete snapshot %s: %s", c->sid, err.msg);
}

static void do_list(struct call *c)
{
    char ids[GW_NODES_MAX][64];
    size_t n = gw_nodes_healthy(c->g->nodes, ids, GW_NODES_MAX);
    const char *member = list_member(c->op);
    const char *dedupe = c->op == OP_LIST_TPL        ? "name"
                         : c->op == OP_LIST_SNAP     ? "id"
                         : c->op == OP_LIST_E2B_SNAP ? "snapshotID"
                                                     : NULL;
    json_t *all = json_array(), *seen = json_object();
    struct wr_err err;

    for (size_t i = 0; i < n; i++) {
        struct wr_node_addr a;
        json_auto_t *j = NULL;
        json_t *items, *v;
        size_t k;
        if (!gw_nodes_addr(c->g->nodes, ids[i], &a, NULL) ||
            call_node(c, &a, "GET", c->target, NULL, 0) < 0) {
            c->failed = false;
            continue;
        }
        if (!ok_status(c->ans.status)) { /* a bad query: every node says the same */
            json_decref(all);
            json_decref(seen);
            return;
        }
        j = json_loads(c->ans.body, 0, NULL);
        items = member ? json_object_get(j, member) : j;
        json_array_foreach(items, k, v)
        {
            const char *key = dedupe ? json_string_value(json_object_get(v, dedupe)) : NULL;
            if (key != NULL && json_object_get(seen, key) != NULL)
                continue;
            if (key != NULL)
                json_object_set_new(seen, key, json_true());
            json_array_append(all, v);
        }
    }
    json_decref(seen);
    gw_answer_fini(&c->ans);
    c->have_ans = false;
    if (c->op == OP_LIST_SB && strstr(c->target, "state=") == NULL) {
        json_auto_t *lost = NULL;
        if (gw_db_sandbox_lost(team_of(c), &lost, &err) == 0)
            json_array_extend(all, lost);
    }
    c->status = 200;
    c->json = member ? json_pack("{s:o,s:n}", member, all, "next_cursor") : all;
    if (c->op != OP_LIST_SB)
        json_object_del(c->json, "next_cursor");
}

static const char *seg_after(const char *path, const char *prefix)
{
    size_t n = strlen(prefix);

    return strncmp(path, prefix, n) == 0 ? path + n : NULL;
}

static void do_local(struct call *c)
{
    struct wr_err err;

    switch (c->op) {
    case OP_VERSION:
        c->status = 200;
        c->json = json_pack("{s:s,s:s,s:s,s:s?,s:s,s:b}", "version", c->g->cfg->version, "api", "1",
                            "role", "gateway", "domain", c->g->cfg->domain, "team", c->who.team,
                            "admin", c->who.admin);
        return;
    case OP_NODES:
        if (!c->who.admin) {
            fail(c, WR_EFORBIDDEN, "only an admin key can list nodes");
            return;
        }
        {
            json_t *arr;
            if (gw_db_node_list(&arr, &err) < 0) {
                fail_err(c, &err);
                return;
            }
            c->status = 200;
            c->json = json_pack("{s:o}", "nodes", arr);
        }
        return;
    case OP_KEYS:
        break;
    default:
        fail(c, WR_EINTERNAL, "bad local route");
        return;
    }
    if (strcmp(c->method, "GET") == 0) {
        json_t *arr;
        if (gw_db_key_list(team_of(c), &arr, &err) < 0) {
            fail_err(c, &err);
            return;
        }
        c->status = 200;
        c->json = json_pack("{s:o}", "keys", arr);
    } else if (strcmp(c->method, "DELETE") == 0) {
        const char *id = seg_after(c->target, "/v1/keys/");
        if (gw_db_key_delete(team_of(c), id, &err) < 0) {
            fail_err(c, &err);
            return;
        }
        forget_keys(c->g);
        c->status = 204;
    } else {
        json_auto_t *j = json_loads(c->body ? c->body : "", 0, NULL);
        const char *team = json_string_value(json_object_get(j, "team"));
        const char *name = json_string_value(json_object_get(j, "name"));
        json_t *admin = json_object_get(j, "admin");
        char *secret = NULL;
        size_t tl = team ? strlen(team) : 0;
        if (!c->who.admin) {
            fail(c, WR_EFORBIDDEN, "only an admin key can make keys");
            return;
        }
        if (!json_is_object(j) || tl == 0 || tl > 64 ||
            strspn(team, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
                tl) {
            fail(c, WR_EINVAL, "`team` must be 1-64 of [A-Za-z0-9._-]");
            return;
        }
        if ((name != NULL && strlen(name) > 128) || (admin != NULL && !json_is_boolean(admin))) {
            fail(c, WR_EINVAL, "`name` is at most 128 bytes and `admin` a boolean");
            return;
        }
        if (gw_db_key_create(team, name, json_is_true(admin), &secret, &c->json, &err) < 0) {
            fail_err(c, &err);
            return;
        }
        json_object_set_new(c->json, "key", json_string(secret));
        OPENSSL_cleanse(secret, strlen(secret));
        free(secret);
        c->status = 201;
    }
}

static void audit(struct call *c)
{
    int status = c->failed     ? wr_err_kind_status(c->err.kind)
                 : c->have_ans ? (int)c->ans.status
                               : c->status;
    struct wr_err err;

    if (strcmp(c->method, "GET") == 0 || strcmp(c->method, "HEAD") == 0 || c->kind == K_HOST)
        return;
    if (gw_db_audit(c->who.team[0] ? c->who.team : NULL, c->who.id[0] ? c->who.id : NULL, c->method,
                    c->target, status, c->sid, &err) < 0)
        log_warn("audit: %s", err.msg);
}

static void call_work(uv_work_t *w)
{
    struct call *c = w->data;
    struct gw_sandbox sb;
    bool healthy = false;

    if (c->kind != K_HOST && authenticate(c) < 0)
        return;
    switch (c->kind) {
    case K_HOST:
    case K_TUNNEL:
        if (locate(c, &sb, &healthy) < 0)
            return;
        if (!healthy)
            fail(c, WR_ECONFLICT, "sandbox %s is lost: %s", sb.id,
                 sb.reason[0] ? sb.reason : "its node does not answer");
        return; /* not audited here: the node audits it */
    case K_CREATE:
        do_create(c);
        break;
    case K_FORWARD:
        do_forward(c);
        break;
    case K_LIST:
        do_list(c);
        break;
    case K_LOCAL:
        do_local(c);
        break;
    case K_SNAP:
        do_snap(c);
        break;
    }
    audit(c);
}

/* ---- tunnels --------------------------------------------------------------------------------- */

struct tside {
    uv_tcp_t tcp;
    struct tunnel *t;
    struct tside *peer;
    size_t queued;
    bool eof, reading;
};

struct tunnel {
    struct tside down, up; /* the client's, the node's */
    uv_connect_t conn;
    struct call *c;
    int open; /* handles not yet closed */
    bool closing;
};

struct tw {
    uv_write_t w;
    struct tside *to;
    size_t n;
    char data[];
};

static void tunnel_closed(uv_handle_t *h)
{
    struct tside *s = h->data;
    struct tunnel *t = s->t;

    if (--t->open == 0) {
        if (t->c != NULL)
            call_free(t->c);
        free(t);
    }
}

static void tunnel_close(struct tunnel *t)
{
    if (t->closing)
        return;
    t->closing = true;
    uv_close((uv_handle_t *)&t->down.tcp, tunnel_closed);
    uv_close((uv_handle_t *)&t->up.tcp, tunnel_closed);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    buf->base = xmalloc(suggested);
    buf->len = suggested;
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);

static void on_written(uv_write_t *w, int status)
{
    struct tw *b = (struct tw *)w;
    struct tside *to = b->to;
    struct tside *from = to->peer;

    to->queued -= b->n;
    free(b);
    if (to->t->closing)
        return;
    if (status < 0) {
        tunnel_close(to->t);
        return;
    }
    if (!from->reading && !from->eof && to->queued < RELAY_HIGH / 4) {
        from->reading = true;
        uv_read_start((uv_stream_t *)&from->tcp, on_alloc, on_read);
    }
}

static int side_send(struct tside *to, const char *p, size_t n)
{
    struct tw *b = xmalloc(sizeof(*b) + n);
    uv_buf_t buf;

    b->to = to;
    b->n = n;
    memcpy(b->data, p, n);
    buf = uv_buf_init(b->data, (unsigned)n);
    if (uv_write(&b->w, (uv_stream_t *)&to->tcp, &buf, 1, on_written) < 0) {
        free(b);
        return -1;
    }
    to->queued += n;
    return 0;
}

static void on_shutdown(uv_shutdown_t *r, int status)
{
    (void)status;
    free(r);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    struct tside *from = st->data, *to = from->peer;
    struct tunnel *t = from->t;

    if (n > 0) {
        if (side_send(to, buf->base, (size_t)n) < 0)
            tunnel_close(t);
        else if (to->queued > RELAY_HIGH) {
            from->reading = false;
            uv_read_stop(st);
        }
    } else if (n < 0) {
        from->eof = true;
        from->reading = false;
        uv_read_stop(st);
        if (n != UV_EOF || to->eof) {
            tunnel_close(t);
        } else {
            uv_shutdown_t *r = xmalloc(sizeof(*r));
            if (uv_shutdown(r, (uv_stream_t *)&to->tcp, on_shutdown) < 0) {
                free(r);
                tunnel_close(t);
            }
        }
    }
    free(buf->base);
}

static bool skip_header(const struct call *c, const char *name)
{
    static const char *const hop[] = {"Connection",  "Keep-Alive",   "Proxy-Connection",
                                      "Warren-Team", "Warren-Admin", NULL};

    for (const char *const *h = hop; *h; h++)
        if (strcasecmp(name, *h) == 0)
            return true;
    if (c->kind == K_TUNNEL)
        return strcasecmp(name, c->key_in_x ? "X-API-Key" : "Authorization") == 0;
    return false;
}

/* The request head as the node gets it. */
static char *rewrite_head(struct call *c, struct wr_http_req *req, const char *token)
{
    struct wr_buf b;

    wr_buf_init(&b);
    bool upgrade = wr_http_req_is_upgrade(req);
    size_t n = wr_http_req_header_count(req);

    wr_buf_printf(&b, "%s %s HTTP/1.1\r\n", c->method, wr_http_req_target(req));
    for (size_t i = 0; i < n; i++) {
        const char *name, *value;
        wr_http_req_header_at(req, i, &name, &value);
        if (skip_header(c, name) && !(upgrade && strcasecmp(name, "Connection") == 0))
            continue;
        wr_buf_printf(&b, "%s: %s\r\n", name, value);
    }
    if (c->kind == K_TUNNEL) {
        if (c->key_in_x)
            wr_buf_printf(&b, "X-API-Key: %s\r\n", token);
        else
            wr_buf_printf(&b, "Authorization: Bearer %s\r\n", token);
        wr_buf_printf(&b, "Warren-Team: %s\r\n", c->who.team);
        if (c->who.admin)
            wr_buf_puts(&b, "Warren-Admin: 1\r\n");
    }
    wr_buf_printf(&b, "X-Forwarded-For: %s\r\n", wr_http_req_peer(req));
    if (!upgrade)
        wr_buf_puts(&b, "Connection: close\r\n");
    wr_buf_puts(&b, "\r\n");
    return wr_buf_steal_str(&b);
}

static void respond_call(struct call *c);

static void on_connect(uv_connect_t *r, int status)
{
    struct tunnel *t = r->data;
    struct call *c = t->c;
    struct wr_buf rest;
    struct wr_err err;
    bool is_unix = false;
    int fd = -1;
    _cleanup_free_ char *head = NULL;

    wr_buf_init(&rest);
    if (c->req == NULL || status < 0) {
        if (c->req != NULL && status < 0)
            fail(c, WR_EUPSTREAM, "node %s did not answer: %s", c->node.id, uv_strerror(status));
        t->c = NULL;
        if (c->req != NULL)
            respond_call(c); /* frees c */
        else
            call_free(c);
        uv_close((uv_handle_t *)&t->up.tcp, tunnel_closed);
        t->open = 1;
        return;
    }
    head = rewrite_head(c, c->req, c->g->cfg->node_token);
    if (wr_http_req_hijack(c->req, &fd, &is_unix, &rest, &err) < 0) {
        /* The request is still the server's: answered, and c with it. */
        t->c = NULL;
        fail_err(c, &err);
        respond_call(c);
        uv_close((uv_handle_t *)&t->up.tcp, tunnel_closed);
        t->open = 1;
        return;
    }
    if (uv_tcp_init(c->g->loop, &t->down.tcp) < 0) {
        close(fd);
        wr_buf_fini(&rest);
        c->req = NULL;
        uv_close((uv_handle_t *)&t->up.tcp, tunnel_closed);
        t->open = 1;
        return;
    }
    c->req = NULL;
    t->open = 2;
    t->down.tcp.data = &t->down;
    if (uv_tcp_open(&t->down.tcp, fd) < 0) {
        close(fd);
        wr_buf_fini(&rest);
        tunnel_close(t);
        return;
    }
    (void)uv_tcp_nodelay(&t->down.tcp, 1);
    (void)uv_tcp_nodelay(&t->up.tcp, 1);
    if (side_send(&t->up, head, strlen(head)) < 0 ||
        (rest.len > 0 && side_send(&t->up, (const char *)rest.data, rest.len) < 0)) {
        wr_buf_fini(&rest);
        tunnel_close(t);
        return;
    }
    wr_buf_fini(&rest);
    t->down.reading = t->up.reading = true;
    uv_read_start((uv_stream_t *)&t->down.tcp, on_alloc, on_read);
    uv_read_start((uv_stream_t *)&t->up.tcp, on_alloc, on_read);
}

static void tunnel_start(struct call *c)
{
    struct tunnel *t = xcalloc(1, sizeof(*t));
    struct sockaddr_storage sa;

    t->c = c;
    t->down.t = t->up.t = t;
    t->down.peer = &t->up;
    t->up.peer = &t->down;
    t->up.tcp.data = &t->up;
    t->conn.data = t;
    if (uv_ip4_addr(c->node.host, c->node.port, (struct sockaddr_in *)&sa) < 0 &&
        uv_ip6_addr(c->node.host, c->node.port, (struct sockaddr_in6 *)&sa) < 0) {
        free(t);
        fail(c, WR_EUPSTREAM, "node %s: `%s` is not an IP address", c->node.id, c->node.host);
        respond_call(c);
        return;
    }
    uv_tcp_init(c->g->loop, &t->up.tcp);
    t->open = 1;
    if (uv_tcp_connect(&t->conn, &t->up.tcp, (struct sockaddr *)&sa, on_connect) < 0) {
        t->c = NULL;
        uv_close((uv_handle_t *)&t->up.tcp, tunnel_closed);
        fail(c, WR_EUPSTREAM, "node %s: cannot connect", c->node.id);
        respond_call(c);
    }
}

/* ---- the loop's part ------------------------------------------------------------------------- */

static void req_gone(struct wr_http_req *req, void *data, bool aborted)
{
    struct call *c = data;

    (void)req;
    (void)aborted;
    if (c != NULL)
        c->req = NULL;
}

/* Answer c and free it. */
static void respond_call(struct call *c)
{
    struct wr_http_req *req = c->req;

    c->req = NULL;
    if (req != NULL) {
        wr_http_req_set_data(req, NULL, NULL);
        if (c->e2b)
            wr_http_req_numeric_errors(req);
        if (c->failed)
            wr_http_respond_error(req, wr_err_kind_status(c->err.kind),
                                  wr_err_kind_name(c->err.kind), "%s", c->err.msg);
        else if (c->have_ans)
            wr_http_respond(req, (int)c->ans.status, c->ans.content_type, c->ans.body, c->ans.len);
        else if (c->json != NULL) {
            wr_http_respond_json(req, c->status, c->json);
            c->json = NULL;
        } else
            wr_http_respond(req, c->status, NULL, NULL, 0);
    }
    call_free(c);
}

static void call_done(uv_work_t *w, int status)
{
    struct call *c = w->data;

    (void)status;
    if (c->req == NULL) {
        call_free(c);
        return;
    }
    if ((c->kind == K_HOST || c->kind == K_TUNNEL) && !c->failed) {
        wr_http_req_set_data(c->req, c, req_gone);
        tunnel_start(c);
        return;
    }
    respond_call(c);
}

static void queue_call(struct call *c)
{
    wr_http_req_set_data(c->req, c, req_gone);
    c->w.data = c;
    if (uv_queue_work(c->g->loop, &c->w, call_work, call_done) < 0) {
        fail(c, WR_ESYS, "cannot queue the request");
        respond_call(c);
    }
}

static void got_body(struct wr_http_req *req, const char *body, size_t len)
{
    struct call *c = wr_http_req_data(req);

    c->body = xmalloc(len + 1);
    memcpy(c->body, body, len);
    c->body[len] = '\0';
    c->len = len;
    queue_call(c);
}

/* The sandbox a Host names: "<port>-<id>.<domain>". */
static char *host_sandbox(const struct gw *g, const char *host)
{
    size_t dl, hl;
    const char *dash, *dot;

    if (g->cfg->domain == NULL || host == NULL)
        return NULL;
    dl = strlen(g->cfg->domain);
    hl = strcspn(host, ":");
    if (hl <= dl + 1 || host[hl - dl - 1] != '.' ||
        strncasecmp(host + hl - dl, g->cfg->domain, dl) != 0)
        return NULL;
    dash = strchr(host, '-');
    dot = host + hl - dl - 1;
    if (dash == NULL || dash > dot || dash == host || dot - dash - 1 <= 0 ||
        memchr(dash + 1, '.', (size_t)(dot - dash - 1)) != NULL)
        return NULL;
    return xstrndup(dash + 1, (size_t)(dot - dash - 1));
}

/* The sandbox id of "/v1/sandboxes/<id>[/rest]" (prefix given), its rest in *rest. */
static char *path_sandbox(const char *path, const char *prefix, const char **rest)
{
    const char *p = seg_after(path, prefix), *slash;

    if (p == NULL || *p == '\0')
        return NULL;
    slash = strchr(p, '/');
    *rest = slash ? slash : "";
    return xstrndup(p, slash ? (size_t)(slash - p) : strlen(p));
}

/* What the gateway does with a request: c->kind and c->op, or false (answered 404/501). */
static bool classify(struct call *c, const char *path)
{
    const char *m = c->method, *rest = NULL;
    bool get = strcmp(m, "GET") == 0, post = strcmp(m, "POST") == 0, del = strcmp(m, "DELETE") == 0;

    if (strcmp(path, "/v1/version") == 0 && get)
        c->kind = K_LOCAL, c->op = OP_VERSION;
    else if (strcmp(path, "/v1/nodes") == 0 && get)
        c->kind = K_LOCAL, c->op = OP_NODES;
    else if ((strcmp(path, "/v1/keys") == 0 && (get || post)) ||
             (strncmp(path, "/v1/keys/", 9) == 0 && del))
        c->kind = K_LOCAL, c->op = OP_KEYS;
    else if (strcmp(path, "/v1/sandboxes") == 0 && (get || post))
        c->kind = post ? K_CREATE : K_LIST, c->op = post ? OP_NONE : OP_LIST_SB;
    else if (strcmp(path, "/v1/templates") == 0 && get)
        c->kind = K_LIST, c->op = OP_LIST_TPL;
    else if (strcmp(path, "/v1/snapshots") == 0 && get)
        c->kind = K_LIST, c->op = OP_LIST_SNAP;
    else if ((get || del) && (c->sid = path_sandbox(path, "/v1/snapshots/", &rest)) != NULL &&
             rest[0] == '\0')
        c->kind = K_SNAP;
    else if (strcmp(path, "/snapshots") == 0 && get)
        c->e2b = true, c->kind = K_LIST, c->op = OP_LIST_E2B_SNAP;
    else if (del && (c->sid = path_sandbox(path, "/templates/", &rest)) != NULL && rest[0] == '\0')
        c->e2b = true, c->kind = K_SNAP;
    else if ((c->sid = path_sandbox(path, "/v1/sandboxes/", &rest)) != NULL) {
        c->kind = K_FORWARD;
        if (rest[0] == '\0' && (get || del))
            c->op = get ? OP_GET : OP_DELETE;
        else if (post && strcmp(rest, "/pause") == 0)
            c->op = OP_PAUSE;
        else if (post && strcmp(rest, "/resume") == 0)
            c->op = OP_RESUME;
        else if (post && strcmp(rest, "/fork") == 0)
            c->op = OP_FORK;
        else if (post && strcmp(rest, "/snapshots") == 0)
            c->op = OP_SNAPSHOT;
        else
            c->kind = K_TUNNEL;
    } else if ((strcmp(path, "/sandboxes") == 0 || strcmp(path, "/v2/sandboxes") == 0) &&
               (get || post)) {
        c->e2b = true;
        c->kind = post ? K_CREATE : K_LIST;
        c->op = post ? OP_NONE : OP_LIST_E2B;
    } else if ((c->sid = path_sandbox(path, "/sandboxes/", &rest)) != NULL ||
               (c->sid = path_sandbox(path, "/v2/sandboxes/", &rest)) != NULL) {
        c->e2b = true;
        c->kind = K_FORWARD;
        if (rest[0] == '\0' && del)
            c->op = OP_DELETE;
        else if (post && strcmp(rest, "/pause") == 0)
            c->op = OP_PAUSE;
        else if (post && (strcmp(rest, "/resume") == 0 || strcmp(rest, "/connect") == 0))
            c->op = OP_RESUME;
        else if (post && strcmp(rest, "/snapshots") == 0)
            c->op = OP_SNAPSHOT;
        else
            c->kind = K_TUNNEL;
    } else {
        return false;
    }
    return true;
}

static void handle(struct wr_http_req *req, void *ctx)
{
    struct gw *g = ctx;
    const char *path = wr_http_req_path(req);
    const char *auth = wr_http_req_header(req, "Authorization");
    const char *hid = wr_http_req_header(req, "E2b-Sandbox-Id");
    struct call *c;
    char *sid;

    if (strcmp(path, "/healthz") == 0 || strcmp(path, "/v1/health") == 0) {
        wr_http_respond_json(req, 200, json_pack("{s:s}", "status", "ok"));
        return;
    }
    c = xcalloc(1, sizeof(*c));
    c->g = g;
    c->req = req;
    c->method = xstrdup(wr_http_req_method(req));
    c->target = xstrdup(wr_http_req_target(req));
    if (wr_http_req_header(req, "Content-Type") != NULL)
        c->ctype = xstrdup(wr_http_req_header(req, "Content-Type"));
    sid = host_sandbox(g, wr_http_req_header(req, "Host"));
    if (sid != NULL || (hid != NULL && hid[0] != '\0')) {
        c->kind = K_HOST;
        c->sid = sid ? sid : xstrdup(hid);
        queue_call(c);
        return;
    }
    if (auth != NULL && strncasecmp(auth, "Bearer ", 7) == 0)
        c->key = xstrdup(auth + 7 + strspn(auth + 7, " "));
    else if (wr_http_req_header(req, "X-API-Key") != NULL) {
        c->key = xstrdup(wr_http_req_header(req, "X-API-Key"));
        c->key_in_x = true;
    }
    if (!classify(c, path)) {
        bool e2b = strncmp(path, "/v1/", 4) != 0;
        if (e2b)
            wr_http_req_numeric_errors(req);
        wr_http_respond_error(req, 501, "unsupported",
                              "%s %s is not served through a gateway: call it on a node, or see "
                              "docs/deploy.md",
                              c->method, path);
        call_free(c);
        return;
    }
    if (c->kind == K_CREATE || c->kind == K_FORWARD || (c->kind == K_LOCAL && c->op == OP_KEYS)) {
        wr_http_req_set_data(req, c, req_gone);
        wr_http_req_read_body(req, BODY_MAX, got_body);
        return;
    }
    queue_call(c);
}

/* ---- health rounds and the process ----------------------------------------------------------- */

static void health_work(uv_work_t *w)
{
    struct gw *g = w->data;

    gw_nodes_round(g->nodes);
}

static void health_done(uv_work_t *w, int status)
{
    struct gw *g = w->data;

    (void)status;
    g->health_busy = false;
}

static void on_health(uv_timer_t *t)
{
    struct gw *g = t->data;

    if (g->health_busy || g->stopping)
        return;
    g->health_busy = true;
    g->health_w.data = g;
    if (uv_queue_work(g->loop, &g->health_w, health_work, health_done) < 0)
        g->health_busy = false;
}

static void on_signal(uv_signal_t *s, int signum)
{
    struct gw *g = s->data;

    log_info("signal %d: stopping", signum);
    g->stopping = true;
    uv_signal_stop(&g->sigterm);
    uv_signal_stop(&g->sigint);
    uv_timer_stop(&g->health);
    uv_close((uv_handle_t *)&g->health, NULL);
    uv_close((uv_handle_t *)&g->sigterm, NULL);
    uv_close((uv_handle_t *)&g->sigint, NULL);
    wr_http_server_stop(g->srv, NULL, NULL);
}

/* The first admin key: the file's, or a new one written to it. */
static int bootstrap_admin(const char *path, struct wr_err *err)
{
    char buf[256];
    FILE *f = fopen(path, "r");
    json_auto_t *info = NULL;
    char *secret = NULL;
    int fd;

    if (f != NULL) {
        bool got = fgets(buf, sizeof(buf), f) != NULL;
        fclose(f);
        buf[strcspn(buf, "\r\n")] = '\0';
        if (!got || buf[0] == '\0')
            return wr_err_set(err, WR_EINVAL, 0, "%s holds no key", path);
        return gw_db_key_ensure_admin(buf, err);
    }
    if (gw_db_key_create("admin", "first admin key", true, &secret, &info, err) < 0)
        return -1;
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || dprintf(fd, "%s\n", secret) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        free(secret);
        return wr_err_set(err, WR_ESYS, e, "write %s", path);
    }
    close(fd);
    free(secret);
    log_info("the first admin API key is in %s (mode 0600)", path);
    return 0;
}

int wr_gateway_main(const struct wr_gateway_config *cfg)
{
    struct gw *g = xcalloc(1, sizeof(*g));
    struct wr_err err;
    struct gw_nodes_config ncfg = {0};
    struct wr_http_config hcfg = {0};
    int rc = 1;

    signal(SIGPIPE, SIG_IGN);
    setenv("UV_THREADPOOL_SIZE", "16", 0);
    g->cfg = cfg;
    g->loop = uv_default_loop();
    uv_mutex_init(&g->keys_mu);
    if (wr_discovery_new(cfg->discovery, &g->disc, &err) < 0) {
        fprintf(stderr, "warrend: --discovery: %s\n", err.msg);
        rc = 2;
        goto out;
    }
    if (gw_db_open(cfg->database, &err) < 0 || bootstrap_admin(cfg->admin_key_file, &err) < 0) {
        fprintf(stderr, "warrend: %s\n", err.msg);
        goto out;
    }
    ncfg.discovery = g->disc;
    ncfg.node_token = cfg->node_token;
    ncfg.dead_after_ms = cfg->node_dead_after_ms ? cfg->node_dead_after_ms : 10000;
    g->nodes = gw_nodes_new(&ncfg);
    gw_nodes_round(g->nodes); /* know the nodes before the first request */
    hcfg.loop = g->loop;
    hcfg.tcp_host = cfg->listen_host ? cfg->listen_host : "0.0.0.0";
    hcfg.tcp_port = cfg->listen_port;
    hcfg.region = cfg->region;
    hcfg.handler = handle;
    hcfg.ctx = g;
    if (wr_http_server_start(&hcfg, &g->srv, &err) < 0) {
        fprintf(stderr, "warrend: %s\n", err.msg);
        goto out;
    }
    uv_timer_init(g->loop, &g->health);
    g->health.data = g;
    uv_timer_start(&g->health, on_health, 0,
                   cfg->health_interval_ms ? cfg->health_interval_ms : 2000);
    uv_signal_init(g->loop, &g->sigterm);
    uv_signal_init(g->loop, &g->sigint);
    g->sigterm.data = g->sigint.data = g;
    uv_signal_start(&g->sigterm, on_signal, SIGTERM);
    uv_signal_start(&g->sigint, on_signal, SIGINT);
    printf("warrend ready version=%s role=gateway unix= tcp=%s:%d\n", cfg->version, hcfg.tcp_host,
           wr_http_server_tcp_port(g->srv));
    fflush(stdout);
    uv_run(g->loop, UV_RUN_DEFAULT);
    rc = 0;
out:
    gw_nodes_free(g->nodes);
    wr_discovery_free(g->disc);
    uv_mutex_destroy(&g->keys_mu);
    free(g);
    return rc;
}
