/* SPDX-License-Identifier: Apache-2.0 */
/* libwarren: the C client of warrend, Warren's sandbox daemon.
 *
 * A program links libwarren (pkg-config --cflags --libs warren) and drives sandboxes over the
 * daemon's HTTP API, on its unix socket or over TCP, without shelling out to `warren`:
 *
 *     warren *w;
 *     warren_error err;
 *     if (warren_connect(NULL, NULL, &w, &err) < 0) { fprintf(stderr, "%s\n", err.message); ... }
 *     warren_sandbox *sb;
 *     warren_create_opts o = {.template_name = "base", .timeout_s = 60};
 *     warren_create(w, &o, &sb, &err);
 *     ...
 *     warren_delete(w, warren_sandbox_id(sb), &err);
 *     warren_sandbox_free(sb);
 *     warren_close(w);
 *
 * docs/libwarren.md has a whole example (docs/examples/warren-example.c).
 *
 * THE RULES, STATED ONCE
 *
 * Results. Every function that can fail returns 0 (or a count, where said) on success and -1 on
 * failure, having filled *err when err is not NULL. `err` may always be NULL (the error is then
 * dropped). On failure no *out is set and nothing is left for the caller to free.
 *
 * Ownership. Arguments are borrowed: the library copies what it keeps and never frees what it
 * was given; strings need only live until the call returns. A result handed out through an
 * `**out` argument belongs to the caller, who frees it with the matching *_free function (all of
 * which accept NULL). A `const char *` returned by an accessor belongs to the object it was read
 * from and lives as long as that object. Memory handed out as a plain buffer is freed with
 * warren_free(). Callbacks get pointers that are valid only during the call.
 *
 * Errors. A warren_error says what kind of failure it was (`code`, one of WARREN_E*: the same
 * kinds as the daemon's own error type), the errno when a system call failed (`sys_errno`, else
 * 0), the HTTP status when the daemon answered (`status`, else 0), the API's error code string
 * when the daemon sent one (`api_code`, e.g. "not_found", "start_failed"; else "") and a line for
 * a human (`message`). Out of memory aborts the process (as the rest of Warren does).
 *
 * Threads. A `warren` handle is one connection: use it from one thread at a time (one handle per
 * thread is the simple way; handles are independent, and the library keeps no global state).
 * Objects returned (sandboxes, lists) are immutable and may be read from any thread. Only
 * warren_exec with on_stdin or a pty starts a thread of its own (with every signal blocked, on a
 * connection of its own), joined before it returns; the callbacks say which thread calls them.
 * The library never touches signal dispositions; writes to a closed socket give EPIPE, never
 * SIGPIPE.
 *
 * Versions. Only warren_* symbols are exported. The soname (libwarren.so.0) changes when a
 * function or a public struct changes incompatibly; new functions and new constants may be
 * added within it. The option structs are read as declared here: zero-initialise them
 * (`= {0}` or designated initialisers) so every field you do not set takes its default. */
#ifndef WARREN_H
#define WARREN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define WARREN_API __attribute__((visibility("default")))
#else
#define WARREN_API
#endif

#define WARREN_VERSION_MAJOR 0
#define WARREN_VERSION_MINOR 1
#define WARREN_VERSION_PATCH 0

/* The library's version as "MAJOR.MINOR.PATCH" (static storage). */
WARREN_API const char *warren_version(void);

/* ---- errors --------------------------------------------------------------------------------- */

/* The kinds of failure, in the order and with the meaning of the daemon's (src/util/err.h);
 * warren_strcode gives each one's name, which is also the API's error code for that kind. */
typedef enum warren_code {
    WARREN_EOK = 0,       /* "ok": no error */
    WARREN_EINVAL,        /* "invalid": the caller's input is wrong */
    WARREN_ENOTFOUND,     /* "not_found": the sandbox, file or snapshot does not exist */
    WARREN_ECONFLICT,     /* "conflict": it exists, or is in the wrong state */
    WARREN_ELIMIT,        /* "limit": a capacity or quota; retrying later may work */
    WARREN_EUNSUPPORTED,  /* "unsupported": the daemon or this library cannot do it */
    WARREN_ESYS,          /* "system": a system call failed (sys_errno says which errno) */
    WARREN_EPROTO,        /* "protocol": a peer sent something malformed */
    WARREN_EINTERNAL,     /* "internal": a bug */
    WARREN_EBADDATA,      /* "bad_content": content that fails its checks */
    WARREN_ETOOBIG,       /* "too_large": over a size limit */
    WARREN_EUNAUTHORIZED, /* "unauthorized": no valid API key */
    WARREN_EFORBIDDEN,    /* "forbidden": the key may not do this */
    WARREN_EMETHOD,       /* "method_not_allowed" */
    WARREN_ENOSPACE,      /* "no_space": a disk is full */
    WARREN_EUPSTREAM,     /* "upstream": a server the daemon called failed */
    WARREN_ETIMEOUT,      /* "timeout": it did not finish in the time allowed */
    WARREN_ESTARTFAILED,  /* "start_failed": a template's start command failed or was not ready */
} warren_code;

typedef struct warren_error {
    warren_code code;  /* the kind; WARREN_EOK when there is no error */
    int sys_errno;     /* the errno of a failed system call, else 0 */
    int status;        /* the HTTP status of the daemon's answer, else 0 (no answer) */
    char api_code[64]; /* the daemon's error code ("not_found", "start_failed"), else "" */
    char message[512]; /* one line for a human, never empty on failure */
} warren_error;

/* The name of a kind ("not_found"), or "unknown" for a value out of range (static storage). */
WARREN_API const char *warren_strcode(warren_code code);

/* Free memory the library handed out as a plain buffer (warren_file_read_buf). NULL is fine. */
WARREN_API void warren_free(void *p);

/* ---- connecting ----------------------------------------------------------------------------- */

/* A client: where the daemon is, the API key, and one connection (kept alive between calls and
 * made again when the daemon closed it). */
typedef struct warren warren;

/* Connect to warrend. `url` is "unix:///path/to/warrend.sock", a plain absolute socket path
 * ("/run/warrend/warrend.sock") or "http://host[:port]" (an IP address or a name in /etc/hosts:
 * no DNS; no TLS, so use a tunnel for a remote daemon). `key` is the API key, sent as
 * "Authorization: Bearer KEY" (the unix socket needs none: it is the admin's).
 *
 * Defaults are the `warren` command's: url NULL takes $WARREN_API_URL, else the "endpoint" of
 * the config file ($XDG_CONFIG_HOME/warren/config.json or ~/.config/warren/config.json), else
 * unix:///run/warrend/warrend.sock; key NULL takes $WARREN_API_KEY, else the file's "key", else
 * none (pass "" for no key whatever the environment says). $WARREN_REQUEST_ID, when set, is sent
 * as X-Request-Id.
 *
 * On success *out is the caller's (warren_close). Errors: WARREN_EINVAL for a malformed URL or
 * config file, WARREN_EUNSUPPORTED for https://, WARREN_ESYS when the connect fails (sys_errno
 * ECONNREFUSED, ENOENT, ...). The key is checked by the first request, not here. */
WARREN_API int warren_connect(const char *url, const char *key, warren **out, warren_error *err);

/* Close the connection and free the client. NULL is fine. */
WARREN_API void warren_close(warren *w);

/* The endpoint this client talks to, as a URL (owned by w). */
WARREN_API const char *warren_endpoint(const warren *w);

/* Send X-Request-Id `id` with every following request (NULL: stop sending one; the daemon then
 * makes one per request). The string is copied. */
WARREN_API void warren_set_request_id(warren *w, const char *id);

/* ---- sandboxes ------------------------------------------------------------------------------ */

/* A sandbox as the daemon described it when it answered (a snapshot in time: call warren_get
 * again for fresh state). */
typedef struct warren_sandbox warren_sandbox;

/* How to create a sandbox. Every field is optional: zero/NULL is the daemon's default. */
typedef struct warren_create_opts {
    const char *template_name;   /* a template, or a snapshot's id or name (default "base") */
    double cpus;                 /* vCPUs, e.g. 0.5 (default 1) */
    int64_t memory_mb;           /* memory in MiB (default 512) */
    int64_t disk_mb;             /* limit of its files in MiB (default none) */
    int64_t timeout_s;           /* seconds until it is killed, or paused (default 300) */
    const char *on_timeout;      /* "kill" (default) or "pause" */
    const char *const *env;      /* NULL-terminated "KEY=VALUE" strings, for every command */
    const char *const *metadata; /* NULL-terminated "KEY=VALUE" labels */
    const char *idempotency_key; /* a retried create with the same key gives the same sandbox */
    /* A JSON object whose members are added to the request as they are (for fields this
     * struct does not name, e.g. "network" or "volumes": docs/openapi.yaml). */
    const char *extra_json;
} warren_create_opts;

/* Create a sandbox (opts NULL: all defaults); it is running when this returns, and *out
 * describes it. Errors as the API answers: WARREN_ENOTFOUND for an unknown template,
 * WARREN_EINVAL for bad options (api_code "invalid"), WARREN_ELIMIT at capacity (status 429 or
 * 503), "start_failed" when the template's start command failed. */
WARREN_API int warren_create(warren *w, const warren_create_opts *opts, warren_sandbox **out,
                             warren_error *err);

/* Describe sandbox `id`. WARREN_ENOTFOUND when the team has no such sandbox. */
WARREN_API int warren_get(warren *w, const char *id, warren_sandbox **out, warren_error *err);

/* Kill and delete sandbox `id` (its processes and files are gone). WARREN_ENOTFOUND if none. */
WARREN_API int warren_delete(warren *w, const char *id, warren_error *err);

/* Set the sandbox's deadline to timeout_s seconds from now (*out, if out is not NULL, describes
 * it after). */
WARREN_API int warren_set_timeout(warren *w, const char *id, int64_t timeout_s,
                                  warren_sandbox **out, warren_error *err);

typedef enum warren_pause_mode {
    WARREN_PAUSE_MEMORY = 0, /* every process stops where it is and keeps its memory */
    WARREN_PAUSE_DISK = 1,   /* the files are kept; the processes end and the memory is freed */
} warren_pause_mode;

/* Pause a sandbox; its deadline's clock stops. *out (if out is not NULL) describes it after
 * ("paused_mode", "remaining_ms" in its JSON). WARREN_ECONFLICT when it is not running. */
WARREN_API int warren_pause(warren *w, const char *id, warren_pause_mode mode, warren_sandbox **out,
                            warren_error *err);

/* Resume a paused sandbox. It expires after the time it had left, or timeout_s seconds from
 * now when timeout_s > 0. *out (if not NULL) describes it after ("processes_kept" in its JSON
 * says whether its processes went on). WARREN_ECONFLICT when it is not paused. */
WARREN_API int warren_resume(warren *w, const char *id, int64_t timeout_s, warren_sandbox **out,
                             warren_error *err);

/* The fields of a sandbox (strings owned by sb; NULL when the daemon did not say). */
WARREN_API const char *warren_sandbox_id(const warren_sandbox *sb);
WARREN_API const char *warren_sandbox_template(const warren_sandbox *sb);
/* "creating", "running", "paused", "stopped" or "error". */
WARREN_API const char *warren_sandbox_state(const warren_sandbox *sb);
WARREN_API double warren_sandbox_cpus(const warren_sandbox *sb);
WARREN_API int64_t warren_sandbox_memory_mb(const warren_sandbox *sb);
/* RFC 3339 UTC times. */
WARREN_API const char *warren_sandbox_created_at(const warren_sandbox *sb);
WARREN_API const char *warren_sandbox_expires_at(const warren_sandbox *sb);
/* The value of metadata label `key`, or NULL. */
WARREN_API const char *warren_sandbox_metadata(const warren_sandbox *sb, const char *key);
/* The whole description as the daemon sent it: a JSON object (docs/openapi.yaml, "Sandbox"),
 * for the fields without an accessor. */
WARREN_API const char *warren_sandbox_json(const warren_sandbox *sb);

/* Free a sandbox description (the sandbox itself is untouched). NULL is fine. */
WARREN_API void warren_sandbox_free(warren_sandbox *sb);

/* A list of sandbox descriptions (from warren_list or warren_fork). */
typedef struct warren_sandbox_list warren_sandbox_list;

typedef struct warren_list_opts {
    const char *state;           /* comma-separated states (default: all but stopped, error) */
    const char *const *metadata; /* NULL-terminated "KEY=VALUE": only sandboxes with all these */
} warren_list_opts;

/* The team's sandboxes (every page of them), in the daemon's order. opts may be NULL. */
WARREN_API int warren_list(warren *w, const warren_list_opts *opts, warren_sandbox_list **out,
                           warren_error *err);

/* How many sandboxes the list holds, and the i-th (owned by the list; NULL past the end). */
WARREN_API size_t warren_sandbox_list_len(const warren_sandbox_list *l);
WARREN_API const warren_sandbox *warren_sandbox_list_at(const warren_sandbox_list *l, size_t i);
/* The whole answer as JSON (owned by the list): {"sandboxes": [...]} for warren_list, the
 * daemon's answer for warren_fork ({"sandboxes", "errors", "freeze_ms", ...}). */
WARREN_API const char *warren_sandbox_list_json(const warren_sandbox_list *l);
/* The copies warren_fork could not make: how many, and why the i-th failed (owned by the list;
 * NULL past the end). Always 0 for warren_list. */
WARREN_API size_t warren_sandbox_list_nerrors(const warren_sandbox_list *l);
WARREN_API const warren_error *warren_sandbox_list_error(const warren_sandbox_list *l, size_t i);
/* Free the list and every description in it. NULL is fine. */
WARREN_API void warren_sandbox_list_free(warren_sandbox_list *l);

/* ---- snapshots and forks -------------------------------------------------------------------- */

/* A snapshot: a sandbox's files captured as an image that new sandboxes start from (pass its id
 * or name as warren_create_opts.template_name). */
typedef struct warren_snapshot warren_snapshot;

/* Capture sandbox `id`'s files (its processes are frozen meanwhile, then go on). `name` (NULL:
 * none) must be unique among the team's images. WARREN_ECONFLICT when the sandbox is not
 * running or paused, or the name is taken. */
WARREN_API int warren_snapshot_create(warren *w, const char *id, const char *name,
                                      warren_snapshot **out, warren_error *err);
/* Delete a snapshot by id or name (sandboxes made from it keep running). */
WARREN_API int warren_snapshot_delete(warren *w, const char *snapshot, warren_error *err);
WARREN_API const char *warren_snapshot_id(const warren_snapshot *s);
WARREN_API const char *warren_snapshot_name(const warren_snapshot *s); /* NULL: none */
/* The whole description as a JSON object (docs/openapi.yaml, "Snapshot"). */
WARREN_API const char *warren_snapshot_json(const warren_snapshot *s);
WARREN_API void warren_snapshot_free(warren_snapshot *s);

typedef struct warren_fork_opts {
    int count;                   /* how many copies, 1 to 100 (default 1) */
    int64_t timeout_s;           /* the copies' timeout (default: the parent's) */
    const char *const *metadata; /* NULL-terminated "KEY=VALUE" (default: the parent's) */
} warren_fork_opts;

/* Copy running sandbox `id` into new ones: each starts with its files and config and fresh
 * processes. *out lists the copies made and, as errors, those that could not be (past
 * capacity, say): success means the request was carried out, not that every copy exists. */
WARREN_API int warren_fork(warren *w, const char *id, const warren_fork_opts *opts,
                           warren_sandbox_list **out, warren_error *err);

/* ---- running commands ----------------------------------------------------------------------- */

/* Output of the command: `len` bytes (never 0) as they came. Return 0 to go on, or -1 to stop
 * waiting (warren_exec then fails with WARREN_EINTERNAL "stopped by a callback"; the command
 * goes on in the sandbox). */
typedef int (*warren_output_fn)(const void *data, size_t len, void *ctx);

/* Input for the command: fill up to `cap` bytes of buf and return how many, 0 at the end of
 * input (the command then reads EOF), or -1 for an error (treated as the end). `stop_fd`
 * becomes readable when the library wants the input to end (the command has exited, or
 * warren_exec is failing): a callback that blocks (reading a terminal, a pipe) should poll it
 * with its own source and return 0 once it is readable, since warren_exec waits for the input
 * to end before it returns. -1 where there is nothing to wait for (warren_file_write). */
typedef long (*warren_input_fn)(void *buf, size_t cap, int stop_fd, void *ctx);

/* How a command ended. */
typedef struct warren_exit {
    int exit_code; /* its exit status when it exited, else -1 */
    int signal;    /* the signal that killed it, else 0 */
    int timed_out; /* 1 when its timeout killed it */
    /* What it used (docs/usage.md, "Per-command usage"), when has_usage is 1: CPU seconds,
     * peak memory, wall time; usage_cgroup 1 when they are its own cgroup's (else rusage). */
    int has_usage;
    int usage_cgroup;
    double cpu_seconds;
    long long memory_peak_bytes;
    double wall_seconds;
} warren_exit;

typedef struct warren_exec_opts {
    const char *const *argv; /* the command, NULL-terminated (argv[0] looked up in PATH); or */
    const char *shell;       /* a command line for /bin/sh -c (used when argv is NULL) */
    const char *const *env;  /* NULL-terminated "KEY=VALUE" added to its environment */
    const char *cwd;         /* working directory (default: the template's) */
    const char *user;        /* run as this user, a name or a uid (default: the template's) */
    int64_t timeout_s;       /* kill it after this many seconds (0: no limit) */
    /* Its whole input at once (stdin_len bytes; ignored when on_stdin is set). */
    const void *stdin_data;
    size_t stdin_len;
    /* Its input as it comes (see warren_input_fn), called on a thread of the library's. */
    warren_input_fn on_stdin;
    warren_output_fn on_stdout; /* NULL: its stdout is dropped */
    warren_output_fn on_stderr; /* NULL: its stderr is dropped */
    /* Called once the command runs, with its process id in the API (for warren_signal). */
    void (*on_start)(long long pid, void *ctx);
    /* Called once with how it ended, before warren_exec returns 0. */
    void (*on_exit)(const warren_exit *how, void *ctx);
    void *ctx;           /* for every callback */
    int pty;             /* 1: run it on a terminal (stdout then carries both streams) */
    unsigned rows, cols; /* the terminal's size with pty (default 24x80) */
    /* Its own limits, below the sandbox's (0: none), in a cgroup of its own; usage_cgroup 1:
     * that cgroup even without limits (its usage is then the cgroup's). */
    unsigned cpu_millis;
    long long memory_mb;
    int usage_cgroup;
    /* In a sandbox made from a Compose file: run it inside this service (its root, environment,
     * working directory and user; NULL: the sandbox's own). */
    const char *service;
} warren_exec_opts;

/* Run a command in sandbox `id` and wait for it, streaming its output to the callbacks in the
 * order it was written (stdout and stderr each in order; between the two, in the order the
 * daemon saw them). Callbacks other than on_stdin run on the calling thread. *how (if not NULL)
 * says how it ended. A command that runs and fails is a success of warren_exec: look at how.
 * Errors: WARREN_ENOTFOUND (no such sandbox), WARREN_ECONFLICT (not running), WARREN_EINVAL
 * (no command, bad env), and the daemon's answer when it could not start the command. */
WARREN_API int warren_exec(warren *w, const char *id, const warren_exec_opts *opts,
                           warren_exit *how, warren_error *err);

/* Send signal `sig` (SIGTERM, ...) to process `pid` of sandbox `id` (pid as on_start gave it).
 * Safe to call on another handle while a warren_exec waits on its own. */
WARREN_API int warren_signal(warren *w, const char *id, long long pid, int sig, warren_error *err);

/* Tell process `pid`'s terminal (pty) its new size. */
WARREN_API int warren_resize(warren *w, const char *id, long long pid, unsigned rows, unsigned cols,
                             warren_error *err);

/* ---- files ---------------------------------------------------------------------------------- */

typedef enum warren_file_type {
    WARREN_FILE = 0,
    WARREN_DIR = 1,
    WARREN_SYMLINK = 2,
    WARREN_OTHER = 3,
} warren_file_type;

/* One entry of a sandbox's filesystem. The strings belong to the struct
 * (warren_file_info_fini, or warren_file_list_free for a list's). */
typedef struct warren_file_info {
    char *name; /* base name */
    char *path; /* absolute path */
    warren_file_type type;
    int64_t size;
    unsigned mode; /* permission bits, e.g. 0644 */
    char *mtime;   /* RFC 3339 */
    char *link;    /* a symlink's target, else NULL */
} warren_file_info;

/* Stream file `path` (absolute) of sandbox `id` to on_data as it arrives (len never 0; return 0
 * to go on, -1 to stop, which fails with WARREN_EINTERNAL). WARREN_ENOTFOUND when the file (or
 * the sandbox: api_code and message say which) does not exist. */
WARREN_API int warren_file_read(warren *w, const char *id, const char *path,
                                warren_output_fn on_data, void *ctx, warren_error *err);

/* Read a whole file into memory: *data (NUL-terminated for convenience, warren_free it) and
 * *len its size. */
WARREN_API int warren_file_read_buf(warren *w, const char *id, const char *path, void **data,
                                    size_t *len, warren_error *err);

/* Write file `path`, replacing it atomically once all of it has arrived; missing parent
 * directories are made. mode 0 is 0644. The content comes from on_data until it returns 0 (see
 * warren_input_fn; here called on the calling thread, and -1 abandons the write: the file is
 * left as it was, and this fails with WARREN_EINTERNAL). */
WARREN_API int warren_file_write(warren *w, const char *id, const char *path, unsigned mode,
                                 warren_input_fn on_data, void *ctx, warren_error *err);

/* Write len bytes of data as file `path` (as warren_file_write). */
WARREN_API int warren_file_write_buf(warren *w, const char *id, const char *path, unsigned mode,
                                     const void *data, size_t len, warren_error *err);

/* Write what fd gives as file `path`: `len` bytes when len >= 0 (a regular file's size), else
 * up to end of file. The fd is read from where it is and not closed. */
WARREN_API int warren_file_write_fd(warren *w, const char *id, const char *path, unsigned mode,
                                    int fd, int64_t len, warren_error *err);

/* Describe `path` without following a final symlink; *info's strings are the caller's
 * (warren_file_info_fini). WARREN_ENOTFOUND when it does not exist. */
WARREN_API int warren_file_stat(warren *w, const char *id, const char *path, warren_file_info *info,
                                warren_error *err);

/* Free what warren_file_stat put in info, and zero it. */
WARREN_API void warren_file_info_fini(warren_file_info *info);

/* List directory `path` down to `depth` levels (0 or 1: its entries; at most 16). Returns the
 * number of entries, *entries (NULL when there are none) the caller's (warren_file_list_free),
 * or -1. */
WARREN_API long warren_file_list(warren *w, const char *id, const char *path, int depth,
                                 warren_file_info **entries, warren_error *err);

/* Free n entries from warren_file_list. */
WARREN_API void warren_file_list_free(warren_file_info *entries, size_t n);

/* Remove a file, or a directory (recursive 0: only an empty one). */
WARREN_API int warren_file_remove(warren *w, const char *id, const char *path, int recursive,
                                  warren_error *err);

/* Make a directory and its missing parents (an existing directory is no error); mode 0 is
 * 0755. */
WARREN_API int warren_file_mkdir(warren *w, const char *id, const char *path, unsigned mode,
                                 warren_error *err);

#ifdef __cplusplus
}
#endif

#endif /* WARREN_H */
