/* SPDX-License-Identifier: Apache-2.0 */
/* A template's `start` (src/core/start.h): what parses, its defaults, and that everything
 * malformed is refused naming the template and the key. */
#include <jansson.h>
#include <string.h>

#include "../../src/core/start.h"
#include "tap.h"

static int parse(const char *config, struct wr_start_cfg **out, struct wr_err *err)
{
    json_t *j = json_loads(config, 0, NULL);
    int rc = wr__start_cfg_parse(j, "tpl", out, err);

    json_decref(j);
    return rc;
}

static void refused(const char *config, const char *want)
{
    struct wr_start_cfg *c = NULL;
    struct wr_err err;

    ok(parse(config, &c, &err) < 0 && c == NULL && err.kind == WR_EINVAL &&
           strstr(err.msg, "template `tpl`") != NULL && strstr(err.msg, want) != NULL,
       "refused: %s (%s)", config, c == NULL ? err.msg : "parsed");
    wr__start_cfg_free(c);
}

int main(void)
{
    struct wr_start_cfg *c;
    struct wr_err err;

    ok(parse("{}", &c, &err) == 0 && c == NULL, "no start: none");
    ok(parse("{\"start\": null}", &c, &err) == 0 && c == NULL, "start null: none");

    ok(parse("{\"start\": {\"cmd\": \"srv --port 1\", \"user\": \"user\", \"cwd\": \"/home/user\","
             " \"env\": {\"K\": \"V\", \"E\": \"\"},"
             " \"ready\": {\"port\": 49999, \"path\": \"/health\", \"timeout_s\": 7}}}",
             &c, &err) == 0 &&
           c != NULL,
       "a full start");
    if (c != NULL) {
        is_str(c->cmd, "srv --port 1", "cmd");
        is_str(c->user, "user", "user");
        is_str(c->cwd, "/home/user", "cwd");
        is_str(c->env[0], "K=V", "env K");
        is_str(c->env[1], "E=", "env E");
        ok(c->env[2] == NULL, "env ends");
        is_int(c->port, 49999, "port");
        is_str(c->path, "/health", "path");
        ok(c->ready_cmd == NULL, "no ready cmd");
        is_int(c->timeout_s, 7, "timeout_s");
    }
    wr__start_cfg_free(c);

    ok(parse("{\"start\": {\"cmd\": \"x\"}}", &c, &err) == 0 && c != NULL, "cmd alone");
    if (c != NULL) {
        ok(c->user == NULL && c->cwd == NULL && c->env[0] == NULL, "defaults: the template's");
        ok(c->port == 0 && c->ready_cmd == NULL, "no readiness check");
        is_int(c->timeout_s, WR_START_TIMEOUT_DEFAULT_S, "default timeout");
    }
    wr__start_cfg_free(c);

    ok(parse("{\"start\": {\"cmd\": \"x\", \"ready\": {\"cmd\": \"test -e /tmp/up\"}}}", &c,
             &err) == 0 &&
           c != NULL && c->ready_cmd != NULL && strcmp(c->ready_cmd, "test -e /tmp/up") == 0,
       "a ready command");
    wr__start_cfg_free(c);

    refused("{\"start\": \"x\"}", "start must be an object");
    refused("{\"start\": {}}", "start.cmd is missing");
    refused("{\"start\": {\"cmd\": \"\"}}", "start.cmd must be a non-empty string");
    refused("{\"start\": {\"cmd\": 1}}", "start.cmd");
    refused("{\"start\": {\"cmd\": \"x\", \"user\": 0}}", "start.user");
    refused("{\"start\": {\"cmd\": \"x\", \"env\": []}}", "start.env must be an object");
    refused("{\"start\": {\"cmd\": \"x\", \"env\": {\"K\": 1}}}", "start.env.K");
    refused("{\"start\": {\"cmd\": \"x\", \"ready\": 8000}}", "start.ready must be an object");
    refused("{\"start\": {\"cmd\": \"x\", \"ready\": {}}}", "one of port and cmd");
    refused("{\"start\": {\"cmd\": \"x\", \"ready\": {\"port\": 1, \"cmd\": \"y\"}}}",
            "one of port and cmd");
    refused("{\"start\": {\"cmd\": \"x\", \"ready\": {\"port\": 0}}}", "1-65535");
    refused("{\"start\": {\"cmd\": \"x\", \"ready\": {\"port\": 65536}}}", "1-65535");
    refused("{\"start\": {\"cmd\": \"x\", \"ready\": {\"port\": \"80\"}}}", "1-65535");
    refused("{\"start\": {\"cmd\": \"x\", \"ready\": {\"port\": 80, \"path\": \"health\"}}}",
            "absolute path");
    refused("{\"start\": {\"cmd\": \"x\", \"ready\": {\"port\": 80, \"path\": \"/a b\"}}}",
            "absolute path");
    refused("{\"start\": {\"cmd\": \"x\", \"ready\": {\"cmd\": \"y\", \"path\": \"/h\"}}}",
            "absolute path");
    refused("{\"start\": {\"cmd\": \"x\", \"ready\": {\"port\": 80, \"timeout_s\": 0}}}",
            "timeout_s must be 1-600");
    refused("{\"start\": {\"cmd\": \"x\", \"ready\": {\"port\": 80, \"timeout_s\": 601}}}",
            "timeout_s must be 1-600");
    return done();
}
