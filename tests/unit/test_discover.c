/* SPDX-License-Identifier: Apache-2.0 */
/* Node discovery (src/gateway/discover.h): the static grammar, good and bad, with every refusal
 * naming its entry; the kubernetes grammar; and the nodes of a PodList as the Kubernetes API
 * documents it (tests/unit/data/podlist.json: pods Pending, being deleted, without an IP,
 * Succeeded and on an over-long node name are left out). The API call itself needs a cluster
 * and is not run here. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/gateway/discover.h"
#include "../../src/util/cleanup.h"
#include "../../src/util/fs.h"
#include "../../src/util/xalloc.h"
#include "tap.h"

#include <fcntl.h>

/* A string literal and its length. */
#define S(lit) lit, sizeof(lit) - 1

/* The nodes of spec as "id=host:port id=host:port", or "ERR: <message>" (static storage). */
static const char *list(const char *spec)
{
    static char out[2048];
    struct wr_discovery *d = NULL;
    struct wr_node_addr *a = NULL;
    struct wr_err err;
    size_t n = 0, len = 0;

    wr_err_clear(&err);
    if (wr_discovery_new(spec, &d, &err) < 0 || wr_discovery_list(d, &a, &n, &err) < 0) {
        snprintf(out, sizeof(out), "ERR: %s", err.msg);
        wr_discovery_free(d);
        return out;
    }
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(out + len, sizeof(out) - len, "%s%s=%s:%d", i ? " " : "", a[i].id,
                                a[i].host, a[i].port);
    free(a);
    wr_discovery_free(d);
    return out;
}

/* true if spec is refused with a WR_EINVAL message containing want. */
static bool refused(const char *spec, const char *want)
{
    struct wr_discovery *d = NULL;
    struct wr_err err;
    bool r;

    wr_err_clear(&err);
    if (wr_discovery_new(spec, &d, &err) == 0) {
        printf("#   %s: accepted\n", spec);
        wr_discovery_free(d);
        return false;
    }
    r = err.kind == WR_EINVAL && strstr(err.msg, want) != NULL;
    if (!r)
        printf("#   %s: kind %d, \"%s\" (want \"%s\")\n", spec, err.kind, err.msg, want);
    return r;
}

static void test_static(void)
{
    char long_id[80];

    is_str(list("static:a@127.0.0.1:7070"), "a=127.0.0.1:7070", "one node");
    is_str(list("static:n1@10.0.0.1:7070,n-2@node2.example.com:7071,N_3.x@[::1]:1"),
           "n1=10.0.0.1:7070 n-2=node2.example.com:7071 N_3.x=::1:1",
           "IPv4, DNS name and [IPv6], in order");
    is_str(list("static:a@localhost:65535"), "a=localhost:65535", "port 65535");
    is_str(list("static:v6@[fd00:10::12]:7070"), "v6=fd00:10::12:7070", "IPv6 without brackets");

    ok(refused("static:", "no nodes"), "an empty list");
    ok(refused("static:a@h:1,,b@h:2", "empty entry"), "an empty entry");
    ok(refused("static:a@h:1,", "empty entry"), "a trailing comma");
    ok(refused("static:h:7070", "\"h:7070\": not ID@HOST:PORT"), "no id");
    ok(refused("static:@h:7070", "\"@h:7070\": the id"), "an empty id");
    ok(refused("static:a/b@h:7070", "\"a/b@h:7070\": the id"), "a '/' in the id");
    memset(long_id, 'x', sizeof(long_id));
    {
        char spec[100];
        snprintf(spec, sizeof(spec), "static:%.64s@h:1", long_id);
        ok(refused(spec, "the id must be 1 to 63"), "a 64-byte id");
        snprintf(spec, sizeof(spec), "static:%.63s@h:1", long_id);
        is_int(strlen(list(spec)), 63 + strlen("=h:1"), "a 63-byte id");
    }
    ok(refused("static:a@h", "\"a@h\": no :PORT"), "no port");
    ok(refused("static:a@h:0", "\"a@h:0\": the port must be 1 to 65535"), "port 0");
    ok(refused("static:a@h:65536", "the port must be 1 to 65535"), "port 65536");
    ok(refused("static:a@h:", "the port must be"), "an empty port");
    ok(refused("static:a@h:70x", "the port must be"), "a port with a letter");
    ok(refused("static:a@h:+70", "the port must be"), "a signed port");
    ok(refused("static:a@:7070", "\"a@:7070\": the host"), "an empty host");
    ok(refused("static:a@::1:7070", "the host must be"), "IPv6 without brackets");
    ok(refused("static:a@[::1:7070", "bad [IPv6] host"), "an unclosed bracket");
    ok(refused("static:a@[]:7070", "bad [IPv6] host"), "empty brackets");
    ok(refused("static:a@[10.0.0.1]:7070", "bad [IPv6] host"), "IPv4 in brackets");
    ok(refused("static:a@10.0.0.256:7070", "the host must be"), "a bad IPv4 address");
    ok(refused("static:a@-h.example:7070", "the host must be"), "a label starting with -");
    ok(refused("static:a@h..example:7070", "the host must be"), "an empty label");
    ok(refused("static:a@h_x:7070", "the host must be"), "an underscore in the host");
    ok(refused("static:a@h:1,b@g:2,a@k:3", "\"a@k:3\": id a appears twice"), "a duplicate id");
    ok(refused("nodes:a@h:1", "want static:"), "an unknown source");
    ok(refused("", "want static:"), "an empty spec");
}

static void test_kubernetes_grammar(void)
{
    struct wr_discovery *d = NULL;
    struct wr_err err;

    ok(wr_discovery_new("kubernetes:warren/app.kubernetes.io/name=warren-node@7070", &d, &err) == 0,
       "the DaemonSet's selector, with a port");
    wr_discovery_free(d);
    d = NULL;
    ok(wr_discovery_new("kubernetes:warren/app in (warren-node, x),tier!=gw", &d, &err) == 0,
       "a set-based selector, default port");
    wr_discovery_free(d);

    ok(refused("kubernetes:warren", "want NAMESPACE/LABEL_SELECTOR"), "no selector");
    ok(refused("kubernetes:warren/", "the label selector must be"), "an empty selector");
    ok(refused("kubernetes:warren/@7070", "the label selector must be"), "only a port");
    ok(refused("kubernetes:Warren/app=x", "namespace of [a-z0-9-]"), "a capital in the namespace");
    ok(refused("kubernetes:-w/app=x", "namespace of"), "a namespace starting with -");
    ok(refused("kubernetes:/app=x", "namespace of"), "an empty namespace");
    ok(refused("kubernetes:warren/app=x@0", "the port must be 1 to 65535"), "port 0");
    ok(refused("kubernetes:warren/app=x@http", "the port must be"), "a named port");
    ok(refused("kubernetes:warren/app=x\ny", "control or non-ASCII"), "a newline in the selector");
}

static void test_podlist(void)
{
    _cleanup_free_ char *json = xmalloc(1 << 20);
    struct wr_node_addr *a = NULL;
    struct wr_err err;
    ssize_t len;
    size_t n = 99;

    len = wr_read_fileat(AT_FDCWD, "tests/unit/data/podlist.json", json, 1 << 20, &err);
    ok(len > 0, "read tests/unit/data/podlist.json (run from the tree's root): %s",
       len < 0 ? err.msg : "ok");
    if (len <= 0)
        return;
    ok(wr_discovery_parse_podlist(json, (size_t)len, 7070, &a, &n, &err) == 0, "parse the list");
    is_int(n, 3, "three nodes: Pending, Terminating, no IP, Succeeded, long name left out");
    if (n == 3) {
        is_str(a[0].id, "pool-sandbox-a1", "spec.nodeName is the id");
        is_str(a[0].host, "10.0.1.11", "status.podIP is the host");
        is_int(a[0].port, 7070, "the port given");
        is_str(a[1].id, "pool-sandbox-b2", "second node");
        is_str(a[1].host, "fd00:10::12", "an IPv6 podIP");
        is_str(a[2].id, "warren-node-z9y8x", "no nodeName: metadata.name");
        is_str(a[2].host, "10.0.1.18", "no podIP: status.hostIP");
    }
    free(a);
    a = NULL;

    ok(wr_discovery_parse_podlist(S("{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"items\":[]}"), 1,
                                  &a, &n, &err) == 0 &&
           n == 0 && a == NULL,
       "an empty list");
    ok(wr_discovery_parse_podlist(S("{\"kind\":\"PodList\",\"items\":null}"), 1, &a, &n, &err) ==
               0 &&
           n == 0,
       "items null");
    ok(wr_discovery_parse_podlist(S("{\"kind\":\"Status\",\"message\":\"x\"}"), 1, &a, &n, &err) <
               0 &&
           err.kind == WR_EPROTO && strstr(err.msg, "kind Status"),
       "a Status is not a PodList: %s", err.msg);
    ok(wr_discovery_parse_podlist(S("{\"items\":{}}"), 1, &a, &n, &err) < 0 &&
           strstr(err.msg, "not an array"),
       "items not an array: %s", err.msg);
    ok(wr_discovery_parse_podlist(S("{\"items\":["), 1, &a, &n, &err) < 0 &&
           strstr(err.msg, "bad JSON"),
       "truncated JSON: %s", err.msg);
    {
        static const char dup[] =
            "{\"items\":[{\"spec\":{\"nodeName\":\"n\"},\"status\":{\"phase\":\"Running\","
            "\"podIP\":\"10.0.0.1\"}},{\"spec\":{\"nodeName\":\"n\"},\"status\":{\"phase\":"
            "\"Running\",\"podIP\":\"10.0.0.2\"}},{\"spec\":{\"nodeName\":\"m\"},\"status\":{"
            "\"phase\":\"Running\",\"podIP\":\"not-an-ip\"}},{\"metadata\":{"
            "\"deletionTimestamp\":null},\"spec\":{\"nodeName\":\"k\"},\"status\":{\"phase\":"
            "\"Running\",\"podIP\":\"10.0.0.3\"}}]}";
        ok(wr_discovery_parse_podlist(dup, sizeof(dup) - 1, 9, &a, &n, &err) == 0 && n == 2 &&
               strcmp(a[0].host, "10.0.0.1") == 0 && strcmp(a[1].id, "k") == 0,
           "a second pod on one node, an address that is no IP; deletionTimestamp null is kept");
        free(a);
        a = NULL;
    }
}

int main(void)
{
    test_static();
    test_kubernetes_grammar();
    test_podlist();
    return done();
}
