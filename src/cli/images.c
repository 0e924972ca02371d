/* SPDX-License-Identifier: Apache-2.0 */
/* The image verbs: `warren template ls/info/rm` (`build` is in build.c), `warren snapshot`
 * (create, ls, info, rm) and `warren fork`. */
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/cleanup.h"
#include "../util/parse.h"
#include "../util/xalloc.h"
#include "client.h"

#define MAX_TIMEOUT_S (86400ull * 365)
#define MAX_FORK      100

/* Append s percent-encoded as one path segment (unlike cli_buf_add_escaped, '/' is encoded). */
static void add_segment(struct wr_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";

    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '_' || ch == '.' || ch == '~') {
            wr_buf_append(b, s, 1);
        } else {
            char e[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            wr_buf_append(b, e, 3);
        }
    }
}

/* "/v1/<collection>/<name, encoded><suffix>", owned by the caller. */
static char *target_of(const char *collection, const char *name, const char *suffix)
{
    struct wr_buf b = {0};

    wr_buf_printf(&b, "/v1/%s/", collection);
    add_segment(&b, name);
    wr_buf_puts(&b, suffix);
    return wr_buf_steal_str(&b);
}

/* A name or id given on the command line: not empty, at most 128 bytes (the server says what
 * else it refuses). */
static bool check_name(const char *verb, const char *what, const char *s)
{
    if (s[0] != '\0' && strlen(s) <= 128)
        return true;
    cli_errorf("%s: `%s` is not a %s", verb, s, what);
    return false;
}

/* "1.5G", "12.0M", "512K", "100B", or "-" for null. */
static void size_str(const json_t *v, char *buf, size_t len)
{
    static const char units[] = "KMGTP";
    double n;
    int u = -1;

    if (!json_is_integer(v)) {
        snprintf(buf, len, "-");
        return;
    }
    n = (double)json_integer_value(v);
    if (n < 1024) {
        snprintf(buf, len, "%lldB", (long long)json_integer_value(v));
        return;
    }
    while (n >= 1024 && u < 4) {
        n /= 1024;
        u++;
    }
    snprintf(buf, len, "%.1f%c", n, units[u]);
}

static const char *str_or(const json_t *obj, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : dflt;
}

/* GET target and print it with `print` (or as JSON). Returns the exit status. */
static int show_one(const char *verb, const char *target, bool json, void (*print)(const json_t *))
{
    struct cli_http *http = cli_connect_or_complain(verb);
    json_t *obj = NULL;
    struct wr_err err;

    if (http == NULL)
        return CLI_EXIT_FAIL;
    if (cli_api(http, "GET", target, NULL, &obj, &err) < 0) {
        cli_errorf("%s: %s", verb, err.msg);
        cli_http_close(http);
        return CLI_EXIT_FAIL;
    }
    cli_http_close(http);
    if (json)
        cli_print_json(obj);
    else
        print(obj);
    json_decref(obj);
    return 0;
}

/* DELETE /v1/<collection>/<name> for each name, printing each one removed; goes on past a
 * failure. Returns the exit status. */
static int remove_each(const char *verb, const char *what, const char *collection, int argc,
                       char **argv, int i)
{
    struct cli_http *http;
    struct wr_err err;
    int rc = 0;

    if (i >= argc) {
        cli_errorf("%s: no %s given", verb, what);
        return CLI_EXIT_USAGE;
    }
    for (int j = i; j < argc; j++)
        if (!check_name(verb, what, argv[j]))
            return CLI_EXIT_USAGE;
    if ((http = cli_connect_or_complain(verb)) == NULL)
        return CLI_EXIT_FAIL;
    for (; i < argc; i++) {
        _cleanup_free_ char *target = target_of(collection, argv[i], "");
        if (cli_api(http, "DELETE", target, NULL, NULL, &err) < 0) {
            cli_errorf("%s %s: %s", verb, argv[i], err.msg);
            rc = CLI_EXIT_FAIL;
        } else {
            printf("%s\n", argv[i]);
        }
    }
    cli_http_close(http);
    return rc;
}

/* ---- template ------------------------------------------------------------------------------- */

static void template_usage(FILE *f)
{
    fprintf(f, "usage: warren template <command> [options]\n\n"
               "commands:\n"
               "  ls [-o json]          list the templates\n"
               "  info NAME [-o json]   show a template\n"
               "  rm NAME...            delete templates (sandboxes using one keep running)\n"
               "  build -f Dockerfile [--name NAME] [--replace] [CONTEXT_DIR]\n"
               "                        build a template from a Dockerfile\n"
               "  import FILE --name N  a template from an image archive (docker or oci)\n"
               "  pull IMAGE --name N   a template from an image in a registry\n"
               "  prune                 forget the build cache (its layers are freed unless\n"
               "                        something else uses them)\n\n"
               "`warren template import --help` shows the options of import and pull.\n");
}

static void print_template_row(const char *name, const char *kind, const char *size,
                               const char *layers, const char *in_use, const char *created)
{
    printf("%-24s %-9s %-8s %-6s %-6s %s\n", name, kind, size, layers, in_use, created);
}

static void print_template(const json_t *t)
{
    char size[32];

    size_str(json_object_get(t, "size_bytes"), size, sizeof(size));
    printf("name:       %s\n", str_or(t, "name", "?"));
    printf("kind:       %s\n", str_or(t, "kind", "?"));
    printf("size:       %s\n", size);
    printf("layers:     %lld\n", (long long)json_integer_value(json_object_get(t, "layers")));
    printf("created_at: %s\n", str_or(t, "created_at", "-"));
    printf("in_use:     %lld\n", (long long)json_integer_value(json_object_get(t, "in_use")));
}

static int template_ls(int argc, char **argv)
{
    struct cli_http *http;
    json_t *doc = NULL, *list, *t;
    struct wr_err err;
    bool json = false;
    size_t k;
    int rc,
        i = cli_simple_opts("template ls",
                            "usage: warren template ls [-o json]\n\n"
                            "List the templates: directory templates (managed on the host's disk)\n"
                            "and built ones, with their size, layers and how many sandboxes use "
                            "them.\n",
                            argc, argv, &json, &rc);

    if (i < 0)
        return rc;
    if (i < argc) {
        cli_errorf("template ls: unexpected argument `%s`", argv[i]);
        return CLI_EXIT_USAGE;
    }
    if ((http = cli_connect_or_complain("template ls")) == NULL)
        return CLI_EXIT_FAIL;
    rc = cli_api(http, "GET", "/v1/templates", NULL, &doc, &err) < 0 ? CLI_EXIT_FAIL : 0;
    cli_http_close(http);
    if (rc != 0) {
        cli_errorf("template ls: %s", err.msg);
        return rc;
    }
    list = json_object_get(doc, "templates");
    if (!json_is_array(list)) {
        cli_errorf("template ls: bad answer from warrend: no `templates` array");
        json_decref(doc);
        return CLI_EXIT_FAIL;
    }
    if (json) {
        cli_print_json(doc);
    } else {
        print_template_row("NAME", "KIND", "SIZE", "LAYERS", "IN_USE", "CREATED");
        json_array_foreach(list, k, t)
        {
            char size[32], layers[24], in_use[24];
            size_str(json_object_get(t, "size_bytes"), size, sizeof(size));
            snprintf(layers, sizeof(layers), "%lld",
                     (long long)json_integer_value(json_object_get(t, "layers")));
            snprintf(in_use, sizeof(in_use), "%lld",
                     (long long)json_integer_value(json_object_get(t, "in_use")));
            print_template_row(str_or(t, "name", "?"), str_or(t, "kind", "?"), size, layers, in_use,
                               str_or(t, "created_at", "-"));
        }
    }
    json_decref(doc);
    return 0;
}

static int template_info(int argc, char **argv)
{
    _cleanup_free_ char *target = NULL;
    bool json = false;
    int rc, i = cli_simple_opts("template info", "usage: warren template info NAME [-o json]\n",
                                argc, argv, &json, &rc);

    if (i < 0)
        return rc;
    if (argc - i != 1) {
        cli_errorf("template info: want exactly one template name (usage: warren template info "
                   "NAME [-o json])");
        return CLI_EXIT_USAGE;
    }
    if (!check_name("template info", "template name", argv[i]))
        return CLI_EXIT_USAGE;
    target = target_of("templates", argv[i], "");
    return show_one("template info", target, json, print_template);
}

static int template_rm(int argc, char **argv)
{
    int rc,
        i = cli_simple_opts("template rm",
                            "usage: warren template rm NAME...\n\n"
                            "Delete templates. Sandboxes that use one keep running on its layers,\n"
                            "which are freed when the last of them ends. Directory templates\n"
                            "(managed on the host's disk) cannot be deleted here.\n",
                            argc, argv, NULL, &rc);

    if (i < 0)
        return rc;
    return remove_each("template rm", "template name", "templates", argc, argv, i);
}

static int template_prune(int argc, char **argv)
{
    struct cli_http *http = NULL;
    json_t *out = NULL;
    struct wr_err err;
    bool json = false;
    int rc, i = cli_simple_opts("template prune",
                                "usage: warren template prune [-o json]\n\n"
                                "Forget the team's build cache (an admin key: every team's). The\n"
                                "next builds run every step again; the cached layers are freed\n"
                                "unless a template, a snapshot or a sandbox uses them.\n",
                                argc, argv, &json, &rc);

    if (i < 0)
        return rc;
    if (argc - i != 0) {
        cli_errorf("template prune: takes no arguments (usage: warren template prune)");
        return CLI_EXIT_USAGE;
    }
    if ((http = cli_connect_or_complain("template prune")) == NULL)
        return CLI_EXIT_FAIL;
    rc = CLI_EXIT_FAIL;
    if (cli_api(http, "POST", "/v1/templates/prune", NULL, &out, &err) < 0) {
        cli_errorf("template prune: %s", err.msg);
    } else {
        if (json)
            cli_print_json(out);
        else
            printf("forgot %lld cached build step(s)\n",
                   (long long)json_integer_value(json_object_get(out, "pruned_steps")));
        rc = 0;
    }
    json_decref(out);
    cli_http_close(http);
    return rc;
}

int cmd_template(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } subs[] = {
        {"ls", template_ls},        {"list", template_ls},         {"info", template_info},
        {"rm", template_rm},        {"build", cli_template_build}, {"import", cli_template_oci},
        {"pull", cli_template_oci}, {"prune", template_prune},
    };

    if (argc < 2) {
        template_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        template_usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
        if (strcmp(argv[1], subs[i].name) == 0)
            return subs[i].fn(argc - 1, argv + 1);
    cli_errorf("template: unknown command `%s` (see `warren template --help`)", argv[1]);
    return CLI_EXIT_USAGE;
}

/* ---- snapshot ------------------------------------------------------------------------------- */

static void snapshot_usage(FILE *f)
{
    fprintf(f, "usage: warren snapshot ID [--name NAME] [-o json]\n"
               "       warren snapshot ls [--sandbox ID] [-o json]\n"
               "       warren snapshot info SNAP [-o json]\n"
               "       warren snapshot rm SNAP...\n\n"
               "Capture a sandbox's files as a snapshot (its processes are frozen for the\n"
               "capture, then go on; a paused sandbox stays paused) and print the snapshot's\n"
               "id. `warren create --template SNAP` starts sandboxes from it. SNAP is a\n"
               "snapshot's id (snap-...) or name.\n");
}

static void print_snapshot_row(const char *id, const char *name, const char *sandbox,
                               const char *size, const char *layers, const char *created)
{
    printf("%-24s %-16s %-24s %-8s %-6s %s\n", id, name, sandbox, size, layers, created);
}

static void print_snapshot(const json_t *s)
{
    char size[32];

    size_str(json_object_get(s, "size_bytes"), size, sizeof(size));
    printf("id:         %s\n", str_or(s, "id", "?"));
    printf("name:       %s\n", str_or(s, "name", "-"));
    printf("sandbox_id: %s\n", str_or(s, "sandbox_id", "?"));
    printf("size:       %s\n", size);
    printf("layers:     %lld\n", (long long)json_integer_value(json_object_get(s, "layers")));
    printf("created_at: %s\n", str_or(s, "created_at", "?"));
    /* Only the answer that made the snapshot says how it was captured. */
    if (json_string_value(json_object_get(s, "capture")) != NULL)
        printf("capture:    %s\n", str_or(s, "capture", "?"));
    if (json_is_number(json_object_get(s, "freeze_ms")))
        printf("freeze:     %.3f ms\n", json_number_value(json_object_get(s, "freeze_ms")));
}

static int snapshot_create(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"name", required_argument, NULL, 'N'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    warren *w = NULL;
    warren_snapshot *made = NULL;
    json_t *snap = NULL;
    const char *name = NULL;
    warren_error err;
    bool json = false;
    int c, rc = CLI_EXIT_USAGE;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'N':
            if (!check_name("snapshot", "snapshot name", optarg))
                goto out;
            name = optarg;
            break;
        case 'o':
            if (cli_output_arg("snapshot", optarg, &json) < 0)
                goto out;
            break;
        case 'h':
            snapshot_usage(stdout);
            rc = 0;
            goto out;
        default:
            rc = cli_bad_option("snapshot", argv);
            goto out;
        }
    }
    if (argc - optind != 1) {
        cli_errorf("snapshot: want exactly one sandbox id (usage: warren snapshot ID [--name "
                   "NAME])");
        goto out;
    }
    if (!cli_check_id("snapshot", argv[optind]))
        goto out;
    rc = CLI_EXIT_FAIL;
    if ((w = cli_warren_or_complain("snapshot")) == NULL)
        goto out;
    if (warren_snapshot_create(w, argv[optind], name, &made, &err) < 0) {
        cli_errorf("snapshot: %s", err.message);
        goto out;
    }
    snap = cli_json(warren_snapshot_json(made));
    if (json)
        cli_print_json(snap);
    else
        printf("%s\n", str_or(snap, "id", "?"));
    rc = 0;
out:
    warren_snapshot_free(made);
    warren_close(w);
    json_decref(snap);
    return rc;
}

static int snapshot_ls(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"sandbox", required_argument, NULL, 's'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct wr_buf target = {0};
    struct cli_http *http = NULL;
    json_t *doc = NULL, *list, *s;
    const char *sandbox = NULL;
    struct wr_err err;
    bool json = false;
    size_t k;
    int c, rc = CLI_EXIT_USAGE;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (!cli_check_id("snapshot ls", optarg))
                goto out;
            sandbox = optarg;
            break;
        case 'o':
            if (cli_output_arg("snapshot ls", optarg, &json) < 0)
                goto out;
            break;
        case 'h':
            printf("usage: warren snapshot ls [--sandbox ID] [-o json]\n\n"
                   "List the team's snapshots (of sandbox ID only, with --sandbox).\n");
            rc = 0;
            goto out;
        default:
            rc = cli_bad_option("snapshot ls", argv);
            goto out;
        }
    }
    if (optind < argc) {
        cli_errorf("snapshot ls: unexpected argument `%s`", argv[optind]);
        goto out;
    }
    rc = CLI_EXIT_FAIL;
    if ((http = cli_connect_or_complain("snapshot ls")) == NULL)
        goto out;
    wr_buf_puts(&target, "/v1/snapshots");
    if (sandbox != NULL) {
        wr_buf_puts(&target, "?sandbox_id=");
        cli_buf_add_escaped(&target, sandbox);
    }
    if (cli_api(http, "GET", wr_buf_str(&target), NULL, &doc, &err) < 0) {
        cli_errorf("snapshot ls: %s", err.msg);
        goto out;
    }
    list = json_object_get(doc, "snapshots");
    if (!json_is_array(list)) {
        cli_errorf("snapshot ls: bad answer from warrend: no `snapshots` array");
        goto out;
    }
    if (json) {
        cli_print_json(doc);
    } else {
        print_snapshot_row("ID", "NAME", "SANDBOX", "SIZE", "LAYERS", "CREATED");
        json_array_foreach(list, k, s)
        {
            char size[32], layers[24];
            size_str(json_object_get(s, "size_bytes"), size, sizeof(size));
            snprintf(layers, sizeof(layers), "%lld",
                     (long long)json_integer_value(json_object_get(s, "layers")));
            print_snapshot_row(str_or(s, "id", "?"), str_or(s, "name", "-"),
                               str_or(s, "sandbox_id", "-"), size, layers,
                               str_or(s, "created_at", "?"));
        }
    }
    rc = 0;
out:
    cli_http_close(http);
    wr_buf_fini(&target);
    json_decref(doc);
    return rc;
}

static int snapshot_info(int argc, char **argv)
{
    _cleanup_free_ char *target = NULL;
    bool json = false;
    int rc, i = cli_simple_opts("snapshot info", "usage: warren snapshot info SNAP [-o json]\n",
                                argc, argv, &json, &rc);

    if (i < 0)
        return rc;
    if (argc - i != 1) {
        cli_errorf("snapshot info: want exactly one snapshot (usage: warren snapshot info SNAP "
                   "[-o json])");
        return CLI_EXIT_USAGE;
    }
    if (!check_name("snapshot info", "snapshot id or name", argv[i]))
        return CLI_EXIT_USAGE;
    target = target_of("snapshots", argv[i], "");
    return show_one("snapshot info", target, json, print_snapshot);
}

static int snapshot_rm(int argc, char **argv)
{
    int rc, i = cli_simple_opts("snapshot rm",
                                "usage: warren snapshot rm SNAP...\n\n"
                                "Delete snapshots (by id or name). Sandboxes made from one keep\n"
                                "running.\n",
                                argc, argv, NULL, &rc);

    if (i < 0)
        return rc;
    return remove_each("snapshot rm", "snapshot id or name", "snapshots", argc, argv, i);
}

int cmd_snapshot(int argc, char **argv)
{
    if (argc < 2) {
        snapshot_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "help") == 0) {
        snapshot_usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "ls") == 0 || strcmp(argv[1], "list") == 0)
        return snapshot_ls(argc - 1, argv + 1);
    if (strcmp(argv[1], "info") == 0)
        return snapshot_info(argc - 1, argv + 1);
    if (strcmp(argv[1], "rm") == 0)
        return snapshot_rm(argc - 1, argv + 1);
    if (strcmp(argv[1], "create") == 0)
        return snapshot_create(argc - 1, argv + 1);
    return snapshot_create(argc, argv);
}

/* ---- fork ----------------------------------------------------------------------------------- */

int cmd_fork(int argc, char **argv)
{
    enum { O_TIMEOUT = 256, O_META };
    static const struct option longopts[] = {
        {"count", required_argument, NULL, 'n'},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"metadata", required_argument, NULL, O_META},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    _cleanup_free_ const char **metav = xcalloc((size_t)argc + 1, sizeof(*metav));
    json_t *meta = json_object(), *res = NULL;
    warren_fork_opts fo = {0};
    warren_sandbox_list *copies = NULL;
    warren *w = NULL;
    warren_error werr;
    struct wr_err err;
    bool json = false;
    uint64_t n;
    size_t k, n_meta = 0;
    int c, rc = CLI_EXIT_USAGE;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "n:o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (wr_parse_uint(optarg, 1000000, &n, &err) < 0 || n < 1 || n > MAX_FORK) {
                cli_errorf("fork: -n `%s`: want a count from 1 to %d", optarg, MAX_FORK);
                goto out;
            }
            fo.count = (int)n;
            break;
        case O_TIMEOUT:
            if (wr_parse_uint(optarg, MAX_TIMEOUT_S, &n, &err) < 0 || n == 0) {
                cli_errorf("fork: --timeout `%s` must be a whole number of seconds, at least 1",
                           optarg);
                goto out;
            }
            fo.timeout_s = (int64_t)n;
            break;
        case O_META:
            if (cli_kv_set("fork", "--metadata", meta, optarg) < 0)
                goto out;
            metav[n_meta++] = optarg;
            break;
        case 'o':
            if (cli_output_arg("fork", optarg, &json) < 0)
                goto out;
            break;
        case 'h':
            printf("usage: warren fork [-n N] ID [--timeout SECS] [--metadata K=V]... [-o json]\n\n"
                   "Make N copies (1-%d, default 1) of a running sandbox and print their ids,\n"
                   "one a line. Each starts with the parent's files and config (fresh\n"
                   "processes); the parent is frozen for a moment and goes on. Copies that\n"
                   "could not be made are reported on stderr, and the exit status is then 1.\n"
                   "  --timeout SECS   the copies' timeout (default: the parent's)\n"
                   "  --metadata K=V   a label of the copies (repeatable)\n",
                   MAX_FORK);
            rc = 0;
            goto out;
        default:
            rc = cli_bad_option("fork", argv);
            goto out;
        }
    }
    if (argc - optind != 1) {
        cli_errorf("fork: want exactly one sandbox id (usage: warren fork -n N ID)");
        goto out;
    }
    if (!cli_check_id("fork", argv[optind]))
        goto out;
    fo.metadata = n_meta ? metav : NULL;
    rc = CLI_EXIT_FAIL;
    if ((w = cli_warren_or_complain("fork")) == NULL)
        goto out;
    if (warren_fork(w, argv[optind], &fo, &copies, &werr) < 0) {
        cli_errorf("fork: %s", werr.message);
        goto out;
    }
    if (json) {
        res = cli_json(warren_sandbox_list_json(copies));
        cli_print_json(res);
    } else {
        for (k = 0; k < warren_sandbox_list_len(copies); k++)
            printf("%s\n", warren_sandbox_id(warren_sandbox_list_at(copies, k)) ?: "?");
    }
    fflush(stdout);
    rc = 0;
    for (k = 0; k < warren_sandbox_list_nerrors(copies); k++) {
        const warren_error *e = warren_sandbox_list_error(copies, k);
        cli_errorf("fork: a copy failed: %s (%s)", e->message, e->api_code[0] ? e->api_code : "?");
        rc = CLI_EXIT_FAIL;
    }
out:
    warren_sandbox_list_free(copies);
    warren_close(w);
    json_decref(meta);
    json_decref(res);
    return rc;
}
