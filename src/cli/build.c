/* SPDX-License-Identifier: Apache-2.0 */
/* `warren template build -f Dockerfile [--name NAME] [--replace] [--shared] [--runtime R]
 * [CONTEXT_DIR]`: a template from the Dockerfile subset (docs/templates.md).
 *
 * The build context (CONTEXT_DIR, default the Dockerfile's directory) goes to warrend as a tar
 * made by the system's `tar -C DIR -cf - .`, its output piped into a chunked POST
 * /v1/templates/build; a Dockerfile outside the context is added to the archive under its
 * file name. The answer's NDJSON events are printed as they come: the steps, their output
 * (stdout to stdout, stderr to stderr), and the end. A failed step's exit code is warren's. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/xalloc.h"
#include "client.h"

#define VERB         "template build"
#define IO_SIZE      (64 * 1024)
#define NAME_MAX_LEN 64

extern char **environ;

struct build_events {
    bool json;
    struct wr_buf line;
    bool mid_line; /* stdout output so far did not end with a newline */
    /* the end */
    bool done, failed;
    char *tpl_name;
    long long layers;
    long long fail_step, fail_line, exit_code;
    char *fail_msg;
    /* instruction text of each step seen, to drop the server's "step S (line L, TEXT): "
     * prefix from an error's message */
    char **steps;
    size_t nsteps;
};

static void events_fini(struct build_events *ev)
{
    wr_buf_fini(&ev->line);
    free(ev->tpl_name);
    free(ev->fail_msg);
    for (size_t i = 0; i < ev->nsteps; i++)
        free(ev->steps[i]);
    free(ev->steps);
}

static void write_out(struct build_events *ev, FILE *f, const char *s, size_t n)
{
    if (n == 0)
        return;
    if (f == stderr)
        fflush(stdout);
    fwrite(s, 1, n, f);
    fflush(f);
    if (f == stdout)
        ev->mid_line = s[n - 1] != '\n';
}

static void end_line(struct build_events *ev)
{
    if (ev->mid_line)
        write_out(ev, stdout, "\n", 1);
}

static long long int_of(const json_t *j, const char *key, long long dflt)
{
    const json_t *v = json_object_get(j, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

static void on_step_event(struct build_events *ev, const json_t *j)
{
    long long step = int_of(j, "step", 0);
    const char *instr = json_string_value(json_object_get(j, "instruction"));

    if (step > 0 && step < 100000 && instr != NULL) {
        if ((size_t)step > ev->nsteps) {
            ev->steps = xrealloc(ev->steps, (size_t)step * sizeof(char *));
            memset(ev->steps + ev->nsteps, 0, ((size_t)step - ev->nsteps) * sizeof(char *));
            ev->nsteps = (size_t)step;
        }
        free(ev->steps[step - 1]);
        ev->steps[step - 1] = xstrdup(instr);
    }
    if (ev->json)
        return;
    end_line(ev);
    printf("Step %lld/%lld (line %lld): %s%s\n", step, int_of(j, "of", 0), int_of(j, "line", 0),
           instr ? instr : "?", json_is_true(json_object_get(j, "cached")) ? " (cached)" : "");
    fflush(stdout);
}

static void on_error_event(struct build_events *ev, const json_t *j)
{
    const char *msg = json_string_value(json_object_get(j, "message"));
    const char *code = json_string_value(json_object_get(j, "code"));

    ev->failed = true;
    ev->fail_step = int_of(j, "step", 0);
    ev->fail_line = int_of(j, "line", 0);
    ev->exit_code = int_of(j, "exit_code", 0);
    if (msg == NULL)
        msg = code ? code : "unknown error";
    if (ev->fail_step > 0 && (size_t)ev->fail_step <= ev->nsteps &&
        ev->steps[ev->fail_step - 1] != NULL) {
        _cleanup_free_ char *prefix = xasprintf("step %lld (line %lld, %s): ", ev->fail_step,
                                                ev->fail_line, ev->steps[ev->fail_step - 1]);
        if (strncmp(msg, prefix, strlen(prefix)) == 0 && msg[strlen(prefix)] != '\0')
            msg += strlen(prefix);
    }
    ev->fail_msg = xstrdup(msg);
}

static int on_event(struct build_events *ev, const char *line, size_t len, struct wr_err *err)
{
    json_error_t je;
    json_t *j = json_loadb(line, len, 0, &je);
    const char *type = json_string_value(json_object_get(j, "type"));

    if (j == NULL || type == NULL) {
        json_decref(j);
        return wr_err_set(err, WR_EPROTO, 0, "bad event from warrend: %s", j ? "no type" : je.text);
    }
    if (ev->json) {
        write_out(ev, stdout, line, len);
        write_out(ev, stdout, "\n", 1);
    }
    if (strcmp(type, "step") == 0) {
        on_step_event(ev, j);
    } else if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
        const json_t *d = json_object_get(j, "data");
        if (!ev->json && json_is_string(d))
            write_out(ev, type[3] == 'o' ? stdout : stderr, json_string_value(d),
                      json_string_length(d));
    } else if (strcmp(type, "done") == 0) {
        const json_t *t = json_object_get(j, "template");
        const char *name = json_string_value(json_object_get(t, "name"));
        ev->done = true;
        ev->tpl_name = xstrdup(name ? name : "?");
        ev->layers = int_of(t, "layers", 0);
    } else if (strcmp(type, "error") == 0) {
        on_error_event(ev, j);
    }
    json_decref(j);
    return 0;
}

static int on_line(void *ctx, const char *line, size_t n, struct wr_err *err)
{
    return on_event(ctx, line, n, err);
}

/* NDJSON: the body's lines as they arrive. */
static int on_body(const char *data, size_t len, void *ctx, struct wr_err *err)
{
    struct build_events *ev = ctx;
    return cli_ndjson_feed(&ev->line, data, len, on_line, ev, err);
}

/* The default template name: the directory's name, lowercased, anything but [a-z0-9._-] made
 * a '-', runs of '-' squeezed, no leading '.' or '-', at most 64 bytes. NULL if nothing is
 * left. */
static char *name_of_dir(const char *dir)
{
    _cleanup_free_ char *copy = xstrdup(dir);
    const char *base = basename(copy);
    char *out = xmalloc(NAME_MAX_LEN + 1);
    size_t n = 0;

    for (const char *s = base; *s && n < NAME_MAX_LEN; s++) {
        char ch = *s;
        if (ch >= 'A' && ch <= 'Z')
            ch = (char)(ch - 'A' + 'a');
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
              ch == '-'))
            ch = '-';
        if ((n == 0 && (ch == '.' || ch == '-')) || (ch == '-' && out[n - 1] == '-'))
            continue;
        out[n++] = ch;
    }
    while (n > 0 && out[n - 1] == '-')
        n--;
    out[n] = '\0';
    if (n == 0 || strncmp(out, "snap-", 5) == 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* The path of `path` inside the directory `dir` (both real paths), or NULL if it is not in it. */
static const char *inside(const char *path, const char *dir)
{
    size_t n = strlen(dir);

    if (strcmp(dir, "/") == 0)
        return path + 1;
    if (strncmp(path, dir, n) == 0 && path[n] == '/' && path[n + 1] != '\0')
        return path + n + 1;
    return NULL;
}

/* Start `tar -C ctx -cf - . [-C dfdir dfname]` with its stdout on a pipe; *out gets the pipe's
 * read end. Returns the pid, or -1 (printed). */
static pid_t start_tar(const char *ctx, const char *dfdir, const char *dfname, int *out)
{
    const char *argv[] = {"tar", "-C", ctx, "-cf", "-", ".", NULL, NULL, NULL, NULL};
    posix_spawn_file_actions_t fa;
    int p[2], r;
    pid_t pid;

    if (dfname != NULL) {
        argv[6] = "-C";
        argv[7] = dfdir;
        argv[8] = dfname;
    }
    if (pipe2(p, O_CLOEXEC) < 0) {
        cli_errorf(VERB ": pipe: %s", strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
    r = posix_spawnp(&pid, "tar", &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (r != 0) {
        close(p[0]);
        if (r == ENOENT)
            cli_errorf(VERB ": `tar` is not installed (it makes the build context's archive): "
                            "install tar, or build without a context through the API");
        else
            cli_errorf(VERB ": cannot run `tar` to make the build context: %s", strerror(r));
        return -1;
    }
    *out = p[0];
    return pid;
}

/* Wait for tar; true when it exited 0 (else printed). */
static bool tar_ok(pid_t pid, bool quiet)
{
    int st;

    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return false;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return true;
    if (!quiet) {
        if (WIFEXITED(st))
            cli_errorf(VERB ": `tar` failed (exit status %d) making the build context",
                       WEXITSTATUS(st));
        else
            cli_errorf(VERB ": `tar` was killed by signal %d making the build context",
                       WTERMSIG(st));
    }
    return false;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: warren template build -f Dockerfile [--name NAME] [--replace] [--shared]\n"
            "                             [--runtime ns|gvisor] [-o json] [CONTEXT_DIR]\n\n"
            "Build a template from a Dockerfile (the subset FROM, RUN, ENV, WORKDIR, USER, COPY;\n"
            "see docs/templates.md). Each step runs in a sandbox on warrend and is cached: an\n"
            "unchanged step is not run again. The steps and their output are printed as they\n"
            "come; a failed step's exit code is warren's.\n\n"
            "  -f, --file PATH   the Dockerfile (required)\n"
            "  --name NAME       the template's name (default: the name of the Dockerfile's\n"
            "                    directory, lowercased, characters other than [a-z0-9._-]\n"
            "                    made '-')\n"
            "  --replace         replace the team's template of that name (else it is an\n"
            "                    error)\n"
            "  --shared          (admin) a template every team uses; its name is reserved\n"
            "  --runtime ns|gvisor  the isolation backend its sandboxes run on when a create\n"
            "                    does not say (default: the FROM image's); the steps run on\n"
            "                    the server's default\n"
            "  -o json           print the build's events, one JSON object a line\n"
            "  CONTEXT_DIR       the build context COPY reads from (default: the Dockerfile's\n"
            "                    directory if it has a COPY, else none), sent whole as a tar\n"
            "                    made by the system's `tar`;\n"
            "                    .dockerignore is not supported (it is sent like any file). A\n"
            "                    Dockerfile outside it is added to it under its file name.\n");
}

struct build_args {
    const char *file, *name, *context, *runtime;
    bool replace, shared, json;
};

static int parse_args(int argc, char **argv, struct build_args *a)
{
    enum { O_NAME = 256, O_REPLACE, O_SHARED, O_RUNTIME };
    static const struct option longopts[] = {
        {"file", required_argument, NULL, 'f'},
        {"name", required_argument, NULL, O_NAME},
        {"replace", no_argument, NULL, O_REPLACE},
        {"shared", no_argument, NULL, O_SHARED},
        {"runtime", required_argument, NULL, O_RUNTIME},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "f:o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'f':
            a->file = optarg;
            break;
        case O_NAME:
            a->name = optarg;
            break;
        case O_REPLACE:
            a->replace = true;
            break;
        case O_SHARED:
            a->shared = true;
            break;
        case O_RUNTIME:
            a->runtime = optarg;
            break;
        case 'o':
            if (cli_output_arg(VERB, optarg, &a->json) < 0)
                return CLI_EXIT_USAGE;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            return cli_bad_option(VERB, argv);
        }
    }
    if (argc - optind > 1) {
        cli_errorf(VERB ": at most one context directory (got `%s` and `%s`)", argv[optind],
                   argv[optind + 1]);
        return CLI_EXIT_USAGE;
    }
    a->context = optind < argc ? argv[optind] : NULL;
    if (a->file == NULL) {
        cli_errorf(VERB ": -f Dockerfile is required (see `warren template build --help`)");
        return CLI_EXIT_USAGE;
    }
    if (a->name != NULL && (a->name[0] == '\0' || strlen(a->name) > 128)) {
        cli_errorf(VERB ": --name `%s` is not a template name", a->name);
        return CLI_EXIT_USAGE;
    }
    return -1;
}

/* Whether the Dockerfile at path has a COPY line (COPY is the only reader of the context). A
 * false yes (a continuation line that starts with "COPY") only sends a context for nothing. */
static bool has_copy(const char *path)
{
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    char line[4096];

    if (f == NULL)
        return true; /* let the server say what is wrong */
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncasecmp(p, "COPY", 4) == 0 && (p[4] == ' ' || p[4] == '\t'))
            return true;
    }
    return false;
}

/* Send the context and print the answer. Returns the exit status. */
static int run_build(const struct build_args *a, const char *target, const char *ctx,
                     const char *dfdir, const char *extra_name)
{
    struct build_events ev = {.json = a->json};
    struct cli_http_req req = {
        .method = "POST",
        .target = target,
        .content_type = "application/x-tar",
        .accept = "application/x-ndjson",
        .body_kind = CLI_BODY_STREAM,
        .on_body = on_body,
        .ctx = &ev,
    };
    struct cli_http_resp resp = {0};
    struct cli_http *http = NULL;
    _cleanup_free_ char *buf = NULL;
    struct wr_err err;
    bool send_failed = false;
    int fd = -1, rc = CLI_EXIT_FAIL;
    pid_t tar;

    if ((http = cli_connect_or_complain(VERB)) == NULL)
        return CLI_EXIT_FAIL;
    if ((tar = start_tar(ctx, dfdir, extra_name, &fd)) < 0)
        goto out;
    if (cli_http_begin(http, &req, &err) < 0) {
        close(fd);
        kill(tar, SIGTERM);
        tar_ok(tar, true);
        cli_errorf(VERB ": %s", err.msg);
        goto out;
    }
    buf = xmalloc(IO_SIZE);
    for (;;) {
        ssize_t n = read(fd, buf, IO_SIZE);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            cli_errorf(VERB ": read from tar: %s", strerror(errno));
            close(fd);
            kill(tar, SIGTERM);
            tar_ok(tar, true);
            goto out;
        }
        if (n == 0)
            break;
        if (cli_http_chunk(http, buf, (size_t)n, &err) < 0) {
            send_failed = true; /* the answer (read below) says why */
            break;
        }
    }
    close(fd);
    if (send_failed) {
        kill(tar, SIGTERM);
        tar_ok(tar, true);
    } else if (!tar_ok(tar, false)) {
        goto out; /* closing the connection without the last chunk abandons the upload */
    } else {
        (void)cli_http_end(http, &err);
    }
    if (cli_http_response(http, &req, &resp, &err) < 0) {
        end_line(&ev);
        cli_errorf(VERB ": %s", err.msg);
        goto out;
    }
    if (resp.status < 200 || resp.status > 299) {
        cli_http_error(&resp, &err);
        cli_errorf(VERB ": %s", err.msg);
        goto out;
    }
    if (ev.line.len > 0 && on_event(&ev, wr_buf_str(&ev.line), ev.line.len, &err) < 0) {
        cli_errorf(VERB ": %s", err.msg);
        goto out;
    }
    end_line(&ev);
    if (ev.done) {
        if (!a->json)
            printf("built template %s (%lld layer%s)\n", ev.tpl_name, ev.layers,
                   ev.layers == 1 ? "" : "s");
        rc = 0;
    } else if (ev.failed) {
        if (ev.fail_step > 0)
            cli_errorf("build failed at step %lld (line %lld): %s", ev.fail_step, ev.fail_line,
                       ev.fail_msg);
        else if (ev.fail_line > 0)
            cli_errorf("build failed (line %lld): %s", ev.fail_line, ev.fail_msg);
        else
            cli_errorf("build failed: %s", ev.fail_msg);
        rc = ev.exit_code > 0 && ev.exit_code < 256 ? (int)ev.exit_code : CLI_EXIT_FAIL;
    } else {
        cli_errorf(VERB ": the answer ended before the build did");
    }
out:
    fflush(stdout);
    cli_http_resp_fini(&resp);
    cli_http_close(http);
    events_fini(&ev);
    return rc;
}

int cli_template_build(int argc, char **argv)
{
    struct build_args a = {0};
    _cleanup_free_ char *df = NULL, *dfdir = NULL, *ctx = NULL, *name = NULL, *tmp = NULL;
    struct wr_buf target = {0};
    const char *dfpath, *extra = NULL;
    bool empty_ctx = false;
    struct stat st;
    int rc = parse_args(argc, argv, &a);

    if (rc >= 0)
        return rc;
    if (stat(a.file, &st) < 0) {
        cli_errorf(VERB ": -f %s: %s", a.file, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    if (!S_ISREG(st.st_mode)) {
        cli_errorf(VERB ": -f %s: not a regular file", a.file);
        return CLI_EXIT_FAIL;
    }
    if ((df = realpath(a.file, NULL)) == NULL) {
        cli_errorf(VERB ": -f %s: %s", a.file, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    tmp = xstrdup(df);
    dfdir = xstrdup(dirname(tmp));
    if (a.context != NULL) {
        if ((ctx = realpath(a.context, NULL)) == NULL || stat(ctx, &st) < 0 ||
            !S_ISDIR(st.st_mode)) {
            cli_errorf(VERB ": context %s: %s", a.context,
                       ctx == NULL ? strerror(errno) : "not a directory");
            return CLI_EXIT_FAIL;
        }
    } else if (has_copy(df)) {
        ctx = xstrdup(dfdir);
    } else {
        /* Nothing reads a context: send the Dockerfile alone (next to an empty directory),
         * not whatever else shares its directory (/tmp, a home). */
        _cleanup_free_ char *t =
            xasprintf("%s/warren-build-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (mkdtemp(t) == NULL) {
            cli_errorf(VERB ": make an empty context: %s", strerror(errno));
            return CLI_EXIT_FAIL;
        }
        ctx = steal_pointer(&t);
        empty_ctx = true;
    }
    if (a.name != NULL) {
        name = xstrdup(a.name);
    } else if ((name = name_of_dir(dfdir)) == NULL) {
        cli_errorf(VERB ": no template name can be made of the directory `%s`: give --name", dfdir);
        return CLI_EXIT_USAGE;
    }
    if ((dfpath = inside(df, ctx)) == NULL) {
        /* Outside the context: added to the archive at its top under its file name. */
        _cleanup_free_ char *copy = xstrdup(df);
        _cleanup_free_ char *clash = NULL;
        free(tmp);
        tmp = xstrdup(basename(copy));
        extra = dfpath = tmp;
        clash = xasprintf("%s/%s", ctx, extra);
        if (lstat(clash, &st) == 0) {
            cli_errorf(VERB ": the Dockerfile is outside the context %s, which has its own `%s`: "
                            "move the Dockerfile into the context or rename it",
                       ctx, extra);
            return CLI_EXIT_FAIL;
        }
    }
    wr_buf_puts(&target, "/v1/templates/build?name=");
    cli_buf_add_escaped(&target, name);
    wr_buf_puts(&target, "&dockerfile=");
    cli_buf_add_escaped(&target, dfpath);
    if (a.replace)
        wr_buf_puts(&target, "&replace=true");
    if (a.shared)
        wr_buf_puts(&target, "&shared=true");
    if (a.runtime != NULL) {
        wr_buf_puts(&target, "&runtime=");
        cli_buf_add_escaped(&target, a.runtime);
    }
    rc = run_build(&a, wr_buf_str(&target), ctx, dfdir, extra);
    wr_buf_fini(&target);
    if (empty_ctx)
        (void)rmdir(ctx);
    return rc;
}
