/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox's network from the command line: the flags `create` and `network` share
 * (--internet, --no-internet, --allow-out, --deny-out, --max-connections, --private-ports), and
 * `warren network ID [flags]`, which shows the policy or, given flags, replaces it. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "../util/cleanup.h"
#include "../util/parse.h"
#include "../util/xalloc.h"
#include "cli.h"
#include "client.h"

/* Add the entries of a comma-separated list to net[key]. */
static void add_list(json_t *net, const char *key, const char *arg)
{
    _cleanup_free_ char *copy = xstrdup(arg);
    json_t *a = json_object_get(net, key);
    char *save = NULL;

    if (a == NULL) {
        a = json_array();
        json_object_set_new(net, key, a);
    }
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save))
        json_array_append_new(a, json_string(t));
}

int cli_net_flag(const char *verb, json_t *net, int opt, const char *arg)
{
    struct wr_err err;
    uint64_t v;

    switch (opt) {
    case CLI_NET_INTERNET:
        json_object_set_new(net, "internet", json_true());
        return 0;
    case CLI_NET_NO_INTERNET:
        json_object_set_new(net, "internet", json_false());
        return 0;
    case CLI_NET_ALLOW:
        add_list(net, "allow_out", arg);
        return 0;
    case CLI_NET_DENY:
        add_list(net, "deny_out", arg);
        return 0;
    case CLI_NET_MAXCONN:
        if (wr_parse_uint(arg, 1000000, &v, &err) < 0 || v == 0) {
            cli_errorf("%s: --max-connections `%s` must be from 1 to 1000000", verb, arg);
            return -1;
        }
        json_object_set_new(net, "max_connections", json_integer((json_int_t)v));
        return 0;
    case CLI_NET_PRIVATE:
        json_object_set_new(net, "ports", json_pack("{s:b}", "public", false));
        return 0;
    case CLI_NET_NONE:
        json_object_set_new(net, "enabled", json_false());
        return 0;
    }
    return -1;
}

static void print_list(const char *label, json_t *a)
{
    size_t i;
    json_t *v;

    printf("%-12s", label);
    if (json_array_size(a) == 0)
        printf("-");
    json_array_foreach(a, i, v) printf("%s%s", i ? ", " : "", json_string_value(v) ?: "?");
    printf("\n");
}

void cli_net_print(json_t *n)
{
    json_t *ports = json_object_get(n, "ports");

    if (!json_is_true(json_object_get(n, "enabled"))) {
        printf("network:    loopback only\n");
        return;
    }
    printf("network:    %s, address %s\n",
           json_is_true(json_object_get(n, "internet")) ? "internet on" : "internet off",
           json_string_value(json_object_get(n, "address")) ?: "-");
    print_list("allow_out:", json_object_get(n, "allow_out"));
    print_list("deny_out:", json_object_get(n, "deny_out"));
    printf("max conns:  %lld\n",
           (long long)json_integer_value(json_object_get(n, "max_connections")));
    printf("ports:      %s\n",
           json_is_false(json_object_get(ports, "public")) ? "private (token)" : "public");
}

int cmd_network(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_NET_OPTIONS,
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    json_t *net = json_object(), *out = NULL;
    struct cli_http *http = NULL;
    _cleanup_free_ char *target = NULL;
    struct wr_err err;
    bool json = false;
    int c, rc = CLI_EXIT_USAGE;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        if (c >= CLI_NET_INTERNET && c < CLI_NET_NONE) {
            if (cli_net_flag("network", net, c, optarg) < 0)
                goto out;
        } else if (c == 'o') {
            if (cli_output_arg("network", optarg, &json) < 0)
                goto out;
        } else if (c == 'h') {
            printf("usage: warren network ID [options] [-o json]\n\n"
                   "Show a sandbox's network, or replace its egress policy: the options given\n"
                   "are the whole new policy (what they leave out is cleared).\n\n" CLI_NET_HELP);
            rc = 0;
            goto out;
        } else {
            rc = cli_bad_option("network", argv);
            goto out;
        }
    }
    if (argc - optind != 1) {
        cli_errorf("network: usage: warren network ID [options]");
        goto out;
    }
    if (!cli_check_id("network", argv[optind]))
        goto out;
    rc = CLI_EXIT_FAIL;
    if ((http = cli_connect_or_complain("network")) == NULL)
        goto out;
    target = xasprintf("/v1/sandboxes/%s/network", argv[optind]);
    if (cli_api(http, json_object_size(net) ? "PUT" : "GET", target,
                json_object_size(net) ? net : NULL, &out, &err) < 0) {
        cli_errorf("network: %s", err.msg);
        goto out;
    }
    if (json)
        cli_print_json(out);
    else
        cli_net_print(out);
    rc = 0;
out:
    json_decref(net);
    json_decref(out);
    cli_http_close(http);
    return rc;
}
