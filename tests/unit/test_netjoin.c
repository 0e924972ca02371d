/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox joining a network slot (src/runtime/sandbox.c, zygote.c, init's --resolver), as
 * root in a private network and mount namespace: real sandboxes of the busybox test image,
 * cloned in this process and through warren-zygote, land in the slot's netns, see its eth0 in
 * their /sys and get /etc/resolv.conf; and the cost of a fresh clone into a slot against a
 * pre-cloned child. */
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>

#include "../../src/runtime/netslot.h"
#include "../../src/runtime/runtime.h"
#include "../../bench/bench.h"
#include "netns_test.h"
#include "tap.h"

#define check(cond, ...)                                                                           \
    do {                                                                                           \
        int check_ = !!(cond);                                                                     \
        ok(check_, __VA_ARGS__);                                                                   \
    } while (0)

static const struct wr_cidr4 pool = {.addr = 0xc6120000u, .len = 28};
static char dir[64], init_path[PATH_MAX], image_path[PATH_MAX], zygote_path[PATH_MAX];

static int find_paths(void)
{
    char exe[PATH_MAX], p[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    char *slash;

    if (n < 0)
        return -1;
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0';
    snprintf(p, sizeof(p), "%s/../warren-init", exe);
    if (realpath(p, init_path) == NULL)
        return -1;
    snprintf(p, sizeof(p), "%s/../warren-zygote", exe);
    if (realpath(p, zygote_path) == NULL)
        return -1;
    snprintf(p, sizeof(p), "%s/../images/busybox", exe);
    return realpath(p, image_path) == NULL ? -1 : 0;
}

static struct wr_sandbox *make(struct wr_runtime *rt, const char *id, int netns_fd,
                               uint32_t resolver)
{
    const char *layers[] = {image_path};
    struct wr_sandbox_spec spec = {.id = id,
                                   .layers = layers,
                                   .n_layers = 1,
                                   .memory_bytes = 256ull << 20,
                                   .pids_max = 64,
                                   .netns_fd = netns_fd,
                                   .resolver = resolver,
                                   .pooled_any = true};
    struct wr_sandbox *sb = NULL;
    struct wr_err err;

    if (wr_sandbox_create(rt, &spec, &sb, &err) < 0) {
        printf("# create %s: %s\n", id, err.msg);
        return NULL;
    }
    return sb;
}

static ino_t ns_ino(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_ino : 0;
}

static ino_t pid_netns(pid_t pid)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/ns/net", (int)pid);
    return ns_ino(p);
}

static void check_joined(struct wr_sandbox *sb, int slot_fd, uint32_t resolver, const char *how)
{
    struct stat st;
    char p[128], want[64], a[WR_INET4_STRLEN];
    pid_t pid = wr_sandbox_pid(sb);

    fstat(slot_fd, &st);
    check(pid_netns(pid) == st.st_ino, "%s: warren-init is in the slot's netns", how);
    wr_inet4_format(resolver, a);
    snprintf(want, sizeof(want), "nameserver %s", a);
    snprintf(p, sizeof(p), "/proc/%d/root/etc/resolv.conf", (int)pid);
    is_str(netns_read(p), want, "resolv.conf names the resolver");
    snprintf(p, sizeof(p), "/proc/%d/root/sys/class/net/eth0", (int)pid);
    check(access(p, F_OK) == 0, "%s: its /sys shows the slot's eth0", how);
    snprintf(p, sizeof(p), "/proc/%d/root/sys/class/net/wrc6120000", (int)pid);
    check(access(p, F_OK) < 0, "%s: and not the host's interfaces", how);
    {
        struct statfs sf;
        snprintf(p, sizeof(p), "/proc/%d/root/sys", (int)pid);
        check(statfs(p, &sf) == 0 && (sf.f_flags & ST_RDONLY), "%s: /sys is read-only", how);
    }
}

static double p50(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_u64);
    return pct(v, n, 0.5);
}

static int body(void)
{
    struct wr_netslots_config scfg = {.dir = dir, .pool = pool};
    struct wr_runtime_config cfg = {.run_dir = "/run/warren-test-netjoin",
                                    .cgroup_parent = "warren-test-netjoin"};
    struct wr_netslots *ss = NULL;
    struct wr_runtime *rt = NULL, *zrt = NULL;
    struct wr_sandbox *a = NULL, *b = NULL, *z = NULL;
    struct wr_err err = {0};
    int s0 = -1, s1 = -1;
    char id[64];
    uint32_t r0 = wr_netslot_host_addr(pool, 0), r1 = wr_netslot_host_addr(pool, 1);

    if (find_paths() < 0) {
        ok(0, "find warren-init, warren-zygote and images/busybox next to the test");
        return done();
    }
    netns_sh(-1, "ip link set lo up");
    check(wr_netslots_open(&scfg, &ss, &err) == 0 && wr_netslot_make(ss, 0, &err) == 0 &&
              wr_netslot_make(ss, 1, &err) == 0,
          "two slots %s", err.msg);
    s0 = wr_netslot_open_fd(ss, 0);
    s1 = wr_netslot_open_fd(ss, 1);
    cfg.init_path = init_path;
    if (wr_runtime_open(&cfg, &rt, &err) < 0) {
        ok(0, "runtime: %s", err.msg);
        goto out;
    }
    (void)wr_runtime_sweep(rt, NULL);

    snprintf(id, sizeof(id), "nj-a-%d", (int)getpid());
    a = make(rt, id, s0, r0);
    check(a != NULL, "a sandbox in slot 0 (cloned in this process)");
    if (a != NULL)
        check_joined(a, s0, r0, "in-process");
    {
        struct stat st;
        fstat(s0, &st);
        check(ns_ino("/proc/thread-self/ns/net") != st.st_ino, "the creating thread is back");
    }
    snprintf(id, sizeof(id), "nj-b-%d", (int)getpid());
    b = make(rt, id, -1, 0);
    check(b != NULL, "a sandbox without networking");
    if (b != NULL) {
        struct stat st;
        char p[96];
        fstat(s0, &st);
        check(pid_netns(wr_sandbox_pid(b)) != st.st_ino &&
                  pid_netns(wr_sandbox_pid(b)) != ns_ino("/proc/thread-self/ns/net"),
              "it has a netns of its own");
        snprintf(p, sizeof(p), "/proc/%d/root/etc/resolv.conf", (int)wr_sandbox_pid(b));
        check(access(p, F_OK) < 0, "and no resolv.conf written");
    }
    {
        const char *layers[] = {image_path};
        struct wr_sandbox_spec spec = {
            .id = "nj-bad", .layers = layers, .n_layers = 1, .netns_fd = open("/", O_RDONLY)};
        struct wr_sandbox *x = NULL;
        check(wr_sandbox_create(rt, &spec, &x, &err) < 0 && err.kind == WR_EINVAL,
              "a netns_fd that is no netns is refused");
        close(spec.netns_fd);
    }
    wr_sandbox_destroy(a, NULL);
    wr_sandbox_destroy(b, NULL);
    a = b = NULL;

    /* a child pre-cloned into a slot */
    {
        uint32_t slot = 0;
        struct wr_sandbox *x;
        check(wr_runtime_prewarm_net(rt, &s0, &slot, &r0, 1, &err) == 1 &&
                  wr_runtime_net_pooled(rt) == 1,
              "a child waits in slot 0 %s", err.msg);
        snprintf(id, sizeof(id), "nj-p-%d", (int)getpid());
        x = make(rt, id, WR_NETNS_POOLED, 0);
        check(x != NULL && wr_sandbox_net_slot(x) == 0, "a create takes it, in slot 0");
        if (x != NULL)
            check_joined(x, s0, r0, "pooled");
        check(wr_runtime_net_pooled(rt) == 0, "the pool is empty");
        check(make(rt, "nj-p2", WR_NETNS_POOLED, 0) == NULL, "another pooled create is refused");
        wr_sandbox_destroy(x, NULL);
    }

    /* the cost of the clone step: a fresh clone into a slot against a pre-cloned child */
    {
        enum { N = 25 };
        uint64_t warm[N], fresh[N], warm_all[N], fresh_all[N], pooled[N], pooled_all[N];
        for (int i = 0; i < N; i++) {
            struct wr_sandbox *x;
            const struct wr_sandbox_timing *tm;
            if (wr_runtime_prewarm(rt, 1, &err) < 0)
                printf("# prewarm: %s\n", err.msg);
            snprintf(id, sizeof(id), "nj-w%d-%d", i, (int)getpid());
            x = make(rt, id, -1, 0);
            if (x == NULL)
                break;
            tm = wr_sandbox_timing(x);
            warm[i] = tm->cloned - tm->start;
            warm_all[i] = tm->ready - tm->start;
            wr_sandbox_destroy(x, NULL);
            snprintf(id, sizeof(id), "nj-f%d-%d", i, (int)getpid());
            x = make(rt, id, s0, r0);
            if (x == NULL)
                break;
            tm = wr_sandbox_timing(x);
            fresh[i] = tm->cloned - tm->start;
            fresh_all[i] = tm->ready - tm->start;
            wr_sandbox_destroy(x, NULL);
            {
                uint32_t slot = 0;
                if (wr_runtime_prewarm_net(rt, &s0, &slot, &r0, 1, &err) != 1)
                    printf("# prewarm_net: %s\n", err.msg);
            }
            snprintf(id, sizeof(id), "nj-q%d-%d", i, (int)getpid());
            x = make(rt, id, WR_NETNS_POOLED, 0);
            if (x == NULL)
                break;
            tm = wr_sandbox_timing(x);
            pooled[i] = tm->cloned - tm->start;
            pooled_all[i] = tm->ready - tm->start;
            wr_sandbox_destroy(x, NULL);
        }
        printf("# clone step p50: pre-cloned child %.3f ms, fresh clone into a slot %.3f ms, "
               "pre-cloned in a slot %.3f ms\n",
               p50(warm, N), p50(fresh, N), p50(pooled, N));
        printf("# whole create p50: pre-cloned %.3f ms, fresh into a slot %.3f ms, pre-cloned "
               "in a slot %.3f ms\n",
               p50(warm_all, N), p50(fresh_all, N), p50(pooled_all, N));
        ok(1, "timed %d creates of each kind", N);
    }

    /* through warren-zygote */
    cfg.zygote = true;
    cfg.zygote_path = zygote_path;
    cfg.cgroup_parent = "warren-test-netjoin-z";
    cfg.run_dir = "/run/warren-test-netjoin-z";
    if (wr_runtime_open(&cfg, &zrt, &err) < 0) {
        ok(0, "zygote runtime: %s", err.msg);
        goto out;
    }
    snprintf(id, sizeof(id), "nj-z-%d", (int)getpid());
    z = make(zrt, id, s1, r1);
    check(z != NULL, "a sandbox in slot 1 (cloned by warren-zygote)");
    if (z != NULL)
        check_joined(z, s1, r1, "zygote");
    wr_sandbox_destroy(z, NULL);

out:
    if (zrt != NULL)
        wr_runtime_close(zrt);
    if (rt != NULL)
        wr_runtime_close(rt);
    netns_sh(-1, "rmdir /sys/fs/cgroup/*/warren-test-netjoin* /sys/fs/cgroup/warren-test-netjoin* "
                 "2>/dev/null; true");
    if (ss != NULL) {
        wr_netslot_destroy(ss, 0, &err);
        wr_netslot_destroy(ss, 1, &err);
        wr_netslots_close(ss);
    }
    rmdir(dir);
    return done();
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/warren-test-netjoin-%d", (int)getpid());
    signal(SIGPIPE, SIG_IGN);
    {
        /* whatever a failed run left of the slot directory (its mounts died with the child) */
        int rc = netns_test_run(body, "test_netjoin");
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        (void)netns_sh(-1, cmd);
        return rc;
    }
}
