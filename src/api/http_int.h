/* SPDX-License-Identifier: Apache-2.0 */
/* The request-target parser of src/api/http.c, for its fuzz target (tests/fuzz/fuzz_http.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Percent-decode s[0..n) into a new string (caller frees); '+' becomes a space when plus is set.
 * NULL on an invalid escape or an encoded NUL. */
char *wr__http_pct_decode(const char *s, size_t n, bool plus);

/* Split a request target as the server does: *path gets the decoded path ("/" if empty), *query
 * a NULL-terminated array of decoded name, value, name, value, ... in order (the caller frees
 * both with wr__http_target_free). Returns 0, or -1 with *msg (a static string) and nothing to
 * free. */
int wr__http_parse_target(const char *target, char **path, char ***query, const char **msg);
void wr__http_target_free(char *path, char **query);
