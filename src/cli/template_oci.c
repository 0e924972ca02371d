/* SPDX-License-Identifier: Apache-2.0 */
/* `warren template import FILE --name N` and `warren template pull REF --name N`: templates from
 * OCI images (POST /v1/templates/import and /pull). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "cli.h"
#include "client.h"

#define TEMPLATE_OCI_USAGE                                                                         \
    "usage: warren template import FILE --name NAME [--replace] [--shared] [-o json]\n"            \
    "       warren template pull IMAGE --name NAME [--insecure] [--username USER\n"                \
    "                                  [--password-stdin]] [--replace] [--shared] [-o json]\n\n"   \
    "import: a docker-archive (`docker save`, `skopeo copy ... docker-archive:F`) or an\n"         \
    "oci-archive tarball, streamed to warrend; FILE `-` reads standard input.\n"                   \
    "pull: IMAGE is host[:port]/repository[:tag] or ...@sha256:<hex>, from a registry that\n"      \
    "warrend reaches; --insecure uses plain http. The password is read from standard input\n"      \
    "(--password-stdin) or WARREN_REGISTRY_PASSWORD, never from the command line.\n"               \
    "--shared (admin keys): a template every team uses; its name is then reserved.\n"

static void print_template(const json_t *t, bool json)
{
    if (json)
        cli_print_json(t);
    else
        printf("%s: %" PRId64 " layers, %" PRId64 " bytes\n",
               json_string_value(json_object_get(t, "name")) ?: "",
               (int64_t)json_integer_value(json_object_get(t, "layers")),
               (int64_t)json_integer_value(json_object_get(t, "size_bytes")));
}

/* A template name the server may accept is safe in a query as it is. */
static bool plain_name(const char *s)
{
    if (s == NULL || s[0] == '\0')
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '_' || *s == '.'))
            return false;
    return true;
}

static int do_import(const char *file, const char *name, bool replace, bool shared, bool json)
{
    _cleanup_free_ char *target = NULL;
    _cleanup_close_ int fd = -1;
    struct cli_http_req req = {.method = "POST", .content_type = "application/x-tar"};
    struct cli_http_resp resp = {0};
    struct cli_http *http;
    struct wr_err err;
    struct stat st;
    json_t *t;
    int rc = CLI_EXIT_FAIL;

    if (strcmp(file, "-") == 0) {
        fd = dup(0);
        req.body_fd_len = -1;
    } else {
        fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && fstat(fd, &st) == 0)
            req.body_fd_len = S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
    }
    if (fd < 0) {
        cli_errorf("template import: %s: %s", file, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    target = xasprintf("/v1/templates/import?name=%s%s%s", name, replace ? "&replace=true" : "",
                       shared ? "&shared=true" : "");
    req.target = target;
    req.body_kind = CLI_BODY_FD;
    req.body_fd = fd;
    if ((http = cli_connect_or_complain("template import")) == NULL)
        return CLI_EXIT_FAIL;
    if (cli_http_request(http, &req, &resp, &err) < 0) {
        cli_errorf("template import: %s", err.msg);
    } else if (resp.status != 201) {
        cli_http_error(&resp, &err);
        cli_errorf("template import: %s", err.msg);
    } else if ((t = json_loadb(resp.body ? resp.body : "", resp.body_len, 0, NULL)) == NULL) {
        cli_errorf("template import: the server answered something else than JSON");
    } else {
        print_template(t, json);
        json_decref(t);
        rc = 0;
    }
    cli_http_resp_fini(&resp);
    cli_http_close(http);
    return rc;
}

static char *read_password(void)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);

    if (n < 0) {
        free(line);
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    return line;
}

static int do_pull(const char *image, const char *name, const char *user, bool pw_stdin,
                   bool insecure, bool replace, bool shared, bool json)
{
    _cleanup_free_ char *pw = NULL;
    json_t *body, *t = NULL;
    struct cli_http *http;
    struct wr_err err;
    int rc = CLI_EXIT_FAIL;

    if (pw_stdin) {
        pw = read_password();
        if (pw == NULL) {
            cli_errorf("template pull: no password on standard input");
            return CLI_EXIT_USAGE;
        }
    } else if (getenv("WARREN_REGISTRY_PASSWORD") != NULL) {
        pw = xstrdup(getenv("WARREN_REGISTRY_PASSWORD"));
    }
    body = json_pack("{s:s,s:s,s:b,s:b}", "name", name, "image", image, "insecure", insecure,
                     "replace", replace);
    if (shared)
        json_object_set_new(body, "shared", json_true());
    if (user != NULL)
        json_object_set_new(body, "username", json_string(user));
    if (pw != NULL)
        json_object_set_new(body, "password", json_string(pw));
    if ((http = cli_connect_or_complain("template pull")) == NULL) {
        json_decref(body);
        return CLI_EXIT_FAIL;
    }
    if (cli_api(http, "POST", "/v1/templates/pull", body, &t, &err) < 0) {
        cli_errorf("template pull: %s", err.msg);
    } else {
        print_template(t, json);
        rc = 0;
    }
    if (pw != NULL)
        explicit_bzero(pw, strlen(pw));
    json_decref(body);
    json_decref(t);
    cli_http_close(http);
    return rc;
}

/* `warren template import|pull ...`; argv[0] is the sub-verb. */
int cli_template_oci(int argc, char **argv)
{
    enum { O_NAME = 256, O_REPLACE, O_SHARED, O_INSECURE, O_USER, O_PWSTDIN };
    static const struct option longopts[] = {
        {"name", required_argument, NULL, O_NAME},
        {"replace", no_argument, NULL, O_REPLACE},
        {"shared", no_argument, NULL, O_SHARED},
        {"insecure", no_argument, NULL, O_INSECURE},
        {"username", required_argument, NULL, O_USER},
        {"password-stdin", no_argument, NULL, O_PWSTDIN},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *verb = strcmp(argv[0], "import") == 0 ? "template import" : "template pull";
    const char *name = NULL, *user = NULL;
    bool replace = false, shared = false, insecure = false, pw_stdin = false, json = false;
    int c;

    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case O_NAME:
            name = optarg;
            break;
        case O_REPLACE:
            replace = true;
            break;
        case O_SHARED:
            shared = true;
            break;
        case O_INSECURE:
            insecure = true;
            break;
        case O_USER:
            user = optarg;
            break;
        case O_PWSTDIN:
            pw_stdin = true;
            break;
        case 'o':
            if (cli_output_arg(verb, optarg, &json) < 0)
                return CLI_EXIT_USAGE;
            break;
        case 'h':
            fputs(TEMPLATE_OCI_USAGE, stdout);
            return 0;
        default:
            return cli_bad_option(verb, argv);
        }
    }
    if (argc - optind != 1 || !plain_name(name)) {
        cli_errorf("%s: want one %s and --name NAME (1-64 of [A-Za-z0-9._-]; see `warren "
                   "template --help`)",
                   verb, strcmp(argv[0], "import") == 0 ? "FILE" : "IMAGE");
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[0], "import") == 0) {
        if (user != NULL || pw_stdin || insecure) {
            cli_errorf("template import: --username, --password-stdin and --insecure are for pull");
            return CLI_EXIT_USAGE;
        }
        return do_import(argv[optind], name, replace, shared, json);
    }
    if (pw_stdin && user == NULL) {
        cli_errorf("template pull: --password-stdin needs --username");
        return CLI_EXIT_USAGE;
    }
    return do_pull(argv[optind], name, user, pw_stdin, insecure, replace, shared, json);
}
