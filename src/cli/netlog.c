/* SPDX-License-Identifier: Apache-2.0 */
/* `warren net-log ID [--follow] [--json]`: a sandbox's egress log (GET
 * /v1/sandboxes/{id}/network/log), every page, or followed as it grows. */
#include "cli.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "client.h"

#define VERB "net-log"
#define USAGE                                                                                      \
    "usage: warren net-log ID [--follow] [--json] [--after CURSOR]\n\n"                            \
    "Show a sandbox's egress log: each connection, DNS question and denied packet, oldest\n"       \
    "first, with its destination, the name asked for (TLS SNI, HTTP Host or DNS question), the\n"  \
    "bytes each way and the rule that allowed or denied it.\n\n"                                   \
    "  -f, --follow      go on printing entries as they come, until the sandbox is deleted\n"      \
    "      --json        print JSON (one object per line with --follow)\n"                         \
    "      --after ID    only the entries after this one (an entry's id)\n"

static const char *str_of(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static void print_header(void)
{
    printf("%-10s %-24s %-5s %-21s %-32s %10s %10s %-6s %s\n", "ID", "TIME", "PROTO", "DESTINATION",
           "NAME", "OUT", "IN", "", "RULE");
}

static void print_entry(const json_t *e, bool json)
{
    char dest[40];
    const char *name;

    if (json) {
        char *s = json_dumps(e, JSON_COMPACT);
        if (s != NULL)
            printf("%s\n", s);
        free(s);
        fflush(stdout);
        return;
    }
    snprintf(dest, sizeof(dest), "%s:%" JSON_INTEGER_FORMAT, str_of(e, "address"),
             json_integer_value(json_object_get(e, "port")));
    name = str_of(e, "name");
    printf("%-10s %-24s %-5s %-21s %-32s %10" JSON_INTEGER_FORMAT " %10" JSON_INTEGER_FORMAT
           " %-7s %s\n",
           str_of(e, "id"), str_of(e, "time"), str_of(e, "proto"), dest, *name ? name : "-",
           json_integer_value(json_object_get(e, "bytes_out")),
           json_integer_value(json_object_get(e, "bytes_in")),
           json_is_true(json_object_get(e, "allowed")) ? "allow" : "deny", str_of(e, "rule"));
    fflush(stdout);
}

struct follow {
    struct wr_buf line;
    bool json;
};

static int on_line(void *ctx, const char *line, size_t n, struct wr_err *err)
{
    struct follow *f = ctx;
    json_error_t jerr;
    json_t *e = json_loadb(line, n, 0, &jerr);

    if (!json_is_object(e)) {
        json_decref(e);
        return wr_err_set(err, WR_EPROTO, 0, "bad log line from the daemon");
    }
    print_entry(e, f->json);
    json_decref(e);
    return 0;
}

static int on_body(const char *data, size_t len, void *ctx, struct wr_err *err)
{
    struct follow *f = ctx;
    return cli_ndjson_feed(&f->line, data, len, on_line, f, err);
}

static int follow_log(struct cli_http *http, const char *id, const char *after, bool json)
{
    _cleanup_free_ char *target = xasprintf("/v1/sandboxes/%s/network/log?follow=1%s%s", id,
                                            after ? "&after=" : "", after ? after : "");
    struct follow f = {.json = json};
    struct cli_http_req req = {
        .method = "GET",
        .target = target,
        .accept = "application/x-ndjson",
        .on_body = on_body,
        .ctx = &f,
    };
    struct cli_http_resp resp = {0};
    struct wr_err err;
    int rc = 0;

    if (!json)
        print_header();
    if (cli_http_request(http, &req, &resp, &err) < 0) {
        cli_errorf(VERB ": %s", err.msg);
        rc = CLI_EXIT_FAIL;
    } else if (resp.status / 100 != 2) {
        cli_http_error(&resp, &err);
        cli_errorf(VERB ": %s", err.msg);
        rc = CLI_EXIT_FAIL;
    }
    cli_http_resp_fini(&resp);
    wr_buf_fini(&f.line);
    return rc;
}

static int list_log(struct cli_http *http, const char *id, const char *after, bool json)
{
    _cleanup_free_ char *cursor = after ? xstrdup(after) : NULL;
    json_t *all = json_array();
    struct wr_err err;
    bool first = true;

    for (;;) {
        _cleanup_free_ char *target = xasprintf("/v1/sandboxes/%s/network/log?limit=1000%s%s", id,
                                                cursor ? "&after=" : "", cursor ? cursor : "");
        json_t *page = NULL, *entries;
        size_t n;

        if (cli_api(http, "GET", target, NULL, &page, &err) < 0) {
            cli_errorf(VERB ": %s", err.msg);
            json_decref(all);
            return CLI_EXIT_FAIL;
        }
        entries = json_object_get(page, "entries");
        n = json_array_size(entries);
        if (!json && first)
            print_header();
        first = false;
        for (size_t i = 0; i < n; i++) {
            if (json)
                json_array_append(all, json_array_get(entries, i));
            else
                print_entry(json_array_get(entries, i), false);
        }
        free(cursor);
        cursor = json_string_value(json_object_get(page, "next"))
                     ? xstrdup(json_string_value(json_object_get(page, "next")))
                     : NULL;
        json_decref(page);
        if (n < 1000 || cursor == NULL)
            break;
    }
    if (json)
        cli_print_json(all);
    json_decref(all);
    return 0;
}

int cmd_net_log(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"follow", no_argument, NULL, 'f'},      {"json", no_argument, NULL, 'j'},
        {"after", required_argument, NULL, 'a'}, {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
    };
    struct cli_http *http;
    const char *after = NULL;
    bool follow = false, json = false;
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "fo:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'f':
            follow = true;
            break;
        case 'j':
            json = true;
            break;
        case 'a':
            if (optarg[0] == '\0' || strspn(optarg, "0123456789") != strlen(optarg)) {
                cli_errorf(VERB ": --after `%s` is not an entry id", optarg);
                return CLI_EXIT_USAGE;
            }
            after = optarg;
            break;
        case 'o':
            if (cli_output_arg(VERB, optarg, &json) < 0)
                return CLI_EXIT_USAGE;
            break;
        case 'h':
            printf(USAGE);
            return 0;
        default:
            return cli_bad_option(VERB, argv);
        }
    }
    if (argc - optind != 1) {
        cli_errorf(VERB ": want exactly one sandbox id (usage: warren net-log ID [--follow] "
                        "[--json])");
        return CLI_EXIT_USAGE;
    }
    if (!cli_check_id(VERB, argv[optind]))
        return CLI_EXIT_USAGE;
    if ((http = cli_connect_or_complain(VERB)) == NULL)
        return CLI_EXIT_FAIL;
    rc = follow ? follow_log(http, argv[optind], after, json)
                : list_log(http, argv[optind], after, json);
    cli_http_close(http);
    return rc;
}
