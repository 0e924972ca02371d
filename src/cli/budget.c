/* SPDX-License-Identifier: Apache-2.0 */
/* `warren budget TEAM [--hard N] [--soft N] [--unit U] [--period P] [--delete]` and
 * `warren budget --sandbox ID ...`: show or set a team's or a sandbox's budget
 * (docs/usage.md, "Budgets"). */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/buf.h"
#include "../util/cleanup.h"
#include "client.h"

#define VERB "budget"
#define USAGE                                                                                      \
    "usage: warren budget TEAM [--hard N] [--soft N] [--unit vcpu_seconds|money]\n"                \
    "                     [--period month|total] [--delete] [--json]\n"                            \
    "       warren budget --sandbox ID [--hard N] [--soft N] [--unit U] [--delete] [--json]\n\n"   \
    "Show a team's (or a sandbox's) budget and what was spent against it; with --hard or\n"        \
    "--soft, set it (a team's: an admin key), with --delete remove it. Past the soft cap the\n"    \
    "team's responses carry Warren-Budget; past the hard cap its creates get 429 (reason\n"        \
    "budget), and a sandbox past its own is paused to disk.\n\n"                                   \
    "      --hard N         the hard cap, in the unit\n"                                           \
    "      --soft N         the soft cap (a warning)\n"                                            \
    "      --unit U         vcpu_seconds (billed, default) or money (the operator's prices)\n"     \
    "      --period P       a team's window: month (calendar month, UTC; default) or total\n"      \
    "      --sandbox ID     a sandbox's own budget (its window is its life)\n"                     \
    "      --delete         remove the budget\n"                                                   \
    "      --json           print the JSON answer\n"

static int cap_arg(const char *arg, double *out)
{
    char *end;

    errno = 0;
    *out = strtod(arg, &end);
    if (errno != 0 || end == arg || *end != '\0' || !(*out >= 0)) {
        cli_errorf(VERB ": `%s`: a cap is a number >= 0", arg);
        return -1;
    }
    return 0;
}

static void print_cap(const char *name, const json_t *b)
{
    const json_t *v = json_object_get(b, name);

    if (json_is_number(v))
        printf("%s: %g\n", name, json_number_value(v));
    else
        printf("%s: none\n", name);
}

static void print_budget(const json_t *body)
{
    const json_t *b = json_object_get(body, "budget");
    const char *unit = json_string_value(json_object_get(b, "unit"));
    const char *cur = json_string_value(json_object_get(body, "currency"));
    const char *s;

    if (!json_is_object(b)) {
        printf("no budget\n");
        return;
    }
    printf("unit: %s%s%s\n", unit ? unit : "?",
           unit && strcmp(unit, "money") == 0 && cur ? " " : "",
           unit && strcmp(unit, "money") == 0 && cur ? cur : "");
    if ((s = json_string_value(json_object_get(b, "period"))) != NULL)
        printf("period: %s\n", s);
    print_cap("soft", b);
    print_cap("hard", b);
    printf("used: %g\n", json_number_value(json_object_get(body, "used")));
    if ((s = json_string_value(json_object_get(body, "state"))) != NULL)
        printf("state: %s\n", s);
    if ((s = json_string_value(json_object_get(body, "period_end"))) != NULL)
        printf("period: %s to %s\n", json_string_value(json_object_get(body, "period_start")), s);
}

int cmd_budget(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"hard", required_argument, NULL, 'H'},
        {"soft", required_argument, NULL, 'S'},
        {"unit", required_argument, NULL, 'u'},
        {"period", required_argument, NULL, 'p'},
        {"sandbox", required_argument, NULL, 's'},
        {"delete", no_argument, NULL, 'd'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *unit = NULL, *period = NULL, *sandbox = NULL, *team = NULL;
    double hard = -1, soft = -1;
    bool del = false, json = false;
    _cleanup_(wr_buf_finip) struct wr_buf target = {0};
    struct cli_http *http;
    struct wr_err err;
    json_t *req = NULL, *body = NULL;
    int c, rc = 0;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'H':
            if (cap_arg(optarg, &hard) < 0)
                return CLI_EXIT_USAGE;
            break;
        case 'S':
            if (cap_arg(optarg, &soft) < 0)
                return CLI_EXIT_USAGE;
            break;
        case 'u':
            unit = optarg;
            break;
        case 'p':
            period = optarg;
            break;
        case 's':
            sandbox = optarg;
            break;
        case 'd':
            del = true;
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
    if (sandbox == NULL && optind + 1 == argc)
        team = argv[optind++];
    if (optind != argc || (sandbox == NULL) == (team == NULL)) {
        cli_errorf(VERB ": name one TEAM, or --sandbox ID (see warren budget --help)");
        return CLI_EXIT_USAGE;
    }
    if (sandbox != NULL && !cli_check_id(VERB, sandbox))
        return CLI_EXIT_USAGE;
    if (del && (hard >= 0 || soft >= 0)) {
        cli_errorf(VERB ": --delete takes no caps");
        return CLI_EXIT_USAGE;
    }
    if (sandbox != NULL) {
        wr_buf_puts(&target, "/v1/sandboxes/");
        cli_buf_add_escaped(&target, sandbox);
    } else {
        wr_buf_puts(&target, "/v1/teams/");
        cli_buf_add_escaped(&target, team);
    }
    wr_buf_puts(&target, "/budget");
    if (hard >= 0 || soft >= 0 || unit != NULL || period != NULL) {
        req = json_object();
        if (hard >= 0)
            json_object_set_new(req, "hard", json_real(hard));
        if (soft >= 0)
            json_object_set_new(req, "soft", json_real(soft));
        if (unit != NULL)
            json_object_set_new(req, "unit", json_string(unit));
        if (period != NULL)
            json_object_set_new(req, "period", json_string(period));
    }
    if ((http = cli_connect_or_complain(VERB)) == NULL) {
        json_decref(req);
        return CLI_EXIT_FAIL;
    }
    if (cli_api(http,
                del           ? "DELETE"
                : req != NULL ? "PUT"
                              : "GET",
                wr_buf_str(&target), req, &body, &err) < 0) {
        cli_errorf(VERB ": %s", err.msg);
        rc = CLI_EXIT_FAIL;
    } else if (del) {
        if (json)
            printf("{}\n");
    } else if (json) {
        cli_print_json(body);
    } else {
        print_budget(body);
    }
    json_decref(body);
    json_decref(req);
    cli_http_close(http);
    return rc;
}
