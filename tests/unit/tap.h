/* SPDX-License-Identifier: Apache-2.0 */
/* A minimal TAP producer for the unit tests: ok()/is_int()/is_str() print one line each, and
 * done() prints the plan and returns the exit status (1 if anything failed). */
#pragma once

#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

#define ok(cond, ...)                                                                              \
    do {                                                                                           \
        int c_ = !!(cond);                                                                         \
        tap_n++;                                                                                   \
        if (!c_)                                                                                   \
            tap_failed++;                                                                          \
        printf("%sok %d - ", c_ ? "" : "not ", tap_n);                                             \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        if (!c_)                                                                                   \
            printf("#   failed at %s:%d\n", __FILE__, __LINE__);                                   \
    } while (0)

#define is_int(got, want, name)                                                                    \
    do {                                                                                           \
        long long g_ = (long long)(got), w_ = (long long)(want);                                   \
        ok(g_ == w_, "%s", name);                                                                  \
        if (g_ != w_)                                                                              \
            printf("#   got %lld, want %lld\n", g_, w_);                                           \
    } while (0)

#define is_str(got, want, name)                                                                    \
    do {                                                                                           \
        const char *g_ = (got), *w_ = (want);                                                      \
        int same_ = (g_ && w_) ? strcmp(g_, w_) == 0 : g_ == w_;                                   \
        ok(same_, "%s", name);                                                                     \
        if (!same_)                                                                                \
            printf("#   got \"%s\", want \"%s\"\n", g_ ? g_ : "(null)", w_ ? w_ : "(null)");       \
    } while (0)

static inline int done(void)
{
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}
