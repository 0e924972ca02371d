/* SPDX-License-Identifier: Apache-2.0 */
/* The metrics registry and its text format (src/util/metrics.h), and the audit rows of the store
 * (src/store/audit.c): insert, filters, cursor, prune, append-only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/store/store.h"
#include "../../src/util/buf.h"
#include "../../src/util/metrics.h"
#include "tap.h"

static char *render(void)
{
    struct wr_buf b = {0};

    wr_metrics_render(&b);
    return wr_buf_steal_str(&b);
}

static void emit_two(struct wr_metric_emitter *e, void *ctx)
{
    wr_metric_emit(e, 3, (const char *const[]){"a"});
    wr_metric_emit(e, *(double *)ctx, (const char *const[]){"b"});
}

static void test_registry(void)
{
    static const double b[] = {0.1, 1};
    static double fnval = 7.5;
    struct wr_metric *c = wr_metric_counter("t_requests_total", "Requests.\nTwo lines.",
                                            (const char *const[]){"route", NULL});
    struct wr_metric *h = wr_metric_histogram("t_duration_seconds", "Durations.", NULL, b, 2);
    struct wr_metric *g = wr_metric_gauge("t_depth", "Depth.", NULL);
    char *text;

    ok(c != NULL && h != NULL && g != NULL, "families registered");
    ok(wr_metric_counter("t_requests_total", "x", (const char *const[]){"route", NULL}) == c,
       "the same name and labels give the same family");
    ok(wr_metric_gauge("t_requests_total", "x", NULL) == NULL, "another type is refused");
    ok(wr_metric_histogram("t_bad_seconds", "x", NULL, (const double[]){1, 1}, 2) == NULL,
       "buckets must ascend");
    wr_metric_inc(c, (const char *const[]){"/v1/x"});
    wr_metric_add(c, (const char *const[]){"/v1/x"}, 2);
    wr_metric_add(c, (const char *const[]){"/v1/x"}, -5);
    wr_metric_inc(c, (const char *const[]){"a\"b\\c\nd"});
    is_int(wr_metric_value(c, (const char *const[]){"/v1/x"}), 3, "a counter adds, never down");
    wr_metric_observe(h, NULL, 0.05);
    wr_metric_observe(h, NULL, 0.5);
    wr_metric_observe(h, NULL, 5);
    wr_metric_set(g, NULL, 4);
    wr_metric_add(g, NULL, -1);
    wr_metric_gauge_fn("t_fn", "From a callback.", (const char *const[]){"k", NULL}, emit_two,
                       &fnval);
    text = render();
    ok(strstr(text, "# HELP t_requests_total Requests.\\nTwo lines.\n") != NULL, "help escaped");
    ok(strstr(text, "# TYPE t_requests_total counter\n") != NULL, "type line");
    ok(strstr(text, "t_requests_total{route=\"/v1/x\"} 3\n") != NULL, "a counter sample");
    ok(strstr(text, "t_requests_total{route=\"a\\\"b\\\\c\\nd\"} 1\n") != NULL,
       "label values escaped");
    ok(strstr(text, "t_duration_seconds_bucket{le=\"0.10000000000000001\"} 1\n") != NULL ||
           strstr(text, "t_duration_seconds_bucket{le=\"0.1\"} 1\n") != NULL,
       "first bucket");
    ok(strstr(text, "t_duration_seconds_bucket{le=\"1\"} 2\n") != NULL, "buckets cumulative");
    ok(strstr(text, "t_duration_seconds_bucket{le=\"+Inf\"} 3\n") != NULL, "+Inf bucket");
    ok(strstr(text, "t_duration_seconds_sum 5.5") != NULL, "sum");
    ok(strstr(text, "t_duration_seconds_count 3\n") != NULL, "count");
    ok(strstr(text, "t_depth 3\n") != NULL, "a gauge goes both ways");
    ok(strstr(text, "t_fn{k=\"a\"} 3\nt_fn{k=\"b\"} 7.5\n") != NULL, "callback series");
    free(text);
}

static void test_series_cap(void)
{
    struct wr_metric *c =
        wr_metric_counter("t_many_total", "Many.", (const char *const[]){"v", NULL});
    char v[32];
    char *text;

    for (int i = 0; i < WR_METRIC_SERIES + 50; i++) {
        snprintf(v, sizeof(v), "v%d", i);
        wr_metric_inc(c, (const char *const[]){v});
    }
    is_int(wr_metric_value(c, (const char *const[]){"other"}), 50,
           "past the cap, updates go to the \"other\" series");
    text = render();
    {
        size_t n = 0;
        for (const char *p = text; (p = strstr(p, "\nt_many_total{")) != NULL; p++)
            n++;
        is_int(n, WR_METRIC_SERIES + 1, "the series stay bounded");
    }
    free(text);
}

static void test_audit_store(void)
{
    char dir[] = "/tmp/test-metrics-XXXXXX";
    char path[64];
    struct wr_store *s;
    struct wr_err err;
    struct wr_audit_rec *v = NULL;
    size_t n = 0;
    int64_t deleted = 0;
    static const char *const actions[] = {"sandbox.create", "exec.start", "sandbox.delete"};

    if (mkdtemp(dir) == NULL)
        return;
    snprintf(path, sizeof(path), "%s/w.db", dir);
    ok(wr_store_open(path, &s, &err) == 0, "open the store (migration 13)");
    for (int i = 0; i < 3; i++) {
        struct wr_audit_rec r = {.time_ms = 1000 * (i + 1),
                                 .request_id = "r",
                                 .team = i == 2 ? "beta" : "alpha",
                                 .key_id = "k_1",
                                 .peer = "unix",
                                 .action = (char *)actions[i],
                                 .object_kind = "sandbox",
                                 .object_id = "sb_1",
                                 .method = "POST",
                                 .route = "/v1/sandboxes",
                                 .status = 200};
        ok(wr_store_audit_insert(s, &r, &err) == 0 && r.id > 0, "insert %d", i);
    }
    ok(wr_store_audit_list(s, &(struct wr_audit_filter){.team = "alpha"}, &v, &n, &err) == 0 &&
           n == 2,
       "a team's rows");
    for (size_t i = 0; i < n; i++)
        wr_audit_rec_fini(&v[i]);
    free(v);
    ok(wr_store_audit_list(s, &(struct wr_audit_filter){.action = "sandbox."}, &v, &n, &err) == 0 &&
           n == 2 && strcmp(v[1].action, "sandbox.delete") == 0,
       "an action prefix");
    for (size_t i = 0; i < n; i++)
        wr_audit_rec_fini(&v[i]);
    free(v);
    ok(wr_store_audit_list(s, &(struct wr_audit_filter){.from_ms = 2000, .to_ms = 3000}, &v, &n,
                           &err) == 0 &&
           n == 1 && strcmp(v[0].action, "exec.start") == 0,
       "a time window");
    for (size_t i = 0; i < n; i++)
        wr_audit_rec_fini(&v[i]);
    free(v);
    ok(wr_store_audit_list(s, &(struct wr_audit_filter){.after = 1, .limit = 1}, &v, &n, &err) ==
               0 &&
           n == 1 && v[0].id == 2,
       "the cursor and the limit");
    for (size_t i = 0; i < n; i++)
        wr_audit_rec_fini(&v[i]);
    free(v);
    ok(wr_store_audit_prune(s, 2500, 100, &deleted, &err) == 0 && deleted == 2,
       "prune deletes the rows before the cutoff");
    ok(wr_store_audit_list(s, &(struct wr_audit_filter){0}, &v, &n, &err) == 0 && n == 1,
       "one row left");
    for (size_t i = 0; i < n; i++)
        wr_audit_rec_fini(&v[i]);
    free(v);
    wr_store_close(s);
    for (size_t i = 0; i < 3; i++) {
        static const char *const sfx[] = {"", "-wal", "-shm"};
        snprintf(path, sizeof(path), "%s/w.db%s", dir, sfx[i]);
        (void)unlink(path);
    }
    (void)rmdir(dir);
}

int main(void)
{
    test_registry();
    test_series_cap();
    test_audit_store();
    return done();
}
