/* SPDX-License-Identifier: Apache-2.0 */
/* Network slots (src/runtime/netslot.c), as root in a private network and mount namespace: the
 * "host" is a fresh netns. Slots are made, read back (/proc, ioctls), carry a datagram, refuse
 * what a sandbox's root tries inside (new user namespace joined to the slot), and go away. */
#include <arpa/inet.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "../../src/runtime/netslot.h"
#include "netns_test.h"
#include "tap.h"

#define check(cond, ...)                                                                           \
    do {                                                                                           \
        int check_ = !!(cond);                                                                     \
        ok(check_, __VA_ARGS__);                                                                   \
    } while (0)

static struct wr_cidr4 pool = {.addr = 0xc6120000u, .len = 24}; /* 198.18.0.0/24: 128 slots */
static char dir[64];

static uint32_t if_addr(int sock, const char *name)
{
    struct ifreq ifr = {0};

    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
    if (ioctl(sock, SIOCGIFADDR, &ifr) < 0)
        return 0;
    return ntohl(((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr.s_addr);
}

static int if_flags(int sock, const char *name)
{
    struct ifreq ifr = {0};

    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
    if (ioctl(sock, SIOCGIFFLAGS, &ifr) < 0)
        return -1;
    return ifr.ifr_flags;
}

/* /proc/net/arp has "<ip> 0x1 0x6 <mac> * <dev>" for a permanent complete entry. */
static int arp_has(uint32_t ip, const char *mac, const char *dev)
{
    char line[256], a[WR_INET4_STRLEN];
    FILE *f = fopen("/proc/net/arp", "re");
    int found = 0;

    wr_inet4_format(ip, a);
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f)) {
        char ipb[64], hw[64], fl[64], m[64], mask[64], d[64];
        if (sscanf(line, "%63s %63s %63s %63s %63s %63s", ipb, hw, fl, m, mask, d) == 6 &&
            strcmp(ipb, a) == 0 && strcmp(fl, "0x6") == 0 && strcmp(m, mac) == 0 &&
            strcmp(d, dev) == 0)
            found = 1;
    }
    fclose(f);
    return found;
}

static void check_host_side(uint32_t i)
{
    char name[WR_NETSLOT_IFNAMSIZ], path[128], mac[32];
    uint32_t s = wr_netslot_sandbox_addr(pool, i);
    int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    wr_netslot_ifname(pool, i, name);
    check(if_flags(sock, name) > 0 && (if_flags(sock, name) & IFF_UP), "%s is up", name);
    is_int(if_addr(sock, name), wr_netslot_host_addr(pool, i), "host end has the host address");
    snprintf(mac, sizeof(mac), "02:58:%02x:%02x:%02x:%02x", s >> 24, (s >> 16) & 255,
             (s >> 8) & 255, s & 255);
    check(arp_has(s, mac, name), "host end: permanent neighbour %s", mac);
    snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", name);
    is_str(netns_read(path), "1", "host end: IPv6 off");
    snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/addr_gen_mode", name);
    is_str(netns_read(path), "1", "host end: no IPv6 address generation");
    snprintf(path, sizeof(path), "/sys/class/net/%s/address", name);
    close(sock);
}

static void check_slot_side(struct wr_netslots *ss, uint32_t i)
{
    int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    int fd = wr_netslot_open_fd(ss, i), sock;
    uint32_t h = wr_netslot_host_addr(pool, i);
    char mac[32], gw[32];

    check(fd >= 0, "open slot %u's netns", i);
    if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
        ok(0, "enter slot");
        return;
    }
    sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    check(if_flags(sock, "lo") & IFF_UP, "slot: lo up");
    check(if_flags(sock, "eth0") & IFF_UP, "slot: eth0 up");
    is_int(if_addr(sock, "eth0"), wr_netslot_sandbox_addr(pool, i), "slot: eth0 address");
    snprintf(mac, sizeof(mac), "02:57:%02x:%02x:%02x:%02x", h >> 24, (h >> 16) & 255,
             (h >> 8) & 255, h & 255);
    check(arp_has(h, mac, "eth0"), "slot: permanent neighbour (the host end, %s)", mac);
    /* /proc/net/route: "eth0 00000000 <gw little-endian hex> 0003 ..." */
    snprintf(gw, sizeof(gw), "eth0\t00000000\t%08X", htonl(h) == h ? h : __builtin_bswap32(h));
    check(netns_file_has("/proc/net/route", gw), "slot: default route via the host end");
    is_str(netns_read("/proc/sys/net/ipv4/ip_unprivileged_port_start"), "0",
           "slot: unprivileged ports from 0");
    is_str(netns_read("/proc/sys/net/ipv4/ping_group_range"), "0\t2147483647",
           "slot: ping for every group");
    is_str(netns_read("/proc/sys/net/ipv4/ip_forward"), "0", "slot: no forwarding");
    is_str(netns_read("/proc/sys/net/ipv6/conf/eth0/disable_ipv6"), "1", "slot: eth0 IPv6 off");
    is_str(netns_read("/proc/sys/net/ipv6/conf/lo/disable_ipv6"), "0", "slot: ::1 on lo kept");
    check(!netns_file_has("/proc/net/if_inet6", "eth0"), "slot: no IPv6 address on eth0");
    close(sock);
    if (setns(self, CLONE_NEWNET) < 0)
        abort();
    close(self);
    close(fd);
}

/* A datagram from the host to the sandbox address, received by a socket inside the slot. */
static void check_traffic(struct wr_netslots *ss, uint32_t i)
{
    int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    int fd = wr_netslot_open_fd(ss, i), in, out;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(9999)};
    char buf[8] = {0};
    struct timeval tv = {.tv_sec = 2};

    sa.sin_addr.s_addr = htonl(wr_netslot_sandbox_addr(pool, i));
    if (setns(fd, CLONE_NEWNET) < 0)
        abort();
    in = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    check(bind(in, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind the sandbox address");
    setsockopt(in, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (setns(self, CLONE_NEWNET) < 0)
        abort();
    out = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    /* Sent again every 250 ms for up to 5 s: a veth that has just come up may drop the first
     * (its carrier, the neighbour entry); a slot that never receives still fails. */
    {
        struct pollfd pfd = {.fd = in, .events = POLLIN};
        bool sent = true, got = false;
        for (int k = 0; k < 20 && !got; k++) {
            sent = sent && sendto(out, "hi", 2, 0, (struct sockaddr *)&sa, sizeof(sa)) == 2;
            got = poll(&pfd, 1, 250) == 1;
        }
        check(sent, "send to the slot");
        check(got && recv(in, buf, sizeof(buf), 0) == 2 && memcmp(buf, "hi", 2) == 0,
              "the slot receives it");
    }
    close(in);
    close(out);
    close(fd);
    close(self);
}

/* Root of a new user namespace (mapped to an unprivileged host id, as a sandbox's is) joined
 * to the slot: every network change is refused. */
static void check_sandbox_root(struct wr_netslots *ss, uint32_t i)
{
    int fd = wr_netslot_open_fd(ss, i), go[2], res[2];
    pid_t pid;
    int r[6] = {0};
    char path[64];

    if (pipe2(go, O_CLOEXEC) < 0 || pipe2(res, O_CLOEXEC) < 0)
        abort();
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        char c;
        int v[6], s;
        struct ifreq ifr = {0};
        struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;

        if (setns(fd, CLONE_NEWNET) < 0 || unshare(CLONE_NEWUSER) < 0)
            _exit(1);
        if (write(res[1], "u", 1) != 1 || read(go[0], &c, 1) != 1)
            _exit(1);
        if (syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setresuid, 0, 0, 0) < 0)
            _exit(1);
        s = socket(AF_INET, SOCK_DGRAM, 0);
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "eth0");
        sin->sin_family = AF_INET;
        sin->sin_addr.s_addr = htonl(0xc6120063u);
        v[0] = ioctl(s, SIOCSIFADDR, &ifr) < 0 ? errno : 0;
        v[1] = socket(AF_PACKET, SOCK_RAW, 0) < 0 ? errno : 0;
        v[2] = socket(AF_INET, SOCK_RAW, IPPROTO_RAW) < 0 ? errno : 0;
        {
            int w = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY);
            v[3] = w < 0 ? errno : (write(w, "1", 1) < 0 ? errno : 0);
        }
        {
            int w = open("/proc/sys/net/ipv4/ping_group_range", O_WRONLY);
            v[4] = w < 0 ? errno : (write(w, "0 0", 3) < 0 ? errno : 0);
        }
        /* and rtnetlink: an address on lo */
        {
            struct {
                struct nlmsghdr h;
                struct ifaddrmsg a;
                struct rtattr ra;
                uint32_t addr;
            } req = {.h = {.nlmsg_len = sizeof(req),
                           .nlmsg_type = RTM_NEWADDR,
                           .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE},
                     .a = {.ifa_family = AF_INET, .ifa_prefixlen = 32, .ifa_index = 1},
                     .ra = {.rta_len = RTA_LENGTH(4), .rta_type = IFA_LOCAL},
                     .addr = htonl(0xc6120063u)};
            char ans[512];
            int nl = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
            struct nlmsgerr *e = (struct nlmsgerr *)NLMSG_DATA((struct nlmsghdr *)ans);
            v[5] = -1;
            if (nl >= 0 && send(nl, &req, sizeof(req), 0) == sizeof(req) &&
                recv(nl, ans, sizeof(ans), 0) > 0)
                v[5] = -e->error;
        }
        (void)!write(res[1], v, sizeof(v));
        _exit(0);
    }
    {
        char c;
        if (read(res[0], &c, 1) != 1)
            abort();
    }
    snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
    check(netns_sh(-1, "true") == 0, "shell works");
    {
        int w = open(path, O_WRONLY);
        (void)!write(w, "0 200000 1", 10);
        close(w);
        snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
        w = open(path, O_WRONLY);
        (void)!write(w, "0 200000 1", 10);
        close(w);
    }
    (void)!write(go[1], "g", 1);
    check(read(res[0], r, sizeof(r)) == sizeof(r), "sandbox root probe ran");
    waitpid(pid, NULL, 0);
    is_int(r[0], EPERM, "sandbox root: add an address (ioctl) EPERM");
    is_int(r[1], EPERM, "sandbox root: AF_PACKET socket EPERM");
    is_int(r[2], EPERM, "sandbox root: SOCK_RAW socket EPERM");
    check(r[3] == EPERM || r[3] == EACCES, "sandbox root: write net.ipv4.ip_forward refused (%s)",
          strerror(r[3]));
    check(r[4] == EPERM || r[4] == EACCES, "sandbox root: write ping_group_range refused (%s)",
          strerror(r[4]));
    is_int(r[5], EPERM, "sandbox root: RTM_NEWADDR EPERM");
    close(fd);
    close(go[0]);
    close(go[1]);
    close(res[0]);
    close(res[1]);
}

struct mk {
    struct wr_netslots *ss;
    uint32_t first, n;
    int failed;
};

static void *make_many(void *arg)
{
    struct mk *m = arg;
    struct wr_err err;

    for (uint32_t i = m->first; i < m->first + m->n; i++)
        if (wr_netslot_make(m->ss, i, &err) < 0) {
            printf("# make %u: %s\n", i, err.msg);
            m->failed++;
        }
    return NULL;
}

static int link_exists(uint32_t i)
{
    char name[WR_NETSLOT_IFNAMSIZ];
    wr_netslot_ifname(pool, i, name);
    return if_nametoindex(name) != 0;
}

static int body(void)
{
    struct wr_netslots_config cfg = {.dir = dir, .pool = pool};
    struct wr_netslots *ss = NULL;
    struct wr_err err = {0};
    uint32_t *idx = NULL;
    size_t n = 0;
    char name[WR_NETSLOT_IFNAMSIZ];
    uint32_t k;

    netns_sh(-1, "ip link set lo up");
    is_int(wr_netslot_capacity(pool), 128, "a /24 holds 128 slots");
    is_int(wr_netslot_capacity((struct wr_cidr4){.addr = 0x0ac80000u, .len = 15}), 65536,
           "a /15 holds 65536");
    is_int(wr_netslot_host_addr(pool, 3), 0xc6120006u, "host end of slot 3");
    is_int(wr_netslot_sandbox_addr(pool, 3), 0xc6120007u, "sandbox end of slot 3");
    wr_netslot_ifname((struct wr_cidr4){.addr = 0x0ac80000u, .len = 15}, 0, name);
    is_str(name, "wr0ac80000", "name of the host end");
    check(wr_netslot_from_ifname(pool, "wrc612000a", &k) && k == 5, "name back to index 5");
    check(!wr_netslot_from_ifname(pool, "wrc612000b", &k), "an odd address is no host end");
    check(!wr_netslot_from_ifname(pool, "wrc6120100", &k), "an address past the pool");

    check(wr_netslots_open(&cfg, &ss, &err) == 0, "open the slot directory");
    if (ss == NULL)
        return done();
    check(wr_netslot_make(ss, 0, &err) == 0, "make slot 0 %s", err.msg);
    check(wr_netslot_make(ss, 1, &err) == 0, "make slot 1 %s", err.msg);
    check(wr_netslot_make(ss, 1, &err) < 0 && err.kind == WR_ECONFLICT,
          "making slot 1 again is a conflict");
    check(wr_netslot_make(ss, 128, &err) < 0 && err.kind == WR_EINVAL, "slot 128 is not in a /24");
    check(wr_netslots_existing(ss, &idx, &n, &err) == 0 && n == 2 && idx[0] == 0 && idx[1] == 1,
          "existing: 0 and 1");
    free(idx);
    check_host_side(0);
    check_host_side(1);
    check_slot_side(ss, 1);
    check_traffic(ss, 1);
    check_sandbox_root(ss, 1);

    /* a restart finds them; a stray file (a make cut short) is removed */
    {
        char p[128];
        snprintf(p, sizeof(p), "%s/7", dir);
        close(open(p, O_CREAT | O_WRONLY, 0400));
        wr_netslots_close(ss);
        check(wr_netslots_open(&cfg, &ss, &err) == 0, "open again");
        check(access(p, F_OK) < 0, "a slot file with no netns behind it is removed");
        check(wr_netslots_existing(ss, &idx, &n, &err) == 0 && n == 2, "still 2 slots");
        free(idx);
    }

    /* destroy: the mount and file go at once, the veth pair with the netns soon after */
    check(wr_netslot_destroy(ss, 0, &err) == 0, "destroy slot 0");
    check(wr_netslot_open_fd(ss, 0) < 0 && errno == ENOENT, "slot 0 is gone");
    check(wr_netslot_destroy(ss, 0, &err) == 0, "destroying it again is no error");
    for (int t = 0; t < 300 && link_exists(0); t++)
        usleep(10000);
    check(!link_exists(0), "the host end went with the netns");
    err.msg[0] = '\0';
    check(wr_netslot_make(ss, 0, &err) == 0, "make slot 0 again %s", err.msg);
    check_host_side(0);

    /* concurrently, from 4 threads */
    {
        pthread_t th[4];
        struct mk m[4];
        int failed = 0;
        for (int t = 0; t < 4; t++) {
            m[t] = (struct mk){.ss = ss, .first = 10 + 10 * (uint32_t)t, .n = 10};
            pthread_create(&th[t], NULL, make_many, &m[t]);
        }
        for (int t = 0; t < 4; t++) {
            pthread_join(th[t], NULL);
            failed += m[t].failed;
        }
        is_int(failed, 0, "40 slots made on 4 threads");
        check(wr_netslots_existing(ss, &idx, &n, &err) == 0 && n == 42, "42 slots exist");
        free(idx);
        check(open("/proc/thread-self/ns/net", O_RDONLY) >= 0, "still here");
        check_slot_side(ss, 25);
    }
    /* a failed make leaves nothing: the host end's name is taken by a foreign device */
    {
        wr_netslot_ifname(pool, 99, name);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "ip link add %s type veth peer name stale0", name);
        netns_sh(-1, cmd);
        /* the make deletes a stale device of its own name and goes on */
        err.msg[0] = '\0';
        check(wr_netslot_make(ss, 99, &err) == 0, "a stale host end is replaced %s", err.msg);
        check_host_side(99);
        check(if_nametoindex("stale0") == 0, "the stale pair is gone");
    }

    if (wr_netslots_existing(ss, &idx, &n, &err) == 0) {
        for (size_t j = 0; j < n; j++)
            wr_netslot_destroy(ss, idx[j], &err);
        free(idx);
    }
    check(wr_netslots_existing(ss, &idx, &n, &err) == 0 && n == 0, "all destroyed");
    free(idx);
    wr_netslots_close(ss);
    rmdir(dir);
    return done();
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/warren-test-netslot-%d", (int)getpid());
    {
        /* whatever a failed run left of the slot directory (its mounts died with the child) */
        int rc = netns_test_run(body, "test_netslot");
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        (void)netns_sh(-1, cmd);
        return rc;
    }
}
