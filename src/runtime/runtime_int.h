/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the files of src/runtime/. */
#pragma once

#include "runtime.h"
#include "cgroup.h"
#include "seccomp.h"

#include <pthread.h>

struct wr_uidpool;

/* A sandbox's handle. With the gvisor backend, pid is warren-shim's (src/shim/main.c): the
 * host process whose end is the sandbox's; it holds the run directory's lock, and there is no
 * id range (uid_lock -1, uid_base 0). */
struct wr_sandbox {
    struct wr_runtime *rt;
    char *id;
    char *dir;      /* <run_dir>/sandboxes/<id> */
    char *ctl_path; /* <dir>/ctl.sock */
    int dir_lock;   /* flock on <dir>/lock: held while the sandbox lives */
    int uid_lock;   /* the uid range's lock */
    uid_t uid_base;
    struct wr_cgroup *cg;
    pid_t pid;
    int pidfd;
    int ctl_fd;
    bool reaped;
    bool adopted; /* not our child: wait through the pidfd, not waitpid */
    enum wr_backend backend;
    bool host_net;    /* gvisor: runsc in a network slot, --network=host */
    int64_t net_slot; /* WR_NETNS_POOLED: the slot taken; -1 */
    struct wr_sandbox_timing timing;
};

/* A child cloned into its namespaces, its id maps written, waiting for "go". */
struct wr__warm {
    pid_t pid;
    int pidfd;
    int sync;     /* parent end of the sync socket */
    int uid_lock; /* the id range's lock (the child holds a copy) */
    uid_t uid_base;
    int userns_fd; /* for the idmaps of the layers */
};

#define WR__POOL_MAX 64

/* A child cloned into a network slot ahead of time (wr_runtime_prewarm_net), with what a create
 * needs of the slot: its netns (a dup), the sysfs of it, its index and resolver. */
struct wr__netwarm {
    struct wr__warm w;
    int netns_fd, sysfs_fd;
    uint32_t slot, resolver;
};

struct wr_runtime {
    char *run_dir;
    char *sandboxes_dir; /* <run_dir>/sandboxes */
    char *stage_dir;     /* <run_dir>/stage: an empty directory each child mounts its root on */
    int init_fd;         /* O_PATH fd of warren-init */
    char *init_path;     /* its path (the gvisor backend binds it into the sandbox) */
    char *shim_path;     /* warren-shim (the gvisor backend) */
    char *gv_points;     /* <run_dir>/gvisor-points: its mount points' layer (gvisor.c) */
    char *runsc_path;    /* runsc, or NULL if this host has none */
    struct wr_uidpool *uids;
    struct wr_cgroup_driver *cg;
    struct wr_seccomp seccomp;
    char *fault; /* see wr_runtime_config.fault */
    char *crash; /* see wr_runtime_config.crash */
    void (*pool_taken)(void *arg);
    void *pool_taken_arg;
    void (*init_main)(int argc, char **argv); /* see wr_runtime_config.init_main */
    /* with init_main: this process's argv and environment strings, which a child scrubs */
    char *cmdline, *environ_area;
    size_t cmdline_len, environ_len;
    /* pre-cloned children (wr_runtime_prewarm), taken by creates on any thread */
    pthread_mutex_t pool_lock;
    struct wr__warm *pool;
    size_t npool, pool_pending;
    struct wr__netwarm *netpool; /* WR__POOL_MAX, under pool_lock */
    size_t nnetpool;
    /* the zygote (zygote.c), when wr_runtime_config.zygote asked for one */
    int zygote_fd;
    pid_t zygote_pid;
    bool in_zygote;         /* this process is the zygote */
    bool oom_adj_inherited; /* this process's oom_score_adj is not 0: reset it in each child */
    pthread_mutex_t zygote_lock;
};

/* Clone a child in this process (sandbox.c); the zygote calls it. netns_fd >= 0: into that
 * network namespace (a slot) instead of a new one. */
int wr__warm_spawn_here(struct wr_runtime *rt, struct wr__warm *w, int netns_fd,
                        struct wr_err *err);
/* zygote.c */
int wr__zygote_start(struct wr_runtime *rt, const struct wr_runtime_config *cfg,
                     struct wr_err *err);
void wr__zygote_stop(struct wr_runtime *rt);
int wr__zygote_spawn(struct wr_runtime *rt, struct wr__warm *w, int netns_fd, struct wr_err *err);
/* Close every fd from 3 up except keep[0..n-1]; async-signal-safe. */
void wr__close_all_but(const int *keep, size_t n);

/* Kill the pre-cloned children (sandbox.c). */
void wr__runtime_pool_drain(struct wr_runtime *rt);

/* HELLO handshake on a control connection (sandbox.c). */
int wr__ctl_hello(int fd, int timeout_ms, pid_t *init_pid, struct wr_err *err);

/* sandbox.c: a handle with its run directory made and locked (NULL with err on failure), and
 * the undoing of every step done (the handle is freed). */
struct wr_sandbox *wr__sandbox_new(struct wr_runtime *rt, const char *id, struct wr_err *err);
int wr__sandbox_undo(struct wr_sandbox *sb, struct wr_err *err);
bool wr__valid_id(const char *id);

/* gvisor.c: the gvisor backend's create (spec->backend WR_BACKEND_GVISOR), with the same
 * contract as wr_sandbox_create. */
int wr__gvisor_create(struct wr_runtime *rt, const struct wr_sandbox_spec *spec,
                      struct wr_sandbox **out, struct wr_err *err);
/* The backend a sandbox's run directory (dirfd, or <sandboxes_dir>/<id>) was made for. */
enum wr_backend wr__dir_backend(int dirfd);
/* Detach the mounts a gvisor sandbox's run directory `dir` may hold (its control socket and
 * directory, its root), whatever its backend file says (it may be gone): before the directory
 * is removed. For an ns sandbox's directory, three failed umount2 calls. */
void wr__gvisor_unmount(const char *dir);

/* The size of a sandbox's /dev/shm for its memory limit (0: none): 64 MiB, or a quarter of the
 * limit if that is smaller (sandbox.c: a tmpfs must not fill the memory cgroup). */
uint64_t wr__shm_bytes(uint64_t memory_bytes);
