/* SPDX-License-Identifier: Apache-2.0 */
/* What the daemon-facing verbs share: resolving the endpoint and key, JSON round trips,
 * argument checks and output. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/xalloc.h"
#include "../lib/config.h"
#include "client.h"

int cli_config_load(struct cli_config *cfg, struct wr_err *err)
{
    struct wl_config c;

    memset(cfg, 0, sizeof(*cfg));
    if (wl_config_load(&c, err) < 0)
        return -1;
    cfg->endpoint = c.endpoint;
    cfg->key = c.key;
    cfg->endpoint_from = c.endpoint_from;
    cfg->key_from = c.key_from;
    cfg->path = c.path;
    return 0;
}

void cli_config_fini(struct cli_config *cfg)
{
    free(cfg->endpoint);
    free(cfg->key);
    free(cfg->path);
    memset(cfg, 0, sizeof(*cfg));
}

int cli_connect(struct cli_http **out, struct wr_err *err)
{
    struct cli_config cfg;
    const char *rid = getenv("WARREN_REQUEST_ID");
    int r;

    if (cli_config_load(&cfg, err) < 0)
        return -1;
    r = cli_http_open(cfg.endpoint, cfg.key, out, err);
    cli_config_fini(&cfg);
    if (r == 0 && rid != NULL && rid[0] != '\0')
        cli_http_set_request_id(*out, rid);
    return r;
}

warren *cli_warren_or_complain(const char *verb)
{
    warren *w = NULL;
    warren_error err;

    if (warren_connect(NULL, NULL, &w, &err) < 0) {
        cli_errorf("%s: %s", verb, err.message);
        return NULL;
    }
    return w;
}

json_t *cli_json(const char *text)
{
    json_t *j = text != NULL ? json_loads(text, 0, NULL) : NULL;
    return j != NULL ? j : json_null();
}

int cli_api(struct cli_http *c, const char *method, const char *target, json_t *body, json_t **out,
            struct wr_err *err)
{
    struct cli_http_req req = {.method = method, .target = target, .body_kind = CLI_BODY_NONE};
    struct cli_http_resp resp;
    char *text = NULL;
    int status;

    if (out != NULL)
        *out = NULL;
    if (body != NULL) {
        text = json_dumps(body, JSON_COMPACT);
        if (text == NULL)
            return wr_err_set(err, WR_EINTERNAL, 0, "encode request");
        req.content_type = "application/json";
        req.body_kind = CLI_BODY_MEM;
        req.body = text;
        req.body_len = strlen(text);
    }
    status = cli_http_request(c, &req, &resp, err);
    free(text);
    if (status < 0)
        return -1;
    status = resp.status;
    if (status < 200 || status > 299) {
        cli_http_error(&resp, err);
        cli_http_resp_fini(&resp);
        return -1;
    }
    if (out != NULL && resp.body_len > 0) {
        json_error_t je;
        *out = json_loadb(resp.body, resp.body_len, 0, &je);
        if (*out == NULL) {
            cli_http_resp_fini(&resp);
            return wr_err_set(err, WR_EPROTO, 0, "%s %s: bad JSON from warrend: %s", method, target,
                              je.text);
        }
    }
    cli_http_resp_fini(&resp);
    return status;
}

bool cli_check_id(const char *verb, const char *id)
{
    size_t n = strlen(id);

    if (n >= 1 && n <= 64 &&
        strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == n)
        return true;
    cli_errorf("%s: `%s` is not a sandbox id", verb, id);
    return false;
}

int cli_bad_option(const char *verb, char **argv)
{
    const char *arg = argv[optind - 1];

    /* getopt leaves the unknown short option in optopt; long ones are only in argv. */
    if (strncmp(arg, "--", 2) != 0 && optopt > 0 && optopt < 128)
        cli_errorf("%s: unknown option `-%c` or its argument is missing (see `warren %s --help`)",
                   verb, optopt, verb);
    else
        cli_errorf("%s: unknown option `%s` or its argument is missing (see `warren %s --help`)",
                   verb, arg, verb);
    return CLI_EXIT_USAGE;
}

int cli_output_arg(const char *verb, const char *arg, bool *json)
{
    if (strcmp(arg, "json") == 0) {
        *json = true;
        return 0;
    }
    if (strcmp(arg, "table") == 0 || strcmp(arg, "text") == 0) {
        *json = false;
        return 0;
    }
    cli_errorf("%s: -o `%s`: want json or text", verb, arg);
    return -1;
}

#define NDJSON_LINE_MAX (64u << 20)

int cli_ndjson_feed(struct wr_buf *partial, const char *data, size_t len,
                    int (*on_line)(void *ctx, const char *line, size_t n, struct wr_err *err),
                    void *ctx, struct wr_err *err)
{
    const char *nl;

    while (len > 0 && (nl = memchr(data, '\n', len)) != NULL) {
        size_t n = (size_t)(nl - data);
        int r = 0;
        if (partial->len > 0) {
            wr_buf_append(partial, data, n);
            r = on_line(ctx, wr_buf_str(partial), partial->len, err);
            partial->len = 0;
        } else if (n > 0) {
            r = on_line(ctx, data, n, err);
        }
        if (r < 0)
            return -1;
        len -= n + 1;
        data = nl + 1;
    }
    if (partial->len + len > NDJSON_LINE_MAX)
        return wr_err_set(err, WR_EPROTO, 0, "event line longer than %u bytes", NDJSON_LINE_MAX);
    wr_buf_append(partial, data, len);
    return 0;
}

void cli_print_json(const json_t *j)
{
    (void)json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
}

int cli_kv_set(const char *verb, const char *flag, json_t *obj, const char *kv)
{
    const char *eq = strchr(kv, '=');

    if (eq == NULL || eq == kv) {
        cli_errorf("%s: %s `%s` must be KEY=VALUE", verb, flag, kv);
        return -1;
    }
    char *k = xstrndup(kv, (size_t)(eq - kv));
    json_t *v = json_string(eq + 1);
    int r = v != NULL ? json_object_set_new(obj, k, v) : -1;
    free(k);
    if (r < 0)
        cli_errorf("%s: %s `%s` must be UTF-8", verb, flag, kv);
    return r;
}
