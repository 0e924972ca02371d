/* SPDX-License-Identifier: Apache-2.0 */
/* warren devices: the host's devices from its CDI specs (docs/devices.md), and whether each is
 * free. A sandbox gets one with `warren create --device NAME`. */
#include <stdio.h>

#include "cli.h"

int cmd_devices(int argc, char **argv)
{
    struct cli_http *http;
    json_t *doc = NULL, *list, *d;
    struct wr_err err;
    bool json = false;
    size_t k;
    int rc, i = cli_simple_opts("devices",
                                "usage: warren devices [-o json]\n\n"
                                "List the host's devices (from its CDI specs): each one's name, "
                                "for\n`warren create --device NAME`, and whether a sandbox holds "
                                "it.\n",
                                argc, argv, &json, &rc);

    if (i < 0)
        return rc;
    if (i < argc) {
        cli_errorf("devices: unexpected argument `%s`", argv[i]);
        return CLI_EXIT_USAGE;
    }
    if ((http = cli_connect_or_complain("devices")) == NULL)
        return CLI_EXIT_FAIL;
    rc = cli_api(http, "GET", "/v1/devices", NULL, &doc, &err) < 0 ? CLI_EXIT_FAIL : 0;
    cli_http_close(http);
    if (rc != 0) {
        cli_errorf("devices: %s", err.msg);
        return rc;
    }
    list = json_object_get(doc, "devices");
    if (!json_is_array(list)) {
        cli_errorf("devices: bad answer from warrend: no `devices` array");
        json_decref(doc);
        return CLI_EXIT_FAIL;
    }
    if (json) {
        cli_print_json(doc);
    } else {
        printf("%-40s %-6s %s\n", "NAME", "IN_USE", "REFUSED");
        json_array_foreach(list, k, d)
        {
            const char *refused = json_string_value(json_object_get(d, "refused"));
            printf("%-40s %-6s %s\n", json_string_value(json_object_get(d, "name")) ?: "?",
                   json_is_true(json_object_get(d, "in_use")) ? "yes" : "no",
                   refused ? refused : "-");
        }
    }
    json_decref(doc);
    return 0;
}
