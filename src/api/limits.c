/* SPDX-License-Identifier: Apache-2.0 */
/* The per-team limits (docs/operations.md "Limits"): a GCRA token bucket per team and policy,
 * in memory (a restart refills them), its RateLimit-Policy and RateLimit fields
 * (draft-ietf-httpapi-ratelimit-headers, structured-field lists), and the 429 and 503 answers
 * with their reason. A check is a hash lookup and arithmetic: nothing is written anywhere. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/parse.h"
#include "../core/keys.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "../core/metrics.h"
#include "api_int.h"

#define NS             1000000000LL
#define LIMITS_BUCKETS 256

/* ceil of a non-negative double (no libm). */
static int64_t ceil_pos(double x)
{
    int64_t i = (int64_t)x;
    return (double)i < x ? i + 1 : i;
}

static const char *const policy_names[WR_POL_N] = {"requests", "creates", "bytes"};

struct team_lim {
    struct team_lim *next;
    struct wr_api_limits_cfg l; /* the daemon's defaults with the team's overrides */
    int64_t tat[WR_POL_N];      /* the theoretical arrival time of each bucket, ns */
    char team[];
};

struct api_limits {
    struct team_lim *buckets[LIMITS_BUCKETS];
};

static uint64_t hash_of(const char *s)
{
    uint64_t h = 1469598103934665603ULL;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static int64_t now_ns(const struct wr_api *api)
{
    struct timespec ts;

#ifdef WR_TESTING
    if (api->limits.clock_path != NULL) {
        char buf[32] = {0};
        int fd = open(api->limits.clock_path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (fd >= 0)
            (void)close(fd);
        return n > 0 ? strtoll(buf, NULL, 10) * 1000000LL : 0;
    }
#endif
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

/* The members of an overrides object, checked; onto *l. Returns 0, or -1 with err naming
 * the field. */
static int apply_overrides(json_t *o, struct wr_api_limits_cfg *l, struct wr_err *err)
{
    const char *k;
    json_t *v;

    json_object_foreach(o, k, v)
    {
        int p;
        for (p = 0; p < WR_POL_N && strcmp(k, policy_names[p]) != 0; p++)
            ;
        if (p < WR_POL_N) {
            json_t *rate = json_object_get(v, "rate"), *burst = json_object_get(v, "burst");
            if (!json_is_object(v) || json_object_size(v) != 2 || !json_is_number(rate) ||
                json_number_value(rate) < 0 || json_number_value(rate) > 1e12 ||
                !json_is_integer(burst) || json_integer_value(burst) < 0)
                return wr_err_set(err, WR_EINVAL, 0,
                                  "`%s` must be {\"rate\": tokens per second, \"burst\": an "
                                  "integer} (rate 0: no limit)",
                                  k);
            l->rate[p].rate = json_number_value(rate);
            l->rate[p].burst = (uint64_t)json_integer_value(burst);
        } else if (strcmp(k, "max_sandboxes") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000000)
                return wr_err_set(err, WR_EINVAL, 0,
                                  "`max_sandboxes` must be an integer from 0 (none) to 1000000");
            l->max_sandboxes = (uint32_t)json_integer_value(v);
        } else if (strcmp(k, "max_memory_mb") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) > (1ll << 40))
                return wr_err_set(err, WR_EINVAL, 0,
                                  "`max_memory_mb` must be an integer, 0 for none");
            l->max_memory_bytes = (uint64_t)json_integer_value(v) << 20;
        } else {
            return wr_err_set(err, WR_EINVAL, 0, "unknown field `%s`", k);
        }
    }
    return 0;
}

/* The team's overrides from the store, once, when the daemon first sees the team. */
static void load_overrides(struct wr_api *api, struct team_lim *t)
{
    _cleanup_free_ char *text = NULL;
    struct wr_err err;
    json_t *o;

    t->l = api->limits;
    if (wr_keys_team_limits_get(api->mgr, t->team, &text, &err) < 0) {
        log_warn("limits of team %s: %s (the defaults apply)", t->team, err.msg);
        return;
    }
    if (text == NULL)
        return;
    o = json_loads(text, 0, NULL);
    if (!json_is_object(o) || apply_overrides(o, &t->l, &err) < 0)
        log_warn("limits of team %s: the stored overrides do not parse", t->team);
    json_decref(o);
}

static struct team_lim *team_of(struct wr_api *api, const char *team)
{
    struct team_lim **head, *t;

    if (api->lim == NULL)
        api->lim = xcalloc(1, sizeof(*api->lim));
    head = &api->lim->buckets[hash_of(team) % LIMITS_BUCKETS];
    for (t = *head; t != NULL; t = t->next)
        if (strcmp(t->team, team) == 0)
            return t;
    t = xcalloc(1, sizeof(*t) + strlen(team) + 1);
    memcpy(t->team, team, strlen(team) + 1);
    t->next = *head;
    *head = t;
    load_overrides(api, t);
    return t;
}

void wr_api_limits_close(struct wr_api *api)
{
    if (api->lim == NULL)
        return;
    for (size_t b = 0; b < LIMITS_BUCKETS; b++)
        for (struct team_lim *t = api->lim->buckets[b], *next; t != NULL; t = next) {
            next = t->next;
            free(t);
        }
    free(api->lim);
    api->lim = NULL;
}

/* The emission interval of a policy, ns per token (a rate above 1e9/s is one ns). */
static double interval_ns(const struct wr_api_rate *r)
{
    double t = (double)NS / r->rate;
    return t < 1 ? 1 : t;
}

static bool policy_on(const struct wr_api_limits_cfg *l, enum wr_api_policy p)
{
    return l->rate[p].rate > 0 && l->rate[p].burst > 0;
}

/* The state of a bucket at now: whole tokens left, ns until one more, ns until full. */
static void bucket_state(const struct wr_api_rate *r, int64_t tat, int64_t now, uint64_t *left,
                         int64_t *next_ns, int64_t *full_ns)
{
    double t = interval_ns(r), debt = tat > now ? (double)(tat - now) : 0;
    double room = (double)r->burst * t - debt;
    uint64_t n = room <= 0 ? 0 : (uint64_t)(room / t);

    if (n > r->burst)
        n = r->burst;
    *left = n;
    *full_ns = (int64_t)debt;
    /* One more token once the debt is down to what leaves n + 1. */
    *next_ns = debt <= 0 ? 0 : ceil_pos(debt - ((double)r->burst - (double)n - 1) * t);
    if (*next_ns < 0)
        *next_ns = 0;
}

static unsigned secs_ceil(int64_t ns)
{
    int64_t s = (ns + NS - 1) / NS;
    return s < 1 ? 1 : s > 86400 ? 86400 : (unsigned)s;
}

/* The fields of every policy that is on, for team t at now. */
static void put_fields(struct wr_api *api, struct wr_http_req *req, struct team_lim *t, int64_t now,
                       bool e2b)
{
    struct wr_buf pol = {0}, cur = {0};

    for (int p = 0; p < WR_POL_N; p++) {
        const struct wr_api_rate *r = &t->l.rate[p];
        uint64_t left;
        int64_t next, full;
        unsigned w;
        if (!policy_on(&t->l, p))
            continue;
        w = (unsigned)ceil_pos((double)r->burst / r->rate);
        bucket_state(r, t->tat[p], now, &left, &next, &full);
        wr_buf_printf(&pol, "%s\"%s\";q=%" PRIu64 "%s;w=%u", pol.len ? ", " : "", policy_names[p],
                      r->burst, p == WR_POL_BYTES ? ";qu=\"content-bytes\"" : "", w ? w : 1);
        wr_buf_printf(&cur, "%s\"%s\";r=%" PRIu64, cur.len ? ", " : "", policy_names[p], left);
        if (full > 0)
            wr_buf_printf(&cur, ";t=%u", secs_ceil(next));
        if (e2b && p == WR_POL_REQUESTS) {
            char v[32];
            snprintf(v, sizeof(v), "%" PRIu64, r->burst);
            wr_http_resp_header(req, "RateLimit-Limit", v);
            snprintf(v, sizeof(v), "%" PRIu64, left);
            wr_http_resp_header(req, "RateLimit-Remaining", v);
            snprintf(v, sizeof(v), "%u", full > 0 ? secs_ceil(full) : 0);
            wr_http_resp_header(req, "RateLimit-Reset", v);
        }
    }
    if (pol.len > 0) {
        wr_http_resp_header(req, "RateLimit-Policy", (const char *)pol.data);
        wr_http_resp_header(req, "RateLimit", (const char *)cur.data);
    }
    wr_buf_fini(&pol);
    wr_buf_fini(&cur);
}

static void limit_answer(struct wr_http_req *req, int status, const char *reason,
                         const char *policy, unsigned retry_s, const char *msg)
{
    char ra[16];

    snprintf(ra, sizeof(ra), "%u", retry_s < 1 ? 1 : retry_s);
    wr_core_metric_limit_rejected(policy ? policy : "sandboxes", reason);
    wr_http_resp_header(req, "Retry-After", ra);
    wr_http_respond_error_with(req, status, wr_err_kind_name(WR_ELIMIT),
                               json_pack("{s:s, s:s*, s:i}", "reason", reason, "policy", policy,
                                         "retry_after", (json_int_t)(retry_s < 1 ? 1 : retry_s)),
                               "%s", msg);
}

/* Take n of pol from t at now; 0, or -1 with *retry_s and msg filled. */
static int bucket_take(struct team_lim *t, enum wr_api_policy pol, uint64_t n, int64_t now,
                       unsigned *retry_s, char *msg, size_t msg_len)
{
    const struct wr_api_rate *r = &t->l.rate[pol];
    double ti = interval_ns(r), tau = (double)r->burst * ti;
    double base = (double)(t->tat[pol] > now ? t->tat[pol] : now);
    double fresh = base + (double)n * ti;

    if (n > r->burst) {
        *retry_s = secs_ceil((int64_t)tau);
        snprintf(msg, msg_len,
                 "this costs %" PRIu64 " %s, more than the team's burst of %" PRIu64
                 ": it can never pass",
                 n, policy_names[pol], r->burst);
        return -1;
    }
    if (fresh - (double)now > tau) {
        *retry_s = secs_ceil(ceil_pos(fresh - (double)now - tau));
        snprintf(msg, msg_len, "the team's %s rate limit is reached (%g/s, burst %" PRIu64 ")",
                 policy_names[pol], r->rate, r->burst);
        return -1;
    }
    t->tat[pol] = (int64_t)fresh;
    return 0;
}

int api_limits_request(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                       bool e2b)
{
    struct team_lim *t;
    int64_t now;
    unsigned retry = 0;
    char msg[256];
    int rc = 0;

    if (who->admin || api->limits_off)
        return 0;
    t = team_of(api, who->team);
    now = now_ns(api);
    if (policy_on(&t->l, WR_POL_REQUESTS))
        rc = bucket_take(t, WR_POL_REQUESTS, 1, now, &retry, msg, sizeof(msg));
    put_fields(api, req, t, now, e2b);
    if (rc < 0) {
        limit_answer(req, 429, "rate", policy_names[WR_POL_REQUESTS], retry,
                     e2b ? "Rate limit exceeded" : msg);
        return -1;
    }
    return 0;
}

int api_limits_take(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                    enum wr_api_policy pol, uint64_t n)
{
    struct team_lim *t;
    unsigned retry = 0;
    char msg[256];

    if (who->admin || n == 0 || api->limits_off)
        return 0;
    t = team_of(api, who->team);
    if (policy_on(&t->l, pol) &&
        bucket_take(t, pol, n, now_ns(api), &retry, msg, sizeof(msg)) < 0) {
        limit_answer(req, 429, "rate", policy_names[pol], retry, msg);
        return -1;
    }
    return 0;
}

void api_limits_charge(struct wr_api *api, const struct wr_caller *who, enum wr_api_policy pol,
                       uint64_t n)
{
    struct team_lim *t;
    int64_t now;
    double ti;

    if (who->admin || n == 0 || api->limits_off)
        return;
    t = team_of(api, who->team);
    if (!policy_on(&t->l, pol))
        return;
    now = now_ns(api);
    ti = interval_ns(&t->l.rate[pol]);
    if (t->tat[pol] < now)
        t->tat[pol] = now;
    t->tat[pol] += (int64_t)((double)n * ti);
}

int api_limits_quota(struct wr_api *api, struct wr_http_req *req, const struct wr_caller *who,
                     uint32_t n, uint64_t memory_bytes)
{
    const struct wr_api_limits_cfg *l;
    uint32_t have = 0;
    uint64_t mem = 0;
    char msg[256];

    if (who->admin || api->limits_off)
        return 0;
    l = &team_of(api, who->team)->l;
    if (l->max_sandboxes == 0 && l->max_memory_bytes == 0)
        return 0;
    wr_manager_team_usage(api->mgr, who->team, &have, &mem);
    if (l->max_sandboxes > 0 && (uint64_t)have + n > l->max_sandboxes) {
        snprintf(msg, sizeof(msg),
                 "the team's quota of %u concurrent sandboxes is reached (%u running)",
                 l->max_sandboxes, have);
        limit_answer(req, 429, "quota", "sandboxes", 5, msg);
        return -1;
    }
    if (l->max_memory_bytes > 0 && mem + (uint64_t)n * memory_bytes > l->max_memory_bytes) {
        snprintf(msg, sizeof(msg),
                 "the team's memory quota of %" PRIu64 " MiB is reached (%" PRIu64
                 " MiB in use, %" PRIu64 " MiB asked)",
                 l->max_memory_bytes >> 20, mem >> 20, ((uint64_t)n * memory_bytes) >> 20);
        limit_answer(req, 429, "quota", "memory", 5, msg);
        return -1;
    }
    return 0;
}

void api_limits_capacity(struct wr_http_req *req, const struct wr_err *err, unsigned retry_s)
{
    limit_answer(req, 503, "capacity", NULL, retry_s, err->msg);
}

int wr_api_rate_parse(const char *s, bool bytes, struct wr_api_rate *out, struct wr_err *err)
{
    return wr_parse_rate(s, bytes, &out->rate, &out->burst, err);
}

const struct wr_api_size wr_api_default_sizes[3] = {
    {"small", 1000, 512ULL << 20},
    {"medium", 2000, 2ULL << 30},
    {"large", 4000, 8ULL << 30},
};

int wr_api_size_parse(const char *s, struct wr_api_size *out, struct wr_err *err)
{
    const char *eq = strchr(s, '='), *colon = eq ? strchr(eq, ':') : NULL;
    _cleanup_free_ char *cpus = NULL;

    if (eq == NULL || colon == NULL || eq == s || (size_t)(eq - s) >= sizeof(out->name))
        return wr_err_set(err, WR_EINVAL, 0, "`%s`: expected NAME=CPUS:MEMORY", s);
    memset(out, 0, sizeof(*out));
    memcpy(out->name, s, (size_t)(eq - s));
    cpus = xstrndup(eq + 1, (size_t)(colon - eq - 1));
    if (wr_parse_cpus(cpus, &out->cpu_millis, err) < 0 ||
        wr_parse_size(colon + 1, &out->memory_bytes, err) < 0)
        return -1;
    return 0;
}

int api_apply_size(struct wr_api *api, struct wr_http_req *req, json_t *body, uint32_t *cpu_millis,
                   uint64_t *memory_bytes)
{
    json_t *v = json_object_get(body, "size");
    const char *name;
    struct wr_buf names = {0};

    if (v == NULL || json_is_null(v))
        return 0;
    name = json_string_value(v);
    for (size_t i = 0; name != NULL && i < api->n_sizes; i++)
        if (strcmp(api->sizes[i].name, name) == 0) {
            if (*cpu_millis == 0)
                *cpu_millis = api->sizes[i].cpu_millis;
            if (*memory_bytes == 0)
                *memory_bytes = api->sizes[i].memory_bytes;
            return 0;
        }
    for (size_t i = 0; i < api->n_sizes; i++)
        wr_buf_printf(&names, "%s%s", i ? ", " : "", api->sizes[i].name);
    api_fail(req, WR_EINVAL, "`size` must be one of: %s",
             names.len ? (const char *)names.data : "(none)");
    wr_buf_fini(&names);
    return -1;
}

/* ---- GET, PUT, DELETE /v1/teams/{team}/limits ---------------------------------------------- */

static json_t *limits_json(const struct team_lim *t, json_t *overrides)
{
    json_t *j = json_pack("{s:s}", "team", t->team);

    for (int p = 0; p < WR_POL_N; p++)
        json_object_set_new(j, policy_names[p],
                            json_pack("{s:f, s:I}", "rate", t->l.rate[p].rate, "burst",
                                      (json_int_t)t->l.rate[p].burst));
    json_object_set_new(j, "max_sandboxes", json_integer(t->l.max_sandboxes));
    json_object_set_new(j, "max_memory_mb",
                        json_integer((json_int_t)(t->l.max_memory_bytes >> 20)));
    json_object_set_new(j, "overrides", overrides != NULL ? overrides : json_object());
    return j;
}

static void limits_answer(struct api_call *c, struct team_lim *t)
{
    _cleanup_free_ char *text = NULL;
    struct wr_err err;

    if (wr_keys_team_limits_get(c->api->mgr, t->team, &text, &err) < 0) {
        api_error(c->req, &err);
        return;
    }
    wr_http_respond_json(c->req, 200,
                         limits_json(t, text != NULL ? json_loads(text, 0, NULL) : NULL));
}

/* seg[1] is the team; a team's key may read its own limits, only an admin may change any. */
static struct team_lim *limits_team(struct api_call *c, bool change)
{
    const char *team = c->seg[1];

    if (!c->who.admin && (change || strcmp(team, c->who.team) != 0)) {
        api_fail(c->req, WR_EFORBIDDEN,
                 change ? "only an admin key sets a team's limits"
                        : "a team's key reads only its own team's limits");
        return NULL;
    }
    if (*team == '\0' || strlen(team) >= 128) {
        api_fail(c->req, WR_EINVAL, "a team name is 1 to 127 bytes");
        return NULL;
    }
    return team_of(c->api, team);
}

void api_team_limits_get(struct api_call *c)
{
    struct team_lim *t = limits_team(c, false);

    if (t != NULL)
        limits_answer(c, t);
}

void api_team_limits_put(struct api_call *c)
{
    struct team_lim *t = limits_team(c, true);
    struct wr_api_limits_cfg l;
    _cleanup_free_ char *text = NULL;
    struct wr_err err;
    json_t *j;

    if (t == NULL)
        return;
    j = api_parse_object(c->req, c->body, c->len);
    if (j == NULL)
        return;
    l = c->api->limits;
    if (apply_overrides(j, &l, &err) < 0) {
        json_decref(j);
        api_error(c->req, &err);
        return;
    }
    text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    if (wr_keys_team_limits_put(c->api->mgr, t->team, text, &err) < 0) {
        api_error(c->req, &err);
        return;
    }
    t->l = l; /* the buckets keep their state; a smaller burst applies from the next take */
    limits_answer(c, t);
}

void api_team_limits_delete(struct api_call *c)
{
    struct team_lim *t = limits_team(c, true);
    struct wr_err err;

    if (t == NULL)
        return;
    if (wr_keys_team_limits_put(c->api->mgr, t->team, NULL, &err) < 0) {
        api_error(c->req, &err);
        return;
    }
    t->l = c->api->limits;
    wr_http_respond(c->req, 204, NULL, NULL, 0);
}
