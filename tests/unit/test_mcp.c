/* SPDX-License-Identifier: Apache-2.0 */
/* The MCP server's tool table (src/api/mcp_tools.c): every schema is JSON Schema the checker
 * understands, and the checker refuses what the schemas forbid. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/api/mcp_int.h"
#include "tap.h"

static int check(const char *tool, const char *args_json, char *msg, size_t n)
{
    json_t *args = json_loads(args_json, 0, NULL);
    const char *schema = NULL;
    int rc;

    for (size_t i = 0; i < mcp_ntools; i++)
        if (strcmp(mcp_tools[i].name, tool) == 0)
            schema = mcp_tools[i].input_schema;
    if (schema == NULL || args == NULL) {
        snprintf(msg, n, "no such tool or bad JSON");
        json_decref(args);
        return -2;
    }
    rc = mcp_check_args(schema, args, msg, n);
    json_decref(args);
    return rc;
}

static void refused(const char *tool, const char *args, const char *want)
{
    char msg[512] = "";
    int rc = check(tool, args, msg, sizeof(msg));

    ok(rc == -1 && strstr(msg, want) != NULL, "%s %s: refused (%s)", tool, args, msg);
}

static void accepted(const char *tool, const char *args)
{
    char msg[512] = "";
    int rc = check(tool, args, msg, sizeof(msg));

    ok(rc == 0, "%s %s: accepted%s%s", tool, args, rc ? ": " : "", rc ? msg : "");
}

int main(void)
{
    ok(mcp_ntools == 18, "18 tools");
    for (size_t i = 0; i < mcp_ntools; i++) {
        const struct mcp_tool *t = &mcp_tools[i];
        json_error_t je;
        json_t *s = json_loads(t->input_schema, 0, &je);
        const char *k;
        json_t *v;
        size_t j;
        bool in_props = true, typed = true;

        ok(s != NULL, "%s: its schema is JSON%s%s", t->name, s ? "" : ": ", s ? "" : je.text);
        ok(json_is_false(json_object_get(s, "additionalProperties")),
           "%s: no arguments beyond its properties", t->name);
        json_array_foreach(json_object_get(s, "required"), j, v) in_props =
            in_props && json_object_get(json_object_get(s, "properties"), json_string_value(v));
        ok(in_props, "%s: what it requires it describes", t->name);
        json_object_foreach(json_object_get(s, "properties"), k, v) typed =
            typed && json_is_string(json_object_get(v, "type"));
        ok(typed, "%s: every argument has a type", t->name);
        for (size_t m = 0; m < i; m++)
            ok(strcmp(mcp_tools[m].name, t->name) != 0, "%s: one entry", t->name);
        ok(t->run != NULL && t->description[0] && t->title[0], "%s: described and runnable",
           t->name);
        ok(!(t->read_only && t->destructive), "%s: not read-only and destructive", t->name);
        json_decref(s);
    }

    accepted("sandbox_exec", "{\"sandbox_id\":\"a\",\"command\":\"ls\"}");
    accepted("sandbox_exec", "{\"sandbox_id\":\"a\",\"command\":\"ls\",\"env\":{\"A\":\"b\"},"
                             "\"timeout_s\":5,\"cwd\":null}");
    refused("sandbox_exec", "{\"sandbox_id\":\"a\"}", "`command` is required");
    refused("sandbox_exec", "{\"sandbox_id\":\"a\",\"command\":null}", "`command` is required");
    refused("sandbox_exec", "{\"sandbox_id\":\"a\",\"command\":\"\"}", "`command` must not be");
    refused("sandbox_exec", "{\"sandbox_id\":\"a\",\"command\":[\"ls\"]}", "must be a string");
    refused("sandbox_exec", "{\"sandbox_id\":\"a\",\"command\":\"x\",\"timeout_s\":1.5}",
            "must be an integer");
    refused("sandbox_exec", "{\"sandbox_id\":\"a\",\"command\":\"x\",\"timeout_s\":0}",
            "at least 1");
    refused("sandbox_exec", "{\"sandbox_id\":\"a\",\"command\":\"x\",\"env\":{\"A\":1}}",
            "`env` must be a string");
    refused("sandbox_exec", "{\"sandbox_id\":\"a\",\"command\":\"x\",\"shell\":\"zsh\"}",
            "unknown argument `shell`");
    refused("sandbox_read_output", "{\"sandbox_id\":\"a\",\"pid\":1,\"wait_s\":301}",
            "at most 300");
    refused("sandbox_pause", "{\"sandbox_id\":\"a\",\"mode\":\"ice\"}", "one of");
    accepted("sandbox_pause", "{\"sandbox_id\":\"a\",\"mode\":\"disk\"}");
    accepted("sandbox_create", "{\"cpus\":1,\"memory_mb\":256}");
    accepted("sandbox_create", "{\"cpus\":0.5}");
    refused("sandbox_create", "{\"internet\":\"yes\"}", "must be a boolean");
    accepted("desktop_action",
             "{\"sandbox_id\":\"a\",\"action\":\"key\",\"keys\":[\"ctrl\",\"c\"]}");
    refused("desktop_action", "{\"sandbox_id\":\"a\",\"action\":\"key\",\"keys\":[1]}",
            "must be a string");
    refused("sandbox_port_url", "{\"sandbox_id\":\"a\",\"port\":70000}", "at most 65535");
    accepted("run_code", "{\"code\":\"1+1\"}");
    refused("sandbox_kill", "{\"sandbox_id\":\"a/exec\"}", "must match");
    refused("sandbox_kill", "{\"sandbox_id\":\"\"}", "must match");
    accepted("sandbox_kill", "{\"sandbox_id\":\"sb_A-9\"}");
    accepted("sandbox_list", "{}");
    return done();
}
