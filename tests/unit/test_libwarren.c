/* SPDX-License-Identifier: Apache-2.0 */
/* libwarren's parts that need no daemon: endpoint URLs, the configuration's defaults, the
 * mapping of the daemon's answers to warren_error, and the JSON of create and exec requests.
 * (tests/integration/test_libwarren.py runs the library against a real warrend.) */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/lib/config.h"
#include "../../src/lib/lib.h"
#include "tap.h"

static void test_urls(void)
{
    static const char *const good[] = {
        "unix:///run/warrend/warrend.sock", "http://127.0.0.1",  "http://127.0.0.1:7860",
        "http://127.0.0.1:7860/",           "http://[::1]:7860", "http://localhost:1",
    };
    static const char *const bad[] = {
        "unix://relative.sock", "http://",
        "http://host:",         "http://host:0",
        "http://host:65536",    "http://host:12x",
        "http://host:1/v1",     "http://[::1",
        "ftp://host",           "",
        "/no/scheme",
    };
    struct wr_err e;

    for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
        ok(wl_http_check_url(good[i], &e) == 0, "url %s is accepted", good[i]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        ok(wl_http_check_url(bad[i], &e) < 0 && e.kind == WR_EINVAL, "url `%s` is refused", bad[i]);
    is_int(wl_http_check_url("https://h:1", &e), -1, "https is refused");
    is_int(e.kind, WR_EUNSUPPORTED, "https is unsupported, not invalid");
}

static void test_connect_errors(void)
{
    char dir[] = "/tmp/libwarren-test-XXXXXX", path[128];
    warren_error err;
    warren *w = (warren *)&err; /* must not be touched on failure */

    ok(mkdtemp(dir) != NULL, "a scratch directory");
    snprintf(path, sizeof(path), "%s/none.sock", dir);
    is_int(warren_connect(path, "", &w, &err), -1, "a plain path to no socket fails");
    is_int(err.code, WARREN_ESYS, "... a system error");
    is_int(err.sys_errno, ENOENT, "... ENOENT");
    is_int(err.status, 0, "... no HTTP status");
    ok(strstr(err.message, path) != NULL, "... the message names the socket: %s", err.message);
    ok(w == (warren *)&err, "... *out is left alone");
    is_int(warren_connect("https://127.0.0.1:1", "", &w, &err), -1, "https fails");
    is_int(err.code, WARREN_EUNSUPPORTED, "... as unsupported");
    is_int(warren_connect("gopher://x", NULL, &w, NULL), -1, "a NULL err is allowed");
    rmdir(dir);
}

static void test_config(void)
{
    char dir[] = "/tmp/libwarren-test-XXXXXX", sub[160], file[192];
    struct wl_config cfg;
    struct wr_err e;
    FILE *f;

    ok(mkdtemp(dir) != NULL, "a scratch config home");
    setenv("XDG_CONFIG_HOME", dir, 1);
    unsetenv("WARREN_API_URL");
    unsetenv("WARREN_API_KEY");
    is_int(wl_config_load(&cfg, &e), 0, "no config file is no error");
    is_str(cfg.endpoint, WL_DEFAULT_ENDPOINT, "... the default endpoint");
    ok(cfg.key == NULL, "... no key");
    is_str(cfg.key_from, "none", "... from nowhere");
    wl_config_fini(&cfg);

    snprintf(sub, sizeof(sub), "%s/warren", dir);
    snprintf(file, sizeof(file), "%s/config.json", sub);
    mkdir(sub, 0700);
    f = fopen(file, "w");
    fputs("{\"endpoint\": \"http://127.0.0.1:7860\", \"key\": \"k1\"}", f);
    fclose(f);
    is_int(wl_config_load(&cfg, &e), 0, "a config file");
    is_str(cfg.endpoint, "http://127.0.0.1:7860", "... its endpoint");
    is_str(cfg.key, "k1", "... its key");
    is_str(cfg.endpoint_from, "config", "... from the file");
    wl_config_fini(&cfg);

    setenv("WARREN_API_URL", "unix:///x.sock", 1);
    setenv("WARREN_API_KEY", "k2", 1);
    is_int(wl_config_load(&cfg, &e), 0, "the environment");
    is_str(cfg.endpoint, "unix:///x.sock", "... WARREN_API_URL wins");
    is_str(cfg.key, "k2", "... WARREN_API_KEY wins");
    wl_config_fini(&cfg);
    setenv("WARREN_API_KEY", "", 1);
    is_int(wl_config_load(&cfg, &e), 0, "an empty WARREN_API_KEY");
    is_str(cfg.key, "k1", "... is unset, so the file's key counts");
    wl_config_fini(&cfg);
    unsetenv("WARREN_API_URL");
    unsetenv("WARREN_API_KEY");

    f = fopen(file, "w");
    fputs("[1, 2", f);
    fclose(f);
    is_int(wl_config_load(&cfg, &e), -1, "a malformed config file fails");
    is_int(e.kind, WR_EINVAL, "... as invalid");
    ok(strstr(e.msg, file) != NULL, "... naming the file: %s", e.msg);
    ok(cfg.path == NULL && cfg.endpoint == NULL, "... leaving nothing to free");
    unlink(file);
    rmdir(sub);
    rmdir(dir);
    unsetenv("XDG_CONFIG_HOME");
}

/* A daemon's answer as the transport hands it over. */
static void resp_of(struct wl_http_resp *r, int status, const char *body, const char *retry)
{
    memset(r, 0, sizeof(*r));
    r->status = status;
    r->body = body ? strdup(body) : NULL;
    r->body_len = body ? strlen(body) : 0;
    if (retry != NULL) {
        r->headers = calloc(1, sizeof(*r->headers));
        r->headers[0].name = strdup("Retry-After");
        r->headers[0].value = strdup(retry);
        r->n_headers = 1;
    }
}

static void test_errors(void)
{
    struct wl_http_resp r;
    warren_error err;

    /* The public codes are the daemon's kinds, names included. */
    is_str(warren_strcode(WARREN_EOK), "ok", "strcode ok");
    is_str(warren_strcode(WARREN_ENOTFOUND), "not_found", "strcode not_found");
    is_str(warren_strcode(WARREN_EUNAUTHORIZED), "unauthorized", "strcode unauthorized");
    is_str(warren_strcode(WARREN_ETIMEOUT), "timeout", "strcode timeout");
    is_str(warren_strcode(WARREN_ESTARTFAILED), "start_failed", "strcode start_failed (the last)");
    is_str(warren_strcode((warren_code)99), "unknown", "strcode out of range");
    is_str(warren_strcode((warren_code)-1), "unknown", "strcode negative");
    for (int k = 1; k < WR_ERR_NKINDS; k++)
        is_int(wl_http_kind_of(warren_strcode((warren_code)k), 200), k, warren_strcode(k));

    /* An API error: the code decides the kind; status, code and message are kept. */
    resp_of(&r, 404, "{\"code\":\"not_found\",\"message\":\"sandbox sb-1 not found\"}", NULL);
    is_int(wl_fail_resp(&err, &r), -1, "an API error fails");
    is_int(err.code, WARREN_ENOTFOUND, "... not_found");
    is_int(err.status, 404, "... status 404");
    is_str(err.api_code, "not_found", "... api_code");
    is_str(err.message, "sandbox sb-1 not found (not_found)", "... the message");
    is_int(err.sys_errno, 0, "... no errno");
    wl_http_resp_fini(&r);

    /* A code the kinds do not name: its status decides; the code is passed on. */
    resp_of(&r, 502, "{\"code\":\"some_new_code\",\"message\":\"a newer daemon\"}", NULL);
    wl_fail_resp(&err, &r);
    is_int(err.code, WARREN_EUPSTREAM, "an unknown code with 502 is upstream");
    is_str(err.api_code, "some_new_code", "... its api_code kept");
    wl_http_resp_fini(&r);

    resp_of(&r, 502, "{\"code\":\"start_failed\",\"message\":\"template x: exit 1\"}", NULL);
    wl_fail_resp(&err, &r);
    is_int(err.code, WARREN_ESTARTFAILED, "start_failed (502) is its own kind");
    is_str(err.api_code, "start_failed", "... its api_code kept");
    wl_http_resp_fini(&r);

    resp_of(&r, 401, "{\"code\":\"unauthorized\",\"message\":\"bad API key\"}", NULL);
    wl_fail_resp(&err, &r);
    is_int(err.code, WARREN_EUNAUTHORIZED, "401 unauthorized");
    wl_http_resp_fini(&r);

    resp_of(&r, 429, "{\"code\":\"limit\",\"message\":\"at capacity\"}", "3");
    wl_fail_resp(&err, &r);
    is_int(err.code, WARREN_ELIMIT, "429 limit");
    ok(strstr(err.message, "retry in 3 s") != NULL, "... Retry-After is told: %s", err.message);
    wl_http_resp_fini(&r);

    /* Not JSON (a proxy's page): the status and the first line. */
    resp_of(&r, 503, "Service Unavailable\r\nmore", NULL);
    wl_fail_resp(&err, &r);
    is_int(err.code, WARREN_ELIMIT, "a bare 503 is a limit");
    is_str(err.api_code, "", "... no api_code");
    is_str(err.message, "HTTP 503: Service Unavailable", "... status and first line");
    wl_http_resp_fini(&r);

    resp_of(&r, 418, NULL, NULL);
    wl_fail_resp(&err, &r);
    is_int(err.code, WARREN_EINTERNAL, "an unknown status is internal");
    is_str(err.message, "HTTP 418", "... the status alone");
    wl_http_resp_fini(&r);

    is_int(wl_check_id("sb-1_A", &err), 0, "a sandbox id");
    is_int(wl_check_id("../etc", &err), -1, "a path is no sandbox id");
    is_int(err.code, WARREN_EINVAL, "... invalid");
    is_int(wl_check_id("", &err), -1, "an empty id");
    is_int(wl_check_id(NULL, &err), -1, "a NULL id");
    is_int(wl_check_name("snapshot", "snap.v1", &err), 0, "a snapshot name");
    is_int(wl_check_name("snapshot", "..", &err), -1, "`..` is no snapshot name");
}

static char *dump(json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    return s;
}

static void test_create_json(void)
{
    const char *env[] = {"A=1", "B=x=y", NULL}, *meta[] = {"team=red", NULL};
    const char *bad_env[] = {"NOEQ", NULL};
    warren_create_opts none = {0};
    warren_create_opts o = {.template_name = "base",
                            .cpus = 0.5,
                            .memory_mb = 256,
                            .timeout_s = 60,
                            .on_timeout = "pause",
                            .env = env,
                            .metadata = meta,
                            .extra_json = "{\"network\": {\"internet\": false}}"};
    warren_error err;
    json_t *b = NULL;
    char *s;

    is_int(wl_create_body(&none, &b, &err), 0, "all defaults");
    s = dump(b);
    is_str(s, "{}", "... an empty body");
    free(s);

    is_int(wl_create_body(&o, &b, &err), 0, "every field");
    s = dump(b);
    is_str(s,
           "{\"cpus\":0.5,\"env\":{\"A\":\"1\",\"B\":\"x=y\"},\"memory_mb\":256,\"metadata\":{"
           "\"team\":\"red\"},\"network\":{\"internet\":false},\"on_timeout\":\"pause\","
           "\"template\":\"base\",\"timeout\":60}",
           "... each in its place");
    free(s);

    o.env = bad_env;
    is_int(wl_create_body(&o, &b, &err), -1, "env without `=` fails");
    is_int(err.code, WARREN_EINVAL, "... invalid");
    is_str(err.message, "env `NOEQ` must be KEY=VALUE", "... naming it");
    json_decref(b);
    o.env = NULL;
    o.extra_json = "[1]";
    is_int(wl_create_body(&o, &b, &err), -1, "extra_json that is no object fails");
    json_decref(b);
    o.extra_json = "{";
    is_int(wl_create_body(&o, &b, &err), -1, "extra_json that is no JSON fails");
    json_decref(b);
}

static void test_exec_json(void)
{
    const char *argv[] = {"sh", "-c", "echo hi", NULL}, *empty[] = {NULL};
    const char *env[] = {"K=V", NULL};
    warren_exec_opts o = {.argv = argv, .env = env, .cwd = "/tmp", .timeout_s = 5};
    warren_error err;
    json_t *b = NULL;
    char *s;

    is_int(wl_exec_body(&o, "stream", &b, &err), 0, "an argv command");
    s = dump(b);
    is_str(s,
           "{\"cmd\":[\"sh\",\"-c\",\"echo hi\"],\"cwd\":\"/tmp\",\"encoding\":\"base64\","
           "\"env\":{\"K\":\"V\"},\"mode\":\"stream\",\"timeout\":5}",
           "... its JSON");
    free(s);

    o = (warren_exec_opts){.shell = "cat", .stdin_data = "hi\n", .stdin_len = 3, .pty = 1};
    is_int(wl_exec_body(&o, "background", &b, &err), 0, "a shell line with input, on a pty");
    s = dump(b);
    is_str(s,
           "{\"cmd\":\"cat\",\"cols\":80,\"encoding\":\"base64\",\"mode\":\"background\","
           "\"pty\":true,\"rows\":24,\"stdin\":\"aGkK\",\"stdin_encoding\":\"base64\"}",
           "... its JSON (input in base64, the default terminal size)");
    free(s);

    o = (warren_exec_opts){.argv = empty};
    is_int(wl_exec_body(&o, "stream", &b, &err), -1, "an empty argv fails");
    is_int(err.code, WARREN_EINVAL, "... invalid");
    json_decref(b);
    o = (warren_exec_opts){0};
    is_int(wl_exec_body(&o, "stream", &b, &err), -1, "no command fails");
    json_decref(b);
    is_int(warren_exec(NULL, "sb", NULL, NULL, &err), -1, "exec without options fails");
    is_int(err.code, WARREN_EINVAL, "... invalid, before touching the client");
}

int main(void)
{
    ok(strcmp(warren_version(), "0.1.0") == 0, "version %s", warren_version());
    test_urls();
    test_connect_errors();
    test_config();
    test_errors();
    test_create_json();
    test_exec_json();
    return done();
}
