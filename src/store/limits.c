/* SPDX-License-Identifier: Apache-2.0 */
/* Per-team limits: the operator's overrides of the daemon's defaults (migration 12). */
#include <time.h>

#include "store_int.h"

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int wr_store_team_limits_get(struct wr_store *s, const char *team, char **json, struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        wr__stmt(s, WR_ST_TLIM_GET, "SELECT limits FROM team_limits WHERE team = ?1", err);
    int rc;

    *json = NULL;
    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, team);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *json = wr__col_text(st, 0);
        return 0;
    }
    if (rc == SQLITE_DONE)
        return 0;
    return wr__store_fail(s->db, err, "team limits of `%s`", team);
}

int wr_store_team_limits_put(struct wr_store *s, const char *team, const char *json,
                             struct wr_err *err)
{
    _cleanup_stmt_ sqlite3_stmt *st =
        json != NULL
            ? wr__stmt(s, WR_ST_TLIM_PUT,
                       "INSERT INTO team_limits (team, limits, updated_ms) VALUES (?1, ?2, ?3) "
                       "ON CONFLICT (team) DO UPDATE SET limits = ?2, updated_ms = ?3",
                       err)
            : wr__stmt(s, WR_ST_TLIM_DELETE, "DELETE FROM team_limits WHERE team = ?1", err);

    if (st == NULL)
        return -1;
    wr__bind_text(st, 1, team);
    if (json != NULL) {
        wr__bind_text(st, 2, json);
        wr__bind_int64(st, 3, now_ms());
    }
    return wr__step_done(s->db, st, "team limits", err);
}
