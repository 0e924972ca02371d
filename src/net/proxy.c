/* SPDX-License-Identifier: Apache-2.0 */
/* One struct conn per accepted connection: the client and upstream TCP handles and a timer are
 * embedded; the struct is freed once every handle it initialised has closed. */
#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "../util/xalloc.h"
#include "count.h"
#include "httphost.h"
#include "tls.h"

#define READ_SIZE  65536
#define HIGH_WATER (256 * 1024) /* queued for one side: stop reading the other */
#define LOW_WATER  (64 * 1024)

enum state { ST_PEEK, ST_RESOLVE, ST_CONNECT, ST_SPLICE, ST_CLOSING };

struct wr_proxy;

struct conn {
    struct wr_proxy *px;
    struct conn *prev, *next;
    enum state st;
    uv_tcp_t c, u;
    uv_timer_t timer;
    uv_connect_t creq;
    unsigned handles; /* initialised and not yet closed */
    bool u_init, counted;
    uint32_t saddr, odst, dial;
    uint16_t oport;
    char *sandbox_id;
    char name[WR_NET_NAME_BUF];
    bool has_name, allowed;
    char rule[WR_NET_RULE_BUF + 64];
    uint8_t *peek;
    size_t peek_len;
    struct wr_dns_req *dreq;
    uint64_t bytes_out, bytes_in;
    size_t c_queued, u_queued; /* bytes waiting to be written to that side */
    bool c_reading, u_reading, c_eof, u_eof, c_shut, u_shut;
};

struct wr_proxy {
    uv_loop_t *loop;
    struct wr_proxy_config cfg;
    struct wr_cidr4 *deny;
    uv_tcp_t srv;
    bool stopped, srv_closed;
    uint16_t port;
    struct conn *head;
    struct wr_net_counts per;
    struct wr_proxy_stats stats;
};

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void px_maybe_free(struct wr_proxy *px)
{
    if (px->stopped && px->srv_closed && px->head == NULL) {
        wr_net_count_fini(&px->per);
        free(px->deny);
        free(px);
    }
}

static void handle_closed(uv_handle_t *h)
{
    struct conn *cn = h->data;

    if (--cn->handles > 0)
        return;
    struct wr_proxy *px = cn->px;
    if (cn->prev != NULL)
        cn->prev->next = cn->next;
    else
        px->head = cn->next;
    if (cn->next != NULL)
        cn->next->prev = cn->prev;
    free(cn->sandbox_id);
    free(cn->peek);
    free(cn);
    px_maybe_free(px);
}

static void conn_close(struct conn *cn)
{
    struct wr_proxy *px = cn->px;

    if (cn->st == ST_CLOSING)
        return;
    cn->st = ST_CLOSING;
    if (cn->dreq != NULL) {
        wr_dns_cancel(cn->dreq);
        cn->dreq = NULL;
    }
    if (cn->counted)
        wr_net_count_dec(&px->per, cn->saddr);
    px->stats.active--;
    if (px->cfg.log != NULL && cn->sandbox_id != NULL) {
        struct wr_netlog_entry e = {
            .time_ms = now_ms(),
            .sandbox_id = cn->sandbox_id,
            .proto = "tcp",
            .addr = cn->dial ? cn->dial : cn->odst,
            .port = cn->oport,
            .name = cn->has_name ? cn->name : NULL,
            .bytes_out = cn->bytes_out,
            .bytes_in = cn->bytes_in,
            .allowed = cn->allowed,
            .rule = cn->rule,
        };
        px->cfg.log(px->cfg.log_arg, &e);
    }
    uv_close((uv_handle_t *)&cn->c, handle_closed);
    uv_close((uv_handle_t *)&cn->timer, handle_closed);
    if (cn->u_init)
        uv_close((uv_handle_t *)&cn->u, handle_closed);
}

/* Close, logged as refused by prefix + what (what may be cn->rule). */
static void refuse(struct conn *cn, const char *prefix, const char *what)
{
    char why[sizeof(cn->rule)];

    snprintf(why, sizeof(why), "%s%s", prefix, what);
    memcpy(cn->rule, why, sizeof(why));
    cn->allowed = false;
    cn->px->stats.refused++;
    conn_close(cn);
}

/* ---- splice ---- */

struct wbuf {
    uv_write_t req;
    struct conn *cn;
    bool to_upstream;
    size_t len;
    char data[];
};

static void splice_read_start(struct conn *cn, bool client);

static void written(uv_write_t *req, int status)
{
    struct wbuf *w = (struct wbuf *)req;
    struct conn *cn = w->cn;

    if (status == UV_ECANCELED || cn->st == ST_CLOSING) {
        free(w);
        return;
    }
    bool up = w->to_upstream;
    if (up)
        cn->u_queued -= w->len;
    else
        cn->c_queued -= w->len;
    free(w);
    if (status < 0) {
        conn_close(cn);
        return;
    }
    /* backpressure released: read the side that feeds this one again */
    if (cn->st == ST_SPLICE && (up ? (cn->u_queued < LOW_WATER && !cn->c_reading && !cn->c_eof)
                                   : (cn->c_queued < LOW_WATER && !cn->u_reading && !cn->u_eof)))
        splice_read_start(cn, up);
}

static void send_to(struct conn *cn, bool to_upstream, struct wbuf *w)
{
    uv_buf_t b = uv_buf_init(w->data, (unsigned)w->len);

    w->cn = cn;
    w->to_upstream = to_upstream;
    if (to_upstream)
        cn->u_queued += w->len;
    else
        cn->c_queued += w->len;
    if (uv_write(&w->req, (uv_stream_t *)(to_upstream ? &cn->u : &cn->c), &b, 1, written) < 0) {
        free(w);
        conn_close(cn);
    }
}

static void splice_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct wbuf *w = malloc(sizeof(*w) + READ_SIZE);

    *buf = w ? uv_buf_init(w->data, READ_SIZE) : uv_buf_init(NULL, 0);
}

static void shut_done(uv_shutdown_t *req, int status)
{
    struct conn *cn = req->data;
    bool upstream = req->handle == (uv_stream_t *)&cn->u;

    free(req);
    if (status == UV_ECANCELED || cn->st == ST_CLOSING)
        return;
    if (status < 0) {
        conn_close(cn);
        return;
    }
    if (upstream)
        cn->u_shut = true;
    else
        cn->c_shut = true;
    if (cn->c_shut && cn->u_shut)
        conn_close(cn);
}

static void splice_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *cn = s->data;
    bool from_client = s == (uv_stream_t *)&cn->c;
    struct wbuf *w = buf->base ? (struct wbuf *)(buf->base - offsetof(struct wbuf, data)) : NULL;

    if (nread == 0 || cn->st == ST_CLOSING) {
        free(w);
        return;
    }
    if (nread < 0) {
        free(w);
        if (nread != UV_EOF) {
            conn_close(cn);
            return;
        }
        /* half-close: pass the EOF on once what is queued is written */
        uv_read_stop(s);
        uv_shutdown_t *req = xmalloc(sizeof(*req));
        req->data = cn;
        if (from_client) {
            cn->c_eof = true;
            cn->c_reading = false;
        } else {
            cn->u_eof = true;
            cn->u_reading = false;
        }
        if (uv_shutdown(req, (uv_stream_t *)(from_client ? &cn->u : &cn->c), shut_done) < 0) {
            free(req);
            conn_close(cn);
        }
        return;
    }
    w->len = (size_t)nread;
    if (from_client)
        cn->bytes_out += w->len;
    else
        cn->bytes_in += w->len;
    send_to(cn, from_client, w);
    if (cn->st == ST_CLOSING)
        return;
    if (from_client ? cn->u_queued > HIGH_WATER : cn->c_queued > HIGH_WATER) {
        uv_read_stop(s);
        if (from_client)
            cn->c_reading = false;
        else
            cn->u_reading = false;
    }
}

static void splice_read_start(struct conn *cn, bool client)
{
    uv_stream_t *s = (uv_stream_t *)(client ? &cn->c : &cn->u);

    if (uv_read_start(s, splice_alloc, splice_read) < 0) {
        conn_close(cn);
        return;
    }
    if (client)
        cn->c_reading = true;
    else
        cn->u_reading = true;
}

/* ---- dial ---- */

static void connected(uv_connect_t *req, int status)
{
    struct conn *cn = req->data;

    if (status == UV_ECANCELED || cn->st == ST_CLOSING)
        return;
    uv_timer_stop(&cn->timer);
    if (status < 0) {
        char a[WR_INET4_STRLEN];
        wr_inet4_format(cn->dial, a);
        snprintf(cn->rule + strlen(cn->rule), sizeof(cn->rule) - strlen(cn->rule),
                 "; connect %s: %s", a, uv_strerror(status));
        conn_close(cn);
        return;
    }
    cn->st = ST_SPLICE;
    cn->px->stats.spliced++;
    if (cn->peek_len > 0) {
        struct wbuf *w = xmalloc(sizeof(*w) + cn->peek_len);
        memcpy(w->data, cn->peek, cn->peek_len);
        w->len = cn->peek_len;
        cn->bytes_out += cn->peek_len;
        send_to(cn, true, w);
        if (cn->st == ST_CLOSING)
            return;
    }
    free(cn->peek);
    cn->peek = NULL;
    splice_read_start(cn, true);
    if (cn->st != ST_CLOSING)
        splice_read_start(cn, false);
}

static void connect_timeout(uv_timer_t *t)
{
    struct conn *cn = t->data;

    snprintf(cn->rule + strlen(cn->rule), sizeof(cn->rule) - strlen(cn->rule),
             "; connect timed out");
    conn_close(cn);
}

/* Dial addr at the original port. The one place that connects: it checks the deny lists again. */
static void dial(struct conn *cn, uint32_t addr)
{
    struct wr_proxy *px = cn->px;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    char rule[WR_NET_RULE_BUF];
    int r;

    if (wr_net_deny4_match(px->deny, px->cfg.n_deny, addr, rule)) {
        cn->dial = addr;
        refuse(cn, "", rule);
        return;
    }
    cn->dial = addr;
    cn->allowed = true;
    cn->st = ST_CONNECT;
    uv_tcp_init(px->loop, &cn->u);
    cn->u.data = cn;
    cn->u_init = true;
    cn->handles++;
    sa.sin_addr.s_addr = htonl(addr);
    sa.sin_port = htons(cn->oport);
    cn->creq.data = cn;
    (void)uv_tcp_nodelay(&cn->u, 1);
    if ((r = uv_tcp_connect(&cn->creq, &cn->u, (const struct sockaddr *)&sa, connected)) < 0) {
        snprintf(cn->rule + strlen(cn->rule), sizeof(cn->rule) - strlen(cn->rule), "; connect: %s",
                 uv_strerror(r));
        conn_close(cn);
        return;
    }
    uv_timer_start(&cn->timer, connect_timeout, px->cfg.connect_timeout_ms, 0);
}

static void resolved(void *arg, enum wr_dns_status status, const uint32_t *addrs, size_t n)
{
    struct conn *cn = arg;
    struct wr_proxy *px = cn->px;
    char first_denied[WR_NET_RULE_BUF] = "";

    cn->dreq = NULL;
    if (status != WR_DNS_OK) {
        refuse(cn, "dns: ",
               status == WR_DNS_NXDOMAIN ? "no such name"
               : status == WR_DNS_LIMIT  ? "too many questions"
                                         : "failed");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char rule[WR_NET_RULE_BUF];
        if (!wr_net_deny4_match(px->deny, px->cfg.n_deny, addrs[i], rule)) {
            dial(cn, addrs[i]);
            return;
        }
        if (first_denied[0] == '\0') {
            cn->dial = addrs[i];
            snprintf(first_denied, sizeof(first_denied), "%s", rule);
        }
    }
    if (n == 0)
        refuse(cn, "", "dns: no address");
    else
        refuse(cn, "resolves into ", first_denied);
}

/* ---- the decision ---- */

struct forbid {
    uv_write_t req;
    struct conn *cn;
    char text[512];
};

static void forbid_written(uv_write_t *req, int status)
{
    struct forbid *f = (struct forbid *)req;
    struct conn *cn = f->cn;

    free(f);
    conn_close(cn);
}

/* A name the policy refuses on port 80: a short 403, then close. */
static void forbid_http(struct conn *cn)
{
    struct forbid *f = xmalloc(sizeof(*f));
    char body[WR_NET_NAME_BUF + 64];
    int bl = snprintf(body, sizeof(body), "warren: egress to %s is not allowed\n", cn->name);
    int n = snprintf(f->text, sizeof(f->text),
                     "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: "
                     "%d\r\nConnection: close\r\n\r\n%s",
                     bl, body);
    uv_buf_t b = uv_buf_init(f->text, (unsigned)n);

    f->cn = cn;
    cn->px->stats.refused++;
    cn->allowed = false;
    if (uv_write(&f->req, (uv_stream_t *)&cn->c, &b, 1, forbid_written) < 0) {
        free(f);
        conn_close(cn);
    }
}

/* What was read is all there is to judge by (found == false: no name). */
static void decide(struct conn *cn, bool found)
{
    struct wr_proxy *px = cn->px;
    struct wr_net_peer peer = {0};
    uint32_t lit;

    uv_read_stop((uv_stream_t *)&cn->c);
    uv_timer_stop(&cn->timer);
    /* the policy as it is now (it may have changed since the accept) */
    if (!px->cfg.lookup(px->cfg.lookup_arg, cn->saddr, &peer)) {
        refuse(cn, "", "sandbox gone");
        return;
    }
    if (found && wr_inet4_parse(cn->name, &lit))
        found = false; /* an IP literal is no name: the CIDR rules judge the destination */
    if (found) {
        cn->has_name = true;
        if (!wr_net_policy_rule_for_name(peer.policy, cn->name, cn->rule)) {
            char rule[WR_NET_RULE_BUF];
            /* E2B's order: an allowed name, or an allowed destination */
            if (!wr_net_deny4_match(px->deny, px->cfg.n_deny, cn->odst, NULL) &&
                wr_net_policy_rule_for_addr(peer.policy, cn->odst, rule)) {
                snprintf(cn->rule, sizeof(cn->rule), "%s", rule);
                dial(cn, cn->odst);
                return;
            }
            if (cn->oport == 80) {
                cn->st = ST_RESOLVE; /* no more reads */
                forbid_http(cn);
            } else {
                refuse(cn, "", cn->rule);
            }
            return;
        }
        cn->st = ST_RESOLVE;
        cn->dreq = wr_dns_resolve(px->cfg.dns, cn->name, resolved, cn);
        if (cn->dreq == NULL)
            refuse(cn, "", "dns: not a host name");
        return;
    }
    char rule[WR_NET_RULE_BUF];
    if (wr_net_deny4_match(px->deny, px->cfg.n_deny, cn->odst, rule)) {
        refuse(cn, "", rule);
        return;
    }
    if (!wr_net_policy_rule_for_addr(peer.policy, cn->odst, rule)) {
        refuse(cn, "", rule);
        return;
    }
    snprintf(cn->rule, sizeof(cn->rule), "%s", rule);
    dial(cn, cn->odst);
}

static void peek_timeout(uv_timer_t *t)
{
    struct conn *cn = t->data;

    cn->px->stats.timeouts++;
    decide(cn, false);
}

static void peek_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct conn *cn = h->data;

    *buf = uv_buf_init((char *)cn->peek + cn->peek_len, (unsigned)(WR_TLS_PEEK_MAX - cn->peek_len));
}

static void peek_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *cn = s->data;
    bool done = false, found = false;

    if (nread == 0 || cn->st != ST_PEEK)
        return;
    if (nread == UV_EOF) {
        decide(cn, false); /* all it sent holds no name: the CIDR rules (the EOF comes again) */
        return;
    }
    if (nread < 0) {
        refuse(cn, "", uv_strerror((int)nread));
        return;
    }
    cn->peek_len += (size_t)nread;
    if (cn->oport == 443) {
        enum wr_sni_result r = wr_tls_sni(cn->peek, cn->peek_len, cn->name);
        done = r != WR_SNI_MORE;
        found = r == WR_SNI_NAME;
    } else {
        enum wr_host_result r = wr_http_host(cn->peek, cn->peek_len, cn->name);
        done = r != WR_HOST_MORE;
        found = r == WR_HOST_NAME;
    }
    if (!done && cn->peek_len >= WR_TLS_PEEK_MAX)
        done = true;
    if (done)
        decide(cn, found);
}

static void accepted(uv_stream_t *srv, int status)
{
    struct wr_proxy *px = srv->data;
    struct conn *cn;
    struct sockaddr_storage ss;
    struct sockaddr_in od;
    socklen_t ol = sizeof(od);
    int sl = sizeof(ss), fd = -1;
    struct wr_net_peer peer = {0};

    if (status < 0)
        return;
    cn = xcalloc(1, sizeof(*cn));
    cn->px = px;
    cn->st = ST_PEEK;
    uv_tcp_init(px->loop, &cn->c);
    uv_timer_init(px->loop, &cn->timer);
    cn->c.data = cn;
    cn->timer.data = cn;
    cn->handles = 2;
    cn->next = px->head;
    if (px->head != NULL)
        px->head->prev = cn;
    px->head = cn;
    px->stats.active++;
    snprintf(cn->rule, sizeof(cn->rule), "refused");
    if (uv_accept(srv, (uv_stream_t *)&cn->c) < 0) {
        conn_close(cn);
        return;
    }
    px->stats.accepted++;
    if (uv_tcp_getpeername(&cn->c, (struct sockaddr *)&ss, &sl) < 0 || ss.ss_family != AF_INET ||
        uv_fileno((uv_handle_t *)&cn->c, &fd) < 0) {
        conn_close(cn);
        return;
    }
    cn->saddr = ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr);
    if (!px->cfg.lookup(px->cfg.lookup_arg, cn->saddr, &peer)) {
        px->stats.refused++;
        conn_close(cn); /* nobody's: nothing to log */
        return;
    }
    cn->sandbox_id = xstrdup(peer.sandbox_id ? peer.sandbox_id : "");
    /* where the sandbox meant to go; a connection the kernel did not redirect has none, and
     * dialling the proxy's own address would loop */
    if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &od, &ol) < 0 || od.sin_family != AF_INET) {
        refuse(cn, "", "not redirected (no original destination)");
        return;
    }
    cn->odst = ntohl(od.sin_addr.s_addr);
    cn->oport = ntohs(od.sin_port);
    if (px->stats.active > px->cfg.max_total) {
        refuse(cn, "", "proxy connection limit");
        return;
    }
    cn->counted = true;
    uint32_t have = wr_net_count_inc(&px->per, cn->saddr);
    if (peer.max_connections > 0 && have > peer.max_connections) {
        char cap[32];
        snprintf(cap, sizeof(cap), "%u", peer.max_connections);
        refuse(cn, "max_connections ", cap);
        return;
    }
    if (cn->oport != 80 && cn->oport != 443) {
        decide(cn, false); /* not a port the proxy reads names on: the CIDR rules */
        return;
    }
    cn->peek = xmalloc(WR_TLS_PEEK_MAX);
    if (uv_read_start((uv_stream_t *)&cn->c, peek_alloc, peek_read) < 0) {
        conn_close(cn);
        return;
    }
    uv_timer_start(&cn->timer, peek_timeout, px->cfg.peek_timeout_ms, 0);
}

static void srv_closed(uv_handle_t *h)
{
    struct wr_proxy *px = h->data;

    px->srv_closed = true;
    px_maybe_free(px);
}

int wr_proxy_start(uv_loop_t *loop, const struct wr_proxy_config *cfg, struct wr_proxy **out,
                   struct wr_err *err)
{
    struct wr_proxy *px;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    struct sockaddr_storage ss;
    int sl = sizeof(ss), r;

    if (cfg->lookup == NULL || cfg->dns == NULL)
        return wr_err_set(err, WR_EINVAL, 0, "egress proxy: no lookup function or resolver");
    px = xcalloc(1, sizeof(*px));
    px->loop = loop;
    px->cfg = *cfg;
    if (cfg->n_deny > 0) {
        px->deny = xmalloc(cfg->n_deny * sizeof(*px->deny));
        memcpy(px->deny, cfg->deny, cfg->n_deny * sizeof(*px->deny));
    }
    px->cfg.deny = px->deny;
    if (px->cfg.peek_timeout_ms == 0)
        px->cfg.peek_timeout_ms = 10000;
    if (px->cfg.connect_timeout_ms == 0)
        px->cfg.connect_timeout_ms = 10000;
    if (px->cfg.max_total == 0)
        px->cfg.max_total = 65536;
    uv_tcp_init(loop, &px->srv);
    px->srv.data = px;
    sa.sin_addr.s_addr = htonl(cfg->bind_addr);
    sa.sin_port = htons(cfg->port);
    if ((r = uv_tcp_bind(&px->srv, (const struct sockaddr *)&sa, 0)) < 0 ||
        (r = uv_listen((uv_stream_t *)&px->srv, 1024, accepted)) < 0 ||
        (r = uv_tcp_getsockname(&px->srv, (struct sockaddr *)&ss, &sl)) < 0) {
        wr_err_set(err, WR_ESYS, -r, "egress proxy: listen on port %u", cfg->port);
        px->stopped = true;
        uv_close((uv_handle_t *)&px->srv, srv_closed); /* frees px */
        return -1;
    }
    px->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *out = px;
    return 0;
}

uint16_t wr_proxy_port(const struct wr_proxy *px)
{
    return px->port;
}

void wr_proxy_stop(struct wr_proxy *px)
{
    if (px == NULL || px->stopped)
        return;
    px->stopped = true;
    for (struct conn *cn = px->head; cn != NULL; cn = cn->next)
        if (cn->st != ST_CLOSING) {
            snprintf(cn->rule + strlen(cn->rule), sizeof(cn->rule) - strlen(cn->rule),
                     "; proxy stopped");
            conn_close(cn);
        }
    uv_close((uv_handle_t *)&px->srv, srv_closed);
}

void wr_proxy_get_stats(const struct wr_proxy *px, struct wr_proxy_stats *out)
{
    *out = px->stats;
}
