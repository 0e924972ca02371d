/* SPDX-License-Identifier: Apache-2.0 */
/* The egress log's table (store/netlog.c): batches, the team taken from the record, entries of
 * unknown sandboxes dropped, the cursor, trimming the oldest, ids never reused, and the rows
 * going with the sandbox's record. */
#include "../../src/store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/util/xalloc.h"
#include "tap.h"

static char dir[] = "/tmp/test_netlog_store.XXXXXX";

static int add_sandbox(struct wr_store *s, const char *id, const char *team)
{
    struct wr_sandbox_rec r = {
        .id = (char *)id,
        .team = (char *)team,
        .template_name = (char *)"base",
        .state = WR_SB_RUNNING,
        .created_ms = 1700000000000,
        .deadline_ms = 1700000300000,
    };
    struct wr_err err;
    int rc = wr_store_sandbox_insert(s, &r, &err);
    if (rc < 0)
        printf("# %s\n", err.msg);
    return rc;
}

static struct wr_netlog_rec row(const char *sb, int64_t t, uint16_t port)
{
    return (struct wr_netlog_rec){
        .sandbox_id = (char *)sb,
        .time_ms = t,
        .proto = (char *)"tcp",
        .addr = 0xc6120101, /* 198.18.1.1 */
        .port = port,
        .name = port == 443 ? (char *)"example.test" : NULL,
        .bytes_out = 5000000000ull, /* above 32 bits */
        .bytes_in = 42,
        .allowed = port != 25,
        .rule = port == 25 ? (char *)"deny_out 0.0.0.0/0" : NULL,
    };
}

static void free_rows(struct wr_netlog_rec *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        wr_netlog_rec_fini(&v[i]);
    free(v);
}

int main(void)
{
    struct wr_store *s = NULL;
    struct wr_err err;
    struct wr_netlog_rec batch[5], *v = NULL;
    size_t n = 0, stored = 0;
    int64_t cnt = -1, del = -1, last;
    char *path;

    if (mkdtemp(dir) == NULL)
        return 1;
    path = xasprintf("%s/state.db", dir);
    ok(wr_store_open(path, &s, &err) == 0, "open: %s", err.msg);
    if (s == NULL)
        return done();
    ok(add_sandbox(s, "sb-a", "team-a") == 0 && add_sandbox(s, "sb-b", "team-b") == 0,
       "two sandboxes");

    batch[0] = row("sb-a", 1000, 443);
    batch[1] = row("sb-a", 1001, 25);
    batch[2] = row("sb-gone", 1002, 80); /* no record */
    batch[3] = row("sb-b", 1003, 80);
    batch[4] = row("sb-a", 1004, 80);
    ok(wr_store_netlog_insert(s, batch, 5, &stored, &err) == 0, "insert a batch: %s", err.msg);
    is_int(stored, 4, "four stored (the unknown sandbox's entry is not)");
    ok(batch[0].id > 0 && batch[1].id > batch[0].id && batch[2].id == 0 &&
           batch[4].id > batch[3].id,
       "ids ascending, 0 for the dropped one");

    ok(wr_store_netlog_list(s, "sb-a", 0, 0, &v, &n, &err) == 0, "list sb-a");
    is_int(n, 3, "three entries of sb-a");
    if (n == 3) {
        ok(v[0].id == batch[0].id && v[2].id == batch[4].id, "oldest first");
        is_str(v[0].team, "team-a", "team from the sandbox's record");
        is_str(v[0].name, "example.test", "name");
        ok(v[1].name == NULL, "no name is NULL");
        ok(v[0].addr == 0xc6120101 && v[0].port == 443 && strcmp(v[0].proto, "tcp") == 0,
           "address, port, proto");
        ok(v[0].bytes_out == 5000000000ull && v[0].bytes_in == 42, "64-bit byte counts");
        ok(v[0].allowed && !v[1].allowed, "allowed");
        is_str(v[1].rule, "deny_out 0.0.0.0/0", "rule");
        is_str(v[0].rule, "", "no rule is \"\"");
        is_int(v[0].time_ms, 1000, "time");
    }
    free_rows(v, n);

    ok(wr_store_netlog_list(s, "sb-a", batch[0].id, 1, &v, &n, &err) == 0 && n == 1 &&
           v[0].id == batch[1].id,
       "cursor and limit: the one after the first");
    free_rows(v, n);
    ok(wr_store_netlog_list(s, "sb-a", batch[4].id, 10, &v, &n, &err) == 0 && n == 0,
       "nothing after the newest");
    free_rows(v, n);
    ok(wr_store_netlog_list(s, "sb-b", 0, 0, &v, &n, &err) == 0 && n == 1, "sb-b has its one");
    free_rows(v, n);

    /* Bound: 1,500 more for sb-a, then trim to the newest 1,000. */
    {
        struct wr_netlog_rec *many = xcalloc(1500, sizeof(*many));
        for (int i = 0; i < 1500; i++)
            many[i] = row("sb-a", 2000 + i, 80);
        ok(wr_store_netlog_insert(s, many, 1500, &stored, &err) == 0 && stored == 1500,
           "a batch of 1500");
        last = many[1499].id;
        free(many);
    }
    ok(wr_store_netlog_count(s, "sb-a", &cnt, &err) == 0 && cnt == 1503, "count 1503");
    ok(wr_store_netlog_trim(s, "sb-a", cnt - 1000, &del, &err) == 0 && del == 503,
       "trim the 503 oldest");
    ok(wr_store_netlog_count(s, "sb-a", &cnt, &err) == 0 && cnt == 1000, "count 1000");
    ok(wr_store_netlog_list(s, "sb-a", 0, 5000, &v, &n, &err) == 0 && n == 1000 &&
           v[0].time_ms == 2000 + 500 && v[999].id == last,
       "list caps at 1000 and the newest are kept");
    free_rows(v, n);
    ok(wr_store_netlog_count(s, "sb-b", &cnt, &err) == 0 && cnt == 1,
       "the other sandbox's rows are untouched");

    /* Gone with the record; ids not reused. */
    ok(wr_store_sandbox_delete(s, "sb-a", &err) == 0, "delete sb-a's record");
    ok(wr_store_netlog_count(s, "sb-a", &cnt, &err) == 0 && cnt == 0, "its entries went with it");
    ok(add_sandbox(s, "sb-a", "team-a") == 0, "a sandbox of the same id again");
    batch[0] = row("sb-a", 9000, 80);
    ok(wr_store_netlog_insert(s, batch, 1, &stored, &err) == 0 && batch[0].id > last,
       "a new id is above every earlier one");

    wr_store_close(s);
    unlink(path);
    {
        char *p2 = xasprintf("%s-wal", path), *p3 = xasprintf("%s-shm", path);
        unlink(p2);
        unlink(p3);
        free(p2);
        free(p3);
    }
    rmdir(dir);
    free(path);
    return done();
}
