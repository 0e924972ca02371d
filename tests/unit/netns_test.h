/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers for the unit tests of the network data path: run the test body in a forked child with
 * its own network and mount namespaces (so nothing touches the machine's), enter a namespace by
 * fd and back, read small /proc files. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run body() in a child in fresh network and mount namespaces (mounts private); returns the
 * child's exit status as the test's. Skips (exit 0 with a plan of 0) if not root. */
static inline int netns_test_run(int (*body)(void), const char *name)
{
    pid_t pid;
    int st;

    if (geteuid() != 0) {
        printf("1..0 # SKIP %s: needs root (network namespaces)\n", name);
        return 0;
    }
    fflush(stdout);
    pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        if (unshare(CLONE_NEWNET | CLONE_NEWNS) < 0 ||
            mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
            printf("not ok 1 - private namespaces: %s\n1..1\n", strerror(errno));
            _exit(1);
        }
        fflush(stdout);
        st = body();
        fflush(stdout);
        _exit(st);
    }
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

/* The first line of a file (newline cut), or "(missing)". */
static inline const char *netns_read(const char *path)
{
    static char buf[4][512];
    static int k;
    char *b = buf[k++ % 4];
    FILE *f = fopen(path, "re");

    if (f == NULL)
        return "(missing)";
    if (fgets(b, 512, f) == NULL)
        b[0] = '\0';
    fclose(f);
    b[strcspn(b, "\n")] = '\0';
    return b;
}

/* Whether the whole file contains needle. */
static inline int netns_file_has(const char *path, const char *needle)
{
    char buf[65536];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n, len = 0;

    if (fd < 0)
        return 0;
    while (len < (ssize_t)sizeof(buf) - 1 &&
           (n = read(fd, buf + len, sizeof(buf) - 1 - (size_t)len)) > 0)
        len += n;
    close(fd);
    buf[len] = '\0';
    return strstr(buf, needle) != NULL;
}

/* Make a fresh named-less netns and return an fd of it; the caller stays where it was. */
static inline int netns_new(void)
{
    int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC), fd = -1;

    if (self < 0)
        return -1;
    if (unshare(CLONE_NEWNET) == 0) {
        fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (setns(self, CLONE_NEWNET) < 0)
            abort();
    }
    close(self);
    return fd;
}

/* Run a shell command in the netns fd (a forked child setns()'s and execs /bin/sh -c). Returns
 * its exit status. */
static inline int netns_sh(int nsfd, const char *cmd)
{
    pid_t pid;
    int st;

    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET) < 0)
            _exit(126);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}
