/* SPDX-License-Identifier: Apache-2.0 */
/* `warren ports`, `warren port-forward` and `warren ssh`: a sandbox's listening ports, a local
 * port (or stdin/stdout) relayed to one of them over the daemon's raw-TCP WebSocket
 * (/v1/sandboxes/{id}/ports/{port}/tcp), and ssh through that relay to an sshd started in the
 * sandbox on demand.
 *
 * The WebSocket client is small and ours: binary frames out (masked, at most 64 KiB each), any
 * data frame in, pings answered, a close ends the relay. An empty binary message tells the
 * daemon that our input ended (it half-closes the sandbox's side). */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../util/b64.h"
#include "../util/cleanup.h"
#include "../util/xalloc.h"
#include "cli.h"
#include "client.h"

#define FRAME_MAX (64u * 1024)

/* ---- the WebSocket client ------------------------------------------------------------------ */

static int write_all(int fd, const void *p, size_t n)
{
    const char *b = p;

    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == ENOTSOCK)
            w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static int ws_send(int fd, int op, const void *p, size_t n)
{
    uint8_t hdr[14], mask[4];
    size_t hl = 0;
    _cleanup_free_ uint8_t *buf = NULL;

    if (getrandom(mask, sizeof(mask), 0) != sizeof(mask))
        memset(mask, 0x5a, sizeof(mask));
    hdr[hl++] = (uint8_t)(0x80 | op);
    if (n < 126) {
        hdr[hl++] = (uint8_t)(0x80 | n);
    } else if (n < 65536) {
        hdr[hl++] = 0x80 | 126;
        hdr[hl++] = (uint8_t)(n >> 8);
        hdr[hl++] = (uint8_t)n;
    } else {
        hdr[hl++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--)
            hdr[hl++] = (uint8_t)((uint64_t)n >> (8 * i));
    }
    memcpy(hdr + hl, mask, 4);
    hl += 4;
    buf = xmalloc(hl + n);
    memcpy(buf, hdr, hl);
    for (size_t i = 0; i < n; i++)
        buf[hl + i] = ((const uint8_t *)p)[i] ^ mask[i % 4];
    return write_all(fd, buf, hl + n);
}

/* The relay between a local pair of fds and the WebSocket on ws. Returns 0 when the WebSocket
 * closed, -1 on a transport error (printed). */
static int relay(int ws, int in, int out, struct wr_buf *pending)
{
    struct wr_buf rx = {0};
    uint8_t buf[FRAME_MAX];
    bool in_open = true;
    int rc = -1;

    if (pending->len > 0)
        wr_buf_append(&rx, pending->data, pending->len);
    for (;;) {
        /* Frames already received. */
        for (;;) {
            const uint8_t *d = rx.data;
            size_t hl = 2, n;
            int op;
            if (rx.len < 2)
                break;
            op = d[0] & 15;
            n = d[1] & 127;
            if (d[1] & 0x80) {
                cli_errorf("port-forward: the server sent a masked frame");
                goto out;
            }
            if (n == 126) {
                if (rx.len < 4)
                    break;
                n = (size_t)d[2] << 8 | d[3];
                hl = 4;
            } else if (n == 127) {
                if (rx.len < 10)
                    break;
                n = 0;
                for (int i = 0; i < 8; i++)
                    n = n << 8 | d[2 + i];
                hl = 10;
                if (n > (64u << 20)) {
                    cli_errorf("port-forward: a frame of %zu bytes", n);
                    goto out;
                }
            }
            if (rx.len < hl + n)
                break;
            if (op == 8) {
                (void)ws_send(ws, 8, d + hl, n < 2 ? n : 2);
                rc = 0;
                goto out;
            }
            if (op == 9)
                (void)ws_send(ws, 10, d + hl, n);
            else if ((op == 0 || op == 1 || op == 2) && n > 0 && write_all(out, d + hl, n) < 0) {
                rc = 0; /* our reader went away */
                goto out;
            }
            wr_buf_consume(&rx, hl + n);
        }
        struct pollfd p[2] = {{.fd = ws, .events = POLLIN},
                              {.fd = in_open ? in : -1, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            goto out;
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r = read(in, buf, sizeof(buf));
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                in_open = false;
                (void)ws_send(ws, 2, "", 0); /* our end of input */
            } else if (ws_send(ws, 2, buf, (size_t)r) < 0) {
                cli_errorf("port-forward: send: %s", strerror(errno));
                goto out;
            }
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r = recv(ws, buf, sizeof(buf), 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                rc = 0;
                goto out;
            }
            wr_buf_append(&rx, buf, (size_t)r);
        }
    }
out:
    wr_buf_fini(&rx);
    return rc;
}

/* Open the raw-TCP WebSocket to port of sandbox id: the socket, or -1 (printed). */
static int tcp_ws_open(const char *verb, const char *id, unsigned port, struct wr_buf *rest)
{
    struct cli_http *c = cli_connect_or_complain(verb);
    uint8_t raw[16];
    char key[32], target[256];
    struct wr_err err;
    int fd = -1;

    if (c == NULL)
        return -1;
    if (getrandom(raw, sizeof(raw), 0) != sizeof(raw))
        memset(raw, 7, sizeof(raw));
    key[wr_b64_encode(raw, sizeof(raw), key)] = '\0';
    snprintf(target, sizeof(target), "/v1/sandboxes/%s/ports/%u/tcp", id, port);
    if (cli_http_upgrade(c, target, key, &fd, rest, &err) < 0) {
        cli_errorf("%s: %s", verb, err.msg);
        fd = -1;
    }
    cli_http_close(c);
    return fd;
}

static bool parse_port(const char *s, unsigned *out)
{
    char *end;
    unsigned long v;

    if (s[0] < '1' || s[0] > '9')
        return false;
    v = strtoul(s, &end, 10);
    if (*end != '\0' || v > 65535)
        return false;
    *out = (unsigned)v;
    return true;
}

/* ---- warren ports -------------------------------------------------------------------------- */

int cmd_ports(int argc, char **argv)
{
    bool json = false;
    int rc, i = cli_simple_opts("ports",
                                "usage: warren ports ID [-o json]\n\n"
                                "The TCP ports listening in sandbox ID (address and port).\n",
                                argc, argv, &json, &rc);
    struct cli_http *c;
    json_t *out = NULL, *v;
    struct wr_err err;
    char target[128];
    size_t k;

    if (i < 0)
        return rc;
    if (argc - i != 1) {
        cli_errorf("ports: want one sandbox ID (see `warren ports --help`)");
        return CLI_EXIT_USAGE;
    }
    if (!cli_check_id("ports", argv[i]))
        return CLI_EXIT_USAGE;
    if ((c = cli_connect_or_complain("ports")) == NULL)
        return CLI_EXIT_FAIL;
    snprintf(target, sizeof(target), "/v1/sandboxes/%s/ports", argv[i]);
    if (cli_api(c, "GET", target, NULL, &out, &err) < 0) {
        cli_errorf("ports: %s", err.msg);
        cli_http_close(c);
        return CLI_EXIT_FAIL;
    }
    cli_http_close(c);
    if (json) {
        cli_print_json(out);
    } else {
        printf("%-6s %-40s %s\n", "PORT", "ADDRESS", "PROTOCOL");
        json_array_foreach(json_object_get(out, "ports"), k, v)
            printf("%-6lld %-40s %s\n", (long long)json_integer_value(json_object_get(v, "port")),
                   json_string_value(json_object_get(v, "address")),
                   json_string_value(json_object_get(v, "protocol")));
    }
    json_decref(out);
    return 0;
}

/* ---- warren port-forward ------------------------------------------------------------------- */

static int forward_stdio(const char *id, unsigned port)
{
    struct wr_buf rest = {0};
    int fd = tcp_ws_open("port-forward", id, port, &rest);
    int rc;

    if (fd < 0)
        return CLI_EXIT_FAIL;
    rc = relay(fd, 0, 1, &rest);
    wr_buf_fini(&rest);
    (void)close(fd);
    return rc == 0 ? 0 : CLI_EXIT_FAIL;
}

static int forward_listen(const char *id, unsigned local, unsigned remote)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)local)};
    int one = 1, lfd;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 64) < 0) {
        cli_errorf("port-forward: listen on 127.0.0.1:%u: %s", local, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    if (local == 0) {
        socklen_t l = sizeof(sa);
        (void)getsockname(lfd, (struct sockaddr *)&sa, &l);
        local = ntohs(sa.sin_port);
    }
    (void)signal(SIGCHLD, SIG_IGN); /* children reaped by the kernel */
    printf("Forwarding from 127.0.0.1:%u -> %s:%u\n", local, id, remote);
    fflush(stdout);
    for (;;) {
        int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        pid_t pid;
        if (cfd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            cli_errorf("port-forward: accept: %s", strerror(errno));
            return CLI_EXIT_FAIL;
        }
        (void)setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        pid = fork();
        if (pid == 0) {
            struct wr_buf rest = {0};
            int ws;
            (void)close(lfd);
            (void)signal(SIGCHLD, SIG_DFL);
            ws = tcp_ws_open("port-forward", id, remote, &rest);
            if (ws < 0)
                _exit(1);
            int rc = relay(ws, cfd, cfd, &rest);
            (void)shutdown(cfd, SHUT_WR);
            _exit(rc == 0 ? 0 : 1);
        }
        (void)close(cfd);
    }
}

int cmd_port_forward(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"stdio", no_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char usage[] =
        "usage: warren port-forward ID [LOCAL:]REMOTE\n"
        "       warren port-forward --stdio ID PORT\n\n"
        "Listen on 127.0.0.1:LOCAL (default: REMOTE; 0 picks a free port) and relay each\n"
        "connection to port REMOTE of sandbox ID, through warrend (a WebSocket to\n"
        "/v1/sandboxes/ID/ports/REMOTE/tcp). With --stdio, stdin and stdout are the one\n"
        "connection, as ssh's ProxyCommand wants:\n"
        "  ssh -o ProxyCommand='warren port-forward --stdio %h 22' user@ID\n";
    bool stdio = false;
    unsigned local = 0, remote = 0;
    const char *spec, *colon;
    int c;

    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            stdio = true;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            return cli_bad_option("port-forward", argv);
        }
    }
    if (argc - optind != 2) {
        fputs(usage, stderr);
        return CLI_EXIT_USAGE;
    }
    if (!cli_check_id("port-forward", argv[optind]))
        return CLI_EXIT_USAGE;
    spec = argv[optind + 1];
    colon = strchr(spec, ':');
    if (stdio || colon == NULL) {
        if (!parse_port(spec, &remote)) {
            cli_errorf("port-forward: `%s` is not a port (1-65535)", spec);
            return CLI_EXIT_USAGE;
        }
        local = remote;
    } else {
        _cleanup_free_ char *l = xstrndup(spec, (size_t)(colon - spec));
        if ((strcmp(l, "0") != 0 && !parse_port(l, &local)) || !parse_port(colon + 1, &remote)) {
            cli_errorf("port-forward: want LOCAL:REMOTE ports, not `%s`", spec);
            return CLI_EXIT_USAGE;
        }
    }
    if (stdio)
        return forward_stdio(argv[optind], remote);
    return forward_listen(argv[optind], local, remote);
}

/* ---- warren ssh ---------------------------------------------------------------------------- */

/* ~/.config/warren/ssh (or $XDG_CONFIG_HOME/warren/ssh), made if missing. */
static char *ssh_dir(void)
{
    const char *xdg = getenv("XDG_CONFIG_HOME");
    const char *home = getenv("HOME");
    char *base = xdg && xdg[0] ? xasprintf("%s/warren", xdg)
                               : xasprintf("%s/.config/warren", home ? home : ".");
    char *dir = xasprintf("%s/ssh", base);
    _cleanup_free_ char *parent = NULL;

    if (!xdg || !xdg[0]) {
        parent = xasprintf("%s/.config", home ? home : ".");
        (void)mkdir(parent, 0700);
    }
    (void)mkdir(base, 0700);
    (void)mkdir(dir, 0700);
    free(base);
    return dir;
}

static int run_wait(char *const argv[])
{
    pid_t pid = fork();
    int st;

    if (pid < 0)
        return -1;
    if (pid == 0) {
        execvp(argv[0], argv);
        _exit(127);
    }
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Run a shell script as root in the sandbox, stdin given: its stdout (caller frees) or NULL
 * (printed). *exit_code gets its status. */
static char *sandbox_sh(struct cli_http *c, const char *id, const char *script, const char *in,
                        int *exit_code)
{
    json_t *body = json_pack("{s:[s,s,s],s:s,s:s,s:i}", "cmd", "/bin/sh", "-c", script, "user",
                             "root", "mode", "wait", "timeout", 120);
    json_t *out = NULL;
    struct wr_err err;
    char target[128];
    char *res = NULL;

    if (in != NULL)
        json_object_set_new(body, "stdin", json_string(in));
    snprintf(target, sizeof(target), "/v1/sandboxes/%s/exec", id);
    if (cli_api(c, "POST", target, body, &out, &err) < 0) {
        cli_errorf("ssh: %s", err.msg);
    } else {
        const char *so = json_string_value(json_object_get(out, "stdout"));
        *exit_code = (int)json_integer_value(json_object_get(out, "exit_code"));
        res = xstrdup(so ? so : "");
        if (*exit_code != 0) {
            const char *se = json_string_value(json_object_get(out, "stderr"));
            cli_errorf("ssh: in the sandbox: %s", se && se[0] ? se : "the setup failed");
        }
    }
    json_decref(body);
    json_decref(out);
    return res;
}

/* Whether something listens on port 22 in the sandbox. */
static bool sshd_listening(struct cli_http *c, const char *id)
{
    json_t *out = NULL, *v;
    struct wr_err err;
    char target[128];
    bool yes = false;
    size_t k;

    snprintf(target, sizeof(target), "/v1/sandboxes/%s/ports", id);
    if (cli_api(c, "GET", target, NULL, &out, &err) < 0)
        return false;
    json_array_foreach(json_object_get(out, "ports"), k,
                       v) if (json_integer_value(json_object_get(v, "port")) == 22) yes = true;
    json_decref(out);
    return yes;
}

/* The sandbox side of `warren ssh`: the key in the user's authorized_keys, sshd running. The
 * user is the template's default one unless given. Prints the login user. */
static const char SETUP[] =
    "set -e\n"
    "u=\"$1\"; [ -n \"$u\" ] || u=$(id -un 2>/dev/null || echo root)\n"
    "h=$(getent passwd \"$u\" | cut -d: -f6); [ -n \"$h\" ] || h=/root\n"
    "g=$(id -g \"$u\")\n"
    "mkdir -p \"$h/.ssh\"; chmod 700 \"$h/.ssh\"\n"
    "k=$(cat)\n"
    "touch \"$h/.ssh/authorized_keys\"\n"
    "grep -qxF \"$k\" \"$h/.ssh/authorized_keys\" || printf '%s\\n' \"$k\" >> "
    "\"$h/.ssh/authorized_keys\"\n"
    "chmod 600 \"$h/.ssh/authorized_keys\"; chown -R \"$u:$g\" \"$h/.ssh\"\n"
    "echo \"$u\"\n";

static const char START_SSHD[] =
    "set -e\n"
    "command -v /usr/sbin/sshd >/dev/null || { echo 'no sshd in this sandbox (install "
    "openssh-server)' >&2; exit 3; }\n"
    "mkdir -p /run/sshd; chmod 755 /run/sshd\n"
    "ls /etc/ssh/ssh_host_*_key >/dev/null 2>&1 || ssh-keygen -A >/dev/null\n"
    "/usr/sbin/sshd -o PasswordAuthentication=no -o KbdInteractiveAuthentication=no\n"
    "i=0; while [ $i -lt 50 ] && ! grep -q ':0016 00000000:0000 0A' /proc/net/tcp "
    "/proc/net/tcp6 2>/dev/null; do sleep 0.1; i=$((i+1)); done\n";

/* A user name fit for `user@host` and an ssh_config line: what the sandbox says (its `id -un`,
 * the setup's answer) is the sandbox's, and a name like "-oProxyCommand=..." would be an ssh
 * option run on this machine. */
static bool login_ok(const char *s)
{
    if (s == NULL || s[0] == '\0' || strlen(s) > 32 || s[0] == '-' || s[0] == '.')
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-' || *p == '.'))
            return false;
    return true;
}

int cmd_ssh(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"user", required_argument, NULL, 'u'},
        {"config", no_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char usage[] =
        "usage: warren ssh [--user USER] ID [ssh options and command...]\n"
        "       warren ssh --config ID\n\n"
        "ssh into sandbox ID through warrend: makes a key pair if there is none\n"
        "(~/.config/warren/ssh/id_ed25519), puts its public key in the user's\n"
        "~/.ssh/authorized_keys in the sandbox (USER: the template's default user), starts\n"
        "sshd there if nothing listens on port 22, then runs the system ssh with\n"
        "  -o ProxyCommand='warren port-forward --stdio %h 22'\n"
        "so ssh -L/-R/-D and a remote command work as usual: `warren ssh ID -L "
        "8080:localhost:80`.\n"
        "--config prints an ssh_config block for ID (after the same setup), for scp, rsync\n"
        "and ssh itself: `warren ssh --config ID >> ~/.ssh/config; scp file ID:/tmp/`.\n";
    _cleanup_free_ char *dir = NULL, *key = NULL, *pub = NULL, *known = NULL, *self = NULL;
    _cleanup_free_ char *login = NULL, *proxy = NULL, *dest = NULL, *pubtext = NULL;
    const char *user = NULL, *id;
    bool config = false;
    struct cli_http *c;
    int ch, code = 0;

    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'u':
            user = optarg;
            break;
        case 'c':
            config = true;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            return cli_bad_option("ssh", argv);
        }
    }
    if (optind >= argc) {
        fputs(usage, stderr);
        return CLI_EXIT_USAGE;
    }
    id = argv[optind++];
    if (!cli_check_id("ssh", id))
        return CLI_EXIT_USAGE;
    dir = ssh_dir();
    key = xasprintf("%s/id_ed25519", dir);
    pub = xasprintf("%s.pub", key);
    known = xasprintf("%s/known_hosts", dir);
    if (access(key, R_OK) != 0) {
        char *kg[] = {"ssh-keygen", "-q",     "-t", "ed25519", "-N", "",
                      "-C",         "warren", "-f", key,       NULL};
        if (run_wait(kg) != 0) {
            cli_errorf("ssh: ssh-keygen failed to make %s", key);
            return CLI_EXIT_FAIL;
        }
    }
    {
        FILE *f = fopen(pub, "re");
        char line[1024];
        if (f == NULL || fgets(line, sizeof(line), f) == NULL) {
            cli_errorf("ssh: read %s: %s", pub, strerror(errno));
            if (f)
                fclose(f);
            return CLI_EXIT_FAIL;
        }
        fclose(f);
        line[strcspn(line, "\r\n")] = '\0';
        pubtext = xstrdup(line);
    }
    if ((c = cli_connect_or_complain("ssh")) == NULL)
        return CLI_EXIT_FAIL;
    {
        _cleanup_free_ char *script = xasprintf("set -- '%s'\n%s", user ? user : "", SETUP);
        if (user != NULL && !login_ok(user)) {
            cli_errorf("ssh: bad user name `%s`", user);
            cli_http_close(c);
            return CLI_EXIT_USAGE;
        }
        /* The default user is the template's: ask as it, not as root. */
        if (user == NULL) {
            json_t *body = json_pack("{s:[s,s],s:s}", "cmd", "id", "-un", "mode", "wait");
            json_t *out = NULL;
            struct wr_err err;
            char target[128];
            snprintf(target, sizeof(target), "/v1/sandboxes/%s/exec", id);
            if (cli_api(c, "POST", target, body, &out, &err) < 0) {
                cli_errorf("ssh: %s", err.msg);
                json_decref(body);
                cli_http_close(c);
                return CLI_EXIT_FAIL;
            }
            const char *so = json_string_value(json_object_get(out, "stdout"));
            login = xstrndup(so ? so : "root", so ? strcspn(so, "\n") : 4);
            json_decref(body);
            json_decref(out);
            if (!login_ok(login)) {
                cli_errorf("ssh: the sandbox's default user `%s` is not a user name; use --user",
                           login);
                cli_http_close(c);
                return CLI_EXIT_FAIL;
            }
            free(script);
            script = xasprintf("set -- '%s'\n%s", login, SETUP);
            free(login);
            login = NULL;
        }
        char *got = sandbox_sh(c, id, script, pubtext, &code);
        if (got == NULL || code != 0) {
            free(got);
            cli_http_close(c);
            return CLI_EXIT_FAIL;
        }
        got[strcspn(got, "\n")] = '\0';
        login = got;
        if (!login_ok(login)) {
            cli_errorf("ssh: the sandbox answered `%s` for the user", login);
            cli_http_close(c);
            return CLI_EXIT_FAIL;
        }
    }
    if (!sshd_listening(c, id)) {
        char *got = sandbox_sh(c, id, START_SSHD, NULL, &code);
        free(got);
        if (got == NULL || code != 0) {
            cli_http_close(c);
            return CLI_EXIT_FAIL;
        }
    }
    cli_http_close(c);
    self = realpath("/proc/self/exe", NULL);
    if (self == NULL || strchr(self, '\'') != NULL) {
        free(self);
        self = xstrdup("warren"); /* from PATH */
    }
    /* ssh runs the ProxyCommand with the shell: the path quoted, %h is the sandbox id */
    proxy = xasprintf("ProxyCommand='%s' port-forward --stdio %%h 22", self);
    if (config) {
        printf("Host %s\n"
               "    HostName %s\n"
               "    User %s\n"
               "    IdentityFile \"%s\"\n"
               "    IdentitiesOnly yes\n"
               "    UserKnownHostsFile \"%s\"\n"
               "    StrictHostKeyChecking accept-new\n"
               "    ProxyCommand '%s' port-forward --stdio %%h 22\n",
               id, id, login, key, known, self);
        return 0;
    }
    {
        _cleanup_free_ char *ukh = xasprintf("UserKnownHostsFile=%s", known);
        size_t n = (size_t)(argc - optind);
        char **av = xcalloc(n + 16, sizeof(*av));
        size_t k = 0;
        dest = xasprintf("%s@%s", login, id);
        av[k++] = "ssh";
        av[k++] = "-o";
        av[k++] = proxy;
        av[k++] = "-o";
        av[k++] = ukh;
        av[k++] = "-o";
        av[k++] = "StrictHostKeyChecking=accept-new";
        av[k++] = "-o";
        av[k++] = "IdentitiesOnly=yes";
        av[k++] = "-i";
        av[k++] = key;
        /* Options the user gave (before the destination, as ssh wants), then the command. */
        size_t j = (size_t)optind;
        while (j < (size_t)argc && argv[j][0] == '-') {
            av[k++] = argv[j];
            /* ssh options that take a value */
            if (strlen(argv[j]) == 2 && strchr("BbcDEeFIiJLlmOoPpQRSWw", argv[j][1]) != NULL &&
                j + 1 < (size_t)argc)
                av[k++] = argv[++j];
            j++;
        }
        av[k++] = dest;
        while (j < (size_t)argc)
            av[k++] = argv[j++];
        av[k] = NULL;
        execvp("ssh", av);
        cli_errorf("ssh: exec ssh: %s", strerror(errno));
        free(av);
        return CLI_EXIT_FAIL;
    }
}
