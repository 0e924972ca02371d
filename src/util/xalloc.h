/* SPDX-License-Identifier: Apache-2.0 */
/* Allocation that cannot fail: on out-of-memory the process aborts with a message (as crun,
 * bubblewrap and h2o do). Sizes that come from a tenant must be bounded before they get here. */
#pragma once

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
