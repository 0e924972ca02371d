/* SPDX-License-Identifier: Apache-2.0 */
/* A client of the registry API v2 with libcurl (see image.h): ping, Bearer token or Basic
 * auth, manifests (indexes and manifest lists resolved to linux/amd64), blobs streamed to files
 * and hashed as they arrive. One easy handle per pull, on the calling (worker) thread. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/xalloc.h"
#include "image_int.h"

#define MAX_MANIFEST (4u << 20)
#define MAX_CONFIG   (16u << 20)
#define MAX_TOKEN    (1u << 20)
#define MAX_ERRBODY  (64u << 10)

#define MT_OCI_MANIFEST    "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_INDEX       "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_LIST     "application/vnd.docker.distribution.manifest.list.v2+json"

static const char accept_manifests[] =
    "Accept: " MT_OCI_MANIFEST ", " MT_OCI_INDEX ", " MT_DOCKER_MANIFEST ", " MT_DOCKER_LIST;

/* What one response brought. A 2xx body goes to fd (or to mem when fd < 0), hashed; any other
 * body to mem (its error message), at most MAX_ERRBODY. */
struct resp {
    long status;
    char *ctype, *www_auth;
    int fd;
    char *mem;
    size_t len, max;
    EVP_MD_CTX *md;
    bool too_big;
    int werr;
};

struct reg {
    bool refused_private; /* a connection to a private address was refused */
    CURL *c;
    char *base; /* "http(s)://host[:port]" */
    char *host, *repo, *ref;
    char *auth; /* an "Authorization: ..." header, once a challenge was answered */
    const struct wr_registry_opts *o;
    char errbuf[CURL_ERROR_SIZE];
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void resp_reset(struct resp *r)
{
    free(r->ctype);
    free(r->www_auth);
    r->ctype = r->www_auth = NULL;
    r->len = 0;
    r->too_big = false;
    if (r->md != NULL)
        EVP_DigestInit_ex(r->md, EVP_sha256(), NULL);
}

static void resp_fini(struct resp *r)
{
    free(r->ctype);
    free(r->www_auth);
    free(r->mem);
    EVP_MD_CTX_free(r->md);
    memset(r, 0, sizeof(*r));
}

static void resp_init(struct resp *r, int fd, size_t max)
{
    memset(r, 0, sizeof(*r));
    r->fd = fd;
    r->max = max;
    r->md = EVP_MD_CTX_new();
    if (r->md == NULL || EVP_DigestInit_ex(r->md, EVP_sha256(), NULL) != 1)
        abort();
}

static bool ok2xx(long s)
{
    return s >= 200 && s < 300;
}

static size_t on_header(char *p, size_t size, size_t n, void *data)
{
    struct resp *r = data;
    size_t len = size * n, vlen;
    const char *v;

    if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
        /* A new response (after a redirect or a 100): forget the previous one's headers. */
        const char *sp = memchr(p, ' ', len);
        resp_reset(r);
        r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        return len;
    }
    v = memchr(p, ':', len);
    if (v == NULL)
        return len;
    vlen = len - (size_t)(v + 1 - p);
    for (v++; vlen > 0 && (*v == ' ' || *v == '\t'); v++, vlen--)
        ;
    while (vlen > 0 && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
        vlen--;
    if (strncasecmp(p, "Content-Type:", 13) == 0) {
        free(r->ctype);
        r->ctype = xstrndup(v, vlen);
    } else if (strncasecmp(p, "WWW-Authenticate:", 17) == 0) {
        free(r->www_auth);
        r->www_auth = xstrndup(v, vlen);
    }
    return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *data)
{
    struct resp *r = data;
    size_t len = size * n;
    bool good = ok2xx(r->status);

    if (good)
        EVP_DigestUpdate(r->md, p, len);
    if (good && r->fd >= 0) {
        if (wr_write_all(r->fd, p, len) < 0) {
            r->werr = errno;
            return 0;
        }
        return len;
    }
    if (r->len + len > (good ? r->max : MAX_ERRBODY)) {
        if (!good)
            return len; /* an error's body: its start says enough */
        r->too_big = true;
        return 0;
    }
    r->mem = xrealloc(r->mem, r->len + len + 1);
    memcpy(r->mem + r->len, p, len);
    r->len += len;
    r->mem[r->len] = '\0';
    return len;
}

/* "CODE: message" of a registry's {"errors": [...]} body, or the HTTP status. */
static void upstream_words(const struct resp *r, char *out, size_t size)
{
    json_t *j = r->mem ? json_loadb(r->mem, r->len, 0, NULL) : NULL;
    json_t *e = json_array_get(json_object_get(j, "errors"), 0);
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *msg = json_string_value(json_object_get(e, "message"));

    if (code != NULL || msg != NULL)
        snprintf(out, size, "%s%s%s", code ? code : "", code && msg ? ": " : "", msg ? msg : "");
    else
        snprintf(out, size, "HTTP %ld", r->status);
    json_decref(j);
}

/* Loopback, private (RFC 1918, fc00::/7), link-local, unspecified and IPv4-mapped forms. */
static bool private_addr(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        uint32_t a = ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr);
        return (a >> 24) == 127 || (a >> 24) == 10 || (a >> 24) == 0 ||
               (a >> 20) == (172u << 4 | 1) || (a >> 16) == (192u << 8 | 168) ||
               (a >> 16) == (169u << 8 | 254) || (a >> 22) == (100u << 2 | 1); /* 100.64/10 */
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            struct sockaddr_in v4 = {.sin_family = AF_INET};
            memcpy(&v4.sin_addr, &a->s6_addr[12], 4);
            return private_addr((const struct sockaddr *)&v4);
        }
        return IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_UNSPECIFIED(a) || IN6_IS_ADDR_LINKLOCAL(a) ||
               (a->s6_addr[0] & 0xfe) == 0xfc;
    }
    return true; /* anything else (unix sockets...) is not a registry */
}

/* curl's socket: refused for private addresses unless the pull may use them. */
static curl_socket_t open_socket(void *data, curlsocktype purpose, struct curl_sockaddr *a)
{
    struct reg *g = data;

    if (!g->o->allow_private && private_addr(&a->addr)) {
        g->refused_private = true;
        return CURL_SOCKET_BAD;
    }
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static void common_opts(CURL *c, char *errbuf, struct reg *g)
{
    curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, g);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 15L);
    /* A stalled transfer (under 1 byte/s for a minute) fails rather than holding a worker. */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "warren");
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
}

/* One GET of url into r; only transport failures are errors here. */
static int perform(CURL *c, char *errbuf, const char *url, struct curl_slist *hdrs, struct resp *r,
                   const char *what, struct wr_err *err)
{
    CURLcode cc;

    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    errbuf[0] = '\0';
    r->status = 0;
    cc = curl_easy_perform(c);
    if (r->too_big)
        return wr_err_set(err, WR_EPROTO, 0, "%s: the answer is too large", what);
    if (r->werr != 0)
        return wr_err_set(err, WR_ESYS, r->werr, "%s: write", what);
    if (cc != CURLE_OK)
        return wr_err_set(err, WR_EPROTO, 0, "%s: %s", what,
                          errbuf[0] ? errbuf : curl_easy_strerror(cc));
    return 0;
}

/* The value of parameter key in a challenge's list (key="value", ...), or NULL. */
static char *challenge_param(const char *ch, const char *key)
{
    size_t klen = strlen(key);

    for (const char *p = ch; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (strncasecmp(p, key, klen) == 0 && p[klen] == '=') {
            const char *v = p + klen + 1, *end;
            if (*v == '"') {
                end = strchr(++v, '"');
                return end ? xstrndup(v, (size_t)(end - v)) : NULL;
            }
            end = v + strcspn(v, ", ");
            return xstrndup(v, (size_t)(end - v));
        }
        /* skip this pair */
        p = strchr(p, '=');
        if (p == NULL)
            break;
        p++;
        if (*p == '"') {
            p = strchr(p + 1, '"');
            if (p == NULL)
                break;
            p++;
        } else {
            p += strcspn(p, ",");
        }
    }
    return NULL;
}

static char *basic_header(const char *user, const char *pass)
{
    _cleanup_free_ char *plain = xasprintf("%s:%s", user, pass ? pass : "");
    size_t n = strlen(plain);
    _cleanup_free_ unsigned char *b64 = xmalloc(4 * ((n + 2) / 3) + 1);

    EVP_EncodeBlock(b64, (const unsigned char *)plain, (int)n);
    return xasprintf("Authorization: Basic %s", b64);
}

/* Answer a 401's challenge: a Bearer token from its realm (with the request's credentials, or
 * anonymous), or Basic with the credentials. */
static int authenticate(struct reg *g, const char *challenge, struct wr_err *err)
{
    const struct wr_registry_opts *o = g->o;

    if (strncasecmp(challenge, "Basic", 5) == 0) {
        if (o->username == NULL)
            return wr_err_set(err, WR_EPROTO, 0,
                              "registry %s requires credentials (HTTP 401, Basic)", g->host);
        free(g->auth);
        g->auth = basic_header(o->username, o->password);
        return 0;
    }
    if (strncasecmp(challenge, "Bearer ", 7) != 0)
        return wr_err_set(err, WR_EPROTO, 0,
                          "registry %s: an auth challenge Warren cannot answer: %s", g->host,
                          challenge);

    _cleanup_free_ char *realm = challenge_param(challenge + 7, "realm");
    _cleanup_free_ char *service = challenge_param(challenge + 7, "service");
    _cleanup_free_ char *scope = challenge_param(challenge + 7, "scope");
    _cleanup_free_ char *url = NULL, *dflt_scope = xasprintf("repository:%s:pull", g->repo);
    CURL *tc;
    struct resp r;
    struct curl_slist *hdrs = NULL;
    char errbuf[CURL_ERROR_SIZE];
    json_t *j;
    const char *tok;
    int rc = -1;

    if (realm == NULL || (strncmp(realm, "http://", 7) != 0 && strncmp(realm, "https://", 8) != 0))
        return wr_err_set(err, WR_EPROTO, 0, "registry %s: a Bearer challenge without a realm",
                          g->host);
    tc = curl_easy_init();
    if (tc == NULL)
        return wr_err_set(err, WR_ESYS, ENOMEM, "curl");
    {
        char *es = curl_easy_escape(tc, service ? service : "", 0);
        char *esc = curl_easy_escape(tc, scope ? scope : dflt_scope, 0);
        url = xasprintf("%s%sservice=%s&scope=%s", realm, strchr(realm, '?') ? "&" : "?", es, esc);
        curl_free(es);
        curl_free(esc);
    }
    common_opts(tc, errbuf, g);
    if (o->username != NULL) {
        _cleanup_free_ char *basic = basic_header(o->username, o->password);
        hdrs = curl_slist_append(hdrs, basic);
    }
    resp_init(&r, -1, MAX_TOKEN);
    if (perform(tc, errbuf, url, hdrs, &r, "token server", err) < 0)
        goto out;
    if (!ok2xx(r.status)) {
        char words[256];
        upstream_words(&r, words, sizeof(words));
        wr_err_set(err, WR_EPROTO, 0, "the token server of %s refused (HTTP %ld): %s", g->host,
                   r.status, words);
        goto out;
    }
    j = json_loadb(r.mem ? r.mem : "", r.len, 0, NULL);
    tok = json_string_value(json_object_get(j, "token"));
    if (tok == NULL)
        tok = json_string_value(json_object_get(j, "access_token"));
    if (tok == NULL) {
        json_decref(j);
        wr_err_set(err, WR_EPROTO, 0, "the token server of %s answered no token", g->host);
        goto out;
    }
    free(g->auth);
    g->auth = xasprintf("Authorization: Bearer %s", tok);
    json_decref(j);
    rc = 0;
out:
    curl_slist_free_all(hdrs);
    resp_fini(&r);
    curl_easy_cleanup(tc);
    return rc;
}

/* GET base + path into r, answering one auth challenge. Returns 0 with r->status set (any
 * status) or -1 for a transport failure or a challenge that could not be answered. */
static int reg_get(struct reg *g, const char *path, const char *accept, struct resp *r,
                   const char *what, struct wr_err *err)
{
    _cleanup_free_ char *url = xasprintf("%s%s", g->base, path);

    for (int attempt = 0;; attempt++) {
        struct curl_slist *hdrs = NULL;
        int rc;
        if (accept != NULL)
            hdrs = curl_slist_append(hdrs, accept);
        if (g->auth != NULL)
            hdrs = curl_slist_append(hdrs, g->auth);
        rc = perform(g->c, g->errbuf, url, hdrs, r, what, err);
        curl_slist_free_all(hdrs);
        if (rc < 0)
            return -1;
        if (r->status != 401 || attempt > 0 || r->www_auth == NULL)
            return 0;
        if (authenticate(g, r->www_auth, err) < 0)
            return -1;
        if (r->fd >= 0 && (ftruncate(r->fd, 0) < 0 || lseek(r->fd, 0, SEEK_SET) < 0))
            return wr_err_sys(err, "%s", what);
    }
}

/* An error for a response that is not 2xx. */
static int http_fail(struct reg *g, const struct resp *r, const char *what, struct wr_err *err)
{
    char words[256];

    upstream_words(r, words, sizeof(words));
    if (r->status == 404)
        return wr_err_set(err, WR_ENOTFOUND, 0, "%s: not in registry %s (%s)", what, g->host,
                          words);
    return wr_err_set(err, WR_EPROTO, 0, "%s: registry %s answered %ld: %s", what, g->host,
                      r->status, words);
}

/* ---- references ---------------------------------------------------------------------------- */

static bool all_of(const char *s, size_t n, const char *set)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\0' || strchr(set, s[i]) == NULL)
            return false;
    return true;
}

#define LOWER_DIGITS "abcdefghijklmnopqrstuvwxyz0123456789"
#define ALNUM        LOWER_DIGITS "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

static int parse_ref(const char *ref, struct reg *g, struct wr_err *err)
{
    _cleanup_free_ char *name = NULL;
    const char *at = strchr(ref, '@'), *slash, *colon;

    if (at != NULL) {
        if (!wr__valid_digest(at + 1))
            return wr_err_set(err, WR_EINVAL, 0, "image `%s`: a bad digest", ref);
        name = xstrndup(ref, (size_t)(at - ref));
        g->ref = xstrdup(at + 1);
    } else {
        slash = strrchr(ref, '/');
        colon = strrchr(ref, ':');
        if (colon != NULL && (slash == NULL || colon > slash)) {
            name = xstrndup(ref, (size_t)(colon - ref));
            g->ref = xstrdup(colon + 1);
        } else {
            name = xstrdup(ref);
            g->ref = xstrdup("latest");
        }
        if (!all_of(g->ref, strlen(g->ref), ALNUM "_.-") || strlen(g->ref) > 128)
            return wr_err_set(err, WR_EINVAL, 0, "image `%s`: a bad tag", ref);
    }
    slash = strchr(name, '/');
    if (slash != NULL && (memchr(name, '.', (size_t)(slash - name)) != NULL ||
                          memchr(name, ':', (size_t)(slash - name)) != NULL ||
                          strncmp(name, "localhost/", 10) == 0)) {
        g->host = xstrndup(name, (size_t)(slash - name));
        g->repo = xstrdup(slash + 1);
    } else {
        g->host = xstrdup("registry-1.docker.io");
        g->repo = slash ? xstrdup(name) : xasprintf("library/%s", name);
    }
    if (!all_of(g->host, strlen(g->host), ALNUM ".-:[]"))
        return wr_err_set(err, WR_EINVAL, 0, "image `%s`: a bad registry host", ref);
    if (!all_of(g->repo, strlen(g->repo), LOWER_DIGITS "._/-") || g->repo[0] == '/' ||
        strstr(g->repo, "//") != NULL || strstr(g->repo, "..") != NULL)
        return wr_err_set(err, WR_EINVAL, 0,
                          "image `%s`: a bad repository name (lowercase letters, digits, `._-/`)",
                          ref);
    g->base = xasprintf("%s://%s", g->o->insecure ? "http" : "https", g->host);
    return 0;
}

/* ---- the pull ------------------------------------------------------------------------------ */

static bool media_is(const char *ctype, const char *mt)
{
    size_t n = strlen(mt);
    return ctype != NULL && strncmp(ctype, mt, n) == 0 && (ctype[n] == '\0' || ctype[n] == ';');
}

/* The manifest `ref` (a tag or digest) names, indexes resolved: a JSON object. */
static json_t *fetch_manifest(struct reg *g, const char *ref, int depth, struct wr_err *err)
{
    _cleanup_free_ char *path = xasprintf("/v2/%s/manifests/%s", g->repo, ref);
    _cleanup_free_ char *what = xasprintf("manifest %s:%s", g->repo, ref);
    struct resp r;
    json_t *m = NULL;
    const char *mt;
    char got[72];

    resp_init(&r, -1, MAX_MANIFEST);
    if (reg_get(g, path, accept_manifests, &r, what, err) < 0)
        goto out;
    if (!ok2xx(r.status)) {
        http_fail(g, &r, what, err);
        goto out;
    }
    wr__digest_final(r.md, got);
    if (strncmp(ref, "sha256:", 7) == 0 && strcmp(got, ref) != 0) {
        wr_err_set(err, WR_EBADDATA, 0, "%s: its digest is %s", what, got);
        goto out;
    }
    m = json_loadb(r.mem ? r.mem : "", r.len, 0, NULL);
    if (!json_is_object(m)) {
        wr_err_set(err, WR_EPROTO, 0, "%s: not JSON", what);
        goto out;
    }
    mt = json_string_value(json_object_get(m, "mediaType"));
    if (mt == NULL)
        mt = r.ctype;
    if (media_is(mt, MT_OCI_INDEX) || media_is(mt, MT_DOCKER_LIST) ||
        (mt == NULL && json_object_get(m, "manifests") != NULL)) {
        const json_t *d = wr__pick_amd64(json_object_get(m, "manifests"), err);
        const char *dg = json_string_value(json_object_get(d, "digest"));
        json_t *inner = NULL;
        if (d != NULL && !wr__valid_digest(dg))
            wr_err_set(err, WR_EPROTO, 0, "%s: a manifest descriptor without a digest", what);
        else if (d != NULL && depth >= 3)
            wr_err_set(err, WR_EPROTO, 0, "%s: indexes nested too deep", what);
        else if (d != NULL)
            inner = fetch_manifest(g, dg, depth + 1, err);
        json_decref(m);
        m = inner;
        goto out;
    }
    if (!json_is_array(json_object_get(m, "layers")) || json_object_get(m, "config") == NULL) {
        wr_err_set(err, WR_EBADDATA, 0, "%s: of type `%s`, which Warren cannot use", what,
                   mt ? mt : "?");
        json_decref(m);
        m = NULL;
    }
out:
    resp_fini(&r);
    return m;
}

/* Fetch blob `digest` into fd (or memory, fd < 0, at most max), checking its digest. */
static int fetch_blob(struct reg *g, const char *digest, int fd, size_t max, struct resp *r,
                      struct wr_err *err)
{
    _cleanup_free_ char *path = xasprintf("/v2/%s/blobs/%s", g->repo, digest);
    _cleanup_free_ char *what = xasprintf("blob %s", digest);
    char got[72];

    resp_init(r, fd, max);
    if (reg_get(g, path, NULL, r, what, err) < 0)
        return -1;
    if (!ok2xx(r->status))
        return http_fail(g, r, what, err);
    wr__digest_final(r->md, got);
    if (strcmp(got, digest) != 0)
        return wr_err_set(err, WR_EBADDATA, 0, "%s: what the registry sent has digest %s", what,
                          got);
    return 0;
}

int wr_registry_pull(const char *ref, const struct wr_registry_opts *opts, const char *workdir,
                     struct wr_oci_image *img, struct wr_err *err)
{
    struct reg g = {.o = opts};
    struct resp r;
    json_t *m = NULL, *cfg = NULL, *l;
    const char *cd;
    size_t i;
    int rc = -1;

    memset(img, 0, sizeof(*img));
    memset(&r, 0, sizeof(r));
    pthread_once(&curl_once, curl_init_once);
    if (parse_ref(ref, &g, err) < 0)
        goto out;
    g.c = curl_easy_init();
    if (g.c == NULL) {
        wr_err_set(err, WR_ESYS, ENOMEM, "curl");
        goto out;
    }
    common_opts(g.c, g.errbuf, &g);

    /* Ping: is it a registry, and does it want credentials? */
    resp_init(&r, -1, MAX_ERRBODY);
    if (reg_get(&g, "/v2/", NULL, &r, "registry", err) < 0)
        goto out;
    if (!ok2xx(r.status)) {
        char words[256];
        upstream_words(&r, words, sizeof(words));
        wr_err_set(err, WR_EPROTO, 0, "registry %s answered %ld to /v2/: %s", g.host, r.status,
                   words);
        goto out;
    }
    resp_fini(&r);

    m = fetch_manifest(&g, g.ref, 0, err);
    if (m == NULL)
        goto out;
    cd = json_string_value(json_object_get(json_object_get(m, "config"), "digest"));
    if (!wr__valid_digest(cd)) {
        wr_err_set(err, WR_EPROTO, 0, "the manifest has no config digest");
        goto out;
    }
    if (fetch_blob(&g, cd, -1, MAX_CONFIG, &r, err) < 0)
        goto out;
    cfg = json_loadb(r.mem ? r.mem : "", r.len, 0, NULL);
    resp_fini(&r);
    if (!json_is_object(cfg)) {
        wr_err_set(err, WR_EBADDATA, 0, "the image config %s is not JSON", cd);
        goto out;
    }
    img->config = wr_oci_config_convert(cfg);

    json_array_foreach(json_object_get(m, "layers"), i, l)
    {
        const char *d = json_string_value(json_object_get(l, "digest"));
        const char *mt = json_string_value(json_object_get(l, "mediaType"));
        _cleanup_free_ char *path = xasprintf("%s/layer-%zu", workdir, i);
        _cleanup_close_ int fd = -1;
        if (!wr__valid_digest(d) || !wr__layer_media_type(mt)) {
            wr_err_set(err, WR_EBADDATA, 0, "layer %zu: media type `%s`, digest `%s`", i,
                       mt ? mt : "", d ? d : "");
            goto out;
        }
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            wr_err_sys(err, "create `%s`", path);
            goto out;
        }
        if (fetch_blob(&g, d, fd, 0, &r, err) < 0)
            goto out;
        resp_fini(&r);
        wr__image_add_layer(img, path, d, mt);
    }
    if (img->nlayers == 0) {
        wr_err_set(err, WR_EBADDATA, 0, "the image has no layers");
        goto out;
    }
    rc = 0;
out:
    resp_fini(&r);
    json_decref(m);
    json_decref(cfg);
    if (g.c != NULL)
        curl_easy_cleanup(g.c);
    free(g.base);
    free(g.host);
    free(g.repo);
    free(g.ref);
    free(g.auth);
    if (rc < 0 && g.refused_private)
        wr_err_set(err, WR_EINVAL, 0,
                   "pulling `%s`: its registry is on a loopback, private or link-local address, "
                   "which only an admin key may pull from",
                   ref);
    if (rc < 0)
        wr_oci_image_fini(img);
    return rc;
}
