/* SPDX-License-Identifier: Apache-2.0 */
/* Budgets (docs/usage.md, "Budgets"): a spend cap of a team or of a sandbox, in billed
 * vCPU-seconds (the operator's --billed-seconds) or in money at the operator's prices, with a
 * soft cap (a warning) and a hard cap (a team's creates are refused; a sandbox is paused to
 * disk). What was spent is the usage ledger's, kept as running totals in memory: added to as
 * each interval closes, read from the ledger once per team and sandbox after a start (and per
 * team at each new period). A check is a hash lookup and arithmetic.
 *
 * All functions run on the loop thread. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../util/err.h"

struct wr_manager;

enum wr_budget_unit { WR_BUDGET_VCPU_SECONDS, WR_BUDGET_MONEY };
/* A team's window: the calendar month (UTC), or all time. A sandbox's is its life. */
enum wr_budget_period { WR_BUDGET_MONTH, WR_BUDGET_TOTAL };
enum wr_budget_level { WR_BUDGET_OK, WR_BUDGET_SOFT, WR_BUDGET_HARD };

struct wr_budget {
    enum wr_budget_unit unit;
    double soft, hard; /* in unit; 0: none (one of them is set) */
    enum wr_budget_period period;
};

/* A budget and what was spent against it. */
struct wr_budget_state {
    bool set; /* false: no budget (the rest is zero) */
    struct wr_budget b;
    double used;                      /* in b.unit: the period's closed intervals */
    double vcpu_seconds, gib_seconds; /* the same, billed vCPU-seconds and GiB-seconds */
    int64_t period_start_ms;          /* wall clock; 0 for all time */
    int64_t period_end_ms;            /* the next period's start; 0: none */
    enum wr_budget_level level;       /* where used stands against soft and hard */
};

/* Parse a budget object {"unit", "soft", "hard", "period"} (team: period allowed, default
 * month; a sandbox's has none). unit is "vcpu_seconds" (default) or "money" (only with a price
 * set by the operator). Caps are numbers >= 0 (0 or null: none), at least one set, soft at most
 * hard. WR_EINVAL naming the field otherwise; WR_EUNSUPPORTED on a daemon without a usage
 * ledger (--metering off). */
int wr_budget_parse(const struct wr_manager *m, const json_t *j, bool team, struct wr_budget *out,
                    struct wr_err *err);
/* The API's view: {"budget": {...} or null, "used", "state", "vcpu_seconds", "gib_seconds",
 * "currency", "prices"} and, for a team's, "period_start" and "period_end" (new reference). */
json_t *wr_budget_json(const struct wr_manager *m, const struct wr_budget_state *st, bool team);
const char *wr_budget_level_name(enum wr_budget_level l);
const char *wr_budget_unit_name(enum wr_budget_unit u);

/* The team's budget and spend now (no budget: out->set false). Never fails: a store error is
 * logged and reads as no budget. */
void wr_manager_team_budget(struct wr_manager *m, const char *team, struct wr_budget_state *out);
/* Set (b) or remove (b NULL) the team's budget, recorded; *out (may be NULL) the new state. A
 * cap already passed is announced at once (a team.budget event). */
int wr_manager_team_budget_set(struct wr_manager *m, const char *team, const struct wr_budget *b,
                               struct wr_budget_state *out, struct wr_err *err);
/* A sandbox's budget and spend (team NULL: any team's). WR_ENOTFOUND for no such sandbox of the
 * team; a sandbox no longer in memory reads its spend from the ledger. */
int wr_manager_sandbox_budget(struct wr_manager *m, const char *team, const char *id,
                              struct wr_budget_state *out, struct wr_err *err);
/* Set (b) or remove (b NULL) a sandbox's budget. A running sandbox already past the new hard
 * cap is paused at once; one paused for its budget stays paused until resumed. */
int wr_manager_sandbox_budget_set(struct wr_manager *m, const char *team, const char *id,
                                  const struct wr_budget *b, struct wr_budget_state *out,
                                  struct wr_err *err);
