/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's nftables table (nft.h), built from libnftnl objects into nfnetlink batches: each
 * call is one transaction, sent with one sendmsg, with an ACK asked for on its last message
 * only (errors come back for any message anyway), so a batch of any size needs no big receive
 * buffer. Nothing is read back from the kernel but two counters on request. */
#include "nft.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "netslot.h"

/* nft's datatype numbers (userspace metadata only: `nft list` prints keys with them). */
#define TYPE_IPADDR    7
#define TYPE_IFNAME    41
#define TYPE_BITS      6
#define IFNAME_KEY_LEN 16 /* IFNAMSIZ: the kernel compares the whole, zero-padded name */

#define ELEMS_PER_MSG 256 /* NFTA_SET_ELEM_LIST is one attribute: its length must fit 16 bits */
#define MSG_ROOM      65536

/* What a slot has in the table (the kernel is never asked). */
enum { SB_SET = 1, SB_L7 = 2, SB_OPEN = 4 };
struct sbrec {
    uint8_t flags;
    uint32_t cap; /* max_connections, 0: none */
    size_t n_allow, n_deny;
    struct wr_cidr4 *cidr; /* n_allow allowed blocks, then n_deny denied ones (normalized) */
};

struct wr_nft {
    char *table;
    struct wr_cidr4 pool;
    uint32_t capacity;
    uint16_t dns_port, proxy_port;
    uint32_t log_group;
    bool forward_guard;
    struct mnl_socket *nl;
    uint32_t portid, seq;
    int sndbuf;
    struct sbrec *rec;       /* capacity entries */
    uint64_t have_a, have_d; /* bit L: set a<L> / d<L> and its rule exist */
    uint32_t *caps;          /* values N for which cap<N>, cc<N> and their rule exist */
    size_t n_caps;
};

/* ---- batches -------------------------------------------------------------------------------- */

struct batch {
    char *buf;
    size_t len, cap;
    size_t last; /* offset of the last message added (for its NLM_F_ACK) */
    uint32_t seq0, seq;
    struct wr_nft *t;
};

static void batch_room(struct batch *b)
{
    if (b->cap - b->len >= MSG_ROOM)
        return;
    while (b->cap - b->len < MSG_ROOM)
        b->cap = b->cap ? 2 * b->cap : 4 * MSG_ROOM;
    b->buf = xrealloc(b->buf, b->cap);
}

static void batch_init(struct batch *b, struct wr_nft *t)
{
    *b = (struct batch){.t = t};
    batch_room(b);
    b->seq0 = b->seq = t->seq;
    nftnl_batch_begin(b->buf, b->seq++);
    b->len += NLMSG_ALIGN(((struct nlmsghdr *)b->buf)->nlmsg_len);
}

static void batch_fini(struct batch *b)
{
    free(b->buf);
    b->buf = NULL;
}

/* A message's header at the end of the batch; batch_add() commits it. */
static struct nlmsghdr *batch_msg(struct batch *b, uint16_t type, uint16_t flags)
{
    batch_room(b);
    return nftnl_nlmsg_build_hdr(b->buf + b->len, type, NFPROTO_INET, flags, b->seq++);
}

static void batch_add(struct batch *b, struct nlmsghdr *nlh)
{
    b->last = b->len;
    b->len += NLMSG_ALIGN(nlh->nlmsg_len);
}

/* Send the batch as one transaction and wait for its outcome: 0, or -1 with err. */
static int batch_run(struct batch *b, const char *what, struct wr_err *err)
{
    struct wr_nft *t = b->t;
    struct nlmsghdr *last = (struct nlmsghdr *)(b->buf + b->last);
    uint32_t last_seq = last->nlmsg_seq;
    char rbuf[16384];
    int first = 0;
    uint32_t first_seq = 0;
    bool done = false;

    if (b->last == 0) /* nothing but the begin message */
        return 0;
    last->nlmsg_flags |= NLM_F_ACK;
    batch_room(b);
    nftnl_batch_end(b->buf + b->len, b->seq++);
    b->len += NLMSG_ALIGN(((struct nlmsghdr *)(b->buf + b->len))->nlmsg_len);
    t->seq = b->seq;
    if (b->len + 4096 > (size_t)t->sndbuf) {
        int want = (int)(b->len + 65536);
        if (setsockopt(mnl_socket_get_fd(t->nl), SOL_SOCKET, SO_SNDBUFFORCE, &want, sizeof(want)) ==
            0)
            t->sndbuf = want;
    }
    if (mnl_socket_sendto(t->nl, b->buf, b->len) < 0)
        return wr_err_sys(err, "nft %s: send", what);
    while (!done) {
        struct pollfd p = {.fd = mnl_socket_get_fd(t->nl), .events = POLLIN};
        ssize_t n;

        if (poll(&p, 1, first ? 200 : 30000) <= 0) {
            if (first)
                break;
            return wr_err_set(err, WR_ESYS, ETIMEDOUT, "nft %s: no answer", what);
        }
        n = mnl_socket_recvfrom(t->nl, rbuf, sizeof(rbuf));
        if (n < 0)
            return wr_err_sys(err, "nft %s: receive", what);
        for (struct nlmsghdr *h = (struct nlmsghdr *)rbuf; mnl_nlmsg_ok(h, (int)n);
             h = mnl_nlmsg_next(h, (int *)&n)) {
            if (h->nlmsg_type != NLMSG_ERROR || h->nlmsg_seq < b->seq0 || h->nlmsg_seq > last_seq)
                continue;
            const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
            if (e->error != 0 && first == 0) {
                first = e->error;
                first_seq = h->nlmsg_seq;
            }
            if (h->nlmsg_seq == last_seq)
                done = true;
        }
    }
    if (first != 0)
        return wr_err_set(err, -first == ENOMEM || -first == ENOSPC ? WR_ELIMIT : WR_ESYS, -first,
                          "nft %s: message %u of the transaction", what,
                          (unsigned)(first_seq - b->seq0));
    return 0;
}

/* ---- objects -------------------------------------------------------------------------------- */

static void put_table(struct batch *b, uint16_t type, uint16_t flags)
{
    struct nftnl_table *tb = nftnl_table_alloc();
    struct nlmsghdr *nlh = batch_msg(b, type, flags);

    nftnl_table_set_str(tb, NFTNL_TABLE_NAME, b->t->table);
    nftnl_table_set_u32(tb, NFTNL_TABLE_FAMILY, NFPROTO_INET);
    nftnl_table_nlmsg_build_payload(nlh, tb);
    nftnl_table_free(tb);
    batch_add(b, nlh);
}

/* A chain: a base chain if type is set. */
static void put_chain(struct batch *b, uint16_t msg, const char *name, const char *type,
                      uint32_t hook, int32_t prio)
{
    struct nftnl_chain *c = nftnl_chain_alloc();
    struct nlmsghdr *nlh = batch_msg(b, msg, msg == NFT_MSG_NEWCHAIN ? NLM_F_CREATE : 0);

    nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, b->t->table);
    nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
    if (type != NULL) {
        nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, type);
        nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, hook);
        nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
        nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
    }
    nftnl_chain_nlmsg_build_payload(nlh, c);
    nftnl_chain_free(c);
    batch_add(b, nlh);
}

static uint32_t set_ids;

/* A named set: a map of counter objects with obj_type (NFT_SET_OBJECT in flags),
 * a verdict map (NFT_SET_MAP alone), or a plain or interval set; size for a dynamic one. */
static void put_set(struct batch *b, const char *name, uint32_t key_type, uint32_t key_len,
                    uint32_t flags, uint32_t obj_type, uint32_t size)
{
    uint32_t id = ++set_ids;
    struct nftnl_set *s = nftnl_set_alloc();
    struct nlmsghdr *nlh = batch_msg(b, NFT_MSG_NEWSET, NLM_F_CREATE);

    nftnl_set_set_str(s, NFTNL_SET_TABLE, b->t->table);
    nftnl_set_set_str(s, NFTNL_SET_NAME, name);
    nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
    nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, key_type);
    nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, key_len);
    nftnl_set_set_u32(s, NFTNL_SET_FLAGS, flags);
    nftnl_set_set_u32(s, NFTNL_SET_ID, id);
    if (flags & NFT_SET_OBJECT) {
        nftnl_set_set_u32(s, NFTNL_SET_OBJ_TYPE, obj_type);
    } else if (flags & NFT_SET_MAP) {
        nftnl_set_set_u32(s, NFTNL_SET_DATA_TYPE, NFT_DATA_VERDICT);
        nftnl_set_set_u32(s, NFTNL_SET_DATA_LEN, 0);
    }
    if (size != 0)
        nftnl_set_set_u32(s, NFTNL_SET_DESC_SIZE, size);
    if (key_type == TYPE_IFNAME) {
        /* for `nft list`: a name is a string in host order, not a big-endian number */
        struct nftnl_udata_buf *ud = nftnl_udata_buf_alloc(64);
        nftnl_udata_put_u32(ud, NFTNL_UDATA_SET_KEYBYTEORDER, 1 /* BYTEORDER_HOST_ENDIAN */);
        nftnl_set_set_data(s, NFTNL_SET_USERDATA, nftnl_udata_buf_data(ud),
                           nftnl_udata_buf_len(ud));
        nftnl_udata_buf_free(ud);
    }
    nftnl_set_nlmsg_build_payload(nlh, s);
    nftnl_set_free(s);
    batch_add(b, nlh);
}

/* Elements being gathered for one set, sent ELEMS_PER_MSG to a message. */
struct elems {
    struct batch *b;
    const char *set;
    uint16_t msg;
    struct nftnl_set *s;
    unsigned n;
};

static void elems_flush(struct elems *es)
{
    struct nlmsghdr *nlh;

    if (es->s == NULL)
        return;
    nlh = batch_msg(es->b, es->msg, es->msg == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0);
    nftnl_set_elems_nlmsg_build_payload(nlh, es->s);
    batch_add(es->b, nlh);
    nftnl_set_free(es->s);
    es->s = NULL;
    es->n = 0;
}

static struct nftnl_set_elem *elems_new(struct elems *es, const void *key, size_t len)
{
    struct nftnl_set_elem *e = nftnl_set_elem_alloc();

    if (es->s == NULL) {
        es->s = nftnl_set_alloc();
        nftnl_set_set_str(es->s, NFTNL_SET_TABLE, es->b->t->table);
        nftnl_set_set_str(es->s, NFTNL_SET_NAME, es->set);
        nftnl_set_set_u32(es->s, NFTNL_SET_FAMILY, NFPROTO_INET);
    }
    nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, (uint32_t)len);
    nftnl_set_elem_add(es->s, e);
    es->n++;
    return e;
}

static void elems_next(struct elems *es)
{
    if (es->n >= ELEMS_PER_MSG)
        elems_flush(es);
}

struct ifkey {
    char name[IFNAME_KEY_LEN];
};
struct ownkey {
    char name[IFNAME_KEY_LEN];
    uint32_t addr; /* network order */
};

static struct ifkey ifkey(const struct wr_nft *t, uint32_t slot)
{
    struct ifkey k;

    memset(&k, 0, sizeof(k));
    wr_netslot_ifname(t->pool, slot, k.name);
    return k;
}

/* One element of an ifname set (slots, l7), added or deleted. */
static void slot_elem(struct batch *b, const char *set, uint16_t msg, uint32_t slot)
{
    struct elems es = {.b = b, .set = set, .msg = msg};
    struct ifkey k = ifkey(b->t, slot);

    elems_new(&es, &k, sizeof(k));
    elems_flush(&es);
}

static void counter_obj(struct batch *b, uint16_t msg, const char *name)
{
    struct nftnl_obj *o = nftnl_obj_alloc();
    struct nlmsghdr *nlh = batch_msg(b, msg, msg == NFT_MSG_NEWOBJ ? NLM_F_CREATE : 0);

    nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, b->t->table);
    nftnl_obj_set_str(o, NFTNL_OBJ_NAME, name);
    nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_COUNTER);
    nftnl_obj_set_u32(o, NFTNL_OBJ_FAMILY, NFPROTO_INET);
    nftnl_obj_nlmsg_build_payload(nlh, o);
    nftnl_obj_free(o);
    batch_add(b, nlh);
}

/* ---- rules ---------------------------------------------------------------------------------- */

static struct nftnl_rule *rule_new(struct wr_nft *t, const char *chain)
{
    struct nftnl_rule *r = nftnl_rule_alloc();

    nftnl_rule_set_str(r, NFTNL_RULE_TABLE, t->table);
    nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
    nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
    return r;
}

static void rule_add(struct batch *b, struct nftnl_rule *r)
{
    struct nlmsghdr *nlh = batch_msg(b, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND);

    nftnl_rule_nlmsg_build_payload(nlh, r);
    nftnl_rule_free(r);
    batch_add(b, nlh);
}

static struct nftnl_expr *ex(struct nftnl_rule *r, const char *name)
{
    struct nftnl_expr *e = nftnl_expr_alloc(name);

    nftnl_rule_add_expr(r, e);
    return e;
}

static void e_meta(struct nftnl_rule *r, uint32_t key, uint32_t dreg)
{
    struct nftnl_expr *e = ex(r, "meta");
    nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
    nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, dreg);
}

static void e_cmp(struct nftnl_rule *r, uint32_t op, const void *data, uint32_t len)
{
    struct nftnl_expr *e = ex(r, "cmp");
    nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
    nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
    nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
}

static void e_payload(struct nftnl_rule *r, uint32_t base, uint32_t off, uint32_t len,
                      uint32_t dreg)
{
    struct nftnl_expr *e = ex(r, "payload");
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, dreg);
}

static void e_and_reg(struct nftnl_rule *r, uint32_t reg, const void *mask, uint32_t len)
{
    struct nftnl_expr *e = ex(r, "bitwise");
    uint8_t zero[16] = {0};
    nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, reg);
    nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, reg);
    nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, len);
    nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, mask, len);
    nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, zero, len);
}

static void e_and(struct nftnl_rule *r, const void *mask, uint32_t len)
{
    e_and_reg(r, NFT_REG_1, mask, len);
}

static void e_lookup(struct nftnl_rule *r, const char *set, bool inv)
{
    struct nftnl_expr *e = ex(r, "lookup");
    nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
    nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
    if (inv)
        nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS, NFT_LOOKUP_F_INV);
}

static void e_verdict(struct nftnl_rule *r, int verdict, const char *chain)
{
    struct nftnl_expr *e = ex(r, "immediate");
    nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
    nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
    if (chain != NULL)
        nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain);
}

static void e_reject(struct nftnl_rule *r)
{
    struct nftnl_expr *e = ex(r, "reject");
    nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, NFT_REJECT_ICMPX_UNREACH);
    nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, NFT_REJECT_ICMPX_PORT_UNREACH);
}

/* counter name iifname map @map: the slot's own counter (no element: the rule does not match) */
/* Count in the counter that map gives the packet's slot: keyed by iifname (traffic from a
 * slot) or, for in_ (traffic to a slot), by oifname. */
static void e_count_dir(struct nftnl_rule *r, const char *map, bool to_slot)
{
    struct nftnl_expr *e;

    e_meta(r, to_slot ? NFT_META_OIFNAME : NFT_META_IIFNAME, NFT_REG_1);
    e = ex(r, "objref");
    nftnl_expr_set_u32(e, NFTNL_EXPR_OBJREF_SET_SREG, NFT_REG_1);
    nftnl_expr_set_str(e, NFTNL_EXPR_OBJREF_SET_NAME, map);
}

static void e_count(struct nftnl_rule *r, const char *map)
{
    e_count_dir(r, map, false);
}

/* iifname (or oifname) in set */
static void m_if_in(struct nftnl_rule *r, bool out, const char *set, bool inv)
{
    e_meta(r, out ? NFT_META_OIFNAME : NFT_META_IIFNAME, NFT_REG_1);
    e_lookup(r, set, inv);
}

/* iifname (oifname) "wr*": a slot of any daemon (every host end is named wr%08x). */
static void m_if_slotname(struct nftnl_rule *r, bool out, bool inv)
{
    e_meta(r, out ? NFT_META_OIFNAME : NFT_META_IIFNAME, NFT_REG_1);
    e_cmp(r, inv ? NFT_CMP_NEQ : NFT_CMP_EQ, "wr", 2);
}

static void m_ipv4(struct nftnl_rule *r)
{
    uint8_t v = NFPROTO_IPV4;
    e_meta(r, NFT_META_NFPROTO, NFT_REG_1);
    e_cmp(r, NFT_CMP_EQ, &v, 1);
}

static void m_l4(struct nftnl_rule *r, uint8_t proto)
{
    e_meta(r, NFT_META_L4PROTO, NFT_REG_1);
    e_cmp(r, NFT_CMP_EQ, &proto, 1);
}

static void m_dport(struct nftnl_rule *r, uint8_t proto, uint16_t port)
{
    uint16_t be = htons(port);
    m_l4(r, proto);
    e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, NFT_REG_1);
    e_cmp(r, NFT_CMP_EQ, &be, 2);
}

static void m_ct_state(struct nftnl_rule *r, uint32_t bits)
{
    uint32_t zero = 0;
    struct nftnl_expr *e = ex(r, "ct");
    nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_STATE);
    nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
    e_and(r, &bits, 4);
    e_cmp(r, NFT_CMP_NEQ, &zero, 4);
}

/* ip saddr/daddr in block c */
static void m_addr(struct nftnl_rule *r, bool src, const struct wr_cidr4 *c)
{
    uint32_t net = htonl(c->addr), mask = htonl(wr_cidr4_mask(c->len));

    m_ipv4(r);
    if (c->len == 0)
        return;
    e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, src ? 12 : 16, 4, NFT_REG_1);
    if (c->len < 32)
        e_and(r, &mask, 4);
    e_cmp(r, NFT_CMP_EQ, &net, 4);
}

#define CT_EST_REL (NF_CT_STATE_BIT(IP_CT_ESTABLISHED) | NF_CT_STATE_BIT(IP_CT_RELATED))
#define CT_NEW     NF_CT_STATE_BIT(IP_CT_NEW)

/* ---- sandboxes: their elements in the shared sets ------------------------------------------- */

/* A sandbox's entries are elements only, never rules or jumps: a transaction that adds a rule
 * or a jump makes the kernel validate every chain a base chain can reach (for loops), which at
 * 10,000 per-sandbox chains cost 24 ms per update (measured). Its CIDR lists are elements
 * `ifname . block` of one hash set per prefix length (a<L>, d<L>), matched by one rule per
 * length that masks the destination; its connection cap is an element of cap<N>, whose rule
 * counts per slot in the dynamic set cc<N>; its counters are named objects reached through the
 * maps okc and noc. A rule or set is added only the first time a length or a cap value is
 * used, and stays. */

static struct ownkey ownkey(const struct wr_nft *t, uint32_t slot, uint32_t addr)
{
    struct ownkey k;

    memset(&k, 0, sizeof(k));
    wr_netslot_ifname(t->pool, slot, k.name);
    k.addr = htonl(addr);
    return k;
}

static void key_elem(struct batch *b, const char *set, uint16_t msg, const void *key, size_t len,
                     const char *objref)
{
    struct elems es = {.b = b, .set = set, .msg = msg};
    struct nftnl_set_elem *e = elems_new(&es, key, len);

    if (objref != NULL && msg == NFT_MSG_NEWSETELEM)
        nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_OBJREF, objref);
    elems_flush(&es);
}

/* A slot's named counters: accepted and refused from it, received by it. */
static void counter_names(uint32_t slot, char ok[24], char no[24], char in[24])
{
    snprintf(ok, 24, "ok%u", (unsigned)slot);
    snprintf(no, 24, "no%u", (unsigned)slot);
    snprintf(in, 24, "in%u", (unsigned)slot);
}

static int cmp_cidr(const void *a, const void *b)
{
    const struct wr_cidr4 *x = a, *y = b;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The blocks with host bits cleared, sorted, without repeats, into out (n entries); returns
 * how many. */
static size_t norm_cidrs(const struct wr_cidr4 *in, size_t n, struct wr_cidr4 *out)
{
    size_t m = 0;

    for (size_t i = 0; i < n; i++) {
        uint8_t len = in[i].len > 32 ? 32 : in[i].len;
        out[i] = (struct wr_cidr4){.addr = in[i].addr & wr_cidr4_mask(len), .len = len};
    }
    if (n > 1)
        qsort(out, n, sizeof(*out), cmp_cidr);
    for (size_t i = 0; i < n; i++)
        if (m == 0 || cmp_cidr(&out[m - 1], &out[i]) != 0)
            out[m++] = out[i];
    return m;
}

static bool has_cidr(const struct wr_cidr4 *v, size_t n, const struct wr_cidr4 *c)
{
    return n > 0 && bsearch(c, v, n, sizeof(*v), cmp_cidr) != NULL;
}

/* The rule matching `iifname . ip daddr & mask(len)` in set. */
static void prefix_match(struct nftnl_rule *r, const char *set, uint8_t len)
{
    m_ipv4(r);
    e_meta(r, NFT_META_IIFNAME, NFT_REG_1);
    e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 16, 4, NFT_REG32_04);
    if (len < 32) {
        uint32_t mask = htonl(wr_cidr4_mask(len));
        e_and_reg(r, NFT_REG32_04, &mask, 4);
    }
    e_lookup(r, set, false);
}

/* A rate-limited NFLOG copy of what the next rule refuses (wr_nft_config.log_group). */
static void log_rule(struct batch *b, struct nftnl_rule *r, const char *prefix)
{
    struct nftnl_expr *e = ex(r, "limit");

    nftnl_expr_set_u64(e, NFTNL_EXPR_LIMIT_RATE, 100);
    nftnl_expr_set_u64(e, NFTNL_EXPR_LIMIT_UNIT, 1);
    nftnl_expr_set_u32(e, NFTNL_EXPR_LIMIT_BURST, 100);
    nftnl_expr_set_u32(e, NFTNL_EXPR_LIMIT_TYPE, NFT_LIMIT_PKTS);
    e = ex(r, "log");
    nftnl_expr_set_u16(e, NFTNL_EXPR_LOG_GROUP, (uint16_t)b->t->log_group);
    nftnl_expr_set_str(e, NFTNL_EXPR_LOG_PREFIX, prefix);
    rule_add(b, r);
}

/* Set a<len> or d<len> and its rule, unless they exist or are being made in this batch. */
static void ensure_prefix(struct batch *b, bool deny, uint8_t len, uint64_t *pending)
{
    struct wr_nft *t = b->t;
    uint64_t bit = (uint64_t)1 << len;
    char name[8];
    struct nftnl_rule *r;

    if (((deny ? t->have_d : t->have_a) | pending[deny]) & bit)
        return;
    pending[deny] |= bit;
    snprintf(name, sizeof(name), "%c%u", deny ? 'd' : 'a', (unsigned)len);
    put_set(b, name, (TYPE_IFNAME << TYPE_BITS) | TYPE_IPADDR, sizeof(struct ownkey), 0, 0, 0);
    if (deny && t->log_group != 0) {
        r = rule_new(t, "sb_deny");
        prefix_match(r, name, len);
        log_rule(b, r, "warren deny_out ");
    }
    r = rule_new(t, deny ? "sb_deny" : "sb_allow");
    prefix_match(r, name, len);
    e_count(r, deny ? "noc" : "okc");
    if (deny)
        e_reject(r);
    else
        e_verdict(r, NF_ACCEPT, NULL);
    rule_add(b, r);
}

static bool has_u32(const uint32_t *v, size_t n, uint32_t x)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

/* Sets cap<N> and cc<N> and the rule `ct state new iifname @cap<N> add @cc<N> { iifname ct
 * count over N } reject`, unless they exist or are being made in this batch. */
static void ensure_cap(struct batch *b, uint32_t cap, uint32_t *pending, size_t *n_pending)
{
    struct wr_nft *t = b->t;
    char set[24], dyn[24];
    struct nftnl_rule *r;
    struct nftnl_expr *e, *cl;

    if (has_u32(t->caps, t->n_caps, cap) || has_u32(pending, *n_pending, cap))
        return;
    pending[(*n_pending)++] = cap;
    snprintf(set, sizeof(set), "cap%u", (unsigned)cap);
    snprintf(dyn, sizeof(dyn), "cc%u", (unsigned)cap);
    put_set(b, set, TYPE_IFNAME, IFNAME_KEY_LEN, 0, 0, 0);
    put_set(b, dyn, TYPE_IFNAME, IFNAME_KEY_LEN, NFT_SET_EVAL, 0, 65536);
    r = rule_new(t, "sb_caps");
    m_ct_state(r, CT_NEW);
    m_if_in(r, false, set, false);
    e = ex(r, "dynset");
    nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_SREG_KEY, NFT_REG_1);
    nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_OP, NFT_DYNSET_OP_ADD);
    nftnl_expr_set_str(e, NFTNL_EXPR_DYNSET_SET_NAME, dyn);
    cl = nftnl_expr_alloc("connlimit");
    nftnl_expr_set_u32(cl, NFTNL_EXPR_CONNLIMIT_COUNT, cap);
    nftnl_expr_set_u32(cl, NFTNL_EXPR_CONNLIMIT_FLAGS, NFT_CONNLIMIT_F_INV);
    nftnl_expr_add_expr(e, NFTNL_EXPR_DYNSET_EXPRESSIONS, cl);
    e_count(r, "noc");
    e_reject(r);
    rule_add(b, r);
}

/* What a batch made that the handle records once it committed. */
struct pending {
    uint64_t prefixes[2]; /* allow, deny */
    uint32_t caps[64];
    size_t n_caps;
};

/* Move slot's elements from what old says to what sb says (old zeroed: nothing there). nw gets
 * the normalized record of sb (the caller keeps it once the batch committed). -1 (WR_ELIMIT)
 * if the batch would need more new cap values than one transaction takes. */
static int sb_apply(struct batch *b, const struct sbrec *old, const struct wr_nft_sandbox *sb,
                    struct sbrec *nw, struct pending *pd, struct wr_err *err)
{
    struct wr_nft *t = b->t;
    uint32_t slot = sb->slot, saddr = wr_netslot_sandbox_addr(t->pool, slot);
    struct ifkey ik = ifkey(t, slot);
    char ok[24], no[24], in[24], name[24];
    const struct wr_cidr4 *oa = old->cidr, *od = old->cidr ? old->cidr + old->n_allow : NULL;
    struct wr_cidr4 *na, *nd;

    *nw = (struct sbrec){.flags = SB_SET | (sb->l7 ? SB_L7 : 0) | (sb->accept_rest ? SB_OPEN : 0),
                         .cap = sb->max_connections};
    nw->cidr = xcalloc(sb->n_allow + sb->n_deny + 1, sizeof(*nw->cidr));
    nw->n_allow = norm_cidrs(sb->allow, sb->n_allow, nw->cidr);
    nw->n_deny = norm_cidrs(sb->deny, sb->n_deny, nw->cidr + nw->n_allow);
    na = nw->cidr;
    nd = nw->cidr + nw->n_allow;
    if (nw->cap != 0 && nw->cap != old->cap && !has_u32(t->caps, t->n_caps, nw->cap) &&
        !has_u32(pd->caps, pd->n_caps, nw->cap) && pd->n_caps == WR_ARRAY_SIZE(pd->caps))
        return wr_err_set(err, WR_ELIMIT, 0, "too many distinct connection caps at once");

    counter_names(slot, ok, no, in);
    if (!(old->flags & SB_SET)) {
        struct ownkey k = ownkey(t, slot, saddr);
        counter_obj(b, NFT_MSG_NEWOBJ, ok);
        counter_obj(b, NFT_MSG_NEWOBJ, no);
        counter_obj(b, NFT_MSG_NEWOBJ, in);
        key_elem(b, "okc", NFT_MSG_NEWSETELEM, &ik, sizeof(ik), ok);
        key_elem(b, "noc", NFT_MSG_NEWSETELEM, &ik, sizeof(ik), no);
        key_elem(b, "inc", NFT_MSG_NEWSETELEM, &ik, sizeof(ik), in);
        key_elem(b, "owned", NFT_MSG_NEWSETELEM, &k, sizeof(k), NULL);
        /* a slot outside @slots would bypass every rule: a sandbox puts its slot in */
        key_elem(b, "slots", NFT_MSG_NEWSETELEM, &ik, sizeof(ik), NULL);
    }
    for (int deny = 0; deny < 2; deny++) {
        const struct wr_cidr4 *ov = deny ? od : oa, *nv = deny ? nd : na;
        size_t on = deny ? old->n_deny : old->n_allow, nn = deny ? nw->n_deny : nw->n_allow;
        for (size_t i = 0; i < on; i++) {
            if (has_cidr(nv, nn, &ov[i]))
                continue;
            struct ownkey k = ownkey(t, slot, ov[i].addr);
            snprintf(name, sizeof(name), "%c%u", deny ? 'd' : 'a', (unsigned)ov[i].len);
            key_elem(b, name, NFT_MSG_DELSETELEM, &k, sizeof(k), NULL);
        }
        for (size_t i = 0; i < nn; i++) {
            if (has_cidr(ov, on, &nv[i]))
                continue;
            struct ownkey k = ownkey(t, slot, nv[i].addr);
            ensure_prefix(b, deny, nv[i].len, pd->prefixes);
            snprintf(name, sizeof(name), "%c%u", deny ? 'd' : 'a', (unsigned)nv[i].len);
            key_elem(b, name, NFT_MSG_NEWSETELEM, &k, sizeof(k), NULL);
        }
    }
    if (old->cap != nw->cap) {
        if (old->cap != 0) {
            snprintf(name, sizeof(name), "cap%u", (unsigned)old->cap);
            key_elem(b, name, NFT_MSG_DELSETELEM, &ik, sizeof(ik), NULL);
        }
        if (nw->cap != 0) {
            ensure_cap(b, nw->cap, pd->caps, &pd->n_caps);
            snprintf(name, sizeof(name), "cap%u", (unsigned)nw->cap);
            key_elem(b, name, NFT_MSG_NEWSETELEM, &ik, sizeof(ik), NULL);
        }
    }
    if ((old->flags ^ nw->flags) & SB_OPEN)
        key_elem(b, "open", nw->flags & SB_OPEN ? NFT_MSG_NEWSETELEM : NFT_MSG_DELSETELEM, &ik,
                 sizeof(ik), NULL);
    if ((old->flags ^ nw->flags) & SB_L7)
        key_elem(b, "l7", nw->flags & SB_L7 ? NFT_MSG_NEWSETELEM : NFT_MSG_DELSETELEM, &ik,
                 sizeof(ik), NULL);
    return 0;
}

/* Everything of slot's out of the table (its record says what is there). */
static void sb_remove(struct batch *b, uint32_t slot, const struct sbrec *old)
{
    struct wr_nft *t = b->t;
    struct ifkey ik = ifkey(t, slot);
    struct ownkey k = ownkey(t, slot, wr_netslot_sandbox_addr(t->pool, slot));
    char ok[24], no[24], in[24], name[24];

    key_elem(b, "okc", NFT_MSG_DELSETELEM, &ik, sizeof(ik), NULL);
    key_elem(b, "noc", NFT_MSG_DELSETELEM, &ik, sizeof(ik), NULL);
    key_elem(b, "inc", NFT_MSG_DELSETELEM, &ik, sizeof(ik), NULL);
    key_elem(b, "owned", NFT_MSG_DELSETELEM, &k, sizeof(k), NULL);
    for (size_t i = 0; i < old->n_allow + old->n_deny; i++) {
        struct ownkey ck = ownkey(t, slot, old->cidr[i].addr);
        snprintf(name, sizeof(name), "%c%u", i < old->n_allow ? 'a' : 'd',
                 (unsigned)old->cidr[i].len);
        key_elem(b, name, NFT_MSG_DELSETELEM, &ck, sizeof(ck), NULL);
    }
    if (old->cap != 0) {
        snprintf(name, sizeof(name), "cap%u", (unsigned)old->cap);
        key_elem(b, name, NFT_MSG_DELSETELEM, &ik, sizeof(ik), NULL);
    }
    if (old->flags & SB_OPEN)
        key_elem(b, "open", NFT_MSG_DELSETELEM, &ik, sizeof(ik), NULL);
    if (old->flags & SB_L7)
        key_elem(b, "l7", NFT_MSG_DELSETELEM, &ik, sizeof(ik), NULL);
    counter_names(slot, ok, no, in);
    counter_obj(b, NFT_MSG_DELOBJ, ok);
    counter_obj(b, NFT_MSG_DELOBJ, no);
    counter_obj(b, NFT_MSG_DELOBJ, in);
}

/* The batch committed: the handle takes what it made. */
static void pending_commit(struct wr_nft *t, const struct pending *pd)
{
    t->have_a |= pd->prefixes[0];
    t->have_d |= pd->prefixes[1];
    if (pd->n_caps > 0) {
        t->caps = xrealloc(t->caps, (t->n_caps + pd->n_caps) * sizeof(*t->caps));
        memcpy(t->caps + t->n_caps, pd->caps, pd->n_caps * sizeof(*t->caps));
        t->n_caps += pd->n_caps;
    }
}

static void rec_fini(struct sbrec *r)
{
    free(r->cidr);
    *r = (struct sbrec){0};
}
/* ---- the table ------------------------------------------------------------------------------ */

struct range {
    uint32_t lo, hi;
};

static int cmp_range(const void *a, const void *b)
{
    const struct range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* deny4's elements: the blocks as sorted, merged ranges [lo, hi], each a start element and,
 * unless it runs to the end of the space, an end element at hi + 1. */
static void deny4_elems(struct batch *b, const struct wr_cidr4 *deny, size_t n)
{
    _cleanup_free_ struct range *v = xcalloc(n ? n : 1, sizeof(*v));
    struct elems es = {.b = b, .set = "deny4", .msg = NFT_MSG_NEWSETELEM};
    size_t m = 0;

    for (size_t i = 0; i < n; i++)
        v[i] = (struct range){deny[i].addr & wr_cidr4_mask(deny[i].len), wr_cidr4_last(&deny[i])};
    qsort(v, n, sizeof(*v), cmp_range);
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && (v[m - 1].hi == UINT32_MAX || v[i].lo <= v[m - 1].hi + 1)) {
            if (v[i].hi > v[m - 1].hi)
                v[m - 1].hi = v[i].hi;
            continue;
        }
        v[m++] = v[i];
    }
    for (size_t i = 0; i < m; i++) {
        uint32_t lo = htonl(v[i].lo), end;
        elems_new(&es, &lo, 4);
        elems_next(&es);
        if (v[i].hi == UINT32_MAX)
            continue;
        end = htonl(v[i].hi + 1);
        nftnl_set_elem_set_u32(elems_new(&es, &end, 4), NFTNL_SET_ELEM_FLAGS,
                               NFT_SET_ELEM_INTERVAL_END);
        elems_next(&es);
    }
    elems_flush(&es);
}

/* pre_nat: from a slot in `set`, proto to dport -> redirect to the host's port `to`. */
static struct nftnl_rule *redirect_rule(struct wr_nft *t, const char *set, uint8_t proto,
                                        uint16_t dport, uint16_t to)
{
    struct nftnl_rule *r = rule_new(t, "pre_nat");
    uint16_t port = htons(to);
    struct nftnl_expr *e;

    m_if_in(r, false, set, false);
    m_ipv4(r);
    m_dport(r, proto, dport);
    e = ex(r, "immediate");
    nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
    nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, &port, 2);
    e = ex(r, "redir");
    nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_REG_PROTO_MIN, NFT_REG_1);
    return r;
}

static void base_rules(struct batch *b, const struct wr_nft_config *cfg)
{
    struct wr_nft *t = b->t;
    struct nftnl_rule *r;
    uint8_t protos[2] = {IPPROTO_UDP, IPPROTO_TCP};

    /* pre_raw: a slot's packets carry its own address, and are never IPv6 */
    r = rule_new(t, "pre_raw");
    m_if_in(r, false, "slots", false);
    m_ipv4(r);
    e_meta(r, NFT_META_IIFNAME, NFT_REG_1);
    e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 12, 4, NFT_REG32_04);
    e_lookup(r, "owned", true);
    e_verdict(r, NF_DROP, NULL);
    rule_add(b, r);
    r = rule_new(t, "pre_raw");
    m_if_in(r, false, "slots", false);
    {
        uint8_t v6 = NFPROTO_IPV6;
        e_meta(r, NFT_META_NFPROTO, NFT_REG_1);
        e_cmp(r, NFT_CMP_EQ, &v6, 1);
    }
    e_verdict(r, NF_DROP, NULL);
    rule_add(b, r);

    /* pre_nat: DNS to the stub, l7 slots' web to the proxy */
    for (int p = 0; p < 2 && t->dns_port != 0; p++)
        rule_add(b, redirect_rule(t, "slots", protos[p], 53, t->dns_port));
    for (int k = 0; k < 2 && t->proxy_port != 0; k++)
        rule_add(b, redirect_rule(t, "l7", IPPROTO_TCP, k == 0 ? 80 : 443, t->proxy_port));

    /* input: a slot reaches the stub and the proxy, nothing else of the host's */
    r = rule_new(t, "input");
    m_if_in(r, false, "slots", false);
    m_ct_state(r, CT_EST_REL);
    e_verdict(r, NF_ACCEPT, NULL);
    rule_add(b, r);
    for (int k = 0; k < 3; k++) {
        uint16_t port = k < 2 ? t->dns_port : t->proxy_port;
        if (port == 0)
            continue;
        r = rule_new(t, "input");
        m_if_in(r, false, "slots", false);
        m_dport(r, k == 1 ? IPPROTO_UDP : IPPROTO_TCP, port);
        e_verdict(r, NF_ACCEPT, NULL);
        rule_add(b, r);
    }
    r = rule_new(t, "input");
    m_if_in(r, false, "slots", false);
    e_verdict(r, NF_DROP, NULL);
    rule_add(b, r);
    for (int k = 0; k < 3; k++) {
        uint16_t port = k < 2 ? t->dns_port : t->proxy_port;
        if (port == 0)
            continue;
        r = rule_new(t, "input");
        m_dport(r, k == 1 ? IPPROTO_UDP : IPPROTO_TCP, port);
        e_verdict(r, NF_DROP, NULL);
        rule_add(b, r);
    }

    /* forward */
    r = rule_new(t, "forward");
    m_if_in(r, true, "slots", false);
    m_ct_state(r, CT_EST_REL);
    e_count_dir(r, "inc", true);
    e_verdict(r, NF_ACCEPT, NULL);
    rule_add(b, r);
    r = rule_new(t, "forward");
    m_if_in(r, true, "slots", false);
    e_verdict(r, NF_DROP, NULL);
    rule_add(b, r);
    r = rule_new(t, "forward");
    m_if_in(r, false, "slots", false);
    e_verdict(r, NFT_JUMP, "sb_egress");
    rule_add(b, r);
    if (t->forward_guard) {
        /* The host was no router before Warren: new flows that involve no slot, of this daemon
         * or another's on the same host, are not forwarded. */
        r = rule_new(t, "forward");
        m_if_slotname(r, false, true);
        m_if_slotname(r, true, true);
        m_ct_state(r, CT_NEW);
        e_verdict(r, NF_DROP, NULL);
        rule_add(b, r);
    }

    /* sb_egress: never to another slot; established flows; then the sandbox's policy,
     * always-denied blocks first (net-design.md: always-denied > allow_out > deny_out >
     * default) */
    r = rule_new(t, "sb_egress");
    m_if_in(r, true, "slots", false);
    e_verdict(r, NF_DROP, NULL);
    rule_add(b, r);
    r = rule_new(t, "sb_egress");
    m_ct_state(r, CT_EST_REL);
    e_count(r, "okc");
    e_verdict(r, NF_ACCEPT, NULL);
    rule_add(b, r);
    for (int k = t->log_group != 0 ? 0 : 1; k < 2; k++) {
        r = rule_new(t, "sb_egress");
        m_ipv4(r);
        e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 16, 4, NFT_REG_1);
        e_lookup(r, "deny4", false);
        if (k == 0) {
            log_rule(b, r, "warren always-denied ");
            continue;
        }
        e_count(r, "noc");
        e_reject(r);
        rule_add(b, r);
    }
    r = rule_new(t, "sb_egress");
    m_if_in(r, false, "l7", false);
    m_dport(r, IPPROTO_UDP, 443);
    e_count(r, "noc");
    e_verdict(r, NF_DROP, NULL);
    rule_add(b, r);
    {
        static const char *const sub[] = {"sb_caps", "sb_allow", "sb_deny"};
        for (size_t k = 0; k < 3; k++) {
            r = rule_new(t, "sb_egress");
            e_verdict(r, NFT_JUMP, sub[k]);
            rule_add(b, r);
        }
    }
    r = rule_new(t, "sb_egress");
    m_if_in(r, false, "open", false);
    e_count(r, "okc");
    e_verdict(r, NF_ACCEPT, NULL);
    rule_add(b, r);
    if (t->log_group != 0)
        log_rule(b, rule_new(t, "sb_egress"), "warren default ");
    r = rule_new(t, "sb_egress");
    e_count(r, "noc");
    e_reject(r);
    rule_add(b, r);
    r = rule_new(t, "sb_egress");
    ex(r, "counter");
    e_verdict(r, NF_DROP, NULL);
    rule_add(b, r);

    /* post_nat: the pool leaves masqueraded */
    r = rule_new(t, "post_nat");
    m_addr(r, true, &cfg->pool);
    m_if_in(r, true, "slots", true);
    ex(r, "masq");
    rule_add(b, r);
}

static bool valid_table(const char *s)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0 || n > 32)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return false;
    return true;
}

/* net.ipv4.ip_forward on; forward_guard if it was off before Warren first turned it on. */
static int host_sysctls(const struct wr_nft_config *cfg, bool *guard, struct wr_err *err)
{
    static const struct {
        const char *path;
        unsigned long min;
    } gc[] = {
        {"/proc/sys/net/ipv4/neigh/default/gc_thresh1", 65536},
        {"/proc/sys/net/ipv4/neigh/default/gc_thresh2", 131072},
        {"/proc/sys/net/ipv4/neigh/default/gc_thresh3", 262144},
        /* One table for every namespace: 262,144 by default is 8 connections per sandbox at
         * 32,752 of them. An entry costs memory only while it exists (about 320 bytes). */
        {"/proc/sys/net/netfilter/nf_conntrack_max", 1048576},
    };
    char buf[32], mark[4096];
    bool was_off;

    if (wr_read_fileat(AT_FDCWD, "/proc/sys/net/ipv4/ip_forward", buf, sizeof(buf), err) < 0)
        return -1;
    was_off = buf[0] == '0';
    if (cfg->state_dir != NULL)
        snprintf(mark, sizeof(mark), "%s/forward-was-off", cfg->state_dir);
    if (was_off) {
        if (cfg->state_dir != NULL && (wr_mkdir_p(cfg->state_dir, 0700, err) < 0 ||
                                       wr_write_fileat(AT_FDCWD, mark, "1\n", true, err) < 0))
            return -1;
        if (wr_write_fileat(AT_FDCWD, "/proc/sys/net/ipv4/ip_forward", "1", false, err) < 0)
            return -1;
        log_info("net: turned net.ipv4.ip_forward on (forwarding for others stays off)");
    }
    *guard = was_off || (cfg->state_dir != NULL && access(mark, F_OK) == 0);
    /* Host-wide, and absent in a network namespace other than the first: raised where they
     * exist. Permanent neighbours do not count, but a sandbox's own talk to the host may. */
    for (size_t i = 0; i < sizeof(gc) / sizeof(gc[0]); i++) {
        struct wr_err e;
        unsigned long was;
        if (wr_read_fileat(AT_FDCWD, gc[i].path, buf, sizeof(buf), NULL) < 0 ||
            (was = strtoul(buf, NULL, 10)) >= gc[i].min)
            continue;
        snprintf(buf, sizeof(buf), "%lu", gc[i].min);
        if (wr_write_fileat(AT_FDCWD, gc[i].path, buf, false, &e) < 0)
            log_warn("net: %s", e.msg);
        else
            log_info("net: raised %s from %lu to %s", gc[i].path + strlen("/proc/sys/"), was, buf);
    }
    return 0;
}

int wr_nft_open(const struct wr_nft_config *cfg, const struct wr_nft_sandbox *sbs, size_t n,
                const uint32_t *ready_slots, size_t n_ready, struct wr_nft **out,
                struct wr_err *err)
{
    struct wr_nft *t;
    struct batch b;
    struct pending pd = {0};
    struct sbrec *nw = NULL;
    int rc;

    if (!valid_table(cfg->table))
        return wr_err_set(err, WR_EINVAL, 0, "nft table name `%s` must be 1-32 of [a-z0-9_]",
                          cfg->table ? cfg->table : "");
    if (wr_netslot_capacity(cfg->pool) == 0)
        return wr_err_set(err, WR_EINVAL, 0, "net pool must be a /31 or larger");
    for (size_t i = 0; i < n; i++)
        if (sbs[i].slot >= wr_netslot_capacity(cfg->pool))
            return wr_err_set(err, WR_EINVAL, 0, "net slot %u is outside the pool",
                              (unsigned)sbs[i].slot);
    for (size_t i = 0; i < n_ready; i++)
        if (ready_slots[i] >= wr_netslot_capacity(cfg->pool))
            return wr_err_set(err, WR_EINVAL, 0, "net slot %u is outside the pool",
                              (unsigned)ready_slots[i]);
    t = xcalloc(1, sizeof(*t));
    t->table = xstrdup(cfg->table);
    t->pool = cfg->pool;
    t->capacity = wr_netslot_capacity(cfg->pool);
    t->dns_port = cfg->dns_port;
    t->proxy_port = cfg->proxy_port;
    t->log_group = cfg->log_group;
    t->seq = (uint32_t)time(NULL);
    t->rec = xcalloc(t->capacity, sizeof(*t->rec));
    if (host_sysctls(cfg, &t->forward_guard, err) < 0)
        goto fail;
    t->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
    if (t->nl == NULL || mnl_socket_bind(t->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
        wr_err_sys(err, "nft: netlink socket");
        goto fail;
    }
    t->portid = mnl_socket_get_portid(t->nl);
    {
        socklen_t l = sizeof(t->sndbuf);
        if (getsockopt(mnl_socket_get_fd(t->nl), SOL_SOCKET, SO_SNDBUF, &t->sndbuf, &l) < 0)
            t->sndbuf = 0;
    }

    batch_init(&b, t);
    /* the old table (made first, so that deleting it cannot fail), then the new one */
    put_table(&b, NFT_MSG_NEWTABLE, NLM_F_CREATE);
    put_table(&b, NFT_MSG_DELTABLE, 0);
    put_table(&b, NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_EXCL);
    put_set(&b, "slots", TYPE_IFNAME, IFNAME_KEY_LEN, 0, 0, 0);
    put_set(&b, "owned", (TYPE_IFNAME << TYPE_BITS) | TYPE_IPADDR, sizeof(struct ownkey), 0, 0, 0);
    put_set(&b, "l7", TYPE_IFNAME, IFNAME_KEY_LEN, 0, 0, 0);
    put_set(&b, "open", TYPE_IFNAME, IFNAME_KEY_LEN, 0, 0, 0);
    put_set(&b, "okc", TYPE_IFNAME, IFNAME_KEY_LEN, NFT_SET_OBJECT, NFT_OBJECT_COUNTER, 0);
    put_set(&b, "noc", TYPE_IFNAME, IFNAME_KEY_LEN, NFT_SET_OBJECT, NFT_OBJECT_COUNTER, 0);
    put_set(&b, "inc", TYPE_IFNAME, IFNAME_KEY_LEN, NFT_SET_OBJECT, NFT_OBJECT_COUNTER, 0);
    put_set(&b, "deny4", TYPE_IPADDR, 4, NFT_SET_INTERVAL, 0, 0);
    deny4_elems(&b, cfg->deny, cfg->n_deny);
    {
        struct elems es = {.b = &b, .set = "slots", .msg = NFT_MSG_NEWSETELEM};
        for (size_t i = 0; i < n_ready; i++) {
            struct ifkey k = ifkey(t, ready_slots[i]);
            elems_new(&es, &k, sizeof(k));
            elems_next(&es);
        }
        elems_flush(&es);
    }
    put_chain(&b, NFT_MSG_NEWCHAIN, "sb_caps", NULL, 0, 0);
    put_chain(&b, NFT_MSG_NEWCHAIN, "sb_allow", NULL, 0, 0);
    put_chain(&b, NFT_MSG_NEWCHAIN, "sb_deny", NULL, 0, 0);
    put_chain(&b, NFT_MSG_NEWCHAIN, "sb_egress", NULL, 0, 0);
    put_chain(&b, NFT_MSG_NEWCHAIN, "pre_raw", "filter", NF_INET_PRE_ROUTING, -300);
    put_chain(&b, NFT_MSG_NEWCHAIN, "pre_nat", "nat", NF_INET_PRE_ROUTING, -100);
    put_chain(&b, NFT_MSG_NEWCHAIN, "input", "filter", NF_INET_LOCAL_IN, 0);
    put_chain(&b, NFT_MSG_NEWCHAIN, "forward", "filter", NF_INET_FORWARD, 0);
    put_chain(&b, NFT_MSG_NEWCHAIN, "post_nat", "nat", NF_INET_POST_ROUTING, 100);
    base_rules(&b, cfg);
    nw = xcalloc(n ? n : 1, sizeof(*nw));
    rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct sbrec none = {0};
        rc = sb_apply(&b, &none, &sbs[i], &nw[i], &pd, err);
    }
    if (rc == 0)
        rc = batch_run(&b, "build table", err);
    batch_fini(&b);
    if (rc < 0) {
        for (size_t i = 0; i < n; i++)
            rec_fini(&nw[i]);
        free(nw);
        goto fail;
    }
    pending_commit(t, &pd);
    for (size_t i = 0; i < n; i++) {
        rec_fini(&t->rec[sbs[i].slot]); /* a slot listed twice: the last one counts */
        t->rec[sbs[i].slot] = nw[i];
    }
    free(nw);
    *out = t;
    return 0;
fail:
    wr_err_wrap(err, "nft table %s", cfg->table);
    wr_nft_close(t);
    return -1;
}

static int check_slot(const struct wr_nft *t, uint32_t slot, struct wr_err *err)
{
    if (slot >= t->capacity)
        return wr_err_set(err, WR_EINVAL, 0, "net slot %u is outside the pool", (unsigned)slot);
    return 0;
}

int wr_nft_slot_add(struct wr_nft *t, uint32_t slot, struct wr_err *err)
{
    struct batch b;
    int rc;

    if (check_slot(t, slot, err) < 0)
        return -1;
    batch_init(&b, t);
    slot_elem(&b, "slots", NFT_MSG_NEWSETELEM, slot);
    rc = batch_run(&b, "add slot", err);
    batch_fini(&b);
    return rc;
}

int wr_nft_slot_remove(struct wr_nft *t, uint32_t slot, struct wr_err *err)
{
    struct batch b;
    int rc;

    if (check_slot(t, slot, err) < 0)
        return -1;
    batch_init(&b, t);
    /* added first so that the delete cannot fail on an element that was not there */
    slot_elem(&b, "slots", NFT_MSG_NEWSETELEM, slot);
    slot_elem(&b, "slots", NFT_MSG_DELSETELEM, slot);
    rc = batch_run(&b, "remove slot", err);
    batch_fini(&b);
    return rc;
}

int wr_nft_set(struct wr_nft *t, const struct wr_nft_sandbox *sb, struct wr_err *err)
{
    struct batch b;
    struct pending pd = {0};
    struct sbrec nw = {0};
    int rc;

    if (check_slot(t, sb->slot, err) < 0)
        return -1;
    batch_init(&b, t);
    rc = sb_apply(&b, &t->rec[sb->slot], sb, &nw, &pd, err);
    if (rc == 0)
        rc = batch_run(&b, "set sandbox", err);
    batch_fini(&b);
    if (rc < 0) {
        rec_fini(&nw);
        return wr_err_wrap(err, "net slot %u", (unsigned)sb->slot);
    }
    pending_commit(t, &pd);
    rec_fini(&t->rec[sb->slot]);
    t->rec[sb->slot] = nw;
    return 0;
}

int wr_nft_unset(struct wr_nft *t, uint32_t slot, struct wr_err *err)
{
    struct batch b;
    int rc;

    if (check_slot(t, slot, err) < 0)
        return -1;
    if (!(t->rec[slot].flags & SB_SET))
        return 0;
    batch_init(&b, t);
    sb_remove(&b, slot, &t->rec[slot]);
    rc = batch_run(&b, "unset sandbox", err);
    batch_fini(&b);
    if (rc < 0)
        return wr_err_wrap(err, "net slot %u", (unsigned)slot);
    rec_fini(&t->rec[slot]);
    return 0;
}

static int obj_cb(const struct nlmsghdr *nlh, void *data)
{
    struct nftnl_obj *o = data;
    return nftnl_obj_nlmsg_parse(nlh, o) < 0 ? MNL_CB_ERROR : MNL_CB_OK;
}

/* One named counter's packets and bytes. */
static int get_counter(struct wr_nft *t, const char *name, uint64_t *pkts, uint64_t *bytes,
                       struct wr_err *err)
{
    char buf[8192];
    struct nftnl_obj *o = nftnl_obj_alloc();
    struct nlmsghdr *nlh;
    uint32_t seq = t->seq++;
    ssize_t n;
    int rc = 0;

    nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, t->table);
    nftnl_obj_set_str(o, NFTNL_OBJ_NAME, name);
    nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_COUNTER);
    nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETOBJ, NFPROTO_INET, NLM_F_ACK, seq);
    nftnl_obj_nlmsg_build_payload(nlh, o);
    nftnl_obj_free(o);
    o = nftnl_obj_alloc();
    if (mnl_socket_sendto(t->nl, nlh, nlh->nlmsg_len) < 0) {
        rc = wr_err_sys(err, "nft: get counter %s", name);
        goto out;
    }
    for (;;) {
        struct pollfd p = {.fd = mnl_socket_get_fd(t->nl), .events = POLLIN};
        if (poll(&p, 1, 5000) <= 0) {
            rc = wr_err_set(err, WR_ESYS, ETIMEDOUT, "nft: get counter %s", name);
            goto out;
        }
        n = mnl_socket_recvfrom(t->nl, buf, sizeof(buf));
        if (n < 0) {
            rc = wr_err_sys(err, "nft: get counter %s", name);
            goto out;
        }
        n = mnl_cb_run(buf, (size_t)n, seq, t->portid, obj_cb, o);
        if (n < 0) {
            rc = wr_err_set(err, errno == ENOENT ? WR_ENOTFOUND : WR_ESYS, errno,
                            "nft: get counter %s", name);
            goto out;
        }
        if (n == MNL_CB_STOP)
            break;
    }
    *pkts = nftnl_obj_get_u64(o, NFTNL_OBJ_CTR_PKTS);
    *bytes = nftnl_obj_get_u64(o, NFTNL_OBJ_CTR_BYTES);
out:
    nftnl_obj_free(o);
    return rc;
}

int wr_nft_counters(struct wr_nft *t, uint32_t slot, struct wr_nft_counters *c, struct wr_err *err)
{
    char ok[24], no[24], in[24];

    if (check_slot(t, slot, err) < 0)
        return -1;
    if (!(t->rec[slot].flags & SB_SET))
        return wr_err_set(err, WR_ENOTFOUND, 0, "net slot %u has no sandbox", (unsigned)slot);
    counter_names(slot, ok, no, in);
    if (get_counter(t, ok, &c->accepted_packets, &c->accepted_bytes, err) < 0 ||
        get_counter(t, no, &c->dropped_packets, &c->dropped_bytes, err) < 0 ||
        get_counter(t, in, &c->received_packets, &c->received_bytes, err) < 0)
        return -1;
    return 0;
}

void wr_nft_close(struct wr_nft *t)
{
    if (t == NULL)
        return;
    if (t->nl != NULL)
        mnl_socket_close(t->nl);
    if (t->rec != NULL)
        for (uint32_t i = 0; i < t->capacity; i++)
            free(t->rec[i].cidr);
    free(t->rec);
    free(t->caps);
    free(t->table);
    free(t);
}

int wr_nft_destroy(struct wr_nft *t, struct wr_err *err)
{
    struct batch b;
    int rc;

    batch_init(&b, t);
    put_table(&b, NFT_MSG_DELTABLE, 0);
    rc = batch_run(&b, "delete table", err);
    batch_fini(&b);
    wr_nft_close(t);
    return rc;
}
