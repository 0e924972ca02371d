/* SPDX-License-Identifier: Apache-2.0 */
/* `warren diff ID [--against SNAP] [PATH]`: what a sandbox changed in its files (GET
 * /v1/sandboxes/{id}/diff), as a table like `git status --short`, or one file's unified diff. */
#include "cli.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/parse.h"
#include "client.h"

#define VERB "diff"
#define USAGE                                                                                      \
    "usage: warren diff ID [--against SNAPSHOT|SANDBOX] [--limit N] [--json] [--list] [PATH]\n\n"  \
    "Show what a sandbox (running or paused) added (A), modified (M), deleted (D) and renamed\n"   \
    "(R) in its files against its template, or against a snapshot or another sandbox of the\n"     \
    "same lineage: a code, the path and the size (and the mode when it changed), sorted by\n"      \
    "path. With PATH, the unified diff of that file (a PATH ending in / or --list: the\n"          \
    "changes at and below it).\n\n"                                                                \
    "      --against X   compare with snapshot X (id or name) or sandbox X instead\n"              \
    "      --limit N     list at most N changes (default 10000)\n"                                 \
    "      --list        with PATH: list the changes at and below it, not its content\n"           \
    "      --json        print the API's JSON\n"

static const char *str_of(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static char code_of(const char *change)
{
    if (strcmp(change, "added") == 0)
        return 'A';
    if (strcmp(change, "deleted") == 0)
        return 'D';
    if (strcmp(change, "renamed") == 0)
        return 'R';
    return 'M';
}

static void print_change(const json_t *c)
{
    const char *type = str_of(c, "type"), *mode = str_of(c, "mode"), *old = str_of(c, "old_mode");
    bool dir = strcmp(type, "dir") == 0;

    if (json_object_get(c, "from") != NULL)
        printf("%c %s -> %s", code_of(str_of(c, "change")), str_of(c, "from"), str_of(c, "path"));
    else
        printf("%c %s%s", code_of(str_of(c, "change")), str_of(c, "path"), dir ? "/" : "");
    if (!dir)
        printf("  %" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(c, "size")));
    if (*old != '\0' && strcmp(old, mode) != 0)
        printf("  %s -> %s", old, mode);
    if (*str_of(c, "old_type") != '\0' && strcmp(str_of(c, "old_type"), type) != 0)
        printf("  (%s, was %s)", type, str_of(c, "old_type"));
    printf("\n");
}

int cmd_diff(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"against", required_argument, NULL, 'a'},
        {"limit", required_argument, NULL, 'l'},
        {"json", no_argument, NULL, 'j'},
        {"list", no_argument, NULL, 'L'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    _cleanup_buf_ struct wr_buf target = {0};
    const char *against = NULL, *path = NULL, *limit = NULL;
    bool json = false, list = false, content;
    struct cli_http *http;
    json_t *doc = NULL;
    struct wr_err err;
    int c, rc = 0;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "a:o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'a':
            against = optarg;
            break;
        case 'l': {
            uint64_t v;
            if (wr_parse_uint(optarg, 100000, &v, &err) < 0 || v == 0) {
                cli_errorf(VERB ": --limit `%s` is not 1 to 100000", optarg);
                return CLI_EXIT_USAGE;
            }
            limit = optarg;
            break;
        }
        case 'j':
            json = true;
            break;
        case 'L':
            list = true;
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
    if (argc - optind < 1 || argc - optind > 2) {
        cli_errorf(VERB ": want a sandbox id and at most one path (usage: warren diff ID "
                        "[--against SNAPSHOT] [PATH])");
        return CLI_EXIT_USAGE;
    }
    if (!cli_check_id(VERB, argv[optind]))
        return CLI_EXIT_USAGE;
    if (argc - optind == 2) {
        path = argv[optind + 1];
        if (path[0] != '/') {
            cli_errorf(VERB ": PATH `%s` is not absolute", path);
            return CLI_EXIT_USAGE;
        }
    }
    content = path != NULL && !list && path[strlen(path) - 1] != '/';
    wr_buf_printf(&target, "/v1/sandboxes/%s/diff?content=%d", argv[optind], content ? 1 : 0);
    if (against != NULL) {
        wr_buf_puts(&target, "&against=");
        cli_buf_add_escaped(&target, against);
    }
    if (path != NULL) {
        wr_buf_puts(&target, "&path=");
        cli_buf_add_escaped(&target, path);
    }
    if (limit != NULL)
        wr_buf_printf(&target, "&limit=%s", limit);
    if ((http = cli_connect_or_complain(VERB)) == NULL)
        return CLI_EXIT_FAIL;
    if (cli_api(http, "GET", wr_buf_str(&target), NULL, &doc, &err) < 0) {
        cli_errorf(VERB ": %s", err.msg);
        cli_http_close(http);
        return CLI_EXIT_FAIL;
    }
    cli_http_close(http);
    if (json) {
        cli_print_json(doc);
    } else if (content) {
        if (json_is_true(json_object_get(doc, "binary")))
            printf("binary file %s differs (%s)\n", str_of(doc, "path"), str_of(doc, "change"));
        else if (json_is_true(json_object_get(doc, "too_large")))
            printf("file %s is too large to show (%s)\n", str_of(doc, "path"),
                   str_of(doc, "change"));
        else if (*str_of(doc, "diff") == '\0')
            print_change(doc);
        else
            fputs(str_of(doc, "diff"), stdout);
    } else {
        json_t *changes = json_object_get(doc, "changes");
        for (size_t i = 0; i < json_array_size(changes); i++)
            print_change(json_array_get(changes, i));
        if (json_is_true(json_object_get(doc, "truncated")))
            cli_errorf(VERB ": more changes than shown (raise --limit)");
    }
    json_decref(doc);
    return rc;
}
