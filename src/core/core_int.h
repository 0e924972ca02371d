/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by src/core/manager.c and src/core/procs.c. */
#pragma once

#include "manager.h"

struct wr_sandbox;

struct wr_msb {
    struct wr_manager *m;
    struct wr_msb *hnext; /* hash chain */
    char *id;
    char *team;
    int refs;
    bool alive;   /* running and managed: requests may use it */
    bool ending;  /* being destroyed */
    bool adopted; /* taken back after a daemon restart */
    bool polling;
    int open_handles;
    uint64_t memory_bytes;
    struct wr_sandbox *rt;
    struct wr_agent *agent;
    uv_timer_t deadline;
    uv_poll_t pidfd_poll;
    /* processes started through the API, by id */
    struct wr_proc **procs;
    size_t nprocs, capprocs;
};

int64_t wr__core_now_ms(void);
/* procs.c: the sandbox's processes hear that it is gone; free them all; take back the processes
 * of an adopted sandbox (LIST + ATTACH). */
void wr__procs_lost(struct wr_msb *sb, const struct wr_err *why);
void wr__procs_free(struct wr_msb *sb);
void wr__procs_adopt(struct wr_msb *sb);
