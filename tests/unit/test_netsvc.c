/* SPDX-License-Identifier: Apache-2.0 */
/* src/net/dns.c and src/net/proxy.c against real peers, in a private network namespace (a forked
 * child unshares CLONE_NEWNET: only lo, with 198.18.0.0/15 routed locally to it, so no packet can
 * leave the machine). The "internet" is this program: an authoritative DNS server (libldns) on
 * 198.18.0.1:53 and TCP servers on addresses of 198.18.0.0/15, 10.0.0.1 and 169.254.169.254.
 * An nft rule in the namespace redirects the "sandboxes'" TCP 80/443 to the proxy, as the
 * daemon's pre_nat chain does, so the proxy reads SO_ORIGINAL_DST.
 * `test_netsvc bench [seconds]` measures the stub's queries per second instead. */
#include <arpa/inet.h>
#include <errno.h>
#include <ldns/ldns.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "../../src/net/dns.h"
#include "../../src/net/proxy.h"
#include "netparse.h"
#include "tap.h"

#define A(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (d))

#define SB_A   A(198, 18, 0, 2) /* names policy */
#define SB_B   A(198, 18, 0, 3) /* internet, no names */
#define SB_C   A(198, 18, 0, 5) /* internet false, no names */
#define SB_D   A(198, 18, 0, 6) /* CIDR only, max_connections 2 */
#define NOBODY A(198, 18, 0, 4)
#define AUTH   A(198, 18, 0, 1)
#define WEB    A(198, 18, 1, 10)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int run(const char *cmd)
{
    int r = system(cmd);
    if (r != 0)
        fprintf(stderr, "# command failed (%d): %s\n", r, cmd);
    return r;
}

static struct sockaddr_in sin_of(uint32_t addr, uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(addr);
    sa.sin_port = htons(port);
    return sa;
}

/* ---- the authoritative server ---- */

static const char *zone[] = {
    "www.example.test. 60 IN A 198.18.1.10",     "a.b.example.test. 60 IN A 198.18.1.10",
    "example.test. 60 IN A 198.18.1.10",         "evil-example.test. 60 IN A 198.18.1.10",
    "api.allowed.test. 60 IN A 198.18.1.10",     "api.allowed.test. 60 IN AAAA 2001:db8::1",
    "rebind1.allowed.test. 60 IN A 10.0.0.1",    "rebind2.allowed.test. 60 IN A 169.254.169.254",
    "rebind2.allowed.test. 60 IN A 198.18.1.10", "tc.allowed.test. 60 IN A 198.18.1.10",
    "x.evil.test. 60 IN A 198.18.1.10",          "extra.allowed.test. 60 IN A 198.18.9.9",
    "extra.allowed.test. 60 IN A 198.18.1.10",   "extra2.allowed.test. 60 IN A 198.18.9.9",
};

#define N_ZONE (sizeof(zone) / sizeof(zone[0]))
static ldns_rr *zone_rr[N_ZONE]; /* parsed once, before the server starts */

static pthread_mutex_t auth_mu = PTHREAD_MUTEX_INITIALIZER;
static int auth_evil_queries, auth_queries;

/* The answer to one query (wire), or 0 bytes. over_udp: tc.allowed.test is truncated. */
static size_t auth_answer(const uint8_t *q, size_t n, bool over_udp, uint8_t **out)
{
    ldns_pkt *p = NULL, *r;
    size_t len = 0;

    *out = NULL;
    if (ldns_wire2pkt(&p, q, n) != LDNS_STATUS_OK)
        return 0;
    ldns_rr *qr = ldns_rr_list_rr(ldns_pkt_question(p), 0);
    char *name = ldns_rdf2str(ldns_rr_owner(qr));
    pthread_mutex_lock(&auth_mu);
    auth_queries++;
    if (strstr(name, "evil.test") != NULL)
        auth_evil_queries++;
    pthread_mutex_unlock(&auth_mu);
    r = ldns_pkt_new();
    ldns_pkt_set_id(r, ldns_pkt_id(p));
    ldns_pkt_set_qr(r, true);
    ldns_pkt_set_aa(r, true);
    ldns_rr_list_deep_free(ldns_pkt_question(r));
    ldns_pkt_set_question(r, ldns_rr_list_clone(ldns_pkt_question(p)));
    ldns_pkt_set_qdcount(r, 1);
    bool found = false;
    if (over_udp && strcmp(name, "tc.allowed.test.") == 0) {
        ldns_pkt_set_tc(r, true);
        found = true;
    } else {
        for (size_t i = 0; i < N_ZONE; i++) {
            ldns_rr *rr = zone_rr[i];
            if (ldns_dname_compare(ldns_rr_owner(rr), ldns_rr_owner(qr)) == 0) {
                found = true;
                if (ldns_rr_get_type(rr) == ldns_rr_get_type(qr))
                    ldns_pkt_push_rr(r, LDNS_SECTION_ANSWER, ldns_rr_clone(rr));
            }
        }
    }
    if (!found)
        ldns_pkt_set_rcode(r, LDNS_RCODE_NXDOMAIN);
    free(name);
    (void)ldns_pkt2wire(out, r, &len);
    ldns_pkt_free(r);
    ldns_pkt_free(p);
    return len;
}

static int auth_udp = -1, auth_tcp = -1;

static void *auth_thread(void *arg)
{
    for (;;) {
        struct pollfd pf[2] = {{auth_udp, POLLIN, 0}, {auth_tcp, POLLIN, 0}};
        if (poll(pf, 2, -1) < 0)
            continue;
        if (pf[0].revents & POLLIN) {
            uint8_t b[4096], *out;
            struct sockaddr_in from;
            socklen_t fl = sizeof(from);
            ssize_t n = recvfrom(auth_udp, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
            if (n > 0) {
                size_t len = auth_answer(b, (size_t)n, true, &out);
                if (len > 0)
                    (void)sendto(auth_udp, out, len, 0, (struct sockaddr *)&from, fl);
                free(out);
            }
        }
        if (pf[1].revents & POLLIN) {
            int c = accept(auth_tcp, NULL, NULL);
            uint8_t b[2 + 4096], *out;
            size_t have = 0;
            struct timeval tv = {2, 0};
            if (c < 0)
                continue;
            setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
            while (have < sizeof(b)) {
                ssize_t n = read(c, b + have, sizeof(b) - have);
                if (n <= 0)
                    break;
                have += (size_t)n;
                if (have >= 2 && have >= 2 + (size_t)(b[0] << 8 | b[1]))
                    break;
            }
            if (have > 2) {
                size_t len = auth_answer(b + 2, have - 2, false, &out);
                uint8_t hdr[2] = {(uint8_t)(len >> 8), (uint8_t)len};
                if (len > 0 && write(c, hdr, 2) == 2)
                    (void)!write(c, out, len);
                free(out);
            }
            close(c);
        }
    }
    return NULL;
}

/* ---- TCP servers: they count connections, read until EOF, answer "srv <addr> n=<bytes>" ---- */

#define N_SRV 8
static struct srv {
    uint32_t addr;
    uint16_t port;
    int fd;
    int conns;
} srvs[N_SRV] = {
    {A(198, 18, 1, 10), 443, -1, 0}, {A(198, 18, 1, 10), 80, -1, 0},
    {A(198, 18, 2, 5), 443, -1, 0},  {A(198, 18, 3, 5), 443, -1, 0},
    {A(10, 0, 0, 1), 443, -1, 0},    {A(169, 254, 169, 254), 443, -1, 0},
    {A(10, 0, 0, 1), 80, -1, 0},     {A(198, 18, 9, 9), 443, -1, 0},
};
static pthread_mutex_t srv_mu = PTHREAD_MUTEX_INITIALIZER;

static int srv_conns(uint32_t addr, uint16_t port)
{
    int n = -1;
    pthread_mutex_lock(&srv_mu);
    for (int i = 0; i < N_SRV; i++)
        if (srvs[i].addr == addr && srvs[i].port == port)
            n = srvs[i].conns;
    pthread_mutex_unlock(&srv_mu);
    return n;
}

struct srv_conn {
    int fd;
    uint32_t addr;
};

static void *srv_conn_thread(void *arg)
{
    struct srv_conn *sc = arg;
    char b[65536], a[16], reply[128];
    size_t total = 0;
    ssize_t n;

    while ((n = read(sc->fd, b, sizeof(b))) > 0)
        total += (size_t)n;
    wr_inet4_format(sc->addr, a);
    int rl = snprintf(reply, sizeof(reply), "srv %s n=%zu", a, total);
    (void)!write(sc->fd, reply, (size_t)rl);
    close(sc->fd);
    free(sc);
    return NULL;
}

static void *srv_thread(void *arg)
{
    for (;;) {
        struct pollfd pf[N_SRV];
        for (int i = 0; i < N_SRV; i++)
            pf[i] = (struct pollfd){srvs[i].fd, POLLIN, 0};
        if (poll(pf, N_SRV, -1) < 0)
            continue;
        for (int i = 0; i < N_SRV; i++) {
            if (!(pf[i].revents & POLLIN))
                continue;
            int c = accept(srvs[i].fd, NULL, NULL);
            if (c < 0)
                continue;
            pthread_mutex_lock(&srv_mu);
            srvs[i].conns++;
            pthread_mutex_unlock(&srv_mu);
            struct srv_conn *sc = malloc(sizeof(*sc));
            *sc = (struct srv_conn){c, srvs[i].addr};
            pthread_t t;
            pthread_create(&t, NULL, srv_conn_thread, sc);
            pthread_detach(t);
        }
    }
    return NULL;
}

/* ---- the daemon's side: policies, lookup, log ---- */

static struct wr_net_policy pol_a, pol_b, pol_c, pol_d;

static bool lookup(void *arg, uint32_t saddr, struct wr_net_peer *out)
{
    switch (saddr) {
    case SB_A:
        *out = (struct wr_net_peer){"sb-a", &pol_a, 0};
        return true;
    case SB_B:
        *out = (struct wr_net_peer){"sb-b", &pol_b, 0};
        return true;
    case SB_C:
        *out = (struct wr_net_peer){"sb-c", &pol_c, 0};
        return true;
    case SB_D:
        *out = (struct wr_net_peer){"sb-d", &pol_d, 2};
        return true;
    }
    return false;
}

#define LOG_MAX 512
static struct logent {
    char sandbox[16], proto[8], name[256], rule[300];
    uint32_t addr;
    uint16_t port;
    uint64_t out, in;
    bool allowed;
} logs[LOG_MAX];
static int n_logs;
static bool quiet_log;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void logfn(void *arg, const struct wr_netlog_entry *e)
{
    if (quiet_log)
        return;
    pthread_mutex_lock(&log_mu);
    if (n_logs < LOG_MAX) {
        struct logent *l = &logs[n_logs++];
        snprintf(l->sandbox, sizeof(l->sandbox), "%s", e->sandbox_id);
        snprintf(l->proto, sizeof(l->proto), "%s", e->proto);
        snprintf(l->name, sizeof(l->name), "%s", e->name ? e->name : "");
        snprintf(l->rule, sizeof(l->rule), "%s", e->rule ? e->rule : "");
        l->addr = e->addr;
        l->port = e->port;
        l->out = e->bytes_out;
        l->in = e->bytes_in;
        l->allowed = e->allowed;
    }
    pthread_mutex_unlock(&log_mu);
}

/* The last log entry of proto for name ("" for none), waiting up to 2 s for it to appear. */
static struct logent last_log(const char *proto, const char *name, int after)
{
    struct logent r = {0};
    for (int tries = 0; tries < 200; tries++) {
        bool got = false;
        pthread_mutex_lock(&log_mu);
        for (int i = n_logs - 1; i >= after; i--)
            if (strcmp(logs[i].proto, proto) == 0 && strcmp(logs[i].name, name) == 0) {
                r = logs[i];
                got = true;
                break;
            }
        pthread_mutex_unlock(&log_mu);
        if (got)
            return r;
        usleep(10000);
    }
    return r;
}

static int log_mark(void)
{
    pthread_mutex_lock(&log_mu);
    int n = n_logs;
    pthread_mutex_unlock(&log_mu);
    return n;
}

/* ---- the services on their loop thread ---- */

static uv_loop_t loop;
static uv_async_t stop_async;
static struct wr_dns *dns, *dns2; /* dns2: small limits, an upstream that never answers */
static struct wr_proxy *px;

static void on_stop(uv_async_t *a)
{
    wr_proxy_stop(px);
    wr_dns_stop(dns);
    wr_dns_stop(dns2);
    uv_close((uv_handle_t *)a, NULL);
}

static void *loop_thread(void *arg)
{
    pthread_setname_np(pthread_self(), "svc-loop");
    uv_run(&loop, UV_RUN_DEFAULT);
    return NULL;
}

/* ---- clients ---- */

/* Ask the stub (from src) name/type; returns the rcode (-1: no answer) and fills addrs (A
 * records), *n_aaaa and *tc. */
static int ask(uint32_t src, const char *name, ldns_rr_type type, bool tcp, uint32_t *addrs,
               size_t *n_addrs, size_t *n_aaaa, bool *tc)
{
    ldns_pkt *q = NULL, *r = NULL;
    uint8_t *wire = NULL, buf[65536];
    size_t len = 0;
    ssize_t got = -1;
    struct sockaddr_in me = sin_of(src, 0), to = sin_of(AUTH, wr_dns_port(dns));
    struct timeval tv = {3, 0};
    int fd, rc = -1;

    *n_addrs = 0;
    if (n_aaaa)
        *n_aaaa = 0;
    if (tc)
        *tc = false;
    if (ldns_pkt_query_new_frm_str(&q, name, type, LDNS_RR_CLASS_IN, LDNS_RD) != LDNS_STATUS_OK)
        return -1;
    ldns_pkt_set_random_id(q);
    ldns_pkt2wire(&wire, q, &len);
    fd = socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0 ||
        connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0)
        goto out;
    if (tcp) {
        uint8_t hdr[2] = {(uint8_t)(len >> 8), (uint8_t)len};
        size_t have = 0;
        if (write(fd, hdr, 2) != 2 || write(fd, wire, len) != (ssize_t)len)
            goto out;
        while (have < 2 || have < 2 + (size_t)(buf[0] << 8 | buf[1])) {
            ssize_t n = read(fd, buf + have, sizeof(buf) - have);
            if (n <= 0)
                goto out;
            have += (size_t)n;
        }
        got = (ssize_t)(have - 2);
        memmove(buf, buf + 2, (size_t)got);
    } else {
        if (send(fd, wire, len, 0) != (ssize_t)len)
            goto out;
        got = recv(fd, buf, sizeof(buf), 0);
    }
    if (got <= 0 || ldns_wire2pkt(&r, buf, (size_t)got) != LDNS_STATUS_OK)
        goto out;
    if (ldns_pkt_id(r) != ldns_pkt_id(q))
        goto out;
    rc = ldns_pkt_get_rcode(r);
    if (tc)
        *tc = ldns_pkt_tc(r);
    ldns_rr_list *an = ldns_pkt_answer(r);
    for (size_t i = 0; i < ldns_rr_list_rr_count(an); i++) {
        ldns_rr *rr = ldns_rr_list_rr(an, i);
        if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_A) {
            const uint8_t *d = ldns_rdf_data(ldns_rr_rdf(rr, 0));
            addrs[(*n_addrs)++] = A(d[0], d[1], d[2], d[3]);
        } else if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_AAAA && n_aaaa) {
            (*n_aaaa)++;
        }
    }
out:
    close(fd);
    free(wire);
    ldns_pkt_free(q);
    if (r)
        ldns_pkt_free(r);
    return rc;
}

/* Connect from src to dst:port (the nft rule sends it to the proxy). */
static int dial(uint32_t src, uint32_t dst, uint16_t port)
{
    struct sockaddr_in me = sin_of(src, 0), to = sin_of(dst, port);
    struct timeval tv = {5, 0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0 ||
        connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Read until EOF into out (NUL-terminated); returns bytes or -1 on error. */
static ssize_t read_all(int fd, char *out, size_t cap)
{
    size_t have = 0;
    for (;;) {
        ssize_t n = read(fd, out + have, cap - 1 - have);
        if (n < 0) {
            out[have] = '\0';
            return have > 0 ? (ssize_t)have : -1;
        }
        if (n == 0)
            break;
        have += (size_t)n;
    }
    out[have] = '\0';
    return (ssize_t)have;
}

/* Send data (in pieces of piece bytes, a pause between), half-close, read the answer. */
static ssize_t exchange(int fd, const void *data, size_t n, size_t piece, char *out, size_t cap)
{
    for (size_t at = 0; at < n; at += piece) {
        size_t k = n - at < piece ? n - at : piece;
        if (write(fd, (const char *)data + at, k) != (ssize_t)k)
            return -1;
        if (piece < n)
            usleep(20000);
    }
    shutdown(fd, SHUT_WR);
    return read_all(fd, out, cap);
}

/* ---- the checks ---- */

static void dns_checks(void)
{
    uint32_t ad[16];
    size_t n, n6;
    bool tc;
    struct logent l;
    int mark = log_mark();

    is_int(ask(SB_A, "www.example.test", LDNS_RR_TYPE_A, false, ad, &n, NULL, NULL),
           LDNS_RCODE_NOERROR, "dns: allowed wildcard name answered");
    ok(n == 1 && ad[0] == WEB, "dns: with its address");
    l = last_log("dns", "www.example.test", mark);
    ok(l.allowed && strcmp(l.sandbox, "sb-a") == 0 && l.addr == WEB &&
           strcmp(l.rule, "allow_out *.example.test") == 0,
       "dns: logged allowed with the rule and address (%s)", l.rule);
    is_int(ask(SB_A, "A.B.Example.Test", LDNS_RR_TYPE_A, false, ad, &n, NULL, NULL),
           LDNS_RCODE_NOERROR, "dns: two labels below the wildcard, any case");
    is_int(ask(SB_A, "example.test", LDNS_RR_TYPE_A, false, ad, &n, NULL, NULL), LDNS_RCODE_REFUSED,
           "dns: the wildcard's own suffix refused");
    is_int(ask(SB_A, "evil-example.test", LDNS_RR_TYPE_A, false, ad, &n, NULL, NULL),
           LDNS_RCODE_REFUSED, "dns: evil-example.test refused");
    is_int(ask(SB_A, "c2VjcmV0.x.evil.test", LDNS_RR_TYPE_TXT, false, ad, &n, NULL, NULL),
           LDNS_RCODE_REFUSED, "dns: exfiltration name refused");
    l = last_log("dns", "c2vjcmv0.x.evil.test", mark);
    ok(!l.allowed && strcmp(l.rule, "deny_out 0.0.0.0/0") == 0, "dns: logged denied (%s)", l.rule);
    pthread_mutex_lock(&auth_mu);
    is_int(auth_evil_queries, 0, "dns: refused names never reach the upstream");
    pthread_mutex_unlock(&auth_mu);

    is_int(ask(SB_A, "api.allowed.test", LDNS_RR_TYPE_AAAA, false, ad, &n, &n6, NULL),
           LDNS_RCODE_NOERROR, "dns: AAAA of an allowed name: NOERROR");
    is_int(n6, 0, "dns: AAAA records removed");
    is_int(ask(SB_A, "rebind1.allowed.test", LDNS_RR_TYPE_A, false, ad, &n, NULL, NULL),
           LDNS_RCODE_NOERROR, "dns: rebinding name answered");
    is_int(n, 0, "dns: its 10.0.0.1 removed");
    l = last_log("dns", "rebind1.allowed.test", mark);
    ok(strstr(l.rule, "always-denied 10.0.0.0/8") != NULL, "dns: the removal logged (%s)", l.rule);
    is_int(ask(SB_A, "rebind2.allowed.test", LDNS_RR_TYPE_A, false, ad, &n, NULL, NULL),
           LDNS_RCODE_NOERROR, "dns: mixed answer");
    ok(n == 1 && ad[0] == WEB, "dns: 169.254.169.254 removed, the public address kept");

    is_int(ask(SB_A, "extra.allowed.test", LDNS_RR_TYPE_A, false, ad, &n, NULL, NULL),
           LDNS_RCODE_NOERROR, "dns: name with an address in the extra deny list");
    ok(n == 1 && ad[0] == WEB, "dns: that address removed, the other kept");
    l = last_log("dns", "extra.allowed.test", mark);
    ok(strstr(l.rule, "removed 1 (deny 198.18.9.0/24)") != NULL, "dns: logged (%s)", l.rule);

    struct wr_dns_stats st0, st1;
    wr_dns_get_stats(dns, &st0);
    is_int(ask(SB_A, "tc.allowed.test", LDNS_RR_TYPE_A, false, ad, &n, NULL, &tc),
           LDNS_RCODE_NOERROR, "dns: truncated upstream answer");
    wr_dns_get_stats(dns, &st1);
    ok(n == 1 && ad[0] == WEB && !tc, "dns: answered in full after the TCP retry");
    is_int(st1.truncated_retries - st0.truncated_retries, 1, "dns: one TCP retry upstream");

    is_int(ask(SB_A, "www.example.test", LDNS_RR_TYPE_A, true, ad, &n, NULL, NULL),
           LDNS_RCODE_NOERROR, "dns over TCP: allowed name");
    ok(n == 1 && ad[0] == WEB, "dns over TCP: its address");
    is_int(ask(SB_A, "x.evil.test", LDNS_RR_TYPE_A, true, ad, &n, NULL, NULL), LDNS_RCODE_REFUSED,
           "dns over TCP: refused name");

    is_int(ask(SB_B, "x.evil.test", LDNS_RR_TYPE_A, false, ad, &n, NULL, NULL), LDNS_RCODE_NOERROR,
           "dns: internet without names forwards anything");
    is_int(ask(SB_B, "api.allowed.test", LDNS_RR_TYPE_AAAA, false, ad, &n, &n6, NULL),
           LDNS_RCODE_NOERROR, "dns: forwarded AAAA");
    is_int(n6, 0, "dns: AAAA removed there too");
    is_int(ask(SB_B, "nosuch.test", LDNS_RR_TYPE_A, false, ad, &n, NULL, NULL), LDNS_RCODE_NXDOMAIN,
           "dns: NXDOMAIN passes");
    is_int(ask(SB_C, "www.example.test", LDNS_RR_TYPE_A, false, ad, &n, NULL, NULL),
           LDNS_RCODE_REFUSED, "dns: internet false, no names: REFUSED");
    l = last_log("dns", "www.example.test", mark);
    ok(!l.allowed && strcmp(l.sandbox, "sb-c") == 0 && strcmp(l.rule, "internet false") == 0,
       "dns: logged (%s)", l.rule);
    is_int(ask(NOBODY, "www.example.test", LDNS_RR_TYPE_A, false, ad, &n, NULL, NULL),
           LDNS_RCODE_REFUSED, "dns: unknown source: REFUSED");
}

/* dns2 holds at most 2 questions of a sandbox at once (its upstream never answers) */
static void limit_checks(void)
{
    struct sockaddr_in me = sin_of(SB_B, 0), to = sin_of(AUTH, wr_dns_port(dns2));
    struct timeval tv = {3, 0};
    int fd = socket(AF_INET, SOCK_DGRAM, 0), mark = log_mark();
    uint8_t buf[512];
    double t0 = now_s();

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    bind(fd, (struct sockaddr *)&me, sizeof(me));
    connect(fd, (struct sockaddr *)&to, sizeof(to));
    for (int i = 0; i < 3; i++) {
        ldns_pkt *q = NULL;
        uint8_t *wire = NULL;
        size_t len = 0;
        char name[32];
        snprintf(name, sizeof(name), "q%d.limit.test", i);
        ldns_pkt_query_new_frm_str(&q, name, LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, LDNS_RD);
        ldns_pkt_set_id(q, (uint16_t)(100 + i));
        ldns_pkt2wire(&wire, q, &len);
        (void)!send(fd, wire, len, 0);
        free(wire);
        ldns_pkt_free(q);
    }
    int ids[3], rcodes[3];
    double at[3];
    for (int i = 0; i < 3; i++) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        ldns_pkt *r = NULL;
        ids[i] = rcodes[i] = -1;
        at[i] = now_s() - t0;
        if (n > 0 && ldns_wire2pkt(&r, buf, (size_t)n) == LDNS_STATUS_OK) {
            ids[i] = ldns_pkt_id(r);
            rcodes[i] = ldns_pkt_get_rcode(r);
            ldns_pkt_free(r);
        }
    }
    close(fd);
    ok(ids[0] == 102 && rcodes[0] == LDNS_RCODE_SERVFAIL && at[0] < 0.4,
       "dns limit: the third question at once: SERVFAIL at once (%.2f s)", at[0]);
    ok(rcodes[1] == LDNS_RCODE_SERVFAIL && rcodes[2] == LDNS_RCODE_SERVFAIL && at[1] > 0.4,
       "dns limit: the two in flight: SERVFAIL after the upstream timeout (%.2f s)", at[1]);
    struct logent l = last_log("dns", "q2.limit.test", mark);
    ok(!l.allowed && strcmp(l.rule, "too many questions in flight") == 0, "dns limit: logged (%s)",
       l.rule);
    l = last_log("dns", "q0.limit.test", mark);
    ok(!l.allowed && strcmp(l.rule, "upstream failed") == 0, "dns limit: timeout logged (%s)",
       l.rule);
}

static void proxy_checks(void)
{
    uint8_t hello[2048];
    char out[4096];
    size_t hl;
    int fd, mark = log_mark();
    struct logent l;
    double t0;

    /* SNI allowed, TCP to another address: the proxy dials the name */
    hl = make_client_hello(hello, "www.example.test", 4096);
    fd = dial(SB_A, A(198, 18, 7, 7), 443);
    ok(fd >= 0 && exchange(fd, hello, hl, hl, out, sizeof(out)) > 0,
       "proxy: SNI connection spliced");
    snprintf((char *)hello + 1500, 64, "srv 198.18.1.10 n=%zu", hl);
    is_str(out, (char *)hello + 1500, "proxy: the name's server got the whole ClientHello");
    close(fd);
    l = last_log("tcp", "www.example.test", mark);
    ok(l.allowed && l.addr == WEB && l.port == 443 && l.out == hl && l.in == strlen(out) &&
           strcmp(l.rule, "allow_out *.example.test") == 0,
       "proxy: logged with bytes each way (%s, %llu/%llu)", l.rule, (unsigned long long)l.out,
       (unsigned long long)l.in);

    /* the ClientHello split over records and sent in pieces */
    hl = make_client_hello(hello, "a.b.example.test", 9);
    fd = dial(SB_A, A(198, 18, 7, 7), 443);
    ok(fd >= 0 && exchange(fd, hello, hl, 13, out, sizeof(out)) > 0 &&
           strncmp(out, "srv 198.18.1.10 ", 16) == 0,
       "proxy: split ClientHello, in pieces: spliced (%s)", out);
    close(fd);

    /* Host */
    const char *req = "GET / HTTP/1.1\r\nHost: API.allowed.test.:80\r\n\r\n";
    fd = dial(SB_A, A(198, 18, 7, 7), 80);
    ok(fd >= 0 && exchange(fd, req, strlen(req), strlen(req), out, sizeof(out)) > 0 &&
           strncmp(out, "srv 198.18.1.10 ", 16) == 0,
       "proxy: Host allowed: spliced to the name's address (%s)", out);
    close(fd);
    is_int(srv_conns(WEB, 80), 1, "proxy: the web server on 80 saw it");

    req = "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n";
    fd = dial(SB_A, WEB, 80);
    ok(fd >= 0 && exchange(fd, req, strlen(req), strlen(req), out, sizeof(out)) > 0 &&
           strncmp(out, "HTTP/1.1 403 ", 13) == 0,
       "proxy: Host not allowed: 403");
    close(fd);
    is_int(srv_conns(WEB, 80), 1, "proxy: and nothing dialled");
    l = last_log("tcp", "evil.test", mark);
    ok(!l.allowed && strcmp(l.rule, "deny_out 0.0.0.0/0") == 0, "proxy: logged denied (%s)",
       l.rule);

    int before = srv_conns(WEB, 443);
    hl = make_client_hello(hello, "evil.test", 4096);
    fd = dial(SB_A, WEB, 443);
    ok(fd >= 0 && exchange(fd, hello, hl, hl, out, sizeof(out)) <= 0,
       "proxy: SNI not allowed: closed");
    close(fd);
    is_int(srv_conns(WEB, 443), before, "proxy: not even to the address asked");

    /* no SNI: the CIDR rules on the original destination */
    hl = make_client_hello(hello, NULL, 4096);
    fd = dial(SB_A, A(198, 18, 2, 5), 443);
    ok(fd >= 0 && exchange(fd, hello, hl, hl, out, sizeof(out)) > 0 &&
           strncmp(out, "srv 198.18.2.5 ", 15) == 0,
       "proxy: no SNI, destination in allow_out: spliced");
    close(fd);
    l = last_log("tcp", "", mark);
    ok(l.allowed && strcmp(l.rule, "allow_out 198.18.2.0/24") == 0, "proxy: logged (%s)", l.rule);
    fd = dial(SB_A, A(198, 18, 3, 5), 443);
    ok(fd >= 0 && exchange(fd, hello, hl, hl, out, sizeof(out)) <= 0,
       "proxy: no SNI, destination not allowed: closed");
    close(fd);
    is_int(srv_conns(A(198, 18, 3, 5), 443), 0, "proxy: never dialled");
    /* SSH on 443: not TLS, so no name: the CIDR rules */
    fd = dial(SB_A, A(198, 18, 2, 5), 443);
    ok(fd >= 0 && exchange(fd, "SSH-2.0-x\r\n", 11, 11, out, sizeof(out)) > 0 &&
           strncmp(out, "srv 198.18.2.5 n=11", 19) == 0,
       "proxy: SSH on 443 to an allowed CIDR: spliced");
    close(fd);
    /* a client that half-closes before its bytes hold a name: the CIDR rules, bytes passed on */
    fd = dial(SB_A, A(198, 18, 2, 5), 443);
    ok(fd >= 0 && exchange(fd, "\x16\x03", 2, 2, out, sizeof(out)) > 0 &&
           strcmp(out, "srv 198.18.2.5 n=2") == 0,
       "proxy: EOF before a name, allowed CIDR: spliced with the bytes (%s)", out);
    close(fd);
    /* an IP literal as Host to an always-denied address */
    req = "GET / HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n";
    fd = dial(SB_A, A(10, 0, 0, 1), 80);
    ok(fd >= 0 && exchange(fd, req, strlen(req), strlen(req), out, sizeof(out)) <= 0,
       "proxy: IP literal to 10.0.0.1: closed");
    close(fd);
    is_int(srv_conns(A(10, 0, 0, 1), 80), 0, "proxy: 10.0.0.1 never dialled");

    /* rebinding */
    hl = make_client_hello(hello, "rebind1.allowed.test", 4096);
    fd = dial(SB_A, WEB, 443);
    ok(fd >= 0 && exchange(fd, hello, hl, hl, out, sizeof(out)) <= 0,
       "proxy: allowed name resolving to 10.0.0.1: closed");
    close(fd);
    is_int(srv_conns(A(10, 0, 0, 1), 443), 0, "proxy: 10.0.0.1 never dialled");
    l = last_log("tcp", "rebind1.allowed.test", mark);
    ok(!l.allowed && strcmp(l.rule, "resolves into always-denied 10.0.0.0/8") == 0,
       "proxy: logged (%s)", l.rule);
    hl = make_client_hello(hello, "rebind2.allowed.test", 4096);
    fd = dial(SB_A, A(169, 254, 169, 254), 443);
    ok(fd >= 0 && exchange(fd, hello, hl, hl, out, sizeof(out)) > 0 &&
           strncmp(out, "srv 198.18.1.10 ", 16) == 0,
       "proxy: name resolving to 169.254.169.254 and a public address: the public one");
    close(fd);
    is_int(srv_conns(A(169, 254, 169, 254), 443), 0, "proxy: 169.254.169.254 never dialled");

    /* the extra deny list beats allow_out, for names and for addresses */
    hl = make_client_hello(hello, "extra2.allowed.test", 4096);
    fd = dial(SB_A, WEB, 443);
    ok(fd >= 0 && exchange(fd, hello, hl, hl, out, sizeof(out)) <= 0,
       "proxy: allowed name resolving into the extra deny list: closed");
    close(fd);
    l = last_log("tcp", "extra2.allowed.test", mark);
    ok(!l.allowed && strcmp(l.rule, "resolves into deny 198.18.9.0/24") == 0, "proxy: logged (%s)",
       l.rule);
    hl = make_client_hello(hello, NULL, 4096);
    fd = dial(SB_A, A(198, 18, 9, 9), 443);
    ok(fd >= 0 && exchange(fd, hello, hl, hl, out, sizeof(out)) <= 0,
       "proxy: no SNI to an address in allow_out and in the extra deny list: closed");
    close(fd);
    is_int(srv_conns(A(198, 18, 9, 9), 443), 0, "proxy: 198.18.9.9 never dialled");

    /* a client that never sends: decided at the timeout (300 ms here) by the CIDR rules */
    fd = dial(SB_A, A(198, 18, 3, 5), 443);
    t0 = now_s();
    ssize_t got = read_all(fd, out, sizeof(out));
    double waited = now_s() - t0;
    ok(got <= 0 && waited > 0.2 && waited < 3,
       "proxy: silent client closed after the timeout (%.2f s)", waited);
    close(fd);

    /* the per-sandbox cap (sb-d: 2) */
    int held[2];
    for (int i = 0; i < 2; i++) {
        held[i] = dial(SB_D, A(198, 18, 2, 5), 443);
        (void)!write(held[i], "x", 1);
    }
    usleep(200000);
    fd = dial(SB_D, A(198, 18, 2, 5), 443);
    ok(fd >= 0 && exchange(fd, "y", 1, 1, out, sizeof(out)) <= 0,
       "proxy: third connection over the cap closed");
    close(fd);
    l = last_log("tcp", "", mark);
    ok(!l.allowed && strcmp(l.rule, "max_connections 2") == 0 && strcmp(l.sandbox, "sb-d") == 0,
       "proxy: logged (%s)", l.rule);
    shutdown(held[0], SHUT_WR);
    ok(read_all(held[0], out, sizeof(out)) > 0 && strncmp(out, "srv 198.18.2.5 n=1", 18) == 0,
       "proxy: a held connection still works (%s)", out);
    close(held[0]);
    usleep(200000);
    fd = dial(SB_D, A(198, 18, 2, 5), 443);
    ok(fd >= 0 && exchange(fd, "z", 1, 1, out, sizeof(out)) > 0,
       "proxy: below the cap again: spliced");
    close(fd);
    close(held[1]);

    /* a large transfer both ways through the splice (backpressure) */
    size_t big = 8 << 20;
    char *blob = malloc(big);
    memset(blob, 'q', big);
    fd = dial(SB_D, A(198, 18, 2, 5), 443);
    snprintf(out, sizeof(out), "srv 198.18.2.5 n=%zu", big);
    char got_reply[128];
    ok(fd >= 0 && exchange(fd, blob, big, big, got_reply, sizeof(got_reply)) > 0 &&
           strcmp(got_reply, out) == 0,
       "proxy: 8 MiB spliced (%s)", got_reply);
    close(fd);
    free(blob);
}

static int child(bool bench, int seconds);

int main(int argc, char **argv)
{
    bool bench = argc > 1 && strcmp(argv[1], "bench") == 0;
    int seconds = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 5;
    pid_t pid;
    int status;

    if (geteuid() != 0) {
        printf("1..0 # SKIP needs root (a private network namespace)\n");
        return 0;
    }
    pid = fork();
    if (pid == 0) {
        int rc = child(bench, seconds);
        exit(rc); /* exit, not _exit: stdio flushed, LeakSanitizer runs */
    }
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) {
        printf("not ok - the namespace child died\n");
        return 1;
    }
    return WEXITSTATUS(status);
}

/* ---- bench: queries per second, the stub vs the upstream directly ---- */

static double qps(uint32_t src, uint32_t dst, uint16_t port, int seconds)
{
    ldns_pkt *q = NULL;
    uint8_t *wire = NULL, buf[4096];
    size_t len = 0;
    struct sockaddr_in me = sin_of(src, 0), to = sin_of(dst, port);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    const int window = 256;
    long answered = 0, sent = 0;
    double t0, end;

    ldns_pkt_query_new_frm_str(&q, "www.example.test", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, LDNS_RD);
    ldns_pkt2wire(&wire, q, &len);
    bind(fd, (struct sockaddr *)&me, sizeof(me));
    connect(fd, (struct sockaddr *)&to, sizeof(to));
    t0 = now_s();
    end = t0 + seconds;
    while (now_s() < end) {
        while (sent - answered < window) {
            wire[0] = (uint8_t)(sent >> 8);
            wire[1] = (uint8_t)sent;
            if (send(fd, wire, len, 0) < 0)
                break;
            sent++;
        }
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 100) == 0) {
            sent = answered; /* lost: refill the window */
            continue;
        }
        while (recv(fd, buf, sizeof(buf), 0) > 0)
            answered++;
    }
    double r = (double)answered / (now_s() - t0);
    close(fd);
    free(wire);
    ldns_pkt_free(q);
    return r;
}

static int child(bool bench, int seconds)
{
    struct wr_err err;
    pthread_t t;

    if (unshare(CLONE_NEWNET) < 0) {
        printf("1..0 # SKIP unshare(CLONE_NEWNET): %s\n", strerror(errno));
        return 0;
    }
    /* only lo: 198.18.0.0/15 local to it, and the two always-denied addresses of the tests */
    if (run("ip link set lo up") || run("ip route add local 198.18.0.0/15 dev lo") ||
        run("ip addr add 10.0.0.1/32 dev lo") || run("ip addr add 169.254.169.254/32 dev lo"))
        return 1;

    /* the upstream */
    struct sockaddr_in sa = sin_of(AUTH, 53);
    int one = 1;
    auth_udp = socket(AF_INET, SOCK_DGRAM, 0);
    auth_tcp = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(auth_tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(auth_udp, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        bind(auth_tcp, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(auth_tcp, 64) < 0) {
        perror("auth bind");
        return 1;
    }
    for (size_t i = 0; i < N_ZONE; i++)
        if (ldns_rr_new_frm_str(&zone_rr[i], zone[i], 0, NULL, NULL) != LDNS_STATUS_OK)
            return 1;
    pthread_create(&t, NULL, auth_thread, NULL);
    for (int i = 0; i < N_SRV; i++) {
        struct sockaddr_in s = sin_of(srvs[i].addr, srvs[i].port);
        srvs[i].fd = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(srvs[i].fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(srvs[i].fd, (struct sockaddr *)&s, sizeof(s)) < 0 || listen(srvs[i].fd, 64) < 0) {
            perror("srv bind");
            return 1;
        }
    }
    pthread_create(&t, NULL, srv_thread, NULL);

    /* the policies */
    pol_a.internet = true;
    const char *a_allow[] = {"*.example.test",       "api.allowed.test",
                             "rebind1.allowed.test", "rebind2.allowed.test",
                             "tc.allowed.test",      "extra.allowed.test",
                             "extra2.allowed.test",  "198.18.9.0/24",
                             "198.18.2.0/24",        "10.0.0.1"};
    for (size_t i = 0; i < sizeof(a_allow) / sizeof(a_allow[0]); i++)
        if (wr_net_policy_allow(&pol_a, a_allow[i], &err) < 0)
            return 1;
    if (wr_net_policy_deny(&pol_a, "0.0.0.0/0", &err) < 0 || wr_net_policy_check(&pol_a, &err) < 0)
        return 1;
    pol_b.internet = true;
    pol_c.internet = false;
    pol_d.internet = false;
    if (wr_net_policy_allow(&pol_d, "198.18.2.0/24", &err) < 0)
        return 1;

    /* the services; the first upstream answers nothing (a retry on the second) */
    struct wr_dns_upstream ups[2] = {{A(198, 18, 0, 9), 53}, {AUTH, 53}};
    struct wr_cidr4 extra = {A(198, 18, 9, 0), 24}; /* the operator's --net-deny */
    struct wr_dns_config dc = {
        .deny = &extra,
        .n_deny = 1,
        .upstreams = bench ? ups + 1 : ups,
        .n_upstreams = bench ? 1 : 2,
        .lookup = lookup,
        .log = logfn,
        .timeout_ms = 300,
        .max_inflight = 8192,
        .max_inflight_per = 1024,
    };
    uv_loop_init(&loop);
    if (wr_dns_start(&loop, &dc, &dns, &err) < 0) {
        printf("not ok - dns start: %s\n", err.msg);
        return 1;
    }
    /* a silent upstream: bound, never read */
    struct sockaddr_in ss = sin_of(A(198, 18, 0, 8), 53);
    int silent = socket(AF_INET, SOCK_DGRAM, 0);
    if (bind(silent, (struct sockaddr *)&ss, sizeof(ss)) < 0)
        return 1;
    struct wr_dns_upstream quiet_up = {A(198, 18, 0, 8), 53};
    struct wr_dns_config dc2 = {.upstreams = &quiet_up,
                                .n_upstreams = 1,
                                .lookup = lookup,
                                .log = logfn,
                                .timeout_ms = 500,
                                .attempts = 1,
                                .max_inflight_per = 2};
    if (wr_dns_start(&loop, &dc2, &dns2, &err) < 0) {
        printf("not ok - dns2 start: %s\n", err.msg);
        return 1;
    }
    struct wr_proxy_config pc = {.deny = &extra,
                                 .n_deny = 1,
                                 .lookup = lookup,
                                 .log = logfn,
                                 .dns = dns,
                                 .peek_timeout_ms = 300};
    if (wr_proxy_start(&loop, &pc, &px, &err) < 0) {
        printf("not ok - proxy start: %s\n", err.msg);
        return 1;
    }
    FILE *nft = popen("nft -f -", "w");
    if (nft == NULL)
        return 1;
    fprintf(nft,
            "table ip wrtest {\n chain out {\n  type nat hook output priority -100;\n"
            "  ip saddr { 198.18.0.2, 198.18.0.6 } tcp dport { 80, 443 } redirect to :%u\n }\n}\n",
            wr_proxy_port(px));
    if (pclose(nft) != 0) {
        printf("not ok - nft redirect rule\n");
        return 1;
    }
    uv_async_init(&loop, &stop_async, on_stop);
    pthread_create(&t, NULL, loop_thread, NULL);

    if (bench) {
        quiet_log = true;
        double up = qps(SB_A, AUTH, 53, seconds);
        double stub = qps(SB_A, AUTH, wr_dns_port(dns), seconds);
        double up2 = qps(SB_A, AUTH, 53, seconds);
        printf("upstream direct: %.0f qps\nstub (allow-list, forwarded): %.0f qps (%.0f%% of the "
               "upstream)\nupstream direct again: %.0f qps\n",
               up, stub, 100 * stub / ((up + up2) / 2), up2);
    } else {
        ok(wr_dns_port(dns) != 0 && wr_proxy_port(px) != 0, "ports picked (%u, %u)",
           wr_dns_port(dns), wr_proxy_port(px));
        dns_checks();
        limit_checks();
        proxy_checks();
    }
    uv_async_send(&stop_async);
    pthread_join(t, NULL);
    uv_loop_close(&loop);
    wr_net_policy_fini(&pol_a);
    wr_net_policy_fini(&pol_d);
    /* the namespace, with its nft table and addresses, goes with this process */
    return bench ? 0 : done();
}
