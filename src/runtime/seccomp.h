/* SPDX-License-Identifier: Apache-2.0 */
/* The default seccomp filter: compiled once with libseccomp when the runtime opens, then
 * installed as raw BPF in each sandbox between clone and exec (no allocation there). */
#pragma once

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>

#include "../util/err.h"

struct wr_seccomp {
    struct sock_filter *insns;
    unsigned short len;
};

/* Build the filter for the host architecture (and its 32-bit compat ABI). Returns 0 or -1. */
int wr_seccomp_build(struct wr_seccomp *out, struct wr_err *err);
void wr_seccomp_free(struct wr_seccomp *f);

/* wr_seccomp_build() through a cache in dir: the filter depends only on this code, the
 * libseccomp it was built with and the architecture, so it is stored as
 * `<dir>/seccomp-<build id of this executable>-<libseccomp version>.bpf` and read back by the
 * next process of the same build (compiling costs about 0.4-1.7 ms; reading it 20 us). Without
 * a build id, or on any problem with the cache, it compiles. A read refreshes the file's time
 * (at most once a day); a miss, which writes a new file, removes the `seccomp-*` files nothing
 * has read for WR_SECCOMP_CACHE_DAYS days: those of builds no longer run. Returns 0 or -1 with
 * err. */
#define WR_SECCOMP_CACHE_DAYS 7
int wr_seccomp_load(const char *dir, struct wr_seccomp *out, struct wr_err *err);

/* Install the filter on the calling thread, setting no_new_privs first when nnp is true (the
 * caller must then hold CAP_SYS_ADMIN in its user namespace). Async-signal-safe: meant for the
 * child between clone and exec. Returns 0 or -errno. */
int wr_seccomp_install(const struct wr_seccomp *f, bool nnp);
