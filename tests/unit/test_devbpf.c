/* SPDX-License-Identifier: Apache-2.0 */
/* cgroup v2's device program (src/runtime/devbpf.h), for real: a cgroup of the unified tree with
 * the program attached, and a child in it that opens devices: /dev/null is standard, /dev/fuse
 * is given read-write, /dev/net/tun with no access, /dev/tty0 and /dev/loop-control never.
 * Skipped where no cgroup2 is mounted. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/runtime/devbpf.h"
#include "../../src/runtime/runtime.h"
#include "tap.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* In a child moved into the cgroup at dir: open path with flags; 0 or the errno. */
static int open_in(const char *dir, const char *path, int flags)
{
    int p[2], err = -1;
    pid_t pid;

    if (pipe(p) < 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        char procs[512], me[24];
        int fd, e = 0;
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
        snprintf(me, sizeof(me), "%d", (int)getpid());
        fd = open(procs, O_WRONLY);
        if (fd < 0 || write(fd, me, strlen(me)) < 0)
            e = 1000 + errno;
        else if ((fd = open(path, flags)) < 0)
            e = errno;
        if (write(p[1], &e, sizeof(e)) != sizeof(e))
            _exit(1);
        _exit(0);
    }
    close(p[1]);
    if (read(p[0], &err, sizeof(err)) != sizeof(err))
        err = -1;
    close(p[0]);
    waitpid(pid, NULL, 0);
    return err;
}

int main(void)
{
    const char *root = "/sys/fs/cgroup/unified";
    struct wr_device_node given[] = {
        {.path = "/dev/fuse", .type = 'c', .major = 10, .minor = 229, .access = "rw"},
        {.path = "/dev/net/tun", .type = 'c', .major = 10, .minor = 200, .access = ""},
    };
    char dir[256];
    struct statfs sf;
    int prog, cg, rc;

    if (statfs(root, &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC) {
        root = "/sys/fs/cgroup";
        if (statfs(root, &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC) {
            printf("1..0 # SKIP no cgroup2 mounted\n");
            return 0;
        }
    }
    snprintf(dir, sizeof(dir), "%s/warren-devbpf-%d", root, (int)getpid());
    if (mkdir(dir, 0755) < 0) {
        printf("1..0 # SKIP cannot make a cgroup in %s: %s\n", root, strerror(errno));
        return 0;
    }
    prog = wr_devbpf_load(given, 2);
    ok(prog >= 0, "the program loads (%s)", prog < 0 ? strerror(-prog) : "ok");
    cg = open(dir, O_RDONLY | O_DIRECTORY);
    rc = prog >= 0 ? wr_devbpf_attach(prog, cg) : -1;
    ok(rc == 0, "and attaches (%s)", rc < 0 ? strerror(-rc) : "ok");
    if (rc == 0) {
        is_int(open_in(dir, "/dev/null", O_RDWR), 0, "a standard device opens");
        is_int(open_in(dir, "/dev/urandom", O_RDONLY), 0, "another standard one");
        is_int(open_in(dir, "/dev/fuse", O_RDWR), 0, "a given device opens read-write");
        is_int(open_in(dir, "/dev/net/tun", O_RDWR), EPERM, "one given without access does not");
        if (access("/dev/tty0", F_OK) == 0)
            is_int(open_in(dir, "/dev/tty0", O_RDONLY), EPERM, "nor one never given (4:0)");
        if (access("/dev/loop-control", F_OK) == 0)
            is_int(open_in(dir, "/dev/loop-control", O_RDWR), EPERM,
                   "nor another never given (10:237)");
    }
    if (cg >= 0)
        close(cg);
    if (prog >= 0)
        close(prog);
    rmdir(dir);
    return done();
}
