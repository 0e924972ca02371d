/* SPDX-License-Identifier: Apache-2.0 */
/* YAML (1.2's core schema, through libyaml's event parser) into jansson values, so that one
 * validator reads a file whether it came as YAML or as JSON (JSON is YAML): CDI specs
 * (core/cdi.c) and, later, Compose files. Bounded for untrusted input: nesting depth, alias
 * expansions, and the number of values and bytes of strings, counted after expansion (no
 * "billion laughs", nor a long string aliased a thousand times). Anchors,
 * aliases and merge keys (`<<`) are resolved; a duplicate key is an error.
 *
 * Plain scalars are typed by the core schema: null (``, `~`, `null`), booleans (`true`, `false`
 * in three cases; never YAML 1.1's `yes`/`on`), integers (decimal, 0o, 0x), floats; anything
 * else, and every quoted scalar or one tagged `!!str`, is a string. Mapping keys are strings. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "../util/err.h"

struct wr_yaml_limits {
    unsigned max_depth;   /* nesting of mappings and sequences; 0: 64 */
    unsigned max_aliases; /* alias uses; 0: 1000 */
    size_t max_values;    /* values in the result, aliases expanded; 0: 1,000,000 */
    size_t max_bytes;     /* bytes of its strings and keys, aliases expanded; 0: 16 MiB */
};

/* Load the single document in text[0..len). *lines, if lines is not NULL, is an object from each
 * mapping key's JSON pointer ("/services/web/image") to its 1-based line, for messages that name
 * where a value is. Returns a new reference, or NULL with err (WR_EINVAL, naming the line). */
json_t *wr_yaml_load(const char *text, size_t len, const struct wr_yaml_limits *lim, json_t **lines,
                     struct wr_err *err);
