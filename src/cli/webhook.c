/* SPDX-License-Identifier: Apache-2.0 */
/* `warren webhook add|list|rm|deliveries|redeliver`: the team's webhooks (/v1/webhooks) and
 * their deliveries, the dead-letter record among them. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "cli.h"
#include "client.h"

#define VERB "webhook"
#define USAGE                                                                                      \
    "usage: warren webhook add URL [--event TYPE]... [--name NAME] [--secret S] [--disabled]\n"    \
    "                              [-o json]\n"                                                    \
    "       warren webhook list [-o json]\n"                                                       \
    "       warren webhook rm ID...\n"                                                             \
    "       warren webhook deliveries ID [--state pending|delivered|dead] [-o json]\n"             \
    "       warren webhook redeliver ID DELIVERY...\n\n"                                           \
    "Webhooks: each lifecycle event of the team (or of the --event types: sandbox.created,\n"      \
    "... or a prefix such as sandbox.) is POSTed as JSON to URL, signed with the secret\n"         \
    "(Warren-Signature: t=<unix s>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">). add prints the\n"      \
    "secret once; without --secret the daemon makes one. A delivery that fails is retried\n"       \
    "with backoff; after its last attempt it is dead, listed by `deliveries --state dead`\n"       \
    "and sent again by redeliver.\n"

#define EVENTS_MAX 32

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "-";
}

static int run(const char *what, const char *method, const char *target, json_t *body, json_t **out)
{
    struct cli_http *http;
    struct wr_err err;
    int rc = 0;

    if ((http = cli_connect_or_complain(VERB)) == NULL) {
        json_decref(body);
        return CLI_EXIT_FAIL;
    }
    if (cli_api(http, method, target, body, out, &err) < 0) {
        cli_errorf(VERB " %s: %s", what, err.msg);
        rc = CLI_EXIT_FAIL;
    }
    json_decref(body);
    cli_http_close(http);
    return rc;
}

static bool id_ok(const char *id)
{
    return id[0] != '\0' && strlen(id) < 64 &&
           strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") ==
               strlen(id);
}

static int webhook_add(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"event", required_argument, NULL, 'e'},  {"name", required_argument, NULL, 'n'},
        {"secret", required_argument, NULL, 's'}, {"disabled", no_argument, NULL, 'd'},
        {"json", no_argument, NULL, 'j'},         {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    json_t *body = json_object(), *events = json_array(), *out = NULL;
    bool json = false;
    int c, rc;

    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'e':
            if (json_array_size(events) == EVENTS_MAX) {
                cli_errorf(VERB " add: at most %d --event", EVENTS_MAX);
                goto usage;
            }
            json_array_append_new(events, json_string(optarg));
            break;
        case 'n':
            json_object_set_new(body, "name", json_string(optarg));
            break;
        case 's':
            json_object_set_new(body, "secret", json_string(optarg));
            break;
        case 'd':
            json_object_set_new(body, "enabled", json_false());
            break;
        case 'j':
            json = true;
            break;
        case 'o':
            if (cli_output_arg(VERB, optarg, &json) < 0)
                goto usage;
            break;
        case 'h':
            printf(USAGE);
            json_decref(body);
            json_decref(events);
            return 0;
        default:
            json_decref(body);
            json_decref(events);
            return cli_bad_option(VERB, argv);
        }
    }
    if (argc - optind != 1) {
        cli_errorf(VERB " add: want exactly one URL (see warren webhook --help)");
        goto usage;
    }
    json_object_set_new(body, "url", json_string(argv[optind]));
    json_object_set_new(body, "events", events);
    events = NULL;
    if ((rc = run("add", "POST", "/v1/webhooks", body, &out)) != 0)
        return rc;
    if (json)
        cli_print_json(out);
    else
        printf("id:     %s\nurl:    %s\nsecret: %s\n(the secret is not shown again)\n",
               str(out, "id"), str(out, "url"), str(out, "secret"));
    json_decref(out);
    return 0;
usage:
    json_decref(body);
    json_decref(events);
    return CLI_EXIT_USAGE;
}

static int webhook_list(bool json)
{
    json_t *out = NULL, *w, *e;
    size_t i, k;
    int rc;

    if ((rc = run("list", "GET", "/v1/webhooks", NULL, &out)) != 0)
        return rc;
    if (json) {
        cli_print_json(out);
    } else {
        printf("%-36s %-8s %-7s %-30s %s\n", "ID", "TEAM", "ENABLED", "EVENTS", "URL");
        json_array_foreach(json_object_get(out, "webhooks"), i, w)
        {
            char evs[256] = "";
            size_t n = 0;
            json_array_foreach(json_object_get(w, "events"), k, e)
            {
                n += (size_t)snprintf(evs + n, n < sizeof(evs) ? sizeof(evs) - n : 0, "%s%s",
                                      k ? "," : "", json_string_value(e));
                if (n >= sizeof(evs))
                    break;
            }
            printf("%-36s %-8s %-7s %-30s %s\n", str(w, "id"), str(w, "team"),
                   json_is_true(json_object_get(w, "enabled")) ? "yes" : "no",
                   evs[0] ? evs : "(all)", str(w, "url"));
        }
    }
    json_decref(out);
    return 0;
}

static int webhook_deliveries(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"state", required_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *state = NULL;
    _cleanup_free_ char *cursor = NULL;
    json_t *all = json_array();
    bool json = false;
    int c, rc = 0;

    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (strcmp(optarg, "pending") != 0 && strcmp(optarg, "delivered") != 0 &&
                strcmp(optarg, "dead") != 0) {
                cli_errorf(VERB " deliveries: --state must be pending, delivered or dead");
                json_decref(all);
                return CLI_EXIT_USAGE;
            }
            state = optarg;
            break;
        case 'j':
            json = true;
            break;
        case 'o':
            if (cli_output_arg(VERB, optarg, &json) < 0) {
                json_decref(all);
                return CLI_EXIT_USAGE;
            }
            break;
        case 'h':
            printf(USAGE);
            json_decref(all);
            return 0;
        default:
            json_decref(all);
            return cli_bad_option(VERB, argv);
        }
    }
    if (argc - optind != 1 || !id_ok(argv[optind])) {
        cli_errorf(VERB " deliveries: want one webhook id (see warren webhook list)");
        json_decref(all);
        return CLI_EXIT_USAGE;
    }
    if (!json)
        printf("%-8s %-10s %-20s %-9s %3s %-24s %s\n", "ID", "EVENT", "TYPE", "STATE", "TRY",
               "LAST ATTEMPT", "LAST ERROR");
    for (;;) {
        _cleanup_free_ char *target = xasprintf(
            "/v1/webhooks/%s/deliveries?limit=1000%s%s%s%s", argv[optind], state ? "&state=" : "",
            state ? state : "", cursor ? "&after=" : "", cursor ? cursor : "");
        json_t *out = NULL, *d;
        size_t i, n;

        if ((rc = run("deliveries", "GET", target, NULL, &out)) != 0)
            break;
        n = json_array_size(json_object_get(out, "deliveries"));
        json_array_foreach(json_object_get(out, "deliveries"), i, d)
        {
            if (json) {
                json_array_append(all, d);
                continue;
            }
            printf("%-8" JSON_INTEGER_FORMAT " %-10s %-20s %-9s %3" JSON_INTEGER_FORMAT
                   " %-24s %s\n",
                   json_integer_value(json_object_get(d, "id")), str(d, "event_id"), str(d, "type"),
                   str(d, "state"), json_integer_value(json_object_get(d, "attempts")),
                   str(d, "last_attempt_at"),
                   json_string_value(json_object_get(d, "last_error")) &&
                           *json_string_value(json_object_get(d, "last_error"))
                       ? json_string_value(json_object_get(d, "last_error"))
                       : "-");
        }
        free(cursor);
        cursor = json_string_value(json_object_get(out, "next_cursor"))
                     ? xstrdup(json_string_value(json_object_get(out, "next_cursor")))
                     : NULL;
        json_decref(out);
        if (cursor == NULL || n == 0)
            break;
    }
    if (json && rc == 0)
        cli_print_json(all);
    json_decref(all);
    return rc;
}

int cmd_webhook(int argc, char **argv)
{
    const char *sub;
    bool json = false;
    int rc = 0, i;

    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(USAGE, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_EXIT_USAGE : 0;
    }
    sub = argv[1];
    if (strcmp(sub, "add") == 0)
        return webhook_add(argc - 1, argv + 1);
    if (strcmp(sub, "deliveries") == 0)
        return webhook_deliveries(argc - 1, argv + 1);
    if (strcmp(sub, "list") != 0 && strcmp(sub, "ls") != 0 && strcmp(sub, "rm") != 0 &&
        strcmp(sub, "redeliver") != 0) {
        cli_errorf(VERB ": unknown command `%s` (want add, list, rm, deliveries or redeliver)",
                   sub);
        return CLI_EXIT_USAGE;
    }
    i = cli_simple_opts(sub, USAGE, argc - 1, argv + 1,
                        strcmp(sub, "list") == 0 || strcmp(sub, "ls") == 0 ? &json : NULL, &rc);
    if (i < 0)
        return rc;
    i += 1;
    if (strcmp(sub, "list") == 0 || strcmp(sub, "ls") == 0) {
        if (i < argc) {
            cli_errorf(VERB " list: unexpected argument `%s`", argv[i]);
            return CLI_EXIT_USAGE;
        }
        return webhook_list(json);
    }
    if (strcmp(sub, "rm") == 0) {
        if (i >= argc) {
            cli_errorf(VERB " rm: want at least one webhook id");
            return CLI_EXIT_USAGE;
        }
        for (; i < argc; i++) {
            _cleanup_free_ char *target = NULL;
            if (!id_ok(argv[i])) {
                cli_errorf(VERB " rm: `%s` is not a webhook id", argv[i]);
                rc = CLI_EXIT_USAGE;
                continue;
            }
            target = xasprintf("/v1/webhooks/%s", argv[i]);
            if (run("rm", "DELETE", target, NULL, NULL) != 0)
                rc = CLI_EXIT_FAIL;
            else
                printf("%s\n", argv[i]);
        }
        return rc;
    }
    /* redeliver ID DELIVERY... */
    if (argc - i < 2 || !id_ok(argv[i])) {
        cli_errorf(VERB " redeliver: want a webhook id and at least one delivery id");
        return CLI_EXIT_USAGE;
    }
    for (int k = i + 1; k < argc; k++) {
        _cleanup_free_ char *target = NULL;
        if (strspn(argv[k], "0123456789") != strlen(argv[k]) || argv[k][0] == '\0') {
            cli_errorf(VERB " redeliver: `%s` is not a delivery id", argv[k]);
            rc = CLI_EXIT_USAGE;
            continue;
        }
        target = xasprintf("/v1/webhooks/%s/deliveries/%s/redeliver", argv[i], argv[k]);
        if (run("redeliver", "POST", target, NULL, NULL) != 0)
            rc = CLI_EXIT_FAIL;
        else
            printf("%s\n", argv[k]);
    }
    return rc;
}
