/* SPDX-License-Identifier: Apache-2.0 */
/* `warren run`: run one command in a throwaway sandbox, without a daemon. stdin, stdout,
 * stderr and the exit status pass through (128+N when the command dies of signal N). The
 * sandbox is ephemeral: if this process dies, warren-init sees its connection close and ends
 * the sandbox. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "../init/entry.h"
#include "../proto/proto.h"
#include "../runtime/runtime.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/parse.h"
#include "../util/xalloc.h"

#define SPAWN_REQ  1
#define CLOSE_REQ  2
#define SIGNAL_REQ 3
#define RESIZE_REQ 4
#define OUT_HIGH   (1u << 20) /* stop reading stdin while this much is queued for the sandbox */

struct run_opts {
    const char *rootfs;
    const char **layers; /* extra layers on top of rootfs */
    size_t n_layers;
    char **env; /* NULL-terminated, the optargs of --env */
    size_t n_env;
    const char *user, *cwd, *hostname;
    uint64_t memory;
    uint32_t cpu_millis;
    uint64_t pids;
    uint64_t timeout_s;
    bool tty;
    char **cmd;
};

/* The conversation with warren-init over the control connection. */
struct session {
    int fd;
    struct wr_buf out;
    struct wr_reader in;
    uint32_t proc_id;
    bool spawned, exited, stdin_open, timed_out;
    struct wr_exit status;
    int spawn_errno;
    char spawn_msg[256];
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: warren run [options] -- CMD [ARG...]\n\n"
            "Run CMD in a throwaway sandbox and pass its stdin, stdout, stderr and exit status\n"
            "through (128+N if it dies of signal N).\n\n"
            "  --rootfs DIR      image root filesystem (default: the test image next to warren)\n"
            "  --layer DIR       an extra read-only layer on top (repeatable)\n"
            "  --memory SIZE     memory limit, e.g. 512M (default 512M)\n"
            "  --cpus N          CPU limit in CPUs, e.g. 0.5 (default 1)\n"
            "  --pids N          process limit (default 256)\n"
            "  --timeout SECS    kill the command after SECS seconds, exit 124 (default: none)\n"
            "  --env K=V         set an environment variable (repeatable)\n"
            "  --user USER       run as USER (name or uid; default root)\n"
            "  --cwd DIR         working directory (default /)\n"
            "  --hostname NAME   hostname (default: the sandbox id)\n"
            "  -t, --tty         run CMD on a terminal\n");
}

static int parse_opts(int argc, char **argv, struct run_opts *o)
{
    enum {
        O_ROOTFS = 256,
        O_LAYER,
        O_MEMORY,
        O_CPUS,
        O_PIDS,
        O_TIMEOUT,
        O_ENV,
        O_USER,
        O_CWD,
        O_HOSTNAME
    };
    static const struct option longopts[] = {
        {"rootfs", required_argument, NULL, O_ROOTFS},
        {"layer", required_argument, NULL, O_LAYER},
        {"memory", required_argument, NULL, O_MEMORY},
        {"cpus", required_argument, NULL, O_CPUS},
        {"pids", required_argument, NULL, O_PIDS},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"env", required_argument, NULL, O_ENV},
        {"user", required_argument, NULL, O_USER},
        {"cwd", required_argument, NULL, O_CWD},
        {"hostname", required_argument, NULL, O_HOSTNAME},
        {"tty", no_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct wr_err err;
    int c;

    o->memory = 512ull << 20;
    o->cpu_millis = 1000;
    o->pids = 256;
    o->layers = xcalloc((size_t)argc + 1, sizeof(char *));
    o->env = xcalloc((size_t)argc + 1, sizeof(char *));
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+th", longopts, NULL)) != -1) {
        switch (c) {
        case O_ROOTFS:
            o->rootfs = optarg;
            break;
        case O_LAYER:
            o->layers[o->n_layers++] = optarg;
            break;
        case O_MEMORY:
            if (wr_parse_size(optarg, &o->memory, &err) < 0)
                goto bad;
            break;
        case O_CPUS:
            if (wr_parse_cpus(optarg, &o->cpu_millis, &err) < 0)
                goto bad;
            break;
        case O_PIDS:
            if (wr_parse_uint(optarg, 4194304, &o->pids, &err) < 0 || o->pids == 0) {
                wr_err_set(&err, WR_EINVAL, 0, "--pids `%s` must be from 1 to 4194304", optarg);
                goto bad;
            }
            break;
        case O_TIMEOUT:
            if (wr_parse_uint(optarg, 86400 * 365, &o->timeout_s, &err) < 0)
                goto bad;
            break;
        case O_ENV:
            if (strchr(optarg, '=') == NULL || optarg[0] == '=') {
                wr_err_set(&err, WR_EINVAL, 0, "--env `%s` must be KEY=VALUE", optarg);
                goto bad;
            }
            o->env[o->n_env++] = optarg;
            break;
        case O_USER:
            o->user = optarg;
            break;
        case O_CWD:
            if (optarg[0] != '/') {
                wr_err_set(&err, WR_EINVAL, 0, "--cwd `%s` must be an absolute path", optarg);
                goto bad;
            }
            o->cwd = optarg;
            break;
        case O_HOSTNAME:
            o->hostname = optarg;
            break;
        case 't':
            o->tty = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            if (optopt)
                cli_errorf("run: unknown option `-%c` (see `warren run --help`)", optopt);
            else
                cli_errorf("run: unknown option `%s` (see `warren run --help`)", argv[optind - 1]);
            return -1;
        }
    }
    if (optind >= argc) {
        cli_errorf("run: no command given (usage: warren run [options] -- CMD...)");
        return -1;
    }
    o->cmd = argv + optind;
    return 0;
bad:
    cli_errorf("run: %s", err.msg);
    return -1;
}

static void send_frame_flush(struct session *s)
{
    while (s->out.len > 0) {
        ssize_t n = write(s->fd, s->out.data, s->out.len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return;
            /* The sandbox is gone; the read side will notice. */
            s->out.len = 0;
            return;
        }
        wr_buf_consume(&s->out, (size_t)n);
    }
}

static void send_spawn(struct session *s, const struct run_opts *o)
{
    struct winsize ws;
    struct wr_spawn sp = {.argv = o->cmd, .env = o->env, .uid = -1, .gid = -1, .pty = o->tty};

    if (o->tty && ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) {
        sp.rows = ws.ws_row;
        sp.cols = ws.ws_col;
    } else if (o->tty) {
        sp.rows = WR_TTY_ROWS_DEFAULT;
        sp.cols = WR_TTY_COLS_DEFAULT;
    }
    wr_spawn_encode(&s->out, SPAWN_REQ, &sp);
}

static void send_u64_req(struct session *s, uint16_t type, uint32_t id, uint16_t tag, uint64_t v)
{
    size_t at = wr_msg_begin(&s->out, type, 0, id);
    wr_msg_put_u64(&s->out, WR_TAG_PROC_ID, s->proc_id);
    if (tag)
        wr_msg_put_u64(&s->out, tag, v);
    wr_msg_end(&s->out, at);
}

static void send_resize(struct session *s)
{
    struct winsize ws;
    size_t at;

    if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || ws.ws_row == 0)
        return;
    at = wr_msg_begin(&s->out, WR_MSG_RESIZE, 0, RESIZE_REQ);
    wr_msg_put_u64(&s->out, WR_TAG_PROC_ID, s->proc_id);
    wr_msg_put_u64(&s->out, WR_TAG_ROWS, ws.ws_row);
    wr_msg_put_u64(&s->out, WR_TAG_COLS, ws.ws_col);
    wr_msg_end(&s->out, at);
}

/* Handle one frame from warren-init. Returns -1 on a protocol error. */
static int on_frame(struct session *s, const struct wr_frame_hdr *h, const uint8_t *p,
                    struct wr_err *err)
{
    switch (h->type) {
    case WR_MSG_OK:
        if (h->id == SPAWN_REQ) {
            uint64_t v;
            if (wr_msg_get_u64(p, h->len, WR_TAG_PROC_ID, &v) < 0 || v > UINT32_MAX)
                return wr_err_set(err, WR_EPROTO, 0, "spawn reply without a process id");
            s->proc_id = (uint32_t)v;
            s->spawned = true;
        }
        return 0;
    case WR_MSG_ERROR:
        if (h->id == SPAWN_REQ) {
            if (wr_error_decode(p, h->len, &s->spawn_errno, s->spawn_msg, sizeof(s->spawn_msg),
                                err) < 0)
                return -1;
            if (s->spawn_errno == 0)
                s->spawn_errno = EIO;
        }
        return 0;
    case WR_MSG_OUTPUT: {
        int fd = (h->flags & WR_FLAG_STDERR) ? STDERR_FILENO : STDOUT_FILENO;
        size_t at;
        /* Blocking write: a slow reader of our stdout slows the sandbox down through the
         * output window, which is the backpressure we want. */
        (void)wr_write_all(fd, p, h->len);
        at = wr_msg_begin(&s->out, WR_MSG_ACK, 0, h->id);
        wr_msg_put_u64(&s->out, WR_TAG_BYTES, h->len);
        wr_msg_end(&s->out, at);
        return 0;
    }
    case WR_MSG_EXIT:
        if (wr_exit_decode(p, h->len, &s->status, err) < 0)
            return -1;
        s->exited = true;
        return 0;
    default:
        return 0; /* replies to close/signal/resize, and anything newer than us */
    }
}

/* Drive the command to its end. Returns the exit status for warren run. */
static int session_run(struct session *s, const struct run_opts *o, struct wr_err *err)
{
    _cleanup_close_ int sfd = -1, tfd = -1;
    sigset_t mask;
    uint8_t buf[WR_CHUNK_SIZE];

    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGWINCH);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (o->timeout_s > 0) {
        struct itimerspec its = {.it_value = {.tv_sec = (time_t)o->timeout_s}};
        tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (tfd >= 0)
            timerfd_settime(tfd, 0, &its, NULL);
    }
    (void)fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK);
    send_spawn(s, o);
    s->stdin_open = true;

    while (!s->exited && s->spawn_errno == 0) {
        struct pollfd p[4] = {
            {.fd = s->fd, .events = POLLIN | (s->out.len ? POLLOUT : 0)},
            {.fd = (s->spawned && s->stdin_open && s->out.len < OUT_HIGH) ? STDIN_FILENO : -1,
             .events = POLLIN},
            {.fd = sfd, .events = POLLIN},
            {.fd = tfd, .events = POLLIN},
        };

        if (poll(p, 4, -1) < 0) {
            if (errno == EINTR)
                continue;
            return wr_err_sys(err, "poll");
        }
        if (p[0].revents & POLLOUT)
            send_frame_flush(s);
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(s->fd, buf, sizeof(buf));
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                return wr_err_set(err, WR_EPROTO, 0, "the sandbox ended unexpectedly");
            if (n > 0) {
                struct wr_frame_hdr h;
                const uint8_t *payload;
                int r;
                wr_reader_feed(&s->in, buf, (size_t)n);
                while ((r = wr_reader_next(&s->in, &h, &payload, err)) == 1)
                    if (on_frame(s, &h, payload, err) < 0)
                        return -1;
                if (r < 0)
                    return -1;
            }
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
            if (n > 0) {
                wr_frame_raw(&s->out, WR_MSG_STDIN, 0, s->proc_id, buf, (size_t)n);
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                s->stdin_open = false;
                send_u64_req(s, WR_MSG_STDIN_CLOSE, CLOSE_REQ, 0, 0);
            }
        }
        if (p[2].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                if (si.ssi_signo == SIGWINCH && o->tty)
                    send_resize(s);
                else if (si.ssi_signo != SIGWINCH && s->spawned)
                    send_u64_req(s, WR_MSG_SIGNAL, SIGNAL_REQ, WR_TAG_SIGNAL, si.ssi_signo);
            }
        }
        if (p[3].revents & POLLIN) {
            uint64_t ticks;
            (void)!read(tfd, &ticks, sizeof(ticks));
            s->timed_out = true;
            if (s->spawned)
                send_u64_req(s, WR_MSG_SIGNAL, SIGNAL_REQ, WR_TAG_SIGNAL, SIGKILL);
        }
        send_frame_flush(s);
    }
    if (s->spawn_errno != 0) {
        cli_tty_restore();
        cli_errorf("run: %s", s->spawn_msg[0] ? s->spawn_msg : strerror(s->spawn_errno));
        if (s->spawn_errno == ENOENT)
            return WR_EXIT_NOTFOUND;
        if (s->spawn_errno == EACCES || s->spawn_errno == ENOEXEC)
            return WR_EXIT_NOEXEC;
        return WR_EXIT_ERROR;
    }
    if (s->timed_out) {
        cli_tty_restore();
        cli_errorf("run: timed out after %llu s", (unsigned long long)o->timeout_s);
        return WR_EXIT_TIMEOUT;
    }
    if (s->status.signal > 0)
        return 128 + (int)s->status.signal;
    return (int)(s->status.exit_code & 0xff);
}

static char *default_rootfs(void)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    char *slash;

    if (n < 0)
        return NULL;
    self[n] = '\0';
    slash = strrchr(self, '/');
    if (slash == NULL)
        return NULL;
    *slash = '\0';
    return xasprintf("%s/images/busybox", self);
}

int cmd_run(int argc, char **argv)
{
    struct run_opts o = {0};
    struct wr_runtime_config cfg = {0};
    struct wr_runtime *rt = NULL;
    struct wr_sandbox *sb = NULL;
    struct wr_err err;
    struct session s = {0};
    _cleanup_free_ char *rootfs_default = NULL;
    _cleanup_free_ const char **layers = NULL;
    char id[32];
    unsigned char rnd[6];
    int status = WR_EXIT_ERROR;

    if (parse_opts(argc, argv, &o) < 0) {
        free(o.layers);
        free(o.env);
        return WR_EXIT_ERROR;
    }
    if (o.rootfs == NULL)
        o.rootfs = rootfs_default = default_rootfs();
    layers = xcalloc(o.n_layers + 1, sizeof(char *));
    layers[0] = o.rootfs;
    for (size_t i = 0; i < o.n_layers; i++)
        layers[i + 1] = o.layers[i];

    /* The sandbox's PID 1 is a clone of this (single-threaded) process that runs warren-init's
     * body in place, one exec fewer than exec'ing the program. */
    cfg.init_main = WR_INIT_MAIN;
    cfg.run_dir = getenv("WARREN_RUN_DIR");
    cfg.init_path = getenv("WARREN_INIT");
    cfg.cgroup_mode = getenv("WARREN_CGROUP");
    cfg.cgroup_v2_root = getenv("WARREN_CGROUP_V2_ROOT");
    wr_runtime_config_from_env(&cfg);

    if (wr_runtime_open(&cfg, &rt, &err) < 0) {
        cli_errorf("run: %s", err.msg);
        goto out;
    }
    (void)wr_runtime_sweep(rt, NULL);

    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
        cli_errorf("run: getrandom: %s", strerror(errno));
        goto out;
    }
    snprintf(id, sizeof(id), "run-%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3], rnd[4],
             rnd[5]);
    {
        struct wr_sandbox_spec spec = {
            .id = id,
            .hostname = o.hostname,
            .layers = layers,
            .n_layers = o.n_layers + 1,
            .cwd = o.cwd,
            .user = o.user,
            .memory_bytes = o.memory,
            .cpu_millis = o.cpu_millis,
            .pids_max = (uint32_t)o.pids,
            .ephemeral = true,
        };
        if (wr_sandbox_create(rt, &spec, &sb, &err) < 0) {
            cli_errorf("run: %s", err.msg);
            goto out;
        }
    }

    s.fd = wr_sandbox_ctl_fd(sb);
    wr_buf_init(&s.out);
    wr_reader_init(&s.in);
    if (o.tty)
        cli_tty_raw();
    status = session_run(&s, &o, &err);
    if (status < 0) {
        cli_tty_restore();
        cli_errorf("run: %s", err.msg);
        status = WR_EXIT_ERROR;
    }
    cli_tty_restore();
    wr_buf_fini(&s.out);
    wr_reader_fini(&s.in);
out:
    if (sb != NULL && wr_sandbox_destroy(sb, &err) < 0) {
        cli_errorf("run: teardown: %s", err.msg);
        if (status == 0)
            status = WR_EXIT_ERROR;
    }
    wr_runtime_close(rt);
    free(o.layers);
    free(o.env);
    return status;
}
