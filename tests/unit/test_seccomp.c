/* SPDX-License-Identifier: Apache-2.0 */
/* The default seccomp filter: a forked child installs it, tries each denied call (with
 * arguments that would be harmless if the filter failed) and the ordinary ones, and reports
 * errno values over a pipe. The i386 ABI is tried through `int 0x80`. */
#include <dirent.h>
#include <stdlib.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../src/runtime/seccomp.h"
#include "tap.h"

#define check(cond, ...)                                                                           \
    do {                                                                                           \
        int check_ = !!(cond);                                                                     \
        ok(check_, __VA_ARGS__);                                                                   \
    } while (0)

enum probe {
    P_MOUNT,
    P_UNSHARE_USER,
    P_UNSHARE_TIME,
    P_CLONE_NEWNS,
    P_CLONE_NEWUSER,
    P_CLONE3,
    P_BPF,
    P_PERF,
    P_KEYCTL,
    P_INIT_MODULE,
    P_REBOOT,
    P_CLOCK_SETTIME,
    P_USERFAULTFD,
    P_IO_URING,
    P_SWAPON,
    P_ACCT,
    P_OPEN_BY_HANDLE,
    P_KEXEC,
    P_SETNS,
    P_FSOPEN,
    P_PROCESS_VM_WRITEV,
    P_PERSONALITY_BAD,
    /* allowed */
    P_GETPID,
    P_FORK,
    P_CLONE_PLAIN,
    P_UNSHARE_FILES,
    P_PTRACE_TRACEME,
    P_PTHREAD,
    P_PERSONALITY_QUERY,
    P_PERSONALITY_LINUX,
    P_N
};

static const struct {
    const char *name;
    int want;
} expect[P_N] = {
    [P_MOUNT] = {"mount", EPERM},
    [P_UNSHARE_USER] = {"unshare(CLONE_NEWUSER)", EPERM},
    [P_UNSHARE_TIME] = {"unshare(CLONE_NEWTIME)", EPERM},
    [P_CLONE_NEWNS] = {"clone(CLONE_NEWNS)", EPERM},
    [P_CLONE_NEWUSER] = {"clone(CLONE_NEWUSER|CLONE_NEWPID)", EPERM},
    [P_CLONE3] = {"clone3", ENOSYS},
    [P_BPF] = {"bpf", EPERM},
    [P_PERF] = {"perf_event_open", EPERM},
    [P_KEYCTL] = {"keyctl", EPERM},
    [P_INIT_MODULE] = {"init_module", EPERM},
    [P_REBOOT] = {"reboot", EPERM},
    [P_CLOCK_SETTIME] = {"clock_settime", EPERM},
    [P_USERFAULTFD] = {"userfaultfd", EPERM},
    [P_IO_URING] = {"io_uring_setup", EPERM},
    [P_SWAPON] = {"swapon", EPERM},
    [P_ACCT] = {"acct", EPERM},
    [P_OPEN_BY_HANDLE] = {"open_by_handle_at", EPERM},
    [P_KEXEC] = {"kexec_load", EPERM},
    [P_SETNS] = {"setns", EPERM},
    [P_FSOPEN] = {"fsopen", EPERM},
    [P_PROCESS_VM_WRITEV] = {"process_vm_writev", EPERM},
    [P_PERSONALITY_BAD] = {"personality(READ_IMPLIES_EXEC)", EPERM},
    [P_GETPID] = {"getpid", 0},
    [P_FORK] = {"fork", 0},
    [P_CLONE_PLAIN] = {"clone without namespace flags", 0},
    [P_UNSHARE_FILES] = {"unshare(CLONE_FILES)", 0},
    [P_PTRACE_TRACEME] = {"ptrace(PTRACE_TRACEME)", 0},
    [P_PTHREAD] = {"pthread_create (clone3 falls back to clone)", 0},
    [P_PERSONALITY_QUERY] = {"personality(0xffffffff)", 0},
    [P_PERSONALITY_LINUX] = {"personality(PER_LINUX)", 0},
};

/* 0 on success, else errno. */
static int res(long rc)
{
    return rc < 0 ? errno : 0;
}

/* A raw clone: 0 if a child was made (it exits at once and is reaped), else errno. */
static int try_clone(unsigned long flags)
{
    long pid = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0)
        _exit(0);
    if (pid < 0)
        return errno;
    waitpid((pid_t)pid, NULL, 0);
    return 0;
}

static void *thread_fn(void *arg)
{
    return arg;
}

static void probe_all(int out[P_N])
{
    struct timespec ts = {0, 0};
    struct clone_args ca = {.exit_signal = SIGCHLD};
    char byte = 0;
    struct iovec liov = {&byte, 1}, riov = {&byte, 1};
    pthread_t th;
    long rc;

    errno = 0;
    out[P_MOUNT] = res(mount("none", "/nonexistent-warren", "tmpfs", 0, NULL));
    out[P_UNSHARE_USER] = res(unshare(CLONE_NEWUSER));
    out[P_UNSHARE_TIME] = res(unshare(0x80 /* CLONE_NEWTIME */));
    out[P_CLONE_NEWNS] = try_clone(CLONE_NEWNS);
    out[P_CLONE_NEWUSER] = try_clone(CLONE_NEWUSER | CLONE_NEWPID);
    rc = syscall(SYS_clone3, &ca, sizeof(ca));
    if (rc == 0)
        _exit(0);
    if (rc > 0)
        waitpid((pid_t)rc, NULL, 0);
    out[P_CLONE3] = res(rc);
    out[P_BPF] = res(syscall(SYS_bpf, 0, NULL, 0));
    out[P_PERF] = res(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
    out[P_KEYCTL] = res(syscall(SYS_keyctl, 0, 0, 0, 0, 0));
    out[P_INIT_MODULE] = res(syscall(SYS_init_module, NULL, 0, ""));
    out[P_REBOOT] = res(syscall(SYS_reboot, 0, 0, 0, NULL)); /* bad magic: EINVAL unfiltered */
    out[P_CLOCK_SETTIME] = res(clock_settime(CLOCK_MONOTONIC, &ts)); /* EINVAL unfiltered */
    out[P_USERFAULTFD] = res(syscall(SYS_userfaultfd, O_CLOEXEC));
    out[P_IO_URING] = res(syscall(SYS_io_uring_setup, 0, NULL));
    out[P_SWAPON] = res(syscall(SYS_swapon, "/nonexistent-warren", 0));
    out[P_ACCT] = res(syscall(SYS_acct, "/nonexistent-warren"));
    out[P_OPEN_BY_HANDLE] = res(syscall(SYS_open_by_handle_at, -1, NULL, 0));
    out[P_KEXEC] = res(syscall(SYS_kexec_load, 0, 0, NULL, 0));
    out[P_SETNS] = res(syscall(SYS_setns, -1, 0));
    out[P_FSOPEN] = res(syscall(SYS_fsopen, "tmpfs", 0));
    out[P_PROCESS_VM_WRITEV] = res(syscall(SYS_process_vm_writev, getpid(), &liov, 1, &riov, 1, 0));
    out[P_PERSONALITY_BAD] = res(syscall(SYS_personality, 0x0400000UL));

    out[P_GETPID] = getpid() > 0 ? 0 : errno;
    rc = fork();
    if (rc == 0)
        _exit(0);
    if (rc > 0)
        waitpid((pid_t)rc, NULL, 0);
    out[P_FORK] = res(rc);
    out[P_CLONE_PLAIN] = try_clone(0);
    out[P_UNSHARE_FILES] = res(unshare(CLONE_FILES));
    out[P_PTRACE_TRACEME] = res(ptrace(PTRACE_TRACEME, 0, NULL, NULL));
    rc = pthread_create(&th, NULL, thread_fn, NULL);
    if (rc == 0)
        pthread_join(th, NULL);
    out[P_PTHREAD] = (int)rc;
    out[P_PERSONALITY_QUERY] = res(syscall(SYS_personality, 0xffffffffUL));
    out[P_PERSONALITY_LINUX] = res(syscall(SYS_personality, (unsigned long)PER_LINUX));
}

/* A classic-BPF interpreter for the instructions libseccomp emits, to check the compat ABIs'
 * paths of the filter even where the kernel cannot run them (IA32 emulation off). Returns the
 * filter's SECCOMP_RET_* value, or 0xdead on an instruction it does not know. */
static uint32_t bpf_run(const struct wr_seccomp *f, uint32_t arch, uint32_t nr, uint64_t a0)
{
    struct seccomp_data d = {.nr = (int)nr, .arch = arch, .args = {a0}};
    uint32_t A = 0, X = 0, M[BPF_MEMWORDS] = {0};

    for (unsigned pc = 0; pc < f->len; pc++) {
        const struct sock_filter *i = &f->insns[pc];
        uint32_t k = i->k, src = BPF_SRC(i->code) == BPF_X ? X : k;
        bool jump;
        switch (i->code) {
        case BPF_LD | BPF_W | BPF_ABS:
            memcpy(&A, (const char *)&d + k, 4);
            continue;
        case BPF_LD | BPF_MEM:
            A = M[k];
            continue;
        case BPF_LDX | BPF_MEM:
            X = M[k];
            continue;
        case BPF_LD | BPF_IMM:
            A = k;
            continue;
        case BPF_ST:
            M[k] = A;
            continue;
        case BPF_STX:
            M[k] = X;
            continue;
        case BPF_MISC | BPF_TAX:
            X = A;
            continue;
        case BPF_MISC | BPF_TXA:
            A = X;
            continue;
        case BPF_ALU | BPF_AND | BPF_K:
            A &= k;
            continue;
        case BPF_JMP | BPF_JA:
            pc += k;
            continue;
        case BPF_RET | BPF_K:
            return k;
        case BPF_RET | BPF_A:
            return A;
        }
        if (BPF_CLASS(i->code) != BPF_JMP)
            return 0xdead;
        switch (BPF_OP(i->code)) {
        case BPF_JEQ:
            jump = A == src;
            break;
        case BPF_JGT:
            jump = A > src;
            break;
        case BPF_JGE:
            jump = A >= src;
            break;
        case BPF_JSET:
            jump = (A & src) != 0;
            break;
        default:
            return 0xdead;
        }
        pc += jump ? i->jt : i->jf;
    }
    return 0xdead;
}

#define RET_EPERM  (SECCOMP_RET_ERRNO | EPERM)
#define RET_ENOSYS (SECCOMP_RET_ERRNO | ENOSYS)
#define X32        0x40000000u

static void simulate(const struct wr_seccomp *f)
{
    static const struct {
        const char *what;
        uint32_t arch, nr;
        uint64_t a0;
        uint32_t want;
    } cases[] = {
        {"x86_64 mount", AUDIT_ARCH_X86_64, 165, 0, RET_EPERM},
        {"x86_64 getpid", AUDIT_ARCH_X86_64, 39, 0, SECCOMP_RET_ALLOW},
        {"x86_64 clone plain", AUDIT_ARCH_X86_64, 56, SIGCHLD, SECCOMP_RET_ALLOW},
        {"x86_64 clone CLONE_NEWNET", AUDIT_ARCH_X86_64, 56, CLONE_NEWNET | SIGCHLD, RET_EPERM},
        {"x86_64 personality 0x8", AUDIT_ARCH_X86_64, 135, 0x8, SECCOMP_RET_ALLOW},
        {"x86_64 personality ADDR_NO_RANDOMIZE", AUDIT_ARCH_X86_64, 135, 0x0040000, RET_EPERM},
        {"i386 mount (21)", AUDIT_ARCH_I386, 21, 0, RET_EPERM},
        {"i386 unshare(CLONE_NEWUSER) (310)", AUDIT_ARCH_I386, 310, CLONE_NEWUSER, RET_EPERM},
        {"i386 unshare(CLONE_FILES)", AUDIT_ARCH_I386, 310, CLONE_FILES, SECCOMP_RET_ALLOW},
        {"i386 clone CLONE_NEWUSER (120)", AUDIT_ARCH_I386, 120, CLONE_NEWUSER, RET_EPERM},
        {"i386 clone3 (435)", AUDIT_ARCH_I386, 435, 0, RET_ENOSYS},
        {"i386 stime (25)", AUDIT_ARCH_I386, 25, 0, RET_EPERM},
        {"i386 bpf (357)", AUDIT_ARCH_I386, 357, 0, RET_EPERM},
        {"i386 getpid (20)", AUDIT_ARCH_I386, 20, 0, SECCOMP_RET_ALLOW},
        {"i386 personality READ_IMPLIES_EXEC (136)", AUDIT_ARCH_I386, 136, 0x0400000, RET_EPERM},
        {"i386 personality query", AUDIT_ARCH_I386, 136, 0xffffffff, SECCOMP_RET_ALLOW},
        {"x32 mount", AUDIT_ARCH_X86_64, X32 | 165, 0, RET_EPERM},
        {"x32 unshare(CLONE_NEWNS)", AUDIT_ARCH_X86_64, X32 | 272, CLONE_NEWNS, RET_EPERM},
        {"x32 getpid", AUDIT_ARCH_X86_64, X32 | 39, 0, SECCOMP_RET_ALLOW},
        {"x32 personality bad", AUDIT_ARCH_X86_64, X32 | 135, 0x0400000, RET_EPERM},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint32_t r = bpf_run(f, cases[i].arch, cases[i].nr, cases[i].a0);
        ok(r == cases[i].want, "simulated %s -> %#x", cases[i].what, r);
    }
}

#if defined(__x86_64__)
static long int80(long nr, long a, long b, long c)
{
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "0"(nr), "b"(a), "c"(b), "d"(c) : "memory");
    return ret;
}
#endif

/* A file in dir, last modified days ago. Returns 0 or -1. */
static int old_file(const char *dir, const char *name, int days)
{
    char p[1024];
    struct timespec t[2];
    int fd;

    snprintf(p, sizeof(p), "%s/%s", dir, name);
    fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    t[0].tv_sec = t[1].tv_sec = time(NULL) - (time_t)days * 24 * 60 * 60;
    t[0].tv_nsec = t[1].tv_nsec = 0;
    if (write(fd, "x", 1) != 1 || futimens(fd, t) < 0) {
        close(fd);
        return -1;
    }
    return close(fd);
}

static bool exists_in(const char *dir, const char *name)
{
    char p[1024];

    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

static time_t mtime_of(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 ? st.st_mtime : 0;
}

/* wr_seccomp_load: a miss compiles and stores, a hit reads back the same program, and a damaged
 * cache file is recompiled rather than trusted. A miss removes the cache files of builds nothing
 * has read for a week (and a crash's temporary files); a hit keeps its own file fresh. */
static void test_cache(const struct wr_seccomp *built)
{
    char dir[] = "/tmp/warren-seccomp-cache-XXXXXX", path[1024] = "";
    static const char *const others[] = {"seccomp-stale-2.5.4.bpf", "seccomp-inuse-2.5.4.bpf",
                                         "seccomp-x-2.5.4.bpf.77.tmp", "unrelated"};
    static const int age[] = {WR_SECCOMP_CACHE_DAYS + 1, 2, 30, 30};
    struct wr_seccomp a = {0}, b = {0}, c = {0};
    struct wr_err err = {0};
    struct dirent *de;
    DIR *d;

    if (mkdtemp(dir) == NULL)
        return;
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
        check(old_file(dir, others[i], age[i]) == 0, "make %s, %d days old", others[i], age[i]);
    check(wr_seccomp_load(dir, &a, &err) == 0, "cache miss compiles: %s", err.msg);
    check(!exists_in(dir, others[0]) && !exists_in(dir, others[2]),
          "the miss removed another build's file unread for %d days and a stale temporary file",
          WR_SECCOMP_CACHE_DAYS + 1);
    check(exists_in(dir, others[1]) && exists_in(dir, others[3]),
          "it kept a file read 2 days ago and a file that is not the cache's");
    check(a.len == built->len && memcmp(a.insns, built->insns, a.len * sizeof(*a.insns)) == 0,
          "the compiled program equals wr_seccomp_build's");
    d = opendir(dir);
    while (d != NULL && (de = readdir(d)) != NULL)
        if (strncmp(de->d_name, "seccomp-", 8) == 0 && strcmp(de->d_name, others[1]) != 0)
            snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
    if (d != NULL)
        closedir(d);
    check(path[0] != '\0', "the filter was stored in the cache directory");
    if (path[0] != '\0') {
        struct timespec t[2] = {{.tv_sec = time(NULL) - 3 * 24 * 60 * 60},
                                {.tv_sec = time(NULL) - 3 * 24 * 60 * 60}};
        check(utimensat(AT_FDCWD, path, t, 0) == 0, "age our cache file by 3 days");
    }
    check(wr_seccomp_load(dir, &b, &err) == 0 && b.len == a.len &&
              memcmp(a.insns, b.insns, a.len * sizeof(*a.insns)) == 0,
          "a cache hit reads the same program back");
    check(path[0] != '\0' && mtime_of(path) >= time(NULL) - 60,
          "the hit refreshed its file's time, so other builds' misses keep it");
    if (path[0] != '\0')
        check(truncate(path, 3) == 0, "damage the cache file");
    check(wr_seccomp_load(dir, &c, &err) == 0 && c.len == a.len &&
              memcmp(a.insns, c.insns, a.len * sizeof(*a.insns)) == 0,
          "a damaged cache file is recompiled, not trusted");
    wr_seccomp_free(&a);
    wr_seccomp_free(&b);
    wr_seccomp_free(&c);
    if (path[0] != '\0')
        (void)unlink(path);
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        char p[1024];
        snprintf(p, sizeof(p), "%s/%s", dir, others[i]);
        (void)unlink(p);
    }
    (void)rmdir(dir);
}

int main(void)
{
    struct wr_seccomp f = {0};
    struct wr_err err = {0};
    int p[2], got[P_N], st = 0, rc;
    pid_t pid;

    setvbuf(stdout, NULL, _IOLBF, 0);
    rc = wr_seccomp_build(&f, &err);
    check(rc == 0, "build the filter: %s", err.msg);
    if (rc < 0)
        return done();
    check(f.len > 0 && f.insns != NULL, "exported %u BPF instructions", f.len);
    test_cache(&f);

    if (pipe2(p, O_CLOEXEC) < 0)
        return 1;
    pid = fork();
    if (pid == 0) {
        close(p[0]);
        rc = wr_seccomp_install(&f, true);
        if (rc < 0)
            _exit(10);
        for (int i = 0; i < P_N; i++)
            got[i] = -1;
        probe_all(got);
        (void)!write(p[1], got, sizeof(got));
        _exit(0);
    }
    close(p[1]);
    rc = (int)read(p[0], got, sizeof(got));
    close(p[0]);
    waitpid(pid, &st, 0);
    check(rc == (int)sizeof(got), "child installed the filter and reported (status %#x)", st);
    if (rc == (int)sizeof(got)) {
        for (int i = 0; i < P_N; i++) {
            check(got[i] == expect[i].want, "%s -> %s", expect[i].name,
                  got[i] == 0 ? "ok" : strerror(got[i]));
        }
    }

#if defined(__x86_64__)
    /* The i386 ABI, from a child: with IA32 emulation off, int 0x80 kills it with SIGSEGV. */
    if (pipe2(p, O_CLOEXEC) < 0)
        return 1;
    pid = fork();
    if (pid == 0) {
        long r[2];
        close(p[0]);
        signal(SIGSEGV, SIG_DFL); /* not a sanitizer's handler: die of the signal */
        if (wr_seccomp_install(&f, true) < 0)
            _exit(10);
        r[0] = int80(21, 0, 0, 0);              /* mount(NULL, NULL, NULL) */
        r[1] = int80(310, CLONE_NEWUSER, 0, 0); /* unshare */
        (void)!write(p[1], r, sizeof(r));
        _exit(0);
    }
    close(p[1]);
    {
        long r[2] = {0, 0};
        rc = (int)read(p[0], r, sizeof(r));
        close(p[0]);
        waitpid(pid, &st, 0);
        if (rc != (int)sizeof(r)) {
            ok(1, "# SKIP i386 ABI not available (child status %#x)", st);
        } else {
            is_int(r[0], -EPERM, "i386 mount via int 0x80 -> EPERM");
            is_int(r[1], -EPERM, "i386 unshare(CLONE_NEWUSER) via int 0x80 -> EPERM");
        }
    }
#endif

    simulate(&f);

    /* The parent is unfiltered: the filter went only to the children. */
    check(unshare(0) == 0, "the test process itself is not filtered");
    wr_seccomp_free(&f);
    check(f.insns == NULL && f.len == 0, "free resets the filter");
    wr_seccomp_free(&f);
    return done();
}
