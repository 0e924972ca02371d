/* SPDX-License-Identifier: Apache-2.0 */
/* UTF-8 for text that goes into JSON. JSON strings are Unicode (jansson refuses bytes that are
 * not UTF-8), but much of what the daemon reports is bytes from a sandbox or a client: file
 * names, paths, header values, and messages cut at a buffer's end. Such text is repaired, never
 * refused: an invalid byte becomes U+FFFD (data) or a visible `\xNN` (messages, where an operator
 * wants to see which bytes they were). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The length of the valid UTF-8 sequence at p[0..n) (1 to 4), 0 if it is not valid (overlong
 * forms, surrogates and code points above U+10FFFF included), -1 if it is cut short by n. */
int wr_utf8_seq(const uint8_t *p, size_t n);

/* Whether the NUL-terminated s is valid UTF-8. */
bool wr_utf8_valid(const char *s);

enum wr_utf8_fix {
    WR_UTF8_REPLACE, /* each invalid byte becomes U+FFFD */
    WR_UTF8_ESCAPE,  /* each invalid byte becomes the four characters \xNN (lowercase hex) */
};
/* A copy of the NUL-terminated s that is valid UTF-8, made as `how` says (an unchanged copy if s
 * is valid already). The caller frees it. */
char *wr_utf8_fix(const char *s, enum wr_utf8_fix how);
