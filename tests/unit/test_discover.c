/* SPDX-License-Identifier: Apache-2.0 */
/* Node discovery (src/gateway/discover.h): the static grammar, good and bad, with every refusal
 * naming its entry; the kubernetes grammar; and the nodes of a PodList as the Kubernetes API
 * documents it (tests/unit/data/podlist.json: pods Pending, being deleted, without an IP,
 * Succeeded and on an over-long node name are left out). In a test build (TESTING=1), the API
 * call itself against a local stand-in of the API server (k8s_api.py: HTTPS with a certificate of
 * its own as the service account's ca.crt, the Bearer token, Status answers for errors). */
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
    ok(refused("static:a@[::1]", "\"a@[::1]\": no :PORT"), "[IPv6] without a port");
    ok(refused("static:a@[::1]7070", "no :PORT"), "[IPv6] and a port without a colon");
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

#ifdef WR_TESTING
/* Start k8s_api.py in dir with selector; its port, or -1. */
static int start_api(const char *dir, const char *selector, pid_t *pid)
{
    _cleanup_free_ char *cert = xasprintf("%s/server.crt", dir);
    _cleanup_free_ char *key = xasprintf("%s/server.key", dir);
    char line[32] = "";
    int p[2];
    ssize_t n;

    if (pipe(p) < 0)
        return -1;
    *pid = fork();
    if (*pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execlp("python3", "python3", "tests/unit/k8s_api.py", cert, key, "test-token",
               "tests/unit/data/podlist.json", "warren", selector, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    n = read(p[0], line, sizeof(line) - 1);
    close(p[0]);
    return n > 0 ? (int)strtol(line, NULL, 10) : -1;
}

static void stop_api(pid_t pid)
{
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
    struct wr_err err;
    ok(wr_write_fileat(AT_FDCWD, path, text, true, &err) == 0, "write %s", name);
}

/* openssl makes a self-signed certificate for 127.0.0.1 as name.crt and name.key in dir. */
static bool make_cert(const char *dir, const char *name)
{
    _cleanup_free_ char *cmd = xasprintf(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 "
        "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout %s/%s.key "
        "-out %s/%s.crt 2>/dev/null",
        dir, name, dir, name);
    return system(cmd) == 0;
}

static void test_fetch(void)
{
    static const char sel[] = "app.kubernetes.io/name in (warren-node, x),tier!=gw";
    char dir[] = "/tmp/warren-test-k8s-XXXXXX", port[16];
    _cleanup_free_ char *rm = NULL, *spec = NULL;
    pid_t pid = -1;
    int p;

    if (mkdtemp(dir) == NULL || !make_cert(dir, "server") || !make_cert(dir, "other")) {
        ok(1, "# SKIP no openssl to make a certificate");
        return;
    }
    rm = xasprintf("rm -rf %s", dir);
    p = start_api(dir, sel, &pid);
    ok(p > 0, "the stand-in API server listens");
    if (p <= 0) {
        if (pid > 0)
            stop_api(pid);
        (void)!system(rm);
        return;
    }
    snprintf(port, sizeof(port), "%d", p);
    write_file(dir, "token", "test-token\n");
    {
        _cleanup_free_ char *src = xasprintf("%s/server.crt", dir);
        _cleanup_free_ char *dst = xasprintf("%s/ca.crt", dir);
        ok(link(src, dst) == 0, "its certificate is the service account's ca.crt");
    }
    setenv("WARREN_TEST_K8S_SA_DIR", dir, 1);
    unsetenv("KUBERNETES_SERVICE_HOST");
    setenv("KUBERNETES_SERVICE_PORT", port, 1);
    spec = xasprintf("kubernetes:warren/%s@7070", sel);
    ok(strstr(list(spec), "KUBERNETES_SERVICE_HOST") != NULL, "outside a pod: %s", list(spec));
    setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);

    is_str(list(spec),
           "pool-sandbox-a1=10.0.1.11:7070 pool-sandbox-b2=fd00:10::12:7070 "
           "warren-node-z9y8x=10.0.1.18:7070",
           "the selector, percent-encoded, reaches the API: the running pods' nodes");
    is_str(list("kubernetes:warren/app=other"), "", "another selector: no pods, no nodes");
    ok(strstr(list("kubernetes:other/app=x"), "HTTP 403: pods is forbidden") != NULL &&
           strstr(list("kubernetes:other/app=x"), "needs list on pods") != NULL,
       "another namespace: the Status's message and a hint: %s", list("kubernetes:other/app=x"));

    write_file(dir, "token", "wrong-token");
    ok(strstr(list(spec), "HTTP 401") != NULL, "a wrong token: %s", list(spec));
    write_file(dir, "token", "test-token");
    {
        _cleanup_free_ char *ca = xasprintf("%s/ca.crt", dir);
        _cleanup_free_ char *other = xasprintf("%s/other.crt", dir);
        ok(unlink(ca) == 0 && link(other, ca) == 0, "another ca.crt");
    }
    ok(strstr(list(spec), "ERR: discovery kubernetes:warren/") != NULL &&
           strstr(list(spec), "GET https://127.0.0.1:") != NULL,
       "a server the CA did not sign is refused: %s", list(spec));
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv("WARREN_TEST_K8S_SA_DIR");
    stop_api(pid);
    (void)!system(rm);
}
#else
static void test_fetch(void)
{
    ok(1, "# SKIP the API call is tested in test builds (TESTING=1) only");
}
#endif

int main(void)
{
    test_static();
    test_kubernetes_grammar();
    test_podlist();
    test_fetch();
    return done();
}
