/* SPDX-License-Identifier: Apache-2.0 */
/* src/net/policy.c: entry validation with E2B's texts, the whole-policy rule, and the order
 * always-denied > allow_out > deny_out > default. */
#include <string.h>

#include "../../src/net/policy.h"
#include "tap.h"

#define A(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (d))

static void entries(void)
{
    struct wr_net_policy p = {.internet = true};
    struct wr_err err;

    ok(wr_net_policy_allow(&p, "8.8.8.8", &err) == 0, "allow a bare address");
    ok(wr_net_policy_allow(&p, "198.18.1.7/16", &err) == 0, "allow a CIDR with host bits");
    is_int(p.n_allow, 2, "two blocks");
    is_int(p.allow[1].addr, A(198, 18, 0, 0), "host bits cleared");
    is_int(p.allow[1].len, 16, "prefix kept");
    ok(wr_net_policy_allow(&p, "0.0.0.0/0", &err) == 0, "allow 0.0.0.0/0");
    ok(wr_net_policy_allow(&p, "0.0.0.0", &err) < 0, "allow 0.0.0.0 refused");
    is_str(err.msg, "invalid allowed CIDR 0.0.0.0", "its text");
    ok(wr_net_policy_allow(&p, "0.0.0.0/8", &err) < 0, "allow 0.0.0.0/8 refused");
    ok(wr_net_policy_allow(&p, "1.2.3.4/33", &err) < 0, "a /33 refused");
    ok(wr_net_policy_allow(&p, "010.0.0.1", &err) < 0, "a leading zero refused");
    ok(wr_net_policy_allow(&p, "1.2.3", &err) < 0, "three parts refused (not a name either)");

    ok(wr_net_policy_allow(&p, "Example.TEST.", &err) == 0, "a name, upper case, trailing dot");
    is_str(p.names[0].name, "example.test", "lowercased, dot dropped");
    ok(!p.names[0].wildcard, "not a wildcard");
    ok(wr_net_policy_allow(&p, "*.cdn.example.test", &err) == 0, "a wildcard");
    is_str(p.names[1].name, "cdn.example.test", "its suffix");
    ok(p.names[1].wildcard, "is a wildcard");
    const char *bad[] = {"*",       "*.",       "a.*.b",   "-a.test",  "a-.test",
                         "a..test", "a_b.test", ".test",   "a b.test", "**.test",
                         "é.test",  "",         "*.*.test"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ok(wr_net_policy_allow(&p, bad[i], &err) < 0, "name '%s' refused", bad[i]);
        ok(strstr(err.msg, "invalid allowed") != NULL, "  with '%s'", err.msg);
    }
    char label[70] = {0}, longname[300] = {0};
    memset(label, 'a', 63);
    ok(wr_net_policy_allow(&p, label, &err) == 0, "a 63-byte label");
    memset(label, 'a', 64);
    ok(wr_net_policy_allow(&p, label, &err) < 0, "a 64-byte label refused");
    for (int i = 0; i < 4; i++)
        strcat(longname, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.");
    strcat(longname, "abcd");
    is_int(strlen(longname), 256, "a 256-byte name");
    ok(wr_net_policy_allow(&p, longname, &err) < 0, "over 253 refused");
    longname[253] = '\0';
    ok(wr_net_policy_allow(&p, longname, &err) == 0, "253 accepted");

    ok(wr_net_policy_deny(&p, "10.0.0.0/8", &err) == 0, "deny a CIDR");
    ok(wr_net_policy_deny(&p, "example.test", &err) < 0, "deny a name refused");
    is_str(err.msg, "invalid denied CIDR example.test", "E2B's text");
    ok(wr_net_policy_deny(&p, "0.0.0.0", &err) < 0, "deny 0.0.0.0 refused");
    is_str(err.msg, "invalid denied CIDR 0.0.0.0", "E2B's text");
    ok(wr_net_policy_deny(&p, "0.0.0.0/0", &err) == 0, "deny ALL_TRAFFIC");
    wr_net_policy_fini(&p);
    is_int(p.n_names, 0, "fini empties");

    struct wr_net_policy q = {.internet = true};
    char e[32];
    int okn = 0;
    for (int i = 0; i < 300; i++) {
        snprintf(e, sizeof(e), "198.18.%d.%d", i / 250, i % 250 + 1);
        okn += wr_net_policy_allow(&q, e, &err) == 0;
    }
    is_int(okn, WR_NET_POLICY_MAX_ENTRIES, "at most 256 allow_out entries");
    is_str(err.msg, "too many allow_out entries (max 256)", "its text");
    okn = 0;
    for (int i = 0; i < 300; i++) {
        snprintf(e, sizeof(e), "198.18.%d.%d", i / 250, i % 250 + 1);
        okn += wr_net_policy_deny(&q, e, &err) == 0;
    }
    is_int(okn, WR_NET_POLICY_MAX_ENTRIES, "at most 256 deny_out entries");
    wr_net_policy_fini(&q);
}

static void whole(void)
{
    struct wr_net_policy p = {.internet = true};
    struct wr_err err;

    ok(wr_net_policy_allow(&p, "example.test", &err) == 0, "a name");
    ok(wr_net_policy_check(&p, &err) < 0, "names without ALL_TRAFFIC denied refused");
    is_str(err.msg,
           "When specifying allowed domains in allow out, you must include 'ALL_TRAFFIC' in deny "
           "out to block all other traffic.",
           "E2B's text");
    p.internet = false;
    ok(wr_net_policy_check(&p, &err) == 0, "internet false needs no ALL_TRAFFIC");
    ok(wr_net_policy_deny_all(&p), "internet false is deny-all");
    p.internet = true;
    ok(!wr_net_policy_deny_all(&p), "internet without 0/0 is not deny-all");
    ok(wr_net_policy_deny(&p, "0.0.0.0/0", &err) == 0 && wr_net_policy_check(&p, &err) == 0,
       "with ALL_TRAFFIC denied it holds");
    ok(wr_net_policy_deny_all(&p), "0/0 denied is deny-all");
    ok(wr_net_policy_l7(&p), "names make it L7");
    wr_net_policy_fini(&p);
    ok(!wr_net_policy_l7(&p), "no names, no L7");
}

static void semantics(void)
{
    struct wr_net_policy p = {.internet = true}, c;
    struct wr_err err;
    char rule[WR_NET_RULE_BUF];

    ok(wr_net_policy_allow(&p, "198.18.5.0/24", &err) == 0 &&
           wr_net_policy_deny(&p, "198.18.0.0/15", &err) == 0 &&
           wr_net_policy_deny(&p, "0.0.0.0/0", &err) == 0 &&
           wr_net_policy_allow(&p, "*.example.test", &err) == 0 &&
           wr_net_policy_allow(&p, "api.other.test", &err) == 0,
       "build");
    ok(wr_net_policy_rule_for_addr(&p, A(198, 18, 5, 9), rule), "allow beats deny");
    is_str(rule, "allow_out 198.18.5.0/24", "the allow rule");
    ok(!wr_net_policy_rule_for_addr(&p, A(198, 18, 6, 9), rule), "deny below");
    is_str(rule, "deny_out 198.18.0.0/15", "the first deny that matches");
    ok(!wr_net_policy_addr_allowed(&p, A(1, 1, 1, 1)), "0/0 denies the rest");

    ok(wr_net_policy_name_allowed(&p, "a.example.test"), "wildcard: one label below");
    ok(wr_net_policy_rule_for_name(&p, "A.B.Example.Test.", rule), "wildcard: two, any case, dot");
    is_str(rule, "allow_out *.example.test", "the wildcard rule");
    ok(!wr_net_policy_name_allowed(&p, "example.test"), "wildcard: not the suffix itself");
    ok(!wr_net_policy_name_allowed(&p, "evil-example.test"), "wildcard: not evil-example.test");
    ok(!wr_net_policy_name_allowed(&p, "aexample.test"), "wildcard: not aexample.test");
    ok(!wr_net_policy_name_allowed(&p, ".example.test"), "wildcard: not an empty label");
    ok(wr_net_policy_name_allowed(&p, "API.other.test."), "exact, any case");
    ok(!wr_net_policy_rule_for_name(&p, "x.api.other.test", rule), "exact: not below");
    is_str(rule, "deny_out 0.0.0.0/0", "what denies it");
    ok(!wr_net_policy_name_allowed(&p, "other.test"), "exact: not above");
    ok(!wr_net_policy_name_allowed(&p, ""), "empty name");

    wr_net_policy_copy(&c, &p);
    wr_net_policy_fini(&p);
    ok(wr_net_policy_name_allowed(&c, "x.example.test") &&
           wr_net_policy_addr_allowed(&c, A(198, 18, 5, 1)),
       "a copy outlives the original");
    wr_net_policy_fini(&c);

    struct wr_net_policy off = {.internet = false};
    ok(!wr_net_policy_rule_for_addr(&off, A(1, 1, 1, 1), rule), "internet false denies");
    is_str(rule, "internet false", "its rule");
    struct wr_net_policy on = {.internet = true};
    ok(wr_net_policy_rule_for_addr(&on, A(1, 1, 1, 1), rule), "internet true allows");
    is_str(rule, "default", "its rule");

    struct wr_cidr4 extra = {A(198, 18, 9, 0), 24};
    ok(wr_net_deny4_match(NULL, 0, A(169, 254, 169, 254), rule), "metadata always denied");
    is_str(rule, "always-denied 169.254.0.0/16", "its rule");
    ok(wr_net_deny4_match(&extra, 1, A(198, 18, 9, 1), rule), "extra deny list");
    is_str(rule, "deny 198.18.9.0/24", "its rule");
    ok(!wr_net_deny4_match(&extra, 1, A(198, 18, 8, 1), NULL), "the test internet is not denied");
}

int main(void)
{
    entries();
    whole();
    semantics();
    return done();
}
