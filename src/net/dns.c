/* SPDX-License-Identifier: Apache-2.0 */
/* Packets are parsed and built by libldns; this file moves them. One struct xq per question
 * sent upstream (a sandbox's, or wr_dns_resolve's); its timer is embedded and the struct is freed
 * from the timer's close callback. The upstream sockets are separate allocations, closed and
 * freed on their own: a question detaches from its socket (its slot emptied, or up->q = NULL
 * for TCP) when it moves on. */
#include "dns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ldns/ldns.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "../util/xalloc.h"
#include "count.h"

#define UDP_MAX         4096 /* the largest UDP message received or answered */
#define TCP_QUERY_MAX   4096 /* the largest question taken over TCP */
#define TCP_PER_CLIENT  16   /* questions in flight on one TCP connection */
#define TCP_IDLE_MS     10000
#define EDNS_UDP_SIZE   1232 /* what the stub advertises upstream (DNS flag day 2020) */
#define MAX_ANSWER_ADDR 64

enum xq_kind { XQ_UDP, XQ_TCP, XQ_API };

struct tcp_client;

struct xq {
    struct wr_dns *dns;
    struct xq *prev, *next;
    enum xq_kind kind;
    uv_timer_t timer;
    bool done;  /* finished: the timer is closing */
    bool limit; /* refused for the in-flight limit (wr_dns_resolve) */
    /* what is asked upstream */
    uint8_t *wire;
    size_t wire_len;
    uint16_t id;
    ldns_rdf *qname;
    ldns_rr_type qtype;
    ldns_rr_class qclass;
    unsigned attempt;
    bool tcp_mode;
    struct up_udp *udp; /* the socket of the attempt, and q's slot in it */
    unsigned slot;
    struct up_tcp *tcp;
    /* who asked */
    uint32_t saddr; /* counted in dns->per (not for XQ_API) */
    struct sockaddr_in client;
    struct in_addr local; /* the address the UDP question came to: the answer's source */
    struct tcp_client *tc;
    uint16_t client_id;
    size_t client_max; /* the largest UDP answer the client takes */
    ldns_pkt *query;   /* the client's question, answered from */
    char *sandbox_id, *name, *rule;
    wr_dns_resolve_cb cb;
    void *cb_arg;
};

/* An upstream UDP socket, connected (it hears only that upstream's address and port) from a
 * port the kernel picked at random. It carries at most SOCK_USES questions, each with a random
 * id unique on it, then is retired: closed once its last question has moved on. So source
 * ports keep changing without a socket per question. */
#define SOCK_USES 64
struct up_udp {
    uv_udp_t h;
    struct wr_dns *dns;
    unsigned upstream; /* index in dns->up */
    unsigned uses, inflight;
    bool retired;
    struct {
        uint16_t id;
        struct xq *q;
    } slots[SOCK_USES];
};

struct up_tcp {
    uv_tcp_t h;
    uv_connect_t conn;
    struct xq *q;
    size_t have;
    uint8_t buf[2 + 65535];
};

struct tcp_client {
    uv_tcp_t h;
    struct tcp_client *prev, *next;
    uv_timer_t idle;
    struct wr_dns *dns;
    unsigned refs; /* the handle, the timer and each question */
    unsigned inflight;
    bool closed, reading;
    uint32_t saddr;
    size_t have;
    uint8_t buf[2 + TCP_QUERY_MAX];
};

struct wr_dns {
    uv_loop_t *loop;
    struct wr_dns_config cfg;
    struct wr_dns_upstream up[WR_DNS_MAX_UPSTREAMS];
    struct wr_cidr4 *deny;
    uv_poll_t udp; /* the UDP socket ufd, read with recvmsg for IP_PKTINFO */
    int ufd;
    uv_tcp_t tcp;
    unsigned closing; /* handles of the stub itself still closing */
    bool stopped;
    uint16_t port;
    struct xq *head;                          /* every question in flight */
    struct tcp_client *tcps;                  /* every TCP client */
    struct up_udp *cur[WR_DNS_MAX_UPSTREAMS]; /* the socket new questions go out on */
    unsigned inflight, n_tcp;
    struct wr_net_counts per;
    struct wr_dns_stats stats;
    uint8_t rnd[256];
    size_t rnd_left;
    uint8_t rbuf[UDP_MAX];
    uint8_t ubuf[UDP_MAX]; /* upstream answers */
};

static uint16_t random_id(struct wr_dns *dns)
{
    if (dns->rnd_left < 2) {
        size_t got = 0;
        while (got < sizeof(dns->rnd)) {
            ssize_t r = getrandom(dns->rnd + got, sizeof(dns->rnd) - got, 0);
            if (r > 0)
                got += (size_t)r;
        }
        dns->rnd_left = sizeof(dns->rnd);
    }
    dns->rnd_left -= 2;
    return (uint16_t)(dns->rnd[dns->rnd_left] << 8 | dns->rnd[dns->rnd_left + 1]);
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void emit(struct wr_dns *dns, const char *sandbox_id, const char *name, uint32_t addr,
                 bool allowed, const char *rule)
{
    struct wr_netlog_entry e = {
        .time_ms = now_ms(),
        .sandbox_id = sandbox_id,
        .proto = "dns",
        .addr = addr,
        .port = 53,
        .name = name,
        .allowed = allowed,
        .rule = rule,
    };

    if (dns->cfg.log != NULL && sandbox_id != NULL)
        dns->cfg.log(dns->cfg.log_arg, &e);
}

static void free_cb(uv_handle_t *h)
{
    free(h);
}

/* ---- answering a client ---- */

static void dns_free(struct wr_dns *dns)
{
    if (dns->ufd >= 0)
        close(dns->ufd);
    wr_net_count_fini(&dns->per);
    free(dns->deny);
    free(dns);
}

static void tc_unref(struct tcp_client *tc)
{
    if (--tc->refs == 0) {
        struct wr_dns *dns = tc->dns;
        if (tc->prev != NULL)
            tc->prev->next = tc->next;
        else
            dns->tcps = tc->next;
        if (tc->next != NULL)
            tc->next->prev = tc->prev;
        dns->n_tcp--;
        free(tc);
        if (dns->stopped && dns->closing == 0 && dns->n_tcp == 0)
            dns_free(dns);
    }
}

static void tc_handle_closed(uv_handle_t *h)
{
    tc_unref(h->data);
}

static void tc_close(struct tcp_client *tc)
{
    if (tc->closed)
        return;
    tc->closed = true;
    uv_close((uv_handle_t *)&tc->h, tc_handle_closed);
    uv_close((uv_handle_t *)&tc->idle, tc_handle_closed);
}

struct wreq {
    uv_write_t req;
    size_t len;
    uint8_t data[];
};

static void tc_written(uv_write_t *req, int status)
{
    free(req);
}

static void tc_read_start(struct tcp_client *tc);

/* Send wire (an answer) to the client of q. */
static void send_to_client(struct xq *q, const uint8_t *wire, size_t len)
{
    struct wr_dns *dns = q->dns;

    if (q->kind == XQ_UDP) {
        /* from the address the question came to (the kernel's choice on a wildcard socket may
         * be another address of the host, which the client and conntrack would not match) */
        union {
            struct cmsghdr h;
            char b[CMSG_SPACE(sizeof(struct in_pktinfo))];
        } ctl;
        struct iovec iov = {(void *)wire, len};
        struct msghdr mh = {.msg_name = &q->client,
                            .msg_namelen = sizeof(q->client),
                            .msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = ctl.b,
                            .msg_controllen = sizeof(ctl.b)};
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        struct in_pktinfo pi = {.ipi_spec_dst = q->local};
        memset(&ctl, 0, sizeof(ctl));
        c->cmsg_level = IPPROTO_IP;
        c->cmsg_type = IP_PKTINFO;
        c->cmsg_len = CMSG_LEN(sizeof(pi));
        memcpy(CMSG_DATA(c), &pi, sizeof(pi));
        if (!dns->stopped)
            (void)sendmsg(dns->ufd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        return;
    }
    struct tcp_client *tc = q->tc;
    if (tc->closed || len > 65535)
        return;
    struct wreq *w = xmalloc(sizeof(*w) + 2 + len);
    w->data[0] = (uint8_t)(len >> 8);
    w->data[1] = (uint8_t)len;
    memcpy(w->data + 2, wire, len);
    uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)(len + 2));
    if (uv_write(&w->req, (uv_stream_t *)&tc->h, &b, 1, tc_written) < 0) {
        free(w);
        tc_close(tc);
    }
}

/* Answer the client's question with an empty answer and rcode, or with TC set (truncated). */
static void answer_rcode(struct xq *q, ldns_pkt *query, uint8_t rcode, bool truncated)
{
    ldns_pkt *r = ldns_pkt_new();
    uint8_t *wire = NULL;
    size_t len = 0;

    if (r == NULL)
        return;
    ldns_pkt_set_id(r, ldns_pkt_id(query));
    ldns_pkt_set_qr(r, true);
    ldns_pkt_set_opcode(r, ldns_pkt_get_opcode(query));
    ldns_pkt_set_rd(r, ldns_pkt_rd(query));
    ldns_pkt_set_ra(r, true);
    ldns_pkt_set_tc(r, truncated);
    ldns_pkt_set_rcode(r, rcode);
    ldns_rr_list *qs = ldns_pkt_question(query);
    if (qs != NULL && ldns_rr_list_rr_count(qs) == 1) {
        ldns_rr_list *copy = ldns_rr_list_clone(qs);
        if (copy != NULL) {
            ldns_rr_list_deep_free(ldns_pkt_question(r));
            ldns_pkt_set_question(r, copy);
            ldns_pkt_set_qdcount(r, 1);
        }
    }
    if (ldns_pkt2wire(&wire, r, &len) == LDNS_STATUS_OK)
        send_to_client(q, wire, len);
    free(wire);
    ldns_pkt_free(r);
}

/* ---- the question's life ---- */

static void xq_freed(uv_handle_t *h)
{
    struct xq *q = h->data;

    free(q);
}

static void detach_upstream(struct xq *q)
{
    if (q->udp != NULL) {
        struct up_udp *u = q->udp;
        u->slots[q->slot].q = NULL;
        if (--u->inflight == 0 && u->retired)
            uv_close((uv_handle_t *)&u->h, free_cb);
        q->udp = NULL;
    }
    if (q->tcp != NULL) {
        q->tcp->q = NULL;
        uv_close((uv_handle_t *)&q->tcp->h, free_cb);
        q->tcp = NULL;
    }
}

/* Unlink q, release what it holds and close its timer (q is freed after). */
static void xq_finish(struct xq *q)
{
    struct wr_dns *dns = q->dns;

    if (q->done)
        return;
    q->done = true;
    detach_upstream(q);
    if (q->prev != NULL)
        q->prev->next = q->next;
    else
        dns->head = q->next;
    if (q->next != NULL)
        q->next->prev = q->prev;
    dns->inflight--;
    if (q->kind != XQ_API)
        wr_net_count_dec(&dns->per, q->saddr);
    if (q->tc != NULL) {
        struct tcp_client *tc = q->tc;
        tc->inflight--;
        if (!tc->closed && !tc->reading && tc->inflight < TCP_PER_CLIENT)
            tc_read_start(tc);
        tc_unref(tc);
    }
    free(q->wire);
    ldns_rdf_deep_free(q->qname);
    if (q->query != NULL)
        ldns_pkt_free(q->query);
    free(q->sandbox_id);
    free(q->name);
    free(q->rule);
    uv_close((uv_handle_t *)&q->timer, xq_freed);
}

/* The upstreams gave up on q. */
static void xq_fail(struct xq *q)
{
    struct wr_dns *dns = q->dns;

    dns->stats.failed++;
    if (q->kind == XQ_API) {
        if (q->cb != NULL)
            q->cb(q->cb_arg, q->limit ? WR_DNS_LIMIT : WR_DNS_FAIL, NULL, 0);
    } else {
        emit(dns, q->sandbox_id, q->name, 0, false, "upstream failed");
        answer_rcode(q, q->query, LDNS_RCODE_SERVFAIL, false);
    }
    xq_finish(q);
}

/* Keep the records of list that may reach a sandbox: no AAAA, no A inside the deny lists. The
 * first A kept goes to *first (if 0), the rule of the first A removed to stripped_rule. Returns
 * the number removed. */
static size_t filter_list(struct wr_dns *dns, ldns_rr_list *list, uint32_t *first,
                          char stripped_rule[WR_NET_RULE_BUF])
{
    size_t n = ldns_rr_list_rr_count(list), k = 0, removed = 0;
    char rule[WR_NET_RULE_BUF];

    for (size_t i = 0; i < n; i++) {
        ldns_rr *rr = ldns_rr_list_rr(list, i);
        bool keep = true;
        if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_AAAA) {
            keep = false;
            if (stripped_rule[0] == '\0')
                snprintf(stripped_rule, WR_NET_RULE_BUF, "no IPv6");
        } else if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_A && ldns_rr_rd_count(rr) == 1 &&
                   ldns_rdf_size(ldns_rr_rdf(rr, 0)) == 4) {
            const uint8_t *d = ldns_rdf_data(ldns_rr_rdf(rr, 0));
            uint32_t a = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
            if (wr_net_deny4_match(dns->deny, dns->cfg.n_deny, a, rule)) {
                keep = false;
                if (stripped_rule[0] == '\0' || strcmp(stripped_rule, "no IPv6") == 0)
                    snprintf(stripped_rule, WR_NET_RULE_BUF, "%s", rule);
            } else if (first != NULL && *first == 0) {
                *first = a;
            }
        }
        if (keep)
            ldns_rr_list_set_rr(list, rr, k++);
        else {
            ldns_rr_free(rr);
            removed++;
        }
    }
    ldns_rr_list_set_rr_count(list, k);
    return removed;
}

/* Answer the client of q from the upstream's answer r (which this consumes). */
static void answer_client(struct xq *q, ldns_pkt *r)
{
    struct wr_dns *dns = q->dns;
    uint32_t first = 0;
    char stripped[WR_NET_RULE_BUF] = "", rule[WR_NET_RULE_BUF + 40];
    size_t removed;
    uint8_t *wire = NULL;
    size_t len = 0;

    removed = filter_list(dns, ldns_pkt_answer(r), &first, stripped);
    ldns_pkt_set_ancount(r, (uint16_t)ldns_rr_list_rr_count(ldns_pkt_answer(r)));
    removed += filter_list(dns, ldns_pkt_additional(r), NULL, stripped);
    ldns_pkt_set_arcount(r, (uint16_t)ldns_rr_list_rr_count(ldns_pkt_additional(r)));
    dns->stats.stripped += removed;
    ldns_pkt_set_id(r, q->client_id);
    if (ldns_pkt2wire(&wire, r, &len) != LDNS_STATUS_OK) {
        ldns_pkt_free(r);
        xq_fail(q);
        return;
    }
    /* logged before the sandbox has the answer */
    if (removed > 0)
        snprintf(rule, sizeof(rule), "%s; removed %zu (%s)", q->rule, removed, stripped);
    else
        snprintf(rule, sizeof(rule), "%s", q->rule);
    emit(dns, q->sandbox_id, q->name, first, true, rule);
    if (q->kind == XQ_UDP && len > q->client_max)
        answer_rcode(q, q->query, ldns_pkt_get_rcode(r), true);
    else
        send_to_client(q, wire, len);
    free(wire);
    ldns_pkt_free(r);
    xq_finish(q);
}

static void answer_api(struct xq *q, ldns_pkt *r)
{
    uint32_t addrs[MAX_ANSWER_ADDR];
    size_t n = 0;
    ldns_rr_list *an = ldns_pkt_answer(r);
    ldns_pkt_rcode rc = ldns_pkt_get_rcode(r);

    for (size_t i = 0; i < ldns_rr_list_rr_count(an) && n < MAX_ANSWER_ADDR; i++) {
        ldns_rr *rr = ldns_rr_list_rr(an, i);
        if (ldns_rr_get_type(rr) != LDNS_RR_TYPE_A || ldns_rr_get_class(rr) != LDNS_RR_CLASS_IN ||
            ldns_rr_rd_count(rr) != 1 || ldns_rdf_size(ldns_rr_rdf(rr, 0)) != 4)
            continue;
        const uint8_t *d = ldns_rdf_data(ldns_rr_rdf(rr, 0));
        addrs[n++] = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
    }
    if (q->cb != NULL) {
        if (rc == LDNS_RCODE_NOERROR)
            q->cb(q->cb_arg, WR_DNS_OK, addrs, n);
        else
            q->cb(q->cb_arg, rc == LDNS_RCODE_NXDOMAIN ? WR_DNS_NXDOMAIN : WR_DNS_FAIL, NULL, 0);
    }
    ldns_pkt_free(r);
    xq_finish(q);
}

static void try_upstream(struct xq *q);

/* An upstream's message for q: ignore it unless it answers q's question. */
static void got_answer(struct xq *q, const uint8_t *data, size_t len, bool over_tcp)
{
    ldns_pkt *r = NULL;

    if (len < 12 || (uint16_t)(data[0] << 8 | data[1]) != q->id)
        return;
    if (ldns_wire2pkt(&r, data, len) != LDNS_STATUS_OK)
        return;
    ldns_rr_list *qs = ldns_pkt_question(r);
    ldns_rr *qr = qs != NULL && ldns_rr_list_rr_count(qs) == 1 ? ldns_rr_list_rr(qs, 0) : NULL;
    if (!ldns_pkt_qr(r) || qr == NULL || ldns_rr_get_type(qr) != q->qtype ||
        ldns_rr_get_class(qr) != q->qclass ||
        ldns_dname_compare(ldns_rr_owner(qr), q->qname) != 0) {
        ldns_pkt_free(r);
        return;
    }
    if (ldns_pkt_tc(r) && !over_tcp) {
        ldns_pkt_free(r);
        q->dns->stats.truncated_retries++;
        q->tcp_mode = true;
        detach_upstream(q);
        try_upstream(q);
        return;
    }
    ldns_pkt_rcode rc = ldns_pkt_get_rcode(r);
    if (rc == LDNS_RCODE_SERVFAIL || rc == LDNS_RCODE_REFUSED || rc == LDNS_RCODE_NOTIMPL) {
        /* another upstream may do better */
        ldns_pkt_free(r);
        detach_upstream(q);
        q->attempt++;
        try_upstream(q);
        return;
    }
    if (q->kind == XQ_API)
        answer_api(q, r);
    else
        answer_client(q, r);
}

static void upstream_sockaddr(const struct wr_dns_upstream *u, struct sockaddr_in *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_addr.s_addr = htonl(u->addr);
    sa->sin_port = htons(u->port);
}

static void udp_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct up_udp *u = h->data;

    *buf = uv_buf_init((char *)u->dns->ubuf, sizeof(u->dns->ubuf));
}

static void udp_recv(uv_udp_t *h, ssize_t nread, const uv_buf_t *buf, const struct sockaddr *from,
                     unsigned flags)
{
    struct up_udp *u = h->data;

    if (nread == 0 || (flags & UV_UDP_PARTIAL))
        return;
    if (nread < 0) {
        /* ECONNREFUSED (nothing listens there) and the like: the next upstream now, for every
         * question on this socket (they all went to it); none goes out on it again */
        if (!u->retired) {
            u->retired = true;
            if (u->dns->cur[u->upstream] == u)
                u->dns->cur[u->upstream] = NULL;
        }
        u->inflight++; /* keep it open through the loop */
        for (unsigned i = 0; i < u->uses; i++) {
            struct xq *q = u->slots[i].q;
            if (q == NULL)
                continue;
            detach_upstream(q);
            q->attempt++;
            try_upstream(q);
        }
        if (--u->inflight == 0)
            uv_close((uv_handle_t *)&u->h, free_cb);
        return;
    }
    if (nread < 2)
        return;
    uint16_t id = (uint16_t)(u->dns->ubuf[0] << 8 | u->dns->ubuf[1]);
    for (unsigned i = 0; i < u->uses; i++)
        if (u->slots[i].q != NULL && u->slots[i].id == id) {
            got_answer(u->slots[i].q, u->dns->ubuf, (size_t)nread, false);
            return;
        }
}

/* The socket for a question to upstream i: the current one, or a new one. NULL on failure. */
static struct up_udp *udp_socket(struct wr_dns *dns, unsigned i)
{
    struct up_udp *u = dns->cur[i];
    struct sockaddr_in sa;

    if (u != NULL && u->uses < SOCK_USES)
        return u;
    if (u != NULL) {
        u->retired = true;
        dns->cur[i] = NULL;
        if (u->inflight == 0)
            uv_close((uv_handle_t *)&u->h, free_cb);
    }
    u = xcalloc(1, sizeof(*u));
    uv_udp_init(dns->loop, &u->h);
    u->h.data = u;
    u->dns = dns;
    u->upstream = i;
    upstream_sockaddr(&dns->up[i], &sa);
    /* connect binds to a port the kernel picks at random */
    if (uv_udp_connect(&u->h, (const struct sockaddr *)&sa) < 0 ||
        uv_udp_recv_start(&u->h, udp_alloc, udp_recv) < 0) {
        uv_close((uv_handle_t *)&u->h, free_cb);
        return NULL;
    }
    dns->cur[i] = u;
    return u;
}

static void tcp_read_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct up_tcp *t = h->data;

    *buf = uv_buf_init((char *)t->buf + t->have, (unsigned)(sizeof(t->buf) - t->have));
}

static void tcp_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct up_tcp *t = s->data;
    struct xq *q = t->q;

    if (q == NULL || nread == 0)
        return;
    if (nread < 0) {
        detach_upstream(q);
        q->attempt++;
        try_upstream(q);
        return;
    }
    t->have += (size_t)nread;
    if (t->have >= 2) {
        size_t want = (size_t)t->buf[0] << 8 | t->buf[1];
        if (t->have >= 2 + want) {
            got_answer(q, t->buf + 2, want, true);
            /* a message that did not answer q: give this upstream up */
            if (!q->done && q->tcp == t) {
                detach_upstream(q);
                q->attempt++;
                try_upstream(q);
            }
            return;
        }
    }
    if (t->have == sizeof(t->buf)) {
        detach_upstream(q);
        q->attempt++;
        try_upstream(q);
    }
}

static void tcp_connected(uv_connect_t *c, int status)
{
    struct up_tcp *t = c->data;
    struct xq *q = t->q;

    if (q == NULL || status == UV_ECANCELED)
        return;
    if (status < 0) {
        detach_upstream(q);
        q->attempt++;
        try_upstream(q);
        return;
    }
    struct wreq *w = xmalloc(sizeof(*w) + 2 + q->wire_len);
    w->data[0] = (uint8_t)(q->wire_len >> 8);
    w->data[1] = (uint8_t)q->wire_len;
    memcpy(w->data + 2, q->wire, q->wire_len);
    uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)(q->wire_len + 2));
    if (uv_write(&w->req, (uv_stream_t *)&t->h, &b, 1, tc_written) < 0 ||
        uv_read_start((uv_stream_t *)&t->h, tcp_read_alloc, tcp_read) < 0) {
        detach_upstream(q);
        q->attempt++;
        try_upstream(q);
    }
}

static void xq_timeout(uv_timer_t *t)
{
    struct xq *q = t->data;

    detach_upstream(q);
    q->attempt++;
    try_upstream(q);
}

/* Send q to the upstream of its attempt, or fail it when the attempts are spent. */
static void try_upstream(struct xq *q)
{
    struct wr_dns *dns = q->dns;
    struct sockaddr_in sa;

    if (q->attempt >= dns->cfg.attempts) {
        xq_fail(q);
        return;
    }
    upstream_sockaddr(&dns->up[q->attempt % dns->cfg.n_upstreams], &sa);
    uv_timer_start(&q->timer, xq_timeout, dns->cfg.timeout_ms, 0);
    if (!q->tcp_mode) {
        unsigned i = q->attempt % dns->cfg.n_upstreams;
        struct up_udp *u = udp_socket(dns, i);
        if (u == NULL) {
            q->attempt++;
            try_upstream(q);
            return;
        }
        /* a fresh random id for each attempt, unique on the socket */
        bool clash;
        do {
            q->id = random_id(dns);
            clash = false;
            for (unsigned k = 0; k < u->uses; k++)
                clash |= u->slots[k].q != NULL && u->slots[k].id == q->id;
        } while (clash);
        q->wire[0] = (uint8_t)(q->id >> 8);
        q->wire[1] = (uint8_t)q->id;
        q->udp = u;
        q->slot = u->uses++;
        u->slots[q->slot].id = q->id;
        u->slots[q->slot].q = q;
        u->inflight++;
        uv_buf_t b = uv_buf_init((char *)q->wire, (unsigned)q->wire_len);
        int r = uv_udp_try_send(&u->h, &b, 1, NULL);
        if (r < 0 && r != UV_EAGAIN) {
            detach_upstream(q);
            q->attempt++;
            try_upstream(q);
        }
        return; /* EAGAIN: lost like a dropped packet, the timer retries */
    }
    struct up_tcp *t = xmalloc(sizeof(*t));
    uv_tcp_init(dns->loop, &t->h);
    t->h.data = t;
    t->conn.data = t;
    t->q = q;
    t->have = 0;
    q->tcp = t;
    if (uv_tcp_connect(&t->conn, &t->h, (const struct sockaddr *)&sa, tcp_connected) < 0) {
        detach_upstream(q);
        q->attempt++;
        try_upstream(q);
    }
}

/* A new question: id, wire form, linked in and counted. NULL (nothing allocated) if ldns fails. */
static struct xq *xq_new(struct wr_dns *dns, enum xq_kind kind, ldns_rdf *qname, ldns_rr_type qtype,
                         ldns_rr_class qclass)
{
    ldns_pkt *p = ldns_pkt_query_new(qname, qtype, qclass, LDNS_RD);
    struct xq *q;

    if (p == NULL) {
        ldns_rdf_deep_free(qname);
        return NULL;
    }
    q = xcalloc(1, sizeof(*q));
    q->dns = dns;
    q->kind = kind;
    q->id = random_id(dns);
    q->qtype = qtype;
    q->qclass = qclass;
    ldns_pkt_set_id(p, q->id);
    ldns_pkt_set_edns_udp_size(p, EDNS_UDP_SIZE);
    if (ldns_pkt2wire(&q->wire, p, &q->wire_len) != LDNS_STATUS_OK) {
        ldns_pkt_free(p); /* frees qname with the question */
        free(q);
        return NULL;
    }
    q->qname = ldns_rdf_clone(qname);
    ldns_pkt_free(p);
    uv_timer_init(dns->loop, &q->timer);
    q->timer.data = q;
    q->next = dns->head;
    if (dns->head != NULL)
        dns->head->prev = q;
    dns->head = q;
    dns->inflight++;
    return q;
}

/* ---- questions from sandboxes ---- */

/* Handle one message from saddr (UDP: from; TCP: tc). */
static void client_message(struct wr_dns *dns, const uint8_t *data, size_t len, uint32_t saddr,
                           const struct sockaddr_in *from, struct in_addr local,
                           struct tcp_client *tc)
{
    ldns_pkt *query = NULL;
    struct xq tmp = {.dns = dns, .kind = tc ? XQ_TCP : XQ_UDP, .tc = tc};
    struct wr_net_peer peer = {0};
    char name[LDNS_MAX_DOMAINLEN + 8], rule[WR_NET_RULE_BUF];

    if (from != NULL)
        tmp.client = *from;
    tmp.local = local;
    if (ldns_wire2pkt(&query, data, len) != LDNS_STATUS_OK)
        return; /* not DNS: no answer */
    dns->stats.queries++;
    if (ldns_pkt_qr(query)) {
        ldns_pkt_free(query);
        return;
    }
    ldns_rr_list *qs = ldns_pkt_question(query);
    if (ldns_pkt_get_opcode(query) != LDNS_PACKET_QUERY || qs == NULL ||
        ldns_rr_list_rr_count(qs) != 1 || ldns_pkt_ancount(query) != 0) {
        answer_rcode(&tmp, query, LDNS_RCODE_FORMERR, false);
        ldns_pkt_free(query);
        return;
    }
    if (!dns->cfg.lookup(dns->cfg.lookup_arg, saddr, &peer)) {
        dns->stats.refused++;
        answer_rcode(&tmp, query, LDNS_RCODE_REFUSED, false);
        ldns_pkt_free(query);
        return;
    }
    ldns_rr *qr = ldns_rr_list_rr(qs, 0);
    char *text = ldns_rdf2str(ldns_rr_owner(qr));
    size_t tl = text ? strlen(text) : 0;
    if (tl > 1 && text[tl - 1] == '.')
        tl--;
    if (tl >= sizeof(name))
        tl = sizeof(name) - 1;
    for (size_t i = 0; i < tl; i++)
        name[i] = text[i] >= 'A' && text[i] <= 'Z' ? (char)(text[i] - 'A' + 'a') : text[i];
    name[tl] = '\0';
    free(text);

    bool allowed;
    if (wr_net_policy_l7(peer.policy))
        allowed = wr_net_policy_rule_for_name(peer.policy, name, rule);
    else if (wr_net_policy_deny_all(peer.policy))
        allowed = wr_net_policy_rule_for_name(peer.policy, name, rule); /* says what denies */
    else {
        allowed = true;
        snprintf(rule, sizeof(rule), "default");
    }
    if (allowed && ldns_rr_get_class(qr) != LDNS_RR_CLASS_IN) {
        allowed = false;
        snprintf(rule, sizeof(rule), "class not IN");
    }
    if (!allowed) {
        dns->stats.refused++;
        emit(dns, peer.sandbox_id, name, 0, false, rule);
        answer_rcode(&tmp, query, LDNS_RCODE_REFUSED, false);
        ldns_pkt_free(query);
        return;
    }
    if (dns->inflight >= dns->cfg.max_inflight ||
        wr_net_count_get(&dns->per, saddr) >= dns->cfg.max_inflight_per) {
        dns->stats.refused++;
        emit(dns, peer.sandbox_id, name, 0, false, "too many questions in flight");
        answer_rcode(&tmp, query, LDNS_RCODE_SERVFAIL, false);
        ldns_pkt_free(query);
        return;
    }
    struct xq *q = xq_new(dns, tmp.kind, ldns_rdf_clone(ldns_rr_owner(qr)), ldns_rr_get_type(qr),
                          ldns_rr_get_class(qr));
    if (q == NULL) {
        answer_rcode(&tmp, query, LDNS_RCODE_SERVFAIL, false);
        ldns_pkt_free(query);
        return;
    }
    dns->stats.forwarded++;
    q->saddr = saddr;
    wr_net_count_inc(&dns->per, saddr);
    q->client = tmp.client;
    q->local = tmp.local;
    if (tc != NULL) {
        q->tc = tc;
        tc->refs++;
        tc->inflight++;
    }
    q->client_id = ldns_pkt_id(query);
    q->client_max = 512;
    if (ldns_pkt_edns(query) && ldns_pkt_edns_udp_size(query) > 512)
        q->client_max =
            ldns_pkt_edns_udp_size(query) < UDP_MAX ? ldns_pkt_edns_udp_size(query) : UDP_MAX;
    q->query = query;
    q->sandbox_id = xstrdup(peer.sandbox_id ? peer.sandbox_id : "");
    q->name = xstrdup(name);
    q->rule = xstrdup(rule);
    try_upstream(q);
}

/* The UDP socket is readable: take up to 64 questions (then let the loop run the rest). */
static void srv_readable(uv_poll_t *h, int status, int events)
{
    struct wr_dns *dns = h->data;

    for (int i = 0; i < 64 && !dns->stopped; i++) {
        union {
            struct cmsghdr h;
            char b[CMSG_SPACE(sizeof(struct in_pktinfo))];
        } ctl;
        struct sockaddr_in from;
        struct iovec iov = {dns->rbuf, sizeof(dns->rbuf)};
        struct msghdr mh = {.msg_name = &from,
                            .msg_namelen = sizeof(from),
                            .msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = ctl.b,
                            .msg_controllen = sizeof(ctl.b)};
        struct in_addr local = {0};
        ssize_t n = recvmsg(dns->ufd, &mh, MSG_DONTWAIT);

        if (n < 0)
            return;
        if ((mh.msg_flags & MSG_TRUNC) || mh.msg_namelen != sizeof(from) ||
            from.sin_family != AF_INET)
            continue;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c))
            if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
                struct in_pktinfo pi;
                memcpy(&pi, CMSG_DATA(c), sizeof(pi));
                local = pi.ipi_addr;
            }
        client_message(dns, dns->rbuf, (size_t)n, ntohl(from.sin_addr.s_addr), &from, local, NULL);
    }
}

static void tc_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct tcp_client *tc = h->data;

    *buf = uv_buf_init((char *)tc->buf + tc->have, (unsigned)(sizeof(tc->buf) - tc->have));
}

static void tc_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct tcp_client *tc = s->data;

    if (nread == 0)
        return;
    if (nread < 0) {
        tc_close(tc);
        return;
    }
    tc->have += (size_t)nread;
    uv_timer_again(&tc->idle);
    for (;;) {
        if (tc->have < 2)
            return;
        size_t want = (size_t)tc->buf[0] << 8 | tc->buf[1];
        if (want > TCP_QUERY_MAX) {
            tc_close(tc);
            return;
        }
        if (tc->have < 2 + want)
            return;
        tc->refs++; /* client_message may close it */
        client_message(tc->dns, tc->buf + 2, want, tc->saddr, NULL, (struct in_addr){0}, tc);
        memmove(tc->buf, tc->buf + 2 + want, tc->have - 2 - want);
        tc->have -= 2 + want;
        bool gone = tc->closed;
        tc_unref(tc);
        if (gone)
            return;
        if (tc->inflight >= TCP_PER_CLIENT) {
            uv_read_stop((uv_stream_t *)&tc->h);
            tc->reading = false;
            return;
        }
    }
}

static void tc_read_start(struct tcp_client *tc)
{
    if (uv_read_start((uv_stream_t *)&tc->h, tc_alloc, tc_read) == 0)
        tc->reading = true;
}

static void tc_idle(uv_timer_t *t)
{
    struct tcp_client *tc = t->data;

    if (tc->inflight == 0)
        tc_close(tc);
}

static void srv_connection(uv_stream_t *srv, int status)
{
    struct wr_dns *dns = srv->data;
    struct tcp_client *tc;
    struct sockaddr_storage ss;
    int sl = sizeof(ss);

    if (status < 0)
        return;
    tc = xcalloc(1, sizeof(*tc));
    tc->dns = dns;
    tc->refs = 2;
    dns->n_tcp++;
    tc->next = dns->tcps;
    if (dns->tcps != NULL)
        dns->tcps->prev = tc;
    dns->tcps = tc;
    uv_tcp_init(dns->loop, &tc->h);
    uv_timer_init(dns->loop, &tc->idle);
    tc->h.data = tc;
    tc->idle.data = tc;
    if (uv_accept(srv, (uv_stream_t *)&tc->h) < 0 ||
        uv_tcp_getpeername(&tc->h, (struct sockaddr *)&ss, &sl) < 0 || ss.ss_family != AF_INET ||
        dns->n_tcp > dns->cfg.max_tcp) {
        tc_close(tc);
        return;
    }
    tc->saddr = ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr);
    uv_timer_start(&tc->idle, tc_idle, TCP_IDLE_MS, TCP_IDLE_MS);
    tc_read_start(tc);
}

/* ---- the API ---- */

int wr_dns_resolv_conf(const char *path, struct wr_dns_upstream *out, size_t max, size_t *n,
                       struct wr_err *err)
{
    FILE *f = fopen(path, "re");
    char line[512];

    *n = 0;
    if (f == NULL)
        return wr_err_sys(err, "open %s", path);
    while (fgets(line, sizeof(line), f) != NULL && *n < max) {
        char word[16], addr[64];
        uint32_t a;
        if (sscanf(line, "%15s %63s", word, addr) == 2 && strcmp(word, "nameserver") == 0 &&
            wr_inet4_parse(addr, &a))
            out[(*n)++] = (struct wr_dns_upstream){a, 53};
    }
    fclose(f);
    return 0;
}

static void stub_closed(uv_handle_t *h)
{
    struct wr_dns *dns = h->data;

    if (--dns->closing == 0 && dns->n_tcp == 0)
        dns_free(dns);
}

int wr_dns_start(uv_loop_t *loop, const struct wr_dns_config *cfg, struct wr_dns **out,
                 struct wr_err *err)
{
    struct wr_dns *dns;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    int r = 0;

    if (cfg->lookup == NULL)
        return wr_err_set(err, WR_EINVAL, 0, "dns stub: no lookup function");
    if (cfg->n_upstreams > WR_DNS_MAX_UPSTREAMS)
        return wr_err_set(err, WR_EINVAL, 0, "dns stub: more than %d upstreams",
                          WR_DNS_MAX_UPSTREAMS);
    dns = xcalloc(1, sizeof(*dns));
    dns->ufd = -1;
    dns->loop = loop;
    dns->cfg = *cfg;
    if (cfg->n_upstreams > 0) {
        memcpy(dns->up, cfg->upstreams, cfg->n_upstreams * sizeof(dns->up[0]));
    } else if (wr_dns_resolv_conf("/etc/resolv.conf", dns->up, WR_DNS_MAX_UPSTREAMS,
                                  &dns->cfg.n_upstreams, err) < 0 ||
               dns->cfg.n_upstreams == 0) {
        bool none = dns->cfg.n_upstreams == 0;
        free(dns);
        if (none)
            return wr_err_set(err, WR_EINVAL, 0,
                              "dns stub: no IPv4 nameserver in /etc/resolv.conf");
        return wr_err_wrap(err, "dns stub");
    }
    dns->cfg.upstreams = dns->up;
    if (cfg->n_deny > 0) {
        dns->deny = xmalloc(cfg->n_deny * sizeof(*dns->deny));
        memcpy(dns->deny, cfg->deny, cfg->n_deny * sizeof(*dns->deny));
    }
    dns->cfg.deny = dns->deny;
    if (dns->cfg.timeout_ms == 0)
        dns->cfg.timeout_ms = 2000;
    if (dns->cfg.attempts == 0)
        dns->cfg.attempts = dns->cfg.n_upstreams * 2 > 2 ? (unsigned)dns->cfg.n_upstreams * 2 : 2;
    if (dns->cfg.max_inflight == 0)
        dns->cfg.max_inflight = 4096;
    if (dns->cfg.max_inflight_per == 0)
        dns->cfg.max_inflight_per = 256;
    if (dns->cfg.max_tcp == 0)
        dns->cfg.max_tcp = 512;

    /* one port for both: with port 0, UDP's ephemeral port for TCP, again if TCP has it taken */
    int ufd = -1, tfd = -1, one = 1;
    sa.sin_addr.s_addr = htonl(cfg->bind_addr);
    for (int tries = 0; tries < 32; tries++) {
        socklen_t len = sizeof(sa);
        sa.sin_port = htons(cfg->port);
        ufd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        tfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (ufd < 0 || tfd < 0 ||
            setsockopt(tfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            setsockopt(ufd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one)) < 0 ||
            bind(ufd, (const struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            getsockname(ufd, (struct sockaddr *)&sa, &len) < 0) {
            r = -errno;
            break;
        }
        if (bind(tfd, (const struct sockaddr *)&sa, sizeof(sa)) == 0) {
            r = 0;
            break;
        }
        r = -errno;
        close(ufd);
        close(tfd);
        ufd = tfd = -1;
        if (r != -EADDRINUSE || cfg->port != 0)
            break;
    }
    if (r == 0) {
        uv_tcp_init(loop, &dns->tcp);
        dns->udp.data = dns;
        dns->tcp.data = dns;
        dns->closing = 1;
        if ((r = uv_poll_init(loop, &dns->udp, ufd)) == 0) {
            dns->closing = 2;
            dns->ufd = ufd;
            ufd = -1;
        }
        if (r == 0 && (r = uv_tcp_open(&dns->tcp, tfd)) == 0)
            tfd = -1;
        if (r == 0)
            r = uv_listen((uv_stream_t *)&dns->tcp, 128, srv_connection);
        if (r == 0)
            r = uv_poll_start(&dns->udp, UV_READABLE, srv_readable);
        if (r < 0) {
            dns->stopped = true;
            if (dns->closing == 2)
                uv_close((uv_handle_t *)&dns->udp, stub_closed);
            uv_close((uv_handle_t *)&dns->tcp, stub_closed);
        }
    } else {
        free(dns->deny);
        free(dns);
    }
    if (ufd >= 0)
        close(ufd);
    if (tfd >= 0)
        close(tfd);
    if (r < 0)
        return wr_err_set(err, WR_ESYS, -r, "dns stub: listen on port %u", cfg->port);
    dns->port = ntohs(sa.sin_port);
    *out = dns;
    return 0;
}

uint16_t wr_dns_port(const struct wr_dns *dns)
{
    return dns->port;
}

void wr_dns_stop(struct wr_dns *dns)
{
    if (dns == NULL || dns->stopped)
        return;
    dns->stopped = true;
    while (dns->head != NULL) {
        struct xq *q = dns->head;
        if (q->kind == XQ_API && q->cb != NULL)
            q->cb(q->cb_arg, WR_DNS_CANCELED, NULL, 0);
        xq_finish(q);
    }
    for (struct tcp_client *tc = dns->tcps; tc != NULL; tc = tc->next)
        tc_close(tc);
    for (size_t i = 0; i < WR_DNS_MAX_UPSTREAMS; i++)
        if (dns->cur[i] != NULL) {
            dns->cur[i]->retired = true;
            if (dns->cur[i]->inflight == 0)
                uv_close((uv_handle_t *)&dns->cur[i]->h, free_cb);
            dns->cur[i] = NULL;
        }
    uv_close((uv_handle_t *)&dns->udp, stub_closed);
    uv_close((uv_handle_t *)&dns->tcp, stub_closed);
}

struct wr_dns_req *wr_dns_resolve(struct wr_dns *dns, const char *name, wr_dns_resolve_cb cb,
                                  void *arg)
{
    char norm[WR_NET_NAME_BUF];
    ldns_rdf *qname;
    struct xq *q;

    if (dns->stopped || wr_net_name_normalise(name, false, norm) < 0)
        return NULL;
    qname = ldns_dname_new_frm_str(norm);
    if (qname == NULL)
        return NULL;
    q = xq_new(dns, XQ_API, qname, LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN);
    if (q == NULL)
        return NULL;
    q->cb = cb;
    q->cb_arg = arg;
    if (dns->inflight > dns->cfg.max_inflight) {
        /* answered from the loop, as promised, not from inside this call */
        q->limit = true;
        q->attempt = dns->cfg.attempts;
        uv_timer_start(&q->timer, xq_timeout, 0, 0);
        return (struct wr_dns_req *)q;
    }
    try_upstream(q);
    return (struct wr_dns_req *)q;
}

void wr_dns_cancel(struct wr_dns_req *req)
{
    struct xq *q = (struct xq *)req;

    q->cb = NULL;
    xq_finish(q);
}

void wr_dns_get_stats(const struct wr_dns *dns, struct wr_dns_stats *out)
{
    *out = dns->stats;
    out->inflight = dns->inflight;
}
