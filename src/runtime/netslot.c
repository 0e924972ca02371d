/* SPDX-License-Identifier: Apache-2.0 */
/* Network slots (netslot.h): a host-owned netns per slot, made with unshare(CLONE_NEWNET) on the
 * calling thread (network namespaces are per thread), bind-mounted, then a routed veth pair
 * configured in two rtnetlink batches, one per side. */
#include "netslot.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/magic.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/xalloc.h"

#ifndef NSFS_MAGIC
#define NSFS_MAGIC 0x6e736673
#endif

struct wr_netslots {
    char *dir;
    int dirfd;
    struct wr_cidr4 pool;
};

uint32_t wr_netslot_capacity(struct wr_cidr4 pool)
{
    return pool.len > 31 ? 0 : (uint32_t)1 << (31 - pool.len);
}

uint32_t wr_netslot_host_addr(struct wr_cidr4 pool, uint32_t i)
{
    return pool.addr + 2 * i;
}

uint32_t wr_netslot_sandbox_addr(struct wr_cidr4 pool, uint32_t i)
{
    return pool.addr + 2 * i + 1;
}

void wr_netslot_ifname(struct wr_cidr4 pool, uint32_t i, char buf[WR_NETSLOT_IFNAMSIZ])
{
    snprintf(buf, WR_NETSLOT_IFNAMSIZ, "wr%08x", (unsigned)wr_netslot_host_addr(pool, i));
}

bool wr_netslot_from_ifname(struct wr_cidr4 pool, const char *name, uint32_t *i)
{
    unsigned long v;
    char *end;

    if (strncmp(name, "wr", 2) != 0 || strlen(name) != 10)
        return false;
    v = strtoul(name + 2, &end, 16);
    if (*end != '\0' || v < pool.addr || (v - pool.addr) % 2 != 0 ||
        (v - pool.addr) / 2 >= wr_netslot_capacity(pool))
        return false;
    *i = (uint32_t)((v - pool.addr) / 2);
    return true;
}

struct wr_cidr4 wr_netslots_pool(const struct wr_netslots *s)
{
    return s->pool;
}

/* ---- rtnetlink ------------------------------------------------------------------------------ */

/* A batch of rtnetlink requests in one buffer, each asking for an ACK, sent with one sendmsg. */
struct rtb {
    char buf[8192];
    size_t len;
    unsigned n;
    uint32_t seq0;
};

static struct nlmsghdr *rtb_msg(struct rtb *b, uint16_t type, uint16_t flags)
{
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(b->buf + b->len);

    nlh->nlmsg_type = type;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    nlh->nlmsg_seq = b->seq0 + b->n++;
    return nlh;
}

static void rtb_done(struct rtb *b, struct nlmsghdr *nlh)
{
    b->len += NLMSG_ALIGN(nlh->nlmsg_len);
}

/* Send the batch on nl and read every ACK. Returns 0, or -errno of the first request that
 * failed (the others still ran). */
static int rtb_run(struct mnl_socket *nl, struct rtb *b)
{
    char buf[8192];
    unsigned acked = 0;
    int first = 0;

    if (mnl_socket_sendto(nl, b->buf, b->len) < 0)
        return -errno;
    while (acked < b->n) {
        ssize_t n;
        struct pollfd p = {.fd = mnl_socket_get_fd(nl), .events = POLLIN};

        if (poll(&p, 1, 5000) <= 0)
            return first ? first : -ETIMEDOUT;
        n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
        if (n < 0)
            return first ? first : -errno;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, (int)n);
             h = mnl_nlmsg_next(h, (int *)&n)) {
            if (h->nlmsg_type != NLMSG_ERROR)
                continue;
            const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
            if (h->nlmsg_seq - b->seq0 >= b->n)
                continue;
            acked++;
            if (e->error != 0 && first == 0)
                first = e->error;
        }
    }
    return first;
}

static struct mnl_socket *rtnl_open(void)
{
    struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);

    if (nl == NULL)
        return NULL;
    if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
        int e = errno;
        mnl_socket_close(nl);
        errno = e;
        return NULL;
    }
    return nl;
}

static void rtnl_closep(struct mnl_socket **nl)
{
    if (*nl != NULL)
        mnl_socket_close(*nl);
}

static void mac_of(uint8_t kind, uint32_t addr, uint8_t mac[6])
{
    mac[0] = 0x02;
    mac[1] = kind;
    mac[2] = (uint8_t)(addr >> 24);
    mac[3] = (uint8_t)(addr >> 16);
    mac[4] = (uint8_t)(addr >> 8);
    mac[5] = (uint8_t)addr;
}

static void put_ifinfo(struct nlmsghdr *nlh, int index, unsigned flags, unsigned change)
{
    struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));

    ifi->ifi_family = AF_UNSPEC;
    ifi->ifi_index = index;
    ifi->ifi_flags = flags;
    ifi->ifi_change = change;
}

/* IFLA_AF_SPEC { AF_INET6 { IFLA_INET6_ADDR_GEN_MODE none } }: no link-local address. */
static void put_no_addrgen(struct nlmsghdr *nlh)
{
    struct nlattr *spec = mnl_attr_nest_start(nlh, IFLA_AF_SPEC);
    struct nlattr *in6 = mnl_attr_nest_start(nlh, AF_INET6);

    mnl_attr_put_u8(nlh, IFLA_INET6_ADDR_GEN_MODE, IN6_ADDR_GEN_MODE_NONE);
    mnl_attr_nest_end(nlh, in6);
    mnl_attr_nest_end(nlh, spec);
}

static void add_addr(struct rtb *b, int index, uint32_t addr)
{
    struct nlmsghdr *nlh = rtb_msg(b, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE);
    struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
    uint32_t be = htonl(addr);

    ifa->ifa_family = AF_INET;
    ifa->ifa_prefixlen = 31;
    ifa->ifa_index = (unsigned)index;
    mnl_attr_put(nlh, IFA_LOCAL, 4, &be);
    mnl_attr_put(nlh, IFA_ADDRESS, 4, &be);
    rtb_done(b, nlh);
}

static void add_neigh(struct rtb *b, int index, uint32_t addr, const uint8_t mac[6])
{
    struct nlmsghdr *nlh = rtb_msg(b, RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_REPLACE);
    struct ndmsg *nd = mnl_nlmsg_put_extra_header(nlh, sizeof(*nd));
    uint32_t be = htonl(addr);

    nd->ndm_family = AF_INET;
    nd->ndm_ifindex = index;
    nd->ndm_state = NUD_PERMANENT;
    mnl_attr_put(nlh, NDA_DST, 4, &be);
    mnl_attr_put(nlh, NDA_LLADDR, 6, mac);
    rtb_done(b, nlh);
}

static void set_link(struct rtb *b, int index, bool up, bool no_addrgen)
{
    struct nlmsghdr *nlh = rtb_msg(b, RTM_NEWLINK, 0);

    put_ifinfo(nlh, index, up ? IFF_UP : 0, up ? IFF_UP : 0);
    if (no_addrgen)
        put_no_addrgen(nlh);
    rtb_done(b, nlh);
}

/* The index of interface name, through RTM_GETLINK on nl (whose netns is the one asked). */
static int link_index(struct mnl_socket *nl, const char *name)
{
    char buf[8192];
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    ssize_t n;
    uint32_t seq = (uint32_t)time(NULL);

    nlh->nlmsg_type = RTM_GETLINK;
    nlh->nlmsg_flags = NLM_F_REQUEST;
    nlh->nlmsg_seq = seq;
    put_ifinfo(nlh, 0, 0, 0);
    mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
    if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
        return -errno;
    n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
    if (n < 0)
        return -errno;
    nlh = (struct nlmsghdr *)buf;
    if (!mnl_nlmsg_ok(nlh, (int)n))
        return -EPROTO;
    if (nlh->nlmsg_type == NLMSG_ERROR) {
        const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
        return e->error ? e->error : -EPROTO;
    }
    if (nlh->nlmsg_type != RTM_NEWLINK)
        return -EPROTO;
    return ((const struct ifinfomsg *)mnl_nlmsg_get_payload(nlh))->ifi_index;
}

/* RTM_DELLINK by name (only on a failed make, and for a stale host end before a make). */
static int del_link(struct mnl_socket *nl, const char *name)
{
    struct rtb b = {.seq0 = (uint32_t)time(NULL)};
    struct nlmsghdr *nlh = rtb_msg(&b, RTM_DELLINK, 0);

    put_ifinfo(nlh, 0, 0, 0);
    mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
    rtb_done(&b, nlh);
    return rtb_run(nl, &b);
}

/* The veth pair: host end `name` here, `eth0` in the netns slot_fd, with their MACs. */
static int add_veth(struct mnl_socket *nl, const char *name, const uint8_t hmac[6],
                    const uint8_t smac[6], int slot_fd)
{
    struct rtb b = {.seq0 = (uint32_t)time(NULL)};
    struct nlmsghdr *nlh = rtb_msg(&b, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
    struct nlattr *info, *data, *peer;
    struct ifinfomsg *pifi;

    put_ifinfo(nlh, 0, 0, 0);
    mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
    mnl_attr_put(nlh, IFLA_ADDRESS, 6, hmac);
    info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
    mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
    data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
    peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
    pifi = (struct ifinfomsg *)((char *)nlh + nlh->nlmsg_len);
    memset(pifi, 0, sizeof(*pifi));
    nlh->nlmsg_len += NLMSG_ALIGN(sizeof(*pifi));
    mnl_attr_put_strz(nlh, IFLA_IFNAME, "eth0");
    mnl_attr_put(nlh, IFLA_ADDRESS, 6, smac);
    mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)slot_fd);
    mnl_attr_nest_end(nlh, peer);
    mnl_attr_nest_end(nlh, data);
    mnl_attr_nest_end(nlh, info);
    rtb_done(&b, nlh);
    return rtb_run(nl, &b);
}

/* ---- the slot directory --------------------------------------------------------------------- */

static bool is_netns_mount(int dirfd, const char *name)
{
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct statfs sf;

    return fd >= 0 && fstatfs(fd, &sf) == 0 && sf.f_type == NSFS_MAGIC;
}

/* A slot's file name is its decimal index, nothing else. */
static bool parse_index(const char *name, uint32_t *i)
{
    unsigned long v;
    char *end;

    if (name[0] < '0' || name[0] > '9' || (name[0] == '0' && name[1] != '\0'))
        return false;
    errno = 0;
    v = strtoul(name, &end, 10);
    if (*end != '\0' || errno != 0 || v > UINT32_MAX)
        return false;
    *i = (uint32_t)v;
    return true;
}

int wr_netslots_open(const struct wr_netslots_config *cfg, struct wr_netslots **out,
                     struct wr_err *err)
{
    struct wr_netslots *s;
    _cleanup_closedir_ DIR *d = NULL;
    struct dirent *de;

    if (cfg->pool.len > 31 || cfg->pool.addr != (cfg->pool.addr & wr_cidr4_mask(cfg->pool.len)))
        return wr_err_set(err, WR_EINVAL, 0, "net pool must be a block of /31 or larger");
    if (wr_mkdir_p(cfg->dir, 0700, err) < 0)
        return -1;
    s = xcalloc(1, sizeof(*s));
    s->dir = xstrdup(cfg->dir);
    s->pool = cfg->pool;
    s->dirfd = open(cfg->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dirfd < 0) {
        wr_err_sys(err, "open `%s`", cfg->dir);
        wr_netslots_close(s);
        return -1;
    }
    /* A file that is no mount: a make that a crash cut short between the file and the mount. */
    d = fdopendir(dup(s->dirfd));
    while (d != NULL && (de = readdir(d)) != NULL) {
        uint32_t i;
        if (parse_index(de->d_name, &i) && !is_netns_mount(s->dirfd, de->d_name))
            (void)unlinkat(s->dirfd, de->d_name, 0);
    }
    *out = s;
    return 0;
}

void wr_netslots_close(struct wr_netslots *s)
{
    if (s == NULL)
        return;
    if (s->dirfd >= 0)
        close(s->dirfd);
    free(s->dir);
    free(s);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

int wr_netslots_existing(struct wr_netslots *s, uint32_t **idx, size_t *n, struct wr_err *err)
{
    _cleanup_closedir_ DIR *d = fdopendir(dup(s->dirfd));
    _cleanup_free_ uint32_t *v = NULL;
    size_t len = 0, cap = 0;
    uint32_t cap_pool = wr_netslot_capacity(s->pool);
    struct dirent *de;

    if (d == NULL)
        return wr_err_sys(err, "read `%s`", s->dir);
    rewinddir(d);
    while ((de = readdir(d)) != NULL) {
        uint32_t i;
        if (!parse_index(de->d_name, &i) || i >= cap_pool || !is_netns_mount(s->dirfd, de->d_name))
            continue;
        if (len == cap) {
            cap = cap ? 2 * cap : 64;
            v = xrealloc(v, cap * sizeof(*v));
        }
        v[len++] = i;
    }
    if (len > 0)
        qsort(v, len, sizeof(*v), cmp_u32);
    *idx = steal_pointer(&v);
    *n = len;
    return 0;
}

int wr_netslot_open_fd(struct wr_netslots *s, uint32_t i)
{
    char name[16];
    int fd;

    snprintf(name, sizeof(name), "%u", (unsigned)i);
    fd = openat(s->dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    {
        struct statfs sf;
        if (fstatfs(fd, &sf) < 0 || sf.f_type != NSFS_MAGIC) {
            close(fd);
            errno = ENOENT;
            return -1;
        }
    }
    return fd;
}

int wr_netslot_destroy(struct wr_netslots *s, uint32_t i, struct wr_err *err)
{
    char path[PATH_MAX];

    snprintf(path, sizeof(path), "%s/%u", s->dir, (unsigned)i);
    if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
        return wr_err_sys(err, "net slot %u: umount `%s`", (unsigned)i, path);
    if (unlink(path) < 0 && errno != ENOENT)
        return wr_err_sys(err, "net slot %u: remove `%s`", (unsigned)i, path);
    return 0;
}

/* ---- making a slot -------------------------------------------------------------------------- */

/* Write a /proc/sys file of the calling thread's network namespace. */
static int sysctl_write(const char *path, const char *value, struct wr_err *err)
{
    return wr_write_fileat(AT_FDCWD, path, value, false, err);
}

/* The slot's own sysctls, written from inside it (before eth0 exists: it takes the defaults). */
static int slot_sysctls(struct wr_err *err)
{
    /* ::1 on lo stays: `all` would turn IPv6 off on lo as well. */
    /* A new netns starts with the host's IPv4 settings (net.core.devconf_inherit_init_net):
     * a slot never forwards, whatever the host does. */
    if (sysctl_write("/proc/sys/net/ipv4/ip_forward", "0", err) < 0 ||
        sysctl_write("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1", err) < 0 ||
        sysctl_write("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0", err) < 0 ||
        sysctl_write("/proc/sys/net/ipv4/ping_group_range", "0 2147483647", err) < 0)
        return -1;
    return 0;
}

/* The inside: lo and eth0 up, the sandbox address, the host end as permanent neighbour, the
 * default route. nl is a socket in the slot's netns. A fresh slot's eth0 first loses its IPv6
 * link-local address (down, then up); readdressing a slot leaves the link as it is. */
static int slot_inside(struct mnl_socket *nl, uint32_t haddr, uint32_t saddr, bool fresh,
                       struct wr_err *err)
{
    struct rtb b = {.seq0 = (uint32_t)time(NULL)};
    uint8_t hmac[6];
    int eth0 = link_index(nl, "eth0"), rc;
    struct nlmsghdr *nlh;
    struct rtmsg *rt;
    uint32_t gw = htonl(haddr);

    if (eth0 < 0)
        return wr_err_set(err, WR_ESYS, -eth0, "find eth0 in the slot");
    mac_of(0x57, haddr, hmac);
    if (fresh) {
        set_link(&b, 1, true, false);    /* lo */
        set_link(&b, eth0, false, true); /* no IPv6 link-local, before it is up */
    }
    add_addr(&b, eth0, saddr);
    add_neigh(&b, eth0, haddr, hmac);
    set_link(&b, eth0, true, false);
    nlh = rtb_msg(&b, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE);
    rt = mnl_nlmsg_put_extra_header(nlh, sizeof(*rt));
    rt->rtm_family = AF_INET;
    rt->rtm_table = RT_TABLE_MAIN;
    rt->rtm_protocol = RTPROT_BOOT;
    rt->rtm_scope = RT_SCOPE_UNIVERSE;
    rt->rtm_type = RTN_UNICAST;
    mnl_attr_put(nlh, RTA_GATEWAY, 4, &gw);
    mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)eth0);
    rtb_done(&b, nlh);
    rc = rtb_run(nl, &b);
    if (rc < 0)
        return wr_err_set(err, WR_ESYS, -rc, "configure the slot's interfaces");
    return 0;
}

/* The host end: no IPv6, its address, the sandbox as permanent neighbour, up. */
static int slot_host_end(struct mnl_socket *nl, const char *name, uint32_t haddr, uint32_t saddr,
                         struct wr_err *err)
{
    struct rtb b = {.seq0 = (uint32_t)time(NULL)};
    char path[96];
    uint8_t smac[6];
    int idx = link_index(nl, name), rc;

    if (idx < 0)
        return wr_err_set(err, WR_ESYS, -idx, "find %s", name);
    snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", name);
    if (sysctl_write(path, "1", err) < 0)
        return -1;
    mac_of(0x58, saddr, smac);
    set_link(&b, idx, false, true);
    add_addr(&b, idx, haddr);
    add_neigh(&b, idx, saddr, smac);
    set_link(&b, idx, true, false);
    rc = rtb_run(nl, &b);
    if (rc < 0)
        return wr_err_set(err, WR_ESYS, -rc, "configure %s", name);
    return 0;
}

int wr_netslot_make(struct wr_netslots *s, uint32_t i, struct wr_err *err)
{
    _cleanup_close_ int host_ns = -1, slot_ns = -1, file = -1;
    struct mnl_socket *slot_nl __attribute__((cleanup(rtnl_closep))) = NULL;
    struct mnl_socket *host_nl __attribute__((cleanup(rtnl_closep))) = NULL;
    char name[16], path[PATH_MAX], ifname[WR_NETSLOT_IFNAMSIZ];
    uint32_t haddr, saddr;
    uint8_t hmac[6], smac[6];
    bool mounted = false, veth = false;
    int rc;

    if (i >= wr_netslot_capacity(s->pool))
        return wr_err_set(err, WR_EINVAL, 0, "net slot %u is outside the pool", (unsigned)i);
    haddr = wr_netslot_host_addr(s->pool, i);
    saddr = wr_netslot_sandbox_addr(s->pool, i);
    wr_netslot_ifname(s->pool, i, ifname);
    mac_of(0x57, haddr, hmac);
    mac_of(0x58, saddr, smac);
    snprintf(name, sizeof(name), "%u", (unsigned)i);
    snprintf(path, sizeof(path), "%s/%u", s->dir, (unsigned)i);

    host_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (host_ns < 0)
        return wr_err_sys(err, "net slot %u: open this thread's netns", (unsigned)i);
    host_nl = rtnl_open();
    if (host_nl == NULL)
        return wr_err_sys(err, "net slot %u: rtnetlink", (unsigned)i);
    file = openat(s->dirfd, name, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
    if (file < 0)
        return wr_err_set(err, errno == EEXIST ? WR_ECONFLICT : WR_ESYS, errno,
                          "net slot %u: create `%s`", (unsigned)i, path);
    close(steal_fd(&file));

    /* Into a new netns on this thread only; back before anything else can fail. */
    if (unshare(CLONE_NEWNET) < 0) {
        wr_err_sys(err, "unshare network namespace");
        goto fail;
    }
    slot_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (slot_ns >= 0)
        slot_nl = rtnl_open();
    rc = slot_ns < 0 || slot_nl == NULL ? -errno : 0;
    if (rc == 0 && slot_sysctls(err) < 0)
        rc = -EIO;
    if (setns(host_ns, CLONE_NEWNET) < 0)
        abort(); /* a thread left in the wrong netns must not go on */
    if (rc == -EIO)
        goto fail;
    if (rc < 0) {
        wr_err_set(err, WR_ESYS, -rc, "open the new netns");
        goto fail;
    }
    {
        char src[64];
        snprintf(src, sizeof(src), "/proc/self/fd/%d", slot_ns);
        if (mount(src, path, NULL, MS_BIND, NULL) < 0) {
            wr_err_sys(err, "bind-mount the netns at `%s`", path);
            goto fail;
        }
        mounted = true;
    }

    rc = add_veth(host_nl, ifname, hmac, smac, slot_ns);
    if (rc == -EEXIST) {
        /* A host end of this name with no slot file: left by a slot whose netns is still being
         * torn down, or by a crash. It is ours (the name is our pool's). */
        (void)del_link(host_nl, ifname);
        rc = add_veth(host_nl, ifname, hmac, smac, slot_ns);
    }
    if (rc < 0) {
        wr_err_set(err, WR_ESYS, -rc, "create veth %s", ifname);
        goto fail;
    }
    veth = true;
    if (slot_host_end(host_nl, ifname, haddr, saddr, err) < 0 ||
        slot_inside(slot_nl, haddr, saddr, true, err) < 0)
        goto fail;
    return 0;

fail:
    wr_err_wrap(err, "net slot %u", (unsigned)i);
    if (veth)
        (void)del_link(host_nl, ifname);
    if (mounted)
        (void)umount2(path, MNT_DETACH);
    (void)unlinkat(s->dirfd, name, 0);
    return -1;
}

int wr_netslot_readdress(struct wr_netslots *s, uint32_t i, struct wr_err *err)
{
    _cleanup_close_ int host_ns = -1, slot_ns = -1;
    struct mnl_socket *nl __attribute__((cleanup(rtnl_closep))) = NULL;
    int rc = 0;

    if (i >= wr_netslot_capacity(s->pool))
        return wr_err_set(err, WR_EINVAL, 0, "net slot %u is outside the pool", (unsigned)i);
    host_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    slot_ns = wr_netslot_open_fd(s, i);
    if (host_ns < 0 || slot_ns < 0)
        return wr_err_sys(err, "net slot %u: open its netns", (unsigned)i);
    /* Into the slot on this thread only, for the socket; back at once. */
    if (setns(slot_ns, CLONE_NEWNET) < 0)
        return wr_err_sys(err, "net slot %u: enter its netns", (unsigned)i);
    nl = rtnl_open();
    if (nl == NULL)
        rc = -errno;
    if (setns(host_ns, CLONE_NEWNET) < 0)
        abort(); /* a thread left in the wrong netns must not go on */
    if (rc < 0)
        return wr_err_set(err, WR_ESYS, -rc, "net slot %u: rtnetlink", (unsigned)i);
    if (slot_inside(nl, wr_netslot_host_addr(s->pool, i), wr_netslot_sandbox_addr(s->pool, i),
                    false, err) < 0)
        return wr_err_wrap(err, "net slot %u", (unsigned)i);
    return 0;
}
