/* SPDX-License-Identifier: Apache-2.0 */
/* The networking data path's costs (src/runtime/nft.c, netslot.c), all inside private network
 * namespaces this program makes (nothing touches the machine's):
 *   1. policy update (wr_nft_set, one transaction) p50/p99 with 1 and with 10,000 other
 *      sandboxes' entries in the table; the one-transaction rebuild of the whole table at
 *      10,000; unset + set of a fresh sandbox;
 *   2. per-packet: 1-byte TCP round trips and TCP throughput from a real slot to an "internet"
 *      netns through the host's forward path, with no table and with the table holding
 *      10,000 sandboxes (the slot's entry one of them);
 *   3. making a slot (wr_netslot_make) and destroying it.
 * Usage: nft_update [N_OTHERS (10000)] [UPDATES (2000)] [ROUND_TRIPS (20000)] */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "../src/runtime/netslot.h"
#include "../src/runtime/nft.h"
#include "bench.h"

#define IP(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (d))

static const struct wr_cidr4 pool = {.addr = IP(198, 18, 0, 0), .len = 16}; /* 32768 slots */
static int host_ns, ext_ns;

static void enter(int fd)
{
    if (setns(fd, CLONE_NEWNET) < 0) {
        perror("setns");
        exit(1);
    }
}

static int sh(int ns, const char *cmd)
{
    pid_t pid = fork();
    int st;

    if (pid == 0) {
        if (ns >= 0)
            enter(ns);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static int new_ns(void)
{
    int fd;
    if (unshare(CLONE_NEWNET) < 0)
        return -1;
    fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    enter(host_ns);
    return fd;
}

static void report(const char *what, uint64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_u64);
    printf("  %-58s p50 %8.3f ms  p99 %8.3f ms  (n=%zu)\n", what, pct(v, n, 0.5), pct(v, n, 0.99),
           n);
}

static struct wr_cidr4 allow[3] = {
    {IP(198, 19, 1, 0), 24}, {IP(198, 19, 2, 0), 24}, {IP(203, 0, 113, 7), 32}};
static struct wr_cidr4 deny_all[1] = {{0, 0}};

static struct wr_nft_sandbox policy(uint32_t slot, bool variant)
{
    return (struct wr_nft_sandbox){.slot = slot,
                                   .allow = allow,
                                   .n_allow = variant ? 3 : 2,
                                   .deny = deny_all,
                                   .n_deny = variant ? 1 : 0,
                                   .accept_rest = !variant,
                                   .l7 = variant,
                                   .max_connections = 2500};
}

static void updates(struct wr_nft *t, uint32_t slot, size_t n, const char *what)
{
    uint64_t *v = calloc(n, sizeof(*v));
    struct wr_err err;

    for (size_t i = 0; i < n; i++) {
        struct wr_nft_sandbox sb = policy(slot, i % 2);
        uint64_t t0 = now_ns();
        if (wr_nft_set(t, &sb, &err) < 0) {
            printf("set: %s\n", err.msg);
            exit(1);
        }
        v[i] = now_ns() - t0;
    }
    report(what, v, n);
    free(v);
}

static void set_unset(struct wr_nft *t, uint32_t slot, size_t n, const char *what)
{
    uint64_t *v = calloc(n, sizeof(*v)), *u = calloc(n, sizeof(*u));
    struct wr_err err;
    char w2[128];

    for (size_t i = 0; i < n; i++) {
        struct wr_nft_sandbox sb = policy(slot, true);
        uint64_t t0 = now_ns();
        if (wr_nft_unset(t, slot, &err) < 0) {
            printf("unset: %s\n", err.msg);
            exit(1);
        }
        u[i] = now_ns() - t0;
        t0 = now_ns();
        if (wr_nft_set(t, &sb, &err) < 0) {
            printf("set: %s\n", err.msg);
            exit(1);
        }
        v[i] = now_ns() - t0;
    }
    snprintf(w2, sizeof(w2), "unset (sandbox leaves), %s", what);
    report(w2, u, n);
    snprintf(w2, sizeof(w2), "set of a new sandbox (counters made), %s", what);
    report(w2, v, n);
    free(v);
    free(u);
}

/* ---- traffic -------------------------------------------------------------------------------- */

struct server {
    int lfd;
    bool rr;
};

static void *serve(void *arg)
{
    struct server *s = arg;
    char buf[65536];

    for (;;) {
        int c = accept(s->lfd, NULL, NULL);
        ssize_t n;
        if (c < 0)
            return NULL;
        while ((n = read(c, buf, s->rr ? 1 : sizeof(buf))) > 0)
            if (s->rr && write(c, buf, (size_t)n) != n)
                break;
        close(c);
    }
}

static int sock_in(int ns)
{
    int s;
    enter(ns);
    s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    enter(host_ns);
    return s;
}

static int connect_from(int ns, uint32_t dst, uint16_t port)
{
    int s = sock_in(ns), one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};

    sa.sin_addr.s_addr = htonl(dst);
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        perror("connect");
        exit(1);
    }
    return s;
}

static void traffic(int slot_ns, size_t n_rr, const char *what)
{
    int c = connect_from(slot_ns, IP(198, 19, 1, 1), 9000);
    uint64_t *v = calloc(n_rr, sizeof(*v)), t0, bytes = 0;
    char b = 'x', big[65536] = {0};
    char w2[128];

    for (size_t i = 0; i < n_rr + 200; i++) {
        t0 = now_ns();
        if (write(c, &b, 1) != 1 || read(c, &b, 1) != 1) {
            perror("rr");
            exit(1);
        }
        if (i >= 200) /* warm-up */
            v[i - 200] = now_ns() - t0;
    }
    close(c);
    snprintf(w2, sizeof(w2), "1-byte TCP round trip, %s", what);
    qsort(v, n_rr, sizeof(*v), cmp_u64);
    printf("  %-58s p50 %8.1f us  p99 %8.1f us  (n=%zu)\n", w2, pct(v, n_rr, 0.5) * 1000,
           pct(v, n_rr, 0.99) * 1000, n_rr);
    c = connect_from(slot_ns, IP(198, 19, 1, 1), 9001);
    t0 = now_ns();
    while (now_ns() - t0 < 2000000000ull) {
        ssize_t n = write(c, big, sizeof(big));
        if (n <= 0)
            break;
        bytes += (uint64_t)n;
    }
    printf("  %-58s %8.2f Gbit/s\n", "TCP throughput (one stream, 2 s)",
           (double)bytes * 8 / ((double)(now_ns() - t0) / 1e9) / 1e9);
    /* the stream ends here, before the next phase changes the path under it */
    shutdown(c, SHUT_WR);
    while (read(c, big, sizeof(big)) > 0)
        ;
    close(c);
    free(v);
}

static int run(int argc, char **argv)
{
    size_t n_others = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000;
    size_t n_upd = argc > 2 ? strtoul(argv[2], NULL, 10) : 2000;
    size_t n_rr = argc > 3 ? strtoul(argv[3], NULL, 10) : 20000;
    char dir[64];
    struct wr_netslots_config scfg = {.dir = dir, .pool = pool};
    struct wr_netslots *slots;
    struct wr_err err;
    struct wr_nft *t;
    struct wr_nft_config cfg = {.table = "wrbench",
                                .pool = pool,
                                .dns_port = 5353,
                                .proxy_port = 3128,
                                .deny = wr_inet4_always_denied,
                                .n_deny = wr_inet4_n_always_denied};
    struct wr_nft_sandbox *sbs;
    uint32_t *ready;
    const uint32_t me = 0; /* the real slot */
    uint64_t t0;
    int slot_ns;

    host_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    snprintf(dir, sizeof(dir), "/tmp/warren-bench-net-%d", (int)getpid());
    sh(-1, "ip link set lo up");
    ext_ns = new_ns();
    {
        char cmd[256];
        snprintf(cmd, sizeof(cmd),
                 "ip link add wrbext type veth peer name eth0 netns /proc/%d/fd/%d && "
                 "ip addr add 198.19.255.254/31 dev wrbext && ip link set wrbext up && "
                 "ip route add 198.19.1.0/24 via 198.19.255.255",
                 (int)getpid(), ext_ns);
        if (sh(-1, cmd) != 0 ||
            sh(ext_ns, "ip link set lo up && ip link set eth0 up && "
                       "ip addr add 198.19.255.255/31 dev eth0 && ip addr add 198.19.1.1/32 dev lo "
                       "&& ip route add 198.18.0.0/15 via 198.19.255.254") != 0) {
            printf("topology failed\n");
            return 1;
        }
    }
    if (wr_netslots_open(&scfg, &slots, &err) < 0) {
        printf("%s\n", err.msg);
        return 1;
    }

    printf("slots (wr_netslot_make / destroy), 200 in sequence:\n");
    {
        uint64_t mk[200], ds[200];
        for (uint32_t i = 0; i < 200; i++) {
            t0 = now_ns();
            if (wr_netslot_make(slots, 100 + i, &err) < 0) {
                printf("make: %s\n", err.msg);
                return 1;
            }
            mk[i] = now_ns() - t0;
        }
        for (uint32_t i = 0; i < 200; i++) {
            t0 = now_ns();
            wr_netslot_destroy(slots, 100 + i, &err);
            ds[i] = now_ns() - t0;
        }
        report("make a slot", mk, 200);
        report("destroy a slot (umount + unlink)", ds, 200);
    }
    if (wr_netslot_make(slots, me, &err) < 0) {
        printf("make: %s\n", err.msg);
        return 1;
    }
    slot_ns = wr_netslot_open_fd(slots, me);

    /* servers in the internet netns */
    {
        static struct server rr = {.rr = true}, bulk = {.rr = false};
        pthread_t th;
        struct sockaddr_in sa = {.sin_family = AF_INET};
        int one = 1;
        rr.lfd = sock_in(ext_ns);
        bulk.lfd = sock_in(ext_ns);
        sa.sin_port = htons(9000);
        setsockopt(rr.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(rr.lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(rr.lfd, 16) < 0)
            return 1;
        sa.sin_port = htons(9001);
        if (bind(bulk.lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(bulk.lfd, 16) < 0)
            return 1;
        pthread_create(&th, NULL, serve, &rr);
        pthread_create(&th, NULL, serve, &bulk);
    }
    sh(-1, "sysctl -qw net.ipv4.ip_forward=1");

    printf("per packet, slot -> host forward path -> internet netns:\n");
    traffic(slot_ns, n_rr, "no table");

    printf("policy updates (wr_nft_set, one transaction each):\n");
    {
        uint32_t r1 = me;
        struct wr_nft_sandbox sb = policy(me, false);
        t0 = now_ns();
        if (wr_nft_open(&cfg, &sb, 1, &r1, 1, &t, &err) < 0) {
            printf("open: %s\n", err.msg);
            return 1;
        }
        printf("  %-58s %8.3f ms\n", "build the table with 1 sandbox",
               (double)(now_ns() - t0) / 1e6);
        traffic(slot_ns, n_rr, "table with 1 sandbox");
        updates(t, me, n_upd, "replace a policy, 1 sandbox in the table");
        set_unset(t, 7, n_upd / 4, "1 in the table");
        wr_nft_close(t);
    }
    sbs = calloc(n_others + 1, sizeof(*sbs));
    ready = calloc(n_others + 1, sizeof(*ready));
    for (size_t i = 0; i <= n_others; i++) {
        uint32_t slot = (uint32_t)(i == n_others ? me : 1000 + i);
        sbs[i] = policy(slot, i % 2);
        ready[i] = slot;
    }
    sbs[n_others] = policy(me, false);
    t0 = now_ns();
    if (wr_nft_open(&cfg, sbs, n_others + 1, ready, n_others + 1, &t, &err) < 0) {
        printf("open: %s\n", err.msg);
        return 1;
    }
    printf("  %-58s %8.1f ms\n", "rebuild the table with 10,000 sandboxes (one transaction)",
           (double)(now_ns() - t0) / 1e6);
    {
        char w[128];
        snprintf(w, sizeof(w), "replace a policy, %zu sandboxes in the table", n_others + 1);
        updates(t, 1000 + (uint32_t)n_others / 2, n_upd, w);
        snprintf(w, sizeof(w), "%zu in the table", n_others + 1);
        set_unset(t, 7, n_upd / 4, w);
    }
    printf("per packet with the table (%zu sandboxes):\n", n_others + 1);
    {
        struct wr_nft_sandbox sb = policy(me, false);
        wr_nft_set(t, &sb, &err);
        traffic(slot_ns, n_rr, "table with 10,000 sandboxes");
        sleep(5);
        traffic(slot_ns, n_rr, "table with 10,000 sandboxes, 5 s later");
    }
    wr_nft_destroy(t, &err);
    wr_netslot_destroy(slots, me, &err);
    wr_netslots_close(slots);
    rmdir(dir);
    return 0;
}

int main(int argc, char **argv)
{
    pid_t pid;
    int st;

    if (geteuid() != 0) {
        fprintf(stderr, "nft_update: needs root (it makes network namespaces)\n");
        return 1;
    }
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        if (unshare(CLONE_NEWNET | CLONE_NEWNS) < 0 ||
            mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
            perror("unshare");
            _exit(1);
        }
        st = run(argc, argv);
        fflush(stdout);
        _exit(st);
    }
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
