/* SPDX-License-Identifier: Apache-2.0 */
/* The egress log's sink (core/netlog.c) on a real loop and store: batches written at 256 or on
 * the tick, the per-sandbox bound, overflow counted, entries of unknown sandboxes dropped,
 * followers (backlog, live, unfollow, the end when the record goes), and the kernel's path: in a
 * private netns, a sandbox namespace's TCP and UDP flows become "kernel" entries with their bytes
 * and a dropped SYN logged by nft becomes a denied entry with the rule's prefix. */
#include "../../src/core/netlog.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../src/core/core_int.h"
#include "../../src/util/xalloc.h"
#include "tap.h"

static char dir[] = "/tmp/test_netlog.XXXXXX";
static uv_loop_t loop;
static struct wr_store *store;
static struct wr_manager mgr; /* only cfg.store and netlog: what the egress log uses */

static void add_sandbox(const char *id, const char *team)
{
    struct wr_sandbox_rec r = {.id = (char *)id,
                               .team = (char *)team,
                               .template_name = (char *)"base",
                               .state = WR_SB_RUNNING};
    struct wr_err err;
    if (wr_store_sandbox_insert(store, &r, &err) < 0)
        printf("# %s\n", err.msg);
}

static void add(const char *sb, uint16_t port)
{
    wr_netlog_add(&mgr, &(struct wr_netlog_entry){.sandbox_id = sb,
                                                  .proto = "tcp",
                                                  .addr = 0xc6120101,
                                                  .port = port,
                                                  .name = "example.test",
                                                  .bytes_out = 10,
                                                  .bytes_in = 20,
                                                  .allowed = true,
                                                  .rule = "allow_out example.test"});
}

static int64_t count(const char *sb)
{
    int64_t n = -1;
    struct wr_err err;
    (void)wr_store_netlog_count(store, sb, &n, &err);
    return n;
}

static void run_ms(int ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        uv_run(&loop, UV_RUN_NOWAIT);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= ms)
            break;
        usleep(5000);
    }
}

struct follower {
    int n;
    int64_t last;
    bool ordered, ended;
    uint16_t ports[16];
};

static void on_follow(void *ctx, const struct wr_netlog_rec *r)
{
    struct follower *f = ctx;
    if (r == NULL) {
        f->ended = true;
        return;
    }
    if (r->id <= f->last)
        f->ordered = false;
    f->last = r->id;
    if (f->n < 16)
        f->ports[f->n] = r->port;
    f->n++;
}

static void test_sink(void)
{
    struct wr_netlog *nl = NULL;
    struct wr_netlog_stats st;
    struct wr_netlog_rec *v = NULL;
    struct wr_netlog_sub *sub = NULL, *sub2 = NULL;
    struct follower f = {.ordered = true}, f2 = {.ordered = true};
    struct wr_err err;
    size_t n = 0;

    ok(wr_netlog_open(&loop, store, NULL, NULL, NULL, &nl, &err) == 0, "open without a pool");
    wr_manager_set_netlog(&mgr, nl);
    add_sandbox("sb-a", "team-a");
    add_sandbox("sb-b", "team-b");

    for (int i = 0; i < 300; i++)
        add("sb-a", 443);
    is_int(count("sb-a"), 0, "nothing written on the reporting path");
    uv_run(&loop, UV_RUN_NOWAIT);
    is_int(count("sb-a"), 300, "256 waiting: one flush soon writes them all");
    add("sb-a", 80);
    uv_run(&loop, UV_RUN_NOWAIT);
    is_int(count("sb-a"), 300, "one more waits for the tick");
    run_ms(1100);
    is_int(count("sb-a"), 301, "the tick writes it");

    ok(wr_netlog_query(&mgr, "team-a", "sb-a", 0, 10, &v, &n, &err) == 0 && n == 10,
       "query a page of 10");
    if (n == 10) {
        is_str(v[0].name, "example.test", "name");
        is_str(v[0].rule, "allow_out example.test", "rule");
        is_str(v[0].team, "team-a", "team");
    }
    for (size_t i = 0; i < n; i++)
        wr_netlog_rec_fini(&v[i]);
    free(v);
    ok(wr_netlog_query(&mgr, "team-b", "sb-a", 0, 10, &v, &n, &err) < 0 && err.kind == WR_ENOTFOUND,
       "another team's sandbox: not found");
    add("sb-a", 22);
    ok(wr_netlog_query(&mgr, NULL, "sb-a", 0, 1000, &v, &n, &err) == 0 && n == 302 &&
           v[301].port == 22,
       "a query sees what is buffered");
    for (size_t i = 0; i < n; i++)
        wr_netlog_rec_fini(&v[i]);
    free(v);

    wr_netlog_set_keep(nl, 100);
    add("sb-a", 1);
    run_ms(1100);
    is_int(count("sb-a"), 100, "bound: the newest 100 kept");
    ok(wr_netlog_query(&mgr, NULL, "sb-a", 0, 1000, &v, &n, &err) == 0 && n == 100 &&
           v[99].port == 1 && v[98].port == 22,
       "the newest are the ones kept");
    for (size_t i = 0; i < n; i++)
        wr_netlog_rec_fini(&v[i]);
    free(v);

    add("sb-none", 80);
    run_ms(1100);
    wr_netlog_get_stats(nl, &st);
    is_int(st.orphaned, 1, "an entry of a sandbox without a record is dropped");

    for (int i = 0; i < WR_NETLOG_PENDING_MAX + 500; i++)
        add("sb-b", 53);
    wr_netlog_get_stats(nl, &st);
    is_int(st.dropped, 500, "a burst beyond the buffer is counted and dropped");
    is_int(st.pending, WR_NETLOG_PENDING_MAX, "the buffer is full, not more");
    uv_run(&loop, UV_RUN_NOWAIT);
    wr_netlog_get_stats(nl, &st);
    ok(st.pending == WR_NETLOG_PENDING_MAX - 1024, "one loop iteration writes one batch of 1024");
    while (wr_netlog_get_stats(nl, &st), st.pending > 0)
        uv_run(&loop, UV_RUN_NOWAIT);
    is_int(count("sb-b"), 100, "the burst is written in batches (and bounded)");

    /* Cost on the loop: a full buffer written at once, then again past the bound (trimmed). */
    {
        struct timespec t0, t1, t2;
        wr_netlog_set_keep(nl, 0);
        add_sandbox("sb-c", "team-c");
        for (int i = 0; i < WR_NETLOG_PENDING_MAX; i++)
            add("sb-c", 443);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (wr_netlog_get_stats(nl, &st), st.pending > 0)
            uv_run(&loop, UV_RUN_NOWAIT);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        for (int i = 0; i < WR_NETLOG_PENDING_MAX; i++)
            add("sb-c", 443);
        while (wr_netlog_get_stats(nl, &st), st.pending > 0)
            uv_run(&loop, UV_RUN_NOWAIT);
        clock_gettime(CLOCK_MONOTONIC, &t2);
        is_int(count("sb-c"), WR_NETLOG_KEEP_DEFAULT, "the default bound holds");
        printf("# flush of %d entries: %.1f ms; of %d more past the bound (trim %d): %.1f ms\n",
               WR_NETLOG_PENDING_MAX,
               (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
               WR_NETLOG_PENDING_MAX, 2 * WR_NETLOG_PENDING_MAX - WR_NETLOG_KEEP_DEFAULT,
               (double)(t2.tv_sec - t1.tv_sec) * 1e3 + (double)(t2.tv_nsec - t1.tv_nsec) / 1e6);
        wr_netlog_set_keep(nl, 100);
    }

    /* Followers. */
    ok(wr_netlog_follow(&mgr, "team-b", "sb-b", 0, on_follow, &f, &sub, &err) == 0, "follow sb-b");
    is_int(f.n, 100, "the backlog during the call");
    ok(wr_netlog_follow(&mgr, "team-b", "sb-b", 0, on_follow, &f2, &sub2, &err) == 0,
       "a second follower");
    wr_netlog_unfollow(sub2);
    ok(wr_netlog_follow(&mgr, "team-a", "sb-b", 0, on_follow, &f2, &sub2, &err) < 0 &&
           err.kind == WR_ENOTFOUND,
       "another team's: not found");
    f2.n = 0;
    add("sb-b", 7);
    add("sb-b", 8);
    add("sb-a", 9);
    run_ms(1100);
    is_int(f.n, 102, "two live entries");
    ok(f.ports[0] == 53 && f.ordered, "in id order");
    is_int(f2.n, 0, "the unfollowed one got nothing");
    ok(!f.ended, "not ended while the record is there");
    ok(wr_store_sandbox_delete(store, "sb-b", &err) == 0, "delete sb-b's record");
    run_ms(1100);
    ok(f.ended, "the follower is ended when the record goes");
    is_int(count("sb-b"), 0, "its entries went with it");

    wr_manager_set_netlog(&mgr, NULL);
    wr_netlog_close(nl);
    uv_run(&loop, UV_RUN_NOWAIT);
}

/* ---- the kernel's path, in a private netns ------------------------------------------------------
 */

#define HOST_IP "198.19.0.1"
#define SB_IP   "198.19.0.2"

/* The slot table: SB_IP is sb-k's until its slot is released. */
static bool released;
static bool lookup(void *arg, uint32_t saddr, const char **id)
{
    uint32_t sb;
    (void)wr_inet4_parse(SB_IP, &sb);
    if (saddr != sb || released)
        return false;
    *id = "sb-k";
    return true;
}

static struct sockaddr_in sin_of(const char *ip, uint16_t port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

static void sandbox_side(int ready, int go)
{
    struct sockaddr_in a;
    char buf[700], c;
    int fd;

    if (unshare(CLONE_NEWNET) < 0)
        _exit(3);
    (void)!write(ready, "r", 1);
    if (read(go, &c, 1) != 1)
        _exit(4);
    memset(buf, 'x', sizeof(buf));
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    a = sin_of(HOST_IP, 5000);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
        _exit(5);
    (void)!write(fd, buf, 700);
    (void)!read(fd, &c, 1);
    close(fd);
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    a = sin_of(HOST_IP, 5001);
    (void)sendto(fd, buf, 200, 0, (struct sockaddr *)&a, sizeof(a));
    close(fd);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    a = sin_of(HOST_IP, 5002);
    (void)connect(fd, (struct sockaddr *)&a, sizeof(a));
    (void)!write(ready, "d", 1);
    (void)!read(go, &c, 1);
    _exit(0);
}

static int kernel_path(void)
{
    struct wr_cidr4 pool;
    struct wr_netlog *nl = NULL;
    struct wr_netlog_rec *v = NULL;
    struct wr_err err;
    int ready[2], go[2], lt, lu, fd, one = 1;
    size_t n = 0;
    char c, cmd[1024];
    pid_t pid;

    (void)wr_cidr4_parse("198.19.0.0/24", false, &pool, NULL);
    if (system("ip link set lo up") != 0 || pipe(ready) < 0 || pipe(go) < 0)
        return 1;
    pid = fork();
    if (pid == 0)
        sandbox_side(ready[1], go[0]);
    if (read(ready[0], &c, 1) != 1)
        return 1;
    snprintf(cmd, sizeof(cmd),
             "ip link add wrt0 type veth peer name eth0 netns %d && "
             "ip addr add " HOST_IP "/24 dev wrt0 && ip link set wrt0 up && "
             "nsenter -t %d -n sh -c 'ip link set lo up && ip addr add " SB_IP "/24 dev eth0 && "
             "ip link set eth0 up'",
             (int)pid, (int)pid);
    ok(system(cmd) == 0, "veth pair");
    ok(system("nft -f - <<'EOF'\n"
              "table inet wrtest { chain in { type filter hook input priority 0;\n"
              "  ct state established,related accept\n"
              "  tcp dport 5002 log group 9 prefix \"deny_out 0.0.0.0/0\" drop\n"
              "  ct state new accept;\n}\n}\n"
              "EOF") == 0,
       "nft table");
    wr_err_clear(&err);
    ok(wr_netlog_open(&loop, store, &pool, lookup, NULL, &nl, &err) == 0, "open with the pool: %s",
       err.msg);
    ok(nl && wr_netlog_listen_nflog(nl, 9, &err) == 0, "listen to nflog group 9: %s", err.msg);
    if (nl == NULL)
        return 1;
    wr_manager_set_netlog(&mgr, nl);
    add_sandbox("sb-k", "team-k");

    lt = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    lu = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    setsockopt(lt, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    {
        struct sockaddr_in a = sin_of(HOST_IP, 5000), b = sin_of(HOST_IP, 5001);
        if (bind(lt, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lt, 4) < 0 ||
            bind(lu, (struct sockaddr *)&b, sizeof(b)) < 0)
            return 1;
    }
    (void)!write(go[1], "g", 1);
    fd = accept(lt, NULL, NULL);
    {
        char buf[700];
        size_t got = 0;
        ssize_t r;
        while (got < 700 && (r = read(fd, buf, sizeof(buf))) > 0)
            got += (size_t)r;
        (void)!write(fd, "k", 1);
    }
    close(fd);
    if (read(ready[0], &c, 1) != 1)
        return 1;
    run_ms(300);
    /* The release: the address stops resolving, then its connections are flushed. */
    released = true;
    {
        uint32_t a;
        (void)wr_inet4_parse(SB_IP, &a);
        wr_netlog_released(nl, a, "sb-k");
    }
    ok(system("conntrack -F 2>/dev/null") == 0, "flush conntrack (the slot's release)");
    run_ms(1500);
    ok(wr_netlog_query(&mgr, "team-k", "sb-k", 0, 100, &v, &n, &err) == 0, "query sb-k");
    {
        const struct wr_netlog_rec *tcp = NULL, *udp = NULL, *deny = NULL;
        for (size_t i = 0; i < n; i++) {
            if (v[i].allowed && v[i].port == 5000 && strcmp(v[i].proto, "tcp") == 0)
                tcp = &v[i];
            if (v[i].allowed && v[i].port == 5001 && strcmp(v[i].proto, "udp") == 0)
                udp = &v[i];
            if (!v[i].allowed && v[i].port == 5002 && deny == NULL)
                deny = &v[i];
        }
        ok(tcp && tcp->bytes_out >= 700 && tcp->bytes_in >= 1 && strcmp(tcp->rule, "kernel") == 0,
           "the tcp flow, ended by the release's flush, is the released sandbox's: bytes out "
           "%llu, in %llu, rule kernel",
           tcp ? (unsigned long long)tcp->bytes_out : 0,
           tcp ? (unsigned long long)tcp->bytes_in : 0);
        ok(tcp && tcp->addr == 0xc6130001 && tcp->time_ms > 1600000000000, "address and time");
        ok(udp && udp->bytes_out == 228, "the udp flow: 200 bytes + headers");
        ok(deny && strcmp(deny->rule, "deny_out 0.0.0.0/0") == 0 && strcmp(deny->proto, "tcp") == 0,
           "the dropped SYN: denied, the prefix as the rule");
    }
    for (size_t i = 0; i < n; i++)
        wr_netlog_rec_fini(&v[i]);
    free(v);
    (void)!write(go[1], "q", 1);
    waitpid(pid, NULL, 0);
    close(lt);
    close(lu);
    wr_manager_set_netlog(&mgr, NULL);
    wr_netlog_close(nl);
    uv_run(&loop, UV_RUN_NOWAIT);
    return 0;
}

int main(void)
{
    struct wr_err err;
    char *path;
    int st = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (mkdtemp(dir) == NULL)
        return 1;
    path = xasprintf("%s/state.db", dir);
    uv_loop_init(&loop);
    if (wr_store_open(path, &store, &err) < 0) {
        printf("# %s\n", err.msg);
        return 1;
    }
    mgr.cfg.store = store;
    mgr.loop = &loop;
    test_sink();

    if (geteuid() == 0) {
        /* The child numbers its lines on from ours and hands its counters back. */
        int counts[2] = {0, 0}, p[2];
        pid_t pid;
        if (pipe(p) < 0)
            return 1;
        pid = fork();
        if (pid == 0) {
            close(p[0]);
            if (unshare(CLONE_NEWNET) < 0)
                _exit(1);
            if (kernel_path() != 0)
                ok(0, "the kernel path's setup");
            counts[0] = tap_n;
            counts[1] = tap_failed;
            (void)!write(p[1], counts, sizeof(counts));
            _exit(0);
        }
        close(p[1]);
        if (read(p[0], counts, sizeof(counts)) == sizeof(counts)) {
            tap_n = counts[0];
            tap_failed = counts[1];
        }
        close(p[0]);
        ok(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "the kernel path's process ended");
    }
    wr_store_close(store);
    uv_loop_close(&loop);
    {
        char *cmd = xasprintf("rm -rf %s", dir);
        (void)!system(cmd);
        free(cmd);
    }
    free(path);
    return done();
}
