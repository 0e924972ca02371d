/* SPDX-License-Identifier: Apache-2.0 */
/* NULL-terminated arrays of heap strings (argv, env), each string and the array owned by whoever
 * holds the array. A local `_cleanup_strv_ char **v = NULL;` is freed when it leaves scope unless
 * moved out with steal_pointer(&v). */
#pragma once

#include <stddef.h>

/* Free every string and the array. NULL is an empty no-op. */
void wr_strv_free(char **v);
/* The number of strings before the NULL (0 for a NULL v). */
size_t wr_strv_len(char *const *v);
/* A deep copy (an empty array for a NULL v; never NULL). The caller frees it with wr_strv_free. */
char **wr_strv_dup(char *const *v);

static inline void wr_strv_freep(char ***v)
{
    wr_strv_free(*v);
}
#define _cleanup_strv_ __attribute__((cleanup(wr_strv_freep)))
