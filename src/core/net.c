/* SPDX-License-Identifier: Apache-2.0 */
/* Sandbox networking in the manager: the pool of slots (a host-owned network namespace with a
 * routed veth pair and an address each, runtime/netslot.h), which sandbox holds which, and each
 * one's egress policy as the kernel enforces it (one nftables table, runtime/nft.h) and as the
 * DNS stub and egress proxy read it (net/).
 *
 * A slot is, in turn: absent (never made, or gone), being made (by a worker, ahead of demand),
 * ready, used (a sandbox holds it: running, paused, or paused to disk), resting (its sandbox is
 * gone; its conntrack entries are flushed, then it waits QUARANTINE_MS so that late packets of
 * the old tenant die), and ready again. Slots are never deleted on the request path: a create
 * that finds none ready makes one in its own worker.
 *
 * A record says its sandbox's network (net_json, the answer's `network` object) and slot, so a
 * restarted daemon gives every sandbox its slot, address and policy back, and builds the whole
 * table from them in one transaction: nobody's network opens or closes across a restart.
 *
 * Everything here runs on the loop thread but the work items' run functions. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../net/dns.h"
#include "../net/policy.h"
#include "../net/proxy.h"
#include "../runtime/conntrack.h"
#include "../runtime/netslot.h"
#include "../runtime/nft.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "core_int.h"
#include "netlog.h"

#define QUARANTINE_MS     3000
#define FILL_BATCH        4
#define DEFAULT_READY     16
#define DEFAULT_MAX_CONNS 2500
#define NET_CHILDREN      8 /* the most ready slots cloned into at once */

enum slot_state { SLOT_ABSENT, SLOT_MAKING, SLOT_READY, SLOT_USED, SLOT_RESTING };

struct slot {
    uint8_t state;
    bool made;    /* its namespace exists (a used slot may still be made by its create's worker) */
    bool child;   /* ready, with a sandbox child pre-cloned into it (wr_runtime_prewarm_net) */
    bool cloning; /* ready, a child being cloned into it */
    struct wr_live_sb *sb;
};

struct resting {
    uint32_t slot;
    int64_t until_ms;
};

struct wr_net {
    struct wr_manager *m;
    struct wr_net_config cfg;
    struct wr_netslots *slots;
    struct wr_nft *nft;
    uint32_t cap;      /* slots the pool holds */
    struct slot *slot; /* cap of them */
    uint32_t *ready;   /* a stack of ready slots */
    size_t n_ready;
    uint32_t fresh;       /* no slot below it is absent but those given up on */
    unsigned filling;     /* slots being made */
    bool fill_failed;     /* the last fill failed: wait for a release or a take before the next */
    unsigned children;    /* ready slots with a child pre-cloned, or being cloned, into them */
    bool clone_failed;    /* the last pre-clone failed: wait for the next take */
    struct resting *rest; /* a ring, oldest first */
    size_t rest_head, rest_n, rest_cap;
    uv_timer_t rest_timer;
    bool closing;
    char *dir;             /* <run_dir>/net/<table>: the slots, and the table's own state */
    struct wr_cidr4 *deny; /* never reachable (deny_blocks) */
    uint16_t log_group;    /* the NFLOG group the table logs refused connections to */
    size_t n_deny;
    struct wr_dns *dns;     /* the DNS stub every sandbox's port 53 goes to */
    struct wr_proxy *proxy; /* the egress proxy TCP 80/443 go to under domain rules */
};

uint32_t wr__net_sandbox_addr(const struct wr_net_config *cfg, int32_t slot)
{
    return cfg->pool.addr + 2 * (uint32_t)slot + 1;
}

static uint32_t host_addr(const struct wr_net_config *cfg, int32_t slot)
{
    return cfg->pool.addr + 2 * (uint32_t)slot;
}

/* ---- policies: requests, records, the kernel's form ----------------------------------------- */

static void policy_entries(const struct wr_net_policy *p, json_t *allow, json_t *deny)
{
    char buf[WR_CIDR4_STRLEN];

    for (size_t i = 0; i < p->n_allow; i++) {
        wr_cidr4_format(&p->allow[i], true, buf);
        json_array_append_new(allow, json_string(buf));
    }
    for (size_t i = 0; i < p->n_names; i++)
        json_array_append_new(allow, p->names[i].wildcard ? json_sprintf("*.%s", p->names[i].name)
                                                          : json_string(p->names[i].name));
    for (size_t i = 0; i < p->n_deny; i++) {
        wr_cidr4_format(&p->deny[i], true, buf);
        json_array_append_new(deny, json_string(buf));
    }
}

char *wr__net_json(const struct wr_manager *m, const struct wr_net_policy *p, int32_t slot,
                   bool ports_public, const char *mask_host)
{
    json_t *allow = json_array(), *deny = json_array(), *j;
    char addr[WR_INET4_STRLEN];
    char *s;

    policy_entries(p, allow, deny);
    wr_inet4_format(wr__net_sandbox_addr(&m->cfg.net, slot), addr);
    j = json_pack(
        "{s:b,s:b,s:o,s:o,s:I,s:s,s:{s:b,s:s?}}", "enabled", true, "internet", p->internet,
        "allow_out", allow, "deny_out", deny, "max_connections",
        (json_int_t)(p->max_connections ? p->max_connections : m->cfg.net.max_connections),
        "address", addr, "ports", "public", ports_public, "mask_host", mask_host);
    s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

/* Build a policy from the strings of a request or a record. */
static int policy_build(struct wr_net_policy *p, bool internet, const char *const *allow,
                        size_t n_allow, const char *const *deny, size_t n_deny,
                        uint32_t max_connections, struct wr_err *err)
{
    memset(p, 0, sizeof(*p));
    p->internet = internet;
    p->max_connections = max_connections;
    for (size_t i = 0; i < n_allow; i++)
        if (wr_net_policy_allow(p, allow[i], err) < 0)
            goto fail;
    for (size_t i = 0; i < n_deny; i++)
        if (wr_net_policy_deny(p, deny[i], err) < 0)
            goto fail;
    if (wr_net_policy_check(p, err) < 0)
        goto fail;
    return 0;
fail:
    wr_net_policy_fini(p);
    return -1;
}

int wr__net_request(struct wr_manager *m, const struct wr_net_req *req, bool create,
                    struct wr_net_policy *p, bool *slot, struct wr_err *err)
{
    const struct wr_net_config *cfg = &m->cfg.net;
    /* Not said: the daemon's default at create (but off for a sandbox with loopback only). */
    bool internet = req != NULL && req->internet >= 0  ? req->internet > 0
                    : req != NULL && req->enabled == 0 ? false
                    : create                           ? cfg->default_internet
                                                       : true;
    bool enabled;

    if (req != NULL && req->max_connections > 1000000)
        return wr_err_set(err, WR_EINVAL, 0, "`max_connections` must be from 1 to 1000000");
    if (policy_build(p, internet, req ? req->allow_out : NULL, req ? req->n_allow_out : 0,
                     req ? req->deny_out : NULL, req ? req->n_deny_out : 0,
                     req ? req->max_connections : 0, err) < 0)
        return -1;
    enabled = req != NULL && req->enabled >= 0 ? req->enabled > 0 : req != NULL || internet;
    if (req != NULL && req->enabled == 0 && (internet || p->n_allow > 0 || p->n_names > 0)) {
        wr_net_policy_fini(p);
        return wr_err_set(err, WR_EINVAL, 0,
                          "a sandbox without a network of its own (`enabled: false`) can have "
                          "neither `internet` nor `allow_out`");
    }
    if (enabled && m->net == NULL) {
        /* The E2B SDKs ask for internet on every create: clamp, unless asked outright. */
        if (req != NULL && req->enabled > 0) {
            wr_net_policy_fini(p);
            return wr_err_set(err, WR_EUNSUPPORTED, 0,
                              "networking is off on this host (warrend --net-pool none)");
        }
        enabled = false;
        p->internet = false;
    }
    *slot = enabled;
    return 0;
}

int wr__net_req_of_json(const char *net_json, struct wr__net_req_buf *b)
{
    json_t *allow, *deny, *ports;
    size_t na, nd;

    memset(b, 0, sizeof(*b));
    b->req = (struct wr_net_req){.enabled = 0, .internet = 0, .ports_public = -1};
    if (net_json == NULL)
        return 0; /* loopback only */
    b->j = json_loads(net_json, 0, NULL);
    if (!json_is_object(b->j)) {
        json_decref(b->j);
        b->j = NULL;
        return -1;
    }
    allow = json_object_get(b->j, "allow_out");
    deny = json_object_get(b->j, "deny_out");
    ports = json_object_get(b->j, "ports");
    na = json_array_size(allow);
    nd = json_array_size(deny);
    b->allow = xcalloc(na + 1, sizeof(*b->allow));
    b->deny = xcalloc(nd + 1, sizeof(*b->deny));
    for (size_t i = 0; i < na; i++)
        b->allow[i] = json_string_value(json_array_get(allow, i)) ?: "";
    for (size_t i = 0; i < nd; i++)
        b->deny[i] = json_string_value(json_array_get(deny, i)) ?: "";
    b->req = (struct wr_net_req){
        .enabled = 1,
        .internet = json_is_true(json_object_get(b->j, "internet")),
        .allow_out = b->allow,
        .n_allow_out = na,
        .deny_out = b->deny,
        .n_deny_out = nd,
        .max_connections = (uint32_t)json_integer_value(json_object_get(b->j, "max_connections")),
        .ports_public = !json_is_false(json_object_get(ports, "public")),
        .mask_host = json_string_value(json_object_get(ports, "mask_host")),
    };
    return 0;
}

void wr__net_req_buf_fini(struct wr__net_req_buf *b)
{
    free(b->allow);
    free(b->deny);
    json_decref(b->j);
    memset(b, 0, sizeof(*b));
}

/* The record's network back into a policy (a daemon restart). */
static int policy_of_json(const char *net_json, struct wr_net_policy *p, bool *ports_public,
                          char **mask_host, struct wr_err *err)
{
    struct wr__net_req_buf b;
    int rc;

    if (net_json == NULL || wr__net_req_of_json(net_json, &b) < 0)
        return wr_err_set(err, WR_EINTERNAL, 0, "bad network record");
    rc = policy_build(p, b.req.internet > 0, b.req.allow_out, b.req.n_allow_out, b.req.deny_out,
                      b.req.n_deny_out, b.req.max_connections, err);
    *ports_public = b.req.ports_public != 0;
    *mask_host = b.req.mask_host ? xstrdup(b.req.mask_host) : NULL;
    wr__net_req_buf_fini(&b);
    return rc;
}

static void compile(const struct wr_net *net, const struct wr_live_sb *sb,
                    const struct wr_net_policy *p, struct wr_nft_sandbox *o)
{
    *o = (struct wr_nft_sandbox){
        .slot = (uint32_t)sb->net_slot,
        .allow = p->allow,
        .n_allow = p->n_allow,
        .deny = p->deny,
        .n_deny = p->n_deny,
        .accept_rest = !wr_net_policy_deny_all(p),
        .l7 = wr_net_policy_l7(p),
        .max_connections = p->max_connections ? p->max_connections : net->cfg.max_connections,
    };
}

/* ---- the pool ------------------------------------------------------------------------------- */

struct fill_work {
    uv_work_t w;
    struct wr_net *net;
    uint32_t idx[FILL_BATCH];
    int rc[FILL_BATCH];
    struct wr_err err;
    size_t n;
};

static void ready_push(struct wr_net *net, uint32_t i)
{
    net->slot[i].state = SLOT_READY;
    net->slot[i].made = true;
    net->ready[net->n_ready++] = i;
}

static void fill_run(uv_work_t *w)
{
    struct fill_work *f = w->data;

    for (size_t i = 0; i < f->n; i++)
        f->rc[i] = wr_netslot_make(f->net->slots, f->idx[i], &f->err);
}

static void net_fill(struct wr_net *net);
static void net_clone(struct wr_net *net);

static void fill_done(uv_work_t *w, int status)
{
    struct fill_work *f = w->data;
    struct wr_net *net = f->net;
    struct wr_manager *m = net->m;
    struct wr_err err;

    for (size_t i = 0; i < f->n; i++) {
        uint32_t s = f->idx[i];
        net->filling--;
        if (f->rc[i] < 0) {
            net->slot[s].state = SLOT_ABSENT;
            net->fill_failed = true;
            continue;
        }
        if (net->closing || wr_nft_slot_add(net->nft, s, &err) < 0) {
            if (!net->closing)
                log_warn("net: slot %" PRIu32 ": %s", s, err.msg);
            net->slot[s].state = SLOT_ABSENT;
            (void)wr_netslot_destroy(net->slots, s, NULL);
            continue;
        }
        ready_push(net, s);
    }
    if (net->fill_failed)
        log_warn("net: making slots: %s", f->err.msg);
    free(f);
    if (!net->closing && !net->fill_failed)
        net_fill(net);
    net_clone(net);
    wr__work_done(m);
}

/* The lowest absent slot, or -1 if the pool is full. */
static int64_t next_absent(struct wr_net *net)
{
    while (net->fresh < net->cap && net->slot[net->fresh].state != SLOT_ABSENT)
        net->fresh++;
    return net->fresh < net->cap ? (int64_t)net->fresh : -1;
}

/* Make slots in a worker until `ready` are ready or being made. */
static void net_fill(struct wr_net *net)
{
    /* Slots resting after a sandbox will be ready again soon: they count. One batch at a time,
     * so that the pool's workers never queue the creates' work behind a wall of their own (a
     * slot is made under the host's rtnl lock, more slowly the more slots exist). */
    size_t coming = net->n_ready + net->filling + net->rest_n;
    struct fill_work *f;

    if (net->closing || net->filling > 0 || coming >= net->cfg.ready)
        return;
    f = xcalloc(1, sizeof(*f));
    while (f->n < FILL_BATCH && coming < net->cfg.ready) {
        int64_t s = next_absent(net);
        if (s < 0)
            break;
        net->slot[s].state = SLOT_MAKING;
        f->idx[f->n++] = (uint32_t)s;
        net->filling++;
        coming++;
    }
    if (f->n == 0) {
        free(f);
        return;
    }
    f->net = net;
    f->w.data = f;
    wr__queue_work(net->m, &f->w, fill_run, fill_done);
}

/* ---- children pre-cloned into ready slots ------------------------------------------------- */

struct clone_work {
    uv_work_t w;
    struct wr_net *net;
    uint32_t slot[NET_CHILDREN];
    size_t n;
    int made;
    struct wr_err err;
};

static void clone_run(uv_work_t *w)
{
    struct clone_work *k = w->data;
    int fds[NET_CHILDREN];
    uint32_t resolvers[NET_CHILDREN];
    size_t n = 0;

    for (size_t i = 0; i < k->n; i++) {
        fds[n] = wr_netslot_open_fd(k->net->slots, k->slot[i]);
        if (fds[n] < 0)
            break;
        resolvers[n] = host_addr(&k->net->cfg, (int32_t)k->slot[i]);
        n++;
    }
    k->made = n == 0
                  ? wr_err_set(&k->err, WR_ESYS, errno, "open network slot")
                  : wr_runtime_prewarm_net(k->net->m->cfg.rt, fds, k->slot, resolvers, n, &k->err);
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
}

static void net_clone(struct wr_net *net);

static void clone_done(uv_work_t *w, int status)
{
    struct clone_work *k = w->data;
    struct wr_net *net = k->net;
    struct wr_manager *m = net->m;

    /* wr_runtime_prewarm_net clones in order: the first `made` slots have their child. */
    for (size_t i = 0; i < k->n; i++) {
        struct slot *sl = &net->slot[k->slot[i]];
        sl->cloning = false;
        if ((int)i < k->made) {
            sl->child = true;
        } else {
            net->children--;
        }
    }
    if (k->made < 0) {
        log_warn("net: cloning children into slots: %s", k->err.msg);
        net->clone_failed = true;
    }
    free(k);
    if (!net->closing && !net->clone_failed)
        net_clone(net);
    wr__work_done(m);
}

/* Keep cfg.children ready slots with a child pre-cloned into them. */
static void net_clone(struct wr_net *net)
{
    struct clone_work *k;

    if (net->closing || net->children >= net->cfg.children)
        return;
    k = xcalloc(1, sizeof(*k));
    for (size_t i = net->n_ready;
         i-- > 0 && net->children < net->cfg.children && k->n < NET_CHILDREN;) {
        struct slot *sl = &net->slot[net->ready[i]];
        if (sl->child || sl->cloning)
            continue;
        sl->cloning = true;
        net->children++;
        k->slot[k->n++] = net->ready[i];
    }
    if (k->n == 0) {
        free(k);
        return;
    }
    k->net = net;
    k->w.data = k;
    wr__queue_work(net->m, &k->w, clone_run, clone_done);
}

/* Out of the ready stack at index i (the order of the rest does not matter). */
static uint32_t ready_remove(struct wr_net *net, size_t i)
{
    uint32_t s = net->ready[i];

    net->ready[i] = net->ready[--net->n_ready];
    return s;
}

int wr__net_take(struct wr_manager *m, bool child_ok, int32_t *slot, bool *make, bool *pooled,
                 struct wr_err *err)
{
    struct wr_net *net = m->net;
    int64_t s = -1;

    net->fill_failed = false;
    net->clone_failed = false;
    *pooled = false;
    /* A slot with a child waiting in it first, then the most recent ready one (not one a child
     * is being cloned into: it is the worker's until then). Without child_ok (a gvisor
     * sandbox: its processes are runsc's), none with a child in it. */
    for (size_t i = net->n_ready; i-- > 0 && s < 0 && child_ok;)
        if (net->slot[net->ready[i]].child) {
            s = ready_remove(net, i);
            *pooled = true;
        }
    for (size_t i = net->n_ready; i-- > 0 && s < 0;)
        if (!net->slot[net->ready[i]].cloning && (child_ok || !net->slot[net->ready[i]].child))
            s = ready_remove(net, i);
    if (s >= 0) {
        *make = false;
        if (*pooled) {
            net->slot[s].child = false;
            net->children--;
        }
    } else if ((s = next_absent(net)) >= 0) {
        *make = true; /* the create's worker makes it */
        if (wr_nft_slot_add(net->nft, (uint32_t)s, err) < 0)
            return -1;
    } else {
        return wr_err_set(err, WR_ELIMIT, 0, "the network pool's %" PRIu32 " slots are in use",
                          net->cap);
    }
    net->slot[s].state = SLOT_USED;
    net->slot[s].made = !*make;
    net->slot[s].sb = NULL;
    *slot = (int32_t)s;
    net_fill(net);
    net_clone(net);
    return 0;
}

/* ---- a sandbox's slot ----------------------------------------------------------------------- */

int wr__net_bind(struct wr_manager *m, struct wr_live_sb *sb, int32_t slot, struct wr_net_policy *p,
                 bool ports_public, const char *mask_host, struct wr_err *err)
{
    struct wr_net *net = m->net;
    struct wr_nft_sandbox e;

    sb->net_slot = slot;
    sb->net_addr = wr__net_sandbox_addr(&net->cfg, slot);
    sb->net = xmalloc(sizeof(*sb->net));
    *sb->net = *p; /* moved */
    memset(p, 0, sizeof(*p));
    sb->ports_private = !ports_public;
    free(sb->mask_host);
    sb->mask_host = mask_host ? xstrdup(mask_host) : NULL;
    net->slot[slot].sb = sb;
    if (net->nft == NULL) /* at start: the table is built from every bound sandbox at once */
        return 0;
    compile(net, sb, sb->net, &e);
    return wr_nft_set(net->nft, &e, err);
}

void wr__net_slot_made(struct wr_manager *m, int32_t slot)
{
    if (m->net != NULL && slot >= 0)
        m->net->slot[slot].made = true;
}

struct flush_work {
    uv_work_t w;
    struct wr_net *net;
    uint32_t slot, addr;
    bool readdress; /* its sandbox was on gvisor (whose stack took eth0's address), or unknown */
    struct wr_err err, readdress_err;
    int rc, readdress_rc;
};

static void flush_run(uv_work_t *w)
{
    struct flush_work *f = w->data;
    f->rc = wr_conntrack_flush_addr(f->addr, &f->err);
    if (f->readdress)
        f->readdress_rc = wr_netslot_readdress(f->net->slots, f->slot, &f->readdress_err);
}

static void rest_arm(struct wr_net *net);

static void flush_done(uv_work_t *w, int status)
{
    struct flush_work *f = w->data;
    struct wr_net *net = f->net;
    struct wr_manager *m = net->m;

    if (f->rc < 0)
        log_warn("net: slot %" PRIu32 ": flush conntrack: %s", f->slot, f->err.msg);
    if (f->readdress_rc < 0) {
        /* Without its address no sandbox could use it: gone, and made afresh when needed. */
        log_warn("net: slot %" PRIu32 ": %s; it is destroyed", f->slot, f->readdress_err.msg);
        net->slot[f->slot].state = SLOT_ABSENT;
        net->slot[f->slot].made = false;
        (void)wr_nft_slot_remove(net->nft, f->slot, NULL);
        (void)wr_netslot_destroy(net->slots, f->slot, NULL);
        if (f->slot < net->fresh)
            net->fresh = f->slot;
        free(f);
        wr__work_done(m);
        return;
    }
    if (net->rest_n == net->rest_cap) {
        size_t cap = net->rest_cap ? net->rest_cap * 2 : 64;
        struct resting *r = xcalloc(cap, sizeof(*r));
        for (size_t i = 0; i < net->rest_n; i++)
            r[i] = net->rest[(net->rest_head + i) % net->rest_cap];
        free(net->rest);
        net->rest = r;
        net->rest_cap = cap;
        net->rest_head = 0;
    }
    net->rest[(net->rest_head + net->rest_n++) % net->rest_cap] =
        (struct resting){f->slot, wr__core_now_ms() + QUARANTINE_MS};
    rest_arm(net);
    free(f);
    wr__work_done(m);
}

static void on_rest(uv_timer_t *t)
{
    struct wr_net *net = t->data;
    int64_t now = wr__core_now_ms();

    while (net->rest_n > 0 && net->rest[net->rest_head].until_ms <= now) {
        uint32_t s = net->rest[net->rest_head].slot;
        net->rest_head = (net->rest_head + 1) % net->rest_cap;
        net->rest_n--;
        ready_push(net, s);
    }
    rest_arm(net);
    net_clone(net);
}

static void rest_arm(struct wr_net *net)
{
    int64_t wait;

    if (net->rest_n == 0 || net->closing)
        return;
    wait = net->rest[net->rest_head].until_ms - wr__core_now_ms();
    uv_timer_start(&net->rest_timer, on_rest, wait > 0 ? (uint64_t)wait : 0, 0);
}

/* Slot s goes to rest: its sandbox's traffic is forgotten, then it is ready again. */
static void slot_rest(struct wr_net *net, uint32_t s)
{
    struct flush_work *f;

    bool readdress = net->slot[s].sb == NULL || net->slot[s].sb->backend == WR_BACKEND_GVISOR;

    /* Its connections still open end in the flush below: their log entries stay its. */
    if (net->slot[s].sb != NULL)
        wr_manager_netlog_released(net->m, wr__net_sandbox_addr(&net->cfg, (int32_t)s),
                                   net->slot[s].sb->id);
    net->slot[s].sb = NULL;
    if (!net->slot[s].made) {
        /* A create that failed before its worker made it. */
        net->slot[s].state = SLOT_ABSENT;
        (void)wr_nft_slot_remove(net->nft, s, NULL);
        if (s < net->fresh)
            net->fresh = s;
        return;
    }
    net->slot[s].state = SLOT_RESTING;
    f = xcalloc(1, sizeof(*f));
    f->net = net;
    f->slot = s;
    f->addr = wr__net_sandbox_addr(&net->cfg, (int32_t)s);
    f->readdress = readdress;
    f->w.data = f;
    wr__queue_work(net->m, &f->w, flush_run, flush_done);
}

void wr__net_release(struct wr_manager *m, struct wr_live_sb *sb)
{
    struct wr_net *net = m->net;
    struct wr_err err;

    if (net != NULL && sb->net_slot >= 0 && !net->closing) {
        /* The record keeps the policy it had, not the slot. */
        _cleanup_free_ char *json =
            sb->net ? wr__net_json(m, sb->net, sb->net_slot, !sb->ports_private, sb->mask_host)
                    : NULL;
        if (wr_nft_unset(net->nft, (uint32_t)sb->net_slot, &err) < 0)
            log_warn("sandbox %s: net: %s", sb->id, err.msg);
        slot_rest(net, (uint32_t)sb->net_slot);
        (void)wr_store_sandbox_set_net(m->cfg.store, sb->id, json, -1, NULL);
    }
    if (sb->net != NULL) {
        wr_net_policy_fini(sb->net);
        free(sb->net);
        sb->net = NULL;
    }
    sb->net_slot = -1;
    sb->net_addr = 0;
}

void wr__net_release_slot(struct wr_manager *m, int32_t slot, bool made)
{
    if (m->net == NULL || slot < 0)
        return;
    m->net->slot[slot].made = made;
    (void)wr_nft_unset(m->net->nft, (uint32_t)slot, NULL);
    slot_rest(m->net, (uint32_t)slot);
}

int wr__net_import(struct wr_manager *m, struct wr_live_sb *sb, int32_t slot, const char *net_json,
                   struct wr_err *err)
{
    struct wr_net_policy p;
    _cleanup_free_ char *mask = NULL, *js = NULL;
    bool pub = true;
    struct wr_err e2;

    if (policy_of_json(net_json, &p, &pub, &mask, &e2) < 0) {
        log_warn("sandbox %s: its network record: %s; it gets internet off", sb->id, e2.msg);
        memset(&p, 0, sizeof(p));
    }
    js = wr__net_json(m, &p, slot, pub, mask); /* before the bind moves p */
    if (wr__net_bind(m, sb, slot, &p, pub, mask, err) < 0)
        return -1;
    return wr_store_sandbox_set_net(m->cfg.store, sb->id, js, slot, err);
}

int wr__net_adopt(struct wr_manager *m, struct wr_live_sb *sb, const struct wr_sandbox_rec *r)
{
    struct wr_net *net = m->net;
    struct wr_net_policy p;
    _cleanup_free_ char *mask = NULL;
    bool pub = true;
    struct wr_err err;

    if (r->net_slot < 0)
        return 0;
    if (net == NULL || r->net_slot >= (int64_t)net->cap ||
        net->slot[r->net_slot].state != SLOT_READY) {
        /* The pool changed, or its slot is gone: the sandbox's namespace is what it joined,
         * but nothing routes to it now. */
        log_warn("sandbox %s: its network slot %" PRId64 " is not in the pool any more: it "
                 "keeps no network",
                 r->id, r->net_slot);
        (void)wr_store_sandbox_set_net(m->cfg.store, r->id, NULL, -1, NULL);
        return -1;
    }
    if (policy_of_json(r->net_json, &p, &pub, &mask, &err) < 0) {
        log_warn("sandbox %s: its network record: %s; it gets internet off", r->id, err.msg);
        memset(&p, 0, sizeof(p));
    }
    /* Out of the ready stack: it is this sandbox's. */
    for (size_t i = 0; i < net->n_ready; i++)
        if (net->ready[i] == (uint32_t)r->net_slot) {
            net->ready[i] = net->ready[--net->n_ready];
            break;
        }
    net->slot[r->net_slot].state = SLOT_USED;
    return wr__net_bind(m, sb, (int32_t)r->net_slot, &p, pub, mask, &err);
}

/* ---- open and close ------------------------------------------------------------------------- */

int wr__net_init(struct wr_manager *m, struct wr_err *err)
{
    const struct wr_net_config *cfg = &m->cfg.net;
    struct wr_net *net;
    uint32_t *have = NULL;
    size_t n = 0;

    if (!cfg->enabled)
        return 0;
    net = xcalloc(1, sizeof(*net));
    net->m = m;
    net->cfg = *cfg;
    if (net->cfg.max_connections == 0)
        net->cfg.max_connections = DEFAULT_MAX_CONNS;
    if (net->cfg.ready == 0)
        net->cfg.ready = DEFAULT_READY;
    m->cfg.net.max_connections = net->cfg.max_connections;
    net->dir = xasprintf("%s/net/%s", cfg->run_dir ? cfg->run_dir : "/run/warren", cfg->table);
    {
        struct wr_netslots_config sc = {.dir = net->dir, .pool = cfg->pool};
        if (wr_netslots_open(&sc, &net->slots, err) < 0) {
            free(net->dir);
            free(net);
            return wr_err_wrap(err, "network slots");
        }
    }
    net->cap = wr_netslot_capacity(cfg->pool);
    net->slot = xcalloc(net->cap, sizeof(*net->slot));
    net->ready = xcalloc(net->cap, sizeof(*net->ready));
    if (wr_netslots_existing(net->slots, &have, &n, err) < 0) {
        log_warn("net: the slots left: %s", err->msg);
        n = 0;
    }
    /* What a previous daemon made: ready, until the records claim theirs (wr__net_adopt). */
    for (size_t i = 0; i < n; i++)
        if (have[i] < net->cap)
            ready_push(net, have[i]);
    free(have);
    uv_timer_init(m->loop, &net->rest_timer);
    net->rest_timer.data = net;
    uv_unref((uv_handle_t *)&net->rest_timer);
    m->net = net;
    return 0;
}

/* The services find a sandbox by its address (anti-spoofing makes the source trustworthy). */
static bool peer_lookup(void *arg, uint32_t saddr, struct wr_net_peer *out)
{
    struct wr_manager *m = arg;
    struct wr_live_sb *sb;

    if (!wr__net_lookup(m, saddr, &sb))
        return false;
    out->sandbox_id = sb->id;
    out->policy = sb->net;
    out->max_connections =
        sb->net->max_connections ? sb->net->max_connections : m->net->cfg.max_connections;
    return true;
}

/* "ADDR" or "ADDR:PORT". */
static int parse_upstream(const char *s, struct wr_dns_upstream *u, struct wr_err *err)
{
    char host[WR_INET4_STRLEN];
    const char *colon = strchr(s, ':');
    size_t n = colon ? (size_t)(colon - s) : strlen(s);
    char *end;
    long port = 53;

    if (n >= sizeof(host))
        return wr_err_set(err, WR_EINVAL, 0, "--dns-upstream `%s`: want ADDR[:PORT]", s);
    memcpy(host, s, n);
    host[n] = '\0';
    if (colon != NULL) {
        port = strtol(colon + 1, &end, 10);
        if (*end != '\0' || port < 1 || port > 65535)
            return wr_err_set(err, WR_EINVAL, 0, "--dns-upstream `%s`: bad port", s);
    }
    if (!wr_inet4_parse(host, &u->addr))
        return wr_err_set(err, WR_EINVAL, 0, "--dns-upstream `%s`: want an IPv4 address", s);
    u->port = (uint16_t)port;
    return 0;
}

static int services_start(struct wr_manager *m, struct wr_err *err)
{
    struct wr_net *net = m->net;
    struct wr_dns_upstream up[WR_DNS_MAX_UPSTREAMS];
    size_t n = net->cfg.n_dns_upstreams;

    if (n > WR_DNS_MAX_UPSTREAMS)
        return wr_err_set(err, WR_EINVAL, 0, "at most %d DNS upstreams", WR_DNS_MAX_UPSTREAMS);
    for (size_t i = 0; i < n; i++)
        if (parse_upstream(net->cfg.dns_upstreams[i], &up[i], err) < 0)
            return -1;
    {
        struct wr_dns_config dc = {
            .upstreams = up,
            .n_upstreams = n,
            .deny = net->deny,
            .n_deny = net->n_deny,
            .lookup = peer_lookup,
            .lookup_arg = m,
            .log = wr_netlog_manager_fn,
            .log_arg = m,
        };
        if (wr_dns_start(m->loop, &dc, &net->dns, err) < 0)
            return wr_err_wrap(err, "DNS stub");
    }
    {
        struct wr_proxy_config pc = {
            .deny = net->deny,
            .n_deny = net->n_deny,
            .lookup = peer_lookup,
            .lookup_arg = m,
            .log = wr_netlog_manager_fn,
            .log_arg = m,
            .dns = net->dns,
        };
        if (wr_proxy_start(m->loop, &pc, &net->proxy, err) < 0)
            return wr_err_wrap(err, "egress proxy");
    }
    return 0;
}

/* The blocks no sandbox reaches: the built-in list, the operator's, and the networks the host
 * is directly on (its LAN: the on-link routes of /proc/net/route that are not slots). */
static struct wr_cidr4 *deny_blocks(const struct wr_net *net, size_t *n)
{
    size_t cap = wr_inet4_n_always_denied + net->cfg.n_deny + 64, k = 0;
    struct wr_cidr4 *v = xcalloc(cap, sizeof(*v));
    _cleanup_fclose_ FILE *f = fopen("/proc/net/route", "re");
    char line[256];

    for (size_t i = 0; i < wr_inet4_n_always_denied; i++)
        v[k++] = wr_inet4_always_denied[i];
    for (size_t i = 0; i < net->cfg.n_deny; i++)
        v[k++] = net->cfg.deny[i];
    while (f != NULL && k < cap && fgets(line, sizeof(line), f) != NULL) {
        char ifname[32];
        unsigned dst, gw, flags, mask;
        uint32_t slot;

        if (sscanf(line, "%31s %x %x %x %*d %*d %*d %x", ifname, &dst, &gw, &flags, &mask) != 5 ||
            gw != 0 || mask == 0 || wr_netslot_from_ifname(net->cfg.pool, ifname, &slot) ||
            strcmp(ifname, "lo") == 0)
            continue;
        /* little-endian hex of the network-order address */
        v[k].addr = __builtin_bswap32(dst);
        v[k].len = (uint8_t)__builtin_popcount(mask);
        v[k].addr &= wr_cidr4_mask(v[k].len);
        k++;
    }
    *n = k;
    return v;
}

int wr__net_start(struct wr_manager *m, struct wr_err *err)
{
    uint16_t dns_port, proxy_port;
    struct wr_net *net = m->net;
    struct wr_nft_sandbox *sbs;
    uint32_t *ready;
    size_t n = 0, nr = 0;
    int rc;

    if (net == NULL)
        return 0;
    net->deny = deny_blocks(net, &net->n_deny);
    /* A group per table (several daemons on a host each read their own): from its name. */
    {
        uint32_t h = 2166136261u;
        for (const char *p = net->cfg.table; *p; p++)
            h = (h ^ (uint8_t)*p) * 16777619u;
        net->log_group = (uint16_t)(1000 + h % 60000);
    }
    if (services_start(m, err) < 0)
        return -1;
    dns_port = wr_dns_port(net->dns);
    proxy_port = wr_proxy_port(net->proxy);
    sbs = xcalloc(net->cap ? net->cap : 1, sizeof(*sbs));
    ready = xcalloc(net->cap ? net->cap : 1, sizeof(*ready));
    /* Every slot that exists is in @slots (a slot's traffic meets its sandbox's rules, or is
     * dropped); the used ones also get their sandbox's rules. */
    for (uint32_t s = 0; s < net->cap; s++) {
        if (net->slot[s].state == SLOT_USED && net->slot[s].sb != NULL)
            compile(net, net->slot[s].sb, net->slot[s].sb->net, &sbs[n++]);
        if (net->slot[s].state == SLOT_USED || net->slot[s].state == SLOT_READY)
            ready[nr++] = s;
    }
    {
        struct wr_nft_config nc = {
            .table = net->cfg.table,
            .pool = net->cfg.pool,
            .dns_port = dns_port,
            .proxy_port = proxy_port,
            .deny = net->deny,
            .n_deny = net->n_deny,
            .log_group = net->log_group,
            /* host-wide, as ip_forward is: every daemon on the host keeps the guard */
            .state_dir = "/run/warren-net",
        };
        rc = wr_nft_open(&nc, sbs, n, ready, nr, &net->nft, err);
    }
    free(sbs);
    free(ready);
    if (rc < 0)
        return wr_err_wrap(err, "nftables");
    /* The unclaimed slots a previous daemon left: their old traffic is forgotten first. */
    for (size_t i = 0; i < net->n_ready; i++) {
        uint32_t addr = wr__net_sandbox_addr(&net->cfg, (int32_t)net->ready[i]);
        struct wr_err e2;
        if (wr_conntrack_flush_addr(addr, &e2) < 0)
            log_warn("net: slot %" PRIu32 ": flush conntrack: %s", net->ready[i], e2.msg);
    }
    log_info("net: pool %u slots, %zu in use, %zu ready", net->cap, n, net->n_ready);
    net_fill(net);
    net_clone(net);
    return 0;
}

void wr__net_close(struct wr_manager *m)
{
    struct wr_net *net = m->net;

    if (net == NULL)
        return;
    net->closing = true;
    uv_timer_stop(&net->rest_timer);
    if (net->proxy != NULL)
        wr_proxy_stop(net->proxy);
    if (net->dns != NULL)
        wr_dns_stop(net->dns);
    net->proxy = NULL;
    net->dns = NULL;
}

/* After the last work item: the table stays in the kernel (sandboxes outlive the daemon). */
static void rest_timer_closed(uv_handle_t *h)
{
    struct wr_net *net = h->data;
    free(net->rest);
    free(net->dir);
    free(net->deny);
    free(net->slot);
    free(net->ready);
    free(net);
}

void wr__net_free(struct wr_manager *m)
{
    struct wr_net *net = m->net;

    if (net == NULL)
        return;
    m->net = NULL;
    wr_nft_close(net->nft);
    wr_netslots_close(net->slots);
    uv_close((uv_handle_t *)&net->rest_timer, rest_timer_closed);
}

/* ---- the API -------------------------------------------------------------------------------- */

int wr_manager_set_network(struct wr_manager *m, const char *team, const char *id,
                           const struct wr_net_req *req, struct wr_sandbox_rec *rec,
                           struct wr_err *err)
{
    struct wr_live_sb *sb = wr__lookup(m, team, id, err);
    struct wr_net_policy p;
    struct wr_nft_sandbox e;
    _cleanup_free_ char *json = NULL;
    const char *mask;
    bool slot, pub;

    if (sb == NULL)
        return -1;
    pub = req->ports_public >= 0 ? req->ports_public > 0 : !sb->ports_private;
    mask = req->mask_host ? req->mask_host : sb->mask_host;
    if (wr__net_request(m, req, false, &p, &slot, err) < 0)
        return -1;
    if (wr__live_sb_ending(sb) || sb->state == LIVE_SB_CREATING || sb->net_slot < 0 ||
        m->net == NULL) {
        wr_net_policy_fini(&p);
        if (sb->net_slot < 0 || m->net == NULL)
            return wr_err_set(err, WR_ECONFLICT, 0,
                              "sandbox `%s` was made without a network of its own (loopback "
                              "only): its policy cannot change; create it with `network`",
                              id);
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` is not running", id);
    }
    compile(m->net, sb, &p, &e);
    if (wr_nft_set(m->net->nft, &e, err) < 0) {
        wr_net_policy_fini(&p);
        return -1;
    }
    wr_net_policy_fini(sb->net);
    *sb->net = p;
    sb->ports_private = !pub;
    if (mask != sb->mask_host) {
        free(sb->mask_host);
        sb->mask_host = xstrdup(mask);
    }
    json = wr__net_json(m, sb->net, sb->net_slot, pub, sb->mask_host);
    if (wr_store_sandbox_set_net(m->cfg.store, id, json, sb->net_slot, err) < 0)
        return -1;
    return wr_store_sandbox_get(m->cfg.store, NULL, id, rec, err);
}

void wr__net_bytes(struct wr_live_sb *sb, uint64_t *out, uint64_t *in)
{
    struct wr_nft_counters c;
    struct wr_err err;

    *out = *in = 0;
    /* While the daemon starts (sandboxes are adopted before wr__net_start builds the table)
     * there is no table yet, and its counters start at 0 with it. */
    if (sb->net_slot < 0 || sb->m->net == NULL || sb->m->net->nft == NULL ||
        wr_nft_counters(sb->m->net->nft, (uint32_t)sb->net_slot, &c, &err) < 0)
        return;
    *out = c.accepted_bytes;
    *in = c.received_bytes;
}

int wr_manager_network_stats(struct wr_manager *m, const char *team, const char *id,
                             struct wr_net_stats *st, struct wr_err *err)
{
    struct wr_live_sb *sb = wr__lookup(m, team, id, err);
    struct wr_nft_counters c;

    if (sb == NULL)
        return -1;
    if (sb->net_slot < 0 || m->net == NULL)
        return wr_err_set(err, WR_ECONFLICT, 0,
                          "sandbox `%s` has no network of its own (loopback only)", id);
    if (wr_nft_counters(m->net->nft, (uint32_t)sb->net_slot, &c, err) < 0)
        return -1;
    *st = (struct wr_net_stats){
        .packets_out = c.accepted_packets,
        .bytes_out = c.accepted_bytes,
        .packets_in = c.received_packets,
        .bytes_in = c.received_bytes,
        .packets_dropped = c.dropped_packets,
        .bytes_dropped = c.dropped_bytes,
    };
    return 0;
}

uint16_t wr_manager_net_log_group(const struct wr_manager *m)
{
    return m->net != NULL ? m->net->log_group : 0;
}

bool wr__net_lookup(struct wr_manager *m, uint32_t saddr, struct wr_live_sb **out)
{
    struct wr_net *net = m->net;
    uint32_t off, s;

    if (net == NULL || !wr_cidr4_contains(&net->cfg.pool, saddr))
        return false;
    off = saddr - net->cfg.pool.addr;
    s = off / 2;
    if ((off & 1) == 0 || s >= net->cap || net->slot[s].state != SLOT_USED ||
        net->slot[s].sb == NULL || net->slot[s].sb->net == NULL)
        return false;
    *out = net->slot[s].sb;
    return true;
}

uint32_t wr__net_resolver(const struct wr_manager *m, int32_t slot)
{
    return slot >= 0 ? host_addr(&m->cfg.net, slot) : 0;
}

int wr__net_open_fd(struct wr_manager *m, int32_t slot, bool make, bool readdress,
                    struct wr_err *err)
{
    int fd;

    if (make && wr_netslot_make(m->net->slots, (uint32_t)slot, err) < 0)
        return -1;
    if (!make && readdress && wr_netslot_readdress(m->net->slots, (uint32_t)slot, err) < 0)
        return -1;
    fd = wr_netslot_open_fd(m->net->slots, (uint32_t)slot);
    if (fd < 0)
        return wr_err_sys(err, "open network slot %" PRId32, slot);
    return fd;
}
