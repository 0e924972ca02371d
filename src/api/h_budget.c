/* SPDX-License-Identifier: Apache-2.0 */
/* Budgets (docs/usage.md, "Budgets"): GET, PUT, DELETE /v1/teams/{team}/budget and
 * /v1/sandboxes/{id}/budget, the Warren-Budget header past a team's soft cap, and the 429 of a
 * create past its hard cap. The totals are the manager's, in memory (core/budget.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../core/budget.h"
#include "api_int.h"

void api_budget_header(struct wr_api *api, struct wr_http_req *req, const char *team)
{
    struct wr_budget_state st;
    char v[256];

    wr_manager_team_budget(api->mgr, team, &st);
    if (!st.set || st.level == WR_BUDGET_OK)
        return;
    snprintf(v, sizeof(v), "%s; used=%.6g; limit=%.6g; unit=%s", wr_budget_level_name(st.level),
             st.used, st.level == WR_BUDGET_HARD ? st.b.hard : st.b.soft,
             wr_budget_unit_name(st.b.unit));
    wr_http_resp_header(req, "Warren-Budget", v);
}

int api_budget_create(struct wr_api *api, struct wr_http_req *req, const char *team)
{
    struct wr_budget_state st;
    int64_t left;
    char msg[256];

    wr_manager_team_budget(api->mgr, team, &st);
    if (!st.set || st.level != WR_BUDGET_HARD)
        return 0;
    if (st.period_end_ms > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        left = (st.period_end_ms - ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000) + 999) / 1000;
    } else {
        left = 3600;
    }
    snprintf(msg, sizeof(msg), "the team's budget is spent: %.6g of a hard cap of %.6g %s%s",
             st.used, st.b.hard, wr_budget_unit_name(st.b.unit),
             st.period_end_ms > 0 ? " this month" : "");
    api_limits_budget(req, left < 1 ? 1 : left > 86400 ? 86400 : (unsigned)left, msg);
    return -1;
}

/* seg[1] is the team; a team's key may read its own budget, only an admin may change any. */
static const char *budget_team(struct api_call *c, bool change)
{
    const char *team = c->seg[1];

    if (!c->who.admin && (change || strcmp(team, c->who.team) != 0)) {
        api_fail(c->req, WR_EFORBIDDEN,
                 change ? "only an admin key sets a team's budget"
                        : "a team's key reads only its own team's budget");
        return NULL;
    }
    if (*team == '\0' || strlen(team) >= 128) {
        api_fail(c->req, WR_EINVAL, "a team name is 1 to 127 bytes");
        return NULL;
    }
    return team;
}

static void team_answer(struct api_call *c, const char *team, const struct wr_budget_state *st)
{
    json_t *j = wr_budget_json(c->api->mgr, st, true);

    json_object_set_new(j, "team", json_string(team));
    wr_http_respond_json(c->req, 200, j);
}

void api_team_budget_get(struct api_call *c)
{
    const char *team = budget_team(c, false);
    struct wr_budget_state st;

    if (team == NULL)
        return;
    wr_manager_team_budget(c->api->mgr, team, &st);
    team_answer(c, team, &st);
}

void api_team_budget_put(struct api_call *c)
{
    const char *team = budget_team(c, true);
    struct wr_budget_state st;
    struct wr_budget b;
    struct wr_err err;
    json_t *j;

    if (team == NULL)
        return;
    j = api_parse_object(c->req, c->body, c->len);
    if (j == NULL)
        return;
    if (wr_budget_parse(c->api->mgr, j, true, &b, &err) < 0 ||
        wr_manager_team_budget_set(c->api->mgr, team, &b, &st, &err) < 0)
        api_error(c->req, &err);
    else
        team_answer(c, team, &st);
    json_decref(j);
}

void api_team_budget_delete(struct api_call *c)
{
    const char *team = budget_team(c, true);
    struct wr_err err;

    if (team == NULL)
        return;
    if (wr_manager_team_budget_set(c->api->mgr, team, NULL, NULL, &err) < 0)
        api_error(c->req, &err);
    else
        wr_http_respond(c->req, 204, NULL, NULL, 0);
}

/* ---- a sandbox's ---------------------------------------------------------------------------- */

json_t *api_sandbox_budget_json(struct wr_api *api, const char *id)
{
    struct wr_budget_state st;
    struct wr_err err;

    if (wr_manager_sandbox_budget(api->mgr, NULL, id, &st, &err) < 0 || !st.set)
        return json_null();
    return wr_budget_json(api->mgr, &st, false); /* a sandbox's window is its life */
}

int api_sandbox_budget_parse(struct wr_api *api, struct wr_http_req *req, json_t *body,
                             struct wr_budget *out, bool *set)
{
    json_t *v = json_object_get(body, "budget");
    struct wr_err err;

    *set = false;
    if (v == NULL || json_is_null(v))
        return 0;
    if (wr_budget_parse(api->mgr, v, false, out, &err) < 0) {
        api_fail(req, WR_EINVAL, "`budget`: %s", err.msg);
        return -1;
    }
    *set = true;
    return 0;
}

static void sandbox_answer(struct api_call *c)
{
    json_t *j = api_sandbox_budget_json(c->api, c->seg[1]);

    if (json_is_null(j)) {
        json_decref(j);
        j = json_pack("{s:n}", "budget");
    }
    json_object_set_new(j, "sandbox", json_string(c->seg[1]));
    wr_http_respond_json(c->req, 200, j);
}

void api_sandbox_budget_get(struct api_call *c)
{
    struct wr_budget_state st;
    struct wr_err err;

    if (wr_manager_sandbox_budget(c->api->mgr, c->team, c->seg[1], &st, &err) < 0)
        api_error(c->req, &err);
    else
        sandbox_answer(c);
}

void api_sandbox_budget_put(struct api_call *c)
{
    struct wr_budget b;
    struct wr_err err;
    json_t *j;

    j = api_parse_object(c->req, c->body, c->len);
    if (j == NULL)
        return;
    if (wr_budget_parse(c->api->mgr, j, false, &b, &err) < 0 ||
        wr_manager_sandbox_budget_set(c->api->mgr, c->team, c->seg[1], &b, NULL, &err) < 0)
        api_error(c->req, &err);
    else
        sandbox_answer(c);
    json_decref(j);
}

void api_sandbox_budget_delete(struct api_call *c)
{
    struct wr_err err;

    if (wr_manager_sandbox_budget_set(c->api->mgr, c->team, c->seg[1], NULL, NULL, &err) < 0)
        api_error(c->req, &err);
    else
        wr_http_respond(c->req, 204, NULL, NULL, 0);
}
