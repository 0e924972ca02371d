/* SPDX-License-Identifier: Apache-2.0 */
/* The port numbers the exposed-port routes take (src/api/ports.c): canonical decimal, 1-65535,
 * as the native path, the E2b-Sandbox-Port header and the Host `<port>-<id>.<domain>` give them. */
#include <string.h>

#include "../../src/api/api_int.h"
#include "tap.h"

static bool parse(const char *s, unsigned *v)
{
    return api_port_parse(s, strlen(s), v);
}

int main(void)
{
    static const char *const bad[] = {"0",   "65536", "08080", "-1",   "+80",    "80a", " 80",
                                      "80 ", "",      "1e3",   "0x50", "999999", "00"};
    unsigned v = 0;

    ok(parse("1", &v) && v == 1, "1");
    ok(parse("80", &v) && v == 80, "80");
    ok(parse("49983", &v) && v == 49983, "49983");
    ok(parse("65535", &v) && v == 65535, "65535");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ok(!parse(bad[i], &v), "refuses `%s`", bad[i]);
    /* a length that stops inside the string: the Host's label before its '-' */
    ok(api_port_parse("8000-abc.example", 4, &v) && v == 8000, "a prefix of a Host label");
    ok(!api_port_parse("8000-abc.example", 5, &v), "the '-' is not part of a port");
    return done();
}
