/* SPDX-License-Identifier: Apache-2.0 */
/* A unified diff by /usr/bin/diff, run unprivileged on copies of the two texts. */
#include "textdiff.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../util/buf.h"
#include "../util/cleanup.h"
#include "../util/fs.h"

#define DIFF_PROGRAM "/usr/bin/diff"
#define NOBODY       65534

/* A sealed memfd holding p[0..n), at offset 0. */
static int text_fd(const char *name, const char *p, size_t n, struct wr_err *err)
{
    _cleanup_close_ int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);

    if (fd < 0)
        return wr_err_sys(err, "memfd_create");
    if ((n > 0 && wr_write_all(fd, p, n) < 0) || lseek(fd, 0, SEEK_SET) < 0)
        return wr_err_sys(err, "fill memfd");
    (void)fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
    return steal_fd(&fd);
}

/* The child, between fork and exec: only async-signal-safe calls. fds: a, b, out, null. */
static void __attribute__((noreturn)) child(int a, int b, int out, int null, char *const *argv)
{
    static char *const envp[] = {"LC_ALL=C", NULL};
    struct rlimit as = {512u << 20, 512u << 20}, cpu = {10, 10}, nofile = {16, 16};
    sigset_t none;

    sigemptyset(&none);

    /* Move everything above 4 first, so that the dup2s below never meet their own fd. */
    a = fcntl(a, F_DUPFD_CLOEXEC, 10);
    b = fcntl(b, F_DUPFD_CLOEXEC, 10);
    out = fcntl(out, F_DUPFD_CLOEXEC, 10);
    null = fcntl(null, F_DUPFD_CLOEXEC, 10);
    if (a < 0 || b < 0 || out < 0 || null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 ||
        dup2(null, 2) < 0 || dup2(a, 3) < 0 || dup2(b, 4) < 0)
        _exit(126);
    (void)close_range(5, ~0u, 0);
    /* Raw system calls: the libc wrappers would signal the parent's other threads, which the
     * child of a fork does not have. */
    if (sigprocmask(SIG_SETMASK, &none, NULL) < 0 || syscall(SYS_setgroups, 0, NULL) < 0 ||
        syscall(SYS_setresgid, NOBODY, NOBODY, NOBODY) < 0 ||
        syscall(SYS_setresuid, NOBODY, NOBODY, NOBODY) < 0 ||
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || setrlimit(RLIMIT_AS, &as) < 0 ||
        setrlimit(RLIMIT_CPU, &cpu) < 0 || setrlimit(RLIMIT_NOFILE, &nofile) < 0)
        _exit(126);
    if (chdir("/") < 0)
        _exit(126);
    execve(DIFF_PROGRAM, argv, envp);
    _exit(127);
}

int wr_text_diff(const char *a, size_t na, const char *b, size_t nb, const char *label_a,
                 const char *label_b, size_t max_out, char **out, struct wr_err *err)
{
    _cleanup_close_ int fa = -1, fb = -1, null = -1;
    _cleanup_buf_ struct wr_buf buf = {0};
    char *argv[] = {"diff",          "-u",        "--label",
                    (char *)label_a, "--label",   (char *)label_b,
                    "/dev/fd/3",     "/dev/fd/4", NULL};
    int pipefd[2], status;
    bool over = false;
    pid_t pid;

    *out = NULL;
    if (access(DIFF_PROGRAM, X_OK) < 0)
        return wr_err_set(err, WR_EUNSUPPORTED, errno, "%s (GNU diffutils) is missing",
                          DIFF_PROGRAM);
    fa = text_fd("diff-a", a, na, err);
    if (fa < 0)
        return -1;
    fb = text_fd("diff-b", b, nb, err);
    if (fb < 0)
        return -1;
    null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0)
        return wr_err_sys(err, "open /dev/null");
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        return wr_err_sys(err, "pipe");
    pid = fork();
    if (pid < 0) {
        int e = errno;
        close(pipefd[0]);
        close(pipefd[1]);
        return wr_err_set(err, WR_ESYS, e, "fork for diff");
    }
    if (pid == 0)
        child(fa, fb, pipefd[1], null, argv);
    close(pipefd[1]);
    for (;;) {
        ssize_t r;

        wr_buf_reserve(&buf, 65536);
        r = read(pipefd[0], buf.data + buf.len, 65536);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        buf.len += (size_t)r;
        if (buf.len > max_out) {
            over = true;
            kill(pid, SIGKILL);
            break;
        }
    }
    close(pipefd[0]);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return wr_err_sys(err, "wait for diff");
    if (over)
        return wr_err_set(err, WR_ETOOBIG, 0, "the diff is over %zu bytes", max_out);
    if (!WIFEXITED(status))
        return wr_err_set(err, WR_ESYS, 0, "%s killed by signal %d", DIFF_PROGRAM,
                          WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    if (WEXITSTATUS(status) > 1)
        return wr_err_set(err, WR_ESYS, 0, "%s failed (exit status %d)", DIFF_PROGRAM,
                          WEXITSTATUS(status));
    wr_buf_append(&buf, "", 0);
    *out = wr_buf_steal_str(&buf);
    return 0;
}
