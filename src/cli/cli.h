/* SPDX-License-Identifier: Apache-2.0 */
/* The `warren` command: one file per verb (or a few related verbs per file), dispatched from
 * main.c, and the helpers the daemon-facing verbs share (common.c). */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "../../include/warren.h"
#include "../util/err.h"
#include "client.h"

/* Exit statuses of warren's own failures (as docker run): the command's status passes through
 * otherwise. */
#define WR_EXIT_ERROR    125 /* warren could not run the sandbox */
#define WR_EXIT_NOEXEC   126 /* the command exists but cannot be executed */
#define WR_EXIT_NOTFOUND 127 /* the command was not found */
#define WR_EXIT_TIMEOUT  124 /* --timeout expired (as timeout(1)) */

/* Exit statuses of the daemon-facing verbs (exec and shell use WR_EXIT_ERROR instead of
 * CLI_EXIT_FAIL, since their own status is the command's). */
#define CLI_EXIT_FAIL  1 /* the API or the connection failed */
#define CLI_EXIT_USAGE 2 /* bad flags or arguments */

int cmd_run(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_login(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_timeout(int argc, char **argv);
int cmd_pause(int argc, char **argv);
int cmd_resume(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_shell(int argc, char **argv);
int cmd_cp(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_fork(int argc, char **argv);
int cmd_volume(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_net_log(int argc, char **argv);
/* usage.c: `warren usage` (GET /v1/usage). */
int cmd_usage(int argc, char **argv);
int cmd_budget(int argc, char **argv);
int cmd_audit(int argc, char **argv);
/* limits.c: `warren limits` (GET/PUT/DELETE /v1/teams/{team}/limits). */
int cmd_limits(int argc, char **argv);
int cmd_webhook(int argc, char **argv);
int cmd_diff(int argc, char **argv);
/* code.c: `warren run-code` */
int cmd_run_code(int argc, char **argv);
/* ports.c */
int cmd_ports(int argc, char **argv);
int cmd_port_forward(int argc, char **argv);
int cmd_ssh(int argc, char **argv);
/* `warren template build` (build.c). */
int cli_template_build(int argc, char **argv);
/* template_oci.c: `warren template import|pull` (argv[0] is the sub-verb). */
int cli_template_oci(int argc, char **argv);
/* mcp.c: an MCP server on stdio, forwarding to warrend's /mcp. */
int cmd_mcp(int argc, char **argv);

/* ---- network.c ------------------------------------------------------------------------------ */

int cmd_network(int argc, char **argv);
/* The network options of `create` and `network` (getopt values, CLI_NET_OPTIONS for the option
 * table, CLI_NET_HELP for the usage text). */
enum {
    CLI_NET_INTERNET = 0x4e00,
    CLI_NET_NO_INTERNET,
    CLI_NET_ALLOW,
    CLI_NET_DENY,
    CLI_NET_MAXCONN,
    CLI_NET_PRIVATE,
    CLI_NET_NONE,
};
#define CLI_NET_OPTIONS                                                                            \
    {"internet", no_argument, NULL, CLI_NET_INTERNET},                                             \
        {"no-internet", no_argument, NULL, CLI_NET_NO_INTERNET},                                   \
        {"allow-out", required_argument, NULL, CLI_NET_ALLOW},                                     \
        {"deny-out", required_argument, NULL, CLI_NET_DENY},                                       \
        {"max-connections", required_argument, NULL, CLI_NET_MAXCONN},                             \
    {                                                                                              \
        "private-ports", no_argument, NULL, CLI_NET_PRIVATE                                        \
    }
#define CLI_NET_HELP                                                                               \
    "  --internet, --no-internet  egress to the internet, or only to what --allow-out\n"           \
    "                         lists (default: the server's)\n"                                     \
    "  --allow-out LIST       addresses, CIDR blocks, names, *.names reachable whatever\n"         \
    "                         else is denied (comma-separated, repeatable)\n"                      \
    "  --deny-out LIST        addresses and CIDR blocks not reachable (names need\n"               \
    "                         --deny-out 0.0.0.0/0 or --no-internet)\n"                            \
    "  --max-connections N    concurrent egress connections at most\n"                             \
    "  --private-ports        its ports need its traffic token (e2b-traffic-access-token)\n"
/* Apply one of those options to the `network` object net. Returns 0 or -1 (printed). */
int cli_net_flag(const char *verb, json_t *net, int opt, const char *arg);
/* Show a `network` object as `warren info` and `warren network` do. */
void cli_net_print(json_t *n);

/* Print "warren: <message>" on stderr. */
void cli_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- compose.c ------------------------------------------------------------------------------ */

/* What a Compose file's context holds at most (`warren create --context DIR`): entries (files
 * and empty directories) and bytes of file content. */
#define CLI_CONTEXT_MAX_FILES 512u
#define CLI_CONTEXT_MAX_BYTES (8u << 20)

/* The create's `compose` object: {"file": the text of `file` ("-": stdin), "env": env (if not
 * empty), "context": cli_compose_context(context_dir) (if not NULL)}. Returns it (the caller's),
 * or NULL with err. */
json_t *cli_compose_json(const char *file, json_t *env, const char *context_dir,
                         struct wr_err *err);

/* DIR's regular files as a context: {"relative/path": "content"} with "dir/": "" for an empty
 * directory, in sorted order. Hidden entries (.git, .env) are left out, symlinks and special
 * files too; a file that is not UTF-8 text, or more than CLI_CONTEXT_MAX_FILES entries or
 * CLI_CONTEXT_MAX_BYTES of content, is an error. Returns the object, or NULL with err. */
json_t *cli_compose_context(const char *dir, struct wr_err *err);

/* ---- services.c ----------------------------------------------------------------------------- */

/* `warren services ID`: a sandbox's Compose services; `warren logs ID SERVICE`: one's log. */
int cmd_services(int argc, char **argv);
int cmd_logs(int argc, char **argv);

/* Whether name is a Compose service's name ([a-z0-9][a-z0-9_.-]{0,62}); if not, print a usage
 * error for `verb`. */
bool cli_check_service(const char *verb, const char *name);

/* ---- tty.c ---------------------------------------------------------------------------------- */

/* Put stdin, if it is a terminal, in raw mode until cli_tty_restore (also run at exit). */
void cli_tty_raw(void);
/* Give stdin back the settings cli_tty_raw found; a no-op if it changed none. */
void cli_tty_restore(void);

/* ---- common.c ------------------------------------------------------------------------------- */

/* Where and how to reach warrend: the config file, overridden by WARREN_API_URL and
 * WARREN_API_KEY, else unix:///run/warrend/warrend.sock with no key. `*_from` says which
 * ("env", "config", "default"). */
struct cli_config {
    char *endpoint, *key; /* key NULL: none */
    const char *endpoint_from, *key_from;
    char *path; /* the config file's path */
};

#define CLI_DEFAULT_ENDPOINT "unix:///run/warrend/warrend.sock"

/* Resolve the configuration. Returns 0 (a missing file is no error) or -1 with err (unreadable
 * or malformed file). cli_config_fini frees it. */
int cli_config_load(struct cli_config *cfg, struct wr_err *err);
void cli_config_fini(struct cli_config *cfg);

/* A libwarren client for the configuration (warren_connect(NULL, NULL): the same endpoint and
 * key as cli_connect), or print why not (prefixed with verb) and return NULL. The verbs moved
 * onto the public API (include/warren.h) use this; the others use cli_connect. */
warren *cli_warren_or_complain(const char *verb);

/* The JSON of a description libwarren handed out (warren_sandbox_json, ...), parsed; the caller
 * owns it. A JSON null if text is NULL or not JSON (it always is). */
json_t *cli_json(const char *text);

/* cli_connect, or print why not (prefixed with verb) and return NULL. */
struct cli_http *cli_connect_or_complain(const char *verb);

/* Parse the options of a verb that takes only -o (when json is not NULL), --help and positional
 * arguments. Returns the index of the first positional argument, or -1 with *rc set (0 after
 * --help, which printed usage). */
int cli_simple_opts(const char *verb, const char *usage, int argc, char **argv, bool *json,
                    int *rc);

/* Resolve the configuration and connect. Returns 0 with *out owned by the caller
 * (cli_http_close), or -1 with err. WARREN_REQUEST_ID, if set, is sent as X-Request-Id. */
int cli_connect(struct cli_http **out, struct wr_err *err);

/* A JSON round trip: `body` (NULL: none) is sent as application/json. On a 2xx answer, *out
 * (if out is not NULL) gets the parsed body, NULL when it was empty, owned by the caller; a
 * non-2xx answer becomes err (cli_http_error). Returns the status, or -1 with err. */
int cli_api(struct cli_http *c, const char *method, const char *target, json_t *body, json_t **out,
            struct wr_err *err);

/* Whether id matches the API's sandbox id pattern ^[A-Za-z0-9_-]{1,64}$; if not, print a usage
 * error for `verb`. */
bool cli_check_id(const char *verb, const char *id);

/* Report a getopt failure for `verb` (unknown option or missing argument) and return
 * CLI_EXIT_USAGE. Call from the default case of a getopt_long loop run with opterr = 0. */
int cli_bad_option(const char *verb, char **argv);

/* Parse "-o FORMAT": "json" sets *json, "table"/"text" clears it. Returns 0 or -1 (printed). */
int cli_output_arg(const char *verb, const char *arg, bool *json);

/* Print j on stdout as indented JSON and a newline. */
void cli_print_json(const json_t *j);

struct wr_buf;
/* NDJSON as it arrives: call on_line(ctx, line, n, err) for each complete non-empty line of the
 * piece data, keeping an unfinished line in *partial for the next piece (at most 64 MiB). A
 * negative on_line stops. Returns 0, or -1 with err. */
int cli_ndjson_feed(struct wr_buf *partial, const char *data, size_t len,
                    int (*on_line)(void *ctx, const char *line, size_t n, struct wr_err *err),
                    void *ctx, struct wr_err *err);

/* Split "K=V" into obj[K] = V. Returns 0, or -1 (printed as a usage error of `verb`/`flag`). */
int cli_kv_set(const char *verb, const char *flag, json_t *obj, const char *kv);
