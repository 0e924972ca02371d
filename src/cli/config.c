/* SPDX-License-Identifier: Apache-2.0 */
/* `warren config` and `warren login`: the endpoint and API key, kept in
 * $XDG_CONFIG_HOME/warren/config.json (default ~/.config/warren/config.json), mode 0600. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/xalloc.h"
#include "client.h"

/* Set (or with value NULL, remove) keys of the config file, keeping the others; written to a
 * temporary file with mode 0600 and renamed over, so a crash leaves the old file or the new. */
static int config_update(const char *path, const char *endpoint, const char *key, bool set_key,
                         struct wr_err *err)
{
    _cleanup_free_ char *dir = xstrdup(path), *tmp = xasprintf("%s.tmp.%d", path, (int)getpid());
    _cleanup_close_ int fd = -1;
    json_t *j = NULL;
    json_error_t je;
    int r;

    if (access(path, F_OK) == 0) {
        j = json_load_file(path, 0, &je);
        if (j == NULL || !json_is_object(j)) {
            json_decref(j);
            return wr_err_set(err, WR_EINVAL, 0, "config %s: %s", path,
                              j ? "not a JSON object" : je.text);
        }
    } else {
        j = json_object();
    }
    if (endpoint != NULL)
        json_object_set_new(j, "endpoint", json_string(endpoint));
    if (set_key && key != NULL && key[0] != '\0')
        json_object_set_new(j, "key", json_string(key));
    else if (set_key)
        json_object_del(j, "key");

    if (wr_mkdir_p(dirname(dir), 0700, err) < 0) {
        json_decref(j);
        return -1;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        json_decref(j);
        return wr_err_sys(err, "create %s", tmp);
    }
    r = json_dumpfd(j, fd, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (r < 0 || wr_write_all(fd, "\n", 1) < 0 || fsync(fd) < 0) {
        wr_err_sys(err, "write %s", tmp);
        (void)unlink(tmp);
        return -1;
    }
    if (rename(tmp, path) < 0) {
        wr_err_sys(err, "rename %s", tmp);
        (void)unlink(tmp);
        return -1;
    }
    return 0;
}

/* Show a key as its first 4 characters and its length: enough to tell keys apart. */
static char *mask_key(const char *key)
{
    size_t n = strlen(key);
    return n <= 8 ? xasprintf("**** (%zu chars)", n) : xasprintf("%.4s**** (%zu chars)", key, n);
}

static int config_show(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct cli_config cfg;
    struct wr_err err;
    bool json = false;
    int c;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            if (cli_output_arg("config show", optarg, &json) < 0)
                return CLI_EXIT_USAGE;
            break;
        case 'h':
            printf("usage: warren config show [-o json]\n");
            return 0;
        default:
            return cli_bad_option("config show", argv);
        }
    }
    if (optind < argc) {
        cli_errorf("config show: unexpected argument `%s`", argv[optind]);
        return CLI_EXIT_USAGE;
    }
    if (cli_config_load(&cfg, &err) < 0) {
        cli_errorf("config: %s", err.msg);
        return CLI_EXIT_FAIL;
    }
    _cleanup_free_ char *masked = cfg.key ? mask_key(cfg.key) : NULL;
    if (json) {
        json_t *j =
            json_pack("{s:s, s:s, s:s?, s:s, s:s}", "file", cfg.path, "endpoint", cfg.endpoint,
                      "key", masked, "endpoint_from", cfg.endpoint_from, "key_from", cfg.key_from);
        cli_print_json(j);
        json_decref(j);
    } else {
        printf("file:     %s\n", cfg.path);
        printf("endpoint: %s (%s)\n", cfg.endpoint, cfg.endpoint_from);
        printf("key:      %s (%s)\n", masked ? masked : "-", cfg.key_from);
    }
    cli_config_fini(&cfg);
    return 0;
}

static void config_usage(FILE *f)
{
    fprintf(f, "usage: warren config set endpoint URL\n"
               "       warren config set key KEY      (KEY \"\" removes it; \"-\" reads stdin)\n"
               "       warren config show [-o json]\n\n"
               "URL is unix:///path/to/warrend.sock or http://host:port (no TLS).\n"
               "WARREN_API_URL and WARREN_API_KEY override the file.\n");
}

/* Read a key from stdin (one line), so it stays out of the shell history and ps. */
static char *read_key_stdin(void)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);

    if (n < 0) {
        free(line);
        return xstrdup("");
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    return line;
}

int cmd_config(int argc, char **argv)
{
    struct cli_config cfg;
    struct wr_err err;
    int r;

    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        config_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_EXIT_USAGE : 0;
    }
    if (strcmp(argv[1], "show") == 0)
        return config_show(argc - 1, argv + 1);
    if (strcmp(argv[1], "set") != 0) {
        cli_errorf("config: unknown subcommand `%s` (want set or show)", argv[1]);
        return CLI_EXIT_USAGE;
    }
    if (argc != 4 || (strcmp(argv[2], "endpoint") != 0 && strcmp(argv[2], "key") != 0)) {
        cli_errorf("config: usage: warren config set endpoint URL | warren config set key KEY");
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[2], "endpoint") == 0 && cli_http_check_url(argv[3], &err) < 0) {
        cli_errorf("config: %s", err.msg);
        return CLI_EXIT_USAGE;
    }
    if (cli_config_load(&cfg, &err) < 0) {
        cli_errorf("config: %s", err.msg);
        return CLI_EXIT_FAIL;
    }
    if (strcmp(argv[2], "endpoint") == 0) {
        r = config_update(cfg.path, argv[3], NULL, false, &err);
    } else {
        _cleanup_free_ char *key = strcmp(argv[3], "-") == 0 ? read_key_stdin() : xstrdup(argv[3]);
        r = config_update(cfg.path, NULL, key, true, &err);
    }
    cli_config_fini(&cfg);
    if (r < 0) {
        cli_errorf("config: %s", err.msg);
        return CLI_EXIT_FAIL;
    }
    return 0;
}

int cmd_login(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"endpoint", required_argument, NULL, 'e'},
        {"key", required_argument, NULL, 'k'},
        {"no-verify", no_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *endpoint = NULL, *key_arg = NULL;
    _cleanup_free_ char *key = NULL;
    struct cli_config cfg;
    struct cli_http *http = NULL;
    struct wr_err err;
    bool verify = true;
    int c, r;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "e:k:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'e':
            endpoint = optarg;
            break;
        case 'k':
            key_arg = optarg;
            break;
        case 'n':
            verify = false;
            break;
        case 'h':
            printf("usage: warren login [--endpoint URL] [--key KEY|-] [--no-verify]\n\n"
                   "Check the endpoint and key against warrend (GET /v1/version), then save\n"
                   "them to the config file (mode 0600). --key - reads the key from stdin.\n");
            return 0;
        default:
            return cli_bad_option("login", argv);
        }
    }
    if (optind < argc) {
        cli_errorf("login: unexpected argument `%s`", argv[optind]);
        return CLI_EXIT_USAGE;
    }
    if (endpoint == NULL && key_arg == NULL) {
        cli_errorf("login: give --endpoint URL, --key KEY or both");
        return CLI_EXIT_USAGE;
    }
    if (endpoint != NULL && cli_http_check_url(endpoint, &err) < 0) {
        cli_errorf("login: %s", err.msg);
        return CLI_EXIT_USAGE;
    }
    if (key_arg != NULL)
        key = strcmp(key_arg, "-") == 0 ? read_key_stdin() : xstrdup(key_arg);
    if (cli_config_load(&cfg, &err) < 0) {
        cli_errorf("login: %s", err.msg);
        return CLI_EXIT_FAIL;
    }
    if (verify) {
        const char *url = endpoint ? endpoint : cfg.endpoint;
        const char *k = key ? key : cfg.key;
        json_t *v = NULL;

        r = cli_http_open(url, k, &http, &err);
        if (r == 0)
            r = cli_api(http, "GET", "/v1/version", NULL, &v, &err);
        cli_http_close(http);
        if (r < 0) {
            cli_errorf("login: %s (nothing saved; --no-verify saves anyway)", err.msg);
            cli_config_fini(&cfg);
            return CLI_EXIT_FAIL;
        }
        fprintf(stderr, "warren: logged in to %s (warrend %s)\n", url,
                json_string_value(json_object_get(v, "version")) ?: "?");
        json_decref(v);
    }
    r = config_update(cfg.path, endpoint, key, key != NULL, &err);
    cli_config_fini(&cfg);
    if (r < 0) {
        cli_errorf("login: %s", err.msg);
        return CLI_EXIT_FAIL;
    }
    return 0;
}
