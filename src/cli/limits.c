/* SPDX-License-Identifier: Apache-2.0 */
/* `warren limits [TEAM] [flags]`: a team's limits (GET /v1/teams/{team}/limits), and with flags
 * (admin keys) its overrides changed: the flags given are merged into the overrides it has and
 * the whole set is PUT back; --reset gives it the daemon's defaults (DELETE). */
#include "cli.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../util/cleanup.h"
#include "../util/json_cleanup.h"
#include "../util/parse.h"
#include "../util/xalloc.h"
#include "client.h"

#define VERB "limits"
#define USAGE                                                                                      \
    "usage: warren limits [TEAM] [--requests RATE/s:BURST] [--creates RATE/s:BURST]\n"             \
    "                     [--bytes SIZE/s:SIZE] [--max-sandboxes N] [--max-memory SIZE]\n"         \
    "                     [--reset] [--json]\n\n"                                                  \
    "Show a team's limits (your key's team without TEAM): its buckets of API requests, creates\n"  \
    "(a fork of N costs N) and file bytes, and its quotas of concurrent sandboxes and memory.\n"   \
    "With flags (admin keys), change the team's overrides of the daemon's defaults; what no\n"     \
    "flag names keeps its override.\n\n"                                                           \
    "  --requests RATE/s:BURST  API requests, e.g. 100/s:200 (off: no bucket)\n"                   \
    "  --creates RATE/s:BURST   creates, e.g. 5/s:20 (off: no bucket)\n"                           \
    "  --bytes SIZE/s:SIZE      file bytes up and down, e.g. 64M/s:1G (off: no bucket)\n"          \
    "  --max-sandboxes N        concurrent sandboxes (0: no quota)\n"                              \
    "  --max-memory SIZE        the sum of their memory limits, e.g. 8G (0: no quota)\n"           \
    "  --reset                  drop every override: the daemon's defaults again\n"                \
    "  --json                   print the answer as JSON\n"

/* The caller's team, from GET /v1/version. */
static char *own_team(struct cli_http *http, struct wr_err *err)
{
    _cleanup_json_ json_t *v = NULL;
    const char *t;

    if (cli_api(http, "GET", "/v1/version", NULL, &v, err) < 0)
        return NULL;
    t = json_string_value(json_object_get(v, "team"));
    if (t == NULL) {
        wr_err_set(err, WR_EUNSUPPORTED, 0, "the daemon does not say your team: name it");
        return NULL;
    }
    return xstrdup(t);
}

static void print_bucket(const char *name, const json_t *b, bool bytes)
{
    double rate = json_number_value(json_object_get(b, "rate"));
    json_int_t burst = json_integer_value(json_object_get(b, "burst"));

    if (rate <= 0)
        printf("%-14s off\n", name);
    else if (bytes)
        printf("%-14s %.0f bytes/s, burst %" JSON_INTEGER_FORMAT " bytes\n", name, rate, burst);
    else
        printf("%-14s %g/s, burst %" JSON_INTEGER_FORMAT "\n", name, rate, burst);
}

static void print_limits(const json_t *l)
{
    json_int_t n = json_integer_value(json_object_get(l, "max_sandboxes"));
    json_int_t mb = json_integer_value(json_object_get(l, "max_memory_mb"));
    const json_t *ov = json_object_get(l, "overrides");
    const char *k;
    json_t *v;
    bool first = true;

    printf("%-14s %s\n", "team", json_string_value(json_object_get(l, "team")));
    print_bucket("requests", json_object_get(l, "requests"), false);
    print_bucket("creates", json_object_get(l, "creates"), false);
    print_bucket("bytes", json_object_get(l, "bytes"), true);
    if (n > 0)
        printf("%-14s %" JSON_INTEGER_FORMAT "\n", "max_sandboxes", n);
    else
        printf("%-14s none\n", "max_sandboxes");
    if (mb > 0)
        printf("%-14s %" JSON_INTEGER_FORMAT " MiB\n", "max_memory", mb);
    else
        printf("%-14s none\n", "max_memory");
    printf("%-14s ", "overrides");
    json_object_foreach((json_t *)ov, k, v)
    {
        printf("%s%s", first ? "" : ", ", k);
        first = false;
    }
    printf("%s\n", first ? "none (the daemon's defaults)" : "");
}

/* The flags given, as overrides to merge. */
struct changes {
    json_t *set; /* name -> value */
    bool reset;
};

static int add_bucket(struct changes *ch, const char *name, const char *arg, bool bytes)
{
    struct wr_err err;
    double rate;
    uint64_t burst;

    if (wr_parse_rate(arg, bytes, &rate, &burst, &err) < 0) {
        cli_errorf(VERB ": --%s %s", name, err.msg);
        return -1;
    }
    json_object_set_new(ch->set, name,
                        json_pack("{s:f,s:I}", "rate", rate, "burst", (json_int_t)burst));
    return 0;
}

static int add_count(struct changes *ch, const char *name, const char *arg, bool size)
{
    struct wr_err err;
    uint64_t v = 0;

    if (size && strcmp(arg, "0") != 0) {
        if (wr_parse_size(arg, &v, &err) < 0) {
            cli_errorf(VERB ": --max-memory %s", err.msg);
            return -1;
        }
        v = (v + (1u << 20) - 1) >> 20; /* MiB, rounded up */
    } else if (!size && wr_parse_uint(arg, 1000000, &v, &err) < 0) {
        cli_errorf(VERB ": --max-sandboxes %s", err.msg);
        return -1;
    }
    json_object_set_new(ch->set, name, json_integer((json_int_t)v));
    return 0;
}

static int apply(struct cli_http *http, const char *team, const struct changes *ch, bool json)
{
    _cleanup_free_ char *path = xasprintf("/v1/teams/%s/limits", team);
    _cleanup_json_ json_t *cur = NULL, *out = NULL;
    struct wr_err err;

    if (ch->reset && cli_api(http, "DELETE", path, NULL, NULL, &err) < 0)
        goto fail;
    if (json_object_size(ch->set) > 0) {
        json_t *ov;
        if (cli_api(http, "GET", path, NULL, &cur, &err) < 0)
            goto fail;
        ov = json_deep_copy(json_object_get(cur, "overrides"));
        if (ov == NULL)
            ov = json_object();
        json_object_update(ov, ch->set);
        if (cli_api(http, "PUT", path, ov, &out, &err) < 0) {
            json_decref(ov);
            goto fail;
        }
        json_decref(ov);
    } else if (cli_api(http, "GET", path, NULL, &out, &err) < 0) {
        goto fail;
    }
    if (json)
        cli_print_json(out);
    else
        print_limits(out);
    return 0;
fail:
    cli_errorf(VERB ": %s", err.msg);
    return CLI_EXIT_FAIL;
}

int cmd_limits(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"requests", required_argument, NULL, 'r'},
        {"creates", required_argument, NULL, 'c'},
        {"bytes", required_argument, NULL, 'b'},
        {"max-sandboxes", required_argument, NULL, 'n'},
        {"max-memory", required_argument, NULL, 'm'},
        {"reset", no_argument, NULL, 'R'},
        {"json", no_argument, NULL, 'j'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    _cleanup_json_ json_t *set = json_object();
    _cleanup_free_ char *team = NULL;
    struct changes ch = {.set = set};
    struct cli_http *http;
    struct wr_err err;
    bool json = false;
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
        case 'c':
        case 'b':
            if (add_bucket(&ch,
                           c == 'r'   ? "requests"
                           : c == 'c' ? "creates"
                                      : "bytes",
                           optarg, c == 'b') < 0)
                return CLI_EXIT_USAGE;
            break;
        case 'n':
        case 'm':
            if (add_count(&ch, c == 'n' ? "max_sandboxes" : "max_memory_mb", optarg, c == 'm') < 0)
                return CLI_EXIT_USAGE;
            break;
        case 'R':
            ch.reset = true;
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
    if (argc - optind > 1) {
        cli_errorf(VERB ": takes at most one team (warren limits --help)");
        return CLI_EXIT_USAGE;
    }
    if ((http = cli_connect_or_complain(VERB)) == NULL)
        return CLI_EXIT_FAIL;
    if (optind < argc) {
        team = xstrdup(argv[optind]);
    } else if ((team = own_team(http, &err)) == NULL) {
        cli_errorf(VERB ": %s", err.msg);
        cli_http_close(http);
        return CLI_EXIT_FAIL;
    }
    if (strspn(team, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
            strlen(team) ||
        *team == '\0') {
        cli_errorf(VERB ": team `%s`: only letters, digits and . _ - may be used", team);
        cli_http_close(http);
        return CLI_EXIT_USAGE;
    }
    rc = apply(http, team, &ch, json);
    cli_http_close(http);
    return rc;
}
