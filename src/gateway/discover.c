/* SPDX-License-Identifier: Apache-2.0 */
/* Node discovery (see discover.h): a static list parsed once, or the pods of the node DaemonSet
 * listed through the Kubernetes API on every call (libcurl, the pod's service-account token read
 * again each time, since Kubernetes rotates it). */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/json_cleanup.h"
#include "../util/xalloc.h"
#include "discover.h"

#define DEFAULT_PORT 7070
/* A PodList of a few thousand pods is a few MiB. */
#define MAX_PODLIST (16u << 20)
#define MAX_TOKEN   (64u << 10)
#define MAX_SEL     1024
#define SA_DIR      "/var/run/secrets/kubernetes.io/serviceaccount"

enum source { SRC_STATIC, SRC_KUBERNETES };

struct wr_discovery {
    enum source src;
    struct wr_node_addr *nodes; /* static */
    size_t n;
    char *ns, *selector; /* kubernetes */
    int port;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

/* The service account's directory. Test builds (-DWR_TESTING) take another from
 * WARREN_TEST_K8S_SA_DIR, for the unit test's local API server. */
static const char *sa_dir(void)
{
#ifdef WR_TESTING
    const char *d = getenv("WARREN_TEST_K8S_SA_DIR");
    if (d != NULL && *d != '\0')
        return d;
#endif
    return SA_DIR;
}

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static bool valid_id(const char *s, size_t len)
{
    if (len == 0 || len > 63)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* An IPv4 or IPv6 literal (as the Kubernetes API writes podIP). */
static bool ip_literal(const char *s)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

/* A DNS name or a dotted-quad IPv4 address: [A-Za-z0-9.-], 1..253 bytes, no empty label, no
 * label starting or ending with '-'; all digits and dots must be a valid IPv4 address. */
static bool valid_hostname(const char *s)
{
    size_t len = strlen(s), label = 0;
    bool numeric = true;
    unsigned char buf[4];

    if (len == 0 || len > 253)
        return false;
    for (size_t i = 0; i <= len; i++) {
        char c = s[i];
        if (c == '.' || c == '\0') {
            if (label == 0 || s[i - 1] == '-')
                return false;
            label = 0;
            continue;
        }
        if (c == '-' && label == 0)
            return false;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-'))
            return false;
        if (!(c >= '0' && c <= '9'))
            numeric = false;
        if (++label > 63)
            return false;
    }
    return !numeric || inet_pton(AF_INET, s, buf) == 1;
}

/* A decimal port 1..65535, digits only. -1 if s is not one. */
static int parse_port(const char *s)
{
    long v = 0;

    if (*s == '\0' || strlen(s) > 5)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (*s - '0');
    }
    return v >= 1 && v <= 65535 ? (int)v : -1;
}

/* One "ID@HOST:PORT" (HOST a name, an IPv4 address or "[IPv6]") into *a. */
static int parse_static_entry(const char *e, struct wr_node_addr *a, struct wr_err *err)
{
    const char *at = strchr(e, '@'), *host, *colon;
    size_t hlen;

    if (at == NULL)
        return wr_err_set(err, WR_EINVAL, 0, "static node \"%s\": not ID@HOST:PORT", e);
    if (!valid_id(e, (size_t)(at - e)))
        return wr_err_set(err, WR_EINVAL, 0,
                          "static node \"%s\": the id must be 1 to 63 of [A-Za-z0-9._-]", e);
    host = at + 1;
    /* In "[IPv6]:PORT" the port's colon is the one right after ']'. */
    colon = host[0] == '[' && strchr(host, ']') ? strchr(host, ']') + 1 : strrchr(host, ':');
    if (colon == NULL || *colon != ':')
        return wr_err_set(err, WR_EINVAL, 0, "static node \"%s\": no :PORT", e);
    a->port = parse_port(colon + 1);
    if (a->port < 0)
        return wr_err_set(err, WR_EINVAL, 0, "static node \"%s\": the port must be 1 to 65535", e);
    hlen = (size_t)(colon - host);
    if (hlen > 0 && host[0] == '[') {
        unsigned char buf[16];
        if (hlen < 3 || host[hlen - 1] != ']' || hlen - 2 >= sizeof(a->host))
            return wr_err_set(err, WR_EINVAL, 0, "static node \"%s\": bad [IPv6] host", e);
        memcpy(a->host, host + 1, hlen - 2);
        a->host[hlen - 2] = '\0';
        if (inet_pton(AF_INET6, a->host, buf) != 1)
            return wr_err_set(err, WR_EINVAL, 0, "static node \"%s\": bad [IPv6] host", e);
    } else {
        if (hlen >= sizeof(a->host))
            return wr_err_set(err, WR_EINVAL, 0, "static node \"%s\": host too long", e);
        memcpy(a->host, host, hlen);
        a->host[hlen] = '\0';
        if (!valid_hostname(a->host))
            return wr_err_set(err, WR_EINVAL, 0,
                              "static node \"%s\": the host must be a DNS name, an IPv4 "
                              "address or an [IPv6] address",
                              e);
    }
    memcpy(a->id, e, (size_t)(at - e));
    a->id[at - e] = '\0';
    return 0;
}

static int parse_static(const char *list, struct wr_discovery *d, struct wr_err *err)
{
    _cleanup_free_ char *copy = xstrdup(list);
    char *save = NULL, *e;
    size_t cap = 1;

    if (*list == '\0')
        return wr_err_set(err, WR_EINVAL, 0, "static: no nodes");
    for (const char *p = list; *p; p++)
        cap += *p == ',';
    d->nodes = xcalloc(cap, sizeof(*d->nodes));
    /* strtok_r would skip an empty entry ("a@h:1,,b@h:2"); strsep keeps it, to refuse it. */
    save = copy;
    while ((e = strsep(&save, ",")) != NULL) {
        struct wr_node_addr *a = &d->nodes[d->n];
        if (*e == '\0')
            return wr_err_set(err, WR_EINVAL, 0, "static: an empty entry in \"%s\"", list);
        if (parse_static_entry(e, a, err) < 0)
            return -1;
        for (size_t i = 0; i < d->n; i++)
            if (strcmp(d->nodes[i].id, a->id) == 0)
                return wr_err_set(err, WR_EINVAL, 0, "static node \"%s\": id %s appears twice", e,
                                  a->id);
        d->n++;
    }
    return 0;
}

/* A Kubernetes namespace: an RFC 1123 label ([a-z0-9-], 1..63, alphanumeric at both ends). */
static bool valid_namespace(const char *s, size_t len)
{
    if (len == 0 || len > 63 || s[0] == '-' || s[len - 1] == '-')
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    return true;
}

static int parse_kubernetes(const char *arg, struct wr_discovery *d, struct wr_err *err)
{
    const char *slash = strchr(arg, '/'), *sel, *at;
    size_t slen;

    if (slash == NULL || !valid_namespace(arg, (size_t)(slash - arg)))
        return wr_err_set(err, WR_EINVAL, 0,
                          "kubernetes:\"%s\": want NAMESPACE/LABEL_SELECTOR[@PORT] with a "
                          "namespace of [a-z0-9-]",
                          arg);
    sel = slash + 1;
    slen = strlen(sel);
    d->port = DEFAULT_PORT;
    /* A selector's values cannot hold '@' ([A-Za-z0-9._-]), so the last one starts the port. */
    at = strrchr(sel, '@');
    if (at != NULL) {
        d->port = parse_port(at + 1);
        if (d->port < 0)
            return wr_err_set(err, WR_EINVAL, 0, "kubernetes:\"%s\": the port must be 1 to 65535",
                              arg);
        slen = (size_t)(at - sel);
    }
    if (slen == 0 || slen > MAX_SEL)
        return wr_err_set(err, WR_EINVAL, 0,
                          "kubernetes:\"%s\": the label selector must be 1 to %d bytes", arg,
                          MAX_SEL);
    for (size_t i = 0; i < slen; i++)
        if (sel[i] < 0x20 || sel[i] > 0x7e)
            return wr_err_set(err, WR_EINVAL, 0,
                              "kubernetes:\"%s\": a control or non-ASCII byte in the selector",
                              arg);
    d->ns = xstrndup(arg, (size_t)(slash - arg));
    d->selector = xstrndup(sel, slen);
    return 0;
}

int wr_discovery_new(const char *spec, struct wr_discovery **out, struct wr_err *err)
{
    struct wr_discovery *d = xcalloc(1, sizeof(*d));
    int r;

    if (strncmp(spec, "static:", 7) == 0) {
        d->src = SRC_STATIC;
        r = parse_static(spec + 7, d, err);
    } else if (strncmp(spec, "kubernetes:", 11) == 0) {
        d->src = SRC_KUBERNETES;
        r = parse_kubernetes(spec + 11, d, err);
    } else {
        r = wr_err_set(err, WR_EINVAL, 0,
                       "discovery \"%s\": want static:ID@HOST:PORT[,...] or "
                       "kubernetes:NAMESPACE/LABEL_SELECTOR[@PORT]",
                       spec);
    }
    if (r < 0) {
        wr_discovery_free(d);
        return -1;
    }
    *out = d;
    return 0;
}

void wr_discovery_free(struct wr_discovery *d)
{
    if (d == NULL)
        return;
    free(d->nodes);
    free(d->ns);
    free(d->selector);
    free(d);
}

int wr_discovery_parse_podlist(const char *json, size_t len, int port, struct wr_node_addr **out,
                               size_t *n, struct wr_err *err)
{
    _cleanup_json_ json_t *root = NULL;
    _cleanup_free_ struct wr_node_addr *nodes = NULL;
    json_error_t jerr;
    json_t *items, *pod;
    const char *kind;
    size_t i, count = 0;

    *out = NULL;
    *n = 0;
    root = json_loadb(json, len, 0, &jerr);
    if (root == NULL)
        return wr_err_set(err, WR_EPROTO, 0, "pod list: bad JSON: %s (line %d)", jerr.text,
                          jerr.line);
    kind = json_string_value(json_object_get(root, "kind"));
    items = json_object_get(root, "items");
    if (!json_is_object(root) || (kind != NULL && strcmp(kind, "PodList") != 0))
        return wr_err_set(err, WR_EPROTO, 0, "pod list: not a PodList (kind %s)",
                          kind ? kind : "absent");
    /* An empty list is "items": null in some API servers' answers. */
    if (items == NULL || json_is_null(items))
        return 0;
    if (!json_is_array(items))
        return wr_err_set(err, WR_EPROTO, 0, "pod list: items is not an array");
    nodes = xcalloc(json_array_size(items) + 1, sizeof(*nodes));
    json_array_foreach(items, i, pod)
    {
        json_t *meta = json_object_get(pod, "metadata"), *del;
        json_t *spec = json_object_get(pod, "spec"), *status = json_object_get(pod, "status");
        const char *id = json_string_value(json_object_get(spec, "nodeName"));
        const char *host = json_string_value(json_object_get(status, "podIP"));
        const char *phase = json_string_value(json_object_get(status, "phase"));
        struct wr_node_addr *a = &nodes[count];
        bool dup = false;

        del = json_object_get(meta, "deletionTimestamp");
        if ((del != NULL && !json_is_null(del)) || phase == NULL || strcmp(phase, "Running") != 0)
            continue; /* terminating, or not (or no longer) running */
        if (id == NULL || *id == '\0')
            id = json_string_value(json_object_get(meta, "name"));
        if (host == NULL || *host == '\0')
            host = json_string_value(json_object_get(status, "hostIP"));
        if (id == NULL || !valid_id(id, strlen(id)) || host == NULL || !ip_literal(host))
            continue;
        for (size_t j = 0; j < count; j++)
            dup = dup || strcmp(nodes[j].id, id) == 0;
        if (dup)
            continue; /* two pods of one DaemonSet on one node: the first answers */
        snprintf(a->id, sizeof(a->id), "%s", id);
        snprintf(a->host, sizeof(a->host), "%s", host);
        a->port = port;
        count++;
    }
    if (count > 0) {
        *out = steal_pointer(&nodes);
        *n = count;
    }
    return 0;
}

/* Read the service account's token (trailing newline dropped) into *out (free it). */
static int read_token(char **out, struct wr_err *err)
{
    _cleanup_free_ char *buf = xmalloc(MAX_TOKEN);
    _cleanup_free_ char *path = xasprintf("%s/token", sa_dir());
    ssize_t len = wr_read_fileat(AT_FDCWD, path, buf, MAX_TOKEN, err);

    if (len < 0)
        return wr_err_wrap(err, "service-account token");
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
        buf[--len] = '\0';
    if (len == 0)
        return wr_err_set(err, WR_EINVAL, 0, "%s is empty", path);
    *out = steal_pointer(&buf);
    return 0;
}

struct body {
    struct wr_buf buf;
    bool too_big;
};

static size_t on_body(char *p, size_t size, size_t nmemb, void *data)
{
    struct body *b = data;
    size_t len = size * nmemb;

    if (b->buf.len + len > MAX_PODLIST) {
        b->too_big = true;
        return 0;
    }
    wr_buf_append(&b->buf, p, len);
    return len;
}

static void curl_cleanupp(CURL **c)
{
    if (*c != NULL)
        curl_easy_cleanup(*c);
}

static void slist_freep(struct curl_slist **l)
{
    curl_slist_free_all(*l);
}

/* GET the DaemonSet's pods; the body in *b. */
static int fetch_pods(const struct wr_discovery *d, struct body *b, struct wr_err *err)
{
    const char *khost = getenv("KUBERNETES_SERVICE_HOST");
    const char *kport = getenv("KUBERNETES_SERVICE_PORT");
    __attribute__((cleanup(curl_cleanupp))) CURL *c = NULL;
    __attribute__((cleanup(slist_freep))) struct curl_slist *hdrs = NULL;
    _cleanup_free_ char *token = NULL, *auth = NULL, *url = NULL;
    _cleanup_free_ char *ca = xasprintf("%s/ca.crt", sa_dir());
    char errbuf[CURL_ERROR_SIZE] = "", *esel;
    CURLcode cc;
    long status = 0;

    if (khost == NULL || *khost == '\0' || kport == NULL || parse_port(kport) < 0)
        return wr_err_set(err, WR_EINVAL, 0,
                          "KUBERNETES_SERVICE_HOST/_PORT unset or bad (not in a pod?)");
    if (read_token(&token, err) < 0)
        return -1;
    pthread_once(&curl_once, curl_init_once);
    c = curl_easy_init();
    if (c == NULL)
        return wr_err_set(err, WR_ESYS, ENOMEM, "curl");
    esel = curl_easy_escape(c, d->selector, 0);
    if (esel == NULL)
        return wr_err_set(err, WR_ESYS, ENOMEM, "curl");
    url = xasprintf("https://%s%s%s:%s/api/v1/namespaces/%s/pods?labelSelector=%s",
                    strchr(khost, ':') ? "[" : "", khost, strchr(khost, ':') ? "]" : "", kport,
                    d->ns, esel);
    curl_free(esel);
    auth = xasprintf("Authorization: Bearer %s", token);
    hdrs = curl_slist_append(hdrs, auth);
    hdrs = curl_slist_append(hdrs, "Accept: application/json");
    if (hdrs == NULL)
        return wr_err_set(err, WR_ESYS, ENOMEM, "curl");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_CAINFO, ca);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "warren-gateway");
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    cc = curl_easy_perform(c);
    if (b->too_big)
        return wr_err_set(err, WR_ETOOBIG, 0, "the pod list is over %u MiB", MAX_PODLIST >> 20);
    if (cc != CURLE_OK)
        return wr_err_set(err, WR_EUPSTREAM, 0, "GET %s: %s", url,
                          errbuf[0] ? errbuf : curl_easy_strerror(cc));
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) {
        /* The API server answers errors with a Status object: {"kind":"Status","message":...}. */
        _cleanup_json_ json_t *j = json_loadb(wr_buf_str(&b->buf), b->buf.len, 0, NULL);
        const char *msg = json_string_value(json_object_get(j, "message"));
        return wr_err_set(err, WR_EUPSTREAM, 0, "GET %s: HTTP %ld%s%s%s", url, status,
                          msg ? ": " : "", msg ? msg : "",
                          status == 401   ? " (the service account's token was refused)"
                          : status == 403 ? " (the gateway's service account needs list on pods)"
                                          : "");
    }
    return 0;
}

int wr_discovery_list(struct wr_discovery *d, struct wr_node_addr **out, size_t *n,
                      struct wr_err *err)
{
    struct body b = {0};
    int r;

    *out = NULL;
    *n = 0;
    if (d->src == SRC_STATIC) {
        *out = xcalloc(d->n, sizeof(**out));
        memcpy(*out, d->nodes, d->n * sizeof(**out));
        *n = d->n;
        return 0;
    }
    r = fetch_pods(d, &b, err);
    if (r == 0)
        r = wr_discovery_parse_podlist(wr_buf_str(&b.buf), b.buf.len, d->port, out, n, err);
    wr_buf_fini(&b.buf);
    if (r < 0)
        return wr_err_wrap(err, "discovery kubernetes:%s/%s", d->ns, d->selector);
    return 0;
}
