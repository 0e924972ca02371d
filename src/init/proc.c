/* SPDX-License-Identifier: Apache-2.0 */
/* The process table: output pumping with a per-process credit window, stdin queues, EXIT
 * events, attach and detach, reaping. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <termios.h>
#include <unistd.h>

#include "../util/log.h"
#include "../util/xalloc.h"
#include "init.h"
#include "service.h"

static struct init_proc *procs;
static uint32_t next_proc_id = 1;

static void on_output(struct init_fdw *w, uint32_t events);
static void on_stdin(struct init_fdw *w, uint32_t events);

uint32_t init_proc_add(struct init_proc *pr, struct init_conn *c)
{
    pr->id = next_proc_id++;
    pr->attached = c;
    pr->in.cb = on_stdin;
    pr->in.owner = pr;
    pr->out.cb = on_output;
    pr->out.owner = pr;
    pr->err.cb = on_output;
    pr->err.owner = pr;
    wr_buf_init(&pr->inq);
    wr_buf_init(&pr->buffered);
    pr->next = procs;
    procs = pr;
    return pr->id;
}

static struct init_proc *find(uint32_t id)
{
    for (struct init_proc *pr = procs; pr != NULL; pr = pr->next)
        if (pr->id == id && !pr->released)
            return pr;
    return NULL;
}

static size_t inq_len(const struct init_proc *pr)
{
    return pr->inq.len - pr->inq_off;
}

static void release_hold(struct init_proc *pr)
{
    if (pr->in_holder != NULL) {
        pr->in_holder->holds--;
        pr->in_holder = NULL;
    }
}

static void close_stdin(struct init_proc *pr)
{
    release_hold(pr);
    init_fdw_close(&pr->in);
    wr_buf_fini(&pr->inq);
    wr_buf_init(&pr->inq);
    pr->inq_off = 0;
    pr->in_closed = true;
}

/* ---- output ------------------------------------------------------------------------------ */

static size_t window_used(const struct init_proc *pr)
{
    return pr->unacked + pr->buffered_bytes;
}

static void deliver(struct init_proc *pr, uint16_t flag, const void *p, size_t n)
{
    if (pr->attached != NULL) {
        wr_frame_raw(&pr->attached->out, WR_MSG_OUTPUT, flag, pr->id, p, n);
        pr->unacked += n;
    } else {
        wr_frame_raw(&pr->buffered, WR_MSG_OUTPUT, flag, pr->id, p, n);
        pr->buffered_bytes += n;
    }
}

static void on_output(struct init_fdw *w, uint32_t events)
{
    static uint8_t buf[WR_CHUNK_SIZE];
    struct init_proc *pr = w->owner;
    size_t used = window_used(pr);
    size_t want;
    ssize_t r;

    if (used >= WR_OUTPUT_WINDOW)
        return; /* the pump takes this fd out of the set */
    want = WR_OUTPUT_WINDOW - used;
    if (want > sizeof(buf))
        want = sizeof(buf);
    r = read(w->fd, buf, want);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (r <= 0) {
        /* EOF; a pty master says EIO once the last slave fd is closed. */
        init_fdw_close(w);
        return;
    }
    deliver(pr, w == &pr->err ? WR_FLAG_STDERR : WR_FLAG_STDOUT, buf, (size_t)r);
}

/* gVisor's pty master never reports that the last replica closed (no EIO, no POLLHUP): once
 * the process is reaped, what is left to read is read now, and its output ends with it (a
 * background job still holding the terminal is cut off there, unlike on Linux). */
static void pty_drain(struct init_proc *pr)
{
    static uint8_t buf[WR_CHUNK_SIZE];

    while (window_used(pr) < WR_OUTPUT_WINDOW) {
        size_t want = WR_OUTPUT_WINDOW - window_used(pr);
        ssize_t r = read(pr->out.fd, buf, want < sizeof(buf) ? want : sizeof(buf));
        if (r > 0) {
            deliver(pr, WR_FLAG_STDOUT, buf, (size_t)r);
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        init_fdw_close(&pr->out); /* EAGAIN: nothing more will come */
        return;
    }
}

static bool output_done(const struct init_proc *pr)
{
    return pr->out.fd < 0 && pr->err.fd < 0;
}

static void send_exit(struct init_proc *pr)
{
    struct wr_exit ex = {0};

    if (WIFSIGNALED(pr->status))
        ex.signal = WTERMSIG(pr->status);
    else
        ex.exit_code = WEXITSTATUS(pr->status);
    ex.has_usage = true;
    ex.cpu_ns = pr->cpu_ns;
    ex.maxrss_bytes = pr->maxrss;
    ex.wall_ns = pr->end_ns > pr->start_ns ? pr->end_ns - pr->start_ns : 0;
    wr_exit_encode(&pr->attached->out, pr->id, &ex);
    pr->exit_sent = true;
}

static void attach(struct init_proc *pr, struct init_conn *c)
{
    pr->attached = c;
    pr->unacked = 0; /* credit given to an earlier connection is forgotten */
    pr->exit_sent = false;
    if (pr->buffered.len > 0) {
        wr_buf_append(&c->out, pr->buffered.data, pr->buffered.len);
        pr->unacked = pr->buffered_bytes;
        wr_buf_fini(&pr->buffered);
        wr_buf_init(&pr->buffered);
        pr->buffered_bytes = 0;
    }
}

/* ---- stdin ------------------------------------------------------------------------------- */

/* Return window credit to the sender of stdin: n bytes were written to the process, or dropped.
 * This is what keeps the daemon from queueing more than WR_STDIN_WINDOW here, so init never has
 * to stop reading a connection that also carries the ACKs of the process's output. */
static void stdin_ack(struct init_conn *c, uint32_t proc_id, size_t n)
{
    size_t at;

    if (c == NULL || c->dead || n == 0)
        return;
    at = wr_msg_begin(&c->out, WR_MSG_STDIN_ACK, 0, proc_id);
    wr_msg_put_u64(&c->out, WR_TAG_BYTES, n);
    wr_msg_end(&c->out, at);
}

static void on_stdin(struct init_fdw *w, uint32_t events)
{
    struct init_proc *pr = w->owner;
    size_t written = 0;

    while (inq_len(pr) > 0) {
        ssize_t r = write(w->fd, pr->inq.data + pr->inq_off, inq_len(pr));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            /* EPIPE: the process closed its stdin; what is queued can never be read. */
            stdin_ack(pr->in_sender, pr->id, written + inq_len(pr));
            close_stdin(pr);
            return;
        }
        pr->inq_off += (size_t)r;
        written += (size_t)r;
    }
    stdin_ack(pr->in_sender, pr->id, written);
    if (inq_len(pr) == 0 || pr->inq_off > (1u << 20)) {
        wr_buf_consume(&pr->inq, pr->inq_off);
        pr->inq_off = 0;
    }
    if (inq_len(pr) <= INIT_STDIN_HIGH)
        release_hold(pr);
    if (inq_len(pr) == 0 && pr->in_closing && !pr->pty)
        close_stdin(pr);
}

static void stdin_data(struct init_conn *c, uint32_t proc_id, struct init_proc *pr,
                       const uint8_t *p, size_t n)
{
    if (pr == NULL || pr->in_closed || pr->in_closing || pr->in.fd < 0 || n == 0) {
        stdin_ack(c, proc_id, n); /* dropped: the process is gone or its stdin is closed */
        return;
    }
    pr->in_sender = c;
    wr_buf_append(&pr->inq, p, n);
    on_stdin(&pr->in, EPOLLOUT);
    if (pr->in.fd >= 0 && inq_len(pr) > INIT_STDIN_HIGH && pr->in_holder == NULL) {
        pr->in_holder = c;
        c->holds++;
    }
}

static void stdin_close(struct init_proc *pr)
{
    if (pr->in_closing || pr->in_closed)
        return;
    if (pr->pty) {
        /* A pty has no half-close: send the terminal's EOF character (^D by default). */
        static const uint8_t eof = 4;
        if (pr->in.fd >= 0) {
            wr_buf_append(&pr->inq, &eof, 1);
            on_stdin(&pr->in, EPOLLOUT);
        }
        pr->in_closing = true;
        return;
    }
    pr->in_closing = true;
    if (inq_len(pr) == 0)
        close_stdin(pr);
}

/* ---- requests ---------------------------------------------------------------------------- */

static void list(struct init_conn *c, uint32_t id)
{
    for (struct init_proc *pr = procs; pr != NULL; pr = pr->next) {
        struct wr_proc_info pi = {0};
        if (pr->released)
            continue;
        pi.proc_id = pr->id;
        pi.pid = pr->pid;
        pi.argv = pr->argv;
        pi.cgroup = pr->cgroup;
        pi.pty = pr->pty;
        pi.running = !pr->reaped;
        if (pr->reaped && WIFSIGNALED(pr->status))
            pi.signal = WTERMSIG(pr->status);
        else if (pr->reaped)
            pi.exit_code = WEXITSTATUS(pr->status);
        wr_proc_info_encode(&c->out, id, &pi);
    }
    wr_msg_ok(&c->out, id);
}

void init_proc_request(struct init_conn *c, const struct wr_frame_hdr *h, const uint8_t *p)
{
    struct init_req r;
    struct wr_err err = {0};
    struct init_proc *pr;

    /* Events addressed by proc id, with raw or tiny payloads. */
    if (h->type == WR_MSG_STDIN) {
        stdin_data(c, h->id, find(h->id), p, h->len);
        return;
    }
    if (h->type == WR_MSG_ACK) {
        uint64_t bytes = 0;
        pr = find(h->id);
        if (pr == NULL || pr->attached != c || wr_msg_get_u64(p, h->len, WR_TAG_BYTES, &bytes) < 0)
            return;
        pr->unacked -= bytes < pr->unacked ? (size_t)bytes : pr->unacked;
        return;
    }
    if (h->type == WR_MSG_LIST) {
        list(c, h->id);
        return;
    }

    if (init_req_parse(p, h->len, &r, &err) < 0) {
        init_conn_errorf(c, h->id, EINVAL, "%s", err.msg);
        return;
    }
    if (!init_req_has(&r, WR_TAG_PROC_ID)) {
        init_conn_errorf(c, h->id, EINVAL, "missing PROC_ID");
        goto out;
    }
    pr = r.num[WR_TAG_PROC_ID] <= UINT32_MAX ? find((uint32_t)r.num[WR_TAG_PROC_ID]) : NULL;
    if (pr == NULL) {
        init_conn_errorf(c, h->id, ESRCH, "process %llu",
                         (unsigned long long)r.num[WR_TAG_PROC_ID]);
        goto out;
    }

    switch (h->type) {
    case WR_MSG_STDIN_CLOSE:
        stdin_close(pr);
        wr_msg_ok(&c->out, h->id);
        break;
    case WR_MSG_SIGNAL: {
        uint64_t sig = r.num[WR_TAG_SIGNAL];
        if (!init_req_has(&r, WR_TAG_SIGNAL) || sig >= 65) {
            init_conn_errorf(c, h->id, EINVAL, "signal %llu", (unsigned long long)sig);
            break;
        }
        if (pr->reaped) {
            init_conn_errorf(c, h->id, ESRCH, "signal process %u", pr->id);
            break;
        }
        /* Each process leads its own session and group: signal all of it. */
        if (kill(-pr->pid, (int)sig) < 0 && kill(pr->pid, (int)sig) < 0) {
            init_conn_errorf(c, h->id, errno, "signal process %u", pr->id);
            break;
        }
        wr_msg_ok(&c->out, h->id);
        break;
    }
    case WR_MSG_RESIZE: {
        struct winsize ws = {0};
        if (!pr->pty || pr->out.fd < 0) {
            init_conn_errorf(c, h->id, ENOTTY, "resize process %u", pr->id);
            break;
        }
        ws.ws_row = (unsigned short)r.num[WR_TAG_ROWS];
        ws.ws_col = (unsigned short)r.num[WR_TAG_COLS];
        if (ws.ws_row == 0 || ws.ws_col == 0 || r.num[WR_TAG_ROWS] > 0xffff ||
            r.num[WR_TAG_COLS] > 0xffff) {
            init_conn_errorf(c, h->id, EINVAL, "resize process %u: bad size", pr->id);
            break;
        }
        if (ioctl(pr->out.fd, TIOCSWINSZ, &ws) < 0) {
            init_conn_errorf(c, h->id, errno, "resize process %u", pr->id);
            break;
        }
        wr_msg_ok(&c->out, h->id);
        break;
    }
    case WR_MSG_ATTACH:
        wr_msg_ok(&c->out, h->id);
        attach(pr, c);
        break;
    case WR_MSG_RELEASE:
        if (!pr->reaped) {
            init_conn_errorf(c, h->id, EBUSY, "release process %u: still running", pr->id);
            break;
        }
        pr->released = true;
        wr_msg_ok(&c->out, h->id);
        break;
    default:
        break;
    }
out:
    init_req_fini(&r);
}

/* ---- reaping and the pump ---------------------------------------------------------------- */

uint64_t init_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t tv_ns(const struct timeval *tv)
{
    return (uint64_t)tv->tv_sec * 1000000000ull + (uint64_t)tv->tv_usec * 1000ull;
}

void init_procs_reap(void)
{
    struct rusage ru;
    int status;
    pid_t pid;

    /* wait4 rather than waitpid: the rusage of a reaped child is its own plus that of the
     * descendants it waited for, which is the command's usage at no extra cost. */
    while ((pid = wait4(-1, &status, WNOHANG, &ru)) > 0) {
        struct init_proc *pr;
        for (pr = procs; pr != NULL; pr = pr->next) {
            if (pr->pid == pid && !pr->reaped) {
                pr->reaped = true;
                pr->status = status;
                pr->end_ns = init_now_ns();
                pr->cpu_ns = tv_ns(&ru.ru_utime) + tv_ns(&ru.ru_stime);
                pr->maxrss = (uint64_t)ru.ru_maxrss * 1024; /* KiB on Linux */
                break;
            }
        }
        /* A service's process or healthcheck goes to service.c; anything else was an orphan
         * re-parented to us: reaped silently. */
        if (pr == NULL)
            (void)init_services_reaped(pid, status);
    }
}

static void proc_free(struct init_proc *pr)
{
    release_hold(pr);
    init_fdw_close(&pr->in);
    init_fdw_close(&pr->out);
    init_fdw_close(&pr->err);
    wr_buf_fini(&pr->inq);
    wr_buf_fini(&pr->buffered);
    for (char **a = pr->argv; a != NULL && *a != NULL; a++)
        free(*a);
    free(pr->argv);
    free(pr->cgroup);
    free(pr);
}

void init_procs_pump(void)
{
    struct init_proc **pp = &procs;

    while (*pp != NULL) {
        struct init_proc *pr = *pp;
        if (pr->released) {
            *pp = pr->next;
            proc_free(pr);
            continue;
        }
        pp = &pr->next;

        /* Backpressure: at the window, leave the fds unread and the process blocks. */
        uint32_t ev = window_used(pr) < WR_OUTPUT_WINDOW ? EPOLLIN : 0;
        init_fdw_set(&pr->out, ev);
        init_fdw_set(&pr->err, ev);
        init_fdw_set(&pr->in, inq_len(pr) > 0 ? EPOLLOUT : 0);
        if (pr->pty && pr->in_closing && inq_len(pr) == 0)
            pr->in_closed = true;
        if (pr->reaped && pr->pty && pr->out.fd >= 0 && init_cfg.gvisor)
            pty_drain(pr);
        if (pr->reaped && output_done(pr)) {
            if (pr->in.fd >= 0 || pr->in_holder != NULL)
                close_stdin(pr);
            if (pr->attached != NULL && !pr->exit_sent)
                send_exit(pr);
        }
    }
}

void init_procs_conn_gone(struct init_conn *c)
{
    for (struct init_proc *pr = procs; pr != NULL; pr = pr->next) {
        if (pr->attached == c) {
            pr->attached = NULL;
            pr->unacked = 0; /* in flight to a dead peer: forget it */
        }
        if (pr->in_holder == c)
            release_hold(pr);
        if (pr->in_sender == c)
            pr->in_sender = NULL;
    }
}
