/* SPDX-License-Identifier: Apache-2.0 */
/* The cleanup attribute for jansson values, beside those of cleanup.h. Header-only: util's own
 * sources do not include it, so warren-init and the runtime need no jansson; core, api and the
 * CLI, which link it, do. A local `_cleanup_json_ json_t *j = NULL;` is released with
 * json_decref when it leaves scope unless moved out with steal_pointer(&j). */
#pragma once

#include <jansson.h>

static inline void wr_json_decrefp(json_t **j)
{
    json_decref(*j);
}
#define _cleanup_json_ __attribute__((cleanup(wr_json_decrefp)))
