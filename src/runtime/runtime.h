/* SPDX-License-Identifier: Apache-2.0 */
/* The `ns` isolation backend as a library: start a sandbox (namespaces, an idmapped overlay root,
 * cgroups, seccomp, capabilities) with warren-init as its PID 1, and tear it down leaving
 * nothing behind. It knows no HTTP and no SQL; the daemon and `warren run` both drive it.
 *
 * Threading: wr_runtime_open/close/sweep from one thread; wr_sandbox_create, _adopt and _destroy
 * may run concurrently on several threads for different sandboxes (the daemon runs them on its
 * worker pool). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../util/err.h"

struct wr_runtime;
struct wr_sandbox;

/* The id pool's default size: 32,752 ranges of 65,536 ids from 2^20, every id below 2^31
 * (docs/operations.md, "Id ranges"); the daemon's default --max-sandboxes too. */
#define WR_UID_SLOTS 32752u

/* The isolation backends (docs/design/isolation.md): `ns`, namespaces with seccomp around the
 * host kernel (the default), or `gvisor`, the same sandbox inside gVisor's user-space kernel
 * (runsc, ptrace platform), whose system-call surface is gVisor's, not the host's. */
enum wr_backend { WR_BACKEND_NS = 0, WR_BACKEND_GVISOR = 1 };
#define WR_BACKENDS 2
/* "ns" or "gvisor". */
const char *wr_backend_name(enum wr_backend b);
/* The backend named name; -1 with WR_EINVAL naming the choices if there is none. */
int wr_backend_parse(const char *name, enum wr_backend *out, struct wr_err *err);

struct wr_runtime_config {
    const char *run_dir;        /* per-host runtime state; default /run/warren */
    const char *init_path;      /* warren-init; default: next to the running executable */
    uint32_t uid_base;          /* first host uid of the pool; default 1048576 (2^20) */
    uint32_t uid_slots;         /* number of 65536-id ranges in the pool; 0: WR_UID_SLOTS */
    const char *cgroup_mode;    /* "auto" (default), "v1" or "v2" */
    const char *cgroup_parent;  /* cgroup under which sandboxes are made; default "warren" */
    const char *cgroup_v2_root; /* cgroup2 mount to use with mode v2; default /sys/fs/cgroup */
    /* Test builds only (-DWR_TESTING; ignored otherwise): make every create fail at this step
     * ("uids", "maps", "cgroup", "overlay", "volumes", "attach", "child-early", "child-rootfs",
     * "child-exec", "hello"), to show that a half-built sandbox is torn down completely. NULL in
     * production. */
    const char *fault;
    /* Test builds only (-DWR_TESTING; ignored otherwise): SIGKILL this whole process when a create
     * reaches this step: "cloned" (the child waits for "go", outside any cgroup), "attached" (in
     * its cgroups, still waiting), "go" (sent: the child becomes warren-init on its own), "hello"
     * (warren-init answered; the create is about to return), or a step of the caller's
     * (wr_runtime_crash_point; the daemon's: "recorded", a create's record is stored;
     * "disk-paused", a pause to disk ended the sandbox's processes). It shows what a daemon killed
     * with -9 at that point leaves, and what its restart does with it. NULL in production. */
    const char *crash;
    /* Clone sandboxes from a small helper process started now, warren-zygote (a daemon with
     * threads and a big address space); false: from the caller (warren run). */
    bool zygote;
    const char *zygote_path; /* warren-zygote; default: next to the running executable */
    /* Called, from whichever thread created a sandbox, each time a create took a pre-cloned
     * child (wr_runtime_prewarm): the caller's cue to refill. Must be thread-safe and quick;
     * NULL: nobody is told. */
    void (*pool_taken)(void *arg);
    void *pool_taken_arg;
    /* warren-init's body (src/init/entry.h), linked into the caller: each sandbox's child then
     * becomes warren-init by calling it instead of exec'ing the program, which saves an exec
     * per sandbox. Only for a caller that is single-threaded whenever it creates (the child
     * allocates, so no other thread may hold a lock of malloc's) and whose memory holds nothing
     * another sandbox must not see: warren-zygote and `warren run`, never the daemon (its
     * fallback zygote, a fork of the daemon, always execs). The child is non-dumpable with the
     * host's user namespace as its memory's owner, as the exec'd program is, and overwrites its
     * copy of the caller's command line so /proc/1/cmdline reads "warren-init" and clears its
     * copy of the caller's environment strings. NULL: exec. */
    void (*init_main)(int argc, char **argv);
    /* The gvisor backend's runsc; default: /usr/bin/runsc or /usr/sbin/runsc, whichever
     * exists. Without one, a gvisor create is WR_EUNSUPPORTED naming what is missing. */
    const char *runsc_path;
    const char *shim_path; /* warren-shim; default: next to the running executable */
};

/* The settings every caller of the runtime takes from the environment: WARREN_CGROUP_PARENT,
 * WARREN_UID_BASE and WARREN_UID_SLOTS (values that do not parse are ignored) and, in test
 * builds only (-DWR_TESTING, `make TESTING=1`), WARREN_FAULT. Strings point into the
 * environment. */
void wr_runtime_config_from_env(struct wr_runtime_config *cfg);

/* Open the runtime: detect the cgroup version, raise host limits that are too low for many
 * sandboxes (kernel.pid_max, inotify), compile the seccomp filter once, open warren-init.
 * Returns 0 and *out, or -1 with err. */
int wr_runtime_open(const struct wr_runtime_config *cfg, struct wr_runtime **out,
                    struct wr_err *err);
void wr_runtime_close(struct wr_runtime *rt);

/* The body of the warren-zygote program (src/zygote/main.c): open a runtime with cfg, then
 * clone sandbox children for `parent` on request over fd, until fd closes or parent dies. */
__attribute__((noreturn)) void wr_runtime_zygote_main(const struct wr_runtime_config *cfg, int fd,
                                                      pid_t parent);

/* Test builds only: if wr_runtime_config.crash names step, SIGKILL the calling process (every
 * thread of it) at once. */
void wr_runtime_crash_point(const struct wr_runtime *rt, const char *step);

/* Whether backend b can run here (gvisor: runsc found); false with err saying why not. */
bool wr_runtime_has_backend(const struct wr_runtime *rt, enum wr_backend b, struct wr_err *err);

/* "v1" or "v2": the cgroup interface in use. */
const char *wr_runtime_cgroup_version(const struct wr_runtime *rt);

/* Remove what crashed sandboxes left behind (cgroups and run directories of sandboxes whose
 * warren-init is gone). Safe to call while other sandboxes run. */
int wr_runtime_sweep(struct wr_runtime *rt, struct wr_err *err);

/* Clone up to n sandbox children ahead of time (at most 64): each has its namespaces, its id
 * range and its maps, and waits. A later wr_sandbox_create (not ephemeral) takes one and skips
 * those steps. Meant for a worker thread when the daemon is idle. Returns how many were made,
 * or -1 with err. The children are killed by wr_runtime_close. */
int wr_runtime_prewarm(struct wr_runtime *rt, unsigned n, struct wr_err *err);

/* Clone a child into each of n network slots ahead of time (at most 64 in all): slots[i] is
 * the caller's index of the slot whose netns is netns_fds[i] (dup'd: the caller keeps its fd),
 * resolvers[i] the address its /etc/resolv.conf is to name (0: none). A later create whose
 * spec.netns_fd is WR_NETNS_POOLED takes one (wr_sandbox_net_slot says which slot) and skips
 * the clone. The caller must not give a slot that has a pooled child, or a sandbox, to anyone
 * else. Returns how many were made (fewer if the pool is full), or -1 with err. The children
 * are killed by wr_runtime_close. */
int wr_runtime_prewarm_net(struct wr_runtime *rt, const int *netns_fds, const uint32_t *slots,
                           const uint32_t *resolvers, size_t n, struct wr_err *err);
/* How many pre-cloned children sit in slots. */
size_t wr_runtime_net_pooled(struct wr_runtime *rt);
/* How many pre-cloned children (wr_runtime_prewarm) wait outside slots. Any thread. */
size_t wr_runtime_pooled(struct wr_runtime *rt);

/* spec.netns_fd: take a child pre-cloned into a slot (wr_runtime_prewarm_net): the one in
 * spec.pooled_slot, or any (spec.pooled_any); WR_ELIMIT if there is none. */
#define WR_NETNS_POOLED (-2)

/* A host directory mounted into a sandbox (a volume). The runtime mounts it idmapped to the
 * sandbox's user namespace, so files stored with sandbox-side ids (root 0:0) on disk show as
 * the sandbox's own, whatever its host id range; several sandboxes may share one directory. */
#define WR_MAX_MOUNTS       16
#define WR_MOUNT_TARGET_MAX 255
struct wr_mount_spec {
    const char *host_dir; /* an existing directory on the host */
    const char *target;   /* absolute path inside the sandbox; see wr_mount_target_check */
    bool readonly;
};

/* Whether target is a path a mount may be attached at: absolute, at most WR_MOUNT_TARGET_MAX
 * bytes, no empty, `.` or `..` component, no trailing slash, not `/` and not /proc, /sys,
 * /dev or below them, except strictly below /dev/shm (a tmpfs of the sandbox: its mount points
 * are in no layer). Returns 0, or -1 with WR_EINVAL and a message naming the path. */
int wr_mount_target_check(const char *target, struct wr_err *err);

/* Whether a list of mounts can be made together: at most WR_MAX_MOUNTS, every target valid,
 * no target equal to or below another. Returns 0, or -1 with WR_EINVAL. */
int wr_mounts_check(const struct wr_mount_spec *mounts, size_t n, struct wr_err *err);

/* A host device given to a sandbox (CDI, core/cdi.h): a node of its own at path, made by the
 * runtime with the host device's type and numbers on a filesystem that allows devices, owned by
 * the sandbox-side uid and gid with mode; and the sandbox's device cgroup lets it open it with
 * access (of "rwm"; "": the node is there, the cgroup refuses it). Every sandbox's device
 * cgroup refuses every device but these and the standard ones (/dev/null, zero, full, random,
 * urandom, tty, ptmx and its terminals). */
#define WR_MAX_DEVICE_NODES 16
#define WR_DEVICE_PATH_MAX  63
struct wr_device_node {
    const char *path; /* below /dev/, at most WR_DEVICE_PATH_MAX bytes, no `.` or `..` */
    char type;        /* 'c' or 'b' */
    uint32_t major, minor;
    uint32_t mode;     /* permission bits */
    uint32_t uid, gid; /* sandbox-side */
    char access[4];
};

/* A host file or directory mounted read-only (and nosuid, nodev) into a sandbox at target: a
 * device's libraries and tools (CDI mounts). Not idmapped: the files keep the host's owners,
 * seen as the overflow id inside. The mount point is made in the writable layer as for a
 * volume (never through a symbolic link), a file for a file. */
#define WR_MAX_BINDS 64
struct wr_bind_spec {
    const char *host_path; /* absolute: a directory or a regular file */
    const char *target;    /* as a volume's (wr_mount_target_check) */
};

/* Whether binds can be made: at most WR_MAX_BINDS, every target valid and given once, every
 * host path an absolute directory or regular file. 0, or -1 with WR_EINVAL naming it. */
int wr_binds_check(const struct wr_bind_spec *binds, size_t n, struct wr_err *err);

/* A symbolic link made in a sandbox's root before it starts (a device's SONAME links: CDI's
 * create-symlinks hook, done here rather than run as the host's root): at link (absolute, as a
 * volume's target; the directories above it made as a volume's, never through a symbolic link),
 * pointing to target. A link that exists is left as it is. */
#define WR_MAX_SYMLINKS 64
struct wr_symlink_spec {
    const char *target;
    const char *link;
};

/* Whether symlinks can be made: at most WR_MAX_SYMLINKS, each link a valid target path and each
 * target 1 to WR_MOUNT_TARGET_MAX bytes. 0, or -1 with WR_EINVAL naming it. */
int wr_symlinks_check(const struct wr_symlink_spec *links, size_t n, struct wr_err *err);

/* A bind of one path of a sandbox's own tree onto another, made inside the sandbox after its
 * root is in place (so both paths resolve in the sandbox's tree, never the host's), recursive:
 * the roots of a Compose file's services get /proc, /dev and /sys this way, and their volumes.
 * A missing source is made as a directory; a missing mount point as a directory or, for a file,
 * an empty file (parents made too). read_only makes the whole bound tree read-only. */
#define WR_MAX_INNER_BINDS 64
struct wr_inner_bind {
    const char *src; /* absolute, as a volume's target (wr_mount_target_check), or "/proc" etc. */
    const char *dst;
    bool read_only;
};

/* Whether inner binds can be made: at most WR_MAX_INNER_BINDS, every path valid as a mount
 * target. 0, or -1 with WR_EINVAL naming it. */
int wr_inner_binds_check(const struct wr_inner_bind *b, size_t n, struct wr_err *err);

/* Whether device nodes can be given together: at most WR_MAX_DEVICE_NODES, each path valid and
 * given once, type 'c' or 'b', owner within the sandbox's range, access of "rwm". Returns 0, or
 * -1 with WR_EINVAL naming the path. */
int wr_devices_check(const struct wr_device_node *devices, size_t n, struct wr_err *err);

struct wr_sandbox_spec {
    const char *id; /* [a-zA-Z0-9_-]{1,64}; also the hostname unless hostname is set */
    /* WR_BACKEND_GVISOR: inside runsc (src/runtime/gvisor.c); a network slot (netns_fd > 0)
     * is used through gVisor's own network stack in that namespace. Not with devices, pre-cloned
     * children (WR_NETNS_POOLED) or ephemeral: WR_EUNSUPPORTED. */
    enum wr_backend backend;
    /* gvisor only: restore the sandbox from this checkpoint (wr_sandbox_checkpoint) instead of
     * starting warren-init afresh: its processes go on from where they were. The layers,
     * writable layer and mounts must be those it was checkpointed with (the writable layer may
     * be a copy: a fork). NULL: start. */
    const char *restore_image;
    const char *hostname;

    /* The image: read-only layer directories, bottom first, plus its config. */
    const char *const *layers;
    size_t n_layers;
    const char *const *env; /* NULL-terminated KEY=VALUE defaults for spawned processes */
    const char *cwd;        /* default working directory; NULL: "/" */
    const char *user;       /* default user (name or uid); NULL: root */

    /* The writable layer (it holds /tmp too): a directory that outlives the sandbox (its
     * upper/ and work/ hold sandbox-side ids, so any uid range can use it later; see layer.h),
     * or NULL for a private tmpfs of tmpfs_bytes (0: 1 GiB), at most half of memory_bytes,
     * that vanishes with it. /dev/shm is a tmpfs of 64 MiB, at most a quarter of
     * memory_bytes. */
    const char *upper_dir;
    uint64_t tmpfs_bytes;

    /* Directories mounted at their targets (after /proc, /sys, /dev and /tmp), in order; the
     * mount points are created in the writable layer. Never through a symbolic link. */
    const struct wr_mount_spec *mounts;
    size_t n_mounts;

    /* Host devices (at most WR_MAX_DEVICE_NODES), after /dev's standard nodes, and host files
     * they need (at most WR_MAX_BINDS), after the volumes. */
    const struct wr_device_node *devices;
    size_t n_devices;
    const struct wr_bind_spec *binds;
    size_t n_binds;
    /* Symbolic links they need, made after the binds. */
    const struct wr_symlink_spec *symlinks;
    size_t n_symlinks;
    /* Binds inside the sandbox's own tree, made last (ns only: WR_EUNSUPPORTED on gvisor). */
    const struct wr_inner_bind *inner_binds;
    size_t n_inner_binds;

    /* Limits; 0 means none. */
    uint64_t memory_bytes;
    uint32_t cpu_millis; /* 1000 = one vCPU */
    uint32_t pids_max;

    /* Let setuid programs in the sandbox gain privileges (sudo): no_new_privs is left off. They
     * gain no more than the sandbox's own root has (its user namespace, bounding set and
     * seccomp filter still apply), which is what a template with passwordless sudo gives its
     * user anyway. false (the default) sets no_new_privs on everything in the sandbox. */
    bool allow_setuid;

    /* Ephemeral sandboxes end when their creator's control connection closes (warren run).
     * Others outlive the process that created them (the daemon). */
    bool ephemeral;

    /* Networking. netns_fd > 0: a network namespace of the host's (a network slot,
     * src/runtime/netslot.h, already configured) that the sandbox joins instead of making its
     * own: its child is cloned now, from inside it (never taken from the wr_runtime_prewarm
     * pool), its root can change nothing of the network there, and its /sys is a sysfs of
     * that namespace made by the creator. The caller keeps the fd (it may close it once create
     * returns). 0 or -1 (what a spec that does not set it has): a loopback-only network
     * namespace of the sandbox's own. */
    int netns_fd; /* or WR_NETNS_POOLED */
    /* With WR_NETNS_POOLED and pooled_any false: take the child waiting in this slot (WR_ELIMIT
     * if none does); pooled_any: whichever child waits (the most recent). */
    uint32_t pooled_slot;
    bool pooled_any;
    /* The resolver warren-init writes into /etc/resolv.conf ("nameserver <a.b.c.d>") before
     * the sandbox's first process (host order; 0: the file is left as the image has it). */
    uint32_t resolver;
};

/* Start a sandbox. On success *out holds its handle and warren-init is running and has
 * answered; on failure everything built so far is torn down and err says which step failed. */
int wr_sandbox_create(struct wr_runtime *rt, const struct wr_sandbox_spec *spec,
                      struct wr_sandbox **out, struct wr_err *err);

/* The connected control socket made at create (owned by the handle; do not close). */
int wr_sandbox_ctl_fd(const struct wr_sandbox *sb);
/* Path of the control socket, for reconnecting. */
const char *wr_sandbox_ctl_path(const struct wr_sandbox *sb);
/* Host pid of warren-init. */
pid_t wr_sandbox_pid(const struct wr_sandbox *sb);
/* The slot of a sandbox made with WR_NETNS_POOLED (as given to wr_runtime_prewarm_net), or -1
 * for any other. */
int64_t wr_sandbox_net_slot(const struct wr_sandbox *sb);
/* First host uid of the sandbox's range. */
uid_t wr_sandbox_uid_base(const struct wr_sandbox *sb);
const char *wr_sandbox_id(const struct wr_sandbox *sb);
enum wr_backend wr_sandbox_backend(const struct wr_sandbox *sb);

/* Take back a sandbox that this process did not create (the daemon after a restart): its
 * warren-init (host pid `pid`) still runs, holding the run directory's and the id range's locks.
 * Checks that pid is that sandbox's warren-init (its cgroup) and opens a pidfd on it. The
 * returned handle has no control connection (ctl_fd -1): connect to wr_sandbox_ctl_path.
 * pid 0: not known (its creator died before it could tell anyone): the process of the
 * sandbox's cgroup that is PID 1 of its own pid namespace, with the id range it maps (uid_base
 * is then ignored); wr_sandbox_hello says whether it became warren-init. WR_ENOTFOUND if the
 * process or the sandbox's run directory is gone. */
int wr_sandbox_adopt(struct wr_runtime *rt, const char *id, pid_t pid, uid_t uid_base,
                     struct wr_sandbox **out, struct wr_err *err);

/* Whether the sandbox's warren-init answers: a new connection to its control socket, HELLO,
 * an answer within timeout_ms, then closed. WR_ENOTFOUND if nobody listens. */
int wr_sandbox_hello(struct wr_sandbox *sb, int timeout_ms, struct wr_err *err);

/* A pidfd of warren-init: readable once it has exited (and with it every process of the
 * sandbox). Owned by the handle. */
int wr_sandbox_pidfd(const struct wr_sandbox *sb);

/* The connected control socket made at create, handed over to the caller (who closes it); the
 * handle keeps none (wr_sandbox_ctl_fd is -1 after). Not for ephemeral sandboxes, which end
 * when it closes. */
int wr_sandbox_take_ctl_fd(struct wr_sandbox *sb);

/* Close what the handle holds open that a running sandbox does not need of it: the run
 * directory's and id range's locks (warren-init holds both as long as it lives) and the pidfd
 * (wr_sandbox_pidfd is -1 after; kill and destroy open one again, checking the pid is still
 * warren-init). The caller learns of the end some other way (wr_exits, src/runtime/exits.h)
 * and checks it with wr_sandbox_alive. Returns whether warren-init still ran when its pidfd
 * was closed: an end after that is seen by a wr_exits opened before. */
bool wr_sandbox_drop_fds(struct wr_sandbox *sb);

/* Whether warren-init still runs (no blocking; one syscall, or three for an adopted sandbox
 * without its pidfd). */
bool wr_sandbox_alive(const struct wr_sandbox *sb);

/* Remove what is left of a sandbox whose warren-init is gone (after a crash): its cgroups and
 * run directory. Refuses (WR_ECONFLICT) while the sandbox still runs. */
int wr_sandbox_cleanup(struct wr_runtime *rt, const char *id, struct wr_err *err);

/* Kill a sandbox that nobody holds a handle for (its creator died while making it, or made it
 * ahead of use): every process in its cgroup, then wr_sandbox_cleanup, which frees its id range
 * with the last process. What is already gone is not an error. */
int wr_sandbox_reap(struct wr_runtime *rt, const char *id, struct wr_err *err);

/* Kill every process of the sandbox, wait for them, remove its cgroups, run directory and
 * writable tmpfs, return its uid range, and free the handle (also on error). */
int wr_sandbox_destroy(struct wr_sandbox *sb, struct wr_err *err);

/* gvisor only: save the sandbox's processes and memory into image_dir (an empty or missing
 * directory; its writable layer stays where it is), which ends the sandbox: destroy the handle
 * after. Every control connection to it is closed first (warren-init drops them); a later
 * create with spec.restore_image = image_dir continues it. WR_EUNSUPPORTED on ns. */
int wr_sandbox_checkpoint(struct wr_sandbox *sb, const char *image_dir, struct wr_err *err);

/* Freeze or thaw every process of the sandbox (cgroup freezer); returns once the state is
 * reached. A frozen sandbox keeps its memory; its warren-init does not answer until thawed. */
int wr_sandbox_freeze(struct wr_sandbox *sb, bool frozen, struct wr_err *err);

/* Resource use of a running sandbox, read from its cgroups. */
struct wr_sandbox_usage {
    uint64_t cpu_ns;       /* CPU time of all its processes so far */
    uint64_t memory_bytes; /* memory charged to it now */
};
int wr_sandbox_usage(struct wr_sandbox *sb, struct wr_sandbox_usage *u, struct wr_err *err);
/* The same by id, not handle: callable on any thread (two reads of its cgroup files); a sandbox
 * gone meanwhile is WR_ENOTFOUND. */
int wr_sandbox_usage_by_id(struct wr_runtime *rt, const char *id, struct wr_sandbox_usage *u,
                           struct wr_err *err);

/* What the sandbox's limits refused so far: processes killed by its memory limit, tasks its
 * pids limit did not let start. Read when its init ends unexpectedly, to say why (on gvisor,
 * the sentry ends at the first of either). */
struct wr_sandbox_limit_hits {
    uint64_t oom_kills;
    uint64_t pids_refused;
};
int wr_sandbox_limit_hits(struct wr_sandbox *sb, struct wr_sandbox_limit_hits *h,
                          struct wr_err *err);

/* A command's own cgroup under the sandbox `id`'s (by id, not handle: callable on any thread
 * while the sandbox lives; docs/usage.md, "Per-command usage"). cmd_create makes `name` with
 * the limits (a memory and CPU limit; 0: none) and opens its cgroup.procs files into fds
 * (*nfds of them, the caller closes them): a process that writes "0" to every one has joined.
 * WR_EUNSUPPORTED where the host's cgroups cannot (v2). cmd_end reads what it used and
 * removes it (processes still in it move up into the sandbox's cgroup). */
#define WR_CMD_CGROUP_FDS 4 /* at most this many cgroup.procs files per command */
int wr_sandbox_cmd_cgroup_create(struct wr_runtime *rt, const char *id, const char *name,
                                 uint64_t memory_bytes, uint32_t cpu_millis,
                                 int fds[WR_CMD_CGROUP_FDS], size_t *nfds, struct wr_err *err);
int wr_sandbox_cmd_cgroup_end(struct wr_runtime *rt, const char *id, const char *name,
                              uint64_t *cpu_ns, uint64_t *memory_peak, struct wr_err *err);

/* Free the handle and leave the sandbox running (a daemon shutting down: sandboxes outlive it).
 * A later process takes it back with wr_sandbox_adopt. */
void wr_sandbox_release(struct wr_sandbox *sb);

/* Timestamps (CLOCK_MONOTONIC ns) of create's phases, for the benchmark. */
struct wr_sandbox_timing {
    uint64_t start, cloned, mapped, overlay, cgroup, ready;
};
const struct wr_sandbox_timing *wr_sandbox_timing(const struct wr_sandbox *sb);
