/* SPDX-License-Identifier: Apache-2.0 */
#include "policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/xalloc.h"

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static bool ldh(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

int wr_net_name_normalise(const char *in, bool wildcard_ok, char out[WR_NET_NAME_BUF])
{
    size_t n = strlen(in), label = 0, o = 0;
    bool digits_only = true;

    if (n > 0 && in[n - 1] == '.')
        n--;
    if (n == 0 || n > WR_NET_NAME_MAX)
        return -1;
    if (wildcard_ok && n > 2 && in[0] == '*' && in[1] == '.') {
        out[o++] = '*';
        out[o++] = '.';
    }
    for (size_t i = o; i <= n; i++) {
        char c = i < n ? lower(in[i]) : '.';
        if (c == '.') {
            /* a label: 1..63 characters, no hyphen at either end */
            if (label == 0 || label > 63 || out[o - 1] == '-' || out[o - label] == '-')
                return -1;
            if (i < n) {
                label = 0;
                digits_only = true;
                out[o++] = '.';
            }
            continue;
        }
        if (!ldh(c))
            return -1;
        if (c < '0' || c > '9')
            digits_only = false;
        out[o++] = c;
        label++;
    }
    /* "1.2.3" or "10.0.0.1" is an address (or a mistyped one), not a name */
    if (digits_only)
        return -1;
    out[o] = '\0';
    return 0;
}

/* Parse an address or CIDR block of a policy entry: host bits cleared, the unspecified address
 * refused unless it is 0.0.0.0/0. */
static int parse_block(const char *s, struct wr_cidr4 *out)
{
    if (wr_cidr4_parse(s, true, out, NULL) < 0)
        return -1;
    if (out->addr == 0 && out->len != 0) {
        /* 0.0.0.0, 0.0.0.0/32, 0.0.0.0/8: only ALL_TRAFFIC may start at the unspecified address */
        uint32_t a;
        const char *slash = strchr(s, '/');
        char host[WR_INET4_STRLEN];
        size_t n = slash ? (size_t)(slash - s) : strlen(s);
        if (n < sizeof(host)) {
            memcpy(host, s, n);
            host[n] = '\0';
            if (wr_inet4_parse(host, &a) && a == 0)
                return -1;
        }
    }
    return 0;
}

/* An entry made of digits, dots and a slash is meant as an address. */
static bool looks_numeric(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s != '\0'; s++)
        if (!((*s >= '0' && *s <= '9') || *s == '.' || *s == '/'))
            return false;
    return true;
}

int wr_net_policy_allow(struct wr_net_policy *p, const char *entry, struct wr_err *err)
{
    struct wr_cidr4 c;
    char name[WR_NET_NAME_BUF];

    if (p->n_allow + p->n_names >= WR_NET_POLICY_MAX_ENTRIES)
        return wr_err_set(err, WR_EINVAL, 0, "too many allow_out entries (max %d)",
                          WR_NET_POLICY_MAX_ENTRIES);
    if (parse_block(entry, &c) == 0) {
        p->allow = xrealloc(p->allow, (p->n_allow + 1) * sizeof(*p->allow));
        p->allow[p->n_allow++] = c;
        return 0;
    }
    if (looks_numeric(entry))
        return wr_err_set(err, WR_EINVAL, 0, "invalid allowed CIDR %s", entry);
    if (wr_net_name_normalise(entry, true, name) < 0)
        return wr_err_set(err, WR_EINVAL, 0, "invalid allowed entry %s", entry);
    p->names = xrealloc(p->names, (p->n_names + 1) * sizeof(*p->names));
    if (name[0] == '*')
        p->names[p->n_names++] = (struct wr_net_name){xstrdup(name + 2), true};
    else
        p->names[p->n_names++] = (struct wr_net_name){xstrdup(name), false};
    return 0;
}

int wr_net_policy_deny(struct wr_net_policy *p, const char *entry, struct wr_err *err)
{
    struct wr_cidr4 c;

    if (p->n_deny >= WR_NET_POLICY_MAX_ENTRIES)
        return wr_err_set(err, WR_EINVAL, 0, "too many deny_out entries (max %d)",
                          WR_NET_POLICY_MAX_ENTRIES);
    if (parse_block(entry, &c) < 0)
        return wr_err_set(err, WR_EINVAL, 0, "invalid denied CIDR %s", entry);
    p->deny = xrealloc(p->deny, (p->n_deny + 1) * sizeof(*p->deny));
    p->deny[p->n_deny++] = c;
    return 0;
}

static bool denies_all_traffic(const struct wr_net_policy *p)
{
    for (size_t i = 0; i < p->n_deny; i++)
        if (p->deny[i].len == 0)
            return true;
    return false;
}

int wr_net_policy_check(const struct wr_net_policy *p, struct wr_err *err)
{
    if (p->n_names > 0 && p->internet && !denies_all_traffic(p))
        return wr_err_set(err, WR_EINVAL, 0,
                          "When specifying allowed domains in allow out, you must include "
                          "'ALL_TRAFFIC' in deny out to block all other traffic.");
    return 0;
}

bool wr_net_policy_l7(const struct wr_net_policy *p)
{
    return p->n_names > 0;
}

bool wr_net_policy_deny_all(const struct wr_net_policy *p)
{
    return !p->internet || denies_all_traffic(p);
}

static void rule_block(char rule[WR_NET_RULE_BUF], const char *what, const struct wr_cidr4 *c)
{
    char s[WR_CIDR4_STRLEN];

    if (rule == NULL)
        return;
    wr_cidr4_format(c, false, s);
    snprintf(rule, WR_NET_RULE_BUF, "%s %s", what, s);
}

static void rule_text(char rule[WR_NET_RULE_BUF], const char *text)
{
    if (rule != NULL)
        snprintf(rule, WR_NET_RULE_BUF, "%s", text);
}

bool wr_net_policy_rule_for_addr(const struct wr_net_policy *p, uint32_t addr,
                                 char rule[WR_NET_RULE_BUF])
{
    for (size_t i = 0; i < p->n_allow; i++)
        if (wr_cidr4_contains(&p->allow[i], addr)) {
            rule_block(rule, "allow_out", &p->allow[i]);
            return true;
        }
    for (size_t i = 0; i < p->n_deny; i++)
        if (wr_cidr4_contains(&p->deny[i], addr)) {
            rule_block(rule, "deny_out", &p->deny[i]);
            return false;
        }
    if (!p->internet) {
        rule_text(rule, "internet false");
        return false;
    }
    rule_text(rule, "default");
    return true;
}

bool wr_net_policy_addr_allowed(const struct wr_net_policy *p, uint32_t addr)
{
    return wr_net_policy_rule_for_addr(p, addr, NULL);
}

/* Case-insensitive comparison of n bytes. */
static bool same(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (lower(a[i]) != b[i])
            return false;
    return true;
}

bool wr_net_policy_rule_for_name(const struct wr_net_policy *p, const char *name,
                                 char rule[WR_NET_RULE_BUF])
{
    size_t n = strlen(name);

    if (n > 0 && name[n - 1] == '.')
        n--;
    for (size_t i = 0; n > 0 && i < p->n_names; i++) {
        const struct wr_net_name *e = &p->names[i];
        size_t k = strlen(e->name);
        bool hit;
        if (!e->wildcard)
            hit = n == k && same(name, e->name, k);
        else
            hit = n > k + 1 && name[n - k - 1] == '.' && same(name + n - k, e->name, k);
        if (hit) {
            if (rule != NULL)
                snprintf(rule, WR_NET_RULE_BUF, "allow_out %s%s", e->wildcard ? "*." : "", e->name);
            return true;
        }
    }
    for (size_t i = 0; i < p->n_deny; i++)
        if (p->deny[i].len == 0) {
            rule_text(rule, "deny_out 0.0.0.0/0");
            return false;
        }
    rule_text(rule, p->internet ? "not in allow_out" : "internet false");
    return false;
}

bool wr_net_policy_name_allowed(const struct wr_net_policy *p, const char *name)
{
    return wr_net_policy_rule_for_name(p, name, NULL);
}

void wr_net_policy_fini(struct wr_net_policy *p)
{
    for (size_t i = 0; i < p->n_names; i++)
        free(p->names[i].name);
    free(p->names);
    free(p->allow);
    free(p->deny);
    memset(p, 0, sizeof(*p));
}

void wr_net_policy_copy(struct wr_net_policy *dst, const struct wr_net_policy *src)
{
    *dst = *src;
    dst->allow = NULL;
    dst->deny = NULL;
    dst->names = NULL;
    if (src->n_allow > 0) {
        dst->allow = xmalloc(src->n_allow * sizeof(*dst->allow));
        memcpy(dst->allow, src->allow, src->n_allow * sizeof(*dst->allow));
    }
    if (src->n_deny > 0) {
        dst->deny = xmalloc(src->n_deny * sizeof(*dst->deny));
        memcpy(dst->deny, src->deny, src->n_deny * sizeof(*dst->deny));
    }
    if (src->n_names > 0) {
        dst->names = xmalloc(src->n_names * sizeof(*dst->names));
        for (size_t i = 0; i < src->n_names; i++)
            dst->names[i] =
                (struct wr_net_name){xstrdup(src->names[i].name), src->names[i].wildcard};
    }
}

bool wr_net_deny4_match(const struct wr_cidr4 *extra, size_t n, uint32_t addr,
                        char rule[WR_NET_RULE_BUF])
{
    for (size_t i = 0; i < wr_inet4_n_always_denied; i++)
        if (wr_cidr4_contains(&wr_inet4_always_denied[i], addr)) {
            rule_block(rule, "always-denied", &wr_inet4_always_denied[i]);
            return true;
        }
    for (size_t i = 0; i < n; i++)
        if (wr_cidr4_contains(&extra[i], addr)) {
            rule_block(rule, "deny", &extra[i]);
            return true;
        }
    return false;
}
