/* SPDX-License-Identifier: Apache-2.0 */
/* String vectors (strv.h). */
#include "strv.h"

#include <stdlib.h>

#include "xalloc.h"

void wr_strv_free(char **v)
{
    if (v == NULL)
        return;
    for (char **p = v; *p != NULL; p++)
        free(*p);
    free(v);
}

size_t wr_strv_len(char *const *v)
{
    size_t n = 0;

    while (v != NULL && v[n] != NULL)
        n++;
    return n;
}

char **wr_strv_dup(char *const *v)
{
    size_t n = wr_strv_len(v);
    char **out = xcalloc(n + 1, sizeof(char *));

    for (size_t i = 0; i < n; i++)
        out[i] = xstrdup(v[i]);
    return out;
}
