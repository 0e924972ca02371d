/* SPDX-License-Identifier: Apache-2.0 */
/* In-process benchmark of the runtime: the path the daemon uses. For each of N sandboxes:
 * create (clone3, idmapped overlay, cgroups, seccomp, warren-init answering) → spawn /bin/true
 * → its EXIT event → destroy. Prints medians and p99s of create→exit and of the whole cycle.
 *
 * `sandbox_loop --floor ROOTFS [N]` measures the peer in the same run: the isolation floor of
 * research/perf-namespaces.md (nsfloor), six namespaces + tmpfs-upper overlay + /proc, /dev,
 * /tmp + pivot_root + lo up + exec /bin/true as PID 1 + reap, from the same long-lived process,
 * with no cgroups, no seccomp, no id range and no agent.
 *
 * `sandbox_loop --pool ROOTFS [N]` is the same loop with a thread that keeps two pre-cloned
 * children ready (wr_runtime_prewarm), as the daemon does when idle.
 *
 * usage: sandbox_loop [--floor|--pool] ROOTFS [N] */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../src/init/entry.h"
#include "../src/proto/proto.h"
#include "../src/runtime/runtime.h"
#include "../src/util/fs.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct(uint64_t *v, size_t n, double p)
{
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return (double)v[i] / 1e6;
}

/* Spawn argv[0] and wait for its EXIT. Returns the exit code or -1. */
static int run_true(int fd)
{
    char *argv[] = {"/bin/true", NULL};
    struct wr_spawn sp = {.argv = argv, .uid = -1, .gid = -1};
    struct wr_buf out;
    struct wr_reader rd;
    uint8_t buf[4096];
    int code = -1;

    wr_buf_init(&out);
    wr_reader_init(&rd);
    wr_spawn_encode(&out, 1, &sp);
    if (wr_write_all(fd, out.data, out.len) < 0)
        goto done;
    for (;;) {
        struct wr_frame_hdr h;
        const uint8_t *p;
        struct wr_err err;
        int r;

        while ((r = wr_reader_next(&rd, &h, &p, &err)) == 1) {
            if (h.type == WR_MSG_ERROR)
                goto done;
            if (h.type == WR_MSG_EXIT) {
                struct wr_exit ex;
                if (wr_exit_decode(p, h.len, &ex, &err) == 0)
                    code = ex.signal ? 128 + (int)ex.signal : (int)ex.exit_code;
                goto done;
            }
        }
        if (r < 0)
            goto done;
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0)
            goto done;
        wr_reader_feed(&rd, buf, (size_t)n);
    }
done:
    wr_buf_fini(&out);
    wr_reader_fini(&rd);
    return code;
}

/* One floor sandbox: the nsfloor sequence. Returns the child's exit status or -1. */
static int floor_once(const char *rootfs, const char *stage)
{
    pid_t pid = (pid_t)syscall(SYS_clone,
                               CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
                                   CLONE_NEWUTS | CLONE_NEWIPC | SIGCHLD,
                               0, 0, 0, 0);
    int st;

    if (pid < 0)
        return -1;
    if (pid == 0) {
        char opts[4200];
        struct ifreq ifr = {.ifr_name = "lo"};
        int fd;

        fd = open("/proc/self/setgroups", O_WRONLY);
        if (fd < 0 || write(fd, "deny", 4) != 4)
            _exit(10);
        close(fd);
        fd = open("/proc/self/uid_map", O_WRONLY);
        if (fd < 0 || write(fd, "0 0 1", 5) != 5)
            _exit(11);
        close(fd);
        fd = open("/proc/self/gid_map", O_WRONLY);
        if (fd < 0 || write(fd, "0 0 1", 5) != 5)
            _exit(12);
        close(fd);
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("tmpfs", stage, "tmpfs", 0, "size=64m") < 0 || chdir(stage) < 0 ||
            mkdir("upper", 0755) < 0 || mkdir("work", 0755) < 0 || mkdir("root", 0755) < 0)
            _exit(13);
        snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=upper,workdir=work", rootfs);
        if (mount("overlay", "root", "overlay", 0, opts) < 0 || chdir("root") < 0)
            _exit(14);
        if (mount("proc", "proc", "proc", 0, NULL) < 0 ||
            mount("tmpfs", "dev", "tmpfs", 0, "size=64k") < 0 ||
            mount("tmpfs", "tmp", "tmpfs", 0, NULL) < 0)
            _exit(15);
        static const char *const devs[] = {"null", "zero", "urandom"};
        for (int i = 0; i < 3; i++) {
            char src[32], dst[32];
            snprintf(src, sizeof(src), "/dev/%s", devs[i]);
            snprintf(dst, sizeof(dst), "dev/%s", devs[i]);
            fd = open(dst, O_CREAT | O_WRONLY, 0666);
            if (fd < 0 || mount(src, dst, NULL, MS_BIND, NULL) < 0)
                _exit(16);
            close(fd);
        }
        if (syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
            _exit(17);
        if (sethostname("sandbox", 7) < 0)
            _exit(18);
        fd = socket(AF_INET, SOCK_DGRAM, 0);
        if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
            _exit(19);
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
            _exit(19);
        close(fd);
        execl("/bin/true", "true", (char *)NULL);
        _exit(20);
    }
    if (waitpid(pid, &st, 0) < 0)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int floor_main(const char *rootfs, size_t n)
{
    const char *stage = "/run/warren-bench-floor";
    uint64_t *t = calloc(n, sizeof(uint64_t));

    (void)mkdir(stage, 0755);
    for (size_t i = 0; i < n + 20; i++) {
        uint64_t t0 = now_ns();
        int rc = floor_once(rootfs, stage);
        if (rc != 0) {
            fprintf(stderr, "sandbox_loop: floor sandbox exited %d\n", rc);
            return 1;
        }
        if (i >= 20)
            t[i - 20] = now_ns() - t0;
    }
    qsort(t, n, sizeof(uint64_t), cmp_u64);
    printf("floor (nsfloor sequence, in-process), %zu sandboxes\n", n);
    printf("  clone -> /bin/true exit -> reaped  median %.3f ms  p99 %.3f ms\n", pct(t, n, 0.5),
           pct(t, n, 0.99));
    (void)rmdir(stage);
    free(t);
    return 0;
}

static volatile int pool_stop;

static void *pool_thread(void *arg)
{
    struct wr_runtime *rt = arg;
    struct wr_err err;

    while (!pool_stop) {
        if (wr_runtime_prewarm(rt, 2, &err) < 0) {
            fprintf(stderr, "sandbox_loop: prewarm: %s\n", err.msg);
            return NULL;
        }
        usleep(200);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    struct wr_runtime_config cfg = {.run_dir = "/run/warren-bench",
                                    .cgroup_parent = "warren-bench",
                                    .init_path = getenv("WARREN_INIT")};
    struct wr_runtime *rt;
    struct wr_err err;
    size_t n = argc > 2 ? (size_t)atol(argv[2]) : 1000, warm = 20;
    uint64_t *to_exit, *cycle, *create, *ph[5];
    const char *layers[1];

    bool pool = false;
    pthread_t pt;

    if (argc > 2 && strcmp(argv[1], "--floor") == 0)
        return floor_main(argv[2], argc > 3 ? (size_t)atol(argv[3]) : 1000);
    if (argc > 2 && strcmp(argv[1], "--pool") == 0) {
        pool = true;
        argv++;
        argc--;
        n = argc > 2 ? (size_t)atol(argv[2]) : 1000;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: sandbox_loop [--floor] ROOTFS [N]\n");
        return 2;
    }
    /* Like warren-zygote, each child becomes warren-init in place; not with --pool, whose
     * thread clones while this one creates (init_main needs a single-threaded creator). */
    if (!pool)
        cfg.init_main = WR_INIT_MAIN;
    layers[0] = argv[1];
    if (wr_runtime_open(&cfg, &rt, &err) < 0) {
        fprintf(stderr, "sandbox_loop: %s\n", err.msg);
        return 1;
    }
    (void)wr_runtime_sweep(rt, NULL); /* what an interrupted earlier run left */
    if (pool)
        pthread_create(&pt, NULL, pool_thread, rt);
    to_exit = calloc(n, sizeof(uint64_t));
    cycle = calloc(n, sizeof(uint64_t));
    create = calloc(n, sizeof(uint64_t));
    for (int k = 0; k < 5; k++)
        ph[k] = calloc(n, sizeof(uint64_t));
    for (size_t i = 0; i < n + warm; i++) {
        struct wr_sandbox *sb;
        char id[32];
        struct wr_sandbox_spec spec = {.id = id,
                                       .layers = layers,
                                       .n_layers = 1,
                                       .memory_bytes = 512ull << 20,
                                       .cpu_millis = 1000,
                                       .pids_max = 256};
        uint64_t t0, t1, t2, t3;

        snprintf(id, sizeof(id), "bench-%zu", i);
        t0 = now_ns();
        if (wr_sandbox_create(rt, &spec, &sb, &err) < 0) {
            fprintf(stderr, "sandbox_loop: %s\n", err.msg);
            return 1;
        }
        t1 = now_ns();
        if (run_true(wr_sandbox_ctl_fd(sb)) != 0) {
            fprintf(stderr, "sandbox_loop: /bin/true failed\n");
            return 1;
        }
        t2 = now_ns();
        struct wr_sandbox_timing tm_copy = *wr_sandbox_timing(sb);
        if (wr_sandbox_destroy(sb, &err) < 0) {
            fprintf(stderr, "sandbox_loop: %s\n", err.msg);
            return 1;
        }
        t3 = now_ns();
        if (i >= warm) {
            const struct wr_sandbox_timing *tm = &tm_copy;
            ph[0][i - warm] = tm->cloned - tm->start;
            ph[1][i - warm] = tm->mapped - tm->cloned;
            ph[2][i - warm] = tm->overlay - tm->mapped;
            ph[3][i - warm] = tm->cgroup - tm->overlay;
            ph[4][i - warm] = tm->ready - tm->cgroup;
            create[i - warm] = t1 - t0;
            to_exit[i - warm] = t2 - t0;
            cycle[i - warm] = t3 - t0;
        }
    }
    qsort(create, n, sizeof(uint64_t), cmp_u64);
    qsort(to_exit, n, sizeof(uint64_t), cmp_u64);
    qsort(cycle, n, sizeof(uint64_t), cmp_u64);
    if (pool) {
        pool_stop = 1;
        pthread_join(pt, NULL);
    }
    printf("in-process%s, %zu sandboxes (cgroup %s)\n", pool ? ", pre-cloned children" : "", n,
           wr_runtime_cgroup_version(rt));
    printf("  create (init answering)  median %.3f ms  p99 %.3f ms\n", pct(create, n, 0.5),
           pct(create, n, 0.99));
    printf("  create -> /bin/true exit median %.3f ms  p99 %.3f ms\n", pct(to_exit, n, 0.5),
           pct(to_exit, n, 0.99));
    printf("  full cycle incl. destroy median %.3f ms  p99 %.3f ms\n", pct(cycle, n, 0.5),
           pct(cycle, n, 0.99));
    {
        static const char *const names[] = {"lock+uids+cgroup+socket+clone3", "id maps",
                                            "idmapped overlay", "cgroup attach",
                                            "child setup+exec+hello"};
        for (int k = 0; k < 5; k++) {
            qsort(ph[k], n, sizeof(uint64_t), cmp_u64);
            printf("    phase %-32s median %.3f ms\n", names[k], pct(ph[k], n, 0.5));
            free(ph[k]);
        }
    }
    wr_runtime_close(rt);
    free(to_exit);
    free(cycle);
    free(create);
    return 0;
}
