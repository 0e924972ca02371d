/* SPDX-License-Identifier: Apache-2.0 */
/* Webhooks (webhooks.h): the registrations, the deliveries' queue in the state database, and
 * the sender: a thread running a libcurl multi handle. The loop thread leases due deliveries
 * from the store, signs them and hands them to the thread; the thread hands each finished
 * attempt back through an async handle, and the loop records its outcome and the next attempt. */
#include "webhooks.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "../util/b64.h"
#include "../util/cleanup.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "core_int.h"
#include "events.h"

#define INFLIGHT_MAX   64
#define DUE_SCAN       256 /* webhooks with due rows read per scan */
#define LEASE_SLACK_MS 30000
#define RESCAN_MS      60000
#define PRUNE_MS       (3600 * 1000)
#define BACKOFF_MAX_MS (3600 * 1000)

struct allow {
    int family; /* AF_INET, AF_INET6, or 0: a host name */
    uint8_t addr[16];
    unsigned len;
    char *host;
};

/* One attempt, from its lease to its outcome. The thread owns it between submit and done. */
struct job {
    struct job *next;  /* in the submit or done queue */
    struct job *lnext; /* in wh->all: every job not yet finished on the loop */
    struct wr_webhooks *wh;
    struct wr_delivery_rec d;
    bool host_allowed;
    CURL *easy;
    struct curl_slist *hdrs;
    long status;
    bool refused; /* a connect to a forbidden address */
    char errbuf[CURL_ERROR_SIZE];
};

struct wr_webhooks {
    struct wr_manager *m;
    struct allow allow[WR_WEBHOOK_ALLOW_MAX];
    size_t n_allow;
    uint32_t attempts, backoff_ms, timeout_ms;
    uv_timer_t *timer, *prune;
    uv_async_t *async;
    unsigned inflight;
    struct job *all;
    /* Shared with the thread, under mu. */
    pthread_t thread;
    bool thread_up;
    pthread_mutex_t mu;
    struct job *submitted, *done;
    bool stop;
    CURLM *multi;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- the operator's allow list ------------------------------------------------------------ */

static int allow_parse(const char *s, struct allow *a, struct wr_err *err)
{
    char buf[256], *slash;
    unsigned long len;
    char *end;

    memset(a, 0, sizeof(*a));
    if (*s == '\0' || strlen(s) >= sizeof(buf))
        return wr_err_set(err, WR_EINVAL, 0, "`%s`: not a CIDR or host name", s);
    snprintf(buf, sizeof(buf), "%s", s);
    slash = strchr(buf, '/');
    if (slash != NULL)
        *slash = '\0';
    if (inet_pton(AF_INET, buf, a->addr) == 1) {
        a->family = AF_INET;
        a->len = 32;
    } else if (inet_pton(AF_INET6, buf, a->addr) == 1) {
        a->family = AF_INET6;
        a->len = 128;
    } else if (slash == NULL && strspn(buf, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789.-") == strlen(buf)) {
        a->host = xstrdup(buf);
        return 0;
    } else {
        return wr_err_set(err, WR_EINVAL, 0, "`%s`: not a CIDR or host name", s);
    }
    if (slash != NULL) {
        len = strtoul(slash + 1, &end, 10);
        if (slash[1] == '\0' || *end != '\0' || len > a->len)
            return wr_err_set(err, WR_EINVAL, 0, "`%s`: bad prefix length", s);
        a->len = (unsigned)len;
    }
    return 0;
}

int wr_webhooks_allow_check(const char *s, struct wr_err *err)
{
    struct allow a;

    if (allow_parse(s, &a, err) < 0)
        return -1;
    free(a.host);
    return 0;
}

static bool prefix_match(const uint8_t *a, const uint8_t *b, unsigned len)
{
    unsigned bytes = len / 8, bits = len % 8;

    if (memcmp(a, b, bytes) != 0)
        return false;
    return bits == 0 || ((a[bytes] ^ b[bytes]) & (uint8_t)(0xff << (8 - bits))) == 0;
}

/* Addresses that are not the public internet: loopback, RFC 1918, link-local, CGNAT, the
 * benchmarking range, multicast, reserved and unspecified, ULA, and the v4 forms in v6. */
static bool special4(uint32_t a)
{
    return (a >> 24) == 0 || (a >> 24) == 10 || (a >> 24) == 127 || (a >> 20) == 0xac1 ||
           (a >> 16) == 0xc0a8 || (a >> 16) == 0xa9fe || (a >> 22) == 0x191 ||
           (a >> 17) == (0xc612 >> 1) || (a >> 28) >= 0xe || (a >> 8) == 0xc00000 ||
           (a >> 8) == 0xc00002 || (a >> 8) == 0xc63364 || (a >> 8) == 0xcb0071;
}

static bool addr_allowed(const struct wr_webhooks *wh, int family, const uint8_t *addr)
{
    uint8_t v4[4];

    if (family == AF_INET6 && IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)(const void *)addr)) {
        memcpy(v4, addr + 12, 4);
        family = AF_INET;
        addr = v4;
    }
    for (size_t i = 0; i < wh->n_allow; i++)
        if (wh->allow[i].family == family &&
            prefix_match(wh->allow[i].addr, addr, wh->allow[i].len))
            return true;
    if (family == AF_INET) {
        uint32_t a =
            (uint32_t)addr[0] << 24 | (uint32_t)addr[1] << 16 | (uint32_t)addr[2] << 8 | addr[3];
        return !special4(a);
    }
    if (family == AF_INET6) {
        const struct in6_addr *a = (const void *)addr;
        return !(IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_UNSPECIFIED(a) ||
                 IN6_IS_ADDR_LINKLOCAL(a) || IN6_IS_ADDR_SITELOCAL(a) || IN6_IS_ADDR_MULTICAST(a) ||
                 (addr[0] & 0xfe) == 0xfc ||
                 (addr[0] == 0x20 && addr[1] == 0x01 && addr[2] == 0x0d &&
                  addr[3] == 0xb8) /* documentation */);
    }
    return false;
}

static bool host_allowed(const struct wr_webhooks *wh, const char *host)
{
    for (size_t i = 0; i < wh->n_allow; i++)
        if (wh->allow[i].host != NULL && strcasecmp(wh->allow[i].host, host) == 0)
            return true;
    return false;
}

/* The url's scheme and host are acceptable: http(s), and a literal address or localhost only if
 * allowed. *allowed_host: the host name is on the allow list. */
static int url_check(const struct wr_webhooks *wh, const char *url, bool *allowed_host,
                     struct wr_err *err)
{
    CURLU *u;
    char *scheme = NULL, *host = NULL, *user = NULL;
    uint8_t addr[16];
    char bare[256];
    size_t n;
    int rc = 0;

    *allowed_host = false;
    if (strlen(url) > WR_WEBHOOK_URL_MAX)
        return wr_err_set(err, WR_EINVAL, 0, "`url` is longer than %d bytes", WR_WEBHOOK_URL_MAX);
    u = curl_url();
    if (u == NULL)
        return wr_err_set(err, WR_EINTERNAL, 0, "out of memory");
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        rc = wr_err_set(err, WR_EINVAL, 0, "`url` is not a URL");
        goto out;
    }
    if (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0) {
        rc = wr_err_set(err, WR_EINVAL, 0, "`url` must be http:// or https://");
        goto out;
    }
    if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK) {
        rc = wr_err_set(err, WR_EINVAL, 0, "`url` may not carry credentials");
        goto out;
    }
    n = strlen(host);
    if (n >= sizeof(bare)) {
        rc = wr_err_set(err, WR_EINVAL, 0, "`url` has too long a host");
        goto out;
    }
    if (host[0] == '[' && n > 2 && host[n - 1] == ']') {
        memcpy(bare, host + 1, n - 2);
        bare[n - 2] = '\0';
    } else {
        memcpy(bare, host, n + 1);
    }
    if (strchr(bare, '%') != NULL) { /* a v6 zone */
        rc = wr_err_set(err, WR_EINVAL, 0, "`url` may not name an interface");
        goto out;
    }
    if (inet_pton(AF_INET, bare, addr) == 1) {
        if (!addr_allowed(wh, AF_INET, addr))
            rc = wr_err_set(err, WR_EINVAL, 0,
                            "`url`: %s is not an address the operator lets webhooks reach", bare);
    } else if (inet_pton(AF_INET6, bare, addr) == 1) {
        if (!addr_allowed(wh, AF_INET6, addr))
            rc = wr_err_set(err, WR_EINVAL, 0,
                            "`url`: %s is not an address the operator lets webhooks reach", bare);
    } else if (host_allowed(wh, bare)) {
        *allowed_host = true;
    } else {
        size_t bn = strlen(bare);
        if (strcasecmp(bare, "localhost") == 0 ||
            (bn > 10 && strcasecmp(bare + bn - 10, ".localhost") == 0) || strchr(bare, '.') == NULL)
            rc = wr_err_set(err, WR_EINVAL, 0,
                            "`url`: %s is not a host the operator lets webhooks reach", bare);
    }
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(user);
    curl_url_cleanup(u);
    return rc;
}

/* ---- ids, secrets, signatures --------------------------------------------------------------- */

static void random_bytes(uint8_t *p, size_t n)
{
    size_t got = 0;

    while (got < n) {
        ssize_t r = getrandom(p + got, n - got, 0);
        if (r > 0)
            got += (size_t)r;
    }
}

static void uuid4(char out[37])
{
    uint8_t b[16];

    random_bytes(b, sizeof(b));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

static char *new_secret(void)
{
    uint8_t b[24];
    char *s = xmalloc(6 + 2 * sizeof(b) + 1);

    random_bytes(b, sizeof(b));
    memcpy(s, "whsec_", 6);
    for (size_t i = 0; i < sizeof(b); i++)
        snprintf(s + 6 + 2 * i, 3, "%02x", b[i]);
    return s;
}

/* The headers of one attempt: both signatures over body at unix time t. */
static struct curl_slist *sign(const struct job *j, int64_t t)
{
    const struct wr_delivery_rec *d = &j->d;
    unsigned char mac[EVP_MAX_MD_SIZE], digest[EVP_MAX_MD_SIZE];
    unsigned mac_len = 0, dlen = 0;
    char ts[24], hex[2 * EVP_MAX_MD_SIZE + 1], b64[2 * EVP_MAX_MD_SIZE], line[512];
    struct curl_slist *h = NULL;
    size_t blen = strlen(d->body), n;
    EVP_MD_CTX *ctx;
    char *msg;

    snprintf(ts, sizeof(ts), "%lld", (long long)t);
    n = strlen(ts) + 1;
    msg = xmalloc(n + blen + 1);
    snprintf(msg, n + 1, "%s.", ts);
    memcpy(msg + n, d->body, blen + 1);
    HMAC(EVP_sha256(), d->secret, (int)strlen(d->secret), (const unsigned char *)msg, n + blen, mac,
         &mac_len);
    free(msg);
    for (unsigned i = 0; i < mac_len; i++)
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    /* E2B: SHA-256 of the secret then the body, base64 without padding. */
    ctx = EVP_MD_CTX_new();
    if (ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
        EVP_DigestUpdate(ctx, d->secret, strlen(d->secret)) == 1 &&
        EVP_DigestUpdate(ctx, d->body, blen) == 1 && EVP_DigestFinal_ex(ctx, digest, &dlen) == 1) {
        n = wr_b64_encode(digest, dlen, b64);
        while (n > 0 && b64[n - 1] == '=')
            n--;
        b64[n] = '\0';
    } else {
        b64[0] = '\0';
    }
    EVP_MD_CTX_free(ctx);

    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    snprintf(line, sizeof(line), "Warren-Signature: t=%s,v1=%s", ts, hex);
    h = curl_slist_append(h, line);
    snprintf(line, sizeof(line), "Warren-Webhook-Id: %s", d->webhook_id);
    h = curl_slist_append(h, line);
    snprintf(line, sizeof(line), "Warren-Delivery-Id: %s", d->uuid);
    h = curl_slist_append(h, line);
    snprintf(line, sizeof(line), "Warren-Event-Type: %s", d->type);
    h = curl_slist_append(h, line);
    snprintf(line, sizeof(line), "Warren-Attempt: %lld", (long long)d->attempts + 1);
    h = curl_slist_append(h, line);
    snprintf(line, sizeof(line), "e2b-webhook-id: %s", d->webhook_id);
    h = curl_slist_append(h, line);
    snprintf(line, sizeof(line), "e2b-delivery-id: %s", d->uuid);
    h = curl_slist_append(h, line);
    h = curl_slist_append(h, "e2b-signature-version: v1");
    snprintf(line, sizeof(line), "e2b-signature: %s", b64);
    h = curl_slist_append(h, line);
    return h;
}

/* ---- the sender thread ------------------------------------------------------------------------
 */

static curl_socket_t open_socket(void *data, curlsocktype purpose, struct curl_sockaddr *a)
{
    struct job *j = data;
    const struct sockaddr *sa = &a->addr;
    const uint8_t *addr = NULL;

    (void)purpose;
    if (sa->sa_family == AF_INET)
        addr = (const uint8_t *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr;
    else if (sa->sa_family == AF_INET6)
        addr = (const uint8_t *)&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
    if (addr == NULL || (!j->host_allowed && !addr_allowed(j->wh, sa->sa_family, addr))) {
        j->refused = true;
        return CURL_SOCKET_BAD;
    }
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static size_t discard(char *p, size_t size, size_t n, void *data)
{
    (void)p;
    (void)data;
    return size * n;
}

static void *sender(void *arg)
{
    struct wr_webhooks *wh = arg;

    for (;;) {
        struct job *in;
        CURLMsg *msg;
        int running = 0, left;
        bool stop;

        pthread_mutex_lock(&wh->mu);
        in = wh->submitted;
        wh->submitted = NULL;
        stop = wh->stop;
        pthread_mutex_unlock(&wh->mu);
        if (stop) {
            /* Jobs not finished are the loop's to put back (wr__webhooks_close). */
            for (struct job *j = in; j != NULL; j = j->next)
                j->status = -1;
            break;
        }
        for (struct job *j = in, *next; j != NULL; j = next) {
            next = j->next;
            curl_multi_add_handle(wh->multi, j->easy);
        }
        curl_multi_perform(wh->multi, &running);
        while ((msg = curl_multi_info_read(wh->multi, &left)) != NULL) {
            struct job *j = NULL;
            if (msg->msg != CURLMSG_DONE)
                continue;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&j);
            if (msg->data.result == CURLE_OK)
                curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &j->status);
            else if (j->errbuf[0] == '\0')
                snprintf(j->errbuf, sizeof(j->errbuf), "%s", curl_easy_strerror(msg->data.result));
            curl_multi_remove_handle(wh->multi, msg->easy_handle);
            pthread_mutex_lock(&wh->mu);
            j->next = wh->done;
            wh->done = j;
            pthread_mutex_unlock(&wh->mu);
            uv_async_send(wh->async);
        }
        curl_multi_poll(wh->multi, NULL, 0, 1000, NULL);
    }
    return NULL;
}

/* ---- the loop's side ------------------------------------------------------------------------- */

static void job_free(struct job *j)
{
    if (j->easy != NULL)
        curl_easy_cleanup(j->easy);
    curl_slist_free_all(j->hdrs);
    wr_delivery_rec_fini(&j->d);
    free(j);
}

static void unlist(struct wr_webhooks *wh, struct job *j)
{
    for (struct job **p = &wh->all; *p != NULL; p = &(*p)->lnext)
        if (*p == j) {
            *p = j->lnext;
            return;
        }
}

static void submit(struct wr_webhooks *wh, struct wr_delivery_rec *d, int64_t now)
{
    struct job *j = xcalloc(1, sizeof(*j));
    CURLU *u = curl_url();
    char *host = NULL;

    j->wh = wh;
    j->d = *d;
    memset(d, 0, sizeof(*d));
    if (u != NULL && curl_url_set(u, CURLUPART_URL, j->d.url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK)
        j->host_allowed = host_allowed(wh, host);
    curl_free(host);
    curl_url_cleanup(u);
    j->hdrs = sign(j, now / 1000);
    j->easy = curl_easy_init();
    if (j->easy == NULL) {
        job_free(j);
        return;
    }
    curl_easy_setopt(j->easy, CURLOPT_URL, j->d.url);
    curl_easy_setopt(j->easy, CURLOPT_PRIVATE, j);
    curl_easy_setopt(j->easy, CURLOPT_POST, 1L);
    curl_easy_setopt(j->easy, CURLOPT_POSTFIELDS, j->d.body);
    curl_easy_setopt(j->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(j->d.body));
    curl_easy_setopt(j->easy, CURLOPT_HTTPHEADER, j->hdrs);
    curl_easy_setopt(j->easy, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(j->easy, CURLOPT_OPENSOCKETDATA, j);
    curl_easy_setopt(j->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(j->easy, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(j->easy, CURLOPT_PROXY, "");
    curl_easy_setopt(j->easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(j->easy, CURLOPT_TIMEOUT_MS, (long)wh->timeout_ms);
    curl_easy_setopt(j->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)wh->timeout_ms);
    curl_easy_setopt(j->easy, CURLOPT_USERAGENT, "warren-webhooks");
    curl_easy_setopt(j->easy, CURLOPT_ERRORBUFFER, j->errbuf);
    curl_easy_setopt(j->easy, CURLOPT_WRITEFUNCTION, discard);
    j->lnext = wh->all;
    wh->all = j;
    wh->inflight++;
    pthread_mutex_lock(&wh->mu);
    j->next = wh->submitted;
    wh->submitted = j;
    pthread_mutex_unlock(&wh->mu);
    curl_multi_wakeup(wh->multi);
}

static void on_timer(uv_timer_t *t);

static void schedule(struct wr_webhooks *wh)
{
    struct wr_store *s = wh->m->cfg.store;
    int64_t now = wr__core_now_ms(), next = -1;
    struct wr_delivery_rec *v = NULL;
    size_t n = 0;
    struct wr_err err;

    /* One attempt in flight per webhook, the earliest due first: a receiver that answers
     * gets a webhook's events in order; one that fails gets the next event meanwhile (the
     * failed one waits for its backoff). */
    if (wh->inflight < INFLIGHT_MAX) {
        if (wr_store_delivery_due(s, now, DUE_SCAN, &v, &n, &err) < 0)
            log_warn("webhooks: %s", err.msg);
        for (size_t i = 0; i < n && wh->inflight < INFLIGHT_MAX; i++) {
            bool busy = false;
            for (struct job *j = wh->all; j != NULL && !busy; j = j->lnext)
                busy = strcmp(j->d.webhook_id, v[i].webhook_id) == 0;
            if (busy)
                continue;
            if (wr_store_delivery_lease(s, v[i].id, now + wh->timeout_ms + LEASE_SLACK_MS, &err) <
                0) {
                log_warn("webhooks: %s", err.msg);
                continue;
            }
            submit(wh, &v[i], now);
        }
        for (size_t i = 0; i < n; i++)
            wr_delivery_rec_fini(&v[i]);
        free(v);
    }
    if (wr_store_delivery_next(s, &next, &err) < 0)
        log_warn("webhooks: %s", err.msg);
    /* Due rows left now wait for a busy webhook (or a free slot): the end of an attempt
     * schedules again. */
    if (next <= now)
        next = now + RESCAN_MS;
    if (next - now > RESCAN_MS)
        next = now + RESCAN_MS;
    uv_timer_start(wh->timer, on_timer, (uint64_t)(next > now ? next - now : 0), 0);
}

static void on_timer(uv_timer_t *t)
{
    schedule(t->data);
}

/* Soon, on the loop (not inside the caller's stack). */
static void kick(struct wr_webhooks *wh)
{
    uv_timer_start(wh->timer, on_timer, 0, 0);
}

static void finish(struct wr_webhooks *wh, struct job *j)
{
    struct wr_delivery_rec *d = &j->d;
    int64_t now = wr__core_now_ms(), wait;
    char msg[sizeof(j->errbuf) + 64];
    struct wr_err err;

    d->attempts++;
    d->last_ms = now;
    d->last_status = j->status > 0 ? j->status : 0;
    free(d->state);
    free(d->last_error);
    if (j->status >= 200 && j->status < 300) {
        d->state = xstrdup("delivered");
        d->last_error = xstrdup("");
    } else {
        if (j->refused)
            snprintf(msg, sizeof(msg), "the address is not one the operator lets webhooks reach");
        else if (j->status > 0)
            snprintf(msg, sizeof(msg), "HTTP %ld", j->status);
        else
            snprintf(msg, sizeof(msg), "%s", j->errbuf[0] ? j->errbuf : "transfer failed");
        d->last_error = xstrdup(msg);
        if (d->attempts >= wh->attempts) {
            d->state = xstrdup("dead");
            log_warn("webhook %s: delivery %s of event %lld is dead after %lld attempts: %s",
                     d->webhook_id, d->uuid, (long long)d->event_id, (long long)d->attempts, msg);
        } else {
            d->state = xstrdup("pending");
            wait = wh->backoff_ms;
            for (int64_t i = 1; i < d->attempts && wait < BACKOFF_MAX_MS; i++)
                wait *= 2;
            if (wait > BACKOFF_MAX_MS)
                wait = BACKOFF_MAX_MS;
            d->next_ms = now + wait;
        }
    }
    if (wr_store_delivery_result(wh->m->cfg.store, d, &err) < 0)
        log_warn("webhooks: %s", err.msg);
}

static void on_done(uv_async_t *a)
{
    struct wr_webhooks *wh = a->data;
    struct job *done;

    pthread_mutex_lock(&wh->mu);
    done = wh->done;
    wh->done = NULL;
    pthread_mutex_unlock(&wh->mu);
    if (done == NULL)
        return;
    for (struct job *j = done, *next; j != NULL; j = next) {
        next = j->next;
        finish(wh, j);
        unlist(wh, j);
        wh->inflight--;
        job_free(j);
    }
    if (!wh->m->closing)
        schedule(wh);
}

static void on_prune(uv_timer_t *t)
{
    struct wr_webhooks *wh = t->data;
    int64_t before = wr__core_now_ms() - (int64_t)WR_WEBHOOK_RETENTION_DAYS * 86400 * 1000, n = 0;
    struct wr_err err;

    if (wr_store_delivery_prune(wh->m->cfg.store, before, 5000, &n, &err) < 0)
        log_warn("webhooks: prune: %s", err.msg);
}

static void handle_closed(uv_handle_t *h)
{
    free(h);
}

void wr__webhooks_open(struct wr_manager *m)
{
    const struct wr_webhooks_config *c = &m->cfg.webhooks;
    struct wr_webhooks *wh = xcalloc(1, sizeof(*wh));
    struct wr_err err;

    pthread_once(&curl_once, curl_init_once);
    wh->m = m;
    wh->attempts = c->attempts ? c->attempts : 6;
    wh->backoff_ms = c->backoff_ms ? c->backoff_ms : 10000;
    wh->timeout_ms = c->timeout_ms ? c->timeout_ms : 10000;
    for (size_t i = 0; i < c->n_allow && wh->n_allow < WR_WEBHOOK_ALLOW_MAX; i++) {
        if (allow_parse(c->allow[i], &wh->allow[wh->n_allow], &err) < 0)
            log_warn("--webhook-allow %s", err.msg);
        else
            wh->n_allow++;
    }
    pthread_mutex_init(&wh->mu, NULL);
    wh->multi = curl_multi_init();
    wh->timer = xmalloc(sizeof(*wh->timer));
    uv_timer_init(m->loop, wh->timer);
    wh->timer->data = wh;
    uv_unref((uv_handle_t *)wh->timer);
    wh->prune = xmalloc(sizeof(*wh->prune));
    uv_timer_init(m->loop, wh->prune);
    wh->prune->data = wh;
    uv_timer_start(wh->prune, on_prune, 2000, PRUNE_MS);
    uv_unref((uv_handle_t *)wh->prune);
    wh->async = xmalloc(sizeof(*wh->async));
    uv_async_init(m->loop, wh->async, on_done);
    wh->async->data = wh;
    uv_unref((uv_handle_t *)wh->async);
    if (wh->multi == NULL || pthread_create(&wh->thread, NULL, sender, wh) != 0)
        log_error("webhooks: no sender thread: deliveries wait in the state database");
    else
        wh->thread_up = true;
    m->webhooks = wh;
    if (wh->thread_up)
        kick(wh);
}

void wr__webhooks_close(struct wr_manager *m)
{
    struct wr_webhooks *wh = m->webhooks;
    int64_t now = wr__core_now_ms();
    struct wr_err err;

    if (wh == NULL)
        return;
    m->webhooks = NULL;
    if (wh->thread_up) {
        pthread_mutex_lock(&wh->mu);
        wh->stop = true;
        pthread_mutex_unlock(&wh->mu);
        curl_multi_wakeup(wh->multi);
        pthread_join(wh->thread, NULL);
    }
    /* Finished attempts are recorded; the ones cut short are due again at once (after a
     * restart), with their attempt not counted. */
    for (struct job *j = wh->done; j != NULL; j = j->next)
        finish(wh, j);
    for (struct job *j = wh->all, *next; j != NULL; j = next) {
        bool finished = false;
        next = j->lnext;
        for (struct job *k = wh->done; k != NULL && !finished; k = k->next)
            finished = k == j;
        if (!finished) {
            j->d.next_ms = now;
            if (wr_store_delivery_result(m->cfg.store, &j->d, &err) < 0)
                log_warn("webhooks: %s", err.msg);
            curl_multi_remove_handle(wh->multi, j->easy);
        }
        job_free(j);
    }
    curl_multi_cleanup(wh->multi);
    pthread_mutex_destroy(&wh->mu);
    for (size_t i = 0; i < wh->n_allow; i++)
        free(wh->allow[i].host);
    uv_timer_stop(wh->timer);
    uv_close((uv_handle_t *)wh->timer, handle_closed);
    uv_timer_stop(wh->prune);
    uv_close((uv_handle_t *)wh->prune, handle_closed);
    uv_close((uv_handle_t *)wh->async, handle_closed);
    free(wh);
}

/* ---- event types and bodies ------------------------------------------------------------------ */

static const char *const native_types[] = {
    "sandbox.created",
    "sandbox.started",
    "sandbox.failed",
    "sandbox.paused",
    "sandbox.resumed",
    "sandbox.snapshotted",
    "sandbox.forked",
    "sandbox.timed_out",
    "sandbox.killed",
    "sandbox.stopped",
    "sandbox.budget",
    "team.budget",
    NULL,
};

static const struct {
    const char *native, *e2b;
} e2b_types[] = {
    {"sandbox.created", "sandbox.lifecycle.created"},
    {"sandbox.paused", "sandbox.lifecycle.paused"},
    {"sandbox.resumed", "sandbox.lifecycle.resumed"},
    {"sandbox.killed", "sandbox.lifecycle.killed"},
    {"sandbox.timed_out", "sandbox.lifecycle.killed"},
    {"sandbox.stopped", "sandbox.lifecycle.killed"},
    {"sandbox.snapshotted", "sandbox.lifecycle.checkpointed"},
};

const char *wr_events_e2b_type(const char *type)
{
    for (size_t i = 0; i < WR_ARRAY_SIZE(e2b_types); i++)
        if (strcmp(e2b_types[i].native, type) == 0)
            return e2b_types[i].e2b;
    return NULL;
}

static bool e2b_type_known(const char *t)
{
    if (strcmp(t, "sandbox.lifecycle.updated") == 0)
        return true; /* E2B's; Warren has no such event, so it never matches */
    for (size_t i = 0; i < WR_ARRAY_SIZE(e2b_types); i++)
        if (strcmp(e2b_types[i].e2b, t) == 0)
            return true;
    return false;
}

int wr_webhooks_events_check(json_t *events, struct wr_err *err)
{
    size_t i;
    json_t *v;

    if (!json_is_array(events))
        return wr_err_set(err, WR_EINVAL, 0, "`events` must be an array of event types");
    if (json_array_size(events) > 32)
        return wr_err_set(err, WR_EINVAL, 0, "`events` has more than 32 types");
    json_array_foreach(events, i, v)
    {
        const char *t = json_string_value(v);
        bool ok = false;
        if (t == NULL)
            return wr_err_set(err, WR_EINVAL, 0, "`events` must be an array of event types");
        ok = strcmp(t, "sandbox.") == 0 || strcmp(t, "team.") == 0 || e2b_type_known(t) ||
             strcmp(t, "sandbox.lifecycle.") == 0;
        for (const char *const *n = native_types; *n != NULL && !ok; n++)
            ok = strcmp(*n, t) == 0;
        if (!ok)
            return wr_err_set(err, WR_EINVAL, 0, "`events`: unknown event type `%s`", t);
    }
    return 0;
}

static bool hook_matches(const struct wr_webhook_rec *w, const char *type)
{
    json_t *ev = json_loads(w->events ? w->events : "[]", 0, NULL);
    const char *e2b = wr_events_e2b_type(type);
    bool any = json_array_size(ev) == 0, ok = false;
    size_t i;
    json_t *v;

    if (strcmp(w->format, "e2b") == 0 && e2b == NULL)
        ok = false; /* E2B has no such event */
    else if (any)
        ok = true;
    else
        json_array_foreach(ev, i, v)
        {
            const char *t = json_string_value(v);
            size_t n = t ? strlen(t) : 0;
            if (t != NULL && (strcmp(t, type) == 0 || (e2b != NULL && strcmp(t, e2b) == 0) ||
                              (n > 0 && t[n - 1] == '.' &&
                               (strncmp(t, type, n) == 0 || (e2b && strncmp(t, e2b, n) == 0)))))
                ok = true;
        }
    json_decref(ev);
    return ok;
}

static void fmt_time(int64_t ms, bool frac, char out[32])
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    size_t n;

    gmtime_r(&s, &tm);
    n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    if (frac)
        snprintf(out + n, 32 - n, ".%03uZ", (unsigned)(ms % 1000));
    else
        snprintf(out + n, 32 - n, "Z");
}

json_t *wr_events_e2b_json(struct wr_manager *m, const struct wr_event_rec *r)
{
    json_t *data = json_loads(r->data ? r->data : "{}", 0, NULL);
    const char *tmpl = json_string_value(json_object_get(data, "template"));
    const char *type = wr_events_e2b_type(r->type);
    char id[40], at[32], *first = NULL;
    json_t *fj = NULL, *out;
    struct wr_err err;

    if (!json_is_object(data)) {
        json_decref(data);
        data = json_object();
    }
    if (tmpl == NULL &&
        wr_store_event_first_data(m->cfg.store, r->sandbox_id, "sandbox.created", &first, &err) ==
            0 &&
        first != NULL) {
        fj = json_loads(first, 0, NULL);
        tmpl = json_string_value(json_object_get(fj, "template"));
    }
    /* A UUID of the event's id, so the API's list and the webhooks name an event alike. */
    snprintf(id, sizeof(id), "00000000-0000-4000-8000-%012llx", (unsigned long long)r->id);
    fmt_time(r->time_ms, false, at);
    out = json_pack("{s:s,s:s,s:s,s:O,s:s?,s:s,s:s,s:s,s:s?,s:s}", "version", "v1", "id", id,
                    "type", type ? type : r->type, "eventData", data, "sandboxBuildId", tmpl,
                    "sandboxExecutionId", r->sandbox_id, "sandboxId", r->sandbox_id,
                    "sandboxTeamId", r->team, "sandboxTemplateId", tmpl, "timestamp", at);
    json_decref(data);
    json_decref(fj);
    free(first);
    return out;
}

int wr_events_e2b_page(struct wr_manager *m, const char *team, const char *sandbox_id,
                       json_t *types, bool asc, int64_t offset, size_t limit,
                       struct wr_event_rec **out, size_t *n, struct wr_err *err)
{
    json_t *natives = json_array();
    char *text;
    int rc;

    for (size_t i = 0; i < WR_ARRAY_SIZE(e2b_types); i++) {
        bool want = json_array_size(types) == 0;
        size_t k;
        json_t *v;
        json_array_foreach(types, k, v)
        {
            if (json_is_string(v) && strcmp(json_string_value(v), e2b_types[i].e2b) == 0)
                want = true;
        }
        if (want)
            json_array_append_new(natives, json_string(e2b_types[i].native));
    }
    text = json_dumps(natives, JSON_COMPACT);
    json_decref(natives);
    rc = wr_store_event_page(m->cfg.store, team, sandbox_id, text, asc, offset, limit, out, n, err);
    free(text);
    return rc;
}

void wr__webhooks_event(struct wr_manager *m, const struct wr_event_rec *r)
{
    struct wr_webhooks *wh = m->webhooks;
    struct wr_webhook_rec *v = NULL;
    size_t n = 0, queued = 0;
    struct wr_err err;

    if (wh == NULL || r->team == NULL || r->team[0] == '\0')
        return;
    if (wr_store_webhook_list(m->cfg.store, r->team, &v, &n, &err) < 0) {
        log_warn("webhooks: event %lld: %s", (long long)r->id, err.msg);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        struct wr_delivery_rec d = {0};
        char uuid[37];
        json_t *body;
        if (!v[i].enabled || !hook_matches(&v[i], r->type))
            continue;
        body = strcmp(v[i].format, "e2b") == 0 ? wr_events_e2b_json(m, r) : wr_events_json(r);
        uuid4(uuid);
        d.uuid = uuid;
        d.webhook_id = v[i].id;
        d.team = r->team;
        d.event_id = r->id;
        d.type = r->type;
        d.body = json_dumps(body, JSON_COMPACT);
        d.created_ms = d.next_ms = wr__core_now_ms();
        json_decref(body);
        if (d.body == NULL || wr_store_delivery_insert(m->cfg.store, &d, &err) < 0)
            log_warn("webhook %s: event %lld: %s", v[i].id, (long long)r->id,
                     d.body ? err.msg : "out of memory");
        else
            queued++;
        free(d.body);
    }
    for (size_t i = 0; i < n; i++)
        wr_webhook_rec_fini(&v[i]);
    free(v);
    if (queued > 0)
        kick(wh);
}

/* ---- registrations --------------------------------------------------------------------------- */

static int check_fields(struct wr_webhooks *wh, const struct wr_webhook_rec *r, struct wr_err *err)
{
    json_t *ev;
    bool allowed_host;
    int rc;

    if (r->name != NULL && strlen(r->name) > 128)
        return wr_err_set(err, WR_EINVAL, 0, "`name` is longer than 128 bytes");
    if (r->url == NULL)
        return wr_err_set(err, WR_EINVAL, 0, "`url` is required");
    if (url_check(wh, r->url, &allowed_host, err) < 0)
        return -1;
    if (r->secret != NULL && (strlen(r->secret) < 8 || strlen(r->secret) > WR_WEBHOOK_SECRET_MAX))
        return wr_err_set(err, WR_EINVAL, 0, "a secret is 8 to %d bytes", WR_WEBHOOK_SECRET_MAX);
    ev = json_loads(r->events ? r->events : "[]", 0, NULL);
    rc = wr_webhooks_events_check(ev, err);
    json_decref(ev);
    return rc;
}

int wr_webhooks_create(struct wr_manager *m, struct wr_webhook_rec *r, struct wr_err *err)
{
    struct wr_webhooks *wh = m->webhooks;
    struct wr_webhook_rec *v = NULL;
    size_t n = 0;
    char id[37];

    if (wh == NULL)
        return wr_err_set(err, WR_EUNSUPPORTED, 0, "this daemon sends no webhooks");
    if (check_fields(wh, r, err) < 0)
        return -1;
    if (wr_store_webhook_list(m->cfg.store, r->team, &v, &n, err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        wr_webhook_rec_fini(&v[i]);
    free(v);
    if (n >= WR_WEBHOOKS_PER_TEAM)
        return wr_err_set(err, WR_ECONFLICT, 0, "a team has at most %d webhooks",
                          WR_WEBHOOKS_PER_TEAM);
    uuid4(id);
    r->id = xstrdup(id);
    if (r->secret == NULL)
        r->secret = new_secret();
    if (r->name == NULL)
        r->name = xstrdup("");
    if (r->events == NULL)
        r->events = xstrdup("[]");
    if (r->format == NULL)
        r->format = xstrdup("warren");
    r->created_ms = r->updated_ms = wr__core_now_ms();
    return wr_store_webhook_insert(m->cfg.store, r, err);
}

int wr_webhooks_get(struct wr_manager *m, const char *team, const char *id,
                    struct wr_webhook_rec *out, struct wr_err *err)
{
    return wr_store_webhook_get(m->cfg.store, team, id, out, err);
}

int wr_webhooks_list(struct wr_manager *m, const char *team, struct wr_webhook_rec **out, size_t *n,
                     struct wr_err *err)
{
    return wr_store_webhook_list(m->cfg.store, team, out, n, err);
}

int wr_webhooks_update(struct wr_manager *m, struct wr_webhook_rec *r, struct wr_err *err)
{
    struct wr_webhooks *wh = m->webhooks;
    struct wr_webhook_rec old;

    if (wh == NULL)
        return wr_err_set(err, WR_EUNSUPPORTED, 0, "this daemon sends no webhooks");
    if (wr_store_webhook_get(m->cfg.store, r->team, r->id, &old, err) < 0)
        return -1;
    if (r->secret == NULL) {
        r->secret = old.secret;
        old.secret = NULL;
    }
    wr_webhook_rec_fini(&old);
    if (check_fields(wh, r, err) < 0)
        return -1;
    r->updated_ms = wr__core_now_ms();
    if (wr_store_webhook_update(m->cfg.store, r, err) < 0)
        return -1;
    kick(wh); /* enabled again: its pending deliveries are due */
    return 0;
}

int wr_webhooks_delete(struct wr_manager *m, const char *team, const char *id, struct wr_err *err)
{
    return wr_store_webhook_delete(m->cfg.store, team, id, err);
}

int wr_webhooks_deliveries(struct wr_manager *m, const struct wr_delivery_filter *f,
                           struct wr_delivery_rec **out, size_t *n, struct wr_err *err)
{
    return wr_store_delivery_list(m->cfg.store, f, out, n, err);
}

int wr_webhooks_redeliver(struct wr_manager *m, const char *team, const char *webhook_id,
                          int64_t id, struct wr_err *err)
{
    if (wr_store_delivery_redeliver(m->cfg.store, team, webhook_id, id, wr__core_now_ms(), err) < 0)
        return -1;
    if (m->webhooks != NULL)
        kick(m->webhooks);
    return 0;
}
