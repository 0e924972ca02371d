/* SPDX-License-Identifier: Apache-2.0 */
/* `warren volume create|ls|info|rm`: the team's named volumes (/v1/volumes). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "cli.h"
#include "client.h"

#define VOLUME_USAGE                                                                               \
    "usage: warren volume create NAME [-o json]\n"                                                 \
    "       warren volume ls [-o json]\n"                                                          \
    "       warren volume info NAME [-o json]\n"                                                   \
    "       warren volume rm NAME...\n\n"                                                          \
    "Named volumes: directories of the team that outlive sandboxes. Mount one with\n"              \
    "`warren create --volume NAME:/path[:ro]`. rm refuses a volume that a sandbox uses.\n"

/* Run one request per name in argv[i..argc) and print each answer (or the name, for rm). */
static int each_name(const char *verb, const char *method, int argc, char **argv, int i, bool json)
{
    struct cli_http *http;
    int rc = 0;

    if (i >= argc || (strcmp(method, "DELETE") != 0 && argc - i != 1)) {
        cli_errorf("volume %s: want %s volume name (see warren volume --help)", verb,
                   strcmp(method, "DELETE") == 0 ? "at least one" : "exactly one");
        return CLI_EXIT_USAGE;
    }
    if ((http = cli_connect_or_complain("volume")) == NULL)
        return CLI_EXIT_FAIL;
    for (; i < argc; i++) {
        _cleanup_free_ char *target = xasprintf("/v1/volumes/%s", argv[i]);
        json_t *body = NULL, *out = NULL;
        struct wr_err err;

        if (strcmp(method, "POST") == 0) {
            body = json_pack("{s:s}", "name", argv[i]);
            free(target);
            target = xstrdup("/v1/volumes");
        }
        /* A name the server would refuse cannot be a path segment either. */
        if (strchr(argv[i], '/') != NULL || argv[i][0] == '\0') {
            cli_errorf("volume %s: `%s` is not a volume name", verb, argv[i]);
            rc = CLI_EXIT_USAGE;
        } else if (cli_api(http, method, target, body, &out, &err) < 0) {
            cli_errorf("volume %s %s: %s", verb, argv[i], err.msg);
            rc = CLI_EXIT_FAIL;
        } else if (json && out != NULL) {
            cli_print_json(out);
        } else if (strcmp(method, "GET") == 0) {
            printf("name:       %s\ncreated:    %s\ndisk_bytes: %" PRId64 "\n",
                   json_string_value(json_object_get(out, "name")) ?: "",
                   json_string_value(json_object_get(out, "created_at")) ?: "",
                   (int64_t)json_integer_value(json_object_get(out, "disk_bytes")));
        } else {
            printf("%s\n", argv[i]);
        }
        json_decref(body);
        json_decref(out);
    }
    cli_http_close(http);
    return rc;
}

static int volume_ls(bool json)
{
    struct cli_http *http;
    json_t *out = NULL, *v;
    struct wr_err err;
    size_t i;

    if ((http = cli_connect_or_complain("volume")) == NULL)
        return CLI_EXIT_FAIL;
    if (cli_api(http, "GET", "/v1/volumes", NULL, &out, &err) < 0) {
        cli_errorf("volume ls: %s", err.msg);
        cli_http_close(http);
        return CLI_EXIT_FAIL;
    }
    if (json) {
        cli_print_json(out);
    } else {
        printf("%-40s %s\n", "NAME", "CREATED");
        json_array_foreach(json_object_get(out, "volumes"), i, v)
            printf("%-40s %s\n", json_string_value(json_object_get(v, "name")) ?: "",
                   json_string_value(json_object_get(v, "created_at")) ?: "");
    }
    json_decref(out);
    cli_http_close(http);
    return 0;
}

int cmd_volume(int argc, char **argv)
{
    const char *sub;
    bool json = false;
    int rc, i;

    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(VOLUME_USAGE, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_EXIT_USAGE : 0;
    }
    sub = argv[1];
    if (strcmp(sub, "create") != 0 && strcmp(sub, "ls") != 0 && strcmp(sub, "info") != 0 &&
        strcmp(sub, "rm") != 0) {
        cli_errorf("volume: unknown command `%s` (want create, ls, info or rm)", sub);
        return CLI_EXIT_USAGE;
    }
    i = cli_simple_opts(sub, VOLUME_USAGE, argc - 1, argv + 1, strcmp(sub, "rm") ? &json : NULL,
                        &rc);
    if (i < 0)
        return rc;
    i += 1; /* back to argv's numbering */
    if (strcmp(sub, "ls") == 0) {
        if (i < argc) {
            cli_errorf("volume ls: unexpected argument `%s`", argv[i]);
            return CLI_EXIT_USAGE;
        }
        return volume_ls(json);
    }
    if (strcmp(sub, "create") == 0)
        return each_name(sub, "POST", argc, argv, i, json);
    if (strcmp(sub, "info") == 0)
        return each_name(sub, "GET", argc, argv, i, json);
    return each_name(sub, "DELETE", argc, argv, i, json);
}
