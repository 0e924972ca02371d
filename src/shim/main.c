/* SPDX-License-Identifier: Apache-2.0 */
/* warren-shim: the host-side parent of one gVisor sandbox (src/runtime/gvisor.c). `runsc run
 * --detach` forks the sandbox's sentry and gofer and exits; they would then belong to host PID 1,
 * which reaps late, and `runsc delete` and `checkpoint` wait for that reaping (seconds, measured in
 * shared/research/perf-gvisor.md). The shim is a child subreaper instead: it runs `runsc run
 * --detach` (create and start in one Go process: one start-up less), inherits what they leave
 * running, reaps it at once, and exits when nothing of the sandbox is left, so its own end is the
 * sandbox's end. It holds the sandbox's run directory lock (fd 3) for as long as it lives, as
 * warren-init does for the ns backend.
 *
 * usage: warren-shim RUNSC [RUNSC-FLAG]... -- ID BUNDLE [IMAGE]
 *
 * With IMAGE (a checkpoint's directory) the sandbox is restored from it (`runsc restore
 * --detach`) instead of run.
 *
 * fd 3: the run directory's lock (kept, never passed on); fd 4: a pipe from the runtime, which
 * writes one byte once it has put this process into the sandbox's cgroups (everything it starts
 * is then in them too), or closes it to cancel. Exit status: 0 once the sandbox has ended, or
 * 100 + the failing step (1 run, 3 restore) when runsc failed; runsc says why in its
 * --log, and so does the shim of its own failures (its stdio, which the sandbox inherits, is
 * /dev/null).
 *
 * With --network=sandbox among runsc's flags (gVisor's own network stack on the network slot's
 * interfaces) the shim must run in the slot's network namespace, never the host's: runsc moves
 * the addresses of every interface it finds onto its own stack (the runtime checks before it
 * spawns the shim). runsc 20221219 tells the host's namespace by /proc/sys/net/core/rmem_default
 * existing, which kernels since 6.x have in every namespace, so it refuses every one; the shim
 * hides that directory from runsc alone, under a tmpfs in a mount namespace of its own (a slave
 * of the daemon's: mounts and unmounts made there still reach it). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOCK_FD  3
#define GO_FD    4
#define MAX_ARGS 64

/* Where the shim says why it failed: runsc's --log if it has one (the runtime reports its
 * last line), else stderr. */
static int msg_fd = 2;

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
    va_list ap;

    dprintf(msg_fd, "warren-shim: ");
    va_start(ap, fmt);
    vdprintf(msg_fd, fmt, ap);
    va_end(ap);
    dprintf(msg_fd, "\n");
}

/* Run runsc with its flags, then cmd and the rest; its exit status, or -1. */
static int run(char **runsc, int nrunsc, const char *const *cmd)
{
    char *argv[MAX_ARGS + 8];
    int n = 0, st;
    pid_t pid, w;

    for (int i = 0; i < nrunsc; i++)
        argv[n++] = runsc[i];
    for (int i = 0; cmd[i] != NULL; i++)
        argv[n++] = (char *)cmd[i];
    argv[n] = NULL;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execv(argv[0], argv);
        say("exec %s: %s", argv[0], strerror(errno));
        _exit(127);
    }
    /* Reap whatever else ends meanwhile (nothing should, yet) until runsc itself has. */
    while ((w = waitpid(-1, &st, 0)) != pid)
        if (w < 0 && errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* See the header: 0, or -1 having said why. */
static int hide_root_netns_check(void)
{
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) < 0 ||
        mount("tmpfs", "/proc/sys/net/core", "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=4k,mode=555") < 0) {
        say("hide /proc/sys/net/core: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int sep = -1, st;
    char go = 0;
    ssize_t r;

    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--") == 0) {
            sep = i;
            break;
        }
    if (sep < 2 || (argc - sep != 3 && argc - sep != 4) || sep > MAX_ARGS) {
        fprintf(stderr, "usage: warren-shim RUNSC [RUNSC-FLAG]... -- ID BUNDLE [IMAGE]\n");
        return 2;
    }
    if (fcntl(LOCK_FD, F_SETFD, FD_CLOEXEC) < 0 || fcntl(GO_FD, F_SETFD, FD_CLOEXEC) < 0) {
        fprintf(stderr, "warren-shim: fds 3 and 4 must be open\n");
        return 2;
    }
    /* Its own session (a signal to the daemon's group does not reach the sandbox), and the
     * parent of every orphan below it. */
    (void)setsid();
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
        perror("warren-shim: PR_SET_CHILD_SUBREAPER");
        return 2;
    }
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP && s != SIGCHLD)
            (void)signal(s, SIG_IGN);
    do
        r = read(GO_FD, &go, 1);
    while (r < 0 && errno == EINTR);
    if (r != 1 || go != 'g')
        return 2; /* cancelled (closed without a byte) */
    close(GO_FD);

    const char *id = argv[sep + 1], *bundle = argv[sep + 2], *image = argv[sep + 3];
    const char *start[] = {"run", "--detach", "--bundle", bundle, id, NULL};
    const char *restore[] = {"restore", "--detach", "--image-path", image, "--bundle", bundle,
                             id,        NULL};
    bool own_stack = false;
    for (int i = 2; i < sep; i++) {
        own_stack |= strcmp(argv[i], "--network=sandbox") == 0;
        if (strncmp(argv[i], "--log=", 6) == 0) {
            int fd =
                open(argv[i] + 6, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
            if (fd >= 0)
                msg_fd = fd;
        }
    }
    if (own_stack && hide_root_netns_check() < 0)
        return image != NULL ? 103 : 101;
    if (image != NULL) {
        if (run(argv + 1, sep - 1, restore) != 0)
            return 103;
    } else if (run(argv + 1, sep - 1, start) != 0) {
        return 101;
    }
    while (waitpid(-1, &st, 0) >= 0 || errno == EINTR)
        ;
    return 0;
}
