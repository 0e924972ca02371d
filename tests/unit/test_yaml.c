/* SPDX-License-Identifier: Apache-2.0 */
/* YAML into jansson (src/core/yaml.h): the core schema's types, anchors, aliases and merge keys,
 * the lines of keys, and every bound an untrusted file meets: depth, aliases, values (the
 * "billion laughs"), duplicate keys, more than one document. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/yaml.h"
#include "../../src/util/buf.h"
#include "tap.h"

/* The compact, sorted JSON of text's value, or "ERR: <message>". Static storage. */
static const char *load(const char *text, const struct wr_yaml_limits *lim)
{
    static char out[4096];
    struct wr_err err;
    json_t *j = wr_yaml_load(text, strlen(text), lim, NULL, &err);
    char *s;

    if (j == NULL) {
        snprintf(out, sizeof(out), "ERR: %s", err.msg);
        return out;
    }
    s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    snprintf(out, sizeof(out), "%s", s);
    free(s);
    json_decref(j);
    return out;
}

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

int main(void)
{
    /* types by the core schema, never YAML 1.1's */
    is_str(load("[1, -2, 0x1f, 0o17, 1.5, .5, 1e3, true, False, ~, null, '', no, on, yes]", NULL),
           "[1,-2,31,15,1.5,0.5,1000.0,true,false,null,null,\"\",\"no\",\"on\",\"yes\"]",
           "plain scalars typed by the core schema; yes/no/on stay strings");
    is_str(load("a: \"1\"\nb: '2'\nc: !!str 3\nd: 8080:80\ne: 1.2.3\n", NULL),
           "{\"a\":\"1\",\"b\":\"2\",\"c\":\"3\",\"d\":\"8080:80\",\"e\":\"1.2.3\"}",
           "quoted and !!str scalars are strings; 8080:80 is not sexagesimal");
    is_str(load("99999999999999999999999", NULL), "\"99999999999999999999999\"",
           "an integer out of range stays as written");
    /* anchors, aliases, merge keys */
    is_str(load("base: &b {x: 1, y: 2}\nuse: *b\n", NULL),
           "{\"base\":{\"x\":1,\"y\":2},\"use\":{\"x\":1,\"y\":2}}", "an alias copies its anchor");
    is_str(load("b: &b {x: 1, y: 2}\nc: &c {y: 3, z: 4}\nm:\n  <<: [*b, *c]\n  x: 0\n", NULL),
           "{\"b\":{\"x\":1,\"y\":2},\"c\":{\"y\":3,\"z\":4},\"m\":{\"x\":0,\"y\":2,\"z\":4}}",
           "merge keys: explicit keys win, then the first mapping merged");
    ok(starts(load("m:\n  <<: 1\n", NULL), "ERR: YAML line 2: `<<` takes a mapping"),
       "a merge of a scalar is refused");
    ok(starts(load("a: *nope\n", NULL), "ERR: YAML line 1: unknown alias"), "an unknown alias");
    /* what an untrusted file meets */
    ok(starts(load("a: 1\nb: 2\na: 3\n", NULL), "ERR: YAML line 3: duplicate key `a`"),
       "a duplicate key names its line");
    ok(starts(load("a: 1\n---\nb: 2\n", NULL), "ERR: YAML line 2: one document only"),
       "one document only");
    ok(starts(load("", NULL), "ERR: YAML: the document is empty"), "an empty file");
    ok(starts(load("? [a]\n: 1\n", NULL), "ERR: YAML line 1: a mapping's key must be a scalar"),
       "a key that is a list");
    ok(starts(load("a: [b\n", NULL), "ERR: YAML line"), "a syntax error names its line");
    {
        struct wr_buf b;
        wr_buf_init(&b);
        for (int i = 0; i < 70; i++)
            wr_buf_puts(&b, "[");
        for (int i = 0; i < 70; i++)
            wr_buf_puts(&b, "]");
        ok(strstr(load(wr_buf_str(&b), NULL), "nested more than 64 deep") != NULL,
           "depth beyond the limit");
        wr_buf_fini(&b);
    }
    {
        /* 9 levels of 9 aliases each: 9^9 values once expanded */
        struct wr_buf b;
        wr_buf_init(&b);
        wr_buf_puts(&b, "a0: &a0 [x, x, x, x, x, x, x, x, x]\n");
        for (int i = 1; i < 10; i++) {
            wr_buf_printf(&b, "a%d: &a%d [", i, i);
            for (int k = 0; k < 9; k++)
                wr_buf_printf(&b, "%s*a%d", k ? ", " : "", i - 1);
            wr_buf_puts(&b, "]\n");
        }
        ok(strstr(load(wr_buf_str(&b), &(struct wr_yaml_limits){.max_values = 100000}),
                  "more than 100000 values") != NULL,
           "the billion laughs stop at the value limit");
        ok(strstr(load(wr_buf_str(&b), &(struct wr_yaml_limits){.max_aliases = 20}),
                  "more than 20 aliases") != NULL,
           "and at the alias limit");
        wr_buf_fini(&b);
    }
    {
        /* one 200 KiB string aliased 1,000 times: 200 MB once expanded, from a 206 KiB text */
        struct wr_buf b;
        wr_buf_init(&b);
        wr_buf_puts(&b, "s: &s ");
        for (int i = 0; i < 200 * 1024; i++)
            wr_buf_puts(&b, "x");
        wr_buf_puts(&b, "\nl: [");
        for (int i = 0; i < 1000; i++)
            wr_buf_printf(&b, "%s*s", i ? "," : "");
        wr_buf_puts(&b, "]\n");
        ok(strstr(load(wr_buf_str(&b), NULL), "bytes of strings") != NULL,
           "a long string aliased a thousand times stops at the byte limit (16 MiB)");
        wr_buf_fini(&b);
    }
    /* the lines of keys, as JSON pointers */
    {
        struct wr_err err;
        json_t *lines = NULL;
        const char *text = "services:\n  web:\n    image: x\n  \"a/b~\": {}\n";
        json_t *j = wr_yaml_load(text, strlen(text), NULL, &lines, &err);
        ok(j != NULL, "loads with lines");
        is_int(json_integer_value(json_object_get(lines, "/services/web/image")), 3,
               "a key's line");
        is_int(json_integer_value(json_object_get(lines, "/services/a~1b~0")), 4,
               "a key with / and ~ escaped as in a JSON pointer");
        json_decref(j);
        json_decref(lines);
    }
    return done();
}
