/* SPDX-License-Identifier: Apache-2.0 */
/* In-process benchmark of the runtime: the path the daemon uses. For each of N sandboxes:
 * create (clone3, idmapped overlay, cgroups, seccomp, warren-init answering) → spawn /bin/true
 * → its EXIT event → destroy. Prints medians and p99s of create→exit and of the whole cycle.
 *
 * `sandbox_loop --floor ROOTFS [N]` measures the peer in the same run: the isolation floor,
 * six namespaces + tmpfs-upper overlay + /proc, /dev,
 * /tmp + pivot_root + lo up + exec /bin/true as PID 1 + reap, from the same long-lived process,
 * with no cgroups, no seccomp, no id range and no agent. `--floor-pid1` is the same floor with
 * one process more, as the daemon's path has: its PID 1 stays and starts /bin/true as a child.
 *
 * `--zygote PATH` clones each sandbox from warren-zygote at PATH, as warrend does, instead of from
 * this process, as `warren run` does; it goes with any mode but the floors and --pool.
 *
 * `sandbox_loop --pool ROOTFS [N]` is the same loop with a thread that keeps two pre-cloned
 * children ready (wr_runtime_prewarm), as the daemon does when idle.
 *
 * `sandbox_loop [--floor] --rate C SECS ROOTFS` measures throughput instead: C processes doing
 * cycles back to back for SECS seconds, and the host's CPU per cycle. It is the peer of
 * bench/api.c's conc mode: the floor's rate is what this machine can do at most with this much
 * isolation, and the in-process rate is the runtime's share without the API.
 *
 * `sandbox_loop --spawn ROOTFS [N]` creates one sandbox and times N spawns of /bin/true in it,
 * straight through warren-init's socket: an exec round trip without the daemon.
 *
 * usage: sandbox_loop [--floor|--floor-pid1|--pool|--spawn] [--zygote PATH] [--rate C SECS]
 *                     ROOTFS [N] */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
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
#include "bench.h"

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

/* --floor-pid1: the floor's PID 1 stays and starts /bin/true as its child (posix_spawn, then
 * waitpid), as any design with a resident PID 1 must; without it, /bin/true is PID 1 itself. */
static bool floor_pid1;

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
        if (floor_pid1) {
            char *targv[] = {"true", NULL};
            pid_t c;
            if (posix_spawn(&c, "/bin/true", NULL, NULL, targv, NULL) != 0 ||
                waitpid(c, &st, 0) != c)
                _exit(21);
            _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 22);
        }
        execl("/bin/true", "true", (char *)NULL);
        _exit(20);
    }
    if (waitpid(pid, &st, 0) < 0)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The floor's scratch directory: one per process, so that --rate's workers do not share one. */
static char *floor_stage(void)
{
    static char stage[64];

    snprintf(stage, sizeof(stage), "/run/warren-bench-floor-%d", (int)getpid());
    (void)mkdir(stage, 0755);
    return stage;
}

static int floor_main(const char *rootfs, size_t n)
{
    const char *stage = floor_stage();
    uint64_t *t = calloc(n, sizeof(uint64_t));

    for (size_t i = 0; i < n + 20; i++) {
        uint64_t t0 = now_ns();
        int rc = floor_once(rootfs, stage);
        if (rc != 0) {
            fprintf(stderr, "sandbox_loop: floor sandbox exited %d\n", rc);
            (void)rmdir(stage);
            return 1;
        }
        if (i >= 20)
            t[i - 20] = now_ns() - t0;
    }
    qsort(t, n, sizeof(uint64_t), cmp_u64);
    printf("floor (nsfloor sequence%s, in-process), %zu sandboxes\n",
           floor_pid1 ? " with a resident PID 1" : "", n);
    printf("  %s  median %.3f ms  p99 %.3f ms\n",
           floor_pid1 ? "clone -> PID 1 runs /bin/true -> reaped"
                      : "clone -> /bin/true exit -> reaped",
           pct(t, n, 0.5), pct(t, n, 0.99));
    (void)rmdir(stage);
    free(t);
    return 0;
}

/* --zygote: warren-zygote's path, or NULL to clone from this process */
static const char *zygote_path;

static struct wr_runtime_config bench_config(void)
{
    return (struct wr_runtime_config){.run_dir = "/run/warren-bench",
                                      .cgroup_parent = "warren-bench",
                                      .init_path = getenv("WARREN_INIT"),
                                      .zygote = zygote_path != NULL,
                                      .zygote_path = zygote_path};
}

/* One sandbox of the daemon's path: create → /bin/true → its EXIT → destroy. t[] gets the
 * times of create and of the exit, from t0; NULL for none. Returns 0, or -1 with a message. */
static int runtime_once(struct wr_runtime *rt, const char *rootfs, const char *id,
                        struct wr_sandbox_timing *timing, uint64_t t[2])
{
    const char *layers[1] = {rootfs};
    struct wr_sandbox_spec spec = {.id = id,
                                   .layers = layers,
                                   .n_layers = 1,
                                   .memory_bytes = 512ull << 20,
                                   .cpu_millis = 1000,
                                   .pids_max = 256};
    struct wr_sandbox *sb;
    struct wr_err err;
    uint64_t t0 = now_ns();

    if (wr_sandbox_create(rt, &spec, &sb, &err) < 0) {
        fprintf(stderr, "sandbox_loop: %s\n", err.msg);
        return -1;
    }
    if (t != NULL)
        t[0] = now_ns() - t0;
    if (run_true(wr_sandbox_ctl_fd(sb)) != 0) {
        fprintf(stderr, "sandbox_loop: /bin/true failed\n");
        (void)wr_sandbox_destroy(sb, &err);
        return -1;
    }
    if (t != NULL)
        t[1] = now_ns() - t0;
    if (timing != NULL)
        *timing = *wr_sandbox_timing(sb);
    if (wr_sandbox_destroy(sb, &err) < 0) {
        fprintf(stderr, "sandbox_loop: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* --rate: nw processes, each doing cycles back to back for secs seconds; the throughput peer of
 * bench/api.c's conc mode. Each worker counts its cycles in a shared page. */
static int rate_main(bool floor, const char *rootfs, int nw, double secs)
{
    uint64_t *count = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    uint64_t hb0, ht0, start, end, total = 0;
    int failed = 0, st;

    if (count == MAP_FAILED || nw < 1 || nw > 64 || secs <= 0) {
        fprintf(stderr, "sandbox_loop: --rate takes 1-64 workers and a positive duration\n");
        return 2;
    }
    host_cpu(&hb0, &ht0);
    start = now_ns();
    end = start + (uint64_t)(secs * 1e9);
    for (int w = 0; w < nw; w++) {
        pid_t p = fork();
        if (p < 0) {
            perror("sandbox_loop: fork");
            failed = 1;
            break;
        }
        if (p > 0)
            continue;
        if (floor) {
            const char *stage = floor_stage();
            int rc = 0;
            while (rc == 0 && now_ns() < end)
                if ((rc = floor_once(rootfs, stage)) == 0)
                    count[w]++;
            (void)rmdir(stage);
            if (rc != 0)
                fprintf(stderr, "sandbox_loop: floor sandbox exited %d\n", rc);
            _exit(rc != 0);
        }
        struct wr_runtime_config cfg = bench_config();
        struct wr_runtime *rt;
        struct wr_err err;
        char id[48];
        int rc = 0;

        cfg.init_main = WR_INIT_MAIN;
        if (wr_runtime_open(&cfg, &rt, &err) < 0) {
            fprintf(stderr, "sandbox_loop: %s\n", err.msg);
            _exit(1);
        }
        while (rc == 0 && now_ns() < end) {
            snprintf(id, sizeof(id), "rate-%d-%" PRIu64, w, count[w]);
            if ((rc = runtime_once(rt, rootfs, id, NULL, NULL)) == 0)
                count[w]++;
        }
        wr_runtime_close(rt);
        _exit(rc != 0);
    }
    while (wait(&st) > 0)
        failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    end = now_ns();
    for (int w = 0; w < nw; w++)
        total += count[w];
    printf("%s, %d processes for %.0f s\n",
           !floor       ? "in-process throughput"
           : floor_pid1 ? "floor (nsfloor sequence with a resident PID 1) throughput"
                        : "floor (nsfloor sequence) throughput",
           nw, secs);
    report_host_cpu(hb0, ht0, total, "cycle");
    printf("  C=%d: %" PRIu64 " cycles in %.2f s = %.1f /s%s\n", nw, total,
           (double)(end - start) / 1e9, (double)total / ((double)(end - start) / 1e9),
           failed ? " (a worker failed)" : "");
    munmap(count, 4096);
    return failed;
}

/* --spawn: one sandbox, n × /bin/true through warren-init's socket, no daemon in between: the
 * peer of bench/api.c's exec mode that tells init's share of an exec round trip from the API's. */
static int spawn_main(struct wr_runtime *rt, const char *rootfs, size_t n)
{
    const char *layers[1] = {rootfs};
    struct wr_sandbox_spec spec = {.id = "bench-spawn",
                                   .layers = layers,
                                   .n_layers = 1,
                                   .memory_bytes = 512ull << 20,
                                   .cpu_millis = 1000,
                                   .pids_max = 256};
    uint64_t *t = calloc(n, sizeof(uint64_t));
    struct wr_sandbox *sb;
    struct wr_err err;
    int rc = 0;

    if (wr_sandbox_create(rt, &spec, &sb, &err) < 0) {
        fprintf(stderr, "sandbox_loop: %s\n", err.msg);
        free(t);
        return 1;
    }
    for (size_t i = 0; i < n + 20 && rc == 0; i++) {
        uint64_t t0 = now_ns();
        if (run_true(wr_sandbox_ctl_fd(sb)) != 0) {
            fprintf(stderr, "sandbox_loop: /bin/true failed\n");
            rc = 1;
        } else if (i >= 20) {
            t[i - 20] = now_ns() - t0;
        }
    }
    if (wr_sandbox_destroy(sb, &err) < 0) {
        fprintf(stderr, "sandbox_loop: %s\n", err.msg);
        rc = 1;
    }
    if (rc == 0) {
        qsort(t, n, sizeof(uint64_t), cmp_u64);
        printf("in-process, one sandbox, %zu spawns\n", n);
        printf("  spawn /bin/true -> its EXIT  median %.3f ms  p99 %.3f ms\n", pct(t, n, 0.5),
               pct(t, n, 0.99));
    }
    free(t);
    return rc;
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
    struct wr_runtime_config cfg;
    struct wr_runtime *rt;
    struct wr_err err;
    size_t n = 1000, warm = 20;
    uint64_t *to_exit, *cycle, *create, *ph[5];
    bool pool = false, floor = false, spawn = false;
    int rate = 0;
    double secs = 0;
    pthread_t pt;

    for (; argc > 1 && strncmp(argv[1], "--", 2) == 0; argc--, argv++) {
        if (strcmp(argv[1], "--floor") == 0) {
            floor = true;
        } else if (strcmp(argv[1], "--floor-pid1") == 0) {
            floor = floor_pid1 = true;
        } else if (strcmp(argv[1], "--pool") == 0) {
            pool = true;
        } else if (strcmp(argv[1], "--spawn") == 0) {
            spawn = true;
        } else if (strcmp(argv[1], "--zygote") == 0 && argc > 2) {
            zygote_path = argv[2];
            argc--;
            argv++;
        } else if (strcmp(argv[1], "--rate") == 0 && argc > 3) {
            rate = atoi(argv[2]);
            secs = atof(argv[3]);
            argc -= 2;
            argv += 2;
        } else {
            argc = 0; /* usage */
            break;
        }
    }
    if (argc < 2 || pool + floor + spawn > 1 || (rate && (pool || spawn)) ||
        (zygote_path != NULL && (floor || pool))) {
        fprintf(stderr, "usage: sandbox_loop [--floor|--floor-pid1|--pool|--spawn] "
                        "[--zygote PATH] [--rate C SECS] ROOTFS [N]\n");
        return 2;
    }
    if (argc > 2)
        n = (size_t)atol(argv[2]);
    if (rate)
        return rate_main(floor, argv[1], rate, secs);
    if (floor)
        return floor_main(argv[1], n);
    /* Like warren-zygote, each child becomes warren-init in place; not with --pool, whose
     * thread clones while this one creates (init_main needs a single-threaded creator). */
    /* The runtime falls back to a fork of this process when the zygote is missing, which would
     * time the wrong path under the zygote's name. */
    if (zygote_path != NULL && access(zygote_path, X_OK) < 0) {
        fprintf(stderr, "sandbox_loop: --zygote %s: %s\n", zygote_path, strerror(errno));
        return 2;
    }
    cfg = bench_config(); /* after the options: --zygote */
    if (!pool)
        cfg.init_main = WR_INIT_MAIN;
    if (wr_runtime_open(&cfg, &rt, &err) < 0) {
        fprintf(stderr, "sandbox_loop: %s\n", err.msg);
        return 1;
    }
    (void)wr_runtime_sweep(rt, NULL); /* what an interrupted earlier run left */
    if (spawn) {
        int rc = spawn_main(rt, argv[1], n);
        wr_runtime_close(rt);
        return rc;
    }
    if (pool)
        pthread_create(&pt, NULL, pool_thread, rt);
    to_exit = calloc(n, sizeof(uint64_t));
    cycle = calloc(n, sizeof(uint64_t));
    create = calloc(n, sizeof(uint64_t));
    for (int k = 0; k < 5; k++)
        ph[k] = calloc(n, sizeof(uint64_t));
    for (size_t i = 0; i < n + warm; i++) {
        struct wr_sandbox_timing tm;
        uint64_t t0 = now_ns(), t[2];
        char id[32];

        snprintf(id, sizeof(id), "bench-%zu", i);
        if (runtime_once(rt, argv[1], id, &tm, t) < 0)
            return 1;
        if (i >= warm) {
            ph[0][i - warm] = tm.cloned - tm.start;
            ph[1][i - warm] = tm.mapped - tm.cloned;
            ph[2][i - warm] = tm.overlay - tm.mapped;
            ph[3][i - warm] = tm.cgroup - tm.overlay;
            ph[4][i - warm] = tm.ready - tm.cgroup;
            create[i - warm] = t[0];
            to_exit[i - warm] = t[1];
            cycle[i - warm] = now_ns() - t0;
        }
    }
    qsort(create, n, sizeof(uint64_t), cmp_u64);
    qsort(to_exit, n, sizeof(uint64_t), cmp_u64);
    qsort(cycle, n, sizeof(uint64_t), cmp_u64);
    if (pool) {
        pool_stop = 1;
        pthread_join(pt, NULL);
    }
    printf("in-process%s, %zu sandboxes (cgroup %s)\n",
           pool          ? ", pre-cloned children"
           : zygote_path ? ", cloned by warren-zygote as in warrend"
                         : ", cloned by this process as in `warren run`",
           n, wr_runtime_cgroup_version(rt));
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
