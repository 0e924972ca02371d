/* SPDX-License-Identifier: Apache-2.0 */
/* Per-sandbox cgroups on either cgroup v1 (one directory per controller: memory, pids, cpu,
 * cpuacct, freezer) or cgroup v2 (one directory in the unified tree). Limits: memory hard
 * limit, CPU quota, PID count. An OOM kill stays inside the sandbox's cgroup. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../util/err.h"

struct wr_device_node; /* runtime.h */

enum wr_cgroup_version { WR_CGROUP_V1 = 1, WR_CGROUP_V2 = 2 };

struct wr_cgroup_driver; /* the detected hierarchy layout; one per runtime */
struct wr_cgroup;        /* one sandbox's cgroup(s) */

struct wr_cgroup_limits {
    uint64_t memory_bytes; /* 0: no limit */
    uint32_t cpu_millis;   /* 1000 = one CPU; 0: no limit */
    uint32_t pids_max;     /* 0: no limit */
    /* A sandbox's cgroup at create: the devices its processes may open are the standard ones
     * and devices[] (runtime.h, struct wr_device_node): v1's devices controller where it is
     * mounted, v2's eBPF device program (devbpf.h). false: the devices rules are left as they
     * are. */
    bool devices;
    const struct wr_device_node *device_nodes;
    size_t n_devices;
};

/* Detect and open the cgroup layout. mode: "auto", "v1" or "v2". parent: the directory under
 * each hierarchy in which sandbox cgroups are made (created if missing). v2_root: the cgroup2
 * mount for v2 (default /sys/fs/cgroup). Fails with WR_EUNSUPPORTED if the requested version
 * is not mounted. */
int wr_cgroup_driver_open(const char *mode, const char *parent, const char *v2_root,
                          struct wr_cgroup_driver **out, struct wr_err *err);
void wr_cgroup_driver_close(struct wr_cgroup_driver *d);
enum wr_cgroup_version wr_cgroup_driver_version(const struct wr_cgroup_driver *d);

/* Create the cgroup `name` and apply limits. A limit the host cannot enforce (a controller
 * that is missing) fails with WR_EUNSUPPORTED naming it; nothing is left behind on failure.
 * If a stale cgroup of the same name exists (a crashed sandbox), it is emptied and reused. */
int wr_cgroup_create(struct wr_cgroup_driver *d, const char *name,
                     const struct wr_cgroup_limits *lim, struct wr_cgroup **out,
                     struct wr_err *err);

/* A handle on the existing cgroup `name` (a sandbox adopted after a daemon restart). Makes
 * nothing; WR_ENOTFOUND if it does not exist. */
int wr_cgroup_lookup(struct wr_cgroup_driver *d, const char *name, struct wr_cgroup **out,
                     struct wr_err *err);

/* Move process `pid` into the cgroup (every hierarchy). */
int wr_cgroup_attach(struct wr_cgroup *cg, pid_t pid, struct wr_err *err);
/* Apply limits (the nonzero ones) to an existing cgroup. */
int wr_cgroup_set_limits(struct wr_cgroup *cg, const struct wr_cgroup_limits *lim,
                         struct wr_err *err);

/* Freeze or thaw every process in the cgroup; returns once the state is reached. */
int wr_cgroup_freeze(struct wr_cgroup *cg, bool frozen, struct wr_err *err);

/* SIGKILL every process in the cgroup (cgroup.kill on v2; a loop over cgroup.procs on v1,
 * thawing first so the kill is delivered). */
int wr_cgroup_kill(struct wr_cgroup *cg, struct wr_err *err);

/* Call fn(pid, arg) for each process in the cgroup; returns how many, or -1 with err. */
int wr_cgroup_procs(struct wr_cgroup *cg, void (*fn)(pid_t pid, void *arg), void *arg,
                    struct wr_err *err);

/* Number of processes in the cgroup, or -1 with err. */
int wr_cgroup_nprocs(struct wr_cgroup *cg, struct wr_err *err);

/* Memory usage in bytes and the number of OOM kills, where the host reports them. */
int wr_cgroup_memory(struct wr_cgroup *cg, uint64_t *usage, uint64_t *oom_kills,
                     struct wr_err *err);

/* How often the pids limit refused a new task (pids.events' `max`). */
int wr_cgroup_pids_refused(struct wr_cgroup *cg, uint64_t *n, struct wr_err *err);

/* CPU time used by the cgroup's processes so far, in ns (cpuacct.usage on v1, cpu.stat's
 * usage_usec on v2). */
int wr_cgroup_cpu(struct wr_cgroup *cg, uint64_t *ns, struct wr_err *err);

/* Remove the cgroup directories (waiting briefly for exiting processes) and free the handle,
 * also on error. */
int wr_cgroup_destroy(struct wr_cgroup *cg, struct wr_err *err);

/* Free the handle and leave the cgroup as it is (the sandbox goes on without us). */
void wr_cgroup_forget(struct wr_cgroup *cg);

/* ---- a command's own cgroup, under its sandbox's (docs/usage.md, "Per-command usage") ---- */

/* At most this many cgroup.procs fds per command (one per hierarchy it joins). */
#define WR_CGROUP_JOIN_MAX 4

/* Make the child `child` of cg with limits and open its cgroup.procs in each hierarchy it
 * has (v1: memory, cpu, cpuacct; the sandbox's pids and freezer cgroups keep holding the
 * command, so its pids limit, freeze and kill cover it as before). fds[] get the open files
 * (O_WRONLY, opened with our credentials: a process that writes "0" to each joins, from
 * inside its sandbox, whatever its own ids); *nfds how many. The caller closes them. Fails
 * with WR_EUNSUPPORTED on v2 (a v2 sandbox cgroup holds its processes itself, so no
 * controller can be enabled below it) and leaves nothing behind on failure. */
int wr_cgroup_child_create(struct wr_cgroup *cg, const char *child,
                           const struct wr_cgroup_limits *lim, int fds[WR_CGROUP_JOIN_MAX],
                           size_t *nfds, struct wr_err *err);

/* What the child has used: CPU time in ns and its memory's high-water mark in bytes. */
int wr_cgroup_child_usage(struct wr_cgroup *cg, const char *child, uint64_t *cpu_ns,
                          uint64_t *memory_peak, struct wr_err *err);

/* Remove the child: processes still in it (a command's leftovers) move up into cg first.
 * Gone already is not an error. */
int wr_cgroup_child_remove(struct wr_cgroup *cg, const char *child, struct wr_err *err);

/* Remove the cgroup named `name` if it exists and holds no process (used by the sweep). */
int wr_cgroup_remove_stale(struct wr_cgroup_driver *d, const char *name, struct wr_err *err);
