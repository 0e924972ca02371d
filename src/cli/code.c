/* SPDX-License-Identifier: Apache-2.0 */
/* `warren run-code ID [-|FILE] [--language L] [--context C] [--env K=V] [--timeout S] [--json]`:
 * one cell in a code-interpreter sandbox (POST /v1/sandboxes/{id}/code, NDJSON lines of E2B's
 * wire): stdout and stderr as they come, then the main result's text; exit 1 when the cell
 * raised (its traceback on stderr). docs/code-interpreter.md. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/json_cleanup.h"
#include "../util/xalloc.h"
#include "client.h"

#define VERB "run-code"
#define USAGE                                                                                      \
    "usage: warren run-code ID [-|FILE] [--language LANG] [--context CTX] [--env K=V]...\n"        \
    "                          [--timeout SECONDS] [--json]\n\n"                                   \
    "Run a cell in the code interpreter of a sandbox (template code-interpreter-v1): the code\n"   \
    "comes from FILE, or stdin (- or nothing). State is kept across calls, per context. Prints\n"  \
    "the cell's stdout and stderr as they come, then the text of its main result (the value of\n"  \
    "its last expression). Exits 1 when the cell raised (the traceback goes to stderr).\n\n"       \
    "  -l, --language LANG   python (default), javascript or bash: that language's default\n"      \
    "                        context\n"                                                            \
    "  -c, --context CTX     a context made with POST /v1/sandboxes/ID/code/contexts\n"            \
    "  -e, --env K=V         an environment variable for this cell only (repeatable)\n"            \
    "  -t, --timeout S       interrupt the cell after S seconds (it then fails: TimeoutError)\n"   \
    "      --json            print the server's lines (NDJSON) as they come instead\n"

#define CODE_MAX (16u << 20)

struct run {
    struct wr_buf line;
    bool json, raised, ended;
    json_t *main_text; /* the main result's text (a reference), printed at the end */
};

static const char *str_of(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static int on_line(void *ctx, const char *line, size_t n, struct wr_err *err)
{
    struct run *r = ctx;
    json_error_t jerr;
    _cleanup_json_ json_t *j = json_loadb(line, n, 0, &jerr);
    const char *type;

    if (!json_is_object(j))
        return wr_err_set(err, WR_EPROTO, 0, "bad line from the code interpreter");
    type = str_of(j, "type");
    if (strcmp(type, "error") == 0)
        r->raised = true;
    if (strcmp(type, "end_of_execution") == 0)
        r->ended = true;
    if (r->json) {
        fwrite(line, 1, n, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        return 0;
    }
    if (strcmp(type, "stdout") == 0) {
        fputs(str_of(j, "text"), stdout);
        fflush(stdout);
    } else if (strcmp(type, "stderr") == 0) {
        fputs(str_of(j, "text"), stderr);
    } else if (strcmp(type, "result") == 0) {
        if (json_is_true(json_object_get(j, "is_main_result")) &&
            json_is_string(json_object_get(j, "text"))) {
            json_decref(r->main_text);
            r->main_text = json_incref(json_object_get(j, "text"));
        }
    } else if (strcmp(type, "error") == 0) {
        const char *tb = str_of(j, "traceback");
        if (*tb)
            fprintf(stderr, "%s\n", tb);
        else
            fprintf(stderr, "%s: %s\n", str_of(j, "name"), str_of(j, "value"));
    }
    return 0;
}

static int on_body(const char *data, size_t len, void *ctx, struct wr_err *err)
{
    struct run *r = ctx;
    return cli_ndjson_feed(&r->line, data, len, on_line, r, err);
}

/* The code from path ("-": stdin) into *out (NUL-terminated). Returns 0 or -1 (printed). */
static int read_code(const char *path, struct wr_buf *out)
{
    int fd = strcmp(path, "-") == 0 ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    char buf[65536];

    if (fd < 0) {
        cli_errorf(VERB ": %s: %s", path, strerror(errno));
        return -1;
    }
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            cli_errorf(VERB ": %s: %s", path, strerror(errno));
            break;
        }
        if (n == 0) {
            if (fd != STDIN_FILENO)
                close(fd);
            return 0;
        }
        if (out->len + (size_t)n > CODE_MAX) {
            cli_errorf(VERB ": %s: the code is larger than 16 MiB", path);
            break;
        }
        wr_buf_append(out, buf, (size_t)n);
    }
    if (fd != STDIN_FILENO)
        close(fd);
    return -1;
}

int cmd_run_code(int argc, char **argv)
{
    static const struct option opts[] = {
        {"language", required_argument, NULL, 'l'},
        {"context", required_argument, NULL, 'c'},
        {"env", required_argument, NULL, 'e'},
        {"timeout", required_argument, NULL, 't'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    _cleanup_json_ json_t *body = json_object();
    _cleanup_json_ json_t *env = json_object();
    struct run r = {0};
    struct wr_buf code = {0};
    struct cli_http *http;
    struct wr_err err;
    const char *id, *src = "-";
    int opt, rc = 0;

    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "+l:c:e:t:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'l':
            json_object_set_new(body, "language", json_string(optarg));
            break;
        case 'c':
            json_object_set_new(body, "context_id", json_string(optarg));
            break;
        case 'e':
            if (cli_kv_set(VERB, "--env", env, optarg) < 0)
                return CLI_EXIT_USAGE;
            break;
        case 't': {
            char *end;
            double t = strtod(optarg, &end);
            if (*optarg == '\0' || *end != '\0' || !(t > 0) || t > 1e9) {
                cli_errorf(VERB ": --timeout %s: a number of seconds above 0", optarg);
                return CLI_EXIT_USAGE;
            }
            json_object_set_new(body, "timeout", json_real(t));
            break;
        }
        case 'j':
            r.json = true;
            break;
        case 'h':
            fputs(USAGE, stdout);
            return 0;
        default:
            return cli_bad_option(VERB, argv);
        }
    }
    if (optind >= argc || argc - optind > 2) {
        fputs(USAGE, stderr);
        return CLI_EXIT_USAGE;
    }
    id = argv[optind];
    if (argc - optind == 2)
        src = argv[optind + 1];
    if (!cli_check_id(VERB, id))
        return CLI_EXIT_USAGE;
    if (json_object_get(body, "language") != NULL && json_object_get(body, "context_id") != NULL) {
        cli_errorf(VERB ": --language and --context do not go together");
        return CLI_EXIT_USAGE;
    }
    if (read_code(src, &code) < 0) {
        wr_buf_fini(&code);
        return CLI_EXIT_FAIL;
    }
    json_object_set_new(body, "code",
                        json_stringn(code.data ? (const char *)code.data : "", code.len));
    wr_buf_fini(&code);
    if (json_object_get(body, "code") == NULL) {
        cli_errorf(VERB ": the code is not UTF-8 text");
        return CLI_EXIT_USAGE;
    }
    if (json_object_size(env) > 0)
        json_object_set(body, "env", env);
    if ((http = cli_connect_or_complain(VERB)) == NULL)
        return CLI_EXIT_FAIL;

    _cleanup_free_ char *text = json_dumps(body, JSON_COMPACT);
    _cleanup_free_ char *target = xasprintf("/v1/sandboxes/%s/code", id);
    struct cli_http_req req = {
        .method = "POST",
        .target = target,
        .content_type = "application/json",
        .accept = "application/x-ndjson",
        .body_kind = CLI_BODY_MEM,
        .body = text,
        .body_len = strlen(text),
        .on_body = on_body,
        .ctx = &r,
    };
    struct cli_http_resp resp = {0};

    if (cli_http_request(http, &req, &resp, &err) < 0) {
        cli_errorf(VERB ": %s", err.msg);
        rc = CLI_EXIT_FAIL;
    } else if (resp.status / 100 != 2) {
        cli_http_error(&resp, &err);
        cli_errorf(VERB ": %s", err.msg);
        rc = CLI_EXIT_FAIL;
    } else if (!r.ended) {
        cli_errorf(VERB ": the code interpreter's answer ended early");
        rc = CLI_EXIT_FAIL;
    } else {
        if (!r.json && r.main_text != NULL) {
            const char *t = json_string_value(r.main_text);
            size_t n = strlen(t);
            fputs(t, stdout);
            if (n == 0 || t[n - 1] != '\n')
                fputc('\n', stdout);
        }
        rc = r.raised ? 1 : 0;
    }
    fflush(stdout);
    cli_http_resp_fini(&resp);
    cli_http_close(http);
    wr_buf_fini(&r.line);
    json_decref(r.main_text);
    return rc;
}
