/* SPDX-License-Identifier: Apache-2.0 */
/* `warren exec` and `warren shell`: run a command in a sandbox through warrend and pass its
 * output, input, signals and exit status through. libwarren's warren_exec does the work (see
 * src/lib/exec.c for the two ways it runs a command, and docs/cli.md):
 *  - nothing to send on stdin (stdin is a terminal without -t, /dev/null or closed), or a small
 *    regular file, which is sent inside the request: no input callback, so one streamed
 *    request, no race.
 *  - stdin to stream (a pipe, a socket, or -t): an input callback reading stdin, which the
 *    library calls on its own thread once the output stream is open.
 * A thread of ours waits for signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to the
 * command (warren_signal), SIGWINCH becomes warren_resize with -t. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/parse.h"
#include "../util/xalloc.h"

#define STDIN_INLINE_MAX (1u << 20) /* a regular file up to this size rides in the request */

struct exec_opts {
    const char *verb;
    const char *id;
    json_t *env;
    const char *cwd, *user;
    const char *service; /* --service: inside this Compose service */
    uint64_t timeout;
    bool has_timeout;
    uint32_t cpu_millis;
    uint64_t memory_mb;
    bool usage, usage_cgroup; /* --usage: print what it used; --usage=cgroup: its own cgroup's */
    bool tty, no_stdin;
    char **cmd;            /* argv, or */
    const char *shell_cmd; /* a shell command line */
};

/* What the threads share: the API pid of the command (0 until known), a signal that arrived
 * before it was known, and where to reach it. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long long shared_pid;
static int pending_signal;
static const char *shared_id;
static bool shared_tty;

/* ---- the local terminal --------------------------------------------------------------------- */

static bool term_size(unsigned *rows, unsigned *cols)
{
    struct winsize ws;

    if ((ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) ||
        (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0)) {
        *rows = ws.ws_row;
        *cols = ws.ws_col ? ws.ws_col : 80;
        return true;
    }
    return false;
}

/* Print an error, first putting the terminal back so the line is readable. */
static void exec_errorf(const char *verb, const warren_error *err)
{
    cli_tty_restore();
    cli_errorf("%s: %s", verb, err->message);
}

/* ---- small requests from the signal thread (each on its own connection) --------------------- */

static void send_signal(long long pid, int sig)
{
    warren *w = NULL;
    warren_error err;

    if (warren_connect(NULL, NULL, &w, &err) < 0 || warren_signal(w, shared_id, pid, sig, &err) < 0)
        cli_errorf("signal %d: %s", sig, err.message);
    warren_close(w);
}

static void send_resize(long long pid)
{
    unsigned rows, cols;
    warren *w = NULL;
    warren_error err;

    if (term_size(&rows, &cols) && warren_connect(NULL, NULL, &w, &err) == 0)
        (void)warren_resize(w, shared_id, pid, rows, cols, &err);
    warren_close(w);
}

/* Publish the pid; deliver a signal that was waiting for it. */
static void set_pid(long long pid)
{
    int sig;

    pthread_mutex_lock(&lock);
    shared_pid = pid;
    sig = pending_signal;
    pending_signal = 0;
    pthread_mutex_unlock(&lock);
    if (sig)
        send_signal(pid, sig);
}

static void *signal_thread(void *arg)
{
    const sigset_t *set = arg;
    int interrupts = 0;

    for (;;) {
        long long pid;
        int sig;

        if (sigwait(set, &sig) != 0)
            continue;
        pthread_mutex_lock(&lock);
        pid = shared_pid;
        if (pid == 0 && sig != SIGWINCH)
            pending_signal = sig;
        pthread_mutex_unlock(&lock);
        if (sig == SIGWINCH) {
            if (shared_tty && pid != 0)
                send_resize(pid);
            continue;
        }
        /* A command that ignores the signal must not trap the user: the third interrupt
         * gives up waiting (the command goes on running in the sandbox). */
        if (sig == SIGINT && ++interrupts >= 3) {
            cli_tty_restore();
            cli_errorf("exec: interrupted; the command may still be running");
            _exit(128 + SIGINT);
        }
        if (pid != 0)
            send_signal(pid, sig);
    }
    return NULL;
}

/* ---- the callbacks ------------------------------------------------------------------------- */

struct exec_io {
    int write_errno; /* a write to our stdout or stderr failed: its errno */
    bool raw;        /* -t: the local terminal goes raw once the command runs */
};

static int to_fd(int fd, const void *data, size_t len, struct exec_io *io)
{
    if (wr_write_all(fd, data, len) < 0) {
        io->write_errno = errno;
        return -1;
    }
    return 0;
}

static int on_stdout(const void *data, size_t len, void *ctx)
{
    return to_fd(STDOUT_FILENO, data, len, ctx);
}

static int on_stderr(const void *data, size_t len, void *ctx)
{
    return to_fd(STDERR_FILENO, data, len, ctx);
}

static void on_start(long long pid, void *ctx)
{
    struct exec_io *io = ctx;

    set_pid(pid);
    if (io->raw)
        cli_tty_raw();
}

/* Our stdin, piece by piece, until EOF or until the library says stop (the command ended). */
static long on_stdin(void *buf, size_t cap, int stop_fd, void *ctx)
{
    struct pollfd p[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
                          {.fd = stop_fd, .events = POLLIN}};

    for (;;) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (p[1].revents != 0)
            return 0;
        ssize_t n = read(STDIN_FILENO, buf, cap);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        return n < 0 ? -1 : (long)n; /* an error ends input just the same */
    }
}

static int exit_status_of(const warren_exit *how)
{
    if (how->timed_out)
        return WR_EXIT_TIMEOUT;
    if (how->signal > 0)
        return 128 + (how->signal & 0x7f);
    return how->exit_code & 0xff;
}

/* ---- the verb ------------------------------------------------------------------------------- */

/* stdin has nothing to stream: closed, /dev/null, or a terminal without -t. */
static bool stdin_is_empty(const struct exec_opts *o)
{
    struct stat st;

    if (o->no_stdin || fstat(STDIN_FILENO, &st) < 0)
        return true;
    if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3))
        return true;
    return !o->tty && isatty(STDIN_FILENO);
}

/* A small regular file on stdin is read whole and sent in the request (no race). Returns the
 * bytes (caller frees), NULL when stdin is not such a file; *n gets the length. */
static char *stdin_inline(size_t *n)
{
    struct stat st;
    char *buf;
    ssize_t r;

    if (fstat(STDIN_FILENO, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > STDIN_INLINE_MAX)
        return NULL;
    buf = xmalloc(STDIN_INLINE_MAX + 1);
    r = wr_read_all(STDIN_FILENO, buf, STDIN_INLINE_MAX + 1);
    if (r < 0 || r > STDIN_INLINE_MAX) {
        free(buf); /* grew while we read, or unreadable: stream it instead */
        if (r > 0)
            (void)lseek(STDIN_FILENO, -(off_t)r, SEEK_CUR);
        return NULL;
    }
    *n = (size_t)r;
    return buf;
}

static int exec_run(struct exec_opts *o)
{
    static sigset_t set; /* read by the signal thread for the life of the process */
    _cleanup_free_ const char **envv = NULL;
    _cleanup_free_ char *in = NULL;
    struct exec_io io = {.raw = o->tty};
    warren_exec_opts x = {
        .on_stdout = on_stdout, .on_stderr = on_stderr, .on_start = on_start, .ctx = &io};
    warren_exit how;
    warren_error err;
    const char *k;
    json_t *v;
    size_t n = 0, in_len = 0;
    warren *w;
    pthread_t t;
    int r;

    shared_id = o->id;
    shared_tty = o->tty;
    if (o->tty && json_object_get(o->env, "TERM") == NULL && getenv("TERM") != NULL)
        json_object_set_new(o->env, "TERM", json_string(getenv("TERM")));
    envv = xcalloc(json_object_size(o->env) + 1, sizeof(*envv));
    json_object_foreach(o->env, k, v) envv[n++] = xasprintf("%s=%s", k, json_string_value(v));
    if ((w = cli_warren_or_complain(o->verb)) == NULL) {
        for (size_t i = 0; i < n; i++)
            free((char *)envv[i]);
        return WR_EXIT_ERROR;
    }
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGQUIT);
    sigaddset(&set, SIGWINCH);
    /* Blocked before any thread starts, so every thread (the library's input thread too)
     * inherits the mask and only the signal thread takes them. */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (pthread_create(&t, NULL, signal_thread, &set) == 0)
        (void)pthread_detach(t);

    x.argv = o->shell_cmd == NULL ? (const char *const *)o->cmd : NULL;
    x.shell = o->shell_cmd;
    x.env = envv;
    x.cwd = o->cwd;
    x.user = o->user;
    x.service = o->service;
    x.timeout_s = o->has_timeout ? (int64_t)o->timeout : 0;
    x.cpu_millis = o->cpu_millis;
    x.memory_mb = (long long)o->memory_mb;
    x.usage_cgroup = o->usage_cgroup;
    if (o->tty) {
        x.pty = 1;
        (void)term_size(&x.rows, &x.cols);
    }
    if (!o->tty && stdin_is_empty(o)) {
        /* nothing to send */
    } else if (!o->tty && (in = stdin_inline(&in_len)) != NULL) {
        x.stdin_data = in;
        x.stdin_len = in_len;
    } else if (!o->no_stdin) {
        x.on_stdin = on_stdin;
    }
    r = warren_exec(w, o->id, &x, &how, &err);
    warren_close(w);
    for (size_t i = 0; i < n; i++)
        free((char *)envv[i]);
    cli_tty_restore();
    if (r < 0) {
        if (io.write_errno != 0)
            cli_errorf("%s: write output: %s", o->verb, strerror(io.write_errno));
        else
            exec_errorf(o->verb, &err);
        return WR_EXIT_ERROR;
    }
    if (how.timed_out)
        cli_errorf("%s: timed out after %llu s", o->verb, (unsigned long long)o->timeout);
    if (o->usage && how.has_usage)
        fprintf(stderr, "usage: cpu %.3f s, memory peak %lld bytes, wall %.3f s (%s)\n",
                how.cpu_seconds, how.memory_peak_bytes, how.wall_seconds,
                how.usage_cgroup ? "cgroup" : "rusage");
    return exit_status_of(&how);
}

static void exec_usage(FILE *f)
{
    fprintf(f,
            "usage: warren exec ID [options] [--] CMD [ARG...]\n\n"
            "Run CMD in sandbox ID; its stdout, stderr and exit status pass through (128+N if\n"
            "it dies of signal N, 124 if --timeout expired, 125 if warren failed).\n\n"
            "  --env K=V        set an environment variable (repeatable)\n"
            "  --cwd DIR        working directory\n"
            "  --user USER      run as USER (name or uid)\n"
            "  --service NAME   run it inside Compose service NAME (its root, environment,\n"
            "                   working directory and user; `warren services` lists them)\n"
            "  --timeout SECS   kill the command after SECS seconds (0: no limit)\n"
            "  --cpus N         limit it to N CPUs (at most the sandbox's; a cgroup of its own)\n"
            "  --memory SIZE    limit its memory, e.g. 256M (at most the sandbox's)\n"
            "  --usage[=cgroup] print what it used to stderr at its end (cgroup: measured in\n"
            "                   a cgroup of its own, every process it started counted)\n"
            "  -t, --tty        run CMD on a terminal (raw local terminal, resize follows)\n"
            "  -n, --no-stdin   do not forward stdin (as if it were /dev/null)\n");
}

/* Options shared by exec and shell; shell has no -t (always) and no command. */
static int parse_exec(const char *verb, int argc, char **argv, struct exec_opts *o, bool shell)
{
    enum { O_ENV = 256, O_CWD, O_USER, O_TIMEOUT, O_CPUS, O_MEMORY, O_USAGE, O_SERVICE };
    static const struct option longopts[] = {
        {"env", required_argument, NULL, O_ENV},
        {"cwd", required_argument, NULL, O_CWD},
        {"user", required_argument, NULL, O_USER},
        {"service", required_argument, NULL, O_SERVICE},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"cpus", required_argument, NULL, O_CPUS},
        {"memory", required_argument, NULL, O_MEMORY},
        {"usage", optional_argument, NULL, O_USAGE},
        {"tty", no_argument, NULL, 't'},
        {"no-stdin", no_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct wr_err err;
    int c;

    o->verb = verb;
    opterr = 0;
    for (;;) {
        c = getopt_long(argc, argv, shell ? "+h" : "+tnh", longopts, NULL);
        if (c == -1) {
            /* The id may come before or among the options: take it and go on. */
            if (o->id == NULL && optind < argc && strcmp(argv[optind - 1], "--") != 0) {
                o->id = argv[optind++];
                continue;
            }
            break;
        }
        switch (c) {
        case O_ENV:
            if (cli_kv_set(verb, "--env", o->env, optarg) < 0)
                return CLI_EXIT_USAGE;
            break;
        case O_CWD:
            o->cwd = optarg;
            break;
        case O_USER:
            o->user = optarg;
            break;
        case O_SERVICE:
            if (!cli_check_service(verb, optarg))
                return CLI_EXIT_USAGE;
            o->service = optarg;
            break;
        case O_TIMEOUT:
            if (wr_parse_uint(optarg, 86400ull * 365, &o->timeout, &err) < 0) {
                cli_errorf("%s: --timeout: %s", verb, err.msg);
                return CLI_EXIT_USAGE;
            }
            o->has_timeout = true;
            break;
        case O_CPUS:
            if (shell || wr_parse_cpus(optarg, &o->cpu_millis, &err) < 0) {
                cli_errorf("%s: --cpus: %s", verb, shell ? "not for a shell" : err.msg);
                return CLI_EXIT_USAGE;
            }
            break;
        case O_MEMORY: {
            uint64_t v;
            if (shell || wr_parse_size(optarg, &v, &err) < 0) {
                cli_errorf("%s: --memory: %s", verb, shell ? "not for a shell" : err.msg);
                return CLI_EXIT_USAGE;
            }
            o->memory_mb = (v + (1 << 20) - 1) >> 20;
            break;
        }
        case O_USAGE:
            if (optarg != NULL && strcmp(optarg, "cgroup") != 0) {
                cli_errorf("%s: --usage takes nothing or `cgroup`", verb);
                return CLI_EXIT_USAGE;
            }
            o->usage = true;
            o->usage_cgroup = optarg != NULL;
            break;
        case 't':
            if (shell)
                return cli_bad_option(verb, argv);
            o->tty = true;
            break;
        case 'n':
            if (shell)
                return cli_bad_option(verb, argv);
            o->no_stdin = true;
            break;
        case 'h':
            if (shell)
                printf("usage: warren shell ID [--env K=V]... [--cwd DIR] [--user USER]\n"
                       "                [--service NAME]\n\n"
                       "An interactive login shell in sandbox ID: $SHELL if set, else bash if\n"
                       "installed, else /bin/sh. Same as `warren exec ID -t` with that shell.\n"
                       "--service NAME: inside that Compose service (`warren services`).\n");
            else
                exec_usage(stdout);
            return 0;
        default:
            return cli_bad_option(verb, argv);
        }
    }
    if (o->id == NULL) {
        cli_errorf("%s: no sandbox id given (see `warren %s --help`)", verb, verb);
        return CLI_EXIT_USAGE;
    }
    if (!cli_check_id(verb, o->id))
        return CLI_EXIT_USAGE;
    if (shell && optind < argc) {
        cli_errorf("%s: unexpected argument `%s` (use `warren exec -t` to run a command)", verb,
                   argv[optind]);
        return CLI_EXIT_USAGE;
    }
    if (!shell && optind >= argc) {
        cli_errorf("%s: no command given (usage: warren exec ID [options] -- CMD...)", verb);
        return CLI_EXIT_USAGE;
    }
    o->cmd = argv + optind;
    return -1;
}

int cmd_exec(int argc, char **argv)
{
    struct exec_opts o = {.env = json_object()};
    int rc = parse_exec("exec", argc, argv, &o, false);

    if (rc < 0)
        rc = exec_run(&o);
    json_decref(o.env);
    return rc;
}

int cmd_shell(int argc, char **argv)
{
    struct exec_opts o = {.env = json_object()};
    int rc = parse_exec("shell", argc, argv, &o, true);

    if (rc < 0) {
        o.tty = true;
        o.shell_cmd = "[ -n \"$SHELL\" ] && [ -x \"$SHELL\" ] && exec \"$SHELL\" -l; "
                      "[ -x /bin/bash ] && exec /bin/bash -l; exec /bin/sh -l";
        rc = exec_run(&o);
    }
    json_decref(o.env);
    return rc;
}
