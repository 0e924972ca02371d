/* SPDX-License-Identifier: Apache-2.0 */
/* The exposed-ports benchmark's server (bench/ports.sh): HTTP/1.1 keep-alive on one epoll
 * thread, every request (bodyless, as wrk sends) answered with the same 13 bytes. Built static
 * so that it runs in any template. Usage: httpd ADDR PORT */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF 16384

static const char RESP[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n"
                           "\r\nHello, world\n";

struct cn {
    int fd;
    size_t len;
    char buf[BUF];
};

int main(int argc, char **argv)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    struct epoll_event ev, evs[256];
    int one = 1, lfd, ep;

    if (argc != 3) {
        fprintf(stderr, "usage: httpd ADDR PORT\n");
        return 2;
    }
    sa.sin_port = htons((unsigned short)atoi(argv[2]));
    if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1)
        return 2;
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 1024) < 0) {
        perror("httpd: listen");
        return 1;
    }
    ep = epoll_create1(0);
    ev.events = EPOLLIN;
    ev.data.ptr = NULL;
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            struct cn *c = evs[i].data.ptr;
            if (c == NULL) {
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                    c = calloc(1, sizeof(*c));
                    c->fd = fd;
                    ev.events = EPOLLIN;
                    ev.data.ptr = c;
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
                }
                continue;
            }
            ssize_t r = read(c->fd, c->buf + c->len, BUF - c->len);
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN)
                    continue;
                close(c->fd);
                free(c);
                continue;
            }
            c->len += (size_t)r;
            char *p = c->buf, *end;
            size_t answers = 0;
            while ((end = memmem(p, c->len - (size_t)(p - c->buf), "\r\n\r\n", 4)) != NULL) {
                answers++;
                p = end + 4;
            }
            c->len -= (size_t)(p - c->buf);
            memmove(c->buf, p, c->len);
            if (c->len == BUF) { /* a head that big is not wrk's */
                close(c->fd);
                free(c);
                continue;
            }
            for (size_t k = 0; k < answers; k++)
                if (write(c->fd, RESP, sizeof(RESP) - 1) < 0)
                    break;
        }
    }
}
