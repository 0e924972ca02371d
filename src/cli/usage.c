/* SPDX-License-Identifier: Apache-2.0 */
/* `warren usage [--from T] [--to T] [--group-by sandbox|template|day] [--csv] [--team T]`: the
 * usage ledger (GET /v1/usage, docs/usage.md) as a table, CSV or JSON. */
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "client.h"

#define VERB "usage"
#define USAGE                                                                                      \
    "usage: warren usage [--from TIME] [--to TIME] [--group-by sandbox|template|day] [--csv]\n"    \
    "                    [--team TEAM] [--json]\n\n"                                               \
    "Show what the team used: per sandbox, template or day, the allocated vCPU-seconds and\n"      \
    "GiB-seconds, the measured CPU seconds and memory, the peak memory, the egress bytes and "     \
    "the\n"                                                                                        \
    "billed vCPU-seconds (the daemon's --billed-seconds names what those are).\n\n"                \
    "      --from TIME      intervals starting at or after TIME (RFC 3339 or unix seconds)\n"      \
    "      --to TIME        intervals starting before TIME\n"                                      \
    "      --group-by KEY   sandbox (default), template or day (UTC)\n"                            \
    "      --csv            print the daemon's CSV\n"                                              \
    "      --team TEAM      another team's (an admin key)\n"                                       \
    "      --json           print the JSON answer\n"

static const char *str_of(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "-";
}

static void print_table(const json_t *body)
{
    const char *g = str_of(body, "group_by");
    const json_t *rows = json_object_get(body, "rows");
    size_t i;
    const json_t *r;

    printf("billed seconds: %s\n", str_of(body, "billed_seconds"));
    printf("%-22s %-12s %-16s %10s %10s %12s %12s %12s %12s %12s %12s\n",
           strcmp(g, "day") == 0        ? "DAY"
           : strcmp(g, "template") == 0 ? "TEMPLATE"
                                        : "SANDBOX",
           "TEAM", "TEMPLATE", "RUN_S", "PAUSED_S", "VCPU_S", "CPU_S", "GIB_S", "BILLED_S",
           "PEAK_MEM", "NET_OUT");
    json_array_foreach(rows, i, r)
    {
        printf("%-22s %-12s %-16s %10.1f %10.1f %12.3f %12.3f %12.3f %12.3f %12" JSON_INTEGER_FORMAT
               " %12" JSON_INTEGER_FORMAT "\n",
               str_of(r, g), str_of(r, "team"), str_of(r, "template"),
               json_number_value(json_object_get(r, "sandbox_seconds")),
               json_number_value(json_object_get(r, "paused_seconds")),
               json_number_value(json_object_get(r, "vcpu_seconds")),
               json_number_value(json_object_get(r, "cpu_seconds")),
               json_number_value(json_object_get(r, "gib_seconds")),
               json_number_value(json_object_get(r, "billed_vcpu_seconds")),
               json_integer_value(json_object_get(r, "peak_memory_bytes")),
               json_integer_value(json_object_get(r, "net_bytes_out")));
    }
}

static void add_param(struct wr_buf *t, const char *name, const char *v)
{
    if (v == NULL)
        return;
    wr_buf_printf(t, "&%s=", name);
    cli_buf_add_escaped(t, v);
}

int cmd_usage(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"from", required_argument, NULL, 'F'},     {"to", required_argument, NULL, 'T'},
        {"group-by", required_argument, NULL, 'g'}, {"csv", no_argument, NULL, 'c'},
        {"team", required_argument, NULL, 't'},     {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
    };
    const char *from = NULL, *to = NULL, *group = "sandbox", *team = NULL;
    bool csv = false, json = false;
    _cleanup_(wr_buf_finip) struct wr_buf target = {0};
    struct cli_http *http;
    struct wr_err err;
    int c, rc = 0;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'F':
            from = optarg;
            break;
        case 'T':
            to = optarg;
            break;
        case 'g':
            if (strcmp(optarg, "sandbox") != 0 && strcmp(optarg, "template") != 0 &&
                strcmp(optarg, "day") != 0) {
                cli_errorf(VERB ": --group-by must be sandbox, template or day");
                return CLI_EXIT_USAGE;
            }
            group = optarg;
            break;
        case 'c':
            csv = true;
            break;
        case 't':
            team = optarg;
            break;
        case 'j':
            json = true;
            break;
        case 'h':
            printf(USAGE);
            return 0;
        default:
            return cli_bad_option(VERB, argv);
        }
    }
    if (optind != argc) {
        cli_errorf(VERB ": takes no arguments (usage: warren usage [--from T] [--to T] "
                        "[--group-by KEY] [--csv] [--team TEAM])");
        return CLI_EXIT_USAGE;
    }
    wr_buf_puts(&target, "/v1/usage?group_by=");
    wr_buf_puts(&target, group);
    add_param(&target, "from", from);
    add_param(&target, "to", to);
    add_param(&target, "team", team);
    if (csv)
        wr_buf_puts(&target, "&format=csv");
    if ((http = cli_connect_or_complain(VERB)) == NULL)
        return CLI_EXIT_FAIL;
    if (csv) {
        struct cli_http_req req = {
            .method = "GET", .target = wr_buf_str(&target), .accept = "text/csv"};
        struct cli_http_resp resp = {0};
        if (cli_http_request(http, &req, &resp, &err) < 0) {
            cli_errorf(VERB ": %s", err.msg);
            rc = CLI_EXIT_FAIL;
        } else if (resp.status / 100 != 2) {
            cli_http_error(&resp, &err);
            cli_errorf(VERB ": %s", err.msg);
            rc = CLI_EXIT_FAIL;
        } else {
            fwrite(resp.body, 1, resp.body_len, stdout);
        }
        cli_http_resp_fini(&resp);
    } else {
        json_t *body = NULL;
        if (cli_api(http, "GET", wr_buf_str(&target), NULL, &body, &err) < 0) {
            cli_errorf(VERB ": %s", err.msg);
            rc = CLI_EXIT_FAIL;
        } else if (json) {
            cli_print_json(body);
        } else {
            print_table(body);
        }
        json_decref(body);
    }
    cli_http_close(http);
    return rc;
}
