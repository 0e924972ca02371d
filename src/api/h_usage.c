/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/usage: the usage ledger (docs/usage.md), summed per sandbox, template or day, in JSON
 * or CSV, with the storage samples of the same span. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/parse.h"
#include "api_int.h"

/* A time: unix seconds, or RFC 3339 ("2026-01-02T03:04:05Z", fractions allowed, Z or an offset
 * +HH:MM / -HH:MM). Returns 0 with *ms, or -1. */
static int parse_time(const char *s, int64_t *ms)
{
    struct tm tm = {0};
    const char *p;
    uint64_t v;
    struct wr_err err;
    int64_t frac = 0, scale = 100, off = 0;

    if (wr_parse_uint(s, INT64_MAX / 1000, &v, &err) == 0) {
        *ms = (int64_t)v * 1000;
        return 0;
    }
    p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (p == NULL)
        return -1;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -1;
        for (; *p >= '0' && *p <= '9'; p++, scale /= 10)
            frac += scale > 0 ? (*p - '0') * scale : 0;
    }
    if (strcmp(p, "Z") != 0 && strcmp(p, "z") != 0) {
        int hh, mm, sign = *p == '-' ? -1 : 1;
        if ((*p != '+' && *p != '-') || strlen(p) != 6 || p[3] != ':' ||
            sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2 || hh > 23 || mm > 59)
            return -1;
        off = sign * (hh * 3600 + mm * 60);
    }
    *ms = ((int64_t)timegm(&tm) - off) * 1000 + frac;
    return 0;
}

static double billed(const char *mode, const struct wr_usage_sum *u)
{
    if (strcmp(mode, "measured") == 0)
        return u->cpu_seconds;
    if (strcmp(mode, "max") == 0)
        return u->max_seconds;
    return u->vcpu_seconds;
}

static const char *const group_names[] = {
    [WR_USAGE_BY_SANDBOX] = "sandbox",
    [WR_USAGE_BY_TEMPLATE] = "template",
    [WR_USAGE_BY_DAY] = "day",
};

static json_t *sum_json(const struct wr_usage_sum *u, enum wr_usage_group g, const char *mode)
{
    char first[32], last[32];

    api_time(u->first_ms, first);
    api_time(u->last_ms, last);
    return json_pack(
        "{s:s,s:s,s:s?,s:s,s:s,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:I,s:I,s:I}", group_names[g],
        u->key, "team", u->team, "template", g == WR_USAGE_BY_DAY ? NULL : u->template_name, "from",
        first, "to", last, "intervals", (json_int_t)u->intervals, "sandbox_seconds",
        u->running_seconds, "paused_seconds", u->paused_seconds, "vcpu_seconds", u->vcpu_seconds,
        "cpu_seconds", u->cpu_seconds, "gib_seconds", u->gib_seconds, "memory_gib_seconds_measured",
        u->mem_gib_seconds, "billed_vcpu_seconds", billed(mode, u), "peak_memory_bytes",
        (json_int_t)u->peak_memory_bytes, "net_bytes_in", (json_int_t)u->net_bytes_in,
        "net_bytes_out", (json_int_t)u->net_bytes_out);
}

/* A CSV field: quoted when it holds a comma, quote or line break. */
static void csv_field(struct wr_buf *b, const char *s)
{
    if (s == NULL)
        return;
    if (strpbrk(s, ",\"\r\n") == NULL) {
        wr_buf_puts(b, s);
        return;
    }
    wr_buf_append(b, "\"", 1);
    for (; *s; s++) {
        if (*s == '"')
            wr_buf_append(b, "\"", 1);
        wr_buf_append(b, s, 1);
    }
    wr_buf_append(b, "\"", 1);
}

static void respond_csv(struct wr_http_req *req, enum wr_usage_group g, const char *mode,
                        const struct wr_usage_sum *v, size_t n)
{
    _cleanup_(wr_buf_finip) struct wr_buf b = {0};

    wr_buf_printf(&b,
                  "%s,team,template,from,to,intervals,sandbox_seconds,paused_seconds,"
                  "vcpu_seconds,cpu_seconds,gib_seconds,memory_gib_seconds_measured,"
                  "billed_vcpu_seconds,peak_memory_bytes,net_bytes_in,net_bytes_out\r\n",
                  group_names[g]);
    for (size_t i = 0; i < n; i++) {
        const struct wr_usage_sum *u = &v[i];
        char first[32], last[32];
        api_time(u->first_ms, first);
        api_time(u->last_ms, last);
        csv_field(&b, u->key);
        wr_buf_append(&b, ",", 1);
        csv_field(&b, u->team);
        wr_buf_append(&b, ",", 1);
        csv_field(&b, g == WR_USAGE_BY_DAY ? NULL : u->template_name);
        wr_buf_printf(&b,
                      ",%s,%s,%" PRId64 ",%.3f,%.3f,%.6f,%.6f,%.6f,%.6f,%.6f,%" PRIu64 ",%" PRIu64
                      ",%" PRIu64 "\r\n",
                      first, last, u->intervals, u->running_seconds, u->paused_seconds,
                      u->vcpu_seconds, u->cpu_seconds, u->gib_seconds, u->mem_gib_seconds,
                      billed(mode, u), u->peak_memory_bytes, u->net_bytes_in, u->net_bytes_out);
    }
    wr_http_respond(req, 200, "text/csv; charset=utf-8", b.data, b.len);
}

void api_usage(struct api_call *c)
{
    struct wr_http_req *req = c->req;
    const char *team = c->who.team, *q, *accept, *mode = c->api->billed_seconds;
    enum wr_usage_group g = WR_USAGE_BY_SANDBOX;
    int64_t from_ms = 0, to_ms = 0;
    bool csv = false;
    struct wr_usage_sum *v = NULL;
    struct wr_usage_storage *st = NULL;
    size_t n = 0, nst = 0;
    struct wr_err err;
    json_t *rows, *storage;

    if (mode == NULL)
        mode = "allocated";
    if ((q = wr_http_req_query(req, "team")) != NULL) {
        if (!c->who.admin && strcmp(q, c->who.team) != 0) {
            api_fail(req, WR_EFORBIDDEN, "only an admin key may read another team's usage");
            return;
        }
        team = *q ? q : NULL; /* an admin's team= (empty: every team) */
    }
    if ((q = wr_http_req_query(req, "from")) != NULL && parse_time(q, &from_ms) < 0) {
        api_fail(req, WR_EINVAL, "`from` must be an RFC 3339 time or unix seconds");
        return;
    }
    if ((q = wr_http_req_query(req, "to")) != NULL && parse_time(q, &to_ms) < 0) {
        api_fail(req, WR_EINVAL, "`to` must be an RFC 3339 time or unix seconds");
        return;
    }
    if (from_ms && to_ms && to_ms <= from_ms) {
        api_fail(req, WR_EINVAL, "`to` must be after `from`");
        return;
    }
    if ((q = wr_http_req_query(req, "group_by")) != NULL) {
        if (strcmp(q, "sandbox") == 0)
            g = WR_USAGE_BY_SANDBOX;
        else if (strcmp(q, "template") == 0)
            g = WR_USAGE_BY_TEMPLATE;
        else if (strcmp(q, "day") == 0)
            g = WR_USAGE_BY_DAY;
        else {
            api_fail(req, WR_EINVAL, "`group_by` must be sandbox, template or day");
            return;
        }
    }
    if ((q = wr_http_req_query(req, "format")) != NULL) {
        if (strcmp(q, "csv") == 0)
            csv = true;
        else if (strcmp(q, "json") != 0) {
            api_fail(req, WR_EINVAL, "`format` must be json or csv");
            return;
        }
    } else if ((accept = wr_http_req_header(req, "accept")) != NULL &&
               strstr(accept, "text/csv") != NULL) {
        csv = true;
    }
    if (wr_manager_usage(c->api->mgr, team, from_ms, to_ms, g, &v, &n, &err) < 0) {
        api_error(req, &err);
        return;
    }
    wr_http_resp_header(req, "Warren-Billed-Seconds", mode);
    if (csv) {
        respond_csv(req, g, mode, v, n);
        goto out;
    }
    if (wr_manager_storage(c->api->mgr, team, from_ms, to_ms, &st, &nst, &err) < 0) {
        api_error(req, &err);
        goto out;
    }
    rows = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(rows, sum_json(&v[i], g, mode));
    storage = json_array();
    for (size_t i = 0; i < nst; i++) {
        char at[32];
        api_time(st[i].time_ms, at);
        json_array_append_new(storage,
                              json_pack("{s:s,s:s,s:s,s:I}", "time", at, "team", st[i].team, "kind",
                                        st[i].kind, "bytes", (json_int_t)st[i].bytes));
    }
    wr_http_respond_json(req, 200,
                         json_pack("{s:s,s:s,s:s?,s:o,s:o}", "billed_seconds", mode, "group_by",
                                   group_names[g], "team", team, "rows", rows, "storage", storage));
out:
    for (size_t i = 0; i < n; i++)
        wr_usage_sum_fini(&v[i]);
    free(v);
    for (size_t i = 0; i < nst; i++)
        wr_usage_storage_fini(&st[i]);
    free(st);
}
