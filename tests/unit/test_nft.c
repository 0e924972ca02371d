/* SPDX-License-Identifier: Apache-2.0 */
/* The nftables table (src/runtime/nft.c) and the conntrack flush (conntrack.c), as root in a
 * private network and mount namespace that plays the host: real slots (netslot.c), and an
 * "internet" netns behind a veth with 198.19.0.0/16 addresses (and, to check the always-denied
 * blocks, 10.1.2.3 made local there). Traffic is real TCP and UDP between the namespaces. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "../../src/runtime/conntrack.h"
#include "../../src/runtime/netslot.h"
#include "../../src/runtime/nft.h"
#include "netns_test.h"
#include "tap.h"

#define check(cond, ...)                                                                           \
    do {                                                                                           \
        int check_ = !!(cond);                                                                     \
        ok(check_, __VA_ARGS__);                                                                   \
    } while (0)

#define IP(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (d))

static const struct wr_cidr4 pool = {.addr = IP(198, 18, 0, 0), .len = 28}; /* 8 slots */
static const char *table = "wrtest";
static char dir[64];
static int host_ns, inet_ns;
static struct wr_netslots *slots;

static void enter(int fd)
{
    if (setns(fd, CLONE_NEWNET) < 0)
        abort();
}

/* A socket made in the netns fd (the caller stays in the host's). */
static int sock_in(int fd, int type)
{
    int s;
    enter(fd);
    s = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    enter(host_ns);
    return s;
}

static struct sockaddr_in sin_of(uint32_t addr, uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(addr);
    return sa;
}

static int listen_in(int fd, uint32_t addr, uint16_t port, int type)
{
    int s = sock_in(fd, type), one = 1;
    struct sockaddr_in sa = sin_of(addr, port);

    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        (type == SOCK_STREAM && listen(s, 64) < 0))
        printf("# listen %u: %s\n", port, strerror(errno));
    return s;
}

/* TCP connect from the netns fd: 0, or the errno (ETIMEDOUT after 400 ms). *out keeps the
 * connected socket if wanted. */
static int tcp_try(int fd, uint32_t src, uint32_t dst, uint16_t port, int *out)
{
    int s = sock_in(fd, SOCK_STREAM | SOCK_NONBLOCK), e = 0;
    struct sockaddr_in sa = sin_of(dst, port);
    struct pollfd p = {.fd = s, .events = POLLOUT};
    socklen_t l = sizeof(e);

    if (src != 0) {
        struct sockaddr_in b = sin_of(src, 0);
        if (bind(s, (struct sockaddr *)&b, sizeof(b)) < 0)
            return errno;
    }
    if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0)
        e = 0;
    else if (errno != EINPROGRESS)
        e = errno;
    else if (poll(&p, 1, 400) <= 0)
        e = ETIMEDOUT;
    else
        getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &l);
    if (out != NULL && e == 0)
        *out = s;
    else
        close(s);
    return e;
}

/* A UDP datagram from the netns fd (from src if non-zero) to dst:port; true if rx got it. */
static bool udp_try(int fd, uint32_t src, uint32_t dst, uint16_t port, int rx)
{
    int s = sock_in(fd, SOCK_DGRAM);
    struct sockaddr_in sa = sin_of(dst, port);
    struct pollfd p = {.fd = rx, .events = POLLIN};
    char buf[16];
    bool got = false;

    if (src != 0) {
        struct sockaddr_in b = sin_of(src, 0);
        if (bind(s, (struct sockaddr *)&b, sizeof(b)) < 0)
            printf("# bind: %s\n", strerror(errno));
    }
    (void)sendto(s, "x", 1, 0, (struct sockaddr *)&sa, sizeof(sa));
    if (poll(&p, 1, 300) > 0 && recv(rx, buf, sizeof(buf), 0) == 1)
        got = true;
    close(s);
    return got;
}

static int ct_count(uint32_t src)
{
    char cmd[160], a[WR_INET4_STRLEN];
    FILE *f;
    int n = 0;
    char line[512];

    wr_inet4_format(src, a);
    snprintf(cmd, sizeof(cmd), "conntrack -L -s %s 2>/dev/null", a);
    f = popen(cmd, "r");
    while (f != NULL && fgets(line, sizeof(line), f))
        n++;
    if (f != NULL)
        pclose(f);
    return n;
}

static uint32_t sbaddr(uint32_t i)
{
    return wr_netslot_sandbox_addr(pool, i);
}

static int body(void)
{
    struct wr_err err = {0};
    struct wr_nft *t = NULL;
    char state[96];
    int s0, s1, s2, c = -1, srv = -1;
    const uint32_t inet1 = IP(198, 19, 1, 1), inet2 = IP(198, 19, 2, 1),
                   denied_net = IP(198, 19, 9, 9), rfc1918 = IP(10, 1, 2, 3);
    struct wr_cidr4 deny[64];
    size_t n_deny = 0;
    struct wr_netslots_config scfg = {.dir = dir, .pool = pool};

    host_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    netns_sh(-1, "ip link set lo up");
    inet_ns = netns_new();
    /* the internet: a veth from the host, its addresses on lo, routes both ways */
    {
        char cmd[256];
        snprintf(cmd, sizeof(cmd),
                 "ip link add wrtinet type veth peer name eth0 netns /proc/%d/fd/%d", (int)getpid(),
                 inet_ns);
        check(netns_sh(-1, cmd) == 0, "internet veth");
    }
    netns_sh(-1, "ip addr add 198.19.255.254/31 dev wrtinet && ip link set wrtinet up && "
                 "ip route add 198.19.0.0/16 via 198.19.255.255 && "
                 "ip route add 10.1.2.3/32 via 198.19.255.255");
    check(netns_sh(inet_ns, "ip link set lo up && ip link set eth0 up && "
                            "ip addr add 198.19.255.255/31 dev eth0 && "
                            "ip addr add 198.19.1.1/32 dev lo && ip addr add 198.19.2.1/32 dev lo "
                            "&& ip addr add 198.19.9.9/32 dev lo && ip addr add 10.1.2.3/32 dev lo "
                            "&& ip route add 198.18.0.0/15 via 198.19.255.254") == 0,
          "internet netns configured");

    check(wr_netslots_open(&scfg, &slots, &err) == 0, "slots open");
    for (uint32_t i = 0; i < 3; i++)
        check(wr_netslot_make(slots, i, &err) == 0, "slot %u %s", i, err.msg);
    s0 = wr_netslot_open_fd(slots, 0);
    s1 = wr_netslot_open_fd(slots, 1);
    s2 = wr_netslot_open_fd(slots, 2);

    for (size_t i = 0; i < wr_inet4_n_always_denied; i++)
        deny[n_deny++] = wr_inet4_always_denied[i];
    deny[n_deny++] = (struct wr_cidr4){.addr = IP(198, 19, 9, 0), .len = 24};
    snprintf(state, sizeof(state), "%s/state", dir);
    struct wr_nft_config cfg = {.table = table,
                                .pool = pool,
                                .dns_port = 5353,
                                .proxy_port = 3128,
                                .deny = deny,
                                .n_deny = n_deny,
                                .state_dir = state,
                                .log_group = 7};
    uint32_t ready[3] = {0, 1, 2};
    struct wr_cidr4 allow1[1] = {{.addr = IP(198, 19, 1, 0), .len = 24}};
    struct wr_cidr4 deny_all[1] = {{.addr = 0, .len = 0}};
    struct wr_cidr4 allow_bad[2] = {{.addr = IP(10, 1, 2, 3), .len = 32},
                                    {.addr = IP(198, 19, 9, 9), .len = 32}};
    /* slot 0: only 198.19.1.0/24 (deny 0/0); slot 1: the internet; slot 2: nothing set */
    struct wr_nft_sandbox sb0 = {.slot = 0,
                                 .allow = allow1,
                                 .n_allow = 1,
                                 .deny = deny_all,
                                 .n_deny = 1,
                                 .accept_rest = false};
    struct wr_nft_sandbox sb1 = {.slot = 1, .allow = allow_bad, .n_allow = 2, .accept_rest = true};
    struct wr_nft_sandbox sbs[2] = {sb0, sb1};

    /* a new netns takes the host's IPv4 settings (net.core.devconf_inherit_init_net 0) */
    netns_sh(-1, "echo 0 >/proc/sys/net/ipv4/ip_forward");
    is_str(netns_read("/proc/sys/net/ipv4/ip_forward"), "0", "forwarding starts off");
    check(wr_nft_open(&cfg, sbs, 2, ready, 3, &t, &err) == 0, "table built %s", err.msg);
    if (t == NULL)
        return done();
    is_str(netns_read("/proc/sys/net/ipv4/ip_forward"), "1", "forwarding on");
    {
        char p[128];
        snprintf(p, sizeof(p), "%s/forward-was-off", state);
        check(access(p, F_OK) == 0, "forward-was-off recorded");
    }
    check(netns_sh(-1, getenv("NFT_SHOW") ? "nft list table inet wrtest | sed 's/^/# /'"
                                          : "nft list table inet wrtest >/dev/null") == 0,
          "nft lists the table");
    check(netns_sh(-1, "nft list set inet wrtest a24 | grep -q 'wrc6120000\" . 198.19.1.0'") == 0,
          "@a24 holds slot 0's allowed block");

    int l80 = listen_in(inet_ns, 0, 80, SOCK_STREAM), l81 = listen_in(inet_ns, 0, 81, SOCK_STREAM);
    int u9 = listen_in(inet_ns, 0, 9000, SOCK_DGRAM);
    int l82 = listen_in(inet_ns, 0, 82, SOCK_STREAM);
    (void)l81;
    (void)l80;
    is_int(tcp_try(s0, 0, inet1, 80, NULL), 0, "slot 0 reaches an allowed address");
    is_int(tcp_try(s0, 0, inet2, 80, NULL), ECONNREFUSED, "slot 0: the rest is refused");
    is_int(tcp_try(s1, 0, inet2, 80, NULL), 0, "slot 1 (internet) reaches anything");
    is_int(tcp_try(s1, 0, denied_net, 80, NULL), ECONNREFUSED,
           "deny4 (--net-deny block) wins over allow_out");
    is_int(tcp_try(s1, 0, rfc1918, 80, NULL), ECONNREFUSED,
           "deny4 (10.0.0.0/8, always denied) wins over allow_out");
    check(tcp_try(s2, 0, inet1, 80, NULL) != 0, "a ready slot with no sandbox gets nowhere");
    check(udp_try(s1, 0, inet2, 9000, u9), "UDP out from slot 1");
    /* spoofing: slot 1's root (real root here) adds a second address and sends from it */
    netns_sh(s1, "ip addr add 198.18.0.9/32 dev eth0");
    check(!udp_try(s1, IP(198, 18, 0, 9), inet2, 9000, u9), "a spoofed source is dropped");
    netns_sh(s1, "ip addr add 198.18.0.1/32 dev eth0");
    check(!udp_try(s1, sbaddr(0), inet2, 9000, u9), "a neighbour's address is dropped");
    /* sandbox to sandbox, and to the host */
    {
        int l1 = listen_in(s0, sbaddr(0), 7000, SOCK_STREAM);
        int lh = listen_in(host_ns, 0, 2222, SOCK_STREAM);
        check(tcp_try(s1, 0, sbaddr(0), 7000, NULL) != 0, "slot 1 cannot reach slot 0");
        check(tcp_try(s1, 0, wr_netslot_host_addr(pool, 0), 2222, NULL) != 0,
              "nor the host (another slot's host end)");
        check(tcp_try(s1, 0, wr_netslot_host_addr(pool, 1), 2222, NULL) != 0,
              "nor the host (its own gateway)");
        check(tcp_try(s1, 0, IP(198, 19, 255, 254), 2222, NULL) != 0,
              "nor the host's other addresses");
        close(l1);
        close(lh);
    }
    /* DNS: whatever server is named, the stub gets it */
    {
        int dns = listen_in(host_ns, 0, 5353, SOCK_DGRAM);
        int dnst = listen_in(host_ns, 0, 5353, SOCK_STREAM);
        check(udp_try(s0, 0, IP(198, 19, 2, 1), 53, dns), "UDP 53 to anywhere lands at the stub");
        is_int(tcp_try(s0, 0, IP(8, 8, 8, 8), 53, NULL), 0, "TCP 53 too");
        close(dns);
        close(dnst);
    }
    /* max_connections and a live replace: slot 1 now l7, capped at 2 connections */
    {
        int a = -1, b2 = -1, prox = listen_in(host_ns, 0, 3128, SOCK_STREAM);
        struct wr_nft_sandbox s = sb1;
        s.max_connections = 2;
        s.l7 = true;
        check(wr_nft_set(t, &s, &err) == 0, "replace slot 1's policy %s", err.msg);
        is_int(tcp_try(s1, 0, inet2, 81, &a), 0, "connection 1");
        is_int(tcp_try(s1, 0, inet2, 81, &b2), 0, "connection 2");
        is_int(tcp_try(s1, 0, inet2, 81, NULL), ECONNREFUSED, "connection 3 is over the cap");
        {
            /* the cap is the slot's own: slot 0 with the same cap is not affected */
            struct wr_nft_sandbox s0cap = sb0;
            int x = -1, y = -1;
            s0cap.max_connections = 2;
            check(wr_nft_set(t, &s0cap, &err) == 0, "slot 0 capped at 2 too %s", err.msg);
            is_int(tcp_try(s0, 0, inet1, 81, &x), 0, "slot 0: connection 1");
            is_int(tcp_try(s0, 0, inet1, 81, &y), 0, "slot 0: connection 2");
            close(x);
            close(y);
            check(wr_nft_set(t, &sb0, &err) == 0, "slot 0 uncapped %s", err.msg);
        }
        is_int(tcp_try(s1, 0, inet2, 80, NULL), 0, "l7: TCP 80 goes to the proxy");
        {
            struct pollfd p = {.fd = prox, .events = POLLIN};
            check(poll(&p, 1, 500) == 1, "the proxy got the connection");
        }
        check(!udp_try(s1, 0, inet2, 443, listen_in(inet_ns, 0, 443, SOCK_DGRAM)),
              "l7: UDP 443 (QUIC) dropped");
        close(a);
        close(b2);
        close(prox);
        check(wr_nft_set(t, &sb1, &err) == 0, "back to slot 1's first policy");
        is_int(tcp_try(s1, 0, inet2, 82, &c), 0, "slot 1 connects (kept open)");
        fcntl(c, F_SETFL, 0);
    }
    /* the established flow survives a policy that closes everything, and a restart */
    srv = accept(l82, NULL, NULL);
    {
        struct wr_nft_sandbox closed = {.slot = 1, .deny = deny_all, .n_deny = 1};
        char buf[8];
        check(wr_nft_set(t, &closed, &err) == 0, "close slot 1 %s", err.msg);
        is_int(tcp_try(s1, 0, inet2, 82, NULL), ECONNREFUSED, "new connections refused");
        check(write(c, "ab", 2) == 2 && read(srv, buf, 2) == 2, "the open flow goes on");
        wr_nft_close(t);
        t = NULL;
        sbs[1] = closed;
        check(wr_nft_open(&cfg, sbs, 2, ready, 3, &t, &err) == 0, "restart: table rebuilt %s",
              err.msg);
        check(write(c, "cd", 2) == 2 && read(srv, buf, 2) == 2 && write(srv, "z", 1) == 1 &&
                  read(c, buf, 1) == 1,
              "the open flow goes on across the rebuild, both ways");
        is_int(tcp_try(s1, 0, inet2, 80, NULL), ECONNREFUSED, "still refused after rebuild");
        is_int(tcp_try(s0, 0, inet1, 80, NULL), 0, "slot 0 still reaches its block");
    }
    /* counters */
    {
        struct wr_nft_counters k = {0};
        check(wr_nft_counters(t, 1, &k, &err) == 0, "counters of slot 1 %s", err.msg);
        check(k.accepted_packets > 0 && k.accepted_bytes > 0, "accepted: %llu packets",
              (unsigned long long)k.accepted_packets);
        check(k.dropped_packets > 0, "refused: %llu packets",
              (unsigned long long)k.dropped_packets);
        /* since the rebuild: "z" came back on the open flow (and its ACKs) */
        check(k.received_packets > 0 && k.received_bytes > 0, "received: %llu packets",
              (unsigned long long)k.received_packets);
        check(wr_nft_counters(t, 2, &k, &err) < 0 && err.kind == WR_ENOTFOUND,
              "slot 2 has no counters");
    }
    /* conntrack: the flush removes slot 1's entries and leaves slot 0's */
    {
        int c0 = -1;
        tcp_try(s0, 0, inet1, 80, &c0);
        check(ct_count(sbaddr(1)) > 0 && ct_count(sbaddr(0)) > 0, "both slots have entries");
        check(wr_conntrack_flush_addr(sbaddr(1), &err) == 0, "flush slot 1's address %s", err.msg);
        is_int(ct_count(sbaddr(1)), 0, "slot 1's entries are gone");
        check(ct_count(sbaddr(0)) > 0, "slot 0's are not");
        check(wr_conntrack_flush_addr(sbaddr(5), &err) == 0, "flushing an idle address is fine");
        close(c0);
    }
    /* a list that changes: slot 0 allows 198.19.2.0/24 instead, then both */
    {
        struct wr_cidr4 two[2] = {{.addr = IP(198, 19, 2, 0), .len = 24},
                                  {.addr = IP(198, 19, 1, 7), .len = 24}}; /* host bits: cleared */
        struct wr_nft_sandbox s = sb0;
        s.allow = two;
        s.n_allow = 1;
        check(wr_nft_set(t, &s, &err) == 0, "slot 0 allows 198.19.2.0/24 %s", err.msg);
        is_int(tcp_try(s0, 0, inet2, 80, NULL), 0, "slot 0 reaches 198.19.2.1");
        is_int(tcp_try(s0, 0, inet1, 80, NULL), ECONNREFUSED, "and no longer 198.19.1.1");
        s.n_allow = 2;
        check(wr_nft_set(t, &s, &err) == 0, "slot 0 allows both %s", err.msg);
        is_int(tcp_try(s0, 0, inet1, 80, NULL), 0, "slot 0 reaches 198.19.1.1 again");
        s.allow = (struct wr_cidr4[]){{.addr = IP(198, 19, 1, 1), .len = 32}};
        s.n_allow = 1;
        s.deny = (struct wr_cidr4[]){{.addr = IP(198, 19, 0, 0), .len = 16}};
        s.accept_rest = true;
        check(wr_nft_set(t, &s, &err) == 0, "slot 0: allow a /32 inside a denied /16 %s", err.msg);
        is_int(tcp_try(s0, 0, inet1, 80, NULL), 0, "allow_out wins over deny_out");
        is_int(tcp_try(s0, 0, inet2, 80, NULL), ECONNREFUSED, "deny_out wins over the default");
        check(wr_nft_set(t, &sb0, &err) == 0, "slot 0 back to its policy");
    }
    /* unset and slot removal */
    check(wr_nft_unset(t, 0, &err) == 0, "unset slot 0 %s", err.msg);
    check(tcp_try(s0, 0, inet1, 80, NULL) != 0, "slot 0 gets nowhere without its sandbox");
    check(wr_nft_unset(t, 0, &err) == 0, "unset again: no error");
    check(wr_nft_set(t, &sb0, &err) == 0, "set slot 0 again %s", err.msg);
    is_int(tcp_try(s0, 0, inet1, 80, NULL), 0, "slot 0 reaches its block again");
    check(wr_nft_slot_remove(t, 2, &err) == 0 && wr_nft_slot_remove(t, 2, &err) == 0,
          "remove slot 2 from @slots (twice)");
    check(wr_nft_slot_add(t, 2, &err) == 0 && wr_nft_slot_add(t, 2, &err) == 0,
          "add it back (twice)");
    check(wr_nft_slot_remove(t, 2, &err) == 0, "slot 2 out of @slots again");
    {
        struct wr_nft_sandbox on2 = sb0;
        on2.slot = 2;
        check(wr_nft_set(t, &on2, &err) == 0, "a sandbox on slot 2 (out of @slots) %s", err.msg);
        is_int(tcp_try(s2, 0, inet2, 80, NULL), ECONNREFUSED, "slot 2 is held to its policy");
        is_int(tcp_try(s2, 0, inet1, 80, NULL), 0, "and reaches its block");
    }
    check(wr_nft_set(t, &(struct wr_nft_sandbox){.slot = 99}, &err) < 0 && err.kind == WR_EINVAL,
          "a slot outside the pool is refused");

    check(wr_nft_destroy(t, &err) == 0, "table destroyed");
    check(netns_sh(-1, "nft list table inet wrtest 2>/dev/null") != 0, "no table left");
    close(c);
    close(srv);
    for (uint32_t i = 0; i < 3; i++)
        wr_netslot_destroy(slots, i, &err);
    wr_netslots_close(slots);
    {
        char cmd[160];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        netns_sh(-1, cmd);
    }
    return done();
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/warren-test-nft-%d", (int)getpid());
    {
        /* whatever a failed run left of the slot directory (its mounts died with the child) */
        int rc = netns_test_run(body, "test_nft");
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        (void)netns_sh(-1, cmd);
        return rc;
    }
}
