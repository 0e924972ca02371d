/* SPDX-License-Identifier: Apache-2.0 */
/* The manager's metrics (docs/operations.md, "Metrics"): its families in the registry of
 * util/metrics.h, updated where the events happen in core/, and read at scrape time. What the
 * other layers count through core: */
#pragma once

/* A request turned away by a limit: policy names the limit ("requests", "creates", "sandboxes",
 * "memory", ...), reason is one of "rate", "quota", "capacity", "budget" (bounded sets; never a
 * team or an id). Any thread. */
void wr_core_metric_limit_rejected(const char *policy, const char *reason);
