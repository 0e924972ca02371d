/* SPDX-License-Identifier: Apache-2.0 */
/* `warren exec` and `warren shell`: run a command in a sandbox through warrend and pass its
 * output, input, signals and exit status through.
 *
 * Two ways, chosen by what there is to forward (see docs/cli.md):
 *  - nothing to send on stdin (stdin is a terminal without -t, /dev/null or closed, or a
 *    regular file, which is sent inside the request): one POST exec with mode=stream. The
 *    command's output streams back as NDJSON from its first byte; no race.
 *  - stdin to stream (a pipe, a socket, or -t): POST exec with mode=background, then GET
 *    .../attach for the output on one connection, and once that stream is open a second thread
 *    sends stdin as a chunked POST .../stdin (each read is a chunk, EOF ends the body and is
 *    followed by POST .../stdin/close). attach first replays the output kept since the start
 *    (the last 1 MiB), so the gap between start and attach loses nothing.
 * A third thread waits for signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to the
 * command (POST .../signal), SIGWINCH becomes POST .../resize with -t. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../util/b64.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/parse.h"
#include "../util/xalloc.h"
#include "client.h"

#define STDIN_INLINE_MAX (1u << 20) /* a regular file up to this size rides in the request */
#define IO_SIZE          (64 * 1024)

struct exec_opts {
    const char *verb;
    const char *id;
    json_t *env;
    const char *cwd, *user;
    uint64_t timeout;
    bool has_timeout;
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
static void exec_errorf(const char *verb, const struct wr_err *err)
{
    cli_tty_restore();
    cli_errorf("%s: %s", verb, err->msg);
}

/* ---- small requests from any thread (each on its own connection) ---------------------------- */

static int post_json(const char *target, json_t *body, struct wr_err *err)
{
    struct cli_http *c = NULL;
    int r = cli_connect(&c, err);

    if (r == 0)
        r = cli_api(c, "POST", target, body, NULL, err);
    cli_http_close(c);
    json_decref(body);
    return r < 0 ? -1 : 0;
}

static void send_signal(long long pid, int sig)
{
    _cleanup_free_ char *t = xasprintf("/v1/sandboxes/%s/processes/%lld/signal", shared_id, pid);
    struct wr_err err;

    if (post_json(t, json_pack("{s:i}", "signal", sig), &err) < 0)
        cli_errorf("signal %d: %s", sig, err.msg);
}

static void send_resize(long long pid)
{
    _cleanup_free_ char *t = xasprintf("/v1/sandboxes/%s/processes/%lld/resize", shared_id, pid);
    unsigned rows, cols;
    struct wr_err err;

    if (term_size(&rows, &cols))
        (void)post_json(t, json_pack("{s:i, s:i}", "rows", rows, "cols", cols), &err);
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

/* ---- the output stream ---------------------------------------------------------------------- */

struct events {
    const char *verb;
    struct wr_buf line;
    bool exited, timed_out, stdin_started;
    int status; /* the exit status to pass on */
    long long pid;
    void (*on_open)(struct events *ev); /* the stream is established (attach) */
};

static int exit_status_of(const json_t *j, bool *timed_out)
{
    const json_t *sig = json_object_get(j, "signal");

    *timed_out = json_is_true(json_object_get(j, "timed_out"));
    if (*timed_out)
        return WR_EXIT_TIMEOUT;
    if (json_is_integer(sig) && json_integer_value(sig) > 0)
        return 128 + (int)(json_integer_value(sig) & 0x7f);
    return (int)(json_integer_value(json_object_get(j, "exit_code")) & 0xff);
}

static int on_event(struct events *ev, const char *line, size_t len, struct wr_err *err)
{
    json_error_t je;
    json_t *j = json_loadb(line, len, 0, &je);
    const char *type = json_string_value(json_object_get(j, "type"));
    int r = 0;

    if (j == NULL || type == NULL) {
        json_decref(j);
        return wr_err_set(err, WR_EPROTO, 0, "bad event from warrend: %s", j ? "no type" : je.text);
    }
    if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
        const char *data = json_string_value(json_object_get(j, "data"));
        size_t n = json_string_length(json_object_get(j, "data"));
        _cleanup_free_ uint8_t *bytes = xmalloc(WR_B64_DECODED_MAX(n));
        ssize_t m = data ? wr_b64_decode(data, n, WR_B64_LENIENT, bytes) : -1;
        if (m < 0)
            r = wr_err_set(err, WR_EPROTO, 0, "%s event: data is not base64", type);
        else if (m > 0 &&
                 wr_write_all(type[3] == 'o' ? STDOUT_FILENO : STDERR_FILENO, bytes, (size_t)m) < 0)
            r = wr_err_sys(err, "write %s", type);
    } else if (strcmp(type, "start") == 0) {
        ev->pid = (long long)json_integer_value(json_object_get(j, "pid"));
        if (ev->pid > 0)
            set_pid(ev->pid);
    } else if (strcmp(type, "exit") == 0) {
        ev->exited = true;
        ev->status = exit_status_of(j, &ev->timed_out);
    } else if (strcmp(type, "error") == 0) {
        const char *code = json_string_value(json_object_get(j, "code"));
        const char *msg = json_string_value(json_object_get(j, "message"));
        r = wr_err_set(err, WR_EPROTO, 0, "%s (%s)", msg ? msg : "error", code ? code : "error");
    }
    json_decref(j);
    return r;
}

static int on_line(void *ctx, const char *line, size_t n, struct wr_err *err)
{
    return on_event(ctx, line, n, err);
}

/* NDJSON: the body's lines as they arrive. */
static int on_stream_body(const char *data, size_t len, void *ctx, struct wr_err *err)
{
    struct events *ev = ctx;
    return cli_ndjson_feed(&ev->line, data, len, on_line, ev, err);
}

static int on_stream_headers(const struct cli_http_resp *resp, void *ctx, struct wr_err *err)
{
    struct events *ev = ctx;

    if (resp->status >= 200 && resp->status <= 299 && ev->on_open != NULL)
        ev->on_open(ev);
    return 0;
}

/* Run req and feed its NDJSON answer to ev. Returns 0 (ev->exited says if the end was seen),
 * or -1 with err. */
static int run_stream(struct cli_http *c, struct cli_http_req *req, struct events *ev,
                      struct wr_err *err)
{
    struct cli_http_resp resp;
    int r;

    req->accept = "application/x-ndjson";
    req->on_body = on_stream_body;
    req->on_headers = on_stream_headers;
    req->ctx = ev;
    r = cli_http_request(c, req, &resp, err);
    if (r == 0 && (resp.status < 200 || resp.status > 299))
        r = cli_http_error(&resp, err);
    else if (r == 0 && ev->line.len > 0 && !ev->exited)
        r = on_event(ev, wr_buf_str(&ev->line), ev->line.len,
                     err); /* a last line without newline */
    cli_http_resp_fini(&resp);
    wr_buf_fini(&ev->line);
    return r;
}

/* After the output stream ended without an exit event: wait for the command itself. */
static int wait_status(struct cli_http *c, const char *id, long long pid, struct events *ev,
                       struct wr_err *err)
{
    _cleanup_free_ char *t = xasprintf("/v1/sandboxes/%s/processes/%lld/wait", id, pid);
    json_t *p = NULL;

    if (cli_api(c, "GET", t, NULL, &p, err) < 0)
        return -1;
    ev->exited = true;
    ev->status = exit_status_of(p, &ev->timed_out);
    json_decref(p);
    return 0;
}

/* ---- stdin ---------------------------------------------------------------------------------- */

static void *stdin_thread(void *arg)
{
    long long pid = *(long long *)arg;
    _cleanup_free_ char *target =
        xasprintf("/v1/sandboxes/%s/processes/%lld/stdin", shared_id, pid);
    _cleanup_free_ char *close_target = xasprintf("%s/close", target);
    _cleanup_free_ char *buf = xmalloc(IO_SIZE);
    struct cli_http_req req = {.method = "POST",
                               .target = target,
                               .content_type = "application/octet-stream",
                               .body_kind = CLI_BODY_STREAM};
    struct cli_http_resp resp = {0};
    struct cli_http *c = NULL;
    struct wr_err err;
    int r;

    if (cli_connect(&c, &err) < 0 || cli_http_begin(c, &req, &err) < 0)
        goto fail;
    for (;;) {
        ssize_t n = read(STDIN_FILENO, buf, IO_SIZE);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* EOF, or an error that ends input just the same */
        if (cli_http_chunk(c, buf, (size_t)n, &err) < 0)
            break; /* the answer (read below) says why */
    }
    (void)cli_http_end(c, &err);
    r = cli_http_response(c, &req, &resp, &err);
    if (r < 0)
        goto fail;
    /* 409: the command has ended; its exit is on its way through attach. */
    if ((resp.status < 200 || resp.status > 299) && resp.status != 409) {
        cli_http_error(&resp, &err);
        goto fail;
    }
    cli_http_resp_fini(&resp);
    if (cli_api(c, "POST", close_target, NULL, NULL, &err) < 0 && err.kind != WR_ECONFLICT &&
        err.kind != WR_ENOTFOUND)
        goto fail;
    cli_http_close(c);
    return NULL;
fail:
    cli_http_resp_fini(&resp);
    cli_http_close(c);
    cli_tty_restore();
    cli_errorf("exec: stdin: %s", err.msg);
    return NULL;
}

static void start_stdin(struct events *ev)
{
    static long long pid;
    pthread_t t;

    if (ev->stdin_started)
        return;
    ev->stdin_started = true;
    pid = ev->pid;
    if (pthread_create(&t, NULL, stdin_thread, &pid) != 0) {
        cli_errorf("exec: cannot start the stdin thread");
        return;
    }
    (void)pthread_detach(t);
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

static bool stdin_is_small_file(void)
{
    struct stat st;

    return fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= STDIN_INLINE_MAX;
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

static json_t *exec_body(const struct exec_opts *o, const char *mode)
{
    json_t *b = json_object();

    if (o->shell_cmd != NULL) {
        json_object_set_new(b, "cmd", json_string(o->shell_cmd));
    } else {
        json_t *a = json_array();
        for (char **p = o->cmd; *p; p++)
            json_array_append_new(a, json_string(*p));
        json_object_set_new(b, "cmd", a);
    }
    if (json_object_size(o->env))
        json_object_set(b, "env", o->env);
    if (o->cwd)
        json_object_set_new(b, "cwd", json_string(o->cwd));
    if (o->user)
        json_object_set_new(b, "user", json_string(o->user));
    if (o->has_timeout)
        json_object_set_new(b, "timeout", json_integer((json_int_t)o->timeout));
    json_object_set_new(b, "mode", json_string(mode));
    json_object_set_new(b, "encoding", json_string("base64"));
    if (o->tty) {
        unsigned rows = 24, cols = 80;
        (void)term_size(&rows, &cols);
        json_object_set_new(b, "pty", json_true());
        json_object_set_new(b, "rows", json_integer(rows));
        json_object_set_new(b, "cols", json_integer(cols));
    }
    return b;
}

static int finish(const struct exec_opts *o, struct events *ev)
{
    cli_tty_restore();
    if (ev->timed_out)
        cli_errorf("%s: timed out after %llu s", o->verb, (unsigned long long)o->timeout);
    return ev->status;
}

/* mode=stream: one request, output from the first byte. */
static int exec_stream(const struct exec_opts *o, struct cli_http *c, const char *target)
{
    struct events ev = {.verb = o->verb};
    json_t *body = exec_body(o, "stream");
    _cleanup_free_ char *text = NULL, *in = NULL, *in64 = NULL;
    size_t in_len = 0;
    struct wr_err err;

    if (!o->no_stdin && (in = stdin_inline(&in_len)) != NULL) {
        in64 = xmalloc(WR_B64_ENCODED_LEN(in_len) + 1);
        (void)wr_b64_encode(in, in_len, in64);
        json_object_set_new(body, "stdin", json_string(in64));
        json_object_set_new(body, "stdin_encoding", json_string("base64"));
    }
    text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    struct cli_http_req req = {.method = "POST",
                               .target = target,
                               .content_type = "application/json",
                               .body_kind = CLI_BODY_MEM,
                               .body = text,
                               .body_len = strlen(text)};
    if (run_stream(c, &req, &ev, &err) < 0) {
        exec_errorf(o->verb, &err);
        return WR_EXIT_ERROR;
    }
    if (!ev.exited && ev.pid > 0 && wait_status(c, o->id, ev.pid, &ev, &err) < 0) {
        exec_errorf(o->verb, &err);
        return WR_EXIT_ERROR;
    }
    if (!ev.exited) {
        cli_tty_restore();
        cli_errorf("%s: the output stream ended without the command's exit", o->verb);
        return WR_EXIT_ERROR;
    }
    return finish(o, &ev);
}

/* mode=background, then attach and stream stdin. */
static int exec_background(const struct exec_opts *o, struct cli_http *c, const char *target)
{
    struct events ev = {.verb = o->verb, .on_open = start_stdin};
    json_t *body = exec_body(o, "background"), *proc = NULL;
    _cleanup_free_ char *attach = NULL, *release = NULL;
    struct wr_err err;
    int r;

    r = cli_api(c, "POST", target, body, &proc, &err);
    json_decref(body);
    if (r < 0) {
        exec_errorf(o->verb, &err);
        return WR_EXIT_ERROR;
    }
    ev.pid = (long long)json_integer_value(json_object_get(proc, "pid"));
    json_decref(proc);
    if (ev.pid <= 0) {
        cli_errorf("%s: warrend answered without a process id", o->verb);
        return WR_EXIT_ERROR;
    }
    set_pid(ev.pid);
    if (o->tty)
        cli_tty_raw();

    /* attach takes its own encoding; the exec request's does not carry over. */
    attach = xasprintf("/v1/sandboxes/%s/processes/%lld/attach?encoding=base64", o->id, ev.pid);
    struct cli_http_req req = {.method = "GET", .target = attach};
    r = run_stream(c, &req, &ev, &err);
    if (r < 0 && err.kind != WR_ENOTFOUND && err.kind != WR_ECONFLICT && err.kind != WR_EPROTO) {
        exec_errorf(o->verb, &err);
        return WR_EXIT_ERROR;
    }
    if (!ev.stdin_started)
        start_stdin(&ev); /* attach failed (the command may be gone); its stdin still gets EOF */
    if (!ev.exited && wait_status(c, o->id, ev.pid, &ev, &err) < 0) {
        exec_errorf(o->verb, &err);
        return WR_EXIT_ERROR;
    }
    /* Background processes stay listed until released; this one was ours. */
    release = xasprintf("/v1/sandboxes/%s/processes/%lld", o->id, ev.pid);
    (void)cli_api(c, "DELETE", release, NULL, NULL, &err);
    return finish(o, &ev);
}

static int exec_run(struct exec_opts *o)
{
    static sigset_t set; /* read by the signal thread for the life of the process */
    _cleanup_free_ char *target = xasprintf("/v1/sandboxes/%s/exec", o->id);
    struct cli_http *c = NULL;
    struct wr_err err;
    pthread_t t;
    int status;

    shared_id = o->id;
    shared_tty = o->tty;
    if (o->tty && json_object_get(o->env, "TERM") == NULL && getenv("TERM") != NULL)
        json_object_set_new(o->env, "TERM", json_string(getenv("TERM")));
    if (cli_connect(&c, &err) < 0) {
        cli_errorf("%s: %s", o->verb, err.msg);
        return WR_EXIT_ERROR;
    }
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGQUIT);
    sigaddset(&set, SIGWINCH);
    /* Blocked before any thread starts, so every thread inherits the mask and only the signal
     * thread takes them. */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (pthread_create(&t, NULL, signal_thread, &set) == 0)
        (void)pthread_detach(t);

    if (!o->tty && (stdin_is_empty(o) || stdin_is_small_file()))
        status = exec_stream(o, c, target);
    else
        status = exec_background(o, c, target);
    cli_http_close(c);
    return status;
}

static void exec_usage(FILE *f)
{
    fprintf(f, "usage: warren exec ID [options] [--] CMD [ARG...]\n\n"
               "Run CMD in sandbox ID; its stdout, stderr and exit status pass through (128+N if\n"
               "it dies of signal N, 124 if --timeout expired, 125 if warren failed).\n\n"
               "  --env K=V        set an environment variable (repeatable)\n"
               "  --cwd DIR        working directory\n"
               "  --user USER      run as USER (name or uid)\n"
               "  --timeout SECS   kill the command after SECS seconds (0: no limit)\n"
               "  -t, --tty        run CMD on a terminal (raw local terminal, resize follows)\n"
               "  -n, --no-stdin   do not forward stdin (as if it were /dev/null)\n");
}

/* Options shared by exec and shell; shell has no -t (always) and no command. */
static int parse_exec(const char *verb, int argc, char **argv, struct exec_opts *o, bool shell)
{
    enum { O_ENV = 256, O_CWD, O_USER, O_TIMEOUT };
    static const struct option longopts[] = {
        {"env", required_argument, NULL, O_ENV},   {"cwd", required_argument, NULL, O_CWD},
        {"user", required_argument, NULL, O_USER}, {"timeout", required_argument, NULL, O_TIMEOUT},
        {"tty", no_argument, NULL, 't'},           {"no-stdin", no_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
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
        case O_TIMEOUT:
            if (wr_parse_uint(optarg, 86400ull * 365, &o->timeout, &err) < 0) {
                cli_errorf("%s: --timeout: %s", verb, err.msg);
                return CLI_EXIT_USAGE;
            }
            o->has_timeout = true;
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
                printf("usage: warren shell ID [--env K=V]... [--cwd DIR] [--user USER]\n\n"
                       "An interactive login shell in sandbox ID: $SHELL if set, else bash if\n"
                       "installed, else /bin/sh. Same as `warren exec ID -t` with that shell.\n");
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
