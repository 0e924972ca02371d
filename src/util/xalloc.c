/* SPDX-License-Identifier: Apache-2.0 */
/* Aborting allocators. */
#include "xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void oom(void)
{
    static const char msg[] = "warren: out of memory\n";
    (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        oom();
    return p;
}

void *xcalloc(size_t nmemb, size_t size)
{
    void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
    if (p == NULL)
        oom();
    return p;
}

void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (p == NULL)
        oom();
    return p;
}

char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (p == NULL)
        oom();
    return p;
}

char *xstrndup(const char *s, size_t n)
{
    char *p = strndup(s, n);
    if (p == NULL)
        oom();
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    char *p = NULL;
    va_list ap;

    va_start(ap, fmt);
    if (vasprintf(&p, fmt, ap) < 0)
        oom();
    va_end(ap);
    return p;
}
