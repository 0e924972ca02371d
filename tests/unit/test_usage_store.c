/* SPDX-License-Identifier: Apache-2.0 */
/* The usage ledger's tables (store/usage.c): an interval written twice is counted once, the
 * last interval of a sandbox, sums per sandbox, template and day and per team, the time
 * bounds, and storage samples. */
#include "../../src/store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/util/xalloc.h"
#include "tap.h"

static char dir[] = "/tmp/test_usage_store.XXXXXX";

#define DAY_MS (86400 * 1000LL)
#define T0     (1796169600000LL) /* 2026-12-02T00:00:00Z */

static struct wr_usage_interval iv(const char *sb, const char *team, const char *tpl, int64_t seq,
                                   int64_t start, int64_t end, bool running)
{
    double secs = (double)(end - start) / 1000.0;
    return (struct wr_usage_interval){
        .sandbox = sb,
        .team = team,
        .template_name = tpl,
        .seq = seq,
        .start_ms = start,
        .end_ms = end,
        .running = running,
        .cpu_millis = 2000,
        .memory_bytes = 1ull << 30,
        .vcpu_seconds = running ? 2 * secs : 0,
        .gib_seconds = running ? secs : 0,
        .cpu_seconds = running ? secs / 2 : 0,
        .mem_gib_seconds = running ? secs / 4 : 0,
        .peak_memory_bytes = (uint64_t)seq << 20,
        .net_bytes_out = 5000000000ull,
        .cpu_end_ns = (uint64_t)seq * 1000000000ull,
        .net_out_end = (uint64_t)seq * 5000000000ull,
    };
}

static void free_sums(struct wr_usage_sum *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        wr_usage_sum_fini(&v[i]);
    free(v);
}

int main(void)
{
    struct wr_store *s = NULL;
    struct wr_err err;
    struct wr_usage_interval b[4];
    struct wr_usage_sum *v = NULL;
    struct wr_usage_storage st[2], *sv = NULL;
    size_t n = 0;
    int64_t seq = 0, end = 0;
    uint64_t cpu = 0, net = 0;
    char *path;

    if (mkdtemp(dir) == NULL)
        return 1;
    path = xasprintf("%s/state.db", dir);
    ok(wr_store_open(path, &s, &err) == 0, "open: %s", err.msg);
    if (s == NULL)
        return done();

    ok(wr_store_usage_last(s, "sb-a", &seq, &end, &cpu, &net, &err) == 0, "no interval yet");
    b[0] = iv("sb-a", "alpha", "base", 1, T0, T0 + 10000, true);
    b[1] = iv("sb-a", "alpha", "base", 2, T0 + 10000, T0 + 20000, false);
    b[2] = iv("sb-b", "alpha", "py", 1, T0 + DAY_MS, T0 + DAY_MS + 4000, true);
    b[3] = iv("sb-c", "beta", "base", 1, T0, T0 + 1000, true);
    ok(wr_store_usage_insert(s, b, 4, &err) == 0, "insert a batch: %s", err.msg);
    /* a restarted daemon writing seq 2 of sb-a again: nothing changes */
    b[1].end_ms = T0 + 99000;
    b[1].running = true;
    ok(wr_store_usage_insert(s, &b[1], 1, &err) == 0, "insert a stored key again");
    ok(wr_store_usage_last(s, "sb-a", &seq, &end, &cpu, &net, &err) == 1 && seq == 2 &&
           end == T0 + 20000 && cpu == 2000000000ull && net == 10000000000ull,
       "the last interval is the first one written under its key");

    ok(wr_store_usage_sum(s, "alpha", 0, 0, WR_USAGE_BY_SANDBOX, &v, &n, &err) == 0 && n == 2,
       "alpha: two sandboxes (%zu)", n);
    if (n == 2) {
        ok(strcmp(v[0].key, "sb-a") == 0 && v[0].intervals == 2 && v[0].running_seconds == 10 &&
               v[0].paused_seconds == 10 && v[0].vcpu_seconds == 20 && v[0].cpu_seconds == 5 &&
               v[0].gib_seconds == 10 && v[0].max_seconds == 20 &&
               v[0].peak_memory_bytes == 2u << 20 && v[0].net_bytes_out == 10000000000ull &&
               strcmp(v[0].template_name, "base") == 0 && v[0].first_ms == T0 &&
               v[0].last_ms == T0 + 20000,
           "sb-a's sums");
        ok(strcmp(v[1].key, "sb-b") == 0 && v[1].vcpu_seconds == 8, "sb-b's sums");
    }
    free_sums(v, n);

    ok(wr_store_usage_sum(s, NULL, 0, 0, WR_USAGE_BY_TEMPLATE, &v, &n, &err) == 0 && n == 3,
       "every team by template: alpha/base, alpha/py, beta/base (%zu)", n);
    if (n == 3)
        ok(strcmp(v[0].team, "alpha") == 0 && strcmp(v[0].key, "base") == 0 &&
               strcmp(v[2].team, "beta") == 0,
           "ordered by team and key");
    free_sums(v, n);

    ok(wr_store_usage_sum(s, "alpha", 0, 0, WR_USAGE_BY_DAY, &v, &n, &err) == 0 && n == 2,
       "alpha by day: two days (%zu)", n);
    if (n == 2)
        ok(strcmp(v[0].key, "2026-12-02") == 0 && strcmp(v[1].key, "2026-12-03") == 0 &&
               v[0].template_name == NULL && v[0].vcpu_seconds == 20,
           "the days' sums");
    free_sums(v, n);

    ok(wr_store_usage_sum(s, "alpha", T0 + 5000, T0 + DAY_MS, WR_USAGE_BY_SANDBOX, &v, &n, &err) ==
               0 &&
           n == 1 && v[0].intervals == 1 && v[0].paused_seconds == 10,
       "from/to: intervals that start in the span");
    free_sums(v, n);

    st[0] = (struct wr_usage_storage){T0, (char *)"alpha", (char *)"volume", 4096};
    st[1] = (struct wr_usage_storage){T0, (char *)"beta", (char *)"snapshot", 1u << 20};
    ok(wr_store_storage_insert(s, st, 2, &err) == 0, "storage sample: %s", err.msg);
    st[0].bytes = 8192; /* the same sample again: replaced */
    ok(wr_store_storage_insert(s, st, 1, &err) == 0, "storage sample again");
    ok(wr_store_storage_list(s, "alpha", 0, 0, &sv, &n, &err) == 0 && n == 1 &&
           sv[0].bytes == 8192 && strcmp(sv[0].kind, "volume") == 0,
       "alpha's storage");
    for (size_t i = 0; i < n; i++)
        wr_usage_storage_fini(&sv[i]);
    free(sv);

    wr_store_close(s);
    unlink(path);
    {
        char *p = xasprintf("%s-wal", path), *q = xasprintf("%s-shm", path);
        unlink(p);
        unlink(q);
        free(p);
        free(q);
    }
    rmdir(dir);
    free(path);
    return done();
}
