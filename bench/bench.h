/* SPDX-License-Identifier: Apache-2.0 */
/* What the benchmark programs (api.c, sandbox_loop.c) share: a clock, the rank rule for
 * percentiles, and the host's CPU use from /proc/stat. Header-only: each program is one file. */
#ifndef WARREN_BENCH_H
#define WARREN_BENCH_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The same rank rule as bench/run.sh: sorted[round(q * (n - 1))], in ms. */
static inline double pct(const uint64_t *v, size_t n, double q)
{
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return (double)v[i < n ? i : n - 1] / 1e6;
}

/* Busy and total jiffies of all CPUs, from /proc/stat. */
static inline void host_cpu(uint64_t *busy, uint64_t *total)
{
    unsigned long long v[10] = {0};
    FILE *f = fopen("/proc/stat", "r");

    *busy = *total = 0;
    if (f == NULL)
        return;
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
               &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]) >= 8) {
        for (int i = 0; i < 8; i++)
            *total += v[i];
        *busy = *total - v[3] - v[4]; /* minus idle and iowait */
    }
    fclose(f);
}

/* Print how busy the host was since host_cpu(&b0, &t0), and its CPU per operation. */
static inline void report_host_cpu(uint64_t b0, uint64_t t0, uint64_t ops, const char *what)
{
    uint64_t b1, t1;
    long hz = sysconf(_SC_CLK_TCK), ncpu = sysconf(_SC_NPROCESSORS_ONLN);

    host_cpu(&b1, &t1);
    if (t1 <= t0 || ops == 0)
        return;
    printf("  host CPU: %.2f of %ld cores busy, %.2f ms of CPU per %s (all processes)\n",
           (double)(b1 - b0) / (double)(t1 - t0) * (double)ncpu, ncpu,
           (double)(b1 - b0) * 1000.0 / (double)hz / (double)ops, what);
}

#endif
