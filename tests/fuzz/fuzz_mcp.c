/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the MCP server's argument checker (src/api/mcp_tools.c), which stands
 * between a tenant's tools/call arguments and the tools: the first byte picks a tool, the rest
 * is its arguments as JSON. A refusal has a message; an acceptance means every required
 * argument is there and every argument has its declared type, which is what the tools rely on. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/api/mcp_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

static int has_type(const char *type, json_t *v)
{
    if (strcmp(type, "string") == 0)
        return json_is_string(v);
    if (strcmp(type, "integer") == 0)
        return json_is_integer(v);
    if (strcmp(type, "number") == 0)
        return json_is_number(v);
    if (strcmp(type, "boolean") == 0)
        return json_is_boolean(v);
    if (strcmp(type, "array") == 0)
        return json_is_array(v);
    return json_is_object(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct mcp_tool *t;
    json_t *args, *schema, *props, *v;
    const char *k;
    char msg[256];
    size_t i;

    if (size < 1)
        return 0;
    t = &mcp_tools[data[0] % mcp_ntools];
    args = json_loadb((const char *)data + 1, size - 1, 0, NULL);
    if (!json_is_object(args)) {
        json_decref(args);
        return 0;
    }
    msg[0] = '\0';
    if (mcp_check_args(t->input_schema, args, msg, sizeof(msg)) < 0) {
        check(msg[0] != '\0');
        json_decref(args);
        return 0;
    }
    schema = json_loads(t->input_schema, 0, NULL);
    check(schema != NULL);
    props = json_object_get(schema, "properties");
    json_array_foreach(json_object_get(schema, "required"), i, v)
    {
        json_t *a = json_object_get(args, json_string_value(v));
        check(a != NULL && !json_is_null(a));
    }
    json_object_foreach(args, k, v)
    {
        json_t *p = json_object_get(props, k);
        check(p != NULL);
        if (!json_is_null(v))
            check(has_type(json_string_value(json_object_get(p, "type")), v));
    }
    json_decref(schema);
    json_decref(args);
    return 0;
}
