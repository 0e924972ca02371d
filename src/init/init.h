/* SPDX-License-Identifier: Apache-2.0 */
/* warren-init internals: the event loop's watches, connections, the process table, the user
 * database and file operations. Nothing outside src/init/ includes this header. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../proto/proto.h"
#include "../util/err.h"

/* A connection stops having its frames read while this much output waits for it. */
#define INIT_CONN_OUT_HIGH (4u << 20)
/* File reads and listings produce frames only while the connection's queue is below this. */
#define INIT_CONN_OUT_PRODUCE (1u << 20)
/* A process's stdin queue above this stops reading from the connection that filled it. */
#define INIT_STDIN_HIGH (2u * WR_STDIN_WINDOW) /* only a sender ignoring its window gets here */
/* Concurrent file reads, listings and writes per connection. */
#define INIT_MAX_JOBS 64
/* Connections at once; more are accepted and closed at once. */
#define INIT_MAX_CONNS 256
#define INIT_MAX_DEPTH 16
/* FILE_WATCH requests per connection (each holds one inotify instance). */
#define INIT_MAX_WATCHES 64
/* Directories one recursive watch may hold; past it the watch fails or ends with EMFILE. */
#define INIT_WATCH_MAX_DIRS 10000

/* ---- event loop (main.c) ----------------------------------------------------------------- */

/* One fd in the epoll set. `events` is the registered mask; 0 means the fd is not in the set
 * (so a hung-up pipe that we stopped reading cannot spin the loop). */
struct init_fdw {
    int fd;
    uint32_t events;
    void (*cb)(struct init_fdw *w, uint32_t events);
    void *owner;
};

/* Register, change or (events == 0) remove w's fd from the epoll set. No-op if fd < 0. */
void init_fdw_set(struct init_fdw *w, uint32_t events);
/* Remove w from the epoll set, close its fd and set it to -1. */
void init_fdw_close(struct init_fdw *w);
/* Ask the loop to run again without sleeping (work is left that no fd will announce). */
void init_loop_again(void);

/* The image defaults from the command line. */
struct init_config {
    bool ephemeral;
    char **env; /* NULL-terminated, "KEY=VALUE"; PATH always present */
    size_t nenv;
    char *cwd;  /* NULL: the user's home */
    char *user; /* NULL: root */
    /* --oom-fd: init's own /proc/self/oom_score_adj, opened for it by the host (init cannot
     * open it: its /proc files belong to the host's root), or -1. */
    int oom_fd;
    /* --resolver: the sandbox's gateway, written as the nameserver of /etc/resolv.conf at start
     * (every port-53 packet goes to the host's DNS stub anyway), or NULL. */
    char *resolver;
    /* --listen: the path of a control socket init makes itself (else it is given fd 3). */
    char *listen_path;
    /* --gvisor: the kernel is gVisor's (its pty master never hangs up: proc.c) */
    bool gvisor;
};

extern struct init_config init_cfg;

/* Signals PID 1 ignores (a PID 1 only gets the signals it handles, and these it must not act
 * on); spawned processes get them back at their default. */
extern const int init_ignored_signals[];
extern const size_t init_ignored_signals_n;

/* ---- users (user.c) ---------------------------------------------------------------------- */

struct init_user {
    uid_t uid;
    gid_t gid;
    gid_t *groups; /* supplementary groups, the primary group first */
    size_t ngroups;
    char *name;  /* NULL when the uid has no passwd entry */
    char *home;  /* NULL when the uid has no passwd entry */
    char *shell; /* the login shell; NULL when none is given */
};

/* Resolve the identity a request runs as: `spec` ("name", "uid", "name:group", "uid:gid") if
 * non-NULL, else uid/gid (-1: unset), else the --user default, else root. Names are looked up in
 * the sandbox's /etc/passwd and /etc/group with fgetpwent/fgetgrent (the binary is static: no
 * NSS). A uid without a passwd entry is allowed (group 0 unless gid is given). Returns 0 with
 * *u filled (free with init_user_fini), or -1 with err (errno EINVAL for an unknown name). */
int init_user_resolve(const char *spec, int64_t uid, int64_t gid, struct init_user *u,
                      struct wr_err *err);
/* The same against the /etc/passwd and /etc/group of the tree at root (a service's root
 * directory, its symbolic links resolved inside it; NULL: the sandbox's own), with dflt as the
 * user when neither spec nor uid is given (NULL: root). */
int init_user_resolve_in(const char *root, const char *spec, int64_t uid, int64_t gid,
                         const char *dflt, struct init_user *u, struct wr_err *err);
void init_user_fini(struct init_user *u);
/* Deep copy. */
void init_user_copy(struct init_user *dst, const struct init_user *src);

/* Switch the filesystem identity (supplementary groups, fsgid, fsuid) to u, so permission
 * checks apply and new files are owned by u. Returns 0, or -1 with errno. init_fs_leave()
 * switches back to root and init's own groups; call it after every successful enter. */
int init_fs_enter(const struct init_user *u);
void init_fs_leave(void);
/* Remember init's own supplementary groups (called once at start). */
void init_fs_save(void);

/* ---- connections (conn.c) ---------------------------------------------------------------- */

struct init_job;
struct init_write;
struct init_fswatch;

#define INIT_CONN_FDS_MAX 8 /* fds a connection may have waiting; more are closed */

struct init_conn {
    struct init_fdw w;
    struct wr_reader rd;
    struct wr_buf out; /* queued frames; bytes before out_off are already written */
    size_t out_off;
    bool hello;                /* HELLO exchanged */
    bool primary;              /* fd 4: with --ephemeral, its end ends the sandbox */
    bool dead;                 /* closed; freed at the end of the loop iteration */
    bool drain;                /* write what is queued, then close; read nothing more */
    unsigned holds;            /* processes whose stdin queue is full because of this connection */
    struct init_job *jobs;     /* file reads and listings in progress */
    struct init_write *writes; /* file writes in progress */
    struct init_fswatch *watches; /* directory watches (FILE_WATCH) */
    /* fds received (SCM_RIGHTS) and not yet taken by the frame they came for, oldest first */
    int fds[INIT_CONN_FDS_MAX];
    unsigned nfds;
    struct init_conn *next;
};

/* Take ownership of a connected, non-blocking socket. */
void init_conn_new(int fd, bool primary);
/* Move the n oldest fds received on c into out (the caller owns them). -1 if fewer came: an fd
 * travels with the bytes of the frame that uses it, so it is here once that frame is. */
int init_conn_take_fds(struct init_conn *c, int *out, unsigned n);
/* Close c now: detach its processes, drop its file operations. Freed at the end of the loop
 * iteration, so pointers to it stay valid until then. With --ephemeral and the primary
 * connection, kills every process and exits instead. */
void init_conn_close(struct init_conn *c);
/* Bytes queued and not yet written. */
size_t init_conn_queued(const struct init_conn *c);
/* Queue an ERROR for request `id`: ERRNO errnum, MESSAGE "<fmt>: <strerror(errnum)>". */
void init_conn_errorf(struct init_conn *c, uint32_t id, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Answer request `id` with an OK carrying fd (SCM_RIGHTS; the caller keeps and closes its
 * copy), after what is queued, then close the connection once written (the answer of a
 * PORT_OPEN, sent on a connection of its own). On failure the connection closes. */
void init_conn_send_fd(struct init_conn *c, uint32_t id, int fd);
/* Run every connection: take frames (unless paused), produce file data, write, update the epoll
 * masks, free closed connections. Called at the end of each loop iteration. */
void init_conns_pump(void);
/* WR_MSG_QUIESCE was answered: the main loop closes every connection and the listener. */
extern bool init_quiesce_pending;
/* Close every connection (their processes go on) and free them. */
void init_conns_close_all(void);

/* The fields of a process request (STDIN_CLOSE, SIGNAL, RESIZE, ATTACH, RELEASE), parsed from a
 * TLV payload once. */
struct init_req {
    uint64_t has; /* bit `tag` set when that tag was present (tags < 64) */
    uint64_t num[64];
    char *path;
    char *dest;
    char *user;
};

/* Parse p[0..n). Returns 0, or -1 with err on a malformed field. Free with init_req_fini. */
int init_req_parse(const uint8_t *p, size_t n, struct init_req *r, struct wr_err *err);
void init_req_fini(struct init_req *r);
/* The start of every file-system request: decode it (wr_file_req_decode: an absolute PATH and
 * the type's fields), resolve the user it runs as (USER, UID/GID, else the default). On failure
 * the ERROR is queued on c and -1 returned with nothing to free; on success free r and u with
 * wr_file_req_fini/init_user_fini. */
int init_path_req(struct init_conn *c, const struct wr_frame_hdr *h, const uint8_t *p,
                  struct wr_file_req *r, struct init_user *u);
static inline bool init_req_has(const struct init_req *r, unsigned tag)
{
    return tag < 64 && (r->has & (1ull << tag)) != 0;
}

/* ---- processes (proc.c, spawn.c) --------------------------------------------------------- */

struct init_proc {
    uint32_t id;
    pid_t pid;
    char **argv;
    bool pty;
    struct init_fdw in;  /* stdin pipe, or a dup of the pty master */
    struct init_fdw out; /* stdout pipe, or the pty master */
    struct init_fdw err; /* stderr pipe; -1 with a pty */
    struct wr_buf inq;   /* stdin bytes not yet written */
    size_t inq_off;
    bool in_closing;             /* STDIN_CLOSE: close once inq drains */
    bool in_closed;              /* no more STDIN accepted */
    struct init_conn *in_holder; /* connection paused by our full stdin queue */
    struct init_conn *in_sender; /* who gets STDIN_ACKs: the last connection that sent stdin */
    bool reaped;
    int status;        /* wait4 status once reaped */
    uint64_t start_ns; /* CLOCK_MONOTONIC at the spawn */
    uint64_t end_ns;   /* ... at the reap */
    uint64_t cpu_ns;   /* wait4's rusage: user + system */
    uint64_t maxrss;   /* ... ru_maxrss, in bytes */
    char *cgroup;      /* the name of its own cgroup (SPAWN's CGROUP), or NULL */
    bool exit_sent;
    bool released;
    struct init_conn *attached;
    struct wr_buf buffered; /* OUTPUT frames kept while no connection is attached */
    size_t buffered_bytes;  /* payload bytes in `buffered` */
    size_t unacked;         /* payload bytes sent to `attached` and not acknowledged */
    struct init_proc *next;
};

/* Handle SPAWN: fork, exec and reply OK (PROC_ID, PID) or ERROR once exec succeeded or failed.
 * With SERVICE, the process runs in that service (chrooted into its root, with its environment,
 * cwd and user as defaults); an undefined one is ERROR ENOENT "no service `x`". */
void init_spawn(struct init_conn *c, uint32_t id, const uint8_t *p, size_t n);

/* The PATH a process gets when its environment has none. */
#define INIT_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* init_env_build flags */
#define INIT_ENV_PATH  1u /* PATH=INIT_DEFAULT_PATH if unset */
#define INIT_ENV_LOGIN 2u /* USER, LOGNAME and SHELL from u's passwd entry, if unset */
#define INIT_ENV_TERM  4u /* TERM=xterm-256color if unset (a pty) */

/* A process's environment: base ("KEY=VALUE", NULL-terminated; may be NULL), overlaid by overlay
 * (entries that are not KEY=VALUE are skipped), then HOME (u's home, else /) if unset, and what
 * flags add. Free with init_env_free. */
char **init_env_build(char *const *base, char *const *overlay, const struct init_user *u,
                      unsigned flags);
void init_env_free(char **env);

/* A process to start without a connection (a service's process or healthcheck). */
struct init_exec {
    char **argv;
    char **env;       /* its whole environment; its PATH is the one searched */
    const char *root; /* chroot into it first (and chdir "/"), or NULL */
    const char *cwd;  /* must work if given; NULL: the user's home, else / */
    const struct init_user *user;
    int stdio[3];      /* its stdin, stdout, stderr (fds >= 3, which init keeps and closes) */
    const int *cg_fds; /* cgroup.procs files to write "0" to first, or NULL */
    unsigned ncg;      /* at most WR_SPAWN_FDS_MAX */
};

/* Start x the way SPAWN starts a child (its cgroup, signals reset, its own session, umask 022,
 * the OOM score, the root, the ids, the cwd, execvpe), waiting only for its exec. Returns its pid
 * with *start_ns set (CLOCK_MONOTONIC at the clone); -1 with err if the clone failed ("clone:
 * Resource temporarily unavailable"); -2 with err if the child failed before its exec (already
 * reaped; the message as SPAWN's, "exec `x`: No such file or directory", err->sys_errno its
 * errno). */
pid_t init_exec_start(const struct init_exec *x, uint64_t *start_ns, struct wr_err *err);
/* Add a started process to the table, attached to c (may be NULL). Returns its proc id. */
uint32_t init_proc_add(struct init_proc *pr, struct init_conn *c);
/* Handle STDIN, STDIN_CLOSE, SIGNAL, RESIZE, ATTACH, LIST, RELEASE, ACK. */
void init_proc_request(struct init_conn *c, const struct wr_frame_hdr *h, const uint8_t *p);
/* Reap every exited child (SIGCHLD), keeping a command's rusage and end time. */
void init_procs_reap(void);
/* CLOCK_MONOTONIC in ns. */
uint64_t init_now_ns(void);
/* Update output/stdin watches, send EXIT events, free released processes. */
void init_procs_pump(void);
/* c is closing: detach it from every process. */
void init_procs_conn_gone(struct init_conn *c);

/* ---- files (files.c, list.c) ------------------------------------------------------------- */

/* Handle FILE_* requests and DATA/DATA_END. */
void init_file_request(struct init_conn *c, const struct wr_frame_hdr *h, const uint8_t *p);
/* Produce DATA and STAT frames for c's reads and listings while its queue is below
 * INIT_CONN_OUT_PRODUCE. Returns true if work is left. */
bool init_files_produce(struct init_conn *c);
/* c is closing: close its reads, remove the temporary files of its unfinished atomic writes. */
void init_files_conn_gone(struct init_conn *c);

/* ---- ports (ports.c) ---------------------------------------------------------------------- */

/* Handle PORT_OPEN (connect to the port on loopback, answer with the socket) and PORT_LIST. */
void init_port_request(struct init_conn *c, const struct wr_frame_hdr *h, const uint8_t *p);
/* c is closing: abandon its connects in progress. */
void init_ports_conn_gone(struct init_conn *c);
/* Free the PORT_OPENs that are over. Called at the end of each loop iteration. */
void init_ports_pump(void);

/* ---- directory watches (watch.c) --------------------------------------------------------- */

/* Handle FILE_WATCH (reply OK once watching, then WATCH_EVENT frames) and CANCEL. */
void init_fswatch_request(struct init_conn *c, const struct wr_frame_hdr *h, const uint8_t *p);
/* Free c's ended watches; read the others' events only while c's queue is below
 * INIT_CONN_OUT_PRODUCE. Called by the connection pump, and before c is freed. */
void init_fswatch_pump(struct init_conn *c);
/* c is closing: close every watch's inotify instance (the pump frees them). */
void init_fswatch_conn_gone(struct init_conn *c);
