/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox verbs: `warren create`, `ls`, `info`, `rm`, `timeout`, `pause` and `resume`. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../util/cleanup.h"
#include "../util/parse.h"
#include "../util/xalloc.h"
#include "client.h"

#define MAX_TIMEOUT_S (86400ull * 365)

struct cli_http *cli_connect_or_complain(const char *verb)
{
    struct cli_http *c = NULL;
    struct wr_err err;

    if (cli_connect(&c, &err) < 0) {
        cli_errorf("%s: %s", verb, err.msg);
        return NULL;
    }
    return c;
}

/* A relative rendering of an RFC 3339 UTC time ("4m10s", "expired"), or NULL if unparsable. */
static char *relative_time(const char *when)
{
    struct tm tm = {0};
    const char *rest = when ? strptime(when, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    long long d;

    if (rest == NULL)
        return NULL;
    if (*rest == '.')
        rest += 1 + strspn(rest + 1, "0123456789");
    if (strcmp(rest, "Z") != 0 && strcmp(rest, "+00:00") != 0)
        return NULL;
    d = (long long)(timegm(&tm) - time(NULL));
    if (d <= 0)
        return xstrdup("expired");
    if (d < 3600)
        return xasprintf("%lldm%02llds", d / 60, d % 60);
    if (d < 86400)
        return xasprintf("%lldh%02lldm", d / 3600, d / 60 % 60);
    return xasprintf("%lldd%02lldh", d / 86400, d / 3600 % 24);
}

static char *memory_str(json_int_t mb)
{
    if (mb >= 1024 && mb % 1024 == 0)
        return xasprintf("%lldG", (long long)(mb / 1024));
    return xasprintf("%lldM", (long long)mb);
}

static void print_row(const char *id, const char *tmpl, const char *state, const char *cpus,
                      const char *mem, const char *exp)
{
    printf("%-24s %-12s %-9s %-5s %-7s %s\n", id, tmpl, state, cpus, mem, exp);
}

static void print_sandbox_row(const json_t *s)
{
    char cpus[32];
    _cleanup_free_ char *mem = memory_str(json_integer_value(json_object_get(s, "memory_mb")));
    const char *exp = json_string_value(json_object_get(s, "expires_at"));
    const char *state = json_string_value(json_object_get(s, "state"));
    _cleanup_free_ char *rel = relative_time(exp);

    snprintf(cpus, sizeof(cpus), "%g", json_number_value(json_object_get(s, "cpus")));
    if (state && strcmp(state, "stopped") == 0)
        rel = (free(rel), xstrdup("-"));
    print_row(json_string_value(json_object_get(s, "id")) ?: "?",
              json_string_value(json_object_get(s, "template")) ?: "?", state ?: "?", cpus, mem,
              rel ? rel : (exp ? exp : "-"));
}

static void print_sandbox(const json_t *s)
{
    const char *k;
    json_t *v;
    _cleanup_free_ char *mem = memory_str(json_integer_value(json_object_get(s, "memory_mb")));
    const char *exp = json_string_value(json_object_get(s, "expires_at"));
    _cleanup_free_ char *rel = relative_time(exp);

    printf("id:         %s\n", json_string_value(json_object_get(s, "id")) ?: "?");
    printf("template:   %s\n", json_string_value(json_object_get(s, "template")) ?: "?");
    printf("state:      %s\n", json_string_value(json_object_get(s, "state")) ?: "?");
    if (json_string_value(json_object_get(s, "reason")))
        printf("reason:     %s\n", json_string_value(json_object_get(s, "reason")));
    if (json_string_value(json_object_get(s, "runtime")))
        printf("runtime:    %s\n", json_string_value(json_object_get(s, "runtime")));
    if (json_array_size(json_object_get(s, "devices")) > 0) {
        size_t i;
        json_t *d;
        printf("devices:   ");
        json_array_foreach(json_object_get(s, "devices"), i, d) printf(" %s", json_string_value(d));
        printf("\n");
    }
    printf("cpus:       %g\n", json_number_value(json_object_get(s, "cpus")));
    printf("memory:     %s\n", mem);
    printf("created_at: %s\n", json_string_value(json_object_get(s, "created_at")) ?: "?");
    printf("expires_at: %s%s%s%s\n", exp ?: "?", rel ? " (" : "", rel ? rel : "", rel ? ")" : "");
    if (json_string_value(json_object_get(s, "on_timeout")))
        printf("on_timeout: %s\n", json_string_value(json_object_get(s, "on_timeout")));
    if (json_string_value(json_object_get(s, "paused_mode"))) {
        const char *mode = json_string_value(json_object_get(s, "paused_mode"));
        json_int_t left = json_integer_value(json_object_get(s, "remaining_ms"));
        printf("paused:     %s%s, %lld.%03llds left on the clock (stopped)\n",
               strcmp(mode, "disk") == 0 ? "" : "in ",
               strcmp(mode, "disk") == 0 ? "to disk (processes stopped, files kept)" : mode,
               (long long)(left / 1000), (long long)(left % 1000));
    }
    json_object_foreach((json_t *)json_object_get(s, "metadata"), k, v)
        printf("metadata:   %s=%s\n", k, json_string_value(v) ?: "");
    if (json_is_object(json_object_get(s, "network")))
        cli_net_print(json_object_get(s, "network"));
    {
        size_t i;
        json_array_foreach((json_t *)json_object_get(s, "volumes"), i, v)
            printf("volume:     %s at %s%s\n", json_string_value(json_object_get(v, "name")) ?: "",
                   json_string_value(json_object_get(v, "path")) ?: "",
                   json_is_true(json_object_get(v, "readonly")) ? " (read-only)" : "");
    }
}

/* ---- create --------------------------------------------------------------------------------- */

static void create_usage(FILE *f)
{
    fprintf(f, "usage: warren create [options]\n\n"
               "Start a sandbox and print its id.\n\n"
               "  -f, --file FILE        run the services of a Compose file in it (`-` reads\n"
               "                         stdin; docs/compose.md); `warren services` lists them\n"
               "  --compose-env K=V      a variable for the file's ${...} (repeatable)\n"
               "  --context DIR          send DIR's files (text, at most 512 files and 8 MiB;\n"
               "                         hidden ones left out) for the file's env_file and\n"
               "                         bind volumes\n"
               "  --insecure-registry    pull the file's OCI images (host/repo:tag) over plain\n"
               "                         http\n"
               "  --template NAME        template or snapshot (id or name) to start from\n"
               "                         (default: the server's, base)\n"
               "  --cpus N               vCPUs, e.g. 0.5 (default 1)\n"
               "  --memory SIZE          memory, e.g. 512M, 2G (default 512M)\n"
               "  --size NAME            a size preset of the server's, e.g. small, medium,\n"
               "                         large: its cpus and memory (--cpus or --memory win)\n"
               "  --disk SIZE            limit its files, e.g. 2G (refused where the host's\n"
               "                         filesystem cannot enforce it)\n"
               "  --timeout SECS         kill the sandbox after SECS seconds (default 300)\n"
               "  --on-timeout kill|pause  at the deadline, kill (default) or pause the\n"
               "                         sandbox (resume gives it its timeout again)\n"
               "  --env K=V              environment for every command (repeatable)\n" CLI_NET_HELP
               "  --no-network           loopback only: no address of its own, no policy to\n"
               "                         change later (the cheapest sandbox)\n"
               "  --metadata K=V         a label (repeatable)\n"
               "  --volume NAME:PATH[:ro]  mount the volume NAME at PATH, read-only with :ro\n"
               "                         (repeatable, at most 16)\n"
               "  --idempotency-key KEY  a retried create returns the same sandbox\n"
               "  --budget N[:UNIT]      its own hard cap: N billed vCPU-seconds, or N:money at\n"
               "                         the operator's prices; past it it is paused to disk\n"
               "  --runtime ns|gvisor    its isolation backend: namespaces around the host's\n"
               "                         kernel, or gVisor's kernel; default: the template's,\n"
               "                         else ns\n"
               "  --device NAME          a host device for it alone (repeatable; `warren\n"
               "                         devices` lists them)\n"
               "  -o json                print the sandbox as JSON\n");
}

/* NAME:PATH[:ro|:rw] appended to vols as {"name", "path", "readonly"}; the server checks the
 * name and path. Returns 0, or -1 having printed why. */
static int volume_arg(const char *arg, json_t *vols)
{
    const char *colon = strchr(arg, ':'), *mode;
    _cleanup_free_ char *path = NULL;
    bool ro = false;

    if (colon == NULL || colon == arg || colon[1] == '\0') {
        cli_errorf("create: --volume `%s`: want NAME:PATH or NAME:PATH:ro", arg);
        return -1;
    }
    mode = strchr(colon + 1, ':');
    path = mode ? xstrndup(colon + 1, (size_t)(mode - colon - 1)) : xstrdup(colon + 1);
    if (mode != NULL) {
        if (strcmp(mode, ":ro") != 0 && strcmp(mode, ":rw") != 0) {
            cli_errorf("create: --volume `%s`: the mode must be ro or rw", arg);
            return -1;
        }
        ro = strcmp(mode, ":ro") == 0;
    }
    json_array_append_new(vols, json_pack("{s:s%,s:s,s:b}", "name", arg, (size_t)(colon - arg),
                                          "path", path, "readonly", ro));
    return 0;
}

/* N[:UNIT] as the create's {"budget": {"unit", "hard"}}; the server checks the unit. Returns
 * 0, or -1 having printed why. */
static int budget_arg(const char *arg, json_t *extra)
{
    const char *colon = strchr(arg, ':');
    char *end;
    double n;

    errno = 0;
    n = strtod(arg, &end);
    if (errno != 0 || end == arg || (*end != '\0' && end != colon) || !(n > 0)) {
        cli_errorf("create: --budget `%s`: want a number above 0, optionally :UNIT", arg);
        return -1;
    }
    json_object_set_new(
        extra, "budget",
        json_pack("{s:s,s:f}", "unit", colon ? colon + 1 : "vcpu_seconds", "hard", n));
    return 0;
}

int cmd_create(int argc, char **argv)
{
    enum {
        O_TEMPLATE = 256,
        O_CPUS,
        O_MEMORY,
        O_DISK,
        O_TIMEOUT,
        O_ON_TIMEOUT,
        O_ENV,
        O_META,
        O_IDEM,
        O_VOLUME,
        O_SIZE,
        O_BUDGET,
        O_RUNTIME,
        O_DEVICE,
        O_COMPOSE_ENV,
        O_CONTEXT,
        O_INSECURE
    };
    static const struct option longopts[] = {
        {"template", required_argument, NULL, O_TEMPLATE},
        {"cpus", required_argument, NULL, O_CPUS},
        {"memory", required_argument, NULL, O_MEMORY},
        {"disk", required_argument, NULL, O_DISK},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"on-timeout", required_argument, NULL, O_ON_TIMEOUT},
        {"env", required_argument, NULL, O_ENV},
        {"metadata", required_argument, NULL, O_META},
        {"idempotency-key", required_argument, NULL, O_IDEM},
        {"volume", required_argument, NULL, O_VOLUME},
        {"size", required_argument, NULL, O_SIZE},
        {"budget", required_argument, NULL, O_BUDGET},
        {"runtime", required_argument, NULL, O_RUNTIME},
        {"device", required_argument, NULL, O_DEVICE},
        {"file", required_argument, NULL, 'f'},
        {"compose-env", required_argument, NULL, O_COMPOSE_ENV},
        {"context", required_argument, NULL, O_CONTEXT},
        {"insecure-registry", no_argument, NULL, O_INSECURE},
        CLI_NET_OPTIONS,
        {"no-network", no_argument, NULL, CLI_NET_NONE},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    json_t *env = json_object(), *meta = json_object(), *sb = NULL;
    json_t *vols = json_array(), *net = json_object(), *extra = json_object();
    json_t *compose_env = json_object(), *compose = NULL;
    const char *compose_file = NULL, *context_dir = NULL;
    bool insecure = false;
    _cleanup_free_ char *extra_text = NULL;
    _cleanup_free_ const char **envv = xcalloc((size_t)argc + 1, sizeof(*envv));
    _cleanup_free_ const char **metav = xcalloc((size_t)argc + 1, sizeof(*metav));
    size_t n_env = 0, n_meta = 0;
    warren_create_opts o = {0};
    warren_sandbox *created = NULL;
    warren *w = NULL;
    warren_error werr;
    struct wr_err err;
    bool json = false;
    int c, rc = CLI_EXIT_USAGE;
    uint64_t v;
    uint32_t millis;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "f:o:h", longopts, NULL)) != -1) {
        switch (c) {
        case O_TEMPLATE:
            o.template_name = optarg;
            break;
        case 'f':
            compose_file = optarg;
            break;
        case O_COMPOSE_ENV:
            if (cli_kv_set("create", "--compose-env", compose_env, optarg) < 0)
                goto out;
            break;
        case O_INSECURE:
            insecure = true;
            break;
        case O_CONTEXT:
            context_dir = optarg;
            break;
        case O_CPUS:
            if (wr_parse_cpus(optarg, &millis, &err) < 0)
                goto bad;
            o.cpus = millis / 1000.0;
            break;
        case O_MEMORY:
            if (wr_parse_size(optarg, &v, &err) < 0)
                goto bad;
            o.memory_mb = (int64_t)((v + (1 << 20) - 1) >> 20);
            break;
        case O_SIZE:
            json_object_set_new(extra, "size", json_string(optarg));
            break;
        case O_BUDGET:
            if (budget_arg(optarg, extra) < 0)
                goto out;
            break;
        case O_RUNTIME:
            /* The server names the choices (and the ones it allows). */
            json_object_set_new(extra, "runtime", json_string(optarg));
            break;
        case O_DEVICE:
            /* The server knows the host's devices. */
            if (json_object_get(extra, "devices") == NULL)
                json_object_set_new(extra, "devices", json_array());
            json_array_append_new(json_object_get(extra, "devices"), json_string(optarg));
            break;
        case O_DISK:
            if (wr_parse_size(optarg, &v, &err) < 0)
                goto bad;
            o.disk_mb = (int64_t)((v + (1 << 20) - 1) >> 20);
            break;
        case O_TIMEOUT:
            if (wr_parse_uint(optarg, MAX_TIMEOUT_S, &v, &err) < 0)
                goto bad;
            if (v == 0) {
                cli_errorf("create: --timeout must be at least 1 second");
                goto out;
            }
            o.timeout_s = (int64_t)v;
            break;
        case O_ON_TIMEOUT:
            if (strcmp(optarg, "kill") != 0 && strcmp(optarg, "pause") != 0) {
                cli_errorf("create: --on-timeout `%s`: want kill or pause", optarg);
                goto out;
            }
            o.on_timeout = optarg;
            break;
        case O_ENV:
            if (cli_kv_set("create", "--env", env, optarg) < 0)
                goto out;
            envv[n_env++] = optarg;
            break;
        case O_META:
            if (cli_kv_set("create", "--metadata", meta, optarg) < 0)
                goto out;
            metav[n_meta++] = optarg;
            break;
        case O_VOLUME:
            if (volume_arg(optarg, vols) < 0)
                goto out;
            break;
        case O_IDEM:
            o.idempotency_key = optarg;
            break;
        case CLI_NET_INTERNET:
        case CLI_NET_NO_INTERNET:
        case CLI_NET_ALLOW:
        case CLI_NET_DENY:
        case CLI_NET_MAXCONN:
        case CLI_NET_PRIVATE:
        case CLI_NET_NONE:
            if (cli_net_flag("create", net, c, optarg) < 0)
                goto out;
            break;
        case 'o':
            if (cli_output_arg("create", optarg, &json) < 0)
                goto out;
            break;
        case 'h':
            create_usage(stdout);
            rc = 0;
            goto out;
        default:
            rc = cli_bad_option("create", argv);
            goto out;
        }
    }
    if (optind < argc) {
        cli_errorf("create: unexpected argument `%s`", argv[optind]);
        goto out;
    }
    if (compose_file == NULL &&
        (json_object_size(compose_env) > 0 || context_dir != NULL || insecure)) {
        cli_errorf("create: --compose-env, --context and --insecure-registry go with -f FILE (a "
                   "Compose file)");
        goto out;
    }
    if (compose_file != NULL) {
        if ((compose = cli_compose_json(compose_file, compose_env, context_dir, &err)) == NULL) {
            cli_errorf("create: %s", err.msg);
            rc = err.kind == WR_EINVAL || err.kind == WR_ETOOBIG ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
            goto out;
        }
        if (insecure)
            json_object_set_new(compose, "pull", json_pack("{s:b}", "insecure", 1));
        json_object_set(extra, "compose", compose);
    }
    o.env = n_env ? envv : NULL;
    o.metadata = n_meta ? metav : NULL;
    if (json_array_size(vols))
        json_object_set(extra, "volumes", vols);
    if (json_object_size(net))
        json_object_set(extra, "network", net);
    if (json_object_size(extra))
        o.extra_json = extra_text = json_dumps(extra, JSON_COMPACT);

    rc = CLI_EXIT_FAIL;
    if ((w = cli_warren_or_complain("create")) == NULL)
        goto out;
    if (warren_create(w, &o, &created, &werr) < 0) {
        cli_errorf("create: %s", werr.message);
        goto out;
    }
    if (json) {
        sb = cli_json(warren_sandbox_json(created));
        cli_print_json(sb);
    } else {
        printf("%s\n", warren_sandbox_id(created) ?: "?");
    }
    rc = 0;
    goto out;
bad:
    cli_errorf("create: %s", err.msg);
out:
    warren_sandbox_free(created);
    warren_close(w);
    json_decref(extra);
    json_decref(env);
    json_decref(meta);
    json_decref(vols);
    json_decref(net);
    json_decref(compose_env);
    json_decref(compose);
    json_decref(sb);
    return rc;
}

/* ---- ls ------------------------------------------------------------------------------------- */

int cmd_ls(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"state", required_argument, NULL, 's'},
        {"metadata", required_argument, NULL, 'm'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    _cleanup_free_ const char **metav = xcalloc((size_t)argc + 1, sizeof(*metav));
    _cleanup_free_ char *states = NULL;
    warren_list_opts lo = {0};
    warren_sandbox_list *list = NULL;
    warren *w = NULL;
    warren_error err;
    size_t n_meta = 0;
    bool json = false;
    int c, rc = CLI_EXIT_USAGE;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 's': {
            char *more = states ? xasprintf("%s,%s", states, optarg) : xstrdup(optarg);
            free(states);
            states = more;
            break;
        }
        case 'm':
            if (strchr(optarg, '=') == NULL || optarg[0] == '=') {
                cli_errorf("ls: --metadata `%s` must be KEY=VALUE", optarg);
                goto out;
            }
            metav[n_meta++] = optarg;
            break;
        case 'o':
            if (cli_output_arg("ls", optarg, &json) < 0)
                goto out;
            break;
        case 'h':
            printf("usage: warren ls [--state S[,S...]] [--metadata K=V]... [-o json]\n\n"
                   "List the team's sandboxes (by default all but stopped and error ones).\n"
                   "States: creating, running, paused, stopped, error.\n");
            rc = 0;
            goto out;
        default:
            rc = cli_bad_option("ls", argv);
            goto out;
        }
    }
    if (optind < argc) {
        cli_errorf("ls: unexpected argument `%s`", argv[optind]);
        goto out;
    }
    rc = CLI_EXIT_FAIL;
    if ((w = cli_warren_or_complain("ls")) == NULL)
        goto out;
    lo.state = states;
    lo.metadata = n_meta ? metav : NULL;
    if (warren_list(w, &lo, &list, &err) < 0) {
        cli_errorf("ls: %s", err.message);
        goto out;
    }
    if (json) {
        json_t *doc = cli_json(warren_sandbox_list_json(list));
        cli_print_json(doc);
        json_decref(doc);
    } else {
        print_row("ID", "TEMPLATE", "STATE", "CPUS", "MEMORY", "EXPIRES");
        for (size_t i = 0; i < warren_sandbox_list_len(list); i++) {
            json_t *s = cli_json(warren_sandbox_json(warren_sandbox_list_at(list, i)));
            print_sandbox_row(s);
            json_decref(s);
        }
    }
    rc = 0;
out:
    warren_sandbox_list_free(list);
    warren_close(w);
    return rc;
}

/* ---- info, rm, timeout ---------------------------------------------------------------------- */

int cli_simple_opts(const char *verb, const char *usage, int argc, char **argv, bool *json, int *rc)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    opterr = 0;
    while ((c = getopt_long(argc, argv, json ? "o:h" : "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            if (json == NULL) {
                *rc = cli_bad_option(verb, argv);
                return -1;
            }
            if (cli_output_arg(verb, optarg, json) < 0) {
                *rc = CLI_EXIT_USAGE;
                return -1;
            }
            break;
        case 'h':
            printf("%s", usage);
            *rc = 0;
            return -1;
        default:
            *rc = cli_bad_option(verb, argv);
            return -1;
        }
    }
    return optind;
}

int cmd_info(int argc, char **argv)
{
    warren *w = NULL;
    warren_sandbox *got = NULL;
    json_t *sb = NULL;
    warren_error err;
    bool json = false;
    int rc,
        i = cli_simple_opts("info", "usage: warren info ID [-o json]\n", argc, argv, &json, &rc);

    if (i < 0)
        return rc;
    if (argc - i != 1) {
        cli_errorf("info: want exactly one sandbox id (usage: warren info ID [-o json])");
        return CLI_EXIT_USAGE;
    }
    if (!cli_check_id("info", argv[i]))
        return CLI_EXIT_USAGE;
    if ((w = cli_warren_or_complain("info")) == NULL)
        return CLI_EXIT_FAIL;
    if (warren_get(w, argv[i], &got, &err) < 0) {
        cli_errorf("info: %s", err.message);
        warren_close(w);
        return CLI_EXIT_FAIL;
    }
    sb = cli_json(warren_sandbox_json(got));
    if (json)
        cli_print_json(sb);
    else
        print_sandbox(sb);
    json_decref(sb);
    warren_sandbox_free(got);
    warren_close(w);
    return 0;
}

int cmd_rm(int argc, char **argv)
{
    warren *w = NULL;
    warren_error err;
    int rc = 0, i = cli_simple_opts("rm", "usage: warren rm ID...\n\nKill and delete sandboxes.\n",
                                    argc, argv, NULL, &rc);

    if (i < 0)
        return rc;
    if (i >= argc) {
        cli_errorf("rm: no sandbox id given (usage: warren rm ID...)");
        return CLI_EXIT_USAGE;
    }
    for (int j = i; j < argc; j++)
        if (!cli_check_id("rm", argv[j]))
            return CLI_EXIT_USAGE;
    if ((w = cli_warren_or_complain("rm")) == NULL)
        return CLI_EXIT_FAIL;
    /* Go on past a failure: the others are still worth removing. */
    for (; i < argc; i++) {
        if (warren_delete(w, argv[i], &err) < 0) {
            cli_errorf("rm %s: %s", argv[i], err.message);
            rc = CLI_EXIT_FAIL;
        } else {
            printf("%s\n", argv[i]);
        }
    }
    warren_close(w);
    return rc;
}

int cmd_timeout(int argc, char **argv)
{
    warren *w = NULL;
    warren_sandbox *got = NULL;
    warren_error werr;
    json_t *sb = NULL;
    struct wr_err err;
    bool json = false;
    uint64_t secs;
    int rc, i = cli_simple_opts("timeout",
                                "usage: warren timeout ID SECS [-o json]\n\n"
                                "Set the sandbox's deadline to SECS seconds from now.\n",
                                argc, argv, &json, &rc);

    if (i < 0)
        return rc;
    if (argc - i != 2) {
        cli_errorf("timeout: usage: warren timeout ID SECS");
        return CLI_EXIT_USAGE;
    }
    if (!cli_check_id("timeout", argv[i]))
        return CLI_EXIT_USAGE;
    if (wr_parse_uint(argv[i + 1], MAX_TIMEOUT_S, &secs, &err) < 0 || secs == 0) {
        cli_errorf("timeout: SECS `%s` must be a whole number of seconds, at least 1", argv[i + 1]);
        return CLI_EXIT_USAGE;
    }
    if ((w = cli_warren_or_complain("timeout")) == NULL)
        return CLI_EXIT_FAIL;
    rc = warren_set_timeout(w, argv[i], (int64_t)secs, &got, &werr) < 0 ? CLI_EXIT_FAIL : 0;
    warren_close(w);
    if (rc != 0) {
        cli_errorf("timeout: %s", werr.message);
        return rc;
    }
    sb = cli_json(warren_sandbox_json(got));
    warren_sandbox_free(got);
    if (json)
        cli_print_json(sb);
    else
        printf("%s expires at %s\n", argv[i],
               json_string_value(json_object_get(sb, "expires_at")) ?: "?");
    json_decref(sb);
    return 0;
}

/* ---- pause, resume ---------------------------------------------------------------------- */

int cmd_pause(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"disk", no_argument, NULL, 'd'},
        {"memory", no_argument, NULL, 'm'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    warren *w = NULL;
    warren_sandbox *paused = NULL;
    json_t *sb = NULL;
    warren_pause_mode mode = WARREN_PAUSE_MEMORY;
    const char *got;
    warren_error err;
    bool json = false;
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'd':
            mode = WARREN_PAUSE_DISK;
            break;
        case 'm':
            mode = WARREN_PAUSE_MEMORY;
            break;
        case 'o':
            if (cli_output_arg("pause", optarg, &json) < 0)
                return CLI_EXIT_USAGE;
            break;
        case 'h':
            printf("usage: warren pause [--disk] ID [-o json]\n\n"
                   "Pause a sandbox; its deadline's clock stops. `warren resume` goes on.\n"
                   "  (default) in memory: every process stops where it is and keeps its\n"
                   "            memory; resume thaws the same processes\n"
                   "  --disk    to disk: the files are kept, the processes end and the memory\n"
                   "            is freed; resume starts fresh processes on the same files\n");
            return 0;
        default:
            return cli_bad_option("pause", argv);
        }
    }
    if (argc - optind != 1) {
        cli_errorf("pause: want exactly one sandbox id (usage: warren pause [--disk] ID)");
        return CLI_EXIT_USAGE;
    }
    if (!cli_check_id("pause", argv[optind]))
        return CLI_EXIT_USAGE;
    if ((w = cli_warren_or_complain("pause")) == NULL)
        return CLI_EXIT_FAIL;
    rc = warren_pause(w, argv[optind], mode, &paused, &err) < 0 ? CLI_EXIT_FAIL : 0;
    warren_close(w);
    if (rc != 0) {
        cli_errorf("pause: %s", err.message);
        return rc;
    }
    sb = cli_json(warren_sandbox_json(paused));
    warren_sandbox_free(paused);
    if (json) {
        cli_print_json(sb);
    } else {
        /* Say what the server did, not what was asked. */
        json_int_t left = json_integer_value(json_object_get(sb, "remaining_ms"));
        got = json_string_value(json_object_get(sb, "paused_mode"));
        if (got != NULL && strcmp(got, "disk") == 0)
            printf("%s paused to disk: processes stopped, files kept; %lld.%03llds left on its "
                   "clock\n",
                   argv[optind], (long long)(left / 1000), (long long)(left % 1000));
        else if (got != NULL && strcmp(got, "memory") == 0)
            printf("%s paused in memory, %lld.%03llds left on its clock\n", argv[optind],
                   (long long)(left / 1000), (long long)(left % 1000));
        else
            printf("%s paused (%s), %lld.%03llds left on its clock\n", argv[optind],
                   got ? got : "mode unknown", (long long)(left / 1000), (long long)(left % 1000));
    }
    json_decref(sb);
    return 0;
}

int cmd_resume(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"timeout", required_argument, NULL, 't'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    warren *w = NULL;
    warren_sandbox *resumed = NULL;
    json_t *sb = NULL;
    warren_error werr;
    struct wr_err err;
    bool json = false;
    uint64_t secs = 0;
    int c, rc = CLI_EXIT_USAGE;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 't':
            if (wr_parse_uint(optarg, MAX_TIMEOUT_S, &secs, &err) < 0 || secs == 0) {
                cli_errorf("resume: --timeout `%s` must be a whole number of seconds, at least 1",
                           optarg);
                goto out;
            }
            break;
        case 'o':
            if (cli_output_arg("resume", optarg, &json) < 0)
                goto out;
            break;
        case 'h':
            printf("usage: warren resume ID [--timeout SECS] [-o json]\n\n"
                   "Resume a paused sandbox. It expires after the time it had left (its whole\n"
                   "timeout if its deadline paused it), or SECS seconds from now. After a\n"
                   "pause in memory its processes go on; after a pause to disk it runs new\n"
                   "ones on the kept files. The line printed says which.\n");
            rc = 0;
            goto out;
        default:
            rc = cli_bad_option("resume", argv);
            goto out;
        }
    }
    if (argc - optind != 1) {
        cli_errorf("resume: want exactly one sandbox id (usage: warren resume ID [--timeout "
                   "SECS])");
        goto out;
    }
    if (!cli_check_id("resume", argv[optind]))
        goto out;
    rc = CLI_EXIT_FAIL;
    if ((w = cli_warren_or_complain("resume")) == NULL)
        goto out;
    if (warren_resume(w, argv[optind], (int64_t)secs, &resumed, &werr) < 0) {
        cli_errorf("resume: %s", werr.message);
        goto out;
    }
    sb = cli_json(warren_sandbox_json(resumed));
    if (json) {
        cli_print_json(sb);
    } else {
        json_t *kept = json_object_get(sb, "processes_kept");
        const char *exp = json_string_value(json_object_get(sb, "expires_at")) ?: "?";
        if (json_is_false(kept))
            printf("%s running with new processes (paused to disk: files kept, the old "
                   "processes ended), expires at %s\n",
                   argv[optind], exp);
        else if (json_is_true(kept))
            printf("%s running, processes kept, expires at %s\n", argv[optind], exp);
        else
            printf("%s running, expires at %s\n", argv[optind], exp);
    }
    rc = 0;
out:
    warren_sandbox_free(resumed);
    warren_close(w);
    json_decref(sb);
    return rc;
}
