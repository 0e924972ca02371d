/* SPDX-License-Identifier: Apache-2.0 */
/* warren-probe: an isolation probe that runs INSIDE a sandbox (installed in the test image as
 * /usr/bin/warren-probe) and tries to get out of it. Static, libc only, no NSS.
 *
 *   warren-probe escape [--host-file PATH] [--host-port PORT] [--host-abstract NAME]
 *                       [--layer-file PATH] [--other-pid PID] [--host-cgroup PATH]...
 *                       [--init-pid PID]
 *       Runs every attempt in the table at the bottom, each in its own forked child with a
 *       timeout, and prints one line per attempt:
 *           HELD <name>: <detail>      the isolation held
 *           ESCAPED <name>: <detail>   it did not (or the attempt could not decide)
 *       Detail items that broke the isolation start with '!'. Exit 0 when every attempt held,
 *       1 otherwise. --init-pid (default 1) is the process treated as warren-init by the
 *       attempts that go after PID 1 (/proc/1/mem, ptrace, setns...).
 *   warren-probe info              key=value lines describing the sandbox as seen from inside
 *   warren-probe forkbomb [N]      fork sleeping children until fork fails (exit 0 on EAGAIN)
 *   warren-probe memhog MB         allocate and touch MB MiB (expects to be OOM-killed first)
 *   warren-probe sleep SECS
 *   warren-probe hold-file PATH    create PATH ("probe") and sleep forever
 *   warren-probe find-file PATH    print found (exit 0) or absent (exit 1)
 *   warren-probe inotify-fill SECS take every inotify instance and watch allowed, hold them
 *   warren-probe inotify-one PATH  one inotify instance watching PATH (ok, or the errno)
 *   warren-probe pty-fill SECS     open terminals until the limit, hold them
 *   warren-probe pty-open N        open N terminals (exit 0 if all opened)
 *   warren-probe memfd-hog MB      write MB MiB into an unmapped memfd (expects to be killed)
 *   warren-probe tree KIND DIR N [LEN]
 *       Make DIR (it must not exist) and in it a tree of one shape, with openat() and friends
 *       relative to open directories so that its paths may exceed PATH_MAX: deep (N nested
 *       directories, names of LEN bytes), wide (N empty files, names padded to LEN bytes),
 *       links (N files with a second hard link each, in a sibling directory), fanout (one file
 *       linked from N directories). Prints "made N". `tree check DIR N [LEN]` walks down the
 *       deep shape instead and prints "found N" if its bottom file is there (exit 1 if not);
 *       `tree dirs DIR N [LEN]` makes N empty directories in DIR.
 *
 * The rule for a syscall the sandbox must refuse: a denial (EPERM, EACCES, ENOSYS, EROFS) holds;
 * success, or any other error, escapes: an EINVAL or ENOENT means the call got past the
 * permission check (and the seccomp filter) and only failed on the arguments, which this probe
 * picks deliberately harmless (bogus reboot command, invalid kexec flags, missing swap file...)
 * so that running it with real privilege on a host does no damage. Anything that changes state
 * writes back what was there, works on files it created, or runs in a private copy of the mount
 * table when it can make one. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/inotify.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/swap.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/reboot.h>

#ifndef OVERLAYFS_SUPER_MAGIC
#define OVERLAYFS_SUPER_MAGIC 0x794c7630
#endif
#ifndef FSOPEN_CLOEXEC
#define FSOPEN_CLOEXEC 0x00000001
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#endif

#define ATTEMPT_SECONDS   6    /* an attempt that takes longer is killed and counts as ESCAPED */
#define NET_TIMEOUT_MS    1000 /* connect timeout: no real traffic should leave a sandbox */
#define MAX_SANDBOX_PIDS  256  /* more visible processes than this: we see the host's */
#define MAX_HOST_CGROUPS  8
#define DOTDOT_DEPTH      64
#define PROC_ROOT_MAX_PID 4096 /* /proc/<pid>/root entries tried at most */

struct opts {
    const char *host_file;     /* a file on the host that must stay unreadable */
    int host_port;             /* a TCP port listening on the host's loopback (0: none) */
    const char *host_abstract; /* an abstract unix socket name bound on the host */
    const char *layer_file;    /* a file from a read-only image layer, written via copy-up */
    pid_t other_pid;           /* a host pid outside the sandbox (0: none) */
    pid_t init_pid;            /* the sandbox's init as seen from inside (1) */
    const char *host_cgroup[MAX_HOST_CGROUPS];
    int n_host_cgroup;
    const char *volume; /* a read-only volume's mount point (with a file in it) */
    const char *only;   /* run just this attempt */
};

/* ---- results ------------------------------------------------------------------------------- */

/* What one attempt found. Attempts run in a forked child, which sends this struct back through a
 * pipe, so it is plain data of fixed size. */
struct result {
    bool escaped;
    size_t len;
    char text[2048];
};

static struct result R; /* the result of the attempt running in this process */

__attribute__((format(printf, 2, 0))) static void vadd(bool bad, const char *fmt, va_list ap)
{
    size_t cap = sizeof R.text;
    if (R.len + 8 >= cap)
        return;
    if (R.len > 0)
        R.len += (size_t)snprintf(R.text + R.len, cap - R.len, ", ");
    if (bad)
        R.len += (size_t)snprintf(R.text + R.len, cap - R.len, "!");
    int n = vsnprintf(R.text + R.len, cap - R.len, fmt, ap);
    if (n < 0)
        n = 0;
    R.len += (size_t)n;
    if (R.len >= cap - 4) { /* truncated */
        R.len = cap - 4;
        memcpy(R.text + R.len, "...", 4);
        R.len += 3;
    }
}

/* A detail item that held. */
__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vadd(false, fmt, ap);
    va_end(ap);
}

/* A detail item that broke the isolation: the attempt becomes ESCAPED. */
__attribute__((format(printf, 1, 2))) static void leak(const char *fmt, ...)
{
    va_list ap;
    R.escaped = true;
    va_start(ap, fmt);
    vadd(true, fmt, ap);
    va_end(ap);
}

static const char *ename(int e)
{
    static char other[4][16];
    static unsigned k;
    const char *s = e ? strerrorname_np(e) : "0";
    if (s != NULL)
        return s;
    char *b = other[k++ % 4];
    snprintf(b, sizeof other[0], "E%d", e);
    return b;
}

/* Errors that mean "you may not", as opposed to "you may, but not like this". */
static bool denial(int e)
{
    return e == EPERM || e == EACCES || e == ENOSYS || e == EROFS;
}

/* Record a call the sandbox must refuse (see the rule at the top of the file). */
static void must_deny(const char *what, long r, int e)
{
    if (r >= 0)
        leak("%s=ok", what);
    else if (denial(e))
        note("%s=%s", what, ename(e));
    else
        leak("%s=%s (got past the permission check)", what, ename(e));
}

/* Run call, record it with must_deny and close what it returned if it is a file descriptor. */
#define DENY(what, call, returns_fd)                                                               \
    do {                                                                                           \
        errno = 0;                                                                                 \
        long r_ = (long)(call);                                                                    \
        int e_ = errno;                                                                            \
        must_deny(what, r_, e_);                                                                   \
        if ((returns_fd) && r_ >= 0)                                                               \
            close((int)r_);                                                                        \
    } while (0)

/* Opening path with flags must fail, for any reason (ENOENT: not there at all, is fine). */
static void must_not_open(const char *label, const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd >= 0) {
        close(fd);
        leak("%s=ok", label);
    } else {
        note("%s=%s", label, ename(errno));
    }
}

/* ---- small helpers ------------------------------------------------------------------------- */

/* Read up to n-1 bytes of path into buf, NUL-terminated. Returns the length or -1 (errno). */
static ssize_t read_file(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got + 1 < n) {
        ssize_t r = read(fd, buf + got, n - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    close(fd);
    return (ssize_t)got;
}

/* The first line of path without its newline; "?" when unreadable. */
static char *first_line(const char *path, char *buf, size_t n)
{
    if (read_file(path, buf, n) < 0) {
        snprintf(buf, n, "?(%s)", ename(errno));
        return buf;
    }
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

static bool write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        c += w;
        n -= (size_t)w;
    }
    return true;
}

static bool is_number(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

/* Parse a decimal in [lo, hi]; false when it is not one. */
static bool parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* The numeric entries of /proc: fills up to max pids, returns how many there are in all. */
static int list_pids(pid_t *out, int max)
{
    DIR *d = opendir("/proc");
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!is_number(de->d_name))
            continue;
        if (n < max)
            out[n] = (pid_t)atol(de->d_name);
        n++;
    }
    closedir(d);
    return n;
}

/* The value of a "Key:\tvalue" line of /proc/self/status, or NULL. */
static const char *status_field(const char *key, char *buf, size_t n)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (f == NULL)
        return NULL;
    char line[512];
    size_t klen = strlen(key);
    const char *found = NULL;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            const char *v = line + klen + 1;
            v += strspn(v, " \t");
            snprintf(buf, n, "%s", v);
            buf[strcspn(buf, "\n")] = '\0';
            found = buf;
            break;
        }
    }
    fclose(f);
    return found;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Run fn in a forked child (for steps that change the process: chroot, unshare, setns...) and
 * take over the result it built on top of the current one. A child that dies or hangs is an
 * inconclusive step and counts as an escape. */
static void isolated(const char *what, void (*fn)(const struct opts *), const struct opts *o)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        leak("%s: pipe=%s", what, ename(errno));
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        leak("%s: fork=%s", what, ename(errno));
        close(p[0]);
        close(p[1]);
        return;
    }
    if (pid == 0) {
        close(p[0]);
        alarm(ATTEMPT_SECONDS - 1);
        fn(o);
        _exit(write_all(p[1], &R, sizeof R) ? 0 : 1);
    }
    close(p[1]);
    struct result sub;
    size_t got = 0;
    while (got < sizeof sub) {
        ssize_t r = read(p[0], (char *)&sub + got, sizeof sub - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(p[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (got == sizeof sub)
        R = sub;
    else if (WIFSIGNALED(st))
        leak("%s: step died of signal %d", what, WTERMSIG(st));
    else
        leak("%s: step gave no result", what);
}

/* Connect a TCP socket to ip:port within timeout_ms: 0 when connected, else the errno (ETIMEDOUT
 * when nothing answered). */
static int tcp_connect(const char *ip, int port, int timeout_ms)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
        return EINVAL;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    int err = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            int r = poll(&pf, 1, timeout_ms);
            if (r == 0) {
                err = ETIMEDOUT;
            } else if (r < 0) {
                err = errno;
            } else {
                socklen_t l = sizeof err;
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0)
                    err = errno;
            }
        }
    }
    close(fd);
    return err;
}

/* ---- attempts ------------------------------------------------------------------------------ */

/* host_pids: the pid namespace shows the sandbox's processes only. The host's kernel threads
 * (kthreadd) and a pid taken outside (--other-pid) must be invisible and unsignalable. */
static void attempt_host_pids(const struct opts *o)
{
    pid_t pids[PROC_ROOT_MAX_PID];
    int n = list_pids(pids, PROC_ROOT_MAX_PID);
    if (n < 0) {
        leak("opendir(/proc)=%s", ename(errno));
        return;
    }
    bool kthreadd = false;
    for (int i = 0; i < n && i < PROC_ROOT_MAX_PID; i++) {
        char path[64], comm[64];
        snprintf(path, sizeof path, "/proc/%d/comm", (int)pids[i]);
        if (strcmp(first_line(path, comm, sizeof comm), "kthreadd") == 0)
            kthreadd = true;
    }
    char comm1[64];
    first_line("/proc/1/comm", comm1, sizeof comm1);
    pid_t me = getpid();
    if (n > MAX_SANDBOX_PIDS)
        leak("nprocs=%d (more than %d)", n, MAX_SANDBOX_PIDS);
    else
        note("nprocs=%d", n);
    if (kthreadd)
        leak("kthreadd visible");
    if (strcmp(comm1, "warren-init") != 0 && me >= 1000)
        leak("pid1=%s and our pid=%d", comm1, (int)me);
    else
        note("pid1=%s pid=%d", comm1, (int)me);

    if (o->other_pid > 0) {
        char path[64];
        struct stat st;
        snprintf(path, sizeof path, "/proc/%d", (int)o->other_pid);
        if (stat(path, &st) == 0)
            leak("%s visible", path);
        else
            note("%s=%s", path, ename(errno));
        if (kill(o->other_pid, 0) == 0)
            leak("kill(%d,0)=ok", (int)o->other_pid);
        else if (errno != ESRCH)
            leak("kill(%d,0)=%s (exists)", (int)o->other_pid, ename(errno));
        else
            note("kill(%d,0)=ESRCH", (int)o->other_pid);
    } else {
        note("no --other-pid");
    }
}

/* proc_root: /proc/<pid>/root, /proc/<init>/exe, mem and environ must not lead out of the
 * sandbox nor into warren-init (which is not dumpable). */
static void attempt_proc_root(const struct opts *o)
{
    char path[PATH_MAX + 64];
    pid_t init = o->init_pid;

    if (o->host_file != NULL) {
        pid_t pids[PROC_ROOT_MAX_PID];
        int n = list_pids(pids, PROC_ROOT_MAX_PID);
        if (n > PROC_ROOT_MAX_PID)
            n = PROC_ROOT_MAX_PID;
        bool have_init = false;
        for (int i = 0; i < n; i++)
            have_init |= pids[i] == init;
        if (!have_init && n >= 0 && n < PROC_ROOT_MAX_PID)
            pids[n++] = init;
        int opened = 0, first_err = 0;
        for (int i = 0; i < n; i++) {
            snprintf(path, sizeof path, "/proc/%d/root%s%s", (int)pids[i],
                     o->host_file[0] == '/' ? "" : "/", o->host_file);
            int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
            if (fd >= 0) {
                close(fd);
                if (opened++ < 3)
                    leak("%s readable", path);
            } else if (first_err == 0 || pids[i] == init) {
                first_err = errno;
            }
        }
        if (opened > 3)
            leak("host file readable via %d /proc/*/root", opened);
        if (opened == 0)
            note("host file via %d /proc/*/root: %s", n, ename(first_err));
    } else {
        note("no --host-file");
    }

    /* /proc/<init>/exe: unreadable, or a file we can see at the same path anyway. */
    char target[PATH_MAX];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)init);
    ssize_t len = readlink(path, target, sizeof target - 1);
    if (len < 0) {
        note("readlink(%s)=%s", path, ename(errno));
    } else {
        target[len] = '\0';
        struct stat via_proc, via_path;
        if (stat(path, &via_proc) == 0 && stat(target, &via_path) == 0 &&
            same_file(&via_proc, &via_path))
            note("%s -> %s (inside)", path, target);
        else
            leak("%s -> %s (not that file inside)", path, target);
    }

    snprintf(path, sizeof path, "/proc/%d/mem", (int)init);
    must_not_open("mem r", path, O_RDONLY);
    must_not_open("mem rw", path, O_RDWR);

    snprintf(path, sizeof path, "/proc/%d/environ", (int)init);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        note("environ=%s", ename(errno));
    } else {
        char c; /* one byte is proof enough; the content is never printed */
        ssize_t r = read(fd, &c, 1);
        if (r > 0)
            leak("environ readable");
        else
            note("environ read=%s", r == 0 ? "empty" : ename(errno));
        close(fd);
    }
}

/* chroot breakout, in a child: chroot into a subdirectory while keeping the cwd outside it, walk
 * up with "..", chroot(".") there. Inside a pivot_root'ed sandbox this ends at the sandbox's
 * root; anything else is a way out. */
static struct stat dotdot_root; /* the root before the breakout */

static void dotdot_chroot_step(const struct opts *o)
{
    char dir[] = "/tmp/warren-probe.XXXXXX";
    if (mkdtemp(dir) == NULL) {
        note("chroot breakout: mkdtemp=%s", ename(errno));
        return;
    }
    bool chrooted = chdir("/") == 0 && chroot(dir) == 0;
    int e = errno;
    if (!chrooted) {
        note("chroot=%s", ename(e));
        rmdir(dir);
        return;
    }
    for (int i = 0; i < DOTDOT_DEPTH; i++)
        if (chdir("..") != 0)
            break;
    if (chroot(".") != 0) {
        note("chroot(.)=%s", ename(errno));
        return;
    }
    struct stat now;
    if (stat("/", &now) == 0 && !same_file(&now, &dotdot_root))
        leak("chroot breakout reached another root");
    else
        note("chroot breakout stayed inside");
    if (o->host_file != NULL) {
        int fd = open(o->host_file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd >= 0) {
            close(fd);
            leak("host file readable after chroot breakout");
        }
    }
    rmdir(dir); /* same root as before, so the same path */
}

/* dotdot: ".." from / is / (same device and inode), and no number of "../" reaches the host. */
static void attempt_dotdot(const struct opts *o)
{
    struct stat root, up, cwd;
    if (stat("/", &root) != 0 || stat("/..", &up) != 0) {
        leak("stat(/)=%s", ename(errno));
        return;
    }
    dotdot_root = root;
    if (!same_file(&root, &up))
        leak("/.. is not /");
    else
        note("/.. is /");

    if (chdir("/") != 0) {
        leak("chdir(/)=%s", ename(errno));
        return;
    }
    for (int i = 0; i < DOTDOT_DEPTH; i++)
        if (chdir("..") != 0)
            break;
    if (stat(".", &cwd) == 0 && !same_file(&cwd, &root))
        leak("cd .. x%d left /", DOTDOT_DEPTH);
    else
        note("cd .. x%d stays at /", DOTDOT_DEPTH);

    if (o->host_file != NULL) {
        int readable = 0;
        int fd = open(o->host_file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd >= 0) {
            close(fd);
            leak("host file readable at %s", o->host_file);
        } else {
            note("open(host file)=%s", ename(errno));
        }
        const char *rel = o->host_file + strspn(o->host_file, "/");
        char path[PATH_MAX];
        for (int depth = 1; depth <= 16; depth++) {
            size_t off = 0;
            for (int i = 0; i < depth && off + 4 < sizeof path; i++)
                off += (size_t)snprintf(path + off, sizeof path - off, "../");
            snprintf(path + off, sizeof path - off, "%s", rel);
            fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
            if (fd >= 0) {
                close(fd);
                readable++;
            }
        }
        if (readable > 0)
            leak("host file readable via ../ (%d of 16 depths)", readable);
        else
            note("../ x1..16 + host file: absent");
    } else {
        note("no --host-file");
    }

    isolated("chroot breakout", dotdot_chroot_step, o);
}

/* mountinfo: the sandbox's mount table does not name the host directory of --host-file. */
static void attempt_mountinfo(const struct opts *o)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL) {
        note("mountinfo=%s", ename(errno));
        return;
    }
    char dir[PATH_MAX] = "";
    if (o->host_file != NULL) {
        snprintf(dir, sizeof dir, "%s", o->host_file);
        char *slash = strrchr(dir, '/');
        if (slash != NULL)
            *slash = '\0';
        else
            dir[0] = '\0';
    }
    size_t dlen = strlen(dir);
    int lines = 0, hits = 0;
    bool overlay_opts = false;
    char line[4096];
    while (fgets(line, sizeof line, f) != NULL) {
        lines++;
        if (strstr(line, "lowerdir=") != NULL)
            overlay_opts = true;
        if (dlen == 0)
            continue;
        /* The directory as a whole path component: delimited by separators on both sides. */
        for (const char *p = strstr(line, dir); p != NULL; p = strstr(p + 1, dir)) {
            char before = p == line ? ' ' : p[-1];
            char after = p[dlen];
            if (strchr(" =,:", before) != NULL && strchr(" /,:\n", after) != NULL &&
                after != '\0') {
                hits++;
                break;
            }
        }
    }
    fclose(f);
    note("%d mounts", lines);
    if (dlen == 0)
        note("no --host-file (or it is in /)");
    else if (hits > 0)
        leak("%d lines name %s", hits, dir);
    else
        note("%s not named", dir);
    if (overlay_opts)
        note("overlay options (lowerdir=) are visible");
}

/* Open path for writing (never writing to it): must fail. */
static void must_not_write(const char *path)
{
    must_not_open(path, path, O_WRONLY);
}

/* proc_sys: kernel knobs in /proc and /sys are read-only or masked in a sandbox. Nothing is
 * written: opening for writing is where the permission is checked. */
static void attempt_proc_sys(const struct opts *o)
{
    must_not_write("/proc/sys/kernel/core_pattern");
    must_not_write("/proc/sys/vm/drop_caches");
    must_not_write("/proc/sys/kernel/pid_max");
    must_not_write("/proc/sysrq-trigger");
    must_not_write("/sys/kernel/uevent_helper");

    int fd = open("/proc/kcore", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        note("kcore=%s", ename(errno));
    } else {
        char buf[64];
        ssize_t r = read(fd, buf, sizeof buf);
        if (r > 0)
            leak("kcore readable");
        else
            note("kcore read=%s", r == 0 ? "empty" : ename(errno));
        close(fd);
    }

    const char *file = "/sys/kernel/warren-probe";
    fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
        close(fd);
        unlink(file);
        leak("create %s=ok", file);
    } else {
        note("create in /sys=%s", ename(errno));
    }
    if (mkdir("/sys/warren-probe", 0700) == 0) {
        rmdir("/sys/warren-probe");
        leak("mkdir /sys/warren-probe=ok");
    } else {
        note("mkdir in /sys=%s", ename(errno));
    }
}

/* Write a cgroup file's own content back to it: must fail. */
static void cgroup_rewrite(const char *path)
{
    char old[256];
    ssize_t n = read_file(path, old, sizeof old);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        note("%s=%s", path, ename(errno));
        return;
    }
    if (n <= 0) { /* unreadable or empty: being able to open it for writing is enough */
        leak("%s opened for writing", path);
    } else if (write(fd, old, (size_t)n) == n) {
        leak("%s rewritten", path);
    } else {
        int e = errno;
        if (denial(e))
            note("%s write=%s", path, ename(e));
        else
            leak("%s write=%s (reached the controller)", path, ename(e));
    }
    close(fd);
}

/* cgroup_write: the host's cgroup files and the sandbox's own limits cannot be rewritten. What
 * is written is the file's current content, so succeeding changes nothing. */
static void attempt_cgroup_write(const struct opts *o)
{
    if (o->n_host_cgroup > 0) {
        for (int i = 0; i < o->n_host_cgroup; i++)
            cgroup_rewrite(o->host_cgroup[i]);
    } else {
        cgroup_rewrite("/sys/fs/cgroup/memory/memory.limit_in_bytes");
        cgroup_rewrite("/sys/fs/cgroup/pids/pids.max");
    }
    /* Our own cgroup v2 limits (the root of our cgroup namespace, as "0::/" says). */
    char line[512];
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f == NULL)
        return;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "0::", 3) != 0)
            continue;
        line[strcspn(line, "\n")] = '\0';
        const char *rel = line + 3;
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/cgroup.controllers",
                 strcmp(rel, "/") == 0 ? "" : rel);
        if (stat(path, &st) != 0) {
            note("own cgroup v2 not visible");
            break;
        }
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max",
                 strcmp(rel, "/") == 0 ? "" : rel);
        cgroup_rewrite(path);
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/pids.max", strcmp(rel, "/") == 0 ? "" : rel);
        cgroup_rewrite(path);
        break;
    }
    fclose(f);
}

/* The MS_* flags matching the per-mount flags statvfs reports for path, read-only excepted. */
static unsigned long mount_flags_of(const char *path)
{
    struct statvfs sv;
    unsigned long fl = 0;
    if (statvfs(path, &sv) != 0)
        return 0;
    if (sv.f_flag & ST_NOSUID)
        fl |= MS_NOSUID;
    if (sv.f_flag & ST_NODEV)
        fl |= MS_NODEV;
    if (sv.f_flag & ST_NOEXEC)
        fl |= MS_NOEXEC;
    if (sv.f_flag & ST_NOATIME)
        fl |= MS_NOATIME;
    if (sv.f_flag & ST_NODIRATIME)
        fl |= MS_NODIRATIME;
    if (sv.f_flag & ST_RELATIME)
        fl |= MS_RELATIME;
    return fl;
}

struct probe_mount_attr { /* struct mount_attr, spelled out for older libcs */
    uint64_t attr_set;
    uint64_t attr_clr;
    uint64_t propagation;
    uint64_t userns_fd;
};

static void remount_steps(const struct opts *o)
{
    /* With real privilege (on a host) all of this would succeed: do it in a private copy of the
     * mount table. In a sandbox unshare is refused, which is a finding of its own. */
    errno = 0;
    if (unshare(CLONE_NEWNS) == 0) {
        leak("unshare(NEWNS)=ok");
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
            leak("cannot make the copy private (%s): skipped the rest", ename(errno));
            return;
        }
    } else {
        must_deny("unshare(NEWNS)", -1, errno);
    }

    DENY("remount,bind /",
         mount("none", "/", NULL, MS_REMOUNT | MS_BIND | mount_flags_of("/"), NULL), false);
    DENY("remount,bind,rw /sys",
         mount("none", "/sys", NULL, MS_REMOUNT | MS_BIND | mount_flags_of("/sys"), NULL), false);
    /* Superblock flags as they are, minus read-only: a no-op where / is already read-write. */
    DENY("remount,rw /", mount(NULL, "/", NULL, MS_REMOUNT | mount_flags_of("/"), NULL), false);

    char dir[] = "/tmp/warren-probe-mnt.XXXXXX";
    if (mkdtemp(dir) != NULL) {
        errno = 0;
        int r = mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k");
        must_deny("mount tmpfs", r, errno);
        if (r == 0)
            umount2(dir, MNT_DETACH);
        rmdir(dir);
    } else {
        note("mkdtemp=%s", ename(errno));
    }

    DENY("fsopen(tmpfs)", syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC), true);
    DENY("open_tree(/,CLONE)",
         syscall(SYS_open_tree, AT_FDCWD, "/", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC), true);
    struct probe_mount_attr attr = {.attr_clr = MOUNT_ATTR_RDONLY};
    DENY("mount_setattr(/,-ro)", syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, &attr, sizeof attr),
         false);
    DENY("mount_setattr(/sys,-ro)",
         syscall(SYS_mount_setattr, AT_FDCWD, "/sys", 0, &attr, sizeof attr), false);
    DENY("umount2(/,DETACH)", umount2("/", MNT_DETACH), false);
}

static void unshare_user_step(const struct opts *o)
{
    DENY("unshare(NEWNS|NEWUSER)", unshare(CLONE_NEWNS | CLONE_NEWUSER), false);
}

/* remount_layer: nothing in a sandbox can mount, remount, unmount or make a new mount
 * namespace; that is what keeps the read-only mounts read-only. */
static void attempt_remount_layer(const struct opts *o)
{
    isolated("unshare", unshare_user_step, o);
    isolated("remount", remount_steps, o);
}

/* volume_ro: a read-only volume, handed to the sandbox as a mount (not locked, research P1),
 * stays read-only against the sandbox's root: no remount, no clearing of the flag through the
 * new mount API, no clone or move of it, and no write through /proc/self/fd. */
static void volume_ro_steps(const struct opts *o)
{
    const char *v = o->volume;
    char path[512], fdpath[64];
    struct statvfs sv;
    int fd, dfd;

    DENY("remount,bind,rw vol",
         mount("none", v, NULL, MS_REMOUNT | MS_BIND | mount_flags_of(v), NULL), false);
    DENY("remount,rw vol", mount(NULL, v, NULL, MS_REMOUNT | mount_flags_of(v), NULL), false);
    DENY("bind vol over itself", mount(v, v, NULL, MS_BIND, NULL), false);
    struct probe_mount_attr attr = {.attr_clr = MOUNT_ATTR_RDONLY};
    DENY("mount_setattr(vol,-ro)", syscall(SYS_mount_setattr, AT_FDCWD, v, 0, &attr, sizeof attr),
         false);
    DENY("open_tree(vol,CLONE)",
         syscall(SYS_open_tree, AT_FDCWD, v, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC), true);
    DENY("open_tree(vol)", syscall(SYS_open_tree, AT_FDCWD, v, OPEN_TREE_CLOEXEC), true);
    DENY("move_mount(vol,/tmp)", syscall(SYS_move_mount, AT_FDCWD, v, AT_FDCWD, "/tmp", 0), false);
    DENY("fspick(vol)", syscall(SYS_fspick, AT_FDCWD, v, 0), true);
    DENY("umount2(vol)", umount2(v, MNT_DETACH), false);
    /* A kernel that gives the sandbox a user namespace (gVisor's, its own: isolation.md; on ns
     * the remount_layer family requires this to fail) is tried again from inside one. */
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0) {
        note("unshare(NEWUSER|NEWNS)=ok, again from inside");
        DENY("remount,rw vol in a new userns",
             mount(NULL, v, NULL, MS_REMOUNT | mount_flags_of(v), NULL), false);
        DENY("remount,bind,rw vol in a new userns",
             mount("none", v, NULL, MS_REMOUNT | MS_BIND | mount_flags_of(v), NULL), false);
    } else {
        note("unshare(NEWUSER|NEWNS)=%s", ename(errno));
    }

    /* Writes: directly, through an fd of the directory, and by reopening a read-only fd of a
     * file through /proc/self/fd. */
    snprintf(path, sizeof path, "%s/probe-new", v);
    DENY("create in vol", open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644), true);
    dfd = open(v, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        DENY("openat(vol fd, new)", openat(dfd, "probe-new", O_WRONLY | O_CREAT | O_CLOEXEC, 0644),
             true);
        snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d/probe-new", dfd);
        DENY("create via /proc/self/fd/N/", open(fdpath, O_WRONLY | O_CREAT | O_CLOEXEC, 0644),
             true);
        DENY("fchmod(vol)", fchmod(dfd, 0777), false);
        close(dfd);
    }
    DIR *d = opendir(v);
    struct dirent *de = NULL;
    while (d != NULL && (de = readdir(d)) != NULL && de->d_type != DT_REG)
        ;
    if (de != NULL) {
        snprintf(path, sizeof path, "%s/%s", v, de->d_name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fd);
            DENY("reopen rw via /proc/self/fd", open(fdpath, O_RDWR | O_CLOEXEC), true);
            DENY("truncate via /proc/self/fd", truncate(fdpath, 0), false);
            close(fd);
        } else {
            note("open(%s)=%s", path, ename(errno));
        }
    } else {
        leak("no file in %s to try", v);
    }
    if (d != NULL)
        closedir(d);
    /* After every step: still no write (statvfs's flag only says: gVisor's 9p shows none). */
    snprintf(path, sizeof path, "%s/probe-late", v);
    DENY("create in vol at the end", open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644), true);
    if (statvfs(v, &sv) != 0)
        note("statvfs=%s", ename(errno));
    else
        note("statvfs: %s", sv.f_flag & ST_RDONLY ? "read-only" : "no read-only flag");
}

static void attempt_volume_ro(const struct opts *o)
{
    if (o->volume == NULL) {
        note("no --volume");
        return;
    }
    isolated("volume", volume_ro_steps, o);
}

/* layer_write: writes to image files are allowed but must land in the sandbox's private upper
 * layer (copy-up). This cannot see the layer on disk: the test checks that from the host. Here we
 * check the root is an overlay and report what the writes did. Busybox is touched with its
 * own mode, owner and size, so nothing changes even where the writes are real. */
static void attempt_layer_write(const struct opts *o)
{
    struct statfs sf;
    if (statfs("/", &sf) != 0)
        note("statfs(/)=%s", ename(errno));
    else if ((unsigned long)sf.f_type != OVERLAYFS_SUPER_MAGIC)
        leak("/ is fs 0x%lx, not an overlay", (unsigned long)sf.f_type);
    else
        note("/ is an overlay");

    if (o->layer_file != NULL) {
        static const char mark[] = "warren-probe was here\n";
        int fd = open(o->layer_file, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd < 0) {
            note("open(%s,w)=%s", o->layer_file, ename(errno));
        } else {
            bool ok = write_all(fd, mark, sizeof mark - 1);
            note("append %s=%s", o->layer_file, ok ? "ok" : ename(errno));
            close(fd);
            char buf[8192];
            if (ok && read_file(o->layer_file, buf, sizeof buf) >= 0)
                note("marker %s", strstr(buf, "warren-probe was here") ? "visible" : "not visible");
        }
    } else {
        note("no --layer-file");
    }

    const char *bb = "/bin/busybox";
    struct stat before, after;
    if (stat(bb, &before) != 0) {
        note("stat(%s)=%s", bb, ename(errno));
        return;
    }
    note("chmod=%s", chmod(bb, before.st_mode & 07777) == 0 ? "ok" : ename(errno));
    if ((before.st_mode & (S_ISUID | S_ISGID)) != 0 ||
        getxattr(bb, "security.capability", NULL, 0) >= 0)
        note("chown skipped (would clear setuid bits or file capabilities)");
    else
        note("chown=%s", chown(bb, before.st_uid, before.st_gid) == 0 ? "ok" : ename(errno));
    note("truncate=%s", truncate(bb, before.st_size) == 0 ? "ok" : ename(errno));
    if (stat(bb, &after) == 0)
        note("busybox now mode %o uid %u size %lld", (unsigned)(after.st_mode & 07777),
             (unsigned)after.st_uid, (long long)after.st_size);
}

/* devices: no device node reaching the hardware or the kernel is openable, even when made with
 * mknod (the sandbox's mounts are nodev for it). */
static void attempt_devices(const struct opts *o)
{
    static const char *const devs[] = {"/dev/kvm",   "/dev/mem",          "/dev/kmsg",
                                       "/dev/sda",   "/dev/vda",          "/dev/nvme0n1",
                                       "/dev/loop0", "/dev/loop-control", "/dev/net/tun"};
    for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++) {
        const char *name = devs[i] + 5;
        int fr = open(devs[i], O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        int er = errno;
        int fw = open(devs[i], O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        int ew = errno;
        if (fr >= 0)
            close(fr);
        if (fw >= 0)
            close(fw);
        if (fr >= 0 || fw >= 0)
            leak("%s r=%s w=%s", name, fr >= 0 ? "ok" : ename(er), fw >= 0 ? "ok" : ename(ew));
        else if (er == ew)
            note("%s=%s", name, ename(er));
        else
            note("%s r=%s w=%s", name, ename(er), ename(ew));
    }

    char dir[] = "/tmp/warren-probe-dev.XXXXXX";
    if (mkdtemp(dir) == NULL) {
        note("mkdtemp=%s", ename(errno));
        return;
    }
    static const struct {
        const char *name;
        mode_t type;
        unsigned maj, min;
    } nodes[] = {{"mem", S_IFCHR, 1, 1}, {"sda", S_IFBLK, 8, 0}};
    for (size_t i = 0; i < 2; i++) {
        char path[64];
        snprintf(path, sizeof path, "%s/%s", dir, nodes[i].name);
        if (mknod(path, nodes[i].type | 0600, makedev(nodes[i].maj, nodes[i].min)) != 0) {
            note("mknod %s=%s", nodes[i].name, ename(errno));
            continue;
        }
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd >= 0) {
            close(fd);
            leak("mknod %s=ok open=ok", nodes[i].name);
        } else if (denial(errno)) {
            note("mknod %s=ok open=%s", nodes[i].name, ename(errno));
        } else { /* ENXIO, ENODEV: past the nodev check, only the driver is missing */
            leak("mknod %s=ok open=%s (node usable)", nodes[i].name, ename(errno));
        }
        unlink(path);
    }
    rmdir(dir);
}

/* modules: no kernel module can be loaded or removed. The image passed is not a module, and the
 * module removed does not exist: only the permission check stands between them and an error. */
static void attempt_modules(const struct opts *o)
{
    static char junk[64];
    DENY("init_module", syscall(SYS_init_module, junk, sizeof junk, ""), false);
    int fd = open("/bin/busybox", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        DENY("finit_module", syscall(SYS_finit_module, fd, "", 0), false);
        close(fd);
    } else {
        note("open(/bin/busybox)=%s", ename(errno));
    }
    DENY("delete_module", syscall(SYS_delete_module, "warren_probe_none", O_NONBLOCK), false);
    char buf[4096];
    ssize_t n = read_file("/proc/modules", buf, sizeof buf);
    if (n < 0) {
        note("/proc/modules=%s", ename(errno));
    } else {
        int lines = 0;
        for (ssize_t i = 0; i < n; i++)
            lines += buf[i] == '\n';
        note("/proc/modules: %d%s lines", lines, n == (ssize_t)sizeof buf - 1 ? "+" : "");
    }
}

/* bpf: no BPF program or map can be created, not even the unprivileged socket-filter kind. */
static void attempt_bpf(const struct opts *o)
{
    struct bpf_insn prog[2] = {
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0}, /* r0 = 0 */
        {.code = BPF_JMP | BPF_EXIT},                                          /* return r0 */
    };
    static const char license[] = "GPL";
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
    attr.insns = (uint64_t)(uintptr_t)prog;
    attr.insn_cnt = 2;
    attr.license = (uint64_t)(uintptr_t)license;
    DENY("BPF_PROG_LOAD", syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof attr), true);

    memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = 4;
    attr.value_size = 4;
    attr.max_entries = 1;
    DENY("BPF_MAP_CREATE", syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr), true);
}

/* perf: perf_event_open is refused outright, even for a user-space-only software counter on
 * ourselves (which perf_event_paranoid alone would allow). */
static void attempt_perf(const struct opts *o)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.disabled = 1;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    DENY("perf_event_open(cpu-clock,self)",
         syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC), true);
}

/* clock: the system clock (not namespaced) cannot be set. Where it can, it is set to the time
 * just read, and adjtimex sets the tick to its current value: the same permission check as
 * ADJ_OFFSET, without disturbing a running NTP loop. */
static void attempt_clock(const struct opts *o)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    DENY("clock_settime(REALTIME)", clock_settime(CLOCK_REALTIME, &now), false);

    struct timeval tv;
    gettimeofday(&tv, NULL);
    DENY("settimeofday", syscall(SYS_settimeofday, &tv, NULL), false);

    struct timex tx;
    memset(&tx, 0, sizeof tx);
    long tick = 10000; /* the usual tick, should even reading be refused */
    if (adjtimex(&tx) >= 0)
        tick = tx.tick;
    else
        note("adjtimex(read)=%s", ename(errno));
    memset(&tx, 0, sizeof tx);
    tx.modes = ADJ_TICK;
    tx.tick = tick;
    DENY("adjtimex(ADJ_TICK)", adjtimex(&tx), false);
}

/* network: the sandbox has a loopback of its own and no route anywhere. The host's loopback
 * port and abstract socket are not reachable, there is no interface but lo and no route, and
 * connecting to the usual gateway and metadata addresses fails at once. */
static void attempt_network(const struct opts *o)
{
    if (o->host_port > 0) {
        int e = tcp_connect("127.0.0.1", o->host_port, NET_TIMEOUT_MS);
        if (e == 0)
            leak("127.0.0.1:%d connected", o->host_port);
        else
            note("127.0.0.1:%d=%s", o->host_port, ename(e));
    } else {
        note("no --host-port");
    }

    if (o->host_abstract != NULL) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        size_t n = strlen(o->host_abstract);
        if (n > sizeof sa.sun_path - 1)
            n = sizeof sa.sun_path - 1;
        memcpy(sa.sun_path + 1, o->host_abstract, n);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            note("socket(AF_UNIX)=%s", ename(errno));
        } else {
            socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
            if (connect(fd, (struct sockaddr *)&sa, len) == 0)
                leak("@%s connected", o->host_abstract);
            else if (errno == ECONNREFUSED || errno == ENOENT || denial(errno))
                note("@%s=%s", o->host_abstract, ename(errno));
            else
                leak("@%s=%s (exists)", o->host_abstract, ename(errno));
            close(fd);
        }
    } else {
        note("no --host-abstract");
    }

    char buf[8192];
    if (read_file("/proc/net/dev", buf, sizeof buf) < 0) {
        note("/proc/net/dev=%s", ename(errno));
    } else {
        char others[256] = "";
        size_t olen = 0;
        int lineno = 0;
        for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l != NULL;
             l = strtok_r(NULL, "\n", &save)) {
            if (lineno++ < 2) /* two header lines */
                continue;
            l += strspn(l, " ");
            char *colon = strchr(l, ':');
            if (colon == NULL)
                continue;
            *colon = '\0';
            if (strcmp(l, "lo") != 0 && olen + 2 < sizeof others)
                olen += (size_t)snprintf(others + olen, sizeof others - olen, "%s%s",
                                         olen ? " " : "", l);
        }
        if (olen > 0)
            leak("interfaces besides lo: %s", others);
        else
            note("only lo");
    }
    ssize_t n = read_file("/proc/net/route", buf, sizeof buf);
    if (n >= 0) {
        int routes = -1; /* the header */
        for (ssize_t i = 0; i < n; i++)
            routes += buf[i] == '\n';
        if (routes > 0)
            leak("%d routes", routes);
        else
            note("no routes");
    }

    static const char *const remote[] = {"10.0.2.2", "169.254.169.254"};
    for (size_t i = 0; i < 2; i++) {
        int e = tcp_connect(remote[i], 80, NET_TIMEOUT_MS);
        if (e == ENETUNREACH || e == EHOSTUNREACH || e == EADDRNOTAVAIL || denial(e))
            note("%s:80=%s", remote[i], ename(e));
        else if (e == 0)
            leak("%s:80 connected", remote[i]);
        else /* refused or unanswered: a route exists and a SYN went out */
            leak("%s:80=%s (routed)", remote[i], ename(e));
    }
}

/* kernel_misc: the rest of the kernel's attack surface that the seccomp filter closes, and no
 * way into warren-init (ptrace, process_vm_readv, its namespaces). */
static void attempt_kernel_misc(const struct opts *o)
{
    pid_t init = o->init_pid;
    DENY("keyctl", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0), false);
    DENY("add_key",
         syscall(SYS_add_key, "user", "warren-probe", "x", (size_t)1, KEY_SPEC_PROCESS_KEYRING),
         false);
    DENY("userfaultfd", syscall(SYS_userfaultfd, O_CLOEXEC), true);
    struct io_uring_params up;
    memset(&up, 0, sizeof up);
    DENY("io_uring_setup", syscall(SYS_io_uring_setup, 1, &up), true);
    DENY("swapon", swapon("/nonexistent/warren-probe-swap", 0), false);
    DENY("acct", acct("/nonexistent/warren-probe-acct"), false);
    /* A valid magic with an unknown command: EPERM without CAP_SYS_BOOT, EINVAL with it. */
    DENY("reboot", syscall(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2, 0x50524f42, NULL),
         false);
    /* Flags outside KEXEC_FLAGS: EPERM without the privilege, EINVAL with it. */
    DENY("kexec_load", syscall(SYS_kexec_load, 0UL, 0UL, NULL, 0x8000UL), false);

    /* open_by_handle_at (the "shocker" escape): a real handle of / if the filesystem gives one,
     * else inode 2, the root of most filesystems. */
    union {
        struct file_handle fh;
        char space[sizeof(struct file_handle) + MAX_HANDLE_SZ];
    } h;
    int mount_id;
    memset(&h, 0, sizeof h);
    h.fh.handle_bytes = MAX_HANDLE_SZ;
    if (name_to_handle_at(AT_FDCWD, "/", &h.fh, &mount_id, 0) != 0) {
        uint32_t ino_gen[2] = {2, 0};
        h.fh.handle_bytes = sizeof ino_gen;
        h.fh.handle_type = 1; /* FILEID_INO32_GEN */
        memcpy(h.fh.f_handle, ino_gen, sizeof ino_gen);
    }
    int rootfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DENY("open_by_handle_at", open_by_handle_at(rootfd, &h.fh, O_RDONLY | O_CLOEXEC), true);
    if (rootfd >= 0)
        close(rootfd);

    /* PTRACE_SEIZE has the same permission check as PTRACE_ATTACH but does not stop the tracee;
     * leaving (this child exits) detaches. */
    errno = 0;
    long r = ptrace(PTRACE_SEIZE, init, NULL, NULL);
    if (r == 0)
        leak("ptrace(SEIZE,%d)=ok", (int)init);
    else
        note("ptrace(SEIZE,%d)=%s", (int)init, ename(errno));

    /* process_vm_readv at a likely but possibly unmapped address: EFAULT means access was
     * granted (only the address was bad). */
    char local[16];
    struct iovec lv = {.iov_base = local, .iov_len = sizeof local};
    struct iovec rv = {.iov_base = (void *)(uintptr_t)0x400000, .iov_len = sizeof local};
    errno = 0;
    ssize_t n = process_vm_readv(init, &lv, 1, &rv, 1, 0);
    if (n >= 0 || errno == EFAULT)
        leak("process_vm_readv(%d)=%s", (int)init, n >= 0 ? "ok" : "EFAULT (access granted)");
    else
        note("process_vm_readv(%d)=%s", (int)init, ename(errno));

    /* setns last: it changes this process. */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/mnt", (int)init);
    int nsfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nsfd < 0) {
        note("open(%s)=%s", path, ename(errno));
    } else {
        DENY("setns(mnt)", setns(nsfd, CLONE_NEWNS), false);
        close(nsfd);
    }
}

/* caps: the bounding set leaves out everything that reaches past the sandbox's namespaces; no
 * new privileges can be gained by exec; the seccomp filter is on. */
static void attempt_caps(const struct opts *o)
{
    static const struct {
        int cap;
        const char *name;
    } forbidden[] = {
        {21, "SYS_ADMIN"}, {16, "SYS_MODULE"}, {17, "SYS_RAWIO"},
        {25, "SYS_TIME"},  {22, "SYS_BOOT"},   {12, "NET_ADMIN"},
        {33, "MAC_ADMIN"}, {39, "BPF"},        {38, "PERFMON"},
    };
    char buf[128];
    const char *bnd = status_field("CapBnd", buf, sizeof buf);
    if (bnd == NULL) {
        leak("no CapBnd in /proc/self/status");
    } else {
        uint64_t mask = strtoull(bnd, NULL, 16);
        note("CapBnd=%s", bnd);
        for (size_t i = 0; i < sizeof forbidden / sizeof forbidden[0]; i++)
            if (mask & (UINT64_C(1) << forbidden[i].cap))
                leak("CAP_%s in bounding set", forbidden[i].name);
    }
    const char *eff = status_field("CapEff", buf, sizeof buf);
    note("CapEff=%s", eff ? eff : "?");
    const char *nnp = status_field("NoNewPrivs", buf, sizeof buf);
    if (nnp == NULL || strcmp(nnp, "1") != 0)
        leak("NoNewPrivs=%s", nnp ? nnp : "?");
    else
        note("NoNewPrivs=1");
    const char *sc = status_field("Seccomp", buf, sizeof buf);
    if (sc == NULL || strcmp(sc, "2") != 0)
        leak("Seccomp=%s", sc ? sc : "?");
    else
        note("Seccomp=2");
}

/* One id map: no range may include host id 0 (root inside must not be root outside). */
static void check_id_map(const char *path)
{
    char buf[1024];
    if (read_file(path, buf, sizeof buf) < 0) {
        leak("%s=%s", path, ename(errno));
        return;
    }
    bool host_root = false;
    char shown[256] = "";
    size_t slen = 0;
    for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l != NULL;
         l = strtok_r(NULL, "\n", &save)) {
        unsigned long inside, outside, count;
        if (sscanf(l, "%lu %lu %lu", &inside, &outside, &count) != 3)
            continue;
        if (outside == 0 && count > 0)
            host_root = true;
        if (slen + 2 < sizeof shown)
            slen += (size_t)snprintf(shown + slen, sizeof shown - slen, "%s%lu %lu %lu",
                                     slen ? " | " : "", inside, outside, count);
    }
    if (host_root)
        leak("%s maps host id 0 [%s]", path, shown);
    else
        note("%s [%s]", path, shown);
}

/* uid: root in the sandbox is an unprivileged id on the host. */
static void attempt_uid(const struct opts *o)
{
    check_id_map("/proc/self/uid_map");
    check_id_map("/proc/self/gid_map");
}

struct attempt {
    const char *name;
    void (*fn)(const struct opts *);
};

/* Write text to path; returns 0 or the errno. */
static int write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC), e = 0;
    if (fd < 0)
        return errno;
    if (write(fd, text, strlen(text)) < 0)
        e = errno;
    close(fd);
    return e;
}

/* oom_immunity: nothing in a sandbox may make itself (or PID 1) exempt from, or less likely than
 * PID 1 to be picked by, the OOM killer: lowering oom_score_adj below 0 takes CAP_SYS_RESOURCE
 * on the host, and PID 1's files are out of reach. */
static void attempt_oom(const struct opts *o)
{
    static const struct {
        const char *file, *value;
    } tries[] = {
        {"/proc/self/oom_score_adj", "-1000"},
        {"/proc/self/oom_score_adj", "-1"},
        {"/proc/self/oom_adj", "-17"},
        {"/proc/self/oom_adj", "-1"},
    };
    char buf[64], path[64], what[96];
    for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
        int e = write_text(tries[i].file, tries[i].value);
        snprintf(what, sizeof what, "%s=%s", tries[i].file, tries[i].value);
        must_deny(what, e ? -1 : 0, e);
    }
    if (first_line("/proc/self/oom_score_adj", buf, sizeof buf) == NULL ||
        strtol(buf, NULL, 10) < 0)
        leak("oom_score_adj=%s", buf);
    else
        note("oom_score_adj=%s", buf);
    snprintf(path, sizeof path, "/proc/%d/oom_score_adj", (int)o->init_pid);
    {
        int e = write_text(path, "1000");
        snprintf(what, sizeof what, "%s=1000", path);
        must_deny(what, e ? -1 : 0, e);
    }
}

static const struct attempt attempts[] = {
    {"host_pids", attempt_host_pids},
    {"proc_root", attempt_proc_root},
    {"dotdot", attempt_dotdot},
    {"mountinfo", attempt_mountinfo},
    {"proc_sys", attempt_proc_sys},
    {"cgroup_write", attempt_cgroup_write},
    {"remount_layer", attempt_remount_layer},
    {"layer_write", attempt_layer_write},
    {"devices", attempt_devices},
    {"modules", attempt_modules},
    {"bpf", attempt_bpf},
    {"perf", attempt_perf},
    {"clock", attempt_clock},
    {"network", attempt_network},
    {"kernel_misc", attempt_kernel_misc},
    {"caps", attempt_caps},
    {"uid", attempt_uid},
    {"volume_ro", attempt_volume_ro},
    {"oom_immunity", attempt_oom},
};

/* Run one attempt in a child of its own (own process group, killed as a whole on timeout) and
 * print its line. Returns true when it held. */
static bool run_attempt(const struct attempt *a, const struct opts *o)
{
    struct result res;
    memset(&res, 0, sizeof res);
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        printf("ESCAPED %s: inconclusive: pipe=%s\n", a->name, ename(errno));
        return false;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        printf("ESCAPED %s: inconclusive: fork=%s\n", a->name, ename(errno));
        close(p[0]);
        close(p[1]);
        return false;
    }
    if (pid == 0) {
        close(p[0]);
        setpgid(0, 0);
        alarm(ATTEMPT_SECONDS);
        memset(&R, 0, sizeof R);
        a->fn(o);
        _exit(write_all(p[1], &R, sizeof R) ? 0 : 1);
    }
    close(p[1]);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    size_t got = 0;
    bool timed_out = false;
    while (got < sizeof res) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left = (ATTEMPT_SECONDS + 1) * 1000L - (now.tv_sec - start.tv_sec) * 1000L -
                    (now.tv_nsec - start.tv_nsec) / 1000000L;
        if (left <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        int pr = poll(&pf, 1, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            timed_out = pr == 0;
            break;
        }
        ssize_t r = read(p[0], (char *)&res + got, sizeof res - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(p[0]);
    kill(-pid, SIGKILL); /* the attempt's leftovers, if any */
    if (timed_out)
        kill(pid, SIGKILL);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (got != sizeof res) {
        if (timed_out)
            printf("ESCAPED %s: inconclusive: timed out after %d s\n", a->name, ATTEMPT_SECONDS);
        else if (WIFSIGNALED(st))
            printf("ESCAPED %s: inconclusive: died of signal %d\n", a->name, WTERMSIG(st));
        else
            printf("ESCAPED %s: inconclusive: no result (exit %d)\n", a->name, WEXITSTATUS(st));
        fflush(stdout);
        return false;
    }
    res.text[sizeof res.text - 1] = '\0';
    printf("%s %s: %s\n", res.escaped ? "ESCAPED" : "HELD", a->name, res.text);
    fflush(stdout);
    return !res.escaped;
}

/* ---- subcommands --------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(
        stderr,
        "usage: warren-probe escape [--host-file PATH] [--host-port PORT] [--host-abstract NAME]\n"
        "                           [--layer-file PATH] [--other-pid PID] [--host-cgroup PATH]...\n"
        "                           [--init-pid PID] [--volume PATH] [--only ATTEMPT]\n"
        "       warren-probe info | forkbomb [N] | memhog MB | sleep SECS\n"
        "       warren-probe hold-file PATH | find-file PATH\n"
        "       warren-probe inotify-fill SECS | inotify-one PATH | pty-fill SECS | pty-open N\n"
        "       warren-probe memfd-hog MB\n"
        "       warren-probe tree deep|wide|dirs|links|fanout|check DIR N [LEN]\n");
}

static int cmd_escape(int argc, char **argv)
{
    struct opts o = {.init_pid = 1};
    for (int i = 2; i < argc; i++) {
        const char *opt = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        long v;
        if (val == NULL) {
            usage();
            return 2;
        }
        i++;
        if (strcmp(opt, "--host-file") == 0) {
            o.host_file = val;
        } else if (strcmp(opt, "--host-abstract") == 0) {
            o.host_abstract = val;
        } else if (strcmp(opt, "--layer-file") == 0) {
            o.layer_file = val;
        } else if (strcmp(opt, "--volume") == 0) {
            o.volume = val;
        } else if (strcmp(opt, "--only") == 0) {
            o.only = val;
        } else if (strcmp(opt, "--host-cgroup") == 0 && o.n_host_cgroup < MAX_HOST_CGROUPS) {
            o.host_cgroup[o.n_host_cgroup++] = val;
        } else if (strcmp(opt, "--host-port") == 0 && parse_long(val, 1, 65535, &v)) {
            o.host_port = (int)v;
        } else if (strcmp(opt, "--other-pid") == 0 && parse_long(val, 1, INT_MAX, &v)) {
            o.other_pid = (pid_t)v;
        } else if (strcmp(opt, "--init-pid") == 0 && parse_long(val, 1, INT_MAX, &v)) {
            o.init_pid = (pid_t)v;
        } else {
            usage();
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    bool all_held = true;
    for (size_t i = 0; i < sizeof attempts / sizeof attempts[0]; i++)
        if (o.only == NULL || strcmp(o.only, attempts[i].name) == 0)
            all_held &= run_attempt(&attempts[i], &o);
    return all_held ? 0 : 1;
}

/* The inode number of /proc/self/ns/<name> ("mnt:[4026531841]" -> 4026531841). */
static const char *ns_inode(const char *name, char *buf, size_t n)
{
    char path[64], link[128];
    snprintf(path, sizeof path, "/proc/self/ns/%s", name);
    ssize_t len = readlink(path, link, sizeof link - 1);
    if (len < 0) {
        snprintf(buf, n, "?(%s)", ename(errno));
        return buf;
    }
    link[len] = '\0';
    const char *open_br = strchr(link, '[');
    snprintf(buf, n, "%s", open_br ? open_br + 1 : link);
    buf[strcspn(buf, "]")] = '\0';
    return buf;
}

/* Collapse runs of blanks into one space and trim (for the padded columns of the id maps). */
static const char *squeeze(char *s)
{
    char *w = s;
    for (const char *r = s; *r; r++) {
        bool blank = *r == ' ' || *r == '\t';
        if (blank && (w == s || w[-1] == ' '))
            continue;
        *w++ = blank ? ' ' : *r;
    }
    if (w > s && w[-1] == ' ')
        w--;
    *w = '\0';
    return s;
}

static int cmd_info(void)
{
    char buf[512];
    struct utsname u;
    printf("pid=%d\n", (int)getpid());
    printf("uid=%u\n", (unsigned)getuid());
    printf("gid=%u\n", (unsigned)getgid());
    printf("hostname=%s\n", uname(&u) == 0 ? u.nodename : "?");
    printf("uid_map=%s\n", squeeze(first_line("/proc/self/uid_map", buf, sizeof buf)));
    printf("gid_map=%s\n", squeeze(first_line("/proc/self/gid_map", buf, sizeof buf)));
    printf("cgroup=%s\n", first_line("/proc/self/cgroup", buf, sizeof buf));
    static const char *const ns[] = {"user", "mnt", "pid", "net", "uts", "ipc", "cgroup"};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        printf("ns_%s=%s\n", ns[i], ns_inode(ns[i], buf, sizeof buf));
    printf("nprocs=%d\n", list_pids(NULL, 0));
    const char *v = status_field("CapBnd", buf, sizeof buf);
    printf("capbnd=%s\n", v ? v : "?");
    v = status_field("NoNewPrivs", buf, sizeof buf);
    printf("noNewPrivs=%s\n", v ? v : "?");
    v = status_field("Seccomp", buf, sizeof buf);
    printf("seccomp=%s\n", v ? v : "?");
    return 0;
}

/* Fork sleeping children (each forked by us, so no exponential growth) until fork fails or max
 * is reached, then kill and reap every one of them. Exit 0 when the limit showed as EAGAIN. */
static int cmd_forkbomb(long max)
{
    pid_t *kids = calloc((size_t)max, sizeof *kids);
    if (kids == NULL) {
        fprintf(stderr, "warren-probe: out of memory\n");
        return 2;
    }
    pid_t self = getpid();
    fflush(NULL);
    long count = 0;
    int err = 0;
    while (count < max) {
        pid_t p = fork();
        if (p < 0) {
            err = errno;
            break;
        }
        if (p == 0) {
            /* Die with the parent, and hold none of its pipes open. */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != self)
                _exit(0);
            close(0);
            close(1);
            close(2);
            sleep(30);
            _exit(0);
        }
        kids[count++] = p;
    }
    for (long i = 0; i < count; i++)
        kill(kids[i], SIGKILL);
    for (long i = 0; i < count; i++)
        while (waitpid(kids[i], NULL, 0) < 0 && errno == EINTR)
            ;
    free(kids);
    printf("forks=%ld errno=%s\n", count, err ? ename(err) : "none");
    fflush(stdout);
    return err == EAGAIN ? 0 : 2;
}

/* Allocate and touch mb MiB, 1 MiB at a time (volatile stores: the compiler may not drop them). */
static int cmd_memhog(long mb)
{
    const size_t step = 1u << 20;
    for (long i = 1; i <= mb; i++) {
        volatile char *p = malloc(step);
        if (p == NULL) {
            printf("malloc failed at %ld MiB\n", i);
            return 3;
        }
        for (size_t off = 0; off < step; off += 4096)
            p[off] = (char)i;
        if (i % 64 == 0) {
            printf("touched=%ld\n", i);
            fflush(stdout);
        }
    }
    printf("done\n");
    return 0;
}

static void sleep_seconds(long secs)
{
    struct timespec ts = {.tv_sec = secs}, rem;
    while (nanosleep(&ts, &rem) != 0 && errno == EINTR)
        ts = rem;
}

/* Let this process open as many files as its hard limit allows. */
static void raise_nofile(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0) {
        r.rlim_cur = r.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &r);
    }
}

/* Print a line and make sure it left (the tests wait for it). */
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

#define INOTIFY_PER_FILE                                                                           \
    64 /* instances watching one file: the kernel's list of an inode's marks                       \
        * is walked on every add, so long lists make the fill quadratic */

/* Take every inotify instance, then every watch, this sandbox may have: instances until
 * inotify_init1 fails, then files of a fresh directory, each watched by INOTIFY_PER_FILE
 * instances in turn, until inotify_add_watch fails. Prints what it got and why it stopped,
 * holds it all for secs seconds (so others can try meanwhile), then exits. Exit 0 when both
 * stopped at a limit of the kernel's (EMFILE for instances, ENOSPC for watches). */
static int cmd_inotify_fill(long secs)
{
    static int fds[1 << 16];
    char dir[64], name[24], buf[32];
    long n = 0, watches = 0, files;
    int ierr = 0, werr = 0;

    raise_nofile();
    if (first_line("/proc/sys/fs/inotify/max_user_watches", buf, sizeof buf) == NULL) {
        fprintf(stderr, "warren-probe: max_user_watches: %s\n", strerror(errno));
        return 2;
    }
    files = strtol(buf, NULL, 10) / INOTIFY_PER_FILE + 2;
    snprintf(dir, sizeof dir, "/tmp/warren-probe-inotify-%d", (int)getpid());
    if (mkdir(dir, 0700) < 0 || chdir(dir) < 0) {
        fprintf(stderr, "warren-probe: %s: %s\n", dir, strerror(errno));
        return 2;
    }
    for (long i = 0; i < files; i++) {
        snprintf(name, sizeof name, "%ld", i);
        int fd = open(name, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) {
            fprintf(stderr, "warren-probe: %s/%s: %s\n", dir, name, strerror(errno));
            return 2;
        }
        close(fd);
    }
    while (n < (long)(sizeof fds / sizeof fds[0])) {
        int fd = inotify_init1(IN_CLOEXEC);
        if (fd < 0) {
            ierr = errno;
            break;
        }
        fds[n++] = fd;
    }
    for (long f = 0; n > 0 && f < files && werr == 0; f++) {
        snprintf(name, sizeof name, "%ld", f);
        for (long j = 0; j < INOTIFY_PER_FILE; j++) {
            if (inotify_add_watch(fds[(f * INOTIFY_PER_FILE + j) % n], name, IN_MODIFY) < 0) {
                werr = errno;
                break;
            }
            watches++;
        }
    }
    say("instances=%ld errno=%s watches=%ld errno=%s\n", n, ename(ierr), watches, ename(werr));
    say("holding\n");
    sleep_seconds(secs);
    return ierr == EMFILE && werr == ENOSPC ? 0 : 1;
}

/* One inotify instance with one watch on path: prints ok or the errno of the call that failed. */
static int cmd_inotify_one(const char *path)
{
    int fd = inotify_init1(IN_CLOEXEC);
    if (fd < 0) {
        printf("inotify_init1=%s\n", ename(errno));
        return 1;
    }
    if (inotify_add_watch(fd, path, IN_MODIFY) < 0) {
        printf("inotify_add_watch=%s\n", ename(errno));
        return 1;
    }
    printf("ok\n");
    return 0;
}

/* Open terminals (/dev/ptmx) until that fails; print how many and why; hold them secs seconds.
 * Exit 0 when it stopped at the kernel's limit (ENOSPC). With secs 0 and a count given, open
 * just that many (a check that terminals still work). */
static int cmd_pty_fill(long secs, long want)
{
    long n = 0;
    int err = 0;

    raise_nofile();
    while (want == 0 || n < want) {
        int fd = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (fd < 0) {
            err = errno;
            break;
        }
        n++;
    }
    say("ptys=%ld errno=%s\n", n, ename(err));
    say("holding\n");
    sleep_seconds(secs);
    return want ? (n == want ? 0 : 1) : (err == ENOSPC ? 0 : 1);
}

/* Write mb MiB into a memfd that nothing maps: memory charged to the sandbox that is in no
 * process's RSS, the case where the OOM killer's choice by size alone would be PID 1. */
static int cmd_memfd_hog(long mb)
{
    static char chunk[1 << 20];
    int fd = (int)syscall(SYS_memfd_create, "warren-probe", 0U);

    if (fd < 0) {
        fprintf(stderr, "warren-probe: memfd_create: %s\n", strerror(errno));
        return 2;
    }
    memset(chunk, 'x', sizeof chunk);
    for (long i = 1; i <= mb; i++) {
        if (!write_all(fd, chunk, sizeof chunk)) {
            say("write failed at %ld MiB: %s\n", i, ename(errno));
            return 3;
        }
        if (i % 64 == 0)
            say("written=%ld\n", i);
    }
    say("done\n");
    return 0;
}

static int cmd_hold_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || !write_all(fd, "probe", 5)) {
        fprintf(stderr, "warren-probe: %s: %s\n", path, strerror(errno));
        return 1;
    }
    close(fd);
    printf("holding %s\n", path);
    fflush(stdout);
    for (;;)
        pause();
}

static int cmd_find_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    char c;
    bool found = fd >= 0 && read(fd, &c, 1) >= 0;
    if (fd >= 0)
        close(fd);
    printf("%s\n", found ? "found" : "absent");
    return found ? 0 : 1;
}

/* A name of len bytes (1 to 255) that ends in the decimal i, padded in front with 'd'. */
static const char *tree_name(char buf[256], long i, long len)
{
    char num[32];
    int n = snprintf(num, sizeof num, "%ld", i);
    long pad = len > n ? len - n : 0;
    memset(buf, 'd', (size_t)pad);
    memcpy(buf + pad, num, (size_t)n + 1);
    return buf;
}

static int tree_fail(const char *what, long i)
{
    fprintf(stderr, "warren-probe: tree: %s at %ld: %s\n", what, i, strerror(errno));
    return 1;
}

static int tree_file(int dfd, const char *name)
{
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

static int cmd_tree(const char *kind, const char *dir, long n, long len)
{
    char name[256], other[264];
    bool check = strcmp(kind, "check") == 0;
    if (!check && mkdir(dir, 0755) < 0)
        return tree_fail("mkdir", 0);
    int top = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd = top;
    if (top < 0)
        return tree_fail("open", 0);
    if (check) {
        for (long i = 0; i < n; i++) {
            int next = openat(fd, tree_name(name, 0, len), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
            if (next < 0)
                return tree_fail("open", i);
            if (fd != top)
                close(fd);
            fd = next;
        }
        if (faccessat(fd, "bottom", F_OK, AT_SYMLINK_NOFOLLOW) < 0)
            return tree_fail("bottom", n);
        printf("found %ld\n", n);
        return 0;
    }
    if (strcmp(kind, "deep") == 0) {
        for (long i = 0; i < n; i++) {
            tree_name(name, 0, len);
            int next = mkdirat(fd, name, 0755) == 0 ? openat(fd, name, O_RDONLY | O_DIRECTORY) : -1;
            if (next < 0)
                return tree_fail("mkdir", i);
            if (fd != top)
                close(fd);
            fd = next;
        }
        if (tree_file(fd, "bottom") < 0)
            return tree_fail("create", n);
    } else if (strcmp(kind, "wide") == 0 || strcmp(kind, "dirs") == 0) {
        for (long i = 0; i < n; i++)
            if ((kind[0] == 'w' ? tree_file(fd, tree_name(name, i, len))
                                : mkdirat(fd, tree_name(name, i, len), 0755)) < 0)
                return tree_fail("create", i);
    } else if (strcmp(kind, "links") == 0 || strcmp(kind, "fanout") == 0) {
        bool fanout = kind[0] == 'f';
        if (mkdirat(top, "a", 0755) < 0 || (fanout ? 0 : mkdirat(top, "b", 0755)) < 0 ||
            (fanout && tree_file(top, "a/file") < 0))
            return tree_fail("mkdir", 0);
        for (long i = 0; i < n; i++) {
            tree_name(name, i, len);
            if (fanout) {
                snprintf(other, sizeof other, "%s/file", name);
                if (mkdirat(top, name, 0755) < 0 || linkat(top, "a/file", top, other, 0) < 0)
                    return tree_fail("link", i);
                continue;
            }
            char a[260], b[260];
            snprintf(a, sizeof a, "a/%s", name);
            snprintf(b, sizeof b, "b/%s", name);
            if (tree_file(top, a) < 0 || linkat(top, a, top, b, 0) < 0)
                return tree_fail("link", i);
        }
    } else {
        usage();
        return 2;
    }
    if (fd != top)
        close(fd);
    close(top);
    printf("made %ld\n", n);
    return 0;
}

int main(int argc, char **argv)
{
    long v;
    if (argc < 2) {
        usage();
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "escape") == 0)
        return cmd_escape(argc, argv);
    if (strcmp(cmd, "info") == 0 && argc == 2)
        return cmd_info();
    if (strcmp(cmd, "forkbomb") == 0 && argc <= 3) {
        v = 100000;
        if (argc == 3 && !parse_long(argv[2], 1, 10000000, &v)) {
            usage();
            return 2;
        }
        return cmd_forkbomb(v);
    }
    if (strcmp(cmd, "memhog") == 0 && argc == 3 && parse_long(argv[2], 1, LONG_MAX / 2, &v))
        return cmd_memhog(v);
    if (strcmp(cmd, "sleep") == 0 && argc == 3 && parse_long(argv[2], 0, INT_MAX, &v)) {
        sleep_seconds(v);
        return 0;
    }
    if (strcmp(cmd, "inotify-fill") == 0 && argc == 3 && parse_long(argv[2], 0, 3600, &v))
        return cmd_inotify_fill(v);
    if (strcmp(cmd, "inotify-one") == 0 && argc == 3)
        return cmd_inotify_one(argv[2]);
    if (strcmp(cmd, "pty-fill") == 0 && argc == 3 && parse_long(argv[2], 0, 3600, &v))
        return cmd_pty_fill(v, 0);
    if (strcmp(cmd, "pty-open") == 0 && argc == 3 && parse_long(argv[2], 1, 65536, &v))
        return cmd_pty_fill(0, v);
    if (strcmp(cmd, "memfd-hog") == 0 && argc == 3 && parse_long(argv[2], 1, 1 << 20, &v))
        return cmd_memfd_hog(v);
    if (strcmp(cmd, "hold-file") == 0 && argc == 3)
        return cmd_hold_file(argv[2]);
    if (strcmp(cmd, "find-file") == 0 && argc == 3)
        return cmd_find_file(argv[2]);
    if (strcmp(cmd, "tree") == 0 && (argc == 5 || argc == 6) &&
        parse_long(argv[4], 1, 100000000, &v)) {
        long len = 1;
        if (argc == 6 && !parse_long(argv[5], 1, 255, &len)) {
            usage();
            return 2;
        }
        return cmd_tree(argv[2], argv[3], v, len);
    }
    usage();
    return 2;
}
