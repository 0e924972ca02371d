/* SPDX-License-Identifier: Apache-2.0 */
/* Parsing of user-supplied quantities (sizes, CPU counts, durations) shared by the CLI and the
 * daemon. Each returns 0, or -1 with a WR_EINVAL err that names the bad value. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

/* "512M", "1G", "1.5g", "4096", "64k": bytes, binary units (K=1024). Must be > 0. */
int wr_parse_size(const char *s, uint64_t *out, struct wr_err *err);

/* "1", "0.5", "2.25": CPUs in thousandths, from 0.01 to 1024. */
int wr_parse_cpus(const char *s, uint32_t *millis, struct wr_err *err);

/* A non-negative decimal integer no greater than max. */
int wr_parse_uint(const char *s, uint64_t max, uint64_t *out, struct wr_err *err);

/* Parse a bucket, "RATE/s:BURST": RATE a decimal number above 0, BURST an integer of at least 1;
 * both sizes (K, M, G suffixes) when bytes. "0" or "off" is no bucket (*rate = 0, *burst = 0).
 * Returns 0 or -1 with err (WR_EINVAL). */
int wr_parse_rate(const char *s, bool bytes, double *rate, uint64_t *burst, struct wr_err *err);

/* A uid or gid as /etc/passwd and /etc/group write them: digits only, below 2^32 - 1 (which is
 * (uid_t)-1, no id). false if s is not one. */
bool wr_parse_id(const char *s, unsigned long *out);
