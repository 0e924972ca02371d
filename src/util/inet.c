/* SPDX-License-Identifier: Apache-2.0 */
#include "inet.h"

#include <stdio.h>
#include <string.h>

/* Host order, so the initialisers read as addresses. */
#define A(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (d))

const struct wr_cidr4 wr_inet4_always_denied[] = {
    {A(0, 0, 0, 0), 8},       /* "this" network */
    {A(10, 0, 0, 0), 8},      /* RFC 1918 */
    {A(100, 64, 0, 0), 10},   /* CGNAT (RFC 6598) */
    {A(127, 0, 0, 0), 8},     /* loopback, through the gateway or otherwise */
    {A(169, 254, 0, 0), 16},  /* link-local: 169.254.169.254, the cloud metadata service */
    {A(172, 16, 0, 0), 12},   /* RFC 1918 */
    {A(192, 0, 0, 0), 24},    /* IETF protocol assignments */
    {A(192, 0, 2, 0), 24},    /* documentation (TEST-NET-1) */
    {A(192, 168, 0, 0), 16},  /* RFC 1918 */
    {A(198, 51, 100, 0), 24}, /* documentation (TEST-NET-2) */
    {A(203, 0, 113, 0), 24},  /* documentation (TEST-NET-3) */
    {A(224, 0, 0, 0), 4},     /* multicast */
    {A(240, 0, 0, 0), 4},     /* reserved, and the limited broadcast address */
};
const size_t wr_inet4_n_always_denied =
    sizeof(wr_inet4_always_denied) / sizeof(wr_inet4_always_denied[0]);

bool wr_inet4_parse(const char *s, uint32_t *addr)
{
    uint32_t v = 0;

    for (int part = 0; part < 4; part++) {
        unsigned n = 0;
        int digits = 0;

        if (part > 0 && *s++ != '.')
            return false;
        while (*s >= '0' && *s <= '9') {
            if (digits > 0 && n == 0)
                return false; /* a leading zero: inet_pton's octal trap */
            n = n * 10 + (unsigned)(*s++ - '0');
            if (++digits > 3 || n > 255)
                return false;
        }
        if (digits == 0)
            return false;
        v = v << 8 | n;
    }
    if (*s != '\0')
        return false;
    *addr = v;
    return true;
}

int wr_cidr4_parse(const char *s, bool lenient, struct wr_cidr4 *out, struct wr_err *err)
{
    char host[WR_INET4_STRLEN];
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    unsigned len = 32;
    uint32_t addr;

    if (n >= sizeof(host))
        return wr_err_set(err, WR_EINVAL, 0, "`%s` is not an IPv4 address or CIDR block", s);
    memcpy(host, s, n);
    host[n] = '\0';
    if (!wr_inet4_parse(host, &addr))
        return wr_err_set(err, WR_EINVAL, 0, "`%s` is not an IPv4 address or CIDR block", s);
    if (slash != NULL) {
        const char *p = slash + 1;
        len = 0;
        if (*p == '\0' || (p[0] == '0' && p[1] != '\0'))
            return wr_err_set(err, WR_EINVAL, 0, "`%s`: bad prefix length", s);
        for (; *p >= '0' && *p <= '9' && len <= 32; p++)
            len = len * 10 + (unsigned)(*p - '0');
        if (*p != '\0' || len > 32)
            return wr_err_set(err, WR_EINVAL, 0, "`%s`: bad prefix length", s);
    }
    if ((addr & ~wr_cidr4_mask((uint8_t)len)) != 0 && !lenient)
        return wr_err_set(err, WR_EINVAL, 0, "`%s` has host bits set", s);
    out->addr = addr & wr_cidr4_mask((uint8_t)len);
    out->len = (uint8_t)len;
    return 0;
}

void wr_inet4_format(uint32_t addr, char out[WR_INET4_STRLEN])
{
    snprintf(out, WR_INET4_STRLEN, "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 255, (addr >> 8) & 255,
             addr & 255);
}

void wr_cidr4_format(const struct wr_cidr4 *c, bool bare_host, char out[WR_CIDR4_STRLEN])
{
    char a[WR_INET4_STRLEN];

    wr_inet4_format(c->addr, a);
    if (bare_host && c->len == 32)
        snprintf(out, WR_CIDR4_STRLEN, "%s", a);
    else
        snprintf(out, WR_CIDR4_STRLEN, "%s/%u", a, (unsigned)c->len);
}

bool wr_cidr4_overlap(const struct wr_cidr4 *a, const struct wr_cidr4 *b)
{
    uint8_t len = a->len < b->len ? a->len : b->len;
    return (a->addr & wr_cidr4_mask(len)) == (b->addr & wr_cidr4_mask(len));
}

bool wr_cidr4_in(const struct wr_cidr4 *set, size_t n, uint32_t addr)
{
    for (size_t i = 0; i < n; i++)
        if (wr_cidr4_contains(&set[i], addr))
            return true;
    return false;
}
