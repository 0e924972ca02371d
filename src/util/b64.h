/* SPDX-License-Identifier: Apache-2.0 */
/* Base64 (RFC 4648). Encoding always gives the standard alphabet with padding. Decoding comes
 * in two strictnesses, one per kind of peer:
 *   - WR_B64_STRICT: the standard alphabet, a length that is a multiple of 4, and '=' only as
 *     the last one or two characters. The native API (exec stdin) and WebSocket keys.
 *   - WR_B64_LENIENT: the standard or the URL-safe alphabet ('-' and '_'), padding optional; the
 *     input ends at the first '=' and what follows is ignored. A length of 4k + 1 before it is
 *     refused (no byte fits in 6 bits). E2B, whose SDKs send both alphabets, and Basic auth.
 * Neither checks that the unused low bits of the last character are zero. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"

/* The characters that n bytes encode to, without the NUL. */
#define WR_B64_ENCODED_LEN(n) (((n) + 2) / 3 * 4)
/* At most the bytes that n characters decode to. */
#define WR_B64_DECODED_MAX(n) ((n) / 4 * 3 + 3)

enum wr_b64_mode {
    WR_B64_STRICT,
    WR_B64_LENIENT,
};

/* Encode p[0..n) into out, which has room for WR_B64_ENCODED_LEN(n) + 1 bytes, and NUL-terminate
 * it. Returns the length written (without the NUL). */
size_t wr_b64_encode(const void *p, size_t n, char *out);

/* Decode s[0..n) into out, which has room for WR_B64_DECODED_MAX(n) bytes. Returns the byte
 * count, or -1 if s is not base64 as `mode` reads it (out may then hold partial output). */
ssize_t wr_b64_decode(const char *s, size_t n, enum wr_b64_mode mode, uint8_t *out);

/* wr_b64_decode appending to out. Returns 0, or -1 with out->len unchanged. */
int wr_b64_decode_buf(const char *s, size_t n, enum wr_b64_mode mode, struct wr_buf *out);
