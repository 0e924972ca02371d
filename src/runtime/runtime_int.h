/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the files of src/runtime/. */
#pragma once

#include "runtime.h"
#include "cgroup.h"
#include "seccomp.h"

struct wr_uidpool;

struct wr_runtime {
    char *run_dir;
    char *sandboxes_dir; /* <run_dir>/sandboxes */
    char *stage_dir;     /* <run_dir>/stage: an empty directory each child mounts its root on */
    int init_fd;         /* O_PATH fd of warren-init */
    struct wr_uidpool *uids;
    struct wr_cgroup_driver *cg;
    struct wr_seccomp seccomp;
    char *fault; /* see wr_runtime_config.fault */
};

/* HELLO handshake on a control connection (sandbox.c). */
int wr__ctl_hello(int fd, int timeout_ms, pid_t *init_pid, struct wr_err *err);
