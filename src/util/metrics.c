/* SPDX-License-Identifier: Apache-2.0 */
/* The metrics registry and its text writer (metrics.h). */
#include "metrics.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "xalloc.h"

enum kind { K_COUNTER, K_GAUGE, K_HISTOGRAM };

struct series {
    uint64_t hash;
    char *key; /* the label values joined by \x1f */
    char *values[WR_METRIC_LABELS];
    double val;        /* counter, gauge; a histogram's sum */
    uint64_t count;    /* histogram */
    uint64_t *buckets; /* histogram: nb + 1 (not cumulative) */
};

struct wr_metric {
    struct wr_metric *next;
    enum kind kind;
    char *name;
    const char *help;
    size_t nlabels;
    char *labels[WR_METRIC_LABELS];
    double bounds[WR_METRIC_BUCKETS];
    size_t nb;
    wr_metric_read_fn fn;
    void *ctx;
    pthread_mutex_t mu;
    struct series *series;
    size_t nseries, cap;
};

struct wr_metric_emitter {
    struct wr_buf *out;
    const struct wr_metric *m;
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct wr_metric *reg_first, *reg_last;

static const char *const other_values[WR_METRIC_LABELS] = {"other", "other", "other", "other"};

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ULL;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static size_t count_labels(const char *const *names)
{
    size_t n = 0;

    while (names != NULL && names[n] != NULL)
        n++;
    return n;
}

static bool same_labels(const struct wr_metric *m, const char *const *names)
{
    if (count_labels(names) != m->nlabels)
        return false;
    for (size_t i = 0; i < m->nlabels; i++)
        if (strcmp(m->labels[i], names[i]) != 0)
            return false;
    return true;
}

static struct wr_metric *family(enum kind kind, const char *name, const char *help,
                                const char *const *names, const double *bounds, size_t nb,
                                wr_metric_read_fn fn, void *ctx)
{
    struct wr_metric *m;
    size_t nl = count_labels(names);

    if (nl > WR_METRIC_LABELS || nb > WR_METRIC_BUCKETS)
        return NULL;
    pthread_mutex_lock(&reg_mu);
    for (m = reg_first; m != NULL; m = m->next)
        if (strcmp(m->name, name) == 0)
            break;
    if (m != NULL) {
        struct wr_metric *r = m->kind == kind && same_labels(m, names) && m->fn == fn ? m : NULL;
        pthread_mutex_unlock(&reg_mu);
        return r;
    }
    m = xcalloc(1, sizeof(*m));
    m->kind = kind;
    m->name = xstrdup(name);
    m->help = help;
    m->nlabels = nl;
    for (size_t i = 0; i < nl; i++)
        m->labels[i] = xstrdup(names[i]);
    for (size_t i = 0; i < nb; i++)
        m->bounds[i] = bounds[i];
    m->nb = nb;
    m->fn = fn;
    m->ctx = ctx;
    pthread_mutex_init(&m->mu, NULL);
    if (reg_last)
        reg_last->next = m;
    else
        reg_first = m;
    reg_last = m;
    pthread_mutex_unlock(&reg_mu);
    /* A family without labels has its one series from the start: it is scraped as 0. */
    if (nl == 0 && fn == NULL)
        wr_metric_add(m, NULL, 0);
    return m;
}

struct wr_metric *wr_metric_counter(const char *name, const char *help,
                                    const char *const *label_names)
{
    return family(K_COUNTER, name, help, label_names, NULL, 0, NULL, NULL);
}

struct wr_metric *wr_metric_gauge(const char *name, const char *help,
                                  const char *const *label_names)
{
    return family(K_GAUGE, name, help, label_names, NULL, 0, NULL, NULL);
}

struct wr_metric *wr_metric_histogram(const char *name, const char *help,
                                      const char *const *label_names, const double *buckets,
                                      size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (!(buckets[i] > buckets[i - 1]))
            return NULL;
    return family(K_HISTOGRAM, name, help, label_names, buckets, n, NULL, NULL);
}

struct wr_metric *wr_metric_gauge_fn(const char *name, const char *help,
                                     const char *const *label_names, wr_metric_read_fn fn,
                                     void *ctx)
{
    return fn ? family(K_GAUGE, name, help, label_names, NULL, 0, fn, ctx) : NULL;
}

struct wr_metric *wr_metric_counter_fn(const char *name, const char *help,
                                       const char *const *label_names, wr_metric_read_fn fn,
                                       void *ctx)
{
    return fn ? family(K_COUNTER, name, help, label_names, NULL, 0, fn, ctx) : NULL;
}

/* The series of values (made if new; the "other" one past the cap). Called with m->mu held. */
static struct series *series_get(struct wr_metric *m, const char *const *values)
{
    struct wr_buf key = {0};
    struct series *s;
    uint64_t h;

    for (size_t i = 0; i < m->nlabels; i++) {
        if (i > 0)
            wr_buf_append(&key, "\x1f", 1);
        wr_buf_puts(&key, values && values[i] ? values[i] : "");
    }
    h = fnv(wr_buf_str(&key));
    for (size_t i = 0; i < m->nseries; i++)
        if (m->series[i].hash == h && strcmp(m->series[i].key, wr_buf_str(&key)) == 0) {
            wr_buf_fini(&key);
            return &m->series[i];
        }
    wr_buf_fini(&key);
    if (m->nseries >= WR_METRIC_SERIES && values != other_values)
        return series_get(m, other_values);
    if (m->nseries == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 8;
        m->series = xrealloc(m->series, m->cap * sizeof(*m->series));
    }
    s = &m->series[m->nseries++];
    memset(s, 0, sizeof(*s));
    wr_buf_init(&key);
    for (size_t i = 0; i < m->nlabels; i++) {
        s->values[i] = xstrdup(values && values[i] ? values[i] : "");
        if (i > 0)
            wr_buf_append(&key, "\x1f", 1);
        wr_buf_puts(&key, s->values[i]);
    }
    s->key = wr_buf_steal_str(&key);
    s->hash = h;
    if (m->kind == K_HISTOGRAM)
        s->buckets = xcalloc(m->nb + 1, sizeof(*s->buckets));
    return s;
}

void wr_metric_add(struct wr_metric *m, const char *const *values, double v)
{
    if (m == NULL || m->fn != NULL || m->kind == K_HISTOGRAM || isnan(v))
        return;
    if (m->kind == K_COUNTER && v < 0)
        return;
    pthread_mutex_lock(&m->mu);
    series_get(m, values)->val += v;
    pthread_mutex_unlock(&m->mu);
}

void wr_metric_inc(struct wr_metric *m, const char *const *values)
{
    wr_metric_add(m, values, 1);
}

void wr_metric_set(struct wr_metric *m, const char *const *values, double v)
{
    if (m == NULL || m->fn != NULL || m->kind != K_GAUGE)
        return;
    pthread_mutex_lock(&m->mu);
    series_get(m, values)->val = v;
    pthread_mutex_unlock(&m->mu);
}

void wr_metric_observe(struct wr_metric *m, const char *const *values, double v)
{
    struct series *s;
    size_t i;

    if (m == NULL || m->kind != K_HISTOGRAM || isnan(v))
        return;
    pthread_mutex_lock(&m->mu);
    s = series_get(m, values);
    for (i = 0; i < m->nb && v > m->bounds[i]; i++)
        ;
    s->buckets[i]++;
    s->count++;
    s->val += v;
    pthread_mutex_unlock(&m->mu);
}

double wr_metric_value(struct wr_metric *m, const char *const *values)
{
    double v = 0;

    if (m == NULL || m->fn != NULL)
        return 0;
    pthread_mutex_lock(&m->mu);
    {
        struct series *s = series_get(m, values);
        v = m->kind == K_HISTOGRAM ? (double)s->count : s->val;
    }
    pthread_mutex_unlock(&m->mu);
    return v;
}

/* ---- the text format ------------------------------------------------------------------------ */

static void put_number(struct wr_buf *out, double v)
{
    if (isnan(v))
        wr_buf_puts(out, "NaN");
    else if (isinf(v))
        wr_buf_puts(out, v > 0 ? "+Inf" : "-Inf");
    else if (v == floor(v) && fabs(v) < 1e15)
        wr_buf_printf(out, "%.0f", v);
    else
        wr_buf_printf(out, "%.17g", v);
}

/* A label value or help text: backslash, newline and (for label values) the double quote. */
static void put_escaped(struct wr_buf *out, const char *s, bool quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            wr_buf_puts(out, "\\\\");
        else if (*s == '\n')
            wr_buf_puts(out, "\\n");
        else if (*s == '"' && quote)
            wr_buf_puts(out, "\\\"");
        else
            wr_buf_append(out, s, 1);
    }
}

/* name{l="v",...,extra="x"} value */
static void put_sample(struct wr_buf *out, const struct wr_metric *m, const char *suffix,
                       const char *const *values, const char *extra, const char *extra_val,
                       double v)
{
    bool any = m->nlabels > 0 || extra != NULL;

    wr_buf_puts(out, m->name);
    wr_buf_puts(out, suffix);
    if (any) {
        wr_buf_puts(out, "{");
        for (size_t i = 0; i < m->nlabels; i++) {
            wr_buf_printf(out, "%s%s=\"", i ? "," : "", m->labels[i]);
            put_escaped(out, values[i] ? values[i] : "", true);
            wr_buf_puts(out, "\"");
        }
        if (extra != NULL)
            wr_buf_printf(out, "%s%s=\"%s\"", m->nlabels ? "," : "", extra, extra_val);
        wr_buf_puts(out, "}");
    }
    wr_buf_puts(out, " ");
    put_number(out, v);
    wr_buf_puts(out, "\n");
}

void wr_metric_emit(struct wr_metric_emitter *e, double value, const char *const *values)
{
    const char *none[WR_METRIC_LABELS] = {"", "", "", ""};

    put_sample(e->out, e->m, "", values ? values : none, NULL, NULL, value);
}

static void render_family(struct wr_buf *out, struct wr_metric *m)
{
    static const char *const types[] = {"counter", "gauge", "histogram"};

    wr_buf_printf(out, "# HELP %s ", m->name);
    put_escaped(out, m->help, false);
    wr_buf_printf(out, "\n# TYPE %s %s\n", m->name, types[m->kind]);
    if (m->fn != NULL) {
        struct wr_metric_emitter e = {out, m};
        m->fn(&e, m->ctx);
        return;
    }
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->nseries; i++) {
        struct series *s = &m->series[i];
        const char *const *vals = (const char *const *)s->values;
        if (m->kind != K_HISTOGRAM) {
            put_sample(out, m, "", vals, NULL, NULL, s->val);
            continue;
        }
        uint64_t cum = 0;
        for (size_t b = 0; b <= m->nb; b++) {
            char le[32];
            cum += s->buckets[b];
            if (b < m->nb)
                snprintf(le, sizeof(le), "%.17g", m->bounds[b]);
            else
                snprintf(le, sizeof(le), "+Inf");
            put_sample(out, m, "_bucket", vals, "le", le, (double)cum);
        }
        put_sample(out, m, "_sum", vals, NULL, NULL, s->val);
        put_sample(out, m, "_count", vals, NULL, NULL, (double)s->count);
    }
    pthread_mutex_unlock(&m->mu);
}

void wr_metrics_render(struct wr_buf *out)
{
    pthread_mutex_lock(&reg_mu);
    for (struct wr_metric *m = reg_first; m != NULL; m = m->next)
        render_family(out, m);
    pthread_mutex_unlock(&reg_mu);
}

/* ---- process_* from /proc/self ------------------------------------------------------------- */

/* Fields of /proc/self/stat after the command: utime stime (14, 15), starttime (22), rss (24). */
static int proc_stat(double *cpu_s, double *start_s, double *rss_b)
{
    char buf[1024], *p;
    FILE *f = fopen("/proc/self/stat", "re");
    unsigned long long utime = 0, stime = 0, start = 0;
    long long rss = 0;
    long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    size_t n;

    if (f == NULL)
        return -1;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    if (p == NULL || tck <= 0)
        return -1;
    /* After ")": state(3) ... utime is the 12th field from there. */
    if (sscanf(p + 2,
               "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
               "%llu %*u %lld",
               &utime, &stime, &start, &rss) != 4)
        return -1;
    *cpu_s = (double)(utime + stime) / (double)tck;
    *rss_b = (double)rss * (double)page;
    {
        /* starttime is in ticks since boot: add the boot time. */
        FILE *sf = fopen("/proc/stat", "re");
        char line[256];
        double btime = 0;
        while (sf && fgets(line, sizeof(line), sf))
            if (strncmp(line, "btime ", 6) == 0)
                btime = strtod(line + 6, NULL);
        if (sf)
            fclose(sf);
        *start_s = btime + (double)start / (double)tck;
    }
    return 0;
}

static void read_cpu(struct wr_metric_emitter *e, void *ctx)
{
    double cpu, start, rss;

    (void)ctx;
    if (proc_stat(&cpu, &start, &rss) == 0)
        wr_metric_emit(e, cpu, NULL);
}

static void read_rss(struct wr_metric_emitter *e, void *ctx)
{
    double cpu, start, rss;

    (void)ctx;
    if (proc_stat(&cpu, &start, &rss) == 0)
        wr_metric_emit(e, rss, NULL);
}

static void read_start(struct wr_metric_emitter *e, void *ctx)
{
    double cpu, start, rss;

    (void)ctx;
    if (proc_stat(&cpu, &start, &rss) == 0)
        wr_metric_emit(e, start, NULL);
}

static void read_fds(struct wr_metric_emitter *e, void *ctx)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    double n = 0;

    (void)ctx;
    if (d == NULL)
        return;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    wr_metric_emit(e, n - 1, NULL); /* less the directory's own fd */
}

void wr_metrics_register_process(void)
{
    wr_metric_counter_fn("process_cpu_seconds_total", "User and system CPU time of the daemon.",
                         NULL, read_cpu, NULL);
    wr_metric_gauge_fn("process_resident_memory_bytes", "Resident memory of the daemon.", NULL,
                       read_rss, NULL);
    wr_metric_gauge_fn("process_open_fds", "Open file descriptors of the daemon.", NULL, read_fds,
                       NULL);
    wr_metric_gauge_fn("process_start_time_seconds", "Start time of the daemon since the epoch.",
                       NULL, read_start, NULL);
}
