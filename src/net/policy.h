/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox's validated egress policy (E2B's semantics, docs: /work/wt/notes/net-design.md):
 * always-denied > allow_out (CIDR or name) > deny_out > default (internet). Built entry by entry
 * with wr_net_policy_allow/deny, then checked whole with wr_net_policy_check; everybody else
 * reads it. The always-denied blocks (util/inet.h) and the operator's extra deny list are not
 * part of the policy: wr_net_deny4_match checks them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"
#include "../util/inet.h"

/* At most this many entries in allow_out (CIDRs and names together) and in deny_out. */
#define WR_NET_POLICY_MAX_ENTRIES 256
/* The longest host name (RFC 1035 text form without the trailing dot), and its buffer size. */
#define WR_NET_NAME_MAX 253
#define WR_NET_NAME_BUF (WR_NET_NAME_MAX + 1)
/* Room for a rule text such as "allow_out *.<253 chars>" or "always-denied 255.255.255.255/32". */
#define WR_NET_RULE_BUF 280

struct wr_net_name {
    char *name;    /* lowercase, no trailing dot; for a wildcard the suffix after "*." */
    bool wildcard; /* "*.name": matches every name below name, never name itself */
};

struct wr_net_policy {
    bool internet; /* false: as if deny_out held 0.0.0.0/0 (allow_out still applies) */
    struct wr_cidr4 *allow;
    size_t n_allow;
    struct wr_net_name *names;
    size_t n_names;
    struct wr_cidr4 *deny;
    size_t n_deny;
    uint32_t max_connections; /* 0: the daemon's default */
};

/* Add one allow_out entry: an IPv4 address, a CIDR block (host bits are cleared), a host name or
 * "*.name". Names are lowercased and lose a trailing dot; they must be RFC 1123 names (labels of
 * 1..63 letters, digits and inner hyphens, 253 characters at most, a last label that is not all
 * digits), "*" only as a whole first label. 0.0.0.0 (any block at the unspecified address but
 * 0.0.0.0/0) is refused. -1 with WR_EINVAL: "invalid allowed entry X", "invalid allowed CIDR X",
 * "too many allow_out entries (max 256)". p is unchanged on error. */
int wr_net_policy_allow(struct wr_net_policy *p, const char *entry, struct wr_err *err);

/* Add one deny_out entry: an IPv4 address or CIDR block (not a name). -1 with WR_EINVAL:
 * "invalid denied CIDR X" (E2B's text), "too many deny_out entries (max 256)". */
int wr_net_policy_deny(struct wr_net_policy *p, const char *entry, struct wr_err *err);

/* The rules over the whole policy: with internet on, names in allow_out need 0.0.0.0/0 in
 * deny_out ("When specifying allowed domains in allow out, you must include 'ALL_TRAFFIC' in
 * deny out to block all other traffic.", WR_EINVAL). With internet off there is nothing to add:
 * everything not allowed is denied already. 0 if it holds. */
int wr_net_policy_check(const struct wr_net_policy *p, struct wr_err *err);

/* true if the policy has names (TCP 80/443 go through the egress proxy). */
bool wr_net_policy_l7(const struct wr_net_policy *p);

/* true if what allow_out does not list is denied: internet off, or 0.0.0.0/0 in deny_out. */
bool wr_net_policy_deny_all(const struct wr_net_policy *p);

/* The CIDR rules and the default for addr (host order): allow_out, then deny_out, then
 * internet. Does not look at the always-denied blocks (wr_net_deny4_match does). */
bool wr_net_policy_addr_allowed(const struct wr_net_policy *p, uint32_t addr);

/* wr_net_policy_addr_allowed that also writes the rule that decided into rule (may be NULL):
 * "allow_out 1.2.3.0/24", "deny_out 0.0.0.0/0", "internet false" or "default". */
bool wr_net_policy_rule_for_addr(const struct wr_net_policy *p, uint32_t addr,
                                 char rule[WR_NET_RULE_BUF]);

/* true if name (any case, a trailing dot ignored) matches a name of allow_out: equal to a plain
 * entry, or strictly below a wildcard's suffix ("*.example.test" matches a.example.test and
 * a.b.example.test, not example.test nor evil-example.test). */
bool wr_net_policy_name_allowed(const struct wr_net_policy *p, const char *name);

/* wr_net_policy_name_allowed that writes the matching entry ("allow_out *.example.test") into
 * rule, or, when none matches, what denies the name ("deny_out 0.0.0.0/0", "internet false",
 * or "not in allow_out" for a policy without names). rule may be NULL. */
bool wr_net_policy_rule_for_name(const struct wr_net_policy *p, const char *name,
                                 char rule[WR_NET_RULE_BUF]);

/* Free what p owns and zero it (internet false, no entries). p may be zeroed already. */
void wr_net_policy_fini(struct wr_net_policy *p);

/* A deep copy of src into dst, which is overwritten (not freed first). */
void wr_net_policy_copy(struct wr_net_policy *dst, const struct wr_net_policy *src);

/* true if addr is in the always-denied blocks (util/inet.h) or in the n blocks of extra (the
 * operator's --net-deny, may be NULL). Writes "always-denied 10.0.0.0/8" or "deny 1.2.3.0/24"
 * into rule (may be NULL) when it is. */
bool wr_net_deny4_match(const struct wr_cidr4 *extra, size_t n, uint32_t addr,
                        char rule[WR_NET_RULE_BUF]);

/* Normalise a host name as the policy compares them: lowercase, a trailing dot dropped, checked
 * as an RFC 1123 name (a "*." first label allowed when wildcard_ok). 0 with the result in out, -1
 * if it is not a valid name (nothing reported: the callers word their own error). */
int wr_net_name_normalise(const char *in, bool wildcard_ok, char out[WR_NET_NAME_BUF]);
