/* SPDX-License-Identifier: Apache-2.0 */
/* The E2B-compatible API: which requests are E2B's, envd's routing (the E2b-Sandbox-Id and
 * Novita-Sandbox-Id headers, or Host <port>-<id>.<domain>) and its access tokens. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../util/b64.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/xalloc.h"
#include "e2b_int.h"

/* ---- the secret and the tokens ------------------------------------------------------------- */

int wr_api_e2b_open(struct wr_api *api, const char *state_dir, struct wr_err *err)
{
    _cleanup_free_ char *path = xasprintf("%s/e2b.secret", state_dir);
    _cleanup_(wr_closep) int fd = -1;
    struct wr_e2b *e = xcalloc(1, sizeof(*e));
    ssize_t n;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        n = read(fd, e->secret, sizeof(e->secret));
        if (n != (ssize_t)sizeof(e->secret)) {
            free(e);
            return wr_err_set(err, WR_ESYS, n < 0 ? errno : 0, "read %s", path);
        }
    } else if (errno == ENOENT) {
        _cleanup_free_ char *tmp = xasprintf("%s.tmp", path);
        if (getrandom(e->secret, sizeof(e->secret), 0) != (ssize_t)sizeof(e->secret))
            abort(); /* the kernel's CSPRNG cannot fail once initialised */
        (void)unlink(tmp);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 || write(fd, e->secret, sizeof(e->secret)) != (ssize_t)sizeof(e->secret) ||
            fsync(fd) < 0 || rename(tmp, path) < 0) {
            wr_err_sys(err, "write %s", path);
            (void)unlink(tmp);
            free(e);
            return -1;
        }
    } else {
        free(e);
        return wr_err_sys(err, "open %s", path);
    }
    api->e2b = e;
    return 0;
}

void wr_api_e2b_close(struct wr_api *api)
{
    if (api == NULL || api->e2b == NULL)
        return;
    e2b_fs_close(api->e2b);
    e2b_process_close(api->e2b);
    OPENSSL_cleanse(api->e2b->secret, sizeof(api->e2b->secret));
    free(api->e2b);
    api->e2b = NULL;
}

/* Hex HMAC-SHA256 of prefix + id under the daemon's secret. */
static void hmac_hex(const struct wr_api *api, const char *prefix, const char *sandbox_id,
                     char out[E2B_TOKEN_HEX + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    _cleanup_free_ char *msg = xasprintf("%s%s", prefix, sandbox_id);

    HMAC(EVP_sha256(), api->e2b->secret, sizeof(api->e2b->secret), (const unsigned char *)msg,
         strlen(msg), mac, &len);
    for (unsigned i = 0; i < 32; i++) {
        out[2 * i] = hex[mac[i] >> 4];
        out[2 * i + 1] = hex[mac[i] & 15];
    }
    out[E2B_TOKEN_HEX] = '\0';
}

void e2b_token(const struct wr_api *api, const char *sandbox_id, char out[E2B_TOKEN_HEX + 1])
{
    hmac_hex(api, "", sandbox_id, out);
}

void wr_e2b_traffic_token(const struct wr_api *api, const char *sandbox_id,
                          char out[E2B_TOKEN_HEX + 1])
{
    hmac_hex(api, "sandbox-traffic-", sandbox_id, out);
}

static bool token_ok(const struct wr_api *api, const char *id, const char *presented)
{
    char want[E2B_TOKEN_HEX + 1];

    if (presented == NULL || strlen(presented) != E2B_TOKEN_HEX)
        return false;
    e2b_token(api, id, want);
    return CRYPTO_memcmp(want, presented, E2B_TOKEN_HEX) == 0;
}

/* A signed /files URL (envd's validateSigning): signature = "v1_" + base64 without padding of
 * sha256("<path>:<read|write>:<username>:<token>[:<expiration>]"). */
static bool signature_ok(const struct wr_api *api, struct wr_http_req *req, const char *id)
{
    const char *sig = wr_http_req_query(req, "signature");
    const char *exp = wr_http_req_query(req, "signature_expiration");
    const char *path = wr_http_req_query(req, "path");
    const char *user = wr_http_req_query(req, "username");
    const char *op = strcmp(wr_http_req_method(req), "GET") == 0 ? "read" : "write";
    unsigned char digest[32];
    char token[E2B_TOKEN_HEX + 1], b64[48];
    _cleanup_free_ char *msg = NULL;
    size_t n;

    if (sig == NULL || path == NULL || strncmp(sig, "v1_", 3) != 0)
        return false;
    if (exp != NULL) {
        char *end;
        long long t = strtoll(exp, &end, 10);
        if (*exp == '\0' || *end != '\0' || t < (long long)time(NULL))
            return false;
    }
    e2b_token(api, id, token);
    msg = exp ? xasprintf("%s:%s:%s:%s:%s", path, op, user ? user : "", token, exp)
              : xasprintf("%s:%s:%s:%s", path, op, user ? user : "", token);
    EVP_Digest(msg, strlen(msg), digest, NULL, EVP_sha256(), NULL);
    n = wr_b64_encode(digest, sizeof(digest), b64);
    while (n > 0 && b64[n - 1] == '=')
        n--;
    return strlen(sig + 3) == n && CRYPTO_memcmp(sig + 3, b64, n) == 0;
}

/* ---- helpers -------------------------------------------------------------------------------- */

const char *e2b_str(json_t *obj, const char *camel, const char *snake)
{
    json_t *v = json_object_get(obj, camel);

    if (v == NULL && snake != NULL)
        v = json_object_get(obj, snake);
    return json_string_value(v);
}

static const char *home_of(const char *user)
{
    if (user != NULL && strcmp(user, "root") == 0)
        return "/root";
    return NULL;
}

char *e2b_abs_path(const char *user, const char *path)
{
    const char *home = home_of(user);
    _cleanup_free_ char *h = NULL;

    if (path == NULL || path[0] == '\0' || strlen(path) >= WR_MAX_PATH - 64)
        return NULL;
    if (path[0] == '/')
        return xstrdup(path);
    if (home == NULL)
        home = h = xasprintf("/home/%s", user ? user : "user");
    if (strcmp(path, "~") == 0)
        return xstrdup(home);
    if (strncmp(path, "~/", 2) == 0)
        path += 2;
    return xasprintf("%s/%s", home, path);
}

/* The user of Authorization: Basic base64("<user>:"), or NULL. Copied into buf. */
static const char *basic_user(struct wr_http_req *req, char *buf, size_t size)
{
    const char *h = wr_http_req_header(req, "Authorization");
    struct wr_buf out;
    char *colon;

    if (h == NULL || strncasecmp(h, "Basic ", 6) != 0)
        return NULL;
    h += 6;
    wr_buf_init(&out);
    if (wr_b64_decode_buf(h, strlen(h), WR_B64_LENIENT, &out) < 0 || out.len == 0 ||
        out.len >= size) {
        wr_buf_fini(&out);
        return NULL;
    }
    memcpy(buf, out.data, out.len);
    buf[out.len] = '\0';
    wr_buf_fini(&out);
    if ((colon = strchr(buf, ':')) != NULL)
        *colon = '\0';
    return buf[0] ? buf : NULL;
}

uint64_t e2b_keepalive_ms(struct wr_http_req *req)
{
    const char *ka = wr_http_req_header(req, "Keepalive-Ping-Interval");
    uint64_t s = 0;

    if (ka != NULL) {
        char *end;
        s = strtoull(ka, &end, 10);
        if (*ka == '\0' || *end != '\0')
            s = 0;
    }
    return (s >= 1 && s <= 3600 ? s : 50) * 1000;
}

/* ---- Connect calls --------------------------------------------------------------------------- */

struct rpc_ctx {
    struct e2b_envd ev;
    const struct e2b_method *m;
    char user[128];
};

static void rpc_closed(struct wr_http_req *req, void *data, bool aborted)
{
    struct rpc_ctx *r = data;
    wr_live_sb_unref(r->ev.sb);
    free(r);
}

static void rpc_body(struct wr_http_req *req, const char *body, size_t len)
{
    struct rpc_ctx *r = wr_http_req_data(req);
    struct e2b_envd ev = r->ev;
    const struct e2b_method *m = r->m;
    char user[128];
    json_t *j;

    snprintf(user, sizeof(user), "%s", r->user);
    ev.user = user[0] ? user : NULL;
    wr_http_req_set_data(req, NULL, NULL);
    free(r);
    j = connect_decode(req, m->streaming, body, len);
    if (j != NULL && !wr_live_sb_alive(ev.sb)) {
        if (m->streaming)
            connect_stream_end(req, "unavailable", "the sandbox is not running");
        else
            connect_unary_error(req, "unavailable", "the sandbox is not running");
    } else if (j != NULL) {
        m->handler(&ev, req, j);
    }
    json_decref(j);
    wr_live_sb_unref(ev.sb);
}

void e2b_rpc(struct e2b_envd *ev, struct wr_http_req *req, const struct e2b_service *svc,
             const char *method)
{
    const struct e2b_method *m = svc->methods;
    struct rpc_ctx *r;

    if (strcmp(wr_http_req_method(req), "POST") != 0) {
        connect_unary_error(req, "unimplemented", "Connect calls are POST");
        return;
    }
    while (m->name != NULL && strcmp(m->name, method) != 0)
        m++;
    if (m->name == NULL) {
        connect_unary_error(req, "unimplemented", "%s/%s is not implemented", svc->name, method);
        return;
    }
    r = xcalloc(1, sizeof(*r));
    r->ev = *ev;
    r->ev.user = NULL;
    r->m = m;
    snprintf(r->user, sizeof(r->user), "%s", ev->user ? ev->user : "");
    wr_live_sb_ref(ev->sb);
    wr_http_req_set_data(req, r, rpc_closed);
    wr_http_req_read_body(req, CONNECT_MAX_REQUEST, rpc_body);
}

/* ---- routing -------------------------------------------------------------------------------- */

/* Host "<port>-<id>.<domain>[:p]": 1 with port and id filled; 0 if the Host is not of that
 * shape; -1 if it is but the port is not a port in canonical decimal ("0", "08080", "65536",
 * "-1"): id is filled. A first label that starts with a digit or '-' and has a '-' after it is
 * taken for that shape. */
static int host_route(const char *host, unsigned *port, char *id, size_t idsize)
{
    const char *dash, *dot;

    if (host == NULL || !(isdigit((unsigned char)host[0]) || host[0] == '-'))
        return 0;
    dash = strchr(host + 1, '-');
    dot = strchr(host, '.');
    if (dash == NULL || dot == NULL || dash > dot || dot == dash + 1 ||
        (size_t)(dot - dash - 1) >= idsize)
        return 0;
    for (const char *c = dash + 1; c < dot; c++)
        if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-')
            return 0;
    memcpy(id, dash + 1, (size_t)(dot - dash - 1));
    id[dot - dash - 1] = '\0';
    if (host[0] == '-') {
        /* "-1-<id>": a negative port */
        return -1;
    }
    return api_port_parse(host, (size_t)(dash - host), port) ? 1 : -1;
}

/* A sandbox id as the daemon makes them: 1 to 64 of [A-Za-z0-9_-] (the header's value is the
 * client's bytes, echoed in the 502). */
static bool id_ok(const char *id)
{
    size_t n = strlen(id);

    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)id[i]) && id[i] != '_' && id[i] != '-')
            return false;
    return true;
}

/* What E2B's proxy answers for a sandbox it cannot reach. */
static void not_reachable(struct wr_http_req *req, const char *id, const char *msg)
{
    wr_http_respond_json(req, 502,
                         json_pack("{s:s,s:s,s:i}", "sandboxId", id, "message", msg, "code", 502));
}

/* 401 for a request without a valid access token: the same for every sandbox id, existing or
 * not (the token is an HMAC of the id, checked in constant time). */
static void unauthenticated(struct wr_http_req *req, bool rpc)
{
    const char *msg = wr_http_req_header(req, "X-Access-Token") == NULL
                          ? "the X-Access-Token header is missing"
                          : "the access token is not valid for this sandbox";

    if (rpc)
        connect_unary_error(req, "unauthenticated", "%s", msg);
    else
        api_fail(req, WR_EUNAUTHORIZED, "%s", msg);
}

/* GET /health: 204 if the sandbox runs, 502 (E2B's proxy's answer) if not; the SDKs' isRunning()
 * reads it, and they send the access token with it. Said only to a caller with a credential for
 * the sandbox: its access token, or an API key of the team that owns it (another team's sandbox
 * is not found). Without one, every id gets the same 401, so /health tells nobody which sandboxes
 * exist. */
static void health(struct wr_api *api, struct wr_http_req *req, const char *id)
{
    const char *team = NULL;
    struct wr_caller who;
    struct wr_err err;

    if (!token_ok(api, id, wr_http_req_header(req, "X-Access-Token"))) {
        const char *auth = wr_http_req_header(req, "Authorization");
        bool key = wr_http_req_header(req, "X-API-Key") != NULL ||
                   (auth != NULL && strncasecmp(auth, "Bearer ", 7) == 0);
        if (!key && !wr_http_req_is_unix(req)) {
            unauthenticated(req, false);
            return;
        }
        if (api_authenticate(api, req, &who) < 0)
            return;
        team = who.admin ? NULL : who.team;
    }
    if (wr_manager_find(api->mgr, team, id, &err) == NULL)
        not_reachable(req, id,
                      err.kind == WR_ECONFLICT ? "The sandbox is not running"
                                               : "The sandbox was not found");
    else
        wr_http_respond(req, 204, NULL, NULL, 0);
}

/* The Connect service of a path "/<service>/<method>": NULL if it is none; *method is set. */
static const struct e2b_service *rpc_service(const char *path, const char **method)
{
    static const struct e2b_service *const services[] = {&e2b_process_service, &e2b_fs_service};

    for (size_t i = 0; i < WR_ARRAY_SIZE(services); i++) {
        size_t n = strlen(services[i]->name);
        if (path[0] == '/' && strncmp(path + 1, services[i]->name, n) == 0 && path[n + 1] == '/') {
            *method = path + n + 2;
            return services[i];
        }
    }
    return NULL;
}

static void envd(struct wr_api *api, struct wr_http_req *req, const char *id, unsigned port)
{
    const char *path = wr_http_req_path(req);
    const char *method = wr_http_req_method(req);
    char ubuf[128];
    struct e2b_envd ev = {.api = api};
    struct wr_live_sb *sb;
    struct wr_err err;
    const char *rpc_method = NULL;
    const struct e2b_service *rpc = rpc_service(path, &rpc_method);

    if (port != E2B_ENVD_PORT) {
        api_port_e2b(api, req, id, port);
        return;
    }
    if (strcmp(path, "/health") == 0) {
        if (strcmp(method, "GET") != 0) {
            api_fail(req, WR_EMETHOD, "use GET");
            return;
        }
        health(api, req, id);
        return;
    }
    /* The token first: without it, nothing tells whether a sandbox exists. */
    if (!token_ok(api, id, wr_http_req_header(req, "X-Access-Token")) &&
        !(strcmp(path, "/files") == 0 && signature_ok(api, req, id))) {
        unauthenticated(req, rpc != NULL);
        return;
    }
    sb = wr_manager_find(api->mgr, NULL, id, &err);
    if (sb == NULL) {
        not_reachable(req, id,
                      err.kind == WR_ECONFLICT ? "The sandbox is not running (paused: connect "
                                                 "to resume it)"
                                               : "The sandbox was not found");
        return;
    }
    ev.sb = sb;
    ev.user = basic_user(req, ubuf, sizeof(ubuf));
    if (ev.user == NULL && strcmp(path, "/files") == 0)
        ev.user = wr_http_req_query(req, "username");
    if (ev.user != NULL && ev.user[0] == '\0')
        ev.user = NULL;
    wr_live_sb_ref(sb);
    if (rpc != NULL)
        e2b_rpc(&ev, req, rpc, rpc_method);
    else if (strcmp(path, "/files") == 0)
        e2b_files(&ev, req);
    else
        api_fail(req, WR_ENOTFOUND, "envd has no endpoint %s %s", method, path);
    wr_live_sb_unref(sb);
}

static bool control_path(const char *path)
{
    static const char *const prefixes[] = {"/sandboxes", "/v2/sandboxes", "/snapshots",
                                           "/templates", "/events",       NULL};

    for (const char *const *p = prefixes; *p != NULL; p++) {
        size_t n = strlen(*p);
        if (strncmp(path, *p, n) == 0 && (path[n] == '\0' || path[n] == '/'))
            return true;
    }
    return false;
}

bool e2b_handle(struct wr_api *api, struct wr_http_req *req)
{
    const char *path = wr_http_req_path(req);
    const char *id = wr_http_req_header(req, "E2b-Sandbox-Id");
    const char *port_h = wr_http_req_header(req, "E2b-Sandbox-Port");
    char hid[128];
    unsigned port = E2B_ENVD_PORT, hport = 0;
    struct wr_caller who;
    int hr;

    if (api->e2b == NULL)
        return false;
    if (id == NULL) {
        id = wr_http_req_header(req, "Novita-Sandbox-Id");
        port_h = wr_http_req_header(req, "Novita-Sandbox-Port");
    }
    hr = host_route(wr_http_req_header(req, "Host"), &hport, hid, sizeof(hid));
    if (id != NULL) {
        bool port_ok = true;
        if (port_h != NULL)
            port_ok = api_port_parse(port_h, strlen(port_h), &port);
        wr_http_req_numeric_errors(req);
        if (!id_ok(id)) {
            not_reachable(req, "", "The sandbox was not found");
            return true;
        }
        if (!port_ok) {
            not_reachable(req, id, "The sandbox port is not valid");
            return true;
        }
        /* A Host naming another sandbox or port than the headers: which one is meant? */
        if (hr != 0 && (hr < 0 || strcmp(hid, id) != 0 || hport != port)) {
            api_fail(req, WR_EINVAL,
                     "the Host header names another sandbox or port than the E2b-Sandbox-Id "
                     "and E2b-Sandbox-Port headers");
            return true;
        }
        envd(api, req, id, port);
        return true;
    }
    if (hr != 0) {
        wr_http_req_numeric_errors(req);
        if (!id_ok(hid)) {
            not_reachable(req, "", "The sandbox was not found");
            return true;
        }
        if (hr < 0) {
            not_reachable(req, hid, "The sandbox port is not valid");
            return true;
        }
        envd(api, req, hid, hport);
        return true;
    }
    if (!control_path(path))
        return false;
    wr_http_req_numeric_errors(req);
    if (api_authenticate(api, req, &who) < 0 || api_limits_request(api, req, &who, true) < 0)
        return true;
    e2b_control(api, req, &who);
    return true;
}
