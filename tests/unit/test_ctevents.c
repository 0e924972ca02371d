/* SPDX-License-Identifier: Apache-2.0 */
/* Conntrack events and NFLOG, against the kernel, in a private network namespace: a forked child
 * unshares its netns ("host"), makes a second one ("sandbox", a grandchild) joined by a veth
 * pair on 198.19.0.0/24, loads an nft table of its own there, and checks what the sandbox's
 * traffic gives: the flows' events with their bytes, the pool filter, a redirect seen as DNAT,
 * and a dropped SYN logged with its prefix. Nothing leaves the two namespaces. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../src/runtime/ctevents.h"
#include "../../src/runtime/nflog.h"
#include "tap.h"

#define HOST_IP "198.19.0.1"
#define SB_IP   "198.19.0.2"
#define BURST   5000

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    int rc;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    rc = system(cmd);
    if (rc != 0)
        printf("# `%s`: %d\n", cmd, rc);
    return rc;
}

static struct sockaddr_in sin_of(const char *ip, uint16_t port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

static int tcp_connect(const char *ip, uint16_t port)
{
    struct sockaddr_in a = sin_of(ip, port);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int listen_on(int type, const char *ip, uint16_t port)
{
    struct sockaddr_in a = sin_of(ip, port);
    int one = 1, fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        (type == SOCK_STREAM && listen(fd, 8) < 0)) {
        perror("bind");
        exit(2);
    }
    return fd;
}

static void read_all(int fd, size_t n)
{
    char buf[4096];
    while (n > 0) {
        ssize_t r = read(fd, buf, n < sizeof(buf) ? n : sizeof(buf));
        if (r <= 0)
            break;
        n -= (size_t)r;
    }
}

static void write_n(int fd, size_t n)
{
    char buf[4096];
    memset(buf, 'x', sizeof(buf));
    while (n > 0) {
        ssize_t w = write(fd, buf, n < sizeof(buf) ? n : sizeof(buf));
        if (w <= 0)
            break;
        n -= (size_t)w;
    }
}

/* The sandbox: waits for "go", then makes its connections, then waits for "quit". */
static void sandbox(int ready, int go)
{
    char c;
    int fd;

    if (unshare(CLONE_NEWNET) < 0)
        _exit(3);
    (void)!write(ready, "r", 1);
    if (read(go, &c, 1) != 1)
        _exit(4);
    /* 1: TCP, 1000 bytes out, 500 back. */
    fd = tcp_connect(HOST_IP, 5000);
    if (fd < 0)
        _exit(5);
    write_n(fd, 1000);
    read_all(fd, 500);
    close(fd);
    /* 2: UDP, 300 bytes. */
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    {
        struct sockaddr_in a = sin_of(HOST_IP, 5001);
        char buf[300];
        memset(buf, 'u', sizeof(buf));
        (void)sendto(fd, buf, sizeof(buf), 0, (struct sockaddr *)&a, sizeof(a));
    }
    close(fd);
    /* 3: to port 5004, which the host redirects to 5000. */
    fd = tcp_connect(HOST_IP, 5004);
    if (fd >= 0) {
        write_n(fd, 10);
        close(fd);
    }
    /* 4: to port 5002, whose SYNs the host drops and logs. */
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    {
        struct sockaddr_in a = sin_of(HOST_IP, 5002);
        (void)connect(fd, (struct sockaddr *)&a, sizeof(a));
    }
    (void)!write(ready, "d", 1);
    /* 'b': a burst of BURST flows (one datagram each, from ports of their own), then 'q'. */
    if (read(go, &c, 1) == 1 && c == 'b') {
        struct sockaddr_in a = sin_of(HOST_IP, 5005);
        for (int i = 0; i < BURST; i++) {
            struct sockaddr_in from = sin_of(SB_IP, (uint16_t)(20000 + i));
            fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            (void)bind(fd, (struct sockaddr *)&from, sizeof(from));
            (void)sendto(fd, "b", 1, 0, (struct sockaddr *)&a, sizeof(a));
            close(fd);
        }
        (void)!write(ready, "d", 1);
        (void)!read(go, &c, 1);
    }
    _exit(0);
}

#define MAX_EV 64
static struct wr_ct_event evs[MAX_EV];
static int n_ev;

static void on_ct(void *arg, const struct wr_ct_event *ev)
{
    if (n_ev < MAX_EV)
        evs[n_ev++] = *ev;
}

struct pkt {
    uint32_t src, dst;
    uint8_t proto;
    uint16_t dport;
    char prefix[64];
};
static struct pkt pkts[MAX_EV];
static int n_pkt;

static void on_log(void *arg, const struct wr_nflog_pkt *p)
{
    if (n_pkt < MAX_EV) {
        pkts[n_pkt] = (struct pkt){p->src, p->dst, p->proto, p->dport, ""};
        snprintf(pkts[n_pkt].prefix, sizeof(pkts[n_pkt].prefix), "%s", p->prefix);
        n_pkt++;
    }
}

static const struct wr_ct_event *find_ev(unsigned type, uint8_t proto, uint16_t dport)
{
    for (int i = 0; i < n_ev; i++)
        if (evs[i].type == type && evs[i].proto == proto && evs[i].dport == dport)
            return &evs[i];
    return NULL;
}

/* Poll fd for up to ms, reading with fn each time it is readable, until want() holds. */
static void pump(int fd, int ms, int (*rd)(void), int (*want)(void))
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!want()) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int left;
        clock_gettime(CLOCK_MONOTONIC, &t);
        left = ms - (int)((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        if (left <= 0)
            break;
        if (poll(&p, 1, left) > 0)
            (void)rd();
    }
}

static int n_burst;
static void on_burst(void *arg, const struct wr_ct_event *ev)
{
    if (ev->type == WR_CT_EV_DESTROY && ev->dport == 5005)
        n_burst++;
}
static struct wr_ctevents *ct, *ct_lo;
static int n_lo;
static void on_lo(void *arg, const struct wr_ct_event *ev)
{
    if (ev->type == WR_CT_EV_DESTROY && ev->dport == 5003)
        n_lo++;
}
static int rd_lo(void)
{
    return wr_rt_ctevents_read(ct_lo, on_lo, NULL, NULL);
}
static int want_lo(void)
{
    return n_lo > 0;
}
static struct wr_nflog *nl;
static int rd_ct(void)
{
    struct wr_err err;
    int n = wr_rt_ctevents_read(ct, on_ct, NULL, &err);
    if (n < 0)
        printf("# %s\n", err.msg);
    return n;
}
static int rd_log(void)
{
    struct wr_err err;
    int n = wr_rt_nflog_read(nl, on_log, NULL, &err);
    if (n < 0)
        printf("# %s\n", err.msg);
    return n;
}
static int want_destroys(void)
{
    return find_ev(WR_CT_EV_DESTROY, IPPROTO_TCP, 5000) &&
           find_ev(WR_CT_EV_DESTROY, IPPROTO_UDP, 5001) &&
           find_ev(WR_CT_EV_DESTROY, IPPROTO_TCP, 5004);
}
static int want_news(void)
{
    return find_ev(WR_CT_EV_NEW, IPPROTO_TCP, 5000) && find_ev(WR_CT_EV_NEW, IPPROTO_UDP, 5001);
}
static int want_log(void)
{
    return n_pkt > 0;
}
static int want_log_never(void)
{
    return 0;
}

static int in_netns(void)
{
    struct wr_cidr4 pool = {0}, other = {0};
    struct wr_err err;
    int ready[2], go[2], lt, lu, llo, fd;
    pid_t pid;
    char c;

    (void)wr_cidr4_parse(SB_IP "/32", false, &pool, NULL);
    (void)wr_cidr4_parse("127.0.0.1/32", false, &other, NULL);
    if (sh("ip link set lo up") != 0)
        return 1;
    if (pipe(ready) < 0 || pipe(go) < 0)
        return 1;
    pid = fork();
    if (pid == 0)
        sandbox(ready[1], go[0]);
    if (read(ready[0], &c, 1) != 1)
        return 1;
    ok(sh("ip link add wrt0 type veth peer name eth0 netns %d && "
          "ip addr add " HOST_IP "/24 dev wrt0 && ip link set wrt0 up && "
          "nsenter -t %d -n sh -c 'ip link set lo up && ip addr add " SB_IP "/24 dev eth0 && "
          "ip link set eth0 up'",
          (int)pid, (int)pid) == 0,
       "veth pair between the two namespaces");
    ok(sh("nft -f - <<'EOF'\n"
          "table inet wrtest {\n"
          "  chain pre { type nat hook prerouting priority -100; tcp dport 5004 redirect to :5000; "
          "}\n"
          "  chain in { type filter hook input priority 0;\n"
          "    ct state established,related accept\n"
          "    tcp dport 5002 log group 7 prefix \"deny_out " HOST_IP "/32\" drop\n"
          "    ct state new accept; }\n"
          "  chain out { type filter hook output priority 0; ct state new accept; }\n"
          "}\n"
          "EOF") == 0,
       "nft table with a log group rule");

    ok(wr_rt_ctevents_open(&pool, WR_CT_EV_NEW | WR_CT_EV_DESTROY, &ct, &err) == 0,
       "ctevents open: %s", err.msg);
    ok(wr_rt_ctevents_open(&other, WR_CT_EV_DESTROY, &ct_lo, &err) == 0,
       "ctevents open for 127.0.0.1/32: %s", err.msg);
    ok(wr_rt_nflog_open(7, &nl, &err) == 0, "nflog open: %s", err.msg);
    {
        struct wr_nflog *nl2 = NULL;
        ok(wr_rt_nflog_open(7, &nl2, &err) < 0 && err.kind == WR_ECONFLICT,
           "a second socket on the group is refused (conflict): %s", err.msg);
        wr_rt_nflog_close(nl2);
    }
    if (ct == NULL || nl == NULL || ct_lo == NULL)
        return done();
    {
        FILE *f = fopen("/proc/sys/net/netfilter/nf_conntrack_acct", "r");
        int v = f && fscanf(f, "%d", &v) == 1 ? v : -1;
        is_int(v, 1, "nf_conntrack_acct is on");
        if (f)
            fclose(f);
    }

    lt = listen_on(SOCK_STREAM, HOST_IP, 5000);
    lu = listen_on(SOCK_DGRAM, HOST_IP, 5001);
    /* A flow the pool does not hold: host to itself. */
    llo = listen_on(SOCK_STREAM, "127.0.0.1", 5003);
    fd = tcp_connect("127.0.0.1", 5003);
    write_n(fd, 100);
    close(fd);

    (void)!write(go[1], "g", 1);
    fd = accept(lt, NULL, NULL);
    read_all(fd, 1000);
    write_n(fd, 500);
    close(fd);
    {
        char buf[512];
        ssize_t n = recv(lu, buf, sizeof(buf), 0);
        is_int(n, 300, "udp datagram received");
    }
    fd = accept(lt, NULL, NULL);
    read_all(fd, 10);
    close(fd);
    if (read(ready[0], &c, 1) != 1)
        return 1;

    pump(wr_rt_ctevents_fd(ct), 2000, rd_ct, want_news);
    ok(want_news(), "NEW events of the tcp and udp flows");
    /* End every tracked flow now (as the daemon does when a slot is released). */
    sh("conntrack -F 2>/dev/null");
    pump(wr_rt_ctevents_fd(ct), 3000, rd_ct, want_destroys);
    ok(want_destroys(), "DESTROY events of the three flows (%d events)", n_ev);
    {
        const struct wr_ct_event *e = find_ev(WR_CT_EV_DESTROY, IPPROTO_TCP, 5000);
        uint32_t h = 0, s = 0;
        (void)wr_inet4_parse(HOST_IP, &h);
        (void)wr_inet4_parse(SB_IP, &s);
        ok(e && e->src == s && e->dst == h && e->sport != 0, "tcp: addresses and ports");
        ok(e && e->bytes_out >= 1000 && e->bytes_out < 1000 + 80 * e->packets_out,
           "tcp: bytes out %llu in %llu packets", e ? (unsigned long long)e->bytes_out : 0,
           e ? (unsigned long long)e->packets_out : 0);
        ok(e && e->bytes_in >= 500 && e->bytes_in < 500 + 80 * e->packets_in,
           "tcp: bytes in %llu in %llu packets", e ? (unsigned long long)e->bytes_in : 0,
           e ? (unsigned long long)e->packets_in : 0);
        ok(e && !e->dnat, "tcp: not redirected");
        ok(e && e->start_ms > 1600000000000 && e->end_ms >= e->start_ms,
           "tcp: start and end times");
        e = find_ev(WR_CT_EV_DESTROY, IPPROTO_UDP, 5001);
        ok(e && e->bytes_out == 328 && e->packets_out == 1 && e->bytes_in == 0,
           "udp: 300 bytes + headers out, nothing in (%llu)",
           e ? (unsigned long long)e->bytes_out : 0);
        e = find_ev(WR_CT_EV_DESTROY, IPPROTO_TCP, 5004);
        ok(e && e->dnat, "redirected flow is marked dnat");
    }
    {
        bool only_pool = true;
        for (int i = 0; i < n_ev; i++)
            if (evs[i].src != pool.addr || evs[i].dport == 5003)
                only_pool = false;
        ok(only_pool, "only flows from the pool (the host's loopback flow is filtered)");
        pump(wr_rt_ctevents_fd(ct_lo), 2000, rd_lo, want_lo);
        ok(n_lo == 1, "the loopback flow was tracked: another pool sees it (%d)", n_lo);
        ok(find_ev(WR_CT_EV_NEW, IPPROTO_TCP, 5002) == NULL &&
               find_ev(WR_CT_EV_DESTROY, IPPROTO_TCP, 5002) == NULL,
           "the dropped connection is never a tracked flow");
    }
    pump(wr_rt_nflog_fd(nl), 3000, rd_log, want_log);
    ok(n_pkt > 0, "nflog: the dropped SYN is logged (%d)", n_pkt);
    if (n_pkt > 0) {
        ok(pkts[0].src == pool.addr && pkts[0].proto == IPPROTO_TCP && pkts[0].dport == 5002,
           "nflog: src, proto and dport");
        is_str(pkts[0].prefix, "deny_out " HOST_IP "/32", "nflog: the rule's prefix");
    }
    is_int(wr_rt_ctevents_lost(ct), 0, "no events lost");

    /* A burst: BURST flows ended at once (a slot released with that many open). */
    {
        struct timespec t0, t1;
        struct wr_err e2;
        double ms;
        (void)!write(go[1], "b", 1);
        if (read(ready[0], &c, 1) != 1)
            return 1;
        /* Drain the NEW events first, then time the DESTROY ones alone. */
        pump(wr_rt_ctevents_fd(ct), 500, rd_ct, want_log_never);
        sh("conntrack -F 2>/dev/null");
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (n_burst < BURST) {
            struct pollfd p = {.fd = wr_rt_ctevents_fd(ct), .events = POLLIN};
            if (poll(&p, 1, 2000) <= 0)
                break;
            if (wr_rt_ctevents_read(ct, on_burst, NULL, &e2) < 0)
                break;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        is_int(n_burst, BURST, "every DESTROY of a burst of flows read");
        is_int(wr_rt_ctevents_lost(ct), 0, "none lost to a full buffer");
        printf("# %d DESTROY events flushed and read in %.1f ms (%.2f us each)\n", n_burst, ms,
               n_burst ? ms * 1000 / n_burst : 0);
    }

    (void)!write(go[1], "q", 1);
    waitpid(pid, NULL, 0);
    close(lt);
    close(lu);
    close(llo);
    wr_rt_ctevents_close(ct);
    wr_rt_ctevents_close(ct_lo);
    wr_rt_nflog_close(nl);
    /* The namespace, its veth and table go with this process. */
    return done();
}

int main(void)
{
    pid_t pid;
    int st;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (geteuid() != 0) {
        printf("1..0 # SKIP needs root\n");
        return 0;
    }
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        if (unshare(CLONE_NEWNET) < 0) {
            perror("unshare");
            _exit(1);
        }
        exit(in_netns());
    }
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st))
        return 1;
    return WEXITSTATUS(st);
}
