/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox's network in the API: the native `network` object (create, GET, PUT
 * /v1/sandboxes/{id}/network, .../network/stats) and E2B's fields (`allow_internet_access`,
 * `network.{allowOut, denyOut, allowPublicTraffic, maskRequestHost}`), turned into the manager's
 * wr_net_req; the manager validates the entries (E2B's rules and texts). docs/networking.md. */
#include <string.h>

#include "../util/inet.h"
#include "../util/xalloc.h"
#include "api_int.h"

void api_net_req_fini(struct api_net_req *r)
{
    free(r->allow);
    free(r->deny);
    memset(r, 0, sizeof(*r));
}

/* An array of strings at key of obj into *out (pointing into obj's strings). */
static int string_list(struct wr_http_req *req, json_t *obj, const char *key, const char *shown,
                       const char ***out, size_t *n)
{
    json_t *a = json_object_get(obj, key), *v;
    size_t i;

    *out = NULL;
    *n = 0;
    if (a == NULL || json_is_null(a))
        return 0;
    if (!json_is_array(a)) {
        api_fail(req, WR_EINVAL, "`%s` must be an array of strings", shown);
        return -1;
    }
    *out = xcalloc(json_array_size(a) + 1, sizeof(**out));
    json_array_foreach(a, i, v)
    {
        if (!json_is_string(v)) {
            api_fail(req, WR_EINVAL, "`%s[%zu]` must be a string", shown, i);
            return -1;
        }
        (*out)[i] = json_string_value(v);
    }
    *n = json_array_size(a);
    return 0;
}

static int opt_bool(struct wr_http_req *req, json_t *obj, const char *key, const char *shown,
                    int *out)
{
    json_t *v = json_object_get(obj, key);

    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_boolean(v)) {
        api_fail(req, WR_EINVAL, "`%s` must be true or false", shown);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

/* maskRequestHost: ASCII host[:port], with ${PORT} allowed (E2B's rule). */
static bool valid_mask(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 255)
        return false;
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == ':' || c == '$' || c == '{' || c == '}' || c == '_'))
            return false;
    }
    return true;
}

int api_net_parse_native(struct wr_http_req *req, json_t *net, bool create, struct api_net_req *out)
{
    static const char *const allowed[] = {"enabled",         "internet", "allow_out", "deny_out",
                                          "max_connections", "ports",    NULL};
    static const char *const ports_allowed[] = {"public", "mask_host", NULL};
    json_t *v, *ports;

    memset(out, 0, sizeof(*out));
    out->r = (struct wr_net_req){.enabled = -1, .internet = -1, .ports_public = -1};
    if (!json_is_object(net)) {
        api_fail(req, WR_EINVAL, "`network` must be an object");
        return -1;
    }
    if (api_only_keys(req, net, allowed) < 0)
        goto fail;
    if (!create && json_object_get(net, "enabled") != NULL) {
        api_fail(req, WR_EINVAL, "`network.enabled` is chosen at create only");
        goto fail;
    }
    if (opt_bool(req, net, "enabled", "network.enabled", &out->r.enabled) < 0 ||
        opt_bool(req, net, "internet", "network.internet", &out->r.internet) < 0 ||
        string_list(req, net, "allow_out", "network.allow_out", &out->allow, &out->r.n_allow_out) <
            0 ||
        string_list(req, net, "deny_out", "network.deny_out", &out->deny, &out->r.n_deny_out) < 0)
        goto fail;
    out->r.allow_out = out->allow;
    out->r.deny_out = out->deny;
    if ((v = json_object_get(net, "max_connections")) != NULL && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 1000000) {
            api_fail(req, WR_EINVAL, "`network.max_connections` must be from 1 to 1000000");
            goto fail;
        }
        out->r.max_connections = (uint32_t)json_integer_value(v);
    }
    if ((ports = json_object_get(net, "ports")) != NULL && !json_is_null(ports)) {
        if (!json_is_object(ports)) {
            api_fail(req, WR_EINVAL, "`network.ports` must be an object");
            goto fail;
        }
        if (api_only_keys(req, ports, ports_allowed) < 0 ||
            opt_bool(req, ports, "public", "network.ports.public", &out->r.ports_public) < 0)
            goto fail;
        if ((v = json_object_get(ports, "mask_host")) != NULL && !json_is_null(v)) {
            if (!json_is_string(v) || !valid_mask(json_string_value(v))) {
                api_fail(req, WR_EINVAL,
                         "`network.ports.mask_host` must be an ASCII host[:port] (`${PORT}` "
                         "is replaced by the port)");
                goto fail;
            }
            out->r.mask_host = json_string_value(v);
        }
    }
    return 0;
fail:
    api_net_req_fini(out);
    return -1;
}

/* Whether a list has an entry that is not an address or block (a name). */
static bool has_name(const char *const *v, size_t n)
{
    struct wr_cidr4 c;

    for (size_t i = 0; i < n; i++)
        if (wr_cidr4_parse(v[i], true, &c, NULL) < 0)
            return true;
    return false;
}

static bool has_all(const char *const *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], "0.0.0.0/0") == 0)
            return true;
    return false;
}

int api_net_parse_e2b(struct wr_http_req *req, json_t *body, bool create, struct api_net_req *out)
{
    static const char *const allowed[] = {"allowOut",        "denyOut",    "allowPublicTraffic",
                                          "maskRequestHost", "httpsPorts", "rules",
                                          "egressProxy",     NULL};
    json_t *net = json_object_get(body, "network"), *v;
    const char *k;

    memset(out, 0, sizeof(*out));
    /* An E2B sandbox always has a network of its own; internet is policy. */
    out->r = (struct wr_net_req){.enabled = 1, .internet = -1, .ports_public = -1};
    if (opt_bool(req, body, "allow_internet_access", "allow_internet_access", &out->r.internet) < 0)
        return -1;
    if (!create && out->r.internet < 0)
        out->r.internet = 1; /* "Omitting a field clears it": the default is open */
    if (net == NULL || json_is_null(net))
        return 0;
    if (!json_is_object(net)) {
        api_fail(req, WR_EINVAL, "`network` must be an object");
        return -1;
    }
    json_object_foreach(net, k, v)
    {
        bool known = false;
        for (const char *const *a = allowed; *a != NULL; a++)
            known = known || strcmp(*a, k) == 0;
        if (!known) {
            api_fail(req, WR_EINVAL, "unknown field `network.%s`", k);
            return -1;
        }
        if (json_is_null(v))
            continue;
        /* What Warren does not do is refused by name, as E2B's open-source runtime refuses an
         * egress proxy: never silently ignored. */
        if (strcmp(k, "rules") == 0 || strcmp(k, "egressProxy") == 0 ||
            (strcmp(k, "httpsPorts") == 0 && json_array_size(v) > 0)) {
            api_fail(req, WR_EINVAL, "`network.%s` is not supported by this server", k);
            return -1;
        }
        if (!create && (strcmp(k, "allowPublicTraffic") == 0 || strcmp(k, "maskRequestHost") == 0))
            continue; /* set at create; an update does not carry them */
    }
    if (string_list(req, net, "allowOut", "network.allowOut", &out->allow, &out->r.n_allow_out) <
            0 ||
        string_list(req, net, "denyOut", "network.denyOut", &out->deny, &out->r.n_deny_out) < 0)
        goto fail;
    out->r.allow_out = out->allow;
    out->r.deny_out = out->deny;
    /* E2B checks this on the lists as given, whatever allow_internet_access says. */
    if (has_name(out->allow, out->r.n_allow_out) && !has_all(out->deny, out->r.n_deny_out)) {
        api_fail(req, WR_EINVAL,
                 "When specifying allowed domains in allow out, you must include 'ALL_TRAFFIC' "
                 "in deny out to block all other traffic.");
        goto fail;
    }
    if (create) {
        if (opt_bool(req, net, "allowPublicTraffic", "network.allowPublicTraffic",
                     &out->r.ports_public) < 0)
            goto fail;
        if ((v = json_object_get(net, "maskRequestHost")) != NULL && !json_is_null(v)) {
            if (!json_is_string(v) || !valid_mask(json_string_value(v))) {
                api_fail(req, WR_EINVAL, "maskRequestHost must be an ASCII host[:port]");
                goto fail;
            }
            out->r.mask_host = json_string_value(v);
        }
    }
    return 0;
fail:
    api_net_req_fini(out);
    return -1;
}

json_t *api_network_json(const struct wr_sandbox_rec *r)
{
    json_t *j = r->net_json ? json_loads(r->net_json, 0, NULL) : NULL;

    if (!json_is_object(j)) {
        json_decref(j);
        return json_pack("{s:b,s:b,s:[],s:[],s:n,s:n,s:{s:b,s:n}}", "enabled", false, "internet",
                         false, "allow_out", "deny_out", "max_connections", "address", "ports",
                         "public", true, "mask_host");
    }
    if (r->net_slot < 0) /* ended: the address is another sandbox's now */
        json_object_set_new(j, "address", json_null());
    return j;
}

/* ---- handlers ------------------------------------------------------------------------------- */

void api_sandbox_network_get(struct api_call *c)
{
    struct wr_sandbox_rec rec;
    struct wr_err err;

    if (wr_manager_get(c->api->mgr, c->team, c->seg[1], &rec, &err) < 0) {
        api_error(c->req, &err);
        return;
    }
    wr_http_respond_json(c->req, 200, api_network_json(&rec));
    wr_sandbox_rec_fini(&rec);
}

void api_sandbox_network_put(struct api_call *c)
{
    struct api_net_req nr;
    struct wr_sandbox_rec rec;
    struct wr_err err;
    json_t *j = api_parse_object(c->req, c->body, c->len);

    if (j == NULL)
        return;
    if (api_net_parse_native(c->req, j, false, &nr) == 0) {
        if (wr_manager_set_network(c->api->mgr, c->team, c->seg[1], &nr.r, &rec, &err) < 0) {
            api_error(c->req, &err);
        } else {
            wr_http_respond_json(c->req, 200, api_network_json(&rec));
            wr_sandbox_rec_fini(&rec);
        }
        api_net_req_fini(&nr);
    }
    json_decref(j);
}

void api_sandbox_network_stats(struct api_call *c)
{
    struct wr_net_stats st;
    struct wr_err err;

    if (wr_manager_network_stats(c->api->mgr, c->team, c->seg[1], &st, &err) < 0) {
        api_error(c->req, &err);
        return;
    }
    wr_http_respond_json(
        c->req, 200,
        json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "packets_out", (json_int_t)st.packets_out,
                  "bytes_out", (json_int_t)st.bytes_out, "packets_dropped",
                  (json_int_t)st.packets_dropped, "bytes_dropped", (json_int_t)st.bytes_dropped,
                  "packets_in", (json_int_t)st.packets_in, "bytes_in", (json_int_t)st.bytes_in));
}
