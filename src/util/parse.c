/* SPDX-License-Identifier: Apache-2.0 */
/* Quantity parsers. */
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int wr_parse_size(const char *s, uint64_t *out, struct wr_err *err)
{
    char *end = NULL;
    double v;
    uint64_t mult = 1;

    if (s == NULL || *s == '\0' || !(isdigit((unsigned char)*s) || *s == '.'))
        goto bad;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s)
        goto bad;
    switch (tolower((unsigned char)*end)) {
    case '\0':
        break;
    case 'k':
        mult = 1ull << 10;
        break;
    case 'm':
        mult = 1ull << 20;
        break;
    case 'g':
        mult = 1ull << 30;
        break;
    case 't':
        mult = 1ull << 40;
        break;
    default:
        goto bad;
    }
    if (*end != '\0') {
        end++;
        if (tolower((unsigned char)*end) == 'i')
            end++;
        if (tolower((unsigned char)*end) == 'b')
            end++;
        if (*end != '\0')
            goto bad;
    }
    v *= (double)mult;
    if (!(v >= 1) || v > 1.8e19)
        goto bad;
    *out = (uint64_t)v;
    return 0;
bad:
    return wr_err_set(err, WR_EINVAL, 0, "`%s` is not a size (examples: 512M, 2G, 65536)",
                      s ? s : "");
}

int wr_parse_cpus(const char *s, uint32_t *millis, struct wr_err *err)
{
    char *end = NULL;
    double v;

    if (s == NULL || *s == '\0' || !(isdigit((unsigned char)*s) || *s == '.'))
        goto bad;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= 0.01) || v > 1024)
        goto bad;
    *millis = (uint32_t)(v * 1000 + 0.5);
    return 0;
bad:
    return wr_err_set(err, WR_EINVAL, 0, "`%s` is not a CPU count (0.01 to 1024, e.g. 1.5)",
                      s ? s : "");
}

int wr_parse_uint(const char *s, uint64_t max, uint64_t *out, struct wr_err *err)
{
    char *end = NULL;
    unsigned long long v;

    if (s == NULL || !isdigit((unsigned char)*s))
        goto bad;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max)
        goto bad;
    *out = v;
    return 0;
bad:
    return wr_err_set(err, WR_EINVAL, 0, "`%s` is not a whole number from 0 to %llu", s ? s : "",
                      (unsigned long long)max);
}

bool wr_parse_id(const char *s, unsigned long *out)
{
    uint64_t v;

    if (wr_parse_uint(s, UINT32_MAX - 1, &v, NULL) < 0)
        return false;
    *out = (unsigned long)v;
    return true;
}

int wr_parse_rate(const char *s, bool bytes, double *rate, uint64_t *burst, struct wr_err *err)
{
    const char *colon = strchr(s, ':');
    char num[64];
    size_t rl;
    uint64_t v;
    char *end;

    if (strcmp(s, "0") == 0 || strcmp(s, "off") == 0) {
        *rate = 0;
        *burst = 0;
        return 0;
    }
    if (colon == NULL || (rl = (size_t)(colon - s)) < 3 || strncmp(colon - 2, "/s", 2) != 0 ||
        rl - 2 >= sizeof(num))
        return wr_err_set(err, WR_EINVAL, 0, "`%s`: expected RATE/s:BURST", s);
    memcpy(num, s, rl - 2);
    num[rl - 2] = '\0';
    if (bytes) {
        if (wr_parse_size(num, &v, err) < 0)
            return -1;
        *rate = (double)v;
        if (wr_parse_size(colon + 1, burst, err) < 0)
            return -1;
    } else {
        errno = 0;
        *rate = strtod(num, &end);
        if (errno != 0 || *end != '\0' || !(*rate > 0) || *rate > 1e9)
            return wr_err_set(err, WR_EINVAL, 0, "`%s`: the rate must be a number above 0", s);
        if (wr_parse_uint(colon + 1, UINT32_MAX, burst, err) < 0)
            return -1;
    }
    if (*burst < 1)
        return wr_err_set(err, WR_EINVAL, 0, "`%s`: the burst must be at least 1", s);
    return 0;
}
