/* SPDX-License-Identifier: Apache-2.0 */
/* UTF-8 repair for JSON: what sandboxes and clients send need not be UTF-8. */
#include <stdlib.h>

#include "../../src/util/utf8.h"
#include "tap.h"

static void fixed(const char *in, enum wr_utf8_fix how, const char *want, const char *name)
{
    char *got = wr_utf8_fix(in, how);
    is_str(got, want, name);
    ok(wr_utf8_valid(got), "%s: the result is UTF-8", name);
    free(got);
}

int main(void)
{
    ok(wr_utf8_valid("plain ascii"), "ascii");
    ok(wr_utf8_valid("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"), "2, 3 and 4 byte sequences");
    ok(!wr_utf8_valid("/tmp/\xff\xfe"), "0xff 0xfe");
    ok(!wr_utf8_valid("\xc0\xaf"), "overlong /");
    ok(!wr_utf8_valid("\xed\xa0\x80"), "a surrogate");
    ok(!wr_utf8_valid("\xf4\x90\x80\x80"), "above U+10FFFF");
    ok(!wr_utf8_valid("cut \xe2\x82"), "a sequence cut at the end");
    is_int(wr_utf8_seq((const unsigned char *)"\xe2\x82", 2), -1, "cut short: -1");
    is_int(wr_utf8_seq((const unsigned char *)"\xe2\x82\xac", 3), 3, "the euro sign: 3");

    fixed("/tmp/\xff\xfe", WR_UTF8_ESCAPE, "/tmp/\\xff\\xfe", "escaped");
    fixed("/tmp/\xff\xfe", WR_UTF8_REPLACE, "/tmp/\xef\xbf\xbd\xef\xbf\xbd", "replaced");
    fixed("a\xe2\x82", WR_UTF8_ESCAPE, "a\\xe2\\x82", "a cut sequence, escaped");
    fixed("caf\xc3\xa9 \x80", WR_UTF8_REPLACE, "caf\xc3\xa9 \xef\xbf\xbd", "valid parts kept");
    fixed("fine", WR_UTF8_ESCAPE, "fine", "valid text unchanged");
    return done();
}
