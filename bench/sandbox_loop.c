/* SPDX-License-Identifier: Apache-2.0 */
/* In-process benchmark of the runtime: the path the daemon uses. For each of N sandboxes:
 * create (clone3, idmapped overlay, cgroups, seccomp, warren-init answering) → spawn /bin/true
 * → its EXIT event → destroy. Prints medians and p99s of create→exit and of the whole cycle.
 *
 * usage: sandbox_loop ROOTFS [N] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

int main(int argc, char **argv)
{
    struct wr_runtime_config cfg = {.run_dir = "/run/warren-bench",
                                    .cgroup_parent = "warren-bench",
                                    .init_path = getenv("WARREN_INIT")};
    struct wr_runtime *rt;
    struct wr_err err;
    size_t n = argc > 2 ? (size_t)atol(argv[2]) : 1000, warm = 20;
    uint64_t *to_exit, *cycle, *create;
    const char *layers[1];

    if (argc < 2) {
        fprintf(stderr, "usage: sandbox_loop ROOTFS [N]\n");
        return 2;
    }
    layers[0] = argv[1];
    if (wr_runtime_open(&cfg, &rt, &err) < 0) {
        fprintf(stderr, "sandbox_loop: %s\n", err.msg);
        return 1;
    }
    to_exit = calloc(n, sizeof(uint64_t));
    cycle = calloc(n, sizeof(uint64_t));
    create = calloc(n, sizeof(uint64_t));
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
        if (wr_sandbox_destroy(sb, &err) < 0) {
            fprintf(stderr, "sandbox_loop: %s\n", err.msg);
            return 1;
        }
        t3 = now_ns();
        if (i >= warm) {
            create[i - warm] = t1 - t0;
            to_exit[i - warm] = t2 - t0;
            cycle[i - warm] = t3 - t0;
        }
    }
    qsort(create, n, sizeof(uint64_t), cmp_u64);
    qsort(to_exit, n, sizeof(uint64_t), cmp_u64);
    qsort(cycle, n, sizeof(uint64_t), cmp_u64);
    printf("in-process, %zu sandboxes (cgroup %s)\n", n, wr_runtime_cgroup_version(rt));
    printf("  create (init answering)  median %.3f ms  p99 %.3f ms\n", pct(create, n, 0.5),
           pct(create, n, 0.99));
    printf("  create -> /bin/true exit median %.3f ms  p99 %.3f ms\n", pct(to_exit, n, 0.5),
           pct(to_exit, n, 0.99));
    printf("  full cycle incl. destroy median %.3f ms  p99 %.3f ms\n", pct(cycle, n, 0.5),
           pct(cycle, n, 0.99));
    wr_runtime_close(rt);
    free(to_exit);
    free(cycle);
    free(create);
    return 0;
}
