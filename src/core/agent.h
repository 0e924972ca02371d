/* SPDX-License-Identifier: Apache-2.0 */
/* An asynchronous client, on the daemon's libuv loop, for one control connection to a
 * sandbox's warren-init (the protocol of src/proto/proto.h). Every frame from the agent is
 * hostile input: it is decoded with the bounded decoders, and a malformed or unexpected frame
 * closes the connection (on_close with a WR_EPROTO error) instead of reaching the caller.
 *
 * A daemon keeps one agent per sandbox for control and processes, and opens extra ones for
 * large file transfers so a slow download cannot hold up anything else.
 *
 * Ownership: the agent belongs to its creator; callbacks never free it. Pending requests get
 * their callback with an error when the connection closes. All calls on the loop thread.
 * wr_agent_close may be called from inside any of the agent's callbacks: the memory is released
 * from a libuv close callback, so the loop must run once more after it. The agent writes to a
 * socket whose peer may vanish: the process must ignore SIGPIPE. See docs/design/agent.md. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "../proto/proto.h"
#include "../util/err.h"

struct wr_agent;

struct wr_agent_config {
    uv_loop_t *loop;
    /* An already connected socket fd (HELLO is not sent again, as wr_sandbox_create did it),
     * taken over: the agent closes it, also when wr_agent_open fails; or -1 to connect to path
     * (connect + HELLO). */
    int fd;
    const char *path;
    /* Dormancy: after idle_ms with no request, process or write in flight, the socket is closed
     * and the next request connects to path again (0: never; needs path). The agent stays ready
     * meanwhile: an idle sandbox costs the daemon no file descriptor. A wake that finds the
     * daemon out of fds fails its requests (WR_ESYS, EMFILE) and leaves the agent dormant; one
     * that finds nobody listening is the connection lost (on_close). */
    uint32_t idle_ms;
    /* With more than crowd sockets of agents open in the process (0: no such rule), a quiet
     * agent goes dormant at once instead of after idle_ms: the fds stay for busy sandboxes. */
    uint32_t crowd;
    /* Called once when the connection is ready (after HELLO for a path), or failed to be. */
    void (*on_ready)(struct wr_agent *a, const struct wr_err *err, void *ctx);
    /* Called once when an established connection is lost (err says why: WR_EPROTO for a
     * malformed or unexpected frame, WR_ESYS for EOF or a socket error). Never called after, or
     * because of, wr_agent_close. Every pending request has had its error callback first. */
    void (*on_close)(struct wr_agent *a, const struct wr_err *err, void *ctx);
    void *ctx;
};

/* Start a connection. Returns 0 (on_ready follows, possibly with an error) or -1 with err. */
int wr_agent_open(const struct wr_agent_config *cfg, struct wr_agent **out, struct wr_err *err);
/* Close and free (on_close is not called; pending callbacks get a "closed" error first, then no
 * callback comes). NULL is accepted. */
void wr_agent_close(struct wr_agent *a);
bool wr_agent_is_ready(const struct wr_agent *a);
/* Whether its socket is closed for now (dormancy, see idle_ms). */
bool wr_agent_is_dormant(const struct wr_agent *a);
/* Go dormant as soon as nothing is in flight (after a restart's adoption, say), without waiting
 * for idle_ms. */
void wr_agent_doze(struct wr_agent *a);
/* Sockets that the process's agents hold open now. */
unsigned wr_agent_sockets(void);

/* ---- processes ------------------------------------------------------------------------------ */

struct wr_agent_proc_cbs {
    /* SPAWN's answer: err NULL and the ids, or err (e.g. sys_errno ENOENT for a missing
     * command). After an error no other callback comes. */
    void (*on_started)(void *ctx, uint32_t proc_id, int64_t pid, const struct wr_err *err);
    /* Output bytes (stream WR_FLAG_STDOUT or WR_FLAG_STDERR), valid during the call. The caller
     * returns the window credit with wr_agent_ack() once it has passed the bytes on; until then
     * warren-init holds at most WR_OUTPUT_WINDOW unacknowledged bytes and the process blocks.
     * NULL: output is acknowledged and dropped, as after wr_agent_detach. */
    void (*on_output)(void *ctx, uint32_t proc_id, int stream, const uint8_t *p, size_t n);
    /* The process ended (after all its output). */
    void (*on_exit)(void *ctx, uint32_t proc_id, const struct wr_exit *ex);
};

/* Spawn a process; its events go to cbs/ctx until wr_agent_detach. Returns 0 or -1 (not
 * connected, or the spawn does not encode). */
int wr_agent_spawn(struct wr_agent *a, const struct wr_spawn *sp,
                   const struct wr_agent_proc_cbs *cbs, void *ctx, struct wr_err *err);
/* The same, with sp->nfds fds (cgroup.procs files) sent with the SPAWN frame (SCM_RIGHTS), so
 * warren-init has them when it reads the frame. The fds are taken over: closed once sent, or
 * on failure. */
int wr_agent_spawn_fds(struct wr_agent *a, const struct wr_spawn *sp, const int *fds,
                       const struct wr_agent_proc_cbs *cbs, void *ctx, struct wr_err *err);
/* Take over the events of an existing process (ATTACH: e.g. after a daemon restart; an ended
 * process's EXIT is delivered again). on_started reports the ATTACH's answer (pid -1: ATTACH's
 * OK carries none). */
int wr_agent_attach(struct wr_agent *a, uint32_t proc_id, const struct wr_agent_proc_cbs *cbs,
                    void *ctx, struct wr_err *err);
/* Stop delivering a process's events to its ctx. Its output is then acknowledged and dropped by
 * the agent, so the process never blocks on an absent reader; its EXIT is dropped too. */
void wr_agent_detach(struct wr_agent *a, uint32_t proc_id);
void wr_agent_ack(struct wr_agent *a, uint32_t proc_id, size_t bytes);
/* Write to stdin (copied; no answer). At most WR_STDIN_WINDOW bytes are in flight to
 * warren-init per process; the rest waits here (counted by wr_agent_pending) until STDIN_ACKs
 * come back. */
void wr_agent_stdin(struct wr_agent *a, uint32_t proc_id, const void *p, size_t n);

/* ---- requests ------------------------------------------------------------------------------ */

/* Called for every reply frame of a request: intermediate ones (PROC, STAT, DATA) with
 * final = false, then the OK or ERROR with final = true. Two types differ: FILE_STAT's STAT is
 * itself final, and FILE_WRITE's first OK ("ready") is intermediate. On ERROR, or when the
 * connection is lost, err is set (err->sys_errno has warren-init's errno) and h/p are NULL.
 * Reply frames that do not fit the request's type, or do not decode, close the connection. */
typedef void (*wr_agent_reply_fn)(void *ctx, const struct wr_frame_hdr *h, const uint8_t *p,
                                  bool final, const struct wr_err *err);

/* Build a request: wr_agent_begin returns the output buffer with a frame of `type` started
 * (its id allocated); put fields with wr_msg_put_*; wr_agent_end finishes it and registers cb
 * (NULL: replies are dropped). Call nothing else of the agent in between. Returns the request
 * id (0 on failure: not connected, or the frame grew too large, in which case cb is not called
 * and err is set). Use wr_agent_spawn/wr_agent_attach for SPAWN and ATTACH. */
struct wr_buf *wr_agent_begin(struct wr_agent *a, uint16_t type, size_t *start);
uint32_t wr_agent_end(struct wr_agent *a, size_t start, wr_agent_reply_fn cb, void *ctx,
                      struct wr_err *err);
/* Close the process's stdin after everything written so far (STDIN_CLOSE, sent once the stdin
 * waiting here has gone out). cb gets the final reply as for a request. Returns 0, or -1 with
 * err (not connected). */
int wr_agent_stdin_close(struct wr_agent *a, uint32_t proc_id, wr_agent_reply_fn cb, void *ctx,
                         struct wr_err *err);

/* Send DATA frames (raw bytes, copied, cut into WR_CHUNK_SIZE pieces) or DATA_END for request
 * id (FILE_WRITE streams). Dropped when the request is no longer pending (e.g. after its
 * ERROR). Pace large streams with wr_agent_pending and wr_agent_on_drain. */
void wr_agent_data(struct wr_agent *a, uint32_t req_id, const void *p, size_t n);
void wr_agent_data_end(struct wr_agent *a, uint32_t req_id);

/* ---- services (docs/design/init.md, "Services") ------------------------------------------- */

/* Define service s (SERVICE), with s->sp.nfds fds (cgroup.procs files of the service's own
 * cgroup: its processes and healthchecks join it) sent with the frame as wr_agent_spawn_fds
 * sends them, and taken over the same way: closed once sent, or on failure. cb gets NULL once
 * warren-init has the definition, or the error (sys_errno EEXIST: a service of that name is
 * defined; EALREADY: services were started; ENOSPC: WR_SERVICES_MAX are defined; EINVAL: a bad
 * field). Returns 0 (cb follows, also when the connection is lost), or -1 with err (not
 * connected, a bad fd count, or the definition does not encode); cb is then not called. */
int wr_agent_service_define(struct wr_agent *a, const struct wr_service *s, const int *fds,
                            void (*cb)(void *ctx, const struct wr_err *err), void *ctx,
                            struct wr_err *err);
/* Start every defined service in dependency order (SERVICES_START). cb gets NULL once
 * warren-init has begun (starting is asynchronous: see wr_agent_service_list), also when they
 * were started already (EALREADY), or the error. Returns 0 (cb follows) or -1 with err. */
int wr_agent_services_start(struct wr_agent *a, void (*cb)(void *ctx, const struct wr_err *err),
                            void *ctx, struct wr_err *err);
/* The services' states (SERVICE_LIST): cb gets n items in definition order (valid during the
 * call; decoded, so bounded, but their strings were written by the sandbox: escape them), or
 * NULL, 0 and the error. A reply of more than WR_SERVICES_MAX items closes the connection. Returns
 * 0 (cb follows) or -1 with err. */
int wr_agent_service_list(struct wr_agent *a,
                          void (*cb)(void *ctx, const struct wr_service_info *infos, size_t n,
                                     const struct wr_err *err),
                          void *ctx, struct wr_err *err);

/* ---- flow control -------------------------------------------------------------------------- */

/* Bytes queued to the socket and not yet written. */
size_t wr_agent_pending(const struct wr_agent *a);
#define WR_AGENT_HIGH_WATER (1u << 20)    /* wr_agent_pending at or above this is "full" */
#define WR_AGENT_LOW_WATER  (256u * 1024) /* ... and below this "drained" again */

/* cb is called once each time the queue falls below WR_AGENT_LOW_WATER after having reached
 * WR_AGENT_HIGH_WATER (it stays registered; NULL unregisters). */
void wr_agent_on_drain(struct wr_agent *a, void (*cb)(struct wr_agent *a, void *ctx), void *ctx);
/* Stop or resume reading from the socket (a slow consumer of a FILE_READ stream). */
void wr_agent_pause(struct wr_agent *a);
void wr_agent_resume(struct wr_agent *a);
