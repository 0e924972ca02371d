/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's TCP ports, as seen from inside its network namespace: PORT_OPEN connects to
 * 127.0.0.1:PORT (then [::1]:PORT) and hands the connected socket to the daemon with
 * SCM_RIGHTS, so the daemon relays with no hop in here; PORT_LIST reads /proc/net/tcp and tcp6
 * for the sockets in LISTEN. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../util/log.h"
#include "../util/xalloc.h"
#include "init.h"

/* A connect in progress for a PORT_OPEN. */
struct port_open {
    struct init_fdw w;
    struct init_conn *c; /* NULL once the connection is gone */
    uint32_t id;
    uint16_t port;
    bool v6; /* trying [::1] (127.0.0.1 was refused) */
    bool done;
    struct port_open *next;
};

static struct port_open *opens;

static void on_connect(struct init_fdw *w, uint32_t events);

/* Start a nonblocking connect to the port on loopback. Returns 0 (connected or in progress:
 * *fd set, *inprogress says which) or -1 with errno. */
static int loop_connect(uint16_t port, bool v6, int *fd, bool *inprogress)
{
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(port)};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
    int s = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1, rc;

    if (s < 0)
        return -1;
    (void)setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a6.sin6_addr = in6addr_loopback;
    rc = v6 ? connect(s, (struct sockaddr *)&a6, sizeof(a6))
            : connect(s, (struct sockaddr *)&a4, sizeof(a4));
    if (rc == 0 || errno == EINPROGRESS) {
        *fd = s;
        *inprogress = rc != 0;
        return 0;
    }
    int e = errno;
    (void)close(s);
    errno = e;
    return -1;
}

/* The connect ended: fd connected (>= 0), or failed with errnum. Answers and finishes po. */
static void open_finish(struct port_open *po, int fd, int errnum)
{
    po->done = true;
    if (po->c != NULL) {
        if (fd >= 0)
            init_conn_send_fd(po->c, po->id, fd);
        else if (errnum == ECONNREFUSED)
            init_conn_errorf(po->c, po->id, errnum, "nothing listens on port %u",
                             (unsigned)po->port);
        else
            init_conn_errorf(po->c, po->id, errnum, "connect to port %u", (unsigned)po->port);
    }
    if (fd >= 0)
        (void)close(fd);
    init_loop_again(); /* the pump writes the answer and frees po */
}

/* Try 127.0.0.1, then [::1] if that is refused (a server bound to ::1 only). */
static void open_step(struct port_open *po)
{
    for (;;) {
        bool inprogress = false;
        int fd = -1;

        if (loop_connect(po->port, po->v6, &fd, &inprogress) == 0) {
            if (!inprogress) {
                open_finish(po, fd, 0);
                return;
            }
            po->w.fd = fd;
            init_fdw_set(&po->w, EPOLLOUT);
            return;
        }
        if ((errno == ECONNREFUSED || errno == EAFNOSUPPORT) && !po->v6) {
            po->v6 = true;
            continue;
        }
        open_finish(po, -1, po->v6 && errno == EAFNOSUPPORT ? ECONNREFUSED : errno);
        return;
    }
}

static void on_connect(struct init_fdw *w, uint32_t events)
{
    struct port_open *po = w->owner;
    int soerr = 0;
    socklen_t len = sizeof(soerr);
    int fd = w->fd;

    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
        soerr = errno;
    if (soerr == 0 && !(events & (EPOLLERR | EPOLLHUP))) {
        init_fdw_set(w, 0);
        w->fd = -1;
        open_finish(po, fd, 0);
        return;
    }
    init_fdw_close(w);
    if (soerr == 0)
        soerr = ECONNREFUSED;
    if (soerr == ECONNREFUSED && !po->v6) {
        po->v6 = true;
        open_step(po);
        return;
    }
    open_finish(po, -1, soerr);
}

static void port_open(struct init_conn *c, const struct wr_frame_hdr *h, const uint8_t *p)
{
    struct port_open *po;
    uint64_t port = 0;

    if (wr_msg_get_u64(p, h->len, WR_TAG_PORT, &port) < 0 || port == 0 || port > 65535) {
        init_conn_errorf(c, h->id, EINVAL, "port_open: a PORT of 1-65535 is required");
        return;
    }
    po = xcalloc(1, sizeof(*po));
    po->w.fd = -1;
    po->w.cb = on_connect;
    po->w.owner = po;
    po->c = c;
    po->id = h->id;
    po->port = (uint16_t)port;
    po->next = opens;
    opens = po;
    open_step(po);
}

/* ---- PORT_LIST ----------------------------------------------------------------------------- */

static bool seen(const struct wr_port_listen *v, size_t n, const struct wr_port_listen *x)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].port == x->port && strcmp(v[i].addr, x->addr) == 0)
            return true;
    return false;
}

/* The LISTEN sockets of one /proc/net file, appended to *v. */
static void read_table(const char *path, bool v6, struct wr_port_listen **v, size_t *n, size_t *cap)
{
    FILE *f = fopen(path, "re");
    char line[512];

    if (f == NULL)
        return;
    if (fgets(line, sizeof(line), f) == NULL) { /* the header */
        (void)fclose(f);
        return;
    }
    while (fgets(line, sizeof(line), f) != NULL && *n < WR_PORT_LIST_MAX) {
        char local[64], remote[64];
        unsigned st, port;
        struct wr_port_listen it = {0};
        char *colon;

        if (sscanf(line, " %*u: %63s %63s %x", local, remote, &st) != 3 || st != 0x0A)
            continue;
        if ((colon = strchr(local, ':')) == NULL || sscanf(colon + 1, "%x", &port) != 1 ||
            port == 0 || port > 65535)
            continue;
        *colon = '\0';
        if (!v6) {
            struct in_addr a;
            if (strlen(local) != 8)
                continue;
            a.s_addr = (uint32_t)strtoul(local, NULL, 16); /* printed as the raw word */
            if (inet_ntop(AF_INET, &a, it.addr, sizeof(it.addr)) == NULL)
                continue;
        } else {
            struct in6_addr a;
            if (strlen(local) != 32)
                continue;
            for (int i = 0; i < 4; i++) {
                char word[9];
                memcpy(word, local + 8 * i, 8);
                word[8] = '\0';
                a.s6_addr32[i] = (uint32_t)strtoul(word, NULL, 16);
            }
            if (inet_ntop(AF_INET6, &a, it.addr, sizeof(it.addr)) == NULL)
                continue;
        }
        it.port = (uint16_t)port;
        if (seen(*v, *n, &it)) /* SO_REUSEPORT groups list one socket per member */
            continue;
        if (*n == *cap) {
            *cap = *cap ? *cap * 2 : 16;
            *v = xrealloc(*v, *cap * sizeof(**v));
        }
        (*v)[(*n)++] = it;
    }
    (void)fclose(f);
}

static void port_list(struct init_conn *c, const struct wr_frame_hdr *h)
{
    struct wr_port_listen *v = NULL;
    size_t n = 0, cap = 0;

    /* /proc/net is /proc/self/net: init's own network namespace, the sandbox's. */
    read_table("/proc/net/tcp", false, &v, &n, &cap);
    read_table("/proc/net/tcp6", true, &v, &n, &cap);
    wr_port_list_encode(&c->out, h->id, v, n);
    free(v);
}

/* ---- entry points -------------------------------------------------------------------------- */

void init_port_request(struct init_conn *c, const struct wr_frame_hdr *h, const uint8_t *p)
{
    if (h->type == WR_MSG_PORT_OPEN)
        port_open(c, h, p);
    else
        port_list(c, h);
}

void init_ports_conn_gone(struct init_conn *c)
{
    for (struct port_open *po = opens; po != NULL; po = po->next) {
        if (po->c != c)
            continue;
        po->c = NULL;
        if (!po->done) {
            init_fdw_close(&po->w);
            po->done = true;
        }
    }
}

void init_ports_pump(void)
{
    struct port_open **pp = &opens;

    while (*pp != NULL) {
        struct port_open *po = *pp;
        if (!po->done) {
            pp = &po->next;
            continue;
        }
        *pp = po->next;
        init_fdw_close(&po->w);
        free(po);
    }
}
