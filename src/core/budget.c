/* SPDX-License-Identifier: Apache-2.0 */
/* Budgets (budget.h): the running totals of teams and sandboxes, their caps, the events and the
 * pause of a sandbox past its own hard cap. */
#include "budget.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "core_int.h"

#define TEAM_BUCKETS   256
#define PAUSE_RETRY_MS 200
#define BUDGET_CAP_MAX 1e15

struct team_bud {
    struct team_bud *next;
    bool set;
    struct wr_budget b;
    int64_t period_start, period_end; /* of the totals below; end 0: none */
    double vcpu, gib;
    bool soft_sent, hard_sent; /* this period's event was written */
    char team[];
};

struct wr_budgets {
    struct team_bud *buckets[TEAM_BUCKETS];
    uv_timer_t *pause; /* a sandbox past its hard cap waits for it (not from a state change) */
};

static const char *const unit_names[] = {"vcpu_seconds", "money"};
static const char *const period_names[] = {"month", "total"};
static const char *const level_names[] = {"ok", "soft", "hard"};

const char *wr_budget_unit_name(enum wr_budget_unit u)
{
    return unit_names[u];
}

const char *wr_budget_level_name(enum wr_budget_level l)
{
    return level_names[l];
}

static uint64_t hash_of(const char *s)
{
    uint64_t h = 1469598103934665603ULL;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* The calendar month (UTC) holding now_ms: its start and the next one's. */
static void month_of(int64_t now_ms, int64_t *start, int64_t *end)
{
    time_t t = (time_t)(now_ms / 1000);
    struct tm tm;

    gmtime_r(&t, &tm);
    tm.tm_mday = 1;
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    *start = (int64_t)timegm(&tm) * 1000;
    tm.tm_mon++;
    *end = (int64_t)timegm(&tm) * 1000;
}

static double cost(const struct wr_manager *m, enum wr_budget_unit u, double vcpu, double gib)
{
    if (u == WR_BUDGET_VCPU_SECONDS)
        return vcpu;
    return vcpu * m->cfg.price_vcpu_second + gib * m->cfg.price_gib_second;
}

static enum wr_budget_level level_of(const struct wr_budget *b, double used)
{
    if (b->hard > 0 && used >= b->hard)
        return WR_BUDGET_HARD;
    if (b->soft > 0 && used >= b->soft)
        return WR_BUDGET_SOFT;
    return WR_BUDGET_OK;
}

static double billed(const struct wr_manager *m, const struct wr_usage_interval *iv)
{
    const char *mode = m->cfg.billed_seconds;

    if (mode != NULL && strcmp(mode, "measured") == 0)
        return iv->cpu_seconds;
    if (mode != NULL && strcmp(mode, "max") == 0)
        return iv->cpu_seconds > iv->vcpu_seconds ? iv->cpu_seconds : iv->vcpu_seconds;
    return iv->vcpu_seconds;
}

/* ---- parse and show ---------------------------------------------------------------------------
 */

static int cap_of(const json_t *j, const char *key, double *out, struct wr_err *err)
{
    const json_t *v = json_object_get(j, key);

    *out = 0;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_number(v) || !(json_number_value(v) >= 0) || json_number_value(v) > BUDGET_CAP_MAX)
        return wr_err_set(err, WR_EINVAL, 0,
                          "`%s` must be a number from 0 (none) to 1e15, in the budget's unit", key);
    *out = json_number_value(v);
    return 0;
}

static int name_of(const json_t *j, const char *key, const char *const *names, size_t n,
                   unsigned *out, struct wr_err *err)
{
    const json_t *v = json_object_get(j, key);
    const char *s = json_string_value(v);

    if (v == NULL || json_is_null(v))
        return 0;
    for (size_t i = 0; s != NULL && i < n; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (unsigned)i;
            return 0;
        }
    return wr_err_set(err, WR_EINVAL, 0, "`%s` must be %s or %s", key, names[0], names[1]);
}

/* prices: a money budget needs the operator's prices (not for one stored earlier). */
static int parse(const struct wr_manager *m, const json_t *j, bool team, bool prices,
                 struct wr_budget *out, struct wr_err *err)
{
    const char *k;
    json_t *v;
    unsigned unit = WR_BUDGET_VCPU_SECONDS, period = team ? WR_BUDGET_MONTH : WR_BUDGET_TOTAL;

    if (!json_is_object(j))
        return wr_err_set(err, WR_EINVAL, 0,
                          "a budget is an object {\"unit\", \"soft\", \"hard\"%s}",
                          team ? ", \"period\"" : "");
    json_object_foreach((json_t *)j, k, v)
    {
        if (strcmp(k, "unit") != 0 && strcmp(k, "soft") != 0 && strcmp(k, "hard") != 0 &&
            (!team || strcmp(k, "period") != 0))
            return wr_err_set(err, WR_EINVAL, 0, "unknown budget field `%s`", k);
    }
    if (name_of(j, "unit", unit_names, 2, &unit, err) < 0 ||
        name_of(j, "period", period_names, 2, &period, err) < 0 ||
        cap_of(j, "soft", &out->soft, err) < 0 || cap_of(j, "hard", &out->hard, err) < 0)
        return -1;
    out->unit = unit;
    out->period = period;
    if (out->soft == 0 && out->hard == 0)
        return wr_err_set(err, WR_EINVAL, 0, "a budget needs `soft` or `hard` above 0");
    if (out->soft > 0 && out->hard > 0 && out->soft > out->hard)
        return wr_err_set(err, WR_EINVAL, 0, "`soft` must not be above `hard`");
    if (prices && unit == WR_BUDGET_MONEY && m->cfg.price_vcpu_second <= 0 &&
        m->cfg.price_gib_second <= 0)
        return wr_err_set(err, WR_EINVAL, 0,
                          "a budget in money needs the operator's prices "
                          "(--price-vcpu-second, --price-gib-second): none is set");
    return 0;
}

int wr_budget_parse(const struct wr_manager *m, const json_t *j, bool team, struct wr_budget *out,
                    struct wr_err *err)
{
    if (m->cfg.no_ledger)
        return wr_err_set(err, WR_EUNSUPPORTED, 0,
                          "budgets are measured on the usage ledger, and this daemon keeps none "
                          "(it runs with --metering off)");
    return parse(m, j, team, true, out, err);
}

static json_t *cap_json(double c)
{
    return c > 0 ? json_real(c) : json_null();
}

/* The stored form (and the API's "budget"). */
static json_t *budget_obj(const struct wr_budget *b, bool team)
{
    json_t *j = json_pack("{s:s,s:o,s:o}", "unit", unit_names[b->unit], "soft", cap_json(b->soft),
                          "hard", cap_json(b->hard));

    if (team)
        json_object_set_new(j, "period", json_string(period_names[b->period]));
    return j;
}

static json_t *time_json(int64_t ms)
{
    char buf[32];
    time_t t = (time_t)(ms / 1000);
    struct tm tm;

    if (ms <= 0)
        return json_null();
    gmtime_r(&t, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_string(buf);
}

json_t *wr_budget_json(const struct wr_manager *m, const struct wr_budget_state *st, bool team)
{
    json_t *j =
        json_pack("{s:o,s:o,s:s,s:f,s:f,s:s,s:{s:f,s:f}}", "budget",
                  st->set ? budget_obj(&st->b, team) : json_null(), "used",
                  st->set ? json_real(st->used) : json_null(), "state", level_names[st->level],
                  "vcpu_seconds", st->vcpu_seconds, "gib_seconds", st->gib_seconds, "currency",
                  m->cfg.currency ? m->cfg.currency : "", "prices", "vcpu_second",
                  m->cfg.price_vcpu_second, "gib_second", m->cfg.price_gib_second);

    if (team) {
        json_object_set_new(j, "period_start", time_json(st->period_start_ms));
        json_object_set_new(j, "period_end", time_json(st->period_end_ms));
    }
    return j;
}

/* A stored budget's text back (it was written by budget_obj). */
static bool budget_load(const struct wr_manager *m, const char *text, bool team,
                        struct wr_budget *b)
{
    json_t *j = json_loads(text, 0, NULL);
    struct wr_err err;
    bool ok;

    /* The prices may have gone since: a money budget stays what it was (at price 0). */
    ok = parse(m, j, team, false, b, &err) == 0;
    json_decref(j);
    return ok;
}

/* ---- teams ------------------------------------------------------------------------------------
 */

static struct wr_budgets *budgets_of(struct wr_manager *m)
{
    if (m->budgets == NULL)
        m->budgets = xcalloc(1, sizeof(*m->budgets));
    return m->budgets;
}

/* The totals of t's period holding now, from the ledger. */
static void team_reload(struct wr_manager *m, struct team_bud *t, int64_t now)
{
    struct wr_err err;

    if (t->b.period == WR_BUDGET_MONTH) {
        month_of(now, &t->period_start, &t->period_end);
    } else {
        t->period_start = 0;
        t->period_end = 0;
    }
    t->vcpu = t->gib = 0;
    if (wr_store_budget_spend(m->cfg.store, t->team, NULL, t->period_start, m->cfg.billed_seconds,
                              &t->vcpu, &t->gib, &err) < 0)
        log_warn("budget of team %s: %s", t->team, err.msg);
}

static struct team_bud *team_get(struct wr_manager *m, const char *team)
{
    struct wr_budgets *bs = budgets_of(m);
    struct team_bud **head = &bs->buckets[hash_of(team) % TEAM_BUCKETS], *t;
    _cleanup_free_ char *text = NULL;
    struct wr_err err;

    for (t = *head; t != NULL; t = t->next)
        if (strcmp(t->team, team) == 0)
            break;
    if (t == NULL) {
        t = xcalloc(1, sizeof(*t) + strlen(team) + 1);
        memcpy(t->team, team, strlen(team) + 1);
        t->next = *head;
        *head = t;
        if (wr_store_budget_get(m->cfg.store, "team", team, &text, &err) < 0)
            log_warn("budget of team %s: %s (none applies)", team, err.msg);
        if (text != NULL && !(t->set = budget_load(m, text, true, &t->b)))
            log_warn("budget of team %s: the stored budget does not parse", team);
        if (t->set) {
            enum wr_budget_level l;
            team_reload(m, t, wr__core_now_ms());
            /* Passed before this start: announced then. */
            l = level_of(&t->b, cost(m, t->b.unit, t->vcpu, t->gib));
            t->soft_sent = l >= WR_BUDGET_SOFT;
            t->hard_sent = l >= WR_BUDGET_HARD;
        }
    }
    if (t->set && t->period_end != 0 && wr__core_now_ms() >= t->period_end) {
        team_reload(m, t, wr__core_now_ms());
        t->soft_sent = t->hard_sent = false;
    }
    return t;
}

static void team_state(struct wr_manager *m, const struct team_bud *t, struct wr_budget_state *out)
{
    memset(out, 0, sizeof(*out));
    if (!t->set)
        return;
    out->set = true;
    out->b = t->b;
    out->vcpu_seconds = t->vcpu;
    out->gib_seconds = t->gib;
    out->used = cost(m, t->b.unit, t->vcpu, t->gib);
    out->period_start_ms = t->period_start;
    out->period_end_ms = t->period_end;
    out->level = level_of(&t->b, out->used);
}

/* A cap passed and not yet announced this period: a team.budget event. */
static void team_check(struct wr_manager *m, struct team_bud *t)
{
    struct wr_budget_state st;

    team_state(m, t, &st);
    if (!st.set || st.level == WR_BUDGET_OK)
        return;
    if (st.level == WR_BUDGET_HARD ? t->hard_sent : t->soft_sent)
        return;
    t->soft_sent = true;
    if (st.level == WR_BUDGET_HARD)
        t->hard_sent = true;
    log_info("team %s: past its %s budget cap (%g %s used)", t->team, level_names[st.level],
             st.used, unit_names[st.b.unit]);
    wr__event(m, t->team, "", "team.budget",
              json_pack("{s:s,s:f,s:o,s:o,s:s,s:s}", "level", level_names[st.level], "used",
                        st.used, "soft", cap_json(st.b.soft), "hard", cap_json(st.b.hard), "unit",
                        unit_names[st.b.unit], "period", period_names[st.b.period]));
}

void wr_manager_team_budget(struct wr_manager *m, const char *team, struct wr_budget_state *out)
{
    team_state(m, team_get(m, team), out);
}

int wr_manager_team_budget_set(struct wr_manager *m, const char *team, const struct wr_budget *b,
                               struct wr_budget_state *out, struct wr_err *err)
{
    struct team_bud *t = team_get(m, team);
    _cleanup_free_ char *text = NULL;

    if (b != NULL) {
        json_t *j = budget_obj(b, true);
        text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(j);
    }
    if (wr_store_budget_put(m->cfg.store, "team", team, team, text, err) < 0)
        return -1;
    if (b != NULL) {
        bool reload = !t->set || t->b.period != b->period;
        t->b = *b;
        t->set = true;
        if (reload)
            team_reload(m, t, wr__core_now_ms());
        t->soft_sent = t->hard_sent = false;
        team_check(m, t);
    } else {
        t->set = false;
    }
    if (out != NULL)
        team_state(m, t, out);
    return 0;
}

/* ---- sandboxes --------------------------------------------------------------------------------
 */

/* Its budget and spend, from the store, once. */
static void sb_load(struct wr_live_sb *sb)
{
    struct wr_manager *m = sb->m;
    _cleanup_free_ char *text = NULL;
    struct wr_err err;

    if (sb->bud.loaded)
        return;
    sb->bud.loaded = true;
    if (wr_store_budget_get(m->cfg.store, "sandbox", sb->id, &text, &err) < 0)
        log_warn("sandbox %s: budget: %s", sb->id, err.msg);
    if (text == NULL)
        return;
    if (!(sb->bud.set = budget_load(m, text, false, &sb->bud.b)))
        log_warn("sandbox %s: the stored budget does not parse", sb->id);
    if (sb->bud.set &&
        wr_store_budget_spend(m->cfg.store, sb->team, sb->id, 0, m->cfg.billed_seconds,
                              &sb->bud.vcpu, &sb->bud.gib, &err) < 0)
        log_warn("sandbox %s: budget: %s", sb->id, err.msg);
    sb->bud.warned = sb->bud.set && level_of(&sb->bud.b, cost(m, sb->bud.b.unit, sb->bud.vcpu,
                                                              sb->bud.gib)) >= WR_BUDGET_SOFT;
}

static void sb_state(const struct wr_live_sb *sb, struct wr_budget_state *out)
{
    memset(out, 0, sizeof(*out));
    if (!sb->bud.set)
        return;
    out->set = true;
    out->b = sb->bud.b;
    out->vcpu_seconds = sb->bud.vcpu;
    out->gib_seconds = sb->bud.gib;
    out->used = cost(sb->m, sb->bud.b.unit, sb->bud.vcpu, sb->bud.gib);
    out->level = level_of(&sb->bud.b, out->used);
}

static void on_pause_due(uv_timer_t *t);

static void pause_later(struct wr_manager *m, uint64_t ms)
{
    struct wr_budgets *bs = budgets_of(m);

    if (m->closing)
        return;
    if (bs->pause == NULL) {
        bs->pause = xcalloc(1, sizeof(*bs->pause));
        uv_timer_init(m->loop, bs->pause);
        bs->pause->data = m;
        uv_unref((uv_handle_t *)bs->pause);
    }
    if (!uv_is_active((uv_handle_t *)bs->pause))
        uv_timer_start(bs->pause, on_pause_due, ms, 0);
}

/* Past a cap: the soft one's event once; the hard one pauses it (later: not inside the state
 * change that closed the interval). */
static void sb_check(struct wr_live_sb *sb)
{
    struct wr_budget_state st;

    sb_state(sb, &st);
    if (!st.set || st.level == WR_BUDGET_OK)
        return;
    if (st.level == WR_BUDGET_SOFT && !sb->bud.warned) {
        sb->bud.warned = true;
        wr__event(sb->m, sb->team, sb->id, "sandbox.budget",
                  json_pack("{s:s,s:s,s:f,s:o,s:o,s:s}", "level", "soft", "action", "warned",
                            "used", st.used, "soft", cap_json(st.b.soft), "hard",
                            cap_json(st.b.hard), "unit", unit_names[st.b.unit]));
    }
    if (st.level == WR_BUDGET_HARD && sb->state == LIVE_SB_RUNNING) {
        sb->bud.due = true;
        pause_later(sb->m, 0);
    }
}

static void budget_paused(void *ctx, const struct wr_sandbox_rec *rec, const struct wr_err *err)
{
    (void)ctx;
    if (err != NULL)
        log_warn("budget pause: %s", err->msg);
}

static void on_pause_due(uv_timer_t *t)
{
    struct wr_manager *m = t->data;
    bool again = false;

    for (unsigned b = 0; b < NBUCKETS; b++)
        for (struct wr_live_sb *sb = m->buckets[b]; sb != NULL; sb = sb->hnext) {
            struct wr_budget_state st;
            int rc;
            if (!sb->bud.due)
                continue;
            sb_state(sb, &st);
            if (st.level != WR_BUDGET_HARD || sb->state != LIVE_SB_RUNNING) {
                sb->bud.due = sb->state == LIVE_SB_CREATING && st.level == WR_BUDGET_HARD;
                again |= sb->bud.due;
                continue;
            }
            rc = wr__pause_budget(sb, budget_paused, NULL);
            if (rc == 0) {
                again = true; /* busy: the next try */
                continue;
            }
            sb->bud.due = false;
            if (rc > 0) {
                log_info("sandbox %s: past its budget (%g of %g %s): paused to disk", sb->id,
                         st.used, st.b.hard, unit_names[st.b.unit]);
                wr__event(m, sb->team, sb->id, "sandbox.budget",
                          json_pack("{s:s,s:s,s:f,s:o,s:o,s:s}", "level", "hard", "action",
                                    "paused", "used", st.used, "soft", cap_json(st.b.soft), "hard",
                                    cap_json(st.b.hard), "unit", unit_names[st.b.unit]));
            }
        }
    if (again)
        pause_later(m, PAUSE_RETRY_MS);
}

void wr__budget_account(struct wr_live_sb *sb, const struct wr_usage_interval *iv)
{
    struct wr_manager *m = sb->m;
    struct team_bud *t;
    double v = billed(m, iv);

    if (m->closing)
        return;
    t = team_get(m, sb->team);
    if (t->set && iv->start_ms >= t->period_start) {
        t->vcpu += v;
        t->gib += iv->gib_seconds;
        team_check(m, t);
    }
    sb_load(sb);
    if (sb->bud.set) {
        sb->bud.vcpu += v;
        sb->bud.gib += iv->gib_seconds;
        sb_check(sb);
    }
}

bool wr__budget_over(struct wr_live_sb *sb)
{
    struct wr_budget_state st;

    sb_load(sb);
    sb_state(sb, &st);
    return st.level == WR_BUDGET_HARD;
}

int wr_manager_sandbox_budget(struct wr_manager *m, const char *team, const char *id,
                              struct wr_budget_state *out, struct wr_err *err)
{
    struct wr_live_sb *sb = wr__table_get(m, id);
    struct wr_sandbox_rec rec;
    _cleanup_free_ char *text = NULL;
    struct wr_budget b;

    memset(out, 0, sizeof(*out));
    if (sb != NULL && (team == NULL || strcmp(sb->team, team) == 0)) {
        sb_load(sb);
        sb_state(sb, out);
        return 0;
    }
    /* Ended, or not here: its record and the ledger. */
    if (wr_store_sandbox_get(m->cfg.store, team, id, &rec, err) < 0)
        return -1;
    wr_sandbox_rec_fini(&rec);
    if (wr_store_budget_get(m->cfg.store, "sandbox", id, &text, err) < 0)
        return -1;
    if (text == NULL || !budget_load(m, text, false, &b))
        return 0;
    out->set = true;
    out->b = b;
    if (wr_store_budget_spend(m->cfg.store, NULL, id, 0, m->cfg.billed_seconds, &out->vcpu_seconds,
                              &out->gib_seconds, err) < 0)
        return -1;
    out->used = cost(m, b.unit, out->vcpu_seconds, out->gib_seconds);
    out->level = level_of(&b, out->used);
    return 0;
}

int wr_manager_sandbox_budget_set(struct wr_manager *m, const char *team, const char *id,
                                  const struct wr_budget *b, struct wr_budget_state *out,
                                  struct wr_err *err)
{
    struct wr_live_sb *sb = wr__lookup(m, team, id, err);
    _cleanup_free_ char *text = NULL;

    if (sb == NULL)
        return -1;
    if (wr__live_sb_ending(sb))
        return wr_err_set(err, WR_ECONFLICT, 0, "sandbox `%s` is ending", id);
    sb_load(sb);
    if (b != NULL) {
        json_t *j = budget_obj(b, false);
        text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(j);
    }
    if (wr_store_budget_put(m->cfg.store, "sandbox", sb->id, sb->team, text, err) < 0)
        return -1;
    /* Its spend is not counted while it has no budget: from the ledger again. */
    if (b != NULL && !sb->bud.set &&
        wr_store_budget_spend(m->cfg.store, sb->team, sb->id, 0, m->cfg.billed_seconds,
                              &sb->bud.vcpu, &sb->bud.gib, err) < 0)
        return -1;
    sb->bud.set = b != NULL;
    if (b != NULL) {
        sb->bud.b = *b;
        sb->bud.warned = false;
        sb_check(sb);
    }
    if (out != NULL)
        sb_state(sb, out);
    return 0;
}

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

void wr__budget_close(struct wr_manager *m)
{
    struct wr_budgets *bs = m->budgets;

    if (bs == NULL)
        return;
    for (size_t b = 0; b < TEAM_BUCKETS; b++)
        for (struct team_bud *t = bs->buckets[b], *next; t != NULL; t = next) {
            next = t->next;
            free(t);
        }
    if (bs->pause != NULL) {
        uv_timer_stop(bs->pause);
        uv_close((uv_handle_t *)bs->pause, timer_closed);
    }
    free(bs);
    m->budgets = NULL;
}
