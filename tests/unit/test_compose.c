/* SPDX-License-Identifier: Apache-2.0 */
/* Compose files into Warren's service list (src/core/compose.h): a full file compared exactly
 * with its normalized spec, the start order, interpolation, env files, shell splitting, and every
 * refusal naming its key path and line. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/compose.h"
#include "../../src/util/buf.h"
#include "tap.h"

static json_t *env_obj, *ctx_obj;

/* The spec of text, or NULL with *err. */
static json_t *parse(const char *text, const struct wr_compose_limits *lim, struct wr_err *err)
{
    wr_err_clear(err);
    return wr_compose_parse(text, strlen(text), env_obj, ctx_obj, lim, err);
}

/* The compact, sorted JSON of v at key (static storage). */
static const char *dump(const json_t *v)
{
    static char out[16384];
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    snprintf(out, sizeof(out), "%s", s ? s : "(null)");
    free(s);
    return out;
}

/* One service's key of text's spec, as compact JSON, or "ERR: <message>". */
static const char *field(const char *text, const char *service, const char *key)
{
    static char out[16400];
    struct wr_err err;
    json_t *spec = parse(text, NULL, &err), *s;
    size_t i;

    if (spec == NULL) {
        snprintf(out, sizeof(out), "ERR: %s", err.msg);
        return out;
    }
    snprintf(out, sizeof(out), "no service %s", service);
    json_array_foreach(json_object_get(spec, "services"), i, s)
    {
        if (strcmp(json_string_value(json_object_get(s, "name")), service) == 0)
            snprintf(out, sizeof(out), "%s", dump(json_object_get(s, key)));
    }
    json_decref(spec);
    return out;
}

/* "web"'s key in a file of one service, image x, with the given lines. */
static const char *web(const char *lines, const char *key)
{
    static char text[2048];
    snprintf(text, sizeof(text), "services:\n  web:\n    image: x\n%s", lines);
    return field(text, "web", key);
}

static const char full[] = "x-common: &common\n"                                  /* 1 */
                           "  restart: on-failure:3\n"                            /* 2 */
                           "  labels: {team: core}\n"                             /* 3 */
                           "name: shop\n"                                         /* 4 */
                           "services:\n"                                          /* 5 */
                           "  web:\n"                                             /* 6 */
                           "    <<: *common\n"                                    /* 7 */
                           "    image: \"registry.example/web:${TAG:-latest}\"\n" /* 8 */
                           "    command: python -m http.server \"${PORT:-8000}\" --bind '0.0.0.0'\n"
                           "    entrypoint: [\"/usr/bin/env\", \"--\"]\n"
                           "    environment:\n"
                           "      - DEBUG=1\n"
                           "      - PRICE=$$5\n"
                           "      - HOME_DIR\n"
                           "      - ABSENT\n"
                           "    env_file:\n"
                           "      - ./web.env\n"
                           "      - path: ./optional.env\n"
                           "        required: false\n"
                           "    working_dir: /srv/app\n"
                           "    user: \"1000:1000\"\n"
                           "    ports:\n"
                           "      - \"8080\"\n"
                           "      - \"127.0.0.1:80:8000\"\n"
                           "      - target: 9000\n"
                           "        published: \"9000\"\n"
                           "        protocol: tcp\n"
                           "    expose: [\"8000\", 9100]\n"
                           "    volumes:\n"
                           "      - ./app:/srv/app:ro\n"
                           "      - type: volume\n"
                           "        source: cache\n"
                           "        target: /srv//cache/\n"
                           "    depends_on:\n"
                           "      db:\n"
                           "        condition: service_healthy\n"
                           "      cache:\n"
                           "        condition: service_started\n"
                           "        required: true\n"
                           "    healthcheck:\n"
                           "      test: curl -f http://localhost:8000/\n"
                           "      interval: 1m30s\n"
                           "      timeout: 500ms\n"
                           "      start_period: 1.5s\n"
                           "      start_interval: 1s\n"
                           "    cpus: 0.5\n"
                           "    mem_limit: 256m\n"
                           "    stop_signal: SIGINT\n"
                           "    stop_grace_period: 1m\n"
                           "    init: true\n"
                           "    x-note: $1 is not interpolated here\n"
                           "  zed:\n"
                           "    image: busybox\n"
                           "    healthcheck:\n"
                           "      test: [\"NONE\"]\n"
                           "  worker:\n"
                           "    image: busybox\n"
                           "    entrypoint: \"\"\n"
                           "    depends_on: [db]\n"
                           "    healthcheck: {disable: true}\n"
                           "  db:\n"
                           "    image: postgres-test\n"
                           "    environment:\n"
                           "      POSTGRES_PASSWORD: ${DB_PASSWORD:?set DB_PASSWORD}\n"
                           "      PGPORT: 5432\n"
                           "      FLAG: true\n"
                           "      RATIO: 1.5\n"
                           "      FROM_ENV:\n"
                           "    volumes:\n"
                           "      - pgdata:/var/lib/postgresql/data\n"
                           "    ports: [\"5432/tcp\"]\n"
                           "    healthcheck:\n"
                           "      test: [\"CMD\", \"pg_isready\", \"-U\", \"postgres\"]\n"
                           "      interval: 1s\n"
                           "      retries: 5\n"
                           "    deploy:\n"
                           "      resources:\n"
                           "        limits:\n"
                           "          cpus: \"1.5\"\n"
                           "          memory: 1g\n"
                           "    restart: always\n"
                           "  cache:\n"
                           "    image: redis\n"
                           "    command: [\"redis-server\", \"--save\", \"\"]\n"
                           "    healthcheck:\n"
                           "      test: [\"CMD-SHELL\", \"redis-cli ping | grep PONG\"]\n"
                           "      timeout: 10us\n"
                           "    depends_on: [db]\n"
                           "    stop_signal: 9\n"
                           "    restart: unless-stopped\n"
                           "    mem_limit: 512kb\n"
                           "volumes:\n"
                           "  pgdata:\n"
                           "  cache: {}\n";

/* What full normalizes to, in start order: db first, then by name among the ready. */
static const char full_want[] =
    "{\"services\": ["
    "{\"name\": \"db\", \"image\": \"postgres-test\", \"entrypoint\": null, \"command\": null,"
    " \"environment\": {\"POSTGRES_PASSWORD\": \"secret\", \"PGPORT\": \"5432\","
    "  \"FLAG\": \"true\", \"RATIO\": \"1.5\", \"FROM_ENV\": \"from env\"},"
    " \"working_dir\": null, \"user\": null, \"ports\": [5432],"
    " \"volumes\": [{\"type\": \"volume\", \"source\": \"pgdata\","
    "  \"target\": \"/var/lib/postgresql/data\", \"read_only\": false}],"
    " \"depends_on\": [],"
    " \"healthcheck\": {\"test\": [\"pg_isready\", \"-U\", \"postgres\"], \"interval_ms\": 1000,"
    "  \"timeout_ms\": 30000, \"retries\": 5, \"start_period_ms\": 0},"
    " \"restart\": \"always\", \"restart_max\": 0, \"cpus\": 1500, \"mem_limit\": 1073741824,"
    " \"stop_signal\": 15, \"stop_grace_ms\": 10000},"
    "{\"name\": \"cache\", \"image\": \"redis\", \"entrypoint\": null,"
    " \"command\": [\"redis-server\", \"--save\", \"\"], \"environment\": {},"
    " \"working_dir\": null, \"user\": null, \"ports\": [], \"volumes\": [],"
    " \"depends_on\": [{\"service\": \"db\", \"condition\": \"service_started\"}],"
    " \"healthcheck\": {\"test\": [\"/bin/sh\", \"-c\", \"redis-cli ping | grep PONG\"],"
    "  \"interval_ms\": 30000, \"timeout_ms\": 1, \"retries\": 3, \"start_period_ms\": 0},"
    " \"restart\": \"unless-stopped\", \"restart_max\": 0, \"cpus\": 0, \"mem_limit\": 524288,"
    " \"stop_signal\": 9, \"stop_grace_ms\": 10000},"
    "{\"name\": \"web\", \"image\": \"registry.example/web:latest\","
    " \"entrypoint\": [\"/usr/bin/env\", \"--\"],"
    " \"command\": [\"python\", \"-m\", \"http.server\", \"8001\", \"--bind\", \"0.0.0.0\"],"
    " \"environment\": {\"FROM_FILE\": \"yes\", \"DEBUG\": \"1\", \"QUOTED\": \"a b\\n\","
    "  \"SINGLE\": \"${NOT}\", \"REF\": \"yes-x\", \"INLINE\": \"value\", \"EMPTY\": \"\","
    "  \"SPACED\": \"v\", \"PRICE\": \"$5\", \"HOME_DIR\": \"/home/x\"},"
    " \"working_dir\": \"/srv/app\", \"user\": \"1000:1000\", \"ports\": [8080, 8000, 9000, 9100],"
    " \"volumes\": [{\"type\": \"bind\", \"source\": \"app\", \"target\": \"/srv/app\","
    "  \"read_only\": true}, {\"type\": \"volume\", \"source\": \"cache\","
    "  \"target\": \"/srv/cache\", \"read_only\": false}],"
    " \"depends_on\": [{\"service\": \"db\", \"condition\": \"service_healthy\"},"
    "  {\"service\": \"cache\", \"condition\": \"service_started\"}],"
    " \"healthcheck\": {\"test\": [\"/bin/sh\", \"-c\", \"curl -f http://localhost:8000/\"],"
    "  \"interval_ms\": 90000, \"timeout_ms\": 500, \"retries\": 3, \"start_period_ms\": 1500},"
    " \"restart\": \"on-failure\", \"restart_max\": 3, \"cpus\": 500, \"mem_limit\": 268435456,"
    " \"stop_signal\": 2, \"stop_grace_ms\": 60000},"
    "{\"name\": \"worker\", \"image\": \"busybox\", \"entrypoint\": [], \"command\": null,"
    " \"environment\": {}, \"working_dir\": null, \"user\": null, \"ports\": [], \"volumes\": [],"
    " \"depends_on\": [{\"service\": \"db\", \"condition\": \"service_started\"}],"
    " \"healthcheck\": null, \"restart\": \"no\", \"restart_max\": 0, \"cpus\": 0,"
    " \"mem_limit\": 0, \"stop_signal\": 15, \"stop_grace_ms\": 10000},"
    "{\"name\": \"zed\", \"image\": \"busybox\", \"entrypoint\": null, \"command\": null,"
    " \"environment\": {}, \"working_dir\": null, \"user\": null, \"ports\": [], \"volumes\": [],"
    " \"depends_on\": [], \"healthcheck\": null, \"restart\": \"no\", \"restart_max\": 0,"
    " \"cpus\": 0, \"mem_limit\": 0, \"stop_signal\": 15, \"stop_grace_ms\": 10000}],"
    " \"volumes\": [\"pgdata\", \"cache\"], \"external_volumes\": {}}";

/* What `docker compose config` writes: the default network, named; read and dropped. */
static void test_default_network(void)
{
    struct wr_err err;
    json_t *got = parse("name: shop\nservices:\n  a:\n    image: base\n    networks:\n"
                        "      default: null\n  b:\n    image: base\n    networks: [default]\n"
                        "networks:\n  default:\n    name: shop_default\n",
                        NULL, &err);

    ok(got != NULL, "the default network is accepted%s%s", got ? "" : ": ", got ? "" : err.msg);
    json_decref(got);
    got = parse("services:\n  a:\n    image: base\n    networks: [front]\n", NULL, &err);
    ok(got == NULL && strstr(err.msg, "services.a.networks[0] (line 4): not supported") != NULL,
       "another network is refused: %s", got ? "(parsed)" : err.msg);
    json_decref(got);
    got = parse("services:\n  a:\n    image: base\nnetworks:\n  back: {}\n", NULL, &err);
    ok(got == NULL && strstr(err.msg, "networks.back (line 5): not supported") != NULL,
       "a top-level network of another name is refused: %s", got ? "(parsed)" : err.msg);
    json_decref(got);
}

/* external: true names the team's Warren volume: its `name`, else its key. */
static void test_external_volumes(void)
{
    struct wr_err err;
    json_t *got =
        parse("services:\n  a:\n    image: base\n    volumes: [\"d:/d\", \"e:/e\", \"f:/f\"]\n"
              "volumes:\n  d:\n    external: true\n  e:\n    external: true\n"
              "    name: team-vol\n  f: {external: false}\n",
              NULL, &err);
    json_t *want = json_pack("{s:s,s:s}", "d", "d", "e", "team-vol");

    ok(got != NULL && json_equal(json_object_get(got, "external_volumes"), want),
       "external volumes: %s", got ? dump(json_object_get(got, "external_volumes")) : err.msg);
    json_decref(got);
    json_decref(want);
}

static void test_full(void)
{
    struct wr_err err;
    json_t *want = json_loads(full_want, 0, NULL);
    json_t *got = parse(full, NULL, &err);
    json_t *s;
    size_t i;
    char order[256] = "";

    ok(want != NULL, "the expected spec is JSON");
    ok(got != NULL, "the full file parses%s%s", got ? "" : ": ", got ? "" : err.msg);
    ok(json_equal(got, want), "the full file's normalized spec, exactly");
    if (!json_equal(got, want)) {
        printf("#   got  %s\n", dump(got));
        printf("#   want %s\n", dump(want));
    }
    json_array_foreach(json_object_get(got, "services"), i, s)
    {
        size_t n = strlen(order);
        snprintf(order + n, sizeof(order) - n, "%s%s", n ? " " : "",
                 json_string_value(json_object_get(s, "name")));
    }
    is_str(order, "db cache web worker zed", "start order: dependencies first, then by name");
    /* the keys of a service, in the documented order (the API shows them so) */
    {
        char *s0 = json_dumps(json_array_get(json_object_get(got, "services"), 0), JSON_COMPACT);
        ok(strncmp(s0, "{\"name\":\"db\",\"image\":", 21) == 0 &&
               strstr(s0, "\"stop_grace_ms\":10000}") != NULL,
           "a service's keys in the documented order");
        free(s0);
    }
    json_decref(got);
    json_decref(want);
}

static void test_json_input(void)
{
    struct wr_err err;
    const char *text = "{\"services\": {\"web\": {\"image\": \"x\", \"ports\": [\"80:8080\"],\n"
                       "  \"command\": [\"a\", \"b\"], \"depends_on\": {\"db\": {}}},\n"
                       " \"db\": {\"image\": \"y\"}}}";
    json_t *spec = parse(text, NULL, &err);
    const char *bad = "{\n  \"services\": {\n    \"web\": {\n      \"image\": \"x\",\n"
                      "      \"cap_add\": [\"NET_ADMIN\"]\n    }\n  }\n}\n";

    ok(spec != NULL, "JSON input parses");
    is_str(json_string_value(
               json_object_get(json_array_get(json_object_get(spec, "services"), 1), "name")),
           "web", "JSON input: web after db");
    json_decref(spec);
    ok(parse(bad, NULL, &err) == NULL && err.kind == WR_EUNSUPPORTED &&
           strcmp(err.msg, "services.web.cap_add (line 5): not supported") == 0,
       "JSON input: a refused key names its line (%s)", err.msg);
}

static void test_pieces(void)
{
    /* shell splitting */
    is_str(web("    command: sh -c 'echo \"$$HOME\" | cat' \"a b\" c\\ d \"\\\"q\\\"\" ''\n",
               "command"),
           "[\"sh\",\"-c\",\"echo \\\"$HOME\\\" | cat\",\"a b\",\"c d\",\"\\\"q\\\"\",\"\"]",
           "a command string split as a shell splits words; $$ is $; operators stay words");
    is_str(web("    command: a;b && c\n", "command"), "[\"a;b\",\"&&\",\"c\"]",
           "operators are not special");
    is_str(web("    entrypoint: [\"/bin/sh\", \"-c\"]\n    command: null\n", "command"), "null",
           "a null command is the image's");
    /* interpolation */
    is_str(web("    environment:\n      - A=${UNSET}\n      - B=${EMPTY-d}\n"
               "      - C=${EMPTY:-d}\n      - D=${HOME_DIR:+set}\n      - E=${UNSET:+set}\n"
               "      - F=${UNSET:-${HOME_DIR}/x}\n      - G=$HOME_DIR.y\n      - H=${UNSET-}\n",
               "environment"),
           "{\"A\":\"\",\"B\":\"\",\"C\":\"d\",\"D\":\"set\",\"E\":\"\",\"F\":\"/home/x/x\","
           "\"G\":\"/home/x.y\",\"H\":\"\"}",
           "interpolation: unset, -, :-, :+, nested defaults, $VAR");
    is_str(web("    environment: {A: \"${UNSET?}\"}\n", "environment"),
           "ERR: services.web.environment.A (line 4): required variable UNSET is missing a value",
           "${VAR?} without a message");
    is_str(web("    environment: {A: \"${EMPTY?must}\"}\n", "environment"), "{\"A\":\"\"}",
           "${VAR?err} takes an empty value");
    is_str(web("    environment: {A: \"${EMPTY:?must be set}\"}\n", "environment"),
           "ERR: services.web.environment.A (line 4): required variable EMPTY is missing a "
           "value: must be set",
           "${VAR:?err} refuses an empty value, naming the key path");
    ok(strstr(web("    command: echo $1\n", "command"), "invalid interpolation") != NULL,
       "a $ that starts nothing is refused (write $$)");
    ok(strstr(web("    command: echo ${A\n", "command"), "invalid interpolation") != NULL,
       "an unclosed ${ is refused");
    /* durations and sizes */
    is_str(web("    stop_grace_period: 1h2m3.5s\n", "stop_grace_ms"), "3723500",
           "a compound duration");
    is_str(web("    stop_grace_period: 1500us\n", "stop_grace_ms"), "2",
           "microseconds round up to whole milliseconds");
    is_str(web("    stop_grace_period: 0\n", "stop_grace_ms"), "0", "a zero duration");
    is_str(web("    mem_limit: 1024\n", "mem_limit"), "1024", "a size in bytes");
    is_str(web("    mem_limit: 1.5GB\n", "mem_limit"), "1610612736", "a fractional size, GB");
    is_str(web("    mem_limit: 2048b\n", "mem_limit"), "2048", "a size in b");
    is_str(web("    cpus: \"2\"\n", "cpus"), "2000", "cpus as a string");
    is_str(web("    cpus: 0.0001\n", "cpus"), "1", "a tiny nonzero cpus is 1 millicore");
    is_str(web("    stop_signal: term\n", "stop_signal"), "15", "a signal name in any case");
    is_str(web("    restart: \"no\"\n", "restart"), "\"no\"", "restart no");
    is_str(web("    user: 1000\n", "user"), "\"1000\"", "a numeric user becomes a string");
    is_str(web("    ports: [\"[::1]:80:8080\", {target: \"81\"}]\n    expose: [8080]\n", "ports"),
           "[8080,81]", "an IPv6 host part; a target as a string; expose merged once");
    is_str(web("    volumes: [{type: bind, source: ., target: /src, read_only: \"true\"}]\n",
               "volumes"),
           "[{\"read_only\":true,\"source\":\".\",\"target\":\"/src\",\"type\":\"bind\"}]",
           "a bind of the whole context");
    is_str(web("    volumes: [\"./app/./main.py:/m.py:rw,cached\"]\n", "volumes"),
           "[{\"read_only\":false,\"source\":\"app/main.py\",\"target\":\"/m.py\",\"type\":"
           "\"bind\"}]",
           "a bind of one file, normalized; rw and cached");
    is_str(web("    env_file: web.env\n    environment: [FROM_FILE=over]\n", "environment"),
           "{\"DEBUG\":\"0\",\"EMPTY\":\"\",\"FROM_FILE\":\"over\",\"INLINE\":\"value\","
           "\"QUOTED\":\"a b\\n\",\"REF\":\"yes-x\",\"SINGLE\":\"${NOT}\",\"SPACED\":\"v\"}",
           "env_file as a string; environment overrides it");
    is_str(web("    labels: [a=b]\n    init: false\n    x-y: {z: 1}\n", "image"), "\"x\"",
           "labels, init and x-* are accepted and dropped");
}

struct refusal {
    const char *text;
    const char *want; /* a substring of the message */
    enum wr_err_kind kind;
};

#define SVC "services:\n  web:\n    image: x\n"

static const struct refusal refusals[] = {
    {SVC "    privileged: true\n", "services.web.privileged (line 4): not supported",
     WR_EUNSUPPORTED},
    {"services:\n  web:\n    build: .\n", "services.web.build (line 3): not supported",
     WR_EUNSUPPORTED},
    {SVC "networks:\n  front: {}\n", "networks.front (line 5): not supported", WR_EUNSUPPORTED},
    {SVC "    network_mode: host\n", "services.web.network_mode (line 4): not supported",
     WR_EUNSUPPORTED},
    {SVC "    cap_add: [NET_ADMIN]\n", "services.web.cap_add (line 4): not supported",
     WR_EUNSUPPORTED},
    {SVC "    container_name: w\n", "services.web.container_name (line 4): not supported",
     WR_EUNSUPPORTED},
    {SVC "    hostname: w\n", "services.web.hostname (line 4): not supported", WR_EUNSUPPORTED},
    {SVC "    tmpfs: /run\n", "services.web.tmpfs (line 4): not supported", WR_EUNSUPPORTED},
    {SVC "    deploy:\n      replicas: 2\n", "services.web.deploy.replicas (line 5): not supported",
     WR_EUNSUPPORTED},
    {SVC "    deploy:\n      resources:\n        limits:\n          pids: 10\n",
     "services.web.deploy.resources.limits.pids (line 7): not supported", WR_EUNSUPPORTED},
    {SVC "    deploy:\n      resources:\n        reservations: {}\n",
     "services.web.deploy.resources.reservations (line 6): not supported", WR_EUNSUPPORTED},
    {SVC "    volumes: [\"/etc:/x\"]\n",
     "services.web.volumes[0] (line 4): a bind of the host path `/etc` is not supported",
     WR_EUNSUPPORTED},
    {SVC "    volumes:\n      - type: bind\n        source: /var/run/docker.sock\n"
         "        target: /s\n",
     "services.web.volumes[0].source (line 6): a bind of the host path", WR_EUNSUPPORTED},
    {SVC "    volumes: [\"./a/../../etc:/x\"]\n",
     "services.web.volumes[0] (line 4): the source `./a/../../etc`: `..` is not allowed",
     WR_EINVAL},
    {SVC "    volumes: [\"./nothere:/x\"]\n", "the source `./nothere` is not in the context",
     WR_EINVAL},
    {SVC "    volumes: [\"data:/x\"]\n",
     "services.web.volumes[0] (line 4): volume `data` is not declared in the top-level `volumes`",
     WR_EINVAL},
    {SVC "    volumes: [\"/data\"]\n", "an anonymous volume is not supported", WR_EUNSUPPORTED},
    {SVC "    volumes: [\"d:x\"]\nvolumes: {d: }\n", "the target `x` must be an absolute path",
     WR_EINVAL},
    {SVC "    volumes: [\"d:/x/../y\"]\nvolumes: {d: }\n", "the target `/x/../y` has `..`",
     WR_EINVAL},
    {SVC "    volumes: [\"d:/x\", \"./app:/x/\"]\nvolumes: {d: }\n",
     "services.web.volumes[1] (line 4): the target `/x` is mounted twice", WR_EINVAL},
    {SVC "    volumes: [\"d:/x:z\"]\nvolumes: {d: }\n", "the mode `z` is not supported",
     WR_EUNSUPPORTED},
    {SVC "    volumes:\n      - type: tmpfs\n        target: /t\n",
     "services.web.volumes[0].type (line 5): type `tmpfs` is not supported", WR_EUNSUPPORTED},
    {SVC "    volumes:\n      - type: volume\n        source: d\n        target: /t\n"
         "        volume: {nocopy: true}\nvolumes: {d: }\n",
     "services.web.volumes[0].volume (line 8): not supported", WR_EUNSUPPORTED},
    {SVC "volumes:\n  d:\n    name: x\n",
     "volumes.d.name (line 6): not supported without `external: true`", WR_EUNSUPPORTED},
    {SVC "volumes:\n  d:\n    external: yes\n",
     "volumes.d.external (line 6): must be true or false", WR_EINVAL},
    {SVC "volumes:\n  d:\n    external: true\n    name: .x\n",
     "volumes.d.name (line 7): not a Warren volume's name", WR_EINVAL},
    {SVC "volumes:\n  d:\n    driver: local\n", "volumes.d.driver (line 6): not supported",
     WR_EUNSUPPORTED},
    {SVC "    depends_on: [db]\n", "services.web.depends_on[0] (line 4): unknown service `db`",
     WR_EINVAL},
    {SVC "    depends_on: [web]\n",
     "services.web.depends_on (line 4): a dependency cycle: web -> web", WR_EINVAL},
    {"services:\n  a:\n    image: x\n    depends_on: [c]\n  b:\n    image: x\n"
     "    depends_on: [a]\n  c:\n    image: x\n    depends_on: [b]\n  d:\n    image: x\n",
     "services.a.depends_on (line 4): a dependency cycle: a -> c -> b -> a", WR_EINVAL},
    {SVC "    depends_on:\n      db: {condition: service_healthy}\n  db:\n    image: y\n",
     "services.web.depends_on.db (line 5): service `db` has no healthcheck, which service_healthy "
     "needs",
     WR_EINVAL},
    {SVC "    depends_on:\n      db: {condition: service_healthy}\n  db:\n    image: y\n"
         "    healthcheck: {test: [NONE]}\n",
     "service `db` has no healthcheck", WR_EINVAL},
    {SVC "    depends_on:\n      db: {condition: started}\n  db:\n    image: y\n",
     "services.web.depends_on.db.condition (line 5): must be service_started", WR_EINVAL},
    {SVC "    depends_on:\n      db: {required: false}\n  db:\n    image: y\n",
     "services.web.depends_on.db.required (line 5): `required: false` is not supported",
     WR_EUNSUPPORTED},
    {SVC "    depends_on:\n      db: {restart: true}\n  db:\n    image: y\n",
     "services.web.depends_on.db.restart (line 5): not supported", WR_EUNSUPPORTED},
    {SVC "    ports: [\"8080\"]\n  db:\n    image: y\n    expose: [8080]\n",
     "services.db.expose[0] (line 7): port 8080 is also declared by service `web`", WR_EINVAL},
    {SVC "    ports: [\"53:53/udp\"]\n",
     "services.web.ports[0] (line 4): udp ports are not supported", WR_EUNSUPPORTED},
    {SVC "    ports:\n      - target: 53\n        protocol: udp\n",
     "services.web.ports[0].protocol (line 6): udp ports are not supported", WR_EUNSUPPORTED},
    {SVC "    ports: [\"8000-8010:8000-8010\"]\n", "port ranges are not supported",
     WR_EUNSUPPORTED},
    {SVC "    ports: [70000]\n", "services.web.ports[0] (line 4): 70000 is not from 1 to 65535",
     WR_EINVAL},
    {SVC "    ports: [\"http\"]\n", "`http` is not a whole number", WR_EINVAL},
    {SVC "    healthcheck:\n      test: [CMD, x]\n      interval: 1x\n",
     "services.web.healthcheck.interval (line 6): `1x` is not a duration", WR_EINVAL},
    {SVC "    healthcheck:\n      test: [CMD, x]\n      timeout: 30\n",
     "services.web.healthcheck.timeout (line 6): must be a duration", WR_EINVAL},
    {SVC "    healthcheck:\n      interval: 1s\n",
     "services.web.healthcheck (line 4): a healthcheck without `test` is not supported",
     WR_EUNSUPPORTED},
    {SVC "    healthcheck:\n      test: [CMD]\n", "services.web.healthcheck.test (line 5): must be",
     WR_EINVAL},
    {SVC "    healthcheck:\n      test: [CMD, x]\n      disable: true\n",
     "a test and `disable: true` together", WR_EINVAL},
    {SVC "    stop_grace_period: -1s\n", "services.web.stop_grace_period (line 4): `-1s` is not a",
     WR_EINVAL},
    {SVC "    mem_limit: 12q\n", "services.web.mem_limit (line 4): `12q` is not a size", WR_EINVAL},
    {SVC "    mem_limit: 1g\n    deploy: {resources: {limits: {memory: 2g}}}\n",
     "services.web.deploy.resources.limits.memory (line 5): differs from `mem_limit`", WR_EINVAL},
    {SVC "    cpus: 2000\n", "services.web.cpus (line 4): CPUs must be from 0 to 1024", WR_EINVAL},
    {SVC "    command: echo \"unbalanced\n",
     "services.web.command (line 4): cannot be split into words: an unbalanced `\"`", WR_EINVAL},
    {SVC "    entrypoint: \"it's\"\n", "an unbalanced `'`", WR_EINVAL},
    {SVC "    command: \"trailing \\\\\"\n", "a trailing backslash", WR_EINVAL},
    {SVC "    restart: sometimes\n", "services.web.restart (line 4): `sometimes` is not no",
     WR_EINVAL},
    {SVC "    restart: on-failure:x\n",
     "services.web.restart (line 4): `on-failure:x`: the number of retries", WR_EINVAL},
    {SVC "    stop_signal: SIGFOO\n", "`SIGFOO` is not a signal", WR_EINVAL},
    {SVC "    working_dir: app\n", "services.web.working_dir (line 4): must be an absolute path",
     WR_EINVAL},
    {SVC "    env_file: missing.env\n",
     "services.web.env_file[0] (line 4): `missing.env` is not a file of the context", WR_EINVAL},
    {SVC "    env_file: ../secret.env\n", "`..` is not allowed", WR_EINVAL},
    {SVC "    env_file: bad.env\n", "services.web.env_file[0] (line 4): `bad.env` line 2: `1X=y`",
     WR_EINVAL},
    {SVC "    env_file: [{path: web.env, format: raw}]\n",
     "services.web.env_file[0].format (line 4): not supported", WR_EUNSUPPORTED},
    {SVC "    environment: {A: [1]}\n", "services.web.environment.A (line 4): must be a string",
     WR_EINVAL},
    {"services:\n  web:\n    command: x\n", "services.web (line 2): `image` is required",
     WR_EINVAL},
    {"services:\n  Web:\n    image: x\n", "services.Web (line 2): not a service name", WR_EINVAL},
    {"services:\n  web: x\n", "services.web (line 2): must be a mapping", WR_EINVAL},
    {"services: [web]\n", "services (line 1): must be a non-empty mapping", WR_EINVAL},
    {"services: {}\n", "services (line 1): must be a non-empty mapping", WR_EINVAL},
    {"volumes: {}\n", "services: must be a non-empty mapping", WR_EINVAL},
    {"- a\n- b\n", "a Compose file must be a mapping", WR_EINVAL},
    {"include: [other.yaml]\n" SVC, "include (line 1): not supported", WR_EUNSUPPORTED},
    {"services:\n  web:\n    image: x\n  web:\n    image: y\n", "YAML line 4: duplicate key `web`",
     WR_EINVAL},
    {"services:\n  web:\n    image: ${TAG:?need a tag}\n",
     "services.web.image (line 3): required variable TAG is missing a value: need a tag",
     WR_EINVAL},
    {SVC "    image: y\n", "duplicate key `image`", WR_EINVAL},
    {"services:\n  \"we\\nb\":\n    image: x\n", "services.we?b (line 2): not a service name",
     WR_EINVAL},
};

static void test_refusals(void)
{
    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
        struct wr_err err;
        json_t *spec = parse(refusals[i].text, NULL, &err);
        bool good = spec == NULL && strstr(err.msg, refusals[i].want) != NULL &&
                    err.kind == refusals[i].kind && strchr(err.msg, '\n') == NULL;
        ok(good, "refused: %s", refusals[i].want);
        if (getenv("SHOW"))
            printf("#   %s\n", err.msg);
        if (!good)
            printf("#   got %s (%s)\n", spec ? "a spec" : err.msg, wr_err_kind_name(err.kind));
        json_decref(spec);
    }
}

static void test_limits(void)
{
    struct wr_err err;
    struct wr_buf b;

    ok(parse(SVC, &(struct wr_compose_limits){.max_bytes = 10}, &err) == NULL &&
           err.kind == WR_ETOOBIG &&
           strcmp(err.msg, "the Compose file is 30 bytes, more than the 10 allowed") == 0,
       "a text over max_bytes is refused before parsing (%s)", err.msg);
    ok(parse(SVC "  b:\n    image: x\n  c:\n    image: x\n",
             &(struct wr_compose_limits){.max_services = 2}, &err) == NULL &&
           err.kind == WR_ETOOBIG &&
           strcmp(err.msg, "services (line 1): 3 services, more than the 2 allowed") == 0,
       "more services than max_services (%s)", err.msg);
    wr_buf_init(&b);
    wr_buf_puts(&b, "services:\n");
    for (int i = 0; i < 17; i++)
        wr_buf_printf(&b, "  s%d:\n    image: x\n", i);
    ok(parse(wr_buf_str(&b), NULL, &err) == NULL && strstr(err.msg, "more than the 16") != NULL,
       "16 services by default");
    wr_buf_fini(&b);
    /* interpolation cannot grow the file past its bounds */
    wr_buf_init(&b);
    wr_buf_puts(&b, SVC "    command: \"");
    for (int i = 0; i < 300; i++)
        wr_buf_puts(&b, "${BIG}");
    wr_buf_puts(&b, "\"\n");
    ok(parse(wr_buf_str(&b), NULL, &err) == NULL &&
           strstr(err.msg,
                  "services.web.command (line 4): interpolated, the file would be larger") != NULL,
       "interpolation is bounded (%s)", err.msg);
    wr_buf_fini(&b);
    /* YAML's bounds hold */
    wr_buf_init(&b);
    wr_buf_puts(&b, "x-a: &a [x, x, x, x, x, x, x, x, x, x]\nx-b: [");
    for (int i = 0; i < 1001; i++)
        wr_buf_printf(&b, "%s*a", i ? ", " : "");
    wr_buf_puts(&b, "]\n" SVC);
    ok(parse(wr_buf_str(&b), NULL, &err) == NULL && strstr(err.msg, "more than 1000 aliases"),
       "alias expansions are bounded (%s)", err.msg);
    wr_buf_fini(&b);
    /* the inputs */
    {
        json_t *bad_env = json_pack("{s:i}", "A", 1);
        ok(wr_compose_parse(SVC, strlen(SVC), bad_env, NULL, NULL, &err) == NULL &&
               strcmp(err.msg, "env.A: must be a string") == 0,
           "env must hold strings");
        json_decref(bad_env);
        json_t *bad_ctx = json_pack("{s:s}", "./a", "");
        ok(wr_compose_parse(SVC, strlen(SVC), NULL, bad_ctx, NULL, &err) == NULL &&
               strstr(err.msg, "not a relative path in normal form") != NULL,
           "context keys must be normal");
        json_decref(bad_ctx);
        /* Both orders: "a" then "a/b", "a/b" then "a" (jansson keeps insertion order). */
        for (int order = 0; order < 2; order++) {
            json_t *both = order ? json_pack("{s:s,s:s}", "ctx/f", "x", "ctx", "y")
                                 : json_pack("{s:s,s:s}", "ctx", "y", "ctx/f", "x");
            ok(wr_compose_parse(SVC, strlen(SVC), NULL, both, NULL, &err) == NULL &&
                   err.kind == WR_EINVAL &&
                   strstr(err.msg, "`ctx` is a file and a directory of other paths") != NULL,
               "a context path is not both a file and a directory (%s)", err.msg);
            json_decref(both);
        }
        json_t *dir_ok = json_pack("{s:s,s:s}", "ctx/", "", "ctx/f", "x");
        json_t *spec = wr_compose_parse(SVC, strlen(SVC), NULL, dir_ok, NULL, &err);
        ok(spec != NULL, "an empty directory's key beside its files is fine");
        json_decref(spec);
        json_decref(dir_ok);
    }
}

int main(void)
{
    struct wr_buf big;

    wr_buf_init(&big);
    for (int i = 0; i < 4096; i++)
        wr_buf_puts(&big, "0123456789abcdef");
    env_obj = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "PORT", "8001", "DB_PASSWORD", "secret",
                        "HOME_DIR", "/home/x", "EMPTY", "", "FROM_ENV", "from env", "BIG",
                        wr_buf_str(&big));
    wr_buf_fini(&big);
    ctx_obj = json_pack("{s:s, s:s, s:s, s:s}", "web.env",
                        "# comment\n"
                        "\n"
                        "export FROM_FILE=yes\n"
                        "DEBUG=0\r\n"
                        "QUOTED=\"a b\\n\"\n"
                        "SINGLE='${NOT}'  # a comment\n"
                        "REF=${FROM_FILE}-x\n"
                        "INLINE=value # comment\n"
                        "EMPTY=\n"
                        "  SPACED = v\n"
                        "UNSET_BARE\n",
                        "bad.env", "A=1\n1X=y\n", "app/main.py", "print(1)\n", "app/lib/", "");
    test_external_volumes();
    test_default_network();
    test_full();
    test_json_input();
    test_pieces();
    test_refusals();
    test_limits();
    json_decref(env_obj);
    json_decref(ctx_obj);
    return done();
}
