/* SPDX-License-Identifier: Apache-2.0 */
/* `warren audit [filters] [--json]`: the team's audit trail (GET /v1/audit), newest last, every
 * page up to --limit records. */
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "client.h"

#define VERB "audit"
#define USAGE                                                                                      \
    "usage: warren audit [--from T] [--to T] [--action A] [--object ID] [--team T] [--limit N]\n"  \
    "                    [--json]\n\n"                                                             \
    "Show the audit trail: each state-changing request of the team, with who made it (team and\n"  \
    "key id), from where, the action, its object and the result.\n\n"                              \
    "  --from T, --to T  only records at or after / before T (RFC 3339 UTC, e.g.\n"                \
    "                    2026-12-01T00:00:00Z, or milliseconds since the epoch)\n"                 \
    "  --action A        one action (sandbox.create) or every action under a prefix (sandbox.)\n"  \
    "  --object ID       only records about this object (a sandbox id, a template name, ...)\n"    \
    "  --team T          another team's trail (admin keys; an empty T: every team)\n"              \
    "  --limit N         at most N records (default 100, at most 100000)\n"                        \
    "  --json            print the records as one JSON array\n"

#define PAGE_MAX 1000

/* A filter's value goes into the query as it is: refuse what would need escaping there. */
static bool query_safe(const char *flag, const char *v)
{
    if (strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") ==
        strlen(v))
        return true;
    cli_errorf(VERB ": %s `%s`: only letters, digits and . _ : - may be used", flag, v);
    return false;
}

static const char *str_of(const json_t *o, const char *path)
{
    const json_t *j = o;
    char key[32];

    for (const char *p = path; j != NULL && *p;) {
        size_t n = strcspn(p, ".");
        snprintf(key, sizeof(key), "%.*s", (int)n, p);
        j = json_object_get(j, key);
        p += n + (p[n] == '.');
    }
    return json_string_value(j) ? json_string_value(j) : "-";
}

static void print_record(const json_t *r)
{
    printf("%-24s %-16s %-14s %-22s %-24s %-15s %3" JSON_INTEGER_FORMAT " %s\n", str_of(r, "time"),
           str_of(r, "who.team"), str_of(r, "who.key_id"), str_of(r, "action"),
           str_of(r, "object.id"), str_of(r, "from"),
           json_integer_value(json_object_get(json_object_get(r, "result"), "status")),
           str_of(r, "result.code"));
}

struct filters {
    const char *from, *to, *action, *object, *team;
};

static void add_param(struct wr_buf *q, const char *name, const char *v)
{
    if (v != NULL)
        wr_buf_printf(q, "&%s=%s", name, v);
}

static int list_audit(struct cli_http *http, const struct filters *f, unsigned long limit,
                      bool json)
{
    _cleanup_free_ char *cursor = NULL;
    json_t *all = json_array();
    unsigned long got = 0;
    struct wr_err err;

    if (!json)
        printf("%-24s %-16s %-14s %-22s %-24s %-15s %3s %s\n", "TIME", "TEAM", "KEY", "ACTION",
               "OBJECT", "FROM", "ST", "CODE");
    while (got < limit) {
        unsigned long want = limit - got < PAGE_MAX ? limit - got : PAGE_MAX;
        struct wr_buf target;
        json_t *page = NULL, *events;
        size_t n;
        int rc;

        wr_buf_init(&target);
        wr_buf_printf(&target, "/v1/audit?limit=%lu", want);
        add_param(&target, "from", f->from);
        add_param(&target, "to", f->to);
        add_param(&target, "action", f->action);
        add_param(&target, "object", f->object);
        add_param(&target, "team", f->team);
        add_param(&target, "cursor", cursor);
        rc = cli_api(http, "GET", wr_buf_str(&target), NULL, &page, &err);
        wr_buf_fini(&target);
        if (rc < 0) {
            cli_errorf(VERB ": %s", err.msg);
            json_decref(all);
            return CLI_EXIT_FAIL;
        }
        events = json_object_get(page, "events");
        n = json_array_size(events);
        for (size_t i = 0; i < n; i++) {
            if (json)
                json_array_append(all, json_array_get(events, i));
            else
                print_record(json_array_get(events, i));
        }
        got += n;
        free(cursor);
        cursor = json_string_value(json_object_get(page, "next_cursor"))
                     ? xstrdup(json_string_value(json_object_get(page, "next_cursor")))
                     : NULL;
        json_decref(page);
        if (cursor == NULL || n == 0)
            break;
    }
    if (json)
        cli_print_json(all);
    json_decref(all);
    return 0;
}

int cmd_audit(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"from", required_argument, NULL, 'F'},   {"to", required_argument, NULL, 'T'},
        {"action", required_argument, NULL, 'a'}, {"object", required_argument, NULL, 'O'},
        {"team", required_argument, NULL, 't'},   {"limit", required_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'j'},         {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    struct filters f = {0};
    struct cli_http *http;
    unsigned long limit = 100;
    bool json = false;
    char *end;
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'F':
        case 'T':
        case 'a':
        case 'O':
        case 't': {
            const char **slot = c == 'F'   ? &f.from
                                : c == 'T' ? &f.to
                                : c == 'a' ? &f.action
                                : c == 'O' ? &f.object
                                           : &f.team;
            const char *flag = c == 'F'   ? "--from"
                               : c == 'T' ? "--to"
                               : c == 'a' ? "--action"
                               : c == 'O' ? "--object"
                                          : "--team";
            if (!query_safe(flag, optarg))
                return CLI_EXIT_USAGE;
            *slot = optarg;
            break;
        }
        case 'n':
            limit = strtoul(optarg, &end, 10);
            if (optarg[0] < '0' || optarg[0] > '9' || *end != '\0' || limit == 0 ||
                limit > 100000) {
                cli_errorf(VERB ": --limit `%s` must be 1 to 100000", optarg);
                return CLI_EXIT_USAGE;
            }
            break;
        case 'j':
            json = true;
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
    if (optind != argc) {
        cli_errorf(VERB ": takes no arguments, only flags (warren audit --help)");
        return CLI_EXIT_USAGE;
    }
    if ((http = cli_connect_or_complain(VERB)) == NULL)
        return CLI_EXIT_FAIL;
    rc = list_audit(http, &f, limit, json);
    cli_http_close(http);
    return rc;
}
