/* SPDX-License-Identifier: Apache-2.0 */
/* Base64 (src/util/b64.h) in both strictnesses, and the buffer it decodes into. */
#include <stdlib.h>
#include <string.h>

#include "../../src/util/b64.h"
#include "../../src/util/buf.h"
#include "../../src/util/strv.h"
#include "tap.h"

static char enc[64];

static const char *encode(const char *s)
{
    (void)wr_b64_encode(s, strlen(s), enc);
    return enc;
}

/* The decoding of s as a C string, or "<bad>". */
static const char *decode(const char *s, enum wr_b64_mode mode)
{
    static char out[64];
    ssize_t n = wr_b64_decode(s, strlen(s), mode, (uint8_t *)out);

    if (n < 0)
        return "<bad>";
    out[n] = '\0';
    return out;
}

int main(void)
{
    /* RFC 4648 section 10. */
    is_str(encode(""), "", "encode empty");
    is_str(encode("f"), "Zg==", "encode f");
    is_str(encode("fo"), "Zm8=", "encode fo");
    is_str(encode("foo"), "Zm9v", "encode foo");
    is_str(encode("foob"), "Zm9vYg==", "encode foob");
    is_str(encode("fooba"), "Zm9vYmE=", "encode fooba");
    is_str(encode("foobar"), "Zm9vYmFy", "encode foobar");
    is_int(wr_b64_encode("\xfb\xff", 2, enc), 4, "encode returns the length");
    is_str(enc, "+/8=", "encode uses + and /");

    is_str(decode("", WR_B64_STRICT), "", "strict: empty");
    is_str(decode("Zg==", WR_B64_STRICT), "f", "strict: two pads");
    is_str(decode("Zm8=", WR_B64_STRICT), "fo", "strict: one pad");
    is_str(decode("Zm9vYmFy", WR_B64_STRICT), "foobar", "strict: no pad");
    is_str(decode("Zg", WR_B64_STRICT), "<bad>", "strict: padding required");
    is_str(decode("Zm9", WR_B64_STRICT), "<bad>", "strict: length a multiple of 4");
    is_str(decode("Z===", WR_B64_STRICT), "<bad>", "strict: at most two pads");
    is_str(decode("Zg=A", WR_B64_STRICT), "<bad>", "strict: '=' only at the end");
    is_str(decode("-_8=", WR_B64_STRICT), "<bad>", "strict: no URL-safe alphabet");
    is_str(decode(" Zg=", WR_B64_STRICT), "<bad>", "strict: no whitespace");
    is_str(decode("+/8=", WR_B64_STRICT), "\xfb\xff", "strict: + and /");

    is_str(decode("", WR_B64_LENIENT), "", "lenient: empty");
    is_str(decode("Zg==", WR_B64_LENIENT), "f", "lenient: padded");
    is_str(decode("Zg", WR_B64_LENIENT), "f", "lenient: unpadded");
    is_str(decode("Zm8", WR_B64_LENIENT), "fo", "lenient: unpadded, 3");
    is_str(decode("-_8", WR_B64_LENIENT), "\xfb\xff", "lenient: URL-safe alphabet");
    is_str(decode("+/8=", WR_B64_LENIENT), "\xfb\xff", "lenient: standard alphabet");
    is_str(decode("Zg==junk!", WR_B64_LENIENT), "f", "lenient: ends at the first '='");
    is_str(decode("Zm9vY", WR_B64_LENIENT), "<bad>", "lenient: 4k + 1 characters");
    is_str(decode("Zm 9v", WR_B64_LENIENT), "<bad>", "lenient: no whitespace");
    is_str(decode("Zm9v*", WR_B64_LENIENT), "<bad>", "lenient: no other characters");

    /* Every byte value survives a round trip. */
    uint8_t all[256], back[WR_B64_DECODED_MAX(WR_B64_ENCODED_LEN(256))];
    char big[WR_B64_ENCODED_LEN(256) + 1];
    for (int i = 0; i < 256; i++)
        all[i] = (uint8_t)i;
    size_t n = wr_b64_encode(all, sizeof(all), big);
    is_int(n, WR_B64_ENCODED_LEN(256), "encoded length");
    ok(wr_b64_decode(big, n, WR_B64_STRICT, back) == 256 && memcmp(all, back, 256) == 0,
       "round trip, strict");
    ok(wr_b64_decode(big, n, WR_B64_LENIENT, back) == 256 && memcmp(all, back, 256) == 0,
       "round trip, lenient");

    /* Appending to a buffer; a failure leaves it as it was. */
    struct wr_buf b = {0};
    wr_buf_puts(&b, "x=");
    ok(wr_b64_decode_buf("Zm9v", 4, WR_B64_STRICT, &b) == 0, "decode_buf appends");
    is_str(wr_buf_str(&b), "x=foo", "decode_buf keeps what was there");
    ok(wr_b64_decode_buf("Zm9", 3, WR_B64_STRICT, &b) < 0 && b.len == 5,
       "decode_buf failure leaves len");
    wr_buf_fini(&b);

    /* The buffer's string rule. */
    is_str(wr_buf_str(&b), "", "an empty buffer reads as \"\"");
    wr_buf_printf(&b, "%s-%d", "a", 42);
    wr_buf_append(&b, "bc", 2);
    is_str(wr_buf_str(&b), "a-42bc", "printf and append keep a NUL");
    wr_buf_consume(&b, 2);
    is_str(wr_buf_str(&b), "42bc", "consume keeps a NUL");
    char *s = wr_buf_steal_str(&b);
    ok(strcmp(s, "42bc") == 0 && b.data == NULL && b.len == 0, "steal_str hands over");
    free(s);
    s = wr_buf_steal_str(&b);
    ok(s != NULL && s[0] == '\0', "steal_str of an empty buffer is \"\"");
    free(s);

    /* String vectors. */
    char *src[] = {"a", "bb", NULL};
    _cleanup_strv_ char **v = wr_strv_dup(src);
    ok(wr_strv_len(v) == 2 && strcmp(v[1], "bb") == 0 && v[2] == NULL, "strv_dup copies");
    ok(v[0] != src[0], "strv_dup copies the strings");
    _cleanup_strv_ char **e = wr_strv_dup(NULL);
    ok(e != NULL && e[0] == NULL && wr_strv_len(NULL) == 0, "strv of NULL is empty");
    return done();
}
