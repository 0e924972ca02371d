/* SPDX-License-Identifier: Apache-2.0 */
/* Quantity parsers: what users type for --memory, --cpus, --pids, --timeout. */
#include "../../src/util/parse.h"
#include "tap.h"

int main(void)
{
    struct wr_err err;
    uint64_t v = 0;
    uint32_t m = 0;

    ok(wr_parse_size("512M", &v, &err) == 0 && v == 512ull << 20, "512M");
    ok(wr_parse_size("1g", &v, &err) == 0 && v == 1ull << 30, "1g");
    ok(wr_parse_size("1.5G", &v, &err) == 0 && v == 3ull << 29, "1.5G");
    ok(wr_parse_size("64KiB", &v, &err) == 0 && v == 65536, "64KiB");
    ok(wr_parse_size("4096", &v, &err) == 0 && v == 4096, "plain bytes");
    ok(wr_parse_size("lots", &v, &err) < 0 && err.kind == WR_EINVAL, "rejects words");
    ok(wr_parse_size("-1M", &v, &err) < 0, "rejects negative");
    ok(wr_parse_size("0", &v, &err) < 0, "rejects zero");
    ok(wr_parse_size("12Q", &v, &err) < 0, "rejects unknown unit");
    ok(wr_parse_size("1MBx", &v, &err) < 0, "rejects trailing junk");
    ok(wr_parse_size("99999999T", &v, &err) < 0, "rejects overflow");
    ok(wr_parse_size("", &v, &err) < 0, "rejects empty");

    ok(wr_parse_cpus("1", &m, &err) == 0 && m == 1000, "1 cpu");
    ok(wr_parse_cpus("0.5", &m, &err) == 0 && m == 500, "half a cpu");
    ok(wr_parse_cpus("2.25", &m, &err) == 0 && m == 2250, "2.25 cpus");
    ok(wr_parse_cpus("0", &m, &err) < 0, "rejects 0");
    ok(wr_parse_cpus("0.001", &m, &err) < 0, "rejects below 0.01");
    ok(wr_parse_cpus("2000", &m, &err) < 0, "rejects above 1024");
    ok(wr_parse_cpus("1x", &m, &err) < 0, "rejects junk");

    ok(wr_parse_uint("60", 100, &v, &err) == 0 && v == 60, "60");
    ok(wr_parse_uint("101", 100, &v, &err) < 0, "rejects above max");
    ok(wr_parse_uint("-1", 100, &v, &err) < 0, "rejects negative");
    ok(wr_parse_uint("1e3", 10000, &v, &err) < 0, "rejects exponent");
    is_str(err.msg, "`1e3` is not a whole number from 0 to 10000", "message names the value");

    {
        double r;
        uint64_t b;
        ok(wr_parse_rate("2.5/s:10", false, &r, &b, &err) == 0 && r == 2.5 && b == 10, "2.5/s:10");
        ok(wr_parse_rate("64M/s:1G", true, &r, &b, &err) == 0 && r == 64.0 * 1048576 &&
               b == 1ull << 30,
           "64M/s:1G in bytes");
        ok(wr_parse_rate("off", false, &r, &b, &err) == 0 && r == 0 && b == 0, "off");
        ok(wr_parse_rate("10", false, &r, &b, &err) < 0, "rejects a rate without /s:BURST");
        ok(wr_parse_rate("1/s:0", false, &r, &b, &err) < 0, "rejects a burst of 0");
        ok(wr_parse_rate("-1/s:5", false, &r, &b, &err) < 0, "rejects a negative rate");
        ok(wr_parse_rate("x/s:5", false, &r, &b, &err) < 0, "rejects junk");
        ok(wr_parse_rate("1/m:5", false, &r, &b, &err) < 0, "rejects another unit than /s");
    }
    return done();
}
