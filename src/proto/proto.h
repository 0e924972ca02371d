/* SPDX-License-Identifier: Apache-2.0 */
/* The control protocol between the daemon (or `warren run`) and warren-init, PID 1 of each
 * sandbox. Shared by both sides; depends on nothing but libc.
 *
 * The wire: a stream of frames on a unix stream socket. Each frame is a 12-byte header, all
 * integers little-endian,
 *
 *     u32 len    payload bytes that follow (at most WR_FRAME_MAX_PAYLOAD)
 *     u16 type   enum wr_msg_type
 *     u16 flags  per type (WR_FLAG_*)
 *     u32 id     request id for requests and their replies; proc id for process events
 *
 * followed by the payload. Most payloads are a list of TLV fields, each
 *
 *     u16 tag    enum wr_tag
 *     u32 len    value bytes that follow
 *     value      u64/i64 as 8 bytes LE; strings as bytes without a NUL
 *
 * A tag may repeat (argv, env). Unknown tags are skipped, so fields can be added without a version
 * bump. The payload of OUTPUT, STDIN and DATA frames is raw bytes, not TLV.
 *
 * The daemon must treat everything it decodes as hostile: code in a sandbox can take over its
 * PID 1. Every decoder here bounds lengths and counts, rejects embedded NULs in strings and
 * never trusts a length it did not check against the bytes actually present.
 *
 * See docs/design/protocol.md for the conversations (spawn, attach, file transfer, flow control).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../util/buf.h" /* struct wr_buf: frames are built into one */
#include "../util/err.h"

#define WR_PROTO_VERSION     1
#define WR_FRAME_HDR_SIZE    12
#define WR_FRAME_MAX_PAYLOAD (1u << 20)    /* 1 MiB: larger payloads are a protocol error */
#define WR_CHUNK_SIZE        (64u * 1024)  /* output and file data are sent in chunks this big */
#define WR_OUTPUT_WINDOW     (256u * 1024) /* unacknowledged output bytes per process */
#define WR_STDIN_WINDOW      (1u << 20)    /* STDIN bytes a sender may have unacknowledged */
#define WR_MAX_ARGS          4096          /* argv or env entries in one spawn */
#define WR_MAX_STR           (64u * 1024)  /* any single string field */
#define WR_MAX_PATH          4096

enum wr_msg_type {
    /* both ways */
    WR_MSG_HELLO = 1, /* VERSION; init answers with its own HELLO (VERSION, PID) */
    WR_MSG_OK = 2,    /* reply to request `id`; may carry fields (e.g. PROC_ID) */
    WR_MSG_ERROR = 3, /* reply to request `id`: ERRNO, MESSAGE */

    /* processes; requests carry a request id, events carry the proc id */
    WR_MSG_SPAWN = 10,       /* -> OK (PROC_ID, PID) | ERROR */
    WR_MSG_STDIN = 11,       /* id = proc id, raw payload; no reply (dropped if gone) */
    WR_MSG_STDIN_CLOSE = 12, /* PROC_ID -> OK | ERROR */
    WR_MSG_SIGNAL = 13,      /* PROC_ID, SIGNAL -> OK | ERROR */
    WR_MSG_RESIZE = 14,      /* PROC_ID, ROWS, COLS -> OK | ERROR */
    WR_MSG_ATTACH = 15,  /* PROC_ID -> OK; then OUTPUT and EXIT events come to this connection */
    WR_MSG_LIST = 16,    /* -> one PROC frame per process, then OK */
    WR_MSG_PROC = 17,    /* reply item: PROC_ID, PID, ARGV*, PTY, RUNNING, EXIT_CODE|SIGNAL */
    WR_MSG_RELEASE = 18, /* PROC_ID: forget a finished process -> OK | ERROR */
    WR_MSG_OUTPUT = 19,  /* event, id = proc id, flags = stream, raw payload */
    WR_MSG_EXIT = 20,    /* event, id = proc id: EXIT_CODE or SIGNAL (after all OUTPUT) */
    WR_MSG_ACK = 21,     /* id = proc id: BYTES of OUTPUT consumed (returns window credit) */
    /* init -> daemon, id = proc id: BYTES of STDIN written to the process or dropped (it is gone
     * or its stdin closed). A sender keeps at most WR_STDIN_WINDOW bytes unacknowledged. */
    WR_MSG_STDIN_ACK = 22,

    /* files; every path is resolved inside the sandbox */
    WR_MSG_FILE_READ = 30,  /* PATH, [OFFSET], [LENGTH] -> STAT reply, DATA*, OK | ERROR */
    WR_MSG_FILE_WRITE = 31, /* PATH, [MODE], [FLAGS] -> OK (ready); DATA*, DATA_END -> OK | ERROR */
    WR_MSG_DATA = 32,       /* id = request id, raw payload */
    WR_MSG_DATA_END = 33,   /* id = request id: the writer is done */
    WR_MSG_FILE_STAT = 34,  /* PATH, [NOFOLLOW] -> STAT | ERROR */
    WR_MSG_STAT = 35,       /* reply: NAME?, TYPE, MODE, SIZE, MTIME_NS, UID, GID, [LINK] */
    WR_MSG_FILE_LIST = 36,  /* PATH, [DEPTH] -> one STAT (with NAME) per entry, then OK */
    WR_MSG_FILE_MKDIR = 37, /* PATH, [MODE], [PARENTS] -> OK | ERROR */
    WR_MSG_FILE_REMOVE = 38, /* PATH, [RECURSIVE] -> OK | ERROR */
    WR_MSG_FILE_RENAME = 39, /* PATH, DEST -> OK | ERROR */
    WR_MSG_FILE_CHMOD = 40,  /* PATH, MODE -> OK | ERROR */
    /* PATH, [RECURSIVE], [USER|UID|GID] -> OK (watching) | ERROR; then WATCH_EVENT* until CANCEL,
     * a final ERROR (the directory went away, ENOBUFS: events were lost) or the connection ends */
    WR_MSG_FILE_WATCH = 41,
    WR_MSG_WATCH_EVENT = 42, /* id = the watch's request id: TYPE (enum wr_watch_op), NAME */
    WR_MSG_CANCEL = 43,      /* id = the request to end (a FILE_WATCH) -> OK | ERROR (ESRCH) */

    /* ports of the sandbox's own network namespace */
    /* PORT -> OK carrying, as SCM_RIGHTS ancillary data on its bytes, a TCP socket init connected
     * to 127.0.0.1:PORT (or [::1]:PORT) inside the sandbox | ERROR (ECONNREFUSED: nothing
     * listens). Sent on a connection of its own; the fd is the only thing the OK carries. */
    WR_MSG_PORT_OPEN = 50,
    /* -> OK with one ADDR, PORT pair per listening TCP socket (wr_port_list_decode) | ERROR */
    WR_MSG_PORT_LIST = 51,

    /* Before a checkpoint (the gvisor backend, init started with --listen): -> OK, then init
     * closes every connection and its listening socket (a checkpoint cannot save a socket
     * connected to the host) and waits, keeping its processes, until a file `resume` appears
     * beside its socket; then it removes it and listens again. Refused (ENOTSUP) without
     * --listen. */
    WR_MSG_QUIESCE = 60,

    /* Compose services, supervised by init (docs/design/init.md, "Services"). A sandbox holds at
     * most WR_SERVICES_MAX; they are defined one by one, then started together, once. */
    /* struct wr_service (SERVICE = its name, the SPAWN fields, ROOT, DEPEND*, HEALTH_ARGV*, ...)
     * with FDS fds as SPAWN -> OK | ERROR (EEXIST: the name is defined; EALREADY: services were
     * started; ENOSPC: WR_SERVICES_MAX are defined; EINVAL: a bad field) */
    WR_MSG_SERVICE = 70,
    /* -> OK at once: every defined service starts as its dependencies allow | ERROR (EALREADY:
     * started before, which a client takes for success) */
    WR_MSG_SERVICES_START = 71,
    WR_MSG_SERVICE_LIST = 72, /* -> one SERVICE_INFO per service, in definition order, then OK */
    /* reply item (struct wr_service_info): SERVICE, STATE, PID, RESTARTS, [EXIT_CODE|SIGNAL],
     * [MESSAGE] */
    WR_MSG_SERVICE_INFO = 73,
};

enum wr_tag {
    WR_TAG_VERSION = 1,
    WR_TAG_ERRNO = 2,
    WR_TAG_MESSAGE = 3,
    WR_TAG_PID = 4,
    WR_TAG_PROC_ID = 5,
    WR_TAG_ARGV = 10, /* repeated, in order */
    WR_TAG_ENV = 11,  /* repeated, "KEY=VALUE" */
    WR_TAG_CWD = 12,
    WR_TAG_UID = 13,
    WR_TAG_GID = 14,
    WR_TAG_PTY = 15, /* u64 0/1 */
    WR_TAG_ROWS = 16,
    WR_TAG_COLS = 17,
    WR_TAG_SIGNAL = 18,
    WR_TAG_EXIT_CODE = 19,
    WR_TAG_RUNNING = 20,
    WR_TAG_BYTES = 21,
    WR_TAG_USER = 22, /* user name or number, resolved by init against the sandbox's /etc/passwd */
    /* EXIT: the command's own usage, from wait4 (it and the descendants it waited for) */
    WR_TAG_CPU_NS = 23,       /* u64: user + system CPU time, ns */
    WR_TAG_MAXRSS_BYTES = 24, /* u64: the largest resident set of one of those processes */
    WR_TAG_WALL_NS = 25,      /* u64: from the spawn to the reap, ns */
    /* SPAWN: how many fds came with this frame (SCM_RIGHTS), each a cgroup.procs file the
     * child writes "0" to before it runs anything of the command's (its own cgroup) */
    WR_TAG_FDS = 26,
    WR_TAG_CGROUP = 27,   /* SPAWN, PROC: that cgroup's name (1-64 of [A-Za-z0-9_-]) */
    WR_TAG_RESTARTS = 28, /* SERVICE_INFO: u64, how many times the service was restarted */
    WR_TAG_PATH = 30,
    WR_TAG_DEST = 31,
    WR_TAG_MODE = 32,
    WR_TAG_FLAGS = 33,
    WR_TAG_OFFSET = 34,
    WR_TAG_LENGTH = 35,
    WR_TAG_NAME = 36,
    WR_TAG_TYPE = 37,
    WR_TAG_SIZE = 38,
    WR_TAG_MTIME_NS = 39,
    WR_TAG_LINK = 40,
    WR_TAG_DEPTH = 41,
    WR_TAG_RECURSIVE = 42,
    WR_TAG_PARENTS = 43,
    WR_TAG_NOFOLLOW = 44,
    WR_TAG_PORT = 50, /* u64, 1-65535 */
    WR_TAG_ADDR = 51, /* a numeric IPv4 or IPv6 address, e.g. "127.0.0.1", "::" */
    /* Services. Every tag stays below 64: the decoders' duplicate check is a 64-bit set. */
    /* a service's name (wr_service_name_ok): SERVICE, SERVICE_INFO; SPAWN: run in that service */
    WR_TAG_SERVICE = 52,
    WR_TAG_ROOT = 53,        /* SERVICE: absolute path of its root directory in the sandbox */
    WR_TAG_DEPEND = 54,      /* SERVICE, repeated: "NAME=N", N an enum wr_depend */
    WR_TAG_HEALTH_ARGV = 55, /* SERVICE, repeated, in order: the healthcheck's argv */
    WR_TAG_HEALTH_INTERVAL_MS = 56, /* SERVICE: u64 */
    WR_TAG_HEALTH_TIMEOUT_MS = 57,  /* SERVICE: u64 */
    WR_TAG_HEALTH_START_MS = 58,    /* SERVICE: u64, the start period */
    WR_TAG_HEALTH_RETRIES = 59,     /* SERVICE: u64 */
    WR_TAG_RESTART = 60,            /* SERVICE: u64, enum wr_restart */
    WR_TAG_RESTART_MAX = 61,        /* SERVICE: u64 */
    WR_TAG_STOP_SIGNAL = 62,        /* SERVICE: u64, 1-64 */
    WR_TAG_STATE = 63,              /* SERVICE_INFO: "running", "healthy", ... */
};

/* OUTPUT frame flags */
#define WR_FLAG_STDOUT 1
#define WR_FLAG_STDERR 2

/* FILE_WRITE FLAGS field */
#define WR_WRITE_ATOMIC 1u /* write a temporary file and rename it over the target */
#define WR_WRITE_MKDIRS 2u /* create missing parent directories */
#define WR_WRITE_APPEND 4u
#define WR_WRITE_EXCL   8u /* fail if the file exists */

/* STAT TYPE field */
enum wr_file_type {
    WR_FT_FILE = 1,
    WR_FT_DIR = 2,
    WR_FT_SYMLINK = 3,
    WR_FT_OTHER = 4,
};

/* WATCH_EVENT TYPE field */
enum wr_watch_op {
    WR_WATCH_CREATE = 1,
    WR_WATCH_WRITE = 2,
    WR_WATCH_REMOVE = 3,
    WR_WATCH_RENAME = 4, /* moved away from NAME, or to NAME: one event for each side */
    WR_WATCH_CHMOD = 5,  /* attributes changed: mode, owner, times */
};

struct wr_frame_hdr {
    uint32_t len;
    uint16_t type;
    uint16_t flags;
    uint32_t id;
};

/* ---- encoding ---------------------------------------------------------------------------- */

/* Start a TLV frame at the end of `b`; fields follow; wr_msg_end() patches the length.
 * Returns the offset of the frame, to pass to wr_msg_end(). */
size_t wr_msg_begin(struct wr_buf *b, uint16_t type, uint16_t flags, uint32_t id);
void wr_msg_put_u64(struct wr_buf *b, uint16_t tag, uint64_t v);
void wr_msg_put_i64(struct wr_buf *b, uint16_t tag, int64_t v);
void wr_msg_put_str(struct wr_buf *b, uint16_t tag, const char *s);
void wr_msg_put_bytes(struct wr_buf *b, uint16_t tag, const void *p, size_t n);
/* Finish the frame begun at `start`. Returns 0, or -1 (frame removed from `b`) if the payload
 * grew past WR_FRAME_MAX_PAYLOAD. */
int wr_msg_end(struct wr_buf *b, size_t start);

/* Append a whole frame whose payload is raw bytes (OUTPUT, STDIN, DATA). n must be at most
 * WR_FRAME_MAX_PAYLOAD. */
void wr_frame_raw(struct wr_buf *b, uint16_t type, uint16_t flags, uint32_t id, const void *p,
                  size_t n);

/* Convenience: an OK with no fields, an ERROR with errno and message. */
void wr_msg_ok(struct wr_buf *b, uint32_t id);
void wr_msg_error(struct wr_buf *b, uint32_t id, int errnum, const char *message);

/* ---- decoding ---------------------------------------------------------------------------- */

/* Reassembles frames from a byte stream. Bounded: a header announcing more than
 * WR_FRAME_MAX_PAYLOAD is an error, and the buffer never grows past one frame plus one read. */
struct wr_reader {
    struct wr_buf in;
    size_t off; /* bytes at the front of `in` already handed out by wr_reader_next() */
};

void wr_reader_init(struct wr_reader *r);
void wr_reader_fini(struct wr_reader *r);
/* Append bytes received from the socket. */
void wr_reader_feed(struct wr_reader *r, const void *p, size_t n);
/* Take the next complete frame. Returns 1 and fills hdr and *payload (valid until the next
 * call to any wr_reader function), 0 if more bytes are needed, -1 on a malformed header. */
int wr_reader_next(struct wr_reader *r, struct wr_frame_hdr *hdr, const uint8_t **payload,
                   struct wr_err *err);

/* Parse a 12-byte header. Returns 0, or -1 if len exceeds WR_FRAME_MAX_PAYLOAD. */
int wr_frame_hdr_parse(const uint8_t *p, struct wr_frame_hdr *hdr, struct wr_err *err);

/* One TLV field, pointing into the payload. */
struct wr_field {
    uint16_t tag;
    uint32_t len;
    const uint8_t *val;
};

struct wr_tlv_iter {
    const uint8_t *p;
    size_t n;
    size_t off;
};

void wr_tlv_iter_init(struct wr_tlv_iter *it, const uint8_t *p, size_t n);
/* Returns 1 with *f filled, 0 at the end, -1 if a field runs past the payload. */
int wr_tlv_next(struct wr_tlv_iter *it, struct wr_field *f);
/* Value accessors: -1 if the field has the wrong size or content. */
int wr_field_u64(const struct wr_field *f, uint64_t *out);
int wr_field_i64(const struct wr_field *f, int64_t *out);
/* Copy a string field into a new NUL-terminated string (*out, caller frees). Rejects embedded
 * NULs and strings longer than max. */
int wr_field_strdup(const struct wr_field *f, size_t max, char **out);

/* ---- typed messages ------------------------------------------------------------------------ */

/* SPAWN. argv and env are NULL-terminated arrays. uid/gid of -1 mean "use `user`, or the image's
 * default user"; rows/cols matter only with pty, and 0 means the default size. The struct owns
 * its strings when wr_spawn_decode or a builder filled it (wr_spawn_fini frees them); the encoder
 * only reads it, so a caller may point it at arrays it keeps itself. */
#define WR_TTY_ROWS_DEFAULT 24
#define WR_TTY_COLS_DEFAULT 80
struct wr_spawn {
    char **argv;
    char **env;
    char *cwd;  /* NULL: the image's working directory */
    char *user; /* NULL: uid/gid, or the image's user */
    int64_t uid;
    int64_t gid;
    bool pty;
    uint16_t rows;
    uint16_t cols;
    uint32_t nfds; /* cgroup.procs fds sent with the frame, at most WR_SPAWN_FDS_MAX */
    char *cgroup;  /* the command's own cgroup (its name), or NULL */
    /* Run in this service (WR_TAG_SERVICE): chrooted into its root, with its environment, cwd
     * and user as defaults (docs/design/init.md, "SPAWN with SERVICE"); NULL: none */
    char *service;
};
#define WR_SPAWN_FDS_MAX   4
#define WR_CGROUP_NAME_MAX 64

void wr_spawn_encode(struct wr_buf *b, uint32_t id, const struct wr_spawn *s);
/* Decode into *s (all strings owned by s; free with wr_spawn_fini). -1 with err on bad input:
 * no argv, too many entries, strings too long or containing NUL, a SERVICE that is not a
 * service name. */
int wr_spawn_decode(const uint8_t *p, size_t n, struct wr_spawn *s, struct wr_err *err);
void wr_spawn_fini(struct wr_spawn *s);

/* PROC (one process in a LIST reply). */
struct wr_proc_info {
    uint32_t proc_id;
    int64_t pid;
    char **argv; /* NULL-terminated */
    bool pty;
    bool running;
    int64_t exit_code; /* valid when !running and signal == 0 */
    int64_t signal;    /* terminating signal, 0 if it exited */
    char *cgroup;      /* the name SPAWN gave its own cgroup, or NULL */
};

void wr_proc_info_encode(struct wr_buf *b, uint32_t id, const struct wr_proc_info *pi);
int wr_proc_info_decode(const uint8_t *p, size_t n, struct wr_proc_info *pi, struct wr_err *err);
void wr_proc_info_fini(struct wr_proc_info *pi);

/* STAT (FILE_STAT reply, FILE_LIST item, first reply of FILE_READ). */
struct wr_stat {
    char *name; /* FILE_LIST items: path relative to the listed directory; else NULL */
    enum wr_file_type type;
    uint32_t mode; /* permission bits, 07777 */
    uint64_t size;
    int64_t mtime_ns;
    int64_t uid;
    int64_t gid;
    char *link; /* symlink target, or NULL */
};

void wr_stat_encode(struct wr_buf *b, uint32_t id, const struct wr_stat *st);
int wr_stat_decode(const uint8_t *p, size_t n, struct wr_stat *st, struct wr_err *err);
void wr_stat_fini(struct wr_stat *st);

/* EXIT event. The usage fields are warren-init's (wait4's rusage of the command and of the
 * descendants it waited for, and init's monotonic clock): written by the sandbox, so a sandbox
 * that took over its PID 1 can forge them. An EXIT from an older init has none (has_usage). */
struct wr_exit {
    int64_t exit_code; /* valid when signal == 0 */
    int64_t signal;
    bool has_usage;        /* CPU_NS, MAXRSS_BYTES and WALL_NS all came */
    uint64_t cpu_ns;       /* user + system */
    uint64_t maxrss_bytes; /* ru_maxrss: the peak resident set of the largest of them */
    uint64_t wall_ns;      /* from the spawn to the reap */
    /* The daemon's, never encoded: cpu_ns and maxrss_bytes are the command's own cgroup's
     * (its CPU time and memory high-water mark, read on the host), not warren-init's. */
    bool from_cgroup;
};

void wr_exit_encode(struct wr_buf *b, uint32_t proc_id, const struct wr_exit *ex);
int wr_exit_decode(const uint8_t *p, size_t n, struct wr_exit *ex, struct wr_err *err);

/* WATCH_EVENT. */
struct wr_watch_event {
    enum wr_watch_op op;
    char *name; /* relative to the watched directory ("a", "sub/a"); never empty */
};

/* `name` must be at most WR_MAX_PATH bytes and a relative path without empty, "." or ".."
 * components, or the peer's decoder rejects the event. */
void wr_watch_event_encode(struct wr_buf *b, uint32_t id, const struct wr_watch_event *ev);
/* Needs TYPE (1-5) and NAME (checked as above). Free with wr_watch_event_fini. */
int wr_watch_event_decode(const uint8_t *p, size_t n, struct wr_watch_event *ev,
                          struct wr_err *err);
void wr_watch_event_fini(struct wr_watch_event *ev);

/* A file request: FILE_READ, FILE_WRITE, FILE_STAT, FILE_LIST, FILE_MKDIR, FILE_REMOVE,
 * FILE_RENAME, FILE_CHMOD or FILE_WATCH (the `type`). Each type carries PATH, the user fields and
 * its own fields below; the others are neither sent nor read for it. */
struct wr_file_req {
    char *path;       /* absolute, inside the sandbox */
    char *user;       /* NULL: uid/gid, or the image's user */
    int64_t uid, gid; /* -1: not given */
    char *dest;       /* RENAME: absolute */
    uint64_t offset;  /* READ */
    uint64_t length;  /* READ; UINT64_MAX: to the end */
    uint64_t flags;   /* WRITE: WR_WRITE_* */
    uint64_t depth;   /* LIST; 0: not given (1) */
    uint32_t mode;    /* WRITE, MKDIR, CHMOD (required there); valid with has_mode */
    bool has_mode;
    bool nofollow;  /* STAT */
    bool parents;   /* MKDIR */
    bool recursive; /* REMOVE, WATCH */
};

/* Initialise *r: everything unset (uid/gid -1, length UINT64_MAX). */
void wr_file_req_init(struct wr_file_req *r);
/* Append request `id` of `type` with r's fields for that type. */
void wr_file_req_encode(struct wr_buf *b, uint16_t type, uint32_t id, const struct wr_file_req *r);
/* Only the fields, into a frame begun with wr_msg_begin (or wr_agent_begin). */
void wr_file_req_put(struct wr_buf *b, uint16_t type, const struct wr_file_req *r);
/* Decode a request of `type` into *r (strings owned by r; free with wr_file_req_fini). -1 with err
 * on bad input: no absolute PATH (or DEST for RENAME, MODE for CHMOD), a duplicate field, a value
 * out of range, strings too long or containing NUL. Fields of other types are skipped. */
int wr_file_req_decode(uint16_t type, const uint8_t *p, size_t n, struct wr_file_req *r,
                       struct wr_err *err);
void wr_file_req_fini(struct wr_file_req *r);

/* PORT_LIST reply items: a listening TCP socket. */
#define WR_PORT_LIST_MAX 8192 /* items one reply may carry */
struct wr_port_listen {
    char addr[48]; /* numeric, NUL-terminated */
    uint16_t port;
};
/* An OK for request `id` with the items (at most WR_PORT_LIST_MAX are encoded). */
void wr_port_list_encode(struct wr_buf *b, uint32_t id, const struct wr_port_listen *v, size_t n);
/* Decode a PORT_LIST OK: *out gets *count items (caller frees *out; NULL when 0). -1 with err
 * (WR_EPROTO) on bad input: an ADDR that is not a numeric address, a PORT out of 1-65535, a
 * PORT without its ADDR, more than WR_PORT_LIST_MAX items. */
int wr_port_list_decode(const uint8_t *p, size_t n, struct wr_port_listen **out, size_t *count,
                        struct wr_err *err);

/* SERVICE: one Compose service for init to supervise (docs/design/init.md, "Services"). The
 * struct owns its strings when wr_service_decode filled it (wr_service_fini frees them); the
 * encoder only reads it. */
#define WR_SERVICES_MAX        16 /* services one sandbox may define */
#define WR_SERVICE_NAME_MAX    63
#define WR_SERVICE_DEPENDS_MAX 64
/* Durations are at most this many ms (about 49 days), so deadlines never overflow. */
#define WR_SERVICE_MS_MAX UINT32_MAX

enum wr_restart {
    WR_RESTART_NO = 0,
    WR_RESTART_ALWAYS,
    WR_RESTART_ON_FAILURE,
    WR_RESTART_UNLESS_STOPPED,
};

/* The condition of a dependency ("NAME=N" in depends). */
enum wr_depend {
    WR_DEPEND_STARTED = 0, /* its process was started */
    WR_DEPEND_HEALTHY,     /* its healthcheck passes */
    WR_DEPEND_COMPLETED,   /* it exited with code 0 and will not be restarted */
};

struct wr_service {
    char *name; /* 1-63 bytes of [a-z0-9._-], starting with a letter or digit */
    char *root; /* absolute path of its root in the sandbox; NULL: the sandbox's own root */
    /* argv (required), env (the service's whole environment, KEY=VALUE), cwd, user, uid, gid,
     * nfds, cgroup: as SPAWN; pty is always false and service NULL */
    struct wr_spawn sp;
    char **depends;     /* NULL-terminated "NAME=N" with N an enum wr_depend, or NULL */
    char **health_argv; /* NULL: no healthcheck. Executed directly (no shell) */
    /* 0: the defaults, 30000, 30000 and 0 ms; each at most WR_SERVICE_MS_MAX */
    uint64_t health_interval_ms, health_timeout_ms, health_start_period_ms;
    uint32_t health_retries; /* 0: the default, 3 */
    uint32_t restart;        /* enum wr_restart */
    uint32_t restart_max;    /* on-failure:N; 0 = unlimited */
    uint32_t stop_signal;    /* 0: SIGTERM (carried, not used yet) */
};

/* Whether name is a service name: 1-63 bytes of [a-z0-9._-], the first a letter or digit. */
bool wr_service_name_ok(const char *name);
/* Split a depends entry "NAME=N": the name's length into *name_len, N into *cond. Returns 0, or
 * -1 if dep is not a service name, '=' and one digit of enum wr_depend. */
int wr_service_depend_parse(const char *dep, size_t *name_len, enum wr_depend *cond);
/* Append SERVICE request `id` (fields equal to their defaults are left out). Like
 * wr_spawn_encode, a definition past WR_FRAME_MAX_PAYLOAD appends nothing (b->len unchanged). */
void wr_service_encode(struct wr_buf *b, uint32_t id, const struct wr_service *s);
/* Decode into *s (strings owned by s; free with wr_service_fini, which a failed decode makes
 * unnecessary). -1 with err (WR_EPROTO) on bad input: everything wr_spawn_decode refuses, a
 * missing or bad name, PTY set, a relative ROOT, a bad DEPEND or more than
 * WR_SERVICE_DEPENDS_MAX, more than WR_MAX_ARGS HEALTH_ARGV, a duration over WR_SERVICE_MS_MAX,
 * a RESTART out of enum wr_restart, a STOP_SIGNAL out of 1-64, a duplicate singular field. */
int wr_service_decode(const uint8_t *p, size_t n, struct wr_service *s, struct wr_err *err);
void wr_service_fini(struct wr_service *s);

/* SERVICE_INFO (one service in a SERVICE_LIST reply). */
#define WR_SERVICE_STATE_MAX 32
struct wr_service_info {
    char *name;
    /* "waiting", "starting", "running", "healthy", "unhealthy", "restarting", "exited",
     * "failed" (a decoder accepts any 1-32 lowercase letters: a newer init may add states) */
    char *state;
    int64_t pid; /* in the sandbox (never to be used on the host), 0 if none */
    uint64_t restarts;
    bool has_exit; /* the last exit, if any: */
    int64_t exit_code;
    int64_t signal; /* 0: it exited with exit_code */
    /* why it is waiting or failed, or NULL ("waiting for db to be healthy", "dependency db
     * failed", "exec `x`: No such file or directory"). Written by the sandbox: escape it. */
    char *message;
};

/* `message` is cut to WR_MAX_STR bytes. */
void wr_service_info_encode(struct wr_buf *b, uint32_t id, const struct wr_service_info *si);
/* Needs SERVICE (a service name) and STATE; PID 0..INT32_MAX, RESTARTS at most INT64_MAX,
 * EXIT_CODE 0-255 or SIGNAL 1-64 (not both). Free with wr_service_info_fini. */
int wr_service_info_decode(const uint8_t *p, size_t n, struct wr_service_info *si,
                           struct wr_err *err);
void wr_service_info_fini(struct wr_service_info *si);

/* ERROR reply. message is copied into msg (truncated, NUL-terminated). */
int wr_error_decode(const uint8_t *p, size_t n, int *errnum, char *msg, size_t msgsz,
                    struct wr_err *err);

/* A single u64 field from a payload (e.g. PROC_ID of an OK reply). Returns 0, or -1 if the
 * field is absent or malformed. */
int wr_msg_get_u64(const uint8_t *p, size_t n, uint16_t tag, uint64_t *out);
/* A single string field, duplicated. -1 if absent or malformed. */
int wr_msg_get_str(const uint8_t *p, size_t n, uint16_t tag, size_t max, char **out);
