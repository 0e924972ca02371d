/* SPDX-License-Identifier: Apache-2.0 */
/* The gateway's nodes (see nodes.h). */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "../util/cleanup.h"
#include "../util/json_cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "db.h"
#include "nodes.h"

/* A node's answer larger than this is refused (a list of 100,000 sandboxes fits). */
#define ANSWER_MAX (64u << 20)
/* Creates placed by best of K: K candidates drawn at random, the least loaded first. */
#define PLACE_K 3
/* A node that takes longer to say how it is counts as silent this round. */
#define POLL_TIMEOUT_MS 3000L

#define SWAP(a, b)                                                                                 \
    do {                                                                                           \
        __typeof__(a) t_ = (a);                                                                    \
        (a) = (b);                                                                                 \
        (b) = t_;                                                                                  \
    } while (0)

struct gw_nodes {
    pthread_mutex_t mu;
    struct gw_node nodes[GW_NODES_MAX];
    size_t n;
    struct gw_nodes_config cfg;
    char *token;
};

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct gw_nodes *gw_nodes_new(const struct gw_nodes_config *cfg)
{
    struct gw_nodes *ns = xcalloc(1, sizeof(*ns));

    pthread_once(&curl_once, curl_init_once);
    pthread_mutex_init(&ns->mu, NULL);
    ns->cfg = *cfg;
    ns->token = xstrdup(cfg->node_token);
    return ns;
}

static void node_fini(struct gw_node *n)
{
    json_decref(n->templates);
    json_decref(n->runtimes);
    json_decref(n->labels);
    n->templates = n->runtimes = n->labels = NULL;
}

void gw_nodes_free(struct gw_nodes *ns)
{
    if (ns == NULL)
        return;
    for (size_t i = 0; i < ns->n; i++)
        node_fini(&ns->nodes[i]);
    pthread_mutex_destroy(&ns->mu);
    free(ns->token);
    free(ns);
}

/* ---- calls -------------------------------------------------------------------------------- */

void gw_answer_fini(struct gw_answer *a)
{
    free(a->body);
    free(a->content_type);
    a->body = a->content_type = NULL;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
    struct gw_answer *a = ud;
    size_t n = size * nmemb;

    if (a->len + n > ANSWER_MAX)
        return 0;
    a->body = xrealloc(a->body, a->len + n + 1);
    memcpy(a->body + a->len, p, n);
    a->len += n;
    a->body[a->len] = '\0';
    return n;
}

static void slist_free(struct curl_slist **l)
{
    curl_slist_free_all(*l);
}

static void easy_free(CURL **c)
{
    if (*c != NULL)
        curl_easy_cleanup(*c);
}

int gw_node_call(struct gw_nodes *ns, const struct wr_node_addr *node, const char *method,
                 const char *target, const char *team, bool admin, const char *body, size_t len,
                 const char *content_type, bool e2b, struct gw_answer *out, struct wr_err *err)
{
    return gw_node_call_timeout(ns, node, method, target, team, admin, body, len, content_type, e2b,
                                300000, out, err);
}

int gw_node_call_timeout(struct gw_nodes *ns, const struct wr_node_addr *node, const char *method,
                         const char *target, const char *team, bool admin, const char *body,
                         size_t len, const char *content_type, bool e2b, long timeout_ms,
                         struct gw_answer *out, struct wr_err *err)
{
    __attribute__((cleanup(easy_free))) CURL *c = curl_easy_init();
    __attribute__((cleanup(slist_free))) struct curl_slist *h = NULL;
    _cleanup_free_ char *url = NULL, *auth = NULL, *th = NULL, *ct = NULL;
    const char *got = NULL;
    CURLcode rc;

    memset(out, 0, sizeof(*out));
    if (c == NULL)
        return wr_err_set(err, WR_ESYS, 0, "curl_easy_init failed");
    url = strchr(node->host, ':') ? xasprintf("http://[%s]:%d%s", node->host, node->port, target)
                                  : xasprintf("http://%s:%d%s", node->host, node->port, target);
    /* The E2B routes read their key from X-API-Key, the native ones from either. */
    auth = e2b ? xasprintf("X-API-Key: %s", ns->token)
               : xasprintf("Authorization: Bearer %s", ns->token);
    h = curl_slist_append(h, auth);
    if (team != NULL) {
        th = xasprintf("Warren-Team: %s", team);
        h = curl_slist_append(h, th);
    }
    if (admin)
        h = curl_slist_append(h, "Warren-Admin: 1");
    if (content_type != NULL) {
        ct = xasprintf("Content-Type: %s", content_type);
        h = curl_slist_append(h, ct);
    }
    h = curl_slist_append(h, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 2000 ? timeout_ms : 2000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    if (body != NULL) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    } else if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    }
    rc = curl_easy_perform(c);
    if (rc != CURLE_OK) {
        gw_answer_fini(out);
        return wr_err_set(err, WR_EUPSTREAM, 0, "node %s did not answer: %s", node->id,
                          curl_easy_strerror(rc));
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &got);
    out->content_type = xstrdup(got ? got : "application/json");
    if (out->body == NULL)
        out->body = xstrdup("");
    return 0;
}

/* ---- the table ---------------------------------------------------------------------------- */

static struct gw_node *find(struct gw_nodes *ns, const char *id)
{
    for (size_t i = 0; i < ns->n; i++)
        if (strcmp(ns->nodes[i].addr.id, id) == 0)
            return &ns->nodes[i];
    return NULL;
}

bool gw_nodes_addr(struct gw_nodes *ns, const char *id, struct wr_node_addr *out, bool *healthy)
{
    struct gw_node *n;
    bool ok = false;

    pthread_mutex_lock(&ns->mu);
    n = find(ns, id);
    if (n != NULL) {
        *out = n->addr;
        ok = true;
        if (healthy != NULL)
            *healthy = n->healthy;
    }
    pthread_mutex_unlock(&ns->mu);
    return ok;
}

size_t gw_nodes_healthy(struct gw_nodes *ns, char (*ids)[64], size_t max)
{
    size_t k = 0;

    pthread_mutex_lock(&ns->mu);
    for (size_t i = 0; i < ns->n && k < max; i++)
        if (ns->nodes[i].healthy)
            snprintf(ids[k++], 64, "%s", ns->nodes[i].addr.id);
    pthread_mutex_unlock(&ns->mu);
    return k;
}

void gw_nodes_placed(struct gw_nodes *ns, const char *id, uint64_t memory_bytes)
{
    struct gw_node *n;

    pthread_mutex_lock(&ns->mu);
    n = find(ns, id);
    if (n != NULL) {
        n->sandboxes++;
        n->mem_committed += memory_bytes;
    }
    pthread_mutex_unlock(&ns->mu);
}

void gw_nodes_inflight(struct gw_nodes *ns, const char *id, int delta)
{
    struct gw_node *n;

    pthread_mutex_lock(&ns->mu);
    n = find(ns, id);
    if (n != NULL && (delta > 0 || n->inflight > 0))
        n->inflight = (uint32_t)((int)n->inflight + delta);
    pthread_mutex_unlock(&ns->mu);
}

static bool has_string(const json_t *arr, const char *s)
{
    size_t i;
    json_t *v;

    if (s == NULL)
        return true;
    json_array_foreach(arr, i, v) if (json_is_string(v) &&
                                      strcmp(json_string_value(v), s) == 0) return true;
    return false;
}

/* A node's load for placement: its share of slots and of memory taken, counting what this
 * gateway sent it meanwhile; a node without the template pays one more (it must fetch it). */
static double score(const struct gw_node *n, const char *template_name)
{
    double slots = n->sandboxes_max ? (double)(n->sandboxes + n->inflight) / n->sandboxes_max : 1;
    double mem = n->mem_max ? (double)n->mem_committed / n->mem_max : 0;

    return slots + mem + (has_string(n->templates, template_name) ? 0 : 1);
}

size_t gw_nodes_place(struct gw_nodes *ns, const char *template_name, const char *runtime,
                      const char *only, const char *prefer, char (*ids)[64], size_t max)
{
    size_t cand[GW_NODES_MAX], nc = 0, k = 0;
    double sc[GW_NODES_MAX];
    uint32_t r = 0;

    pthread_mutex_lock(&ns->mu);
    for (size_t i = 0; i < ns->n; i++) {
        const struct gw_node *n = &ns->nodes[i];
        if (!n->healthy || (only != NULL && strcmp(n->addr.id, only) != 0) ||
            (runtime != NULL && !has_string(n->runtimes, runtime)) ||
            (n->sandboxes_max && n->sandboxes + n->inflight >= n->sandboxes_max))
            continue;
        cand[nc] = i;
        sc[nc++] = score(n, template_name) - (prefer && strcmp(n->addr.id, prefer) == 0 ? 1 : 0);
    }
    /* Best of K: K drawn at random lead, least loaded first; the rest follow by load, the
     * nodes a refusal sends the create on to. */
    for (size_t i = 0; i + 1 < nc && i < PLACE_K; i++) {
        size_t j;
        if (getrandom(&r, sizeof(r), 0) != sizeof(r))
            r = (uint32_t)now_ms();
        j = i + r % (nc - i);
        SWAP(cand[i], cand[j]);
        SWAP(sc[i], sc[j]);
    }
    for (size_t lo = 0; lo < nc; lo = lo < PLACE_K ? PLACE_K : nc) {
        size_t hi = lo < PLACE_K ? (nc < PLACE_K ? nc : PLACE_K) : nc;
        for (size_t i = lo + 1; i < hi; i++)
            for (size_t j = i; j > lo && sc[j] < sc[j - 1]; j--) {
                SWAP(cand[j], cand[j - 1]);
                SWAP(sc[j], sc[j - 1]);
            }
    }
    for (size_t i = 0; i < nc && k < max; i++)
        snprintf(ids[k++], 64, "%s", ns->nodes[cand[i]].addr.id);
    pthread_mutex_unlock(&ns->mu);
    return k;
}

/* ---- health and reconciliation -------------------------------------------------------------- */

static void take_info(struct gw_node *n, json_t *info)
{
    json_t *cap = json_object_get(info, "capacity");

    snprintf(n->incarnation, sizeof(n->incarnation), "%s",
             json_string_value(json_object_get(info, "incarnation")) ?: "");
    n->sandboxes = (uint64_t)json_integer_value(json_object_get(cap, "sandboxes"));
    n->sandboxes_max = (uint64_t)json_integer_value(json_object_get(cap, "sandboxes_max"));
    n->mem_committed = (uint64_t)json_integer_value(json_object_get(cap, "memory_committed_bytes"));
    n->mem_max = (uint64_t)json_integer_value(json_object_get(cap, "memory_bytes"));
    node_fini(n);
    n->templates = json_incref(json_object_get(info, "templates"));
    n->runtimes = json_incref(json_object_get(info, "runtimes"));
    n->labels = json_incref(json_object_get(info, "labels"));
}

static bool ok_or_gone(long status)
{
    return (status >= 200 && status < 300) || status == 404;
}

/* What node holds against the rows: rows of sandboxes it holds are made or updated, its copies
 * of sandboxes since moved elsewhere are deleted, rows it no longer holds are lost. */
static void reconcile(struct gw_nodes *ns, const struct wr_node_addr *a, json_t *list)
{
    json_auto_t *rows = NULL;
    json_t *seen = json_object(), *sb;
    struct wr_err err;
    size_t i;

    json_array_foreach(json_object_get(list, "sandboxes"), i, sb)
    {
        const char *id = json_string_value(json_object_get(sb, "id"));
        const char *team = json_string_value(json_object_get(sb, "team"));
        const char *state = json_string_value(json_object_get(sb, "state"));
        bool other = false;
        if (id == NULL || team == NULL || state == NULL)
            continue;
        json_object_set_new(seen, id, json_true());
        if (gw_db_sandbox_put(id, team, a->id, state, &other, &err) < 0) {
            log_warn("reconcile %s: %s", a->id, err.msg);
            continue;
        }
        if (other) {
            /* Moved to another node while this one was away: its copy here goes. */
            _cleanup_free_ char *t = xasprintf("/v1/sandboxes/%s", id);
            struct gw_answer ans;
            log_info("node %s holds %s, moved or deleted meanwhile: deleting its copy", a->id, id);
            if (gw_node_call(ns, a, "DELETE", t, team, false, NULL, 0, NULL, false, &ans, &err) ==
                0) {
                if (ok_or_gone(ans.status))
                    (void)gw_db_sandbox_forget(id, a->id, &err);
                gw_answer_fini(&ans);
            }
        }
    }
    if (gw_db_sandbox_ids(a->id, &rows, &err) < 0) {
        log_warn("reconcile %s: %s", a->id, err.msg);
        json_decref(seen);
        return;
    }
    json_array_foreach(rows, i, sb)
    {
        const char *id = json_string_value(json_object_get(sb, "id"));
        if (json_object_get(seen, id) != NULL || !json_is_true(json_object_get(sb, "settled")) ||
            strcmp(json_string_value(json_object_get(sb, "state")), "lost") == 0)
            continue;
        _cleanup_free_ char *why = xasprintf("node %s no longer holds it", a->id);
        (void)gw_db_sandbox_state(id, a->id, "lost", why, &err);
    }
    json_decref(seen);
}

/* Ask one node; returns whether it answered. */
static bool poll_node(struct gw_nodes *ns, const struct wr_node_addr *a, json_t **info,
                      json_t **list)
{
    struct gw_answer ans;
    struct wr_err err;

    if (gw_node_call_timeout(ns, a, "GET", "/node/info", NULL, true, NULL, 0, NULL, false,
                             POLL_TIMEOUT_MS, &ans, &err) < 0) {
        log_debug("node %s: %s", a->id, err.msg);
        return false;
    }
    *info = ans.status == 200 ? json_loads(ans.body, 0, NULL) : NULL;
    gw_answer_fini(&ans);
    if (*info == NULL)
        return false;
    if (gw_node_call_timeout(ns, a, "GET", "/node/sandboxes", NULL, true, NULL, 0, NULL, false,
                             POLL_TIMEOUT_MS, &ans, &err) < 0)
        return false;
    *list = ans.status == 200 ? json_loads(ans.body, 0, NULL) : NULL;
    gw_answer_fini(&ans);
    return *list != NULL;
}

/* Poll and record one node (a thread of gw_nodes_round). */
static void poll_one(struct gw_nodes *ns, const struct wr_node_addr *a)
{
    json_t *info = NULL, *list = NULL;
    bool ok = poll_node(ns, a, &info, &list);
    char addr[300], when[64] = "";
    bool was_healthy, dead = false;
    struct wr_err err;
    struct gw_node *n;

    snprintf(addr, sizeof(addr), "%s:%d", a->host, a->port);
    pthread_mutex_lock(&ns->mu);
    n = find(ns, a->id);
    if (n == NULL) {
        if (ns->n == GW_NODES_MAX) {
            pthread_mutex_unlock(&ns->mu);
            log_warn("node %s: more than %d nodes, left out", a->id, GW_NODES_MAX);
            goto out;
        }
        n = &ns->nodes[ns->n++];
        memset(n, 0, sizeof(*n));
        n->last_ok_ms = now_ms();
    }
    n->addr = *a;
    was_healthy = n->healthy;
    if (ok) {
        n->healthy = n->known = true;
        n->last_ok_ms = now_ms();
        take_info(n, info);
    } else if (now_ms() - n->last_ok_ms > (int64_t)ns->cfg.dead_after_ms) {
        dead = true;
        n->healthy = false;
    }
    pthread_mutex_unlock(&ns->mu);
    if (ok) {
        _cleanup_free_ char *text = json_dumps(info, JSON_COMPACT);
        const char *inc = json_string_value(json_object_get(info, "incarnation"));
        if (!was_healthy)
            log_info("node %s at %s answers (incarnation %s)", a->id, addr, inc ? inc : "");
        if (gw_db_node_seen(a->id, addr, "healthy", inc, text, &err) < 0)
            log_warn("node %s: %s", a->id, err.msg);
        reconcile(ns, a, list);
    } else if (dead) {
        time_t t = time(NULL);
        struct tm tm;
        int lost;
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
        if (was_healthy)
            log_warn("node %s at %s stopped answering", a->id, addr);
        (void)gw_db_node_seen(a->id, addr, "unhealthy", NULL, NULL, &err);
        _cleanup_free_ char *why =
            xasprintf("node %s stopped answering (seen by the gateway at %s)", a->id, when);
        lost = gw_db_sandbox_lose(a->id, why, &err);
        if (lost > 0)
            log_warn("node %s: %d sandboxes reported lost", a->id, lost);
    }
out:
    json_decref(info);
    json_decref(list);
}

struct poller {
    pthread_t th;
    struct gw_nodes *ns;
    const struct wr_node_addr *a;
    bool started;
};

static void *poller_run(void *arg)
{
    struct poller *p = arg;

    poll_one(p->ns, p->a);
    gw_db_thread_done();
    return NULL;
}

void gw_nodes_round(struct gw_nodes *ns)
{
    struct wr_node_addr *addrs = NULL;
    struct poller *ps;
    size_t na = 0;
    struct wr_err err;

    if (wr_discovery_list(ns->cfg.discovery, &addrs, &na, &err) < 0) {
        log_warn("discovery: %s", err.msg);
        return;
    }
    /* One thread per node: a node that does not answer delays no other's round. */
    ps = xcalloc(na ? na : 1, sizeof(*ps));
    for (size_t i = 0; i < na; i++) {
        ps[i] = (struct poller){.ns = ns, .a = &addrs[i]};
        ps[i].started = pthread_create(&ps[i].th, NULL, poller_run, &ps[i]) == 0;
        if (!ps[i].started)
            poll_one(ns, &addrs[i]);
    }
    for (size_t i = 0; i < na; i++)
        if (ps[i].started)
            pthread_join(ps[i].th, NULL);
    free(ps);
    free(addrs);
}
