/* SPDX-License-Identifier: Apache-2.0 */
/* Scope-bound ownership: cleanup attributes for the common resources and explicit hand-offs.
 * A local declared `_cleanup_free_ char *p = NULL;` is freed when it leaves scope unless its
 * value was moved out with steal_pointer(&p). fd locals start at -1 and move with steal_fd(). */
#pragma once

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void wr_freep(void *p)
{
    free(*(void **)p);
}

static inline void wr_closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        (void)close(*fd);
        errno = saved;
    }
}

static inline void wr_fclosep(FILE **f)
{
    if (*f != NULL)
        (void)fclose(*f);
}

static inline void wr_closedirp(DIR **d)
{
    if (*d != NULL)
        (void)closedir(*d);
}

#define _cleanup_(f)       __attribute__((cleanup(f)))
#define _cleanup_free_     _cleanup_(wr_freep)
#define _cleanup_close_    _cleanup_(wr_closep)
#define _cleanup_fclose_   _cleanup_(wr_fclosep)
#define _cleanup_closedir_ _cleanup_(wr_closedirp)

/* Take the value out of *pp and leave NULL behind; the type is checked by the ternary. */
static inline void *wr_steal_pointer(void *pp)
{
    void **ptr = (void **)pp;
    void *ret = *ptr;
    *ptr = NULL;
    return ret;
}
#define steal_pointer(pp) (0 ? (*(pp)) : (wr_steal_pointer)(pp))

/* Take an fd out of *fdp and leave -1 behind. */
static inline int steal_fd(int *fdp)
{
    int fd = *fdp;
    *fdp = -1;
    return fd;
}

#define WR_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The struct of type `type` whose member `member` ptr points to. The ternary makes the compiler
 * check that ptr has the member's type. */
#define container_of(ptr, type, member)                                                            \
    ((type *)(void *)((char *)(1 ? (ptr) : &((type *)0)->member) - offsetof(type, member)))
