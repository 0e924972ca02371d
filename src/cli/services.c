/* SPDX-License-Identifier: Apache-2.0 */
/* The verbs of a sandbox made from a Compose file (`warren create -f`, docs/compose.md):
 * `warren services` lists its services, `warren logs` prints one's log. `warren exec --service`
 * (exec.c) runs a command inside one. */
#include "cli.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/xalloc.h"
#include "client.h"

bool cli_check_service(const char *verb, const char *name)
{
    size_t n = strlen(name);

    if (n >= 1 && n <= 63 && strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789") >= 1 &&
        strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_.-") == n)
        return true;
    cli_errorf("%s: `%s` is not a service name (lowercase letters, digits, `_`, `.` and `-`, "
               "starting with a letter or a digit)",
               verb, name);
    return false;
}

/* ---- services ------------------------------------------------------------------------------- */

static int width_of(json_t *list, const char *key, int least)
{
    size_t i;
    json_t *s;
    int w = least;

    json_array_foreach(list, i, s)
    {
        size_t n = strlen(json_string_value(json_object_get(s, key)) ?: "");
        if (n > (size_t)w)
            w = n > 64 ? 64 : (int)n;
    }
    return w;
}

/* "-" for JSON null, else the integer. */
static const char *int_or_dash(json_t *v, char *buf, size_t size)
{
    if (!json_is_integer(v))
        return "-";
    snprintf(buf, size, "%lld", (long long)json_integer_value(v));
    return buf;
}

static void print_service(json_t *s, int w_name, int w_image)
{
    struct wr_buf ports = {0}, msg = {0};
    const char *text = json_string_value(json_object_get(s, "message"));
    json_t *code = json_object_get(s, "exit_code"), *sig = json_object_get(s, "signal"), *p;
    char pid[32], restarts[32];
    size_t i;

    json_array_foreach(json_object_get(s, "ports"), i, p)
        wr_buf_printf(&ports, "%s%lld", i ? "," : "", (long long)json_integer_value(p));
    if (json_is_integer(code))
        wr_buf_printf(&msg, "exit %lld", (long long)json_integer_value(code));
    else if (json_is_integer(sig))
        wr_buf_printf(&msg, "signal %lld", (long long)json_integer_value(sig));
    if (text != NULL && text[0] != '\0')
        wr_buf_printf(&msg, "%s%s", msg.len ? ": " : "", text);
    printf("%-*s %-10s %-7s %-8s %-*s %-12s %s\n", w_name,
           json_string_value(json_object_get(s, "name")) ?: "?",
           json_string_value(json_object_get(s, "state")) ?: "?",
           int_or_dash(json_object_get(s, "pid"), pid, sizeof(pid)),
           int_or_dash(json_object_get(s, "restarts"), restarts, sizeof(restarts)), w_image,
           json_string_value(json_object_get(s, "image")) ?: "?",
           ports.len ? wr_buf_str(&ports) : "-", msg.len ? wr_buf_str(&msg) : "-");
    wr_buf_fini(&ports);
    wr_buf_fini(&msg);
}

int cmd_services(int argc, char **argv)
{
    _cleanup_free_ char *target = NULL;
    struct cli_http *http;
    json_t *doc = NULL, *list, *s;
    struct wr_err err;
    bool json = false;
    size_t k;
    int w_name, w_image;
    int rc, i = cli_simple_opts(
                "services",
                "usage: warren services ID [-o json]\n\n"
                "List the services of a sandbox made from a Compose file (`warren create -f`), in\n"
                "start order: each one's state (waiting, starting, running, healthy,\n"
                "unhealthy, restarting, exited, failed), process id, restarts, image and ports,\n"
                "and how it ended or why it is not ready.\n",
                argc, argv, &json, &rc);

    if (i < 0)
        return rc;
    if (argc - i != 1) {
        cli_errorf("services: want exactly one sandbox id (usage: warren services ID [-o json])");
        return CLI_EXIT_USAGE;
    }
    if (!cli_check_id("services", argv[i]))
        return CLI_EXIT_USAGE;
    if ((http = cli_connect_or_complain("services")) == NULL)
        return CLI_EXIT_FAIL;
    target = xasprintf("/v1/sandboxes/%s/services", argv[i]);
    rc = cli_api(http, "GET", target, NULL, &doc, &err) < 0 ? CLI_EXIT_FAIL : 0;
    cli_http_close(http);
    if (rc != 0) {
        cli_errorf("services: %s", err.msg);
        return rc;
    }
    list = json_object_get(doc, "services");
    if (!json_is_array(list)) {
        cli_errorf("services: bad answer from warrend: no `services` array");
        json_decref(doc);
        return CLI_EXIT_FAIL;
    }
    if (json) {
        cli_print_json(doc);
    } else {
        w_name = width_of(list, "name", 4);
        w_image = width_of(list, "image", 5);
        printf("%-*s %-10s %-7s %-8s %-*s %-12s %s\n", w_name, "NAME", "STATE", "PID", "RESTARTS",
               w_image, "IMAGE", "PORTS", "MESSAGE");
        json_array_foreach(list, k, s) print_service(s, w_name, w_image);
    }
    json_decref(doc);
    return 0;
}

/* ---- logs ----------------------------------------------------------------------------------- */

static int to_stdout(const char *data, size_t len, void *ctx, struct wr_err *err)
{
    if (wr_write_all(STDOUT_FILENO, data, len) < 0)
        return wr_err_sys(err, "write stdout");
    return 0;
}

int cmd_logs(int argc, char **argv)
{
    _cleanup_free_ char *target = NULL;
    struct cli_http *http;
    struct cli_http_resp resp = {0};
    struct wr_err err;
    int rc, i = cli_simple_opts("logs",
                                "usage: warren logs ID SERVICE\n\n"
                                "Print the log of service SERVICE of a sandbox made from a "
                                "Compose file\n(`warren create -f`): its stdout and stderr as "
                                "they were written, and the\nlines warren-init adds (starts, "
                                "exits, health checks, restarts).\n",
                                argc, argv, NULL, &rc);

    if (i < 0)
        return rc;
    if (argc - i != 2) {
        cli_errorf("logs: want a sandbox id and a service (usage: warren logs ID SERVICE)");
        return CLI_EXIT_USAGE;
    }
    if (!cli_check_id("logs", argv[i]) || !cli_check_service("logs", argv[i + 1]))
        return CLI_EXIT_USAGE;
    if ((http = cli_connect_or_complain("logs")) == NULL)
        return CLI_EXIT_FAIL;
    target = xasprintf("/v1/sandboxes/%s/services/%s/logs", argv[i], argv[i + 1]);
    struct cli_http_req req = {
        .method = "GET",
        .target = target,
        .accept = "application/octet-stream",
        .on_body = to_stdout,
    };
    rc = 0;
    if (cli_http_request(http, &req, &resp, &err) < 0) {
        rc = CLI_EXIT_FAIL;
    } else if (resp.status < 200 || resp.status > 299) {
        cli_http_error(&resp, &err);
        rc = CLI_EXIT_FAIL;
    }
    cli_http_resp_fini(&resp);
    cli_http_close(http);
    if (rc != 0)
        cli_errorf("logs: %s", err.msg);
    return rc;
}
