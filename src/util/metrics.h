/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's metrics registry: counters, gauges (set, or read by a callback at scrape time)
 * and histograms with fixed buckets, written out in the Prometheus text exposition format
 * (version 0.0.4). One process-wide registry; the layers where the events happen register their
 * families and update them.
 *
 * A family has a name, a help text and a fixed list of label names (at most WR_METRIC_LABELS).
 * Its series are made on first use of a combination of label values, up to WR_METRIC_SERIES
 * per family; past that, updates go to one series whose label values are all "other", so a
 * family's series stay bounded whatever the callers pass. Label values must come from bounded
 * sets (a route pattern, a state, a reason), never an id.
 *
 * Thread safety: every call may be made from any thread. Registering the same name twice
 * returns the first family (its type, help and labels must match, else NULL). Families are never
 * freed. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define WR_METRIC_LABELS  4
#define WR_METRIC_SERIES  1024
#define WR_METRIC_BUCKETS 20

struct wr_metric;

/* label_names: NULL-terminated (NULL or empty: no labels). help: static text. */
struct wr_metric *wr_metric_counter(const char *name, const char *help,
                                    const char *const *label_names);
struct wr_metric *wr_metric_gauge(const char *name, const char *help,
                                  const char *const *label_names);
/* buckets: n ascending upper bounds (at most WR_METRIC_BUCKETS), +Inf added. */
struct wr_metric *wr_metric_histogram(const char *name, const char *help,
                                      const char *const *label_names, const double *buckets,
                                      size_t n);

/* A gauge read at scrape time: fn is called (on the scraping thread) with an emitter, and calls
 * wr_metric_emit once per series. fn must not call back into the registry otherwise. */
struct wr_metric_emitter;
typedef void (*wr_metric_read_fn)(struct wr_metric_emitter *e, void *ctx);
struct wr_metric *wr_metric_gauge_fn(const char *name, const char *help,
                                     const char *const *label_names, wr_metric_read_fn fn,
                                     void *ctx);
/* The same for a counter that another module keeps (a total read from /proc, say). */
struct wr_metric *wr_metric_counter_fn(const char *name, const char *help,
                                       const char *const *label_names, wr_metric_read_fn fn,
                                       void *ctx);
/* One series of a callback family: values has as many label values as the family has names. */
void wr_metric_emit(struct wr_metric_emitter *e, double value, const char *const *values);

/* Updates. values: the label values, as many as the family's names (NULL when it has none).
 * A NULL family is ignored. A counter only goes up (negative adds are ignored). */
void wr_metric_add(struct wr_metric *m, const char *const *values, double v);
void wr_metric_inc(struct wr_metric *m, const char *const *values);
void wr_metric_set(struct wr_metric *m, const char *const *values, double v);
void wr_metric_observe(struct wr_metric *m, const char *const *values, double v);

/* The value of one series (made, at 0, if new); for a histogram, its count. For tests and for
 * modules that read their own numbers back. */
double wr_metric_value(struct wr_metric *m, const char *const *values);

/* Append every family, in registration order, in the text format to out. */
void wr_metrics_render(struct wr_buf *out);

/* The content type of wr_metrics_render's output. */
#define WR_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Register the process_* families (CPU seconds, resident memory, open fds, start time) read
 * from /proc/self at scrape time. Idempotent. */
void wr_metrics_register_process(void);
