/* SPDX-License-Identifier: Apache-2.0 */
/* cgroup driver tests, as root on the real hierarchies: limits land in the files, attach,
 * freeze/thaw, kill, destroy, OOM kill inside the cgroup, pids.max, stale reuse, and the v2
 * driver on a cgroup2 mount without controllers. Everything lives under warren-test-<pid>. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/runtime/cgroup.h"
#include "tap.h"

/* tap.h's ok() evaluates its condition more than once; these conditions have side effects. */
#define check(cond, ...)                                                                           \
    do {                                                                                           \
        int check_ = !!(cond);                                                                     \
        ok(check_, __VA_ARGS__);                                                                   \
    } while (0)

#define V1_ROOT "/sys/fs/cgroup"
#define V2_ROOT "/sys/fs/cgroup/unified"

static const char *const v1_hier[] = {"memory", "pids", "cpu", "cpuacct", "freezer", "devices"};
static char parent[64];

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* The first line of a cgroup file under the v1 tree, e.g. rd("memory", "cg1/pids.max"). */
static const char *rd(const char *hier, const char *rel)
{
    static char buf[512];
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s/%s/%s", V1_ROOT, hier, parent, rel);
    buf[0] = '\0';
    f = fopen(path, "re");
    if (f == NULL)
        return "(missing)";
    if (fgets(buf, sizeof(buf), f) == NULL)
        buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

static bool v1_gone(const char *name)
{
    char path[512];
    for (size_t i = 0; i < sizeof(v1_hier) / sizeof(v1_hier[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s/%s/%s", V1_ROOT, v1_hier[i], parent, name);
        if (exists(path))
            return false;
    }
    return true;
}

/* Fork a child that waits for one byte on a pipe, then runs fn (or pauses if fn is NULL). */
static pid_t spawn(void (*fn)(int report), int *go, int *report)
{
    int gp[2], rp[2];
    pid_t pid;

    if (pipe2(gp, O_CLOEXEC) < 0 || pipe2(rp, O_CLOEXEC) < 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        char c;
        close(gp[1]);
        close(rp[0]);
        if (read(gp[0], &c, 1) != 1)
            _exit(100);
        if (fn != NULL)
            fn(rp[1]);
        for (;;)
            pause();
    }
    close(gp[0]);
    close(rp[1]);
    *go = gp[1];
    *report = rp[0];
    return pid;
}

static int reap(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return st;
}

static void hog(int report)
{
    /* Touch 256 MiB page by page: far beyond the 32 MiB limit. */
    for (size_t i = 0; i < 256; i++) {
        char *p = malloc(1 << 20);
        if (p == NULL)
            _exit(3);
        for (size_t j = 0; j < (1 << 20); j += 4096)
            p[j] = 1;
    }
    _exit(0);
}

static void fork_loop(int report)
{
    int n = 0, e = 0;

    for (int i = 0; i < 64; i++) {
        pid_t p = fork();
        if (p == 0) {
            for (;;)
                pause();
        }
        if (p < 0) {
            e = errno;
            break;
        }
        n++;
    }
    int msg[2] = {n, e};
    (void)!write(report, msg, sizeof(msg));
}

static void test_v1_basic(struct wr_cgroup_driver *d)
{
    struct wr_cgroup_limits lim = {.memory_bytes = 64 << 20, .cpu_millis = 500, .pids_max = 64};
    struct wr_cgroup *cg = NULL;
    struct wr_err err = {0};
    char path[512], buf[4096], want[256];
    int go, report, rc;
    pid_t pid;

    rc = wr_cgroup_create(d, "cg1", &lim, &cg, &err);
    check(rc == 0, "v1 create with limits: %s", err.msg);
    if (rc < 0)
        return;
    is_str(rd("memory", "cg1/memory.limit_in_bytes"), "67108864", "memory.limit_in_bytes");
    is_str(rd("memory", "cg1/memory.memsw.limit_in_bytes"), "67108864",
           "memory.memsw.limit_in_bytes");
    is_str(rd("memory", "cg1/memory.oom_control"), "oom_kill_disable 0", "OOM killer enabled");
    is_str(rd("pids", "cg1/pids.max"), "64", "pids.max");
    is_str(rd("cpu", "cg1/cpu.cfs_period_us"), "100000", "cpu.cfs_period_us");
    is_str(rd("cpu", "cg1/cpu.cfs_quota_us"), "50000", "cpu.cfs_quota_us");
    check(!v1_gone("cg1"), "directories exist");

    pid = spawn(NULL, &go, &report);
    rc = wr_cgroup_attach(cg, pid, &err);
    check(rc == 0, "attach: %s", err.msg);
    is_int(wr_cgroup_nprocs(cg, &err), 1, "nprocs == 1");
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    {
        FILE *f = fopen(path, "re");
        size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        buf[n] = '\0';
        if (f)
            fclose(f);
    }
    snprintf(want, sizeof(want), "memory:/%s/cg1\n", parent);
    check(strstr(buf, want) != NULL, "/proc/pid/cgroup names the memory cgroup");
    snprintf(want, sizeof(want), "freezer:/%s/cg1\n", parent);
    check(strstr(buf, want) != NULL, "/proc/pid/cgroup names the freezer cgroup");

    check(wr_cgroup_freeze(cg, true, &err) == 0, "freeze: %s", err.msg);
    is_str(rd("freezer", "cg1/freezer.state"), "FROZEN", "freezer.state FROZEN");
    check(wr_cgroup_freeze(cg, false, &err) == 0, "thaw: %s", err.msg);
    is_str(rd("freezer", "cg1/freezer.state"), "THAWED", "freezer.state THAWED");

    /* Kill while frozen: wr_cgroup_kill must thaw first or the SIGKILL waits forever. */
    check(wr_cgroup_freeze(cg, true, &err) == 0, "freeze again");
    check(wr_cgroup_kill(cg, &err) == 0, "kill (frozen): %s", err.msg);
    rc = reap(pid);
    check(WIFSIGNALED(rc) && WTERMSIG(rc) == SIGKILL, "child died of SIGKILL");
    close(go);
    close(report);
    is_int(wr_cgroup_nprocs(cg, &err), 0, "nprocs == 0 after kill");
    rc = wr_cgroup_destroy(cg, &err);
    check(rc == 0, "destroy: %s", err.msg);
    check(v1_gone("cg1"), "directories gone");
}

static void test_v1_destroy_waits(struct wr_cgroup_driver *d)
{
    struct wr_cgroup *cg = NULL;
    struct wr_err err = {0};
    int go, report, rc;
    pid_t pid;

    check(wr_cgroup_create(d, "cgw", NULL, &cg, &err) == 0, "create without limits");
    pid = spawn(NULL, &go, &report);
    check(wr_cgroup_attach(cg, pid, &err) == 0, "attach");
    /* Kill without waiting: destroy must retry the rmdir until the process is gone. The child
     * stays a zombie (not reaped), which must not block removal. */
    kill(pid, SIGKILL);
    rc = wr_cgroup_destroy(cg, &err);
    check(rc == 0, "destroy waits for the exit: %s", err.msg);
    check(v1_gone("cgw"), "directories gone");
    reap(pid);
    close(go);
    close(report);

    check(wr_cgroup_create(d, "bad/name", NULL, &cg, &err) < 0 && err.kind == WR_EINVAL,
          "a name with a slash is refused");
    struct wr_cgroup_limits tiny = {.cpu_millis = 5};
    check(wr_cgroup_create(d, "tiny", &tiny, &cg, &err) < 0 && err.kind == WR_EINVAL &&
              v1_gone("tiny"),
          "cpu below 10 millis refused, nothing left");
}

static void test_v1_stale(struct wr_cgroup_driver *d)
{
    struct wr_cgroup *cg = NULL;
    struct wr_err err = {0};
    char path[512], val[32];
    int go, report, rc;
    pid_t pid;
    FILE *f;

    /* A crashed sandbox: its cgroup exists in two hierarchies and holds a live process. */
    pid = spawn(NULL, &go, &report);
    snprintf(val, sizeof(val), "%d", (int)pid);
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "%s/%s/%s/stale", V1_ROOT, v1_hier[i], parent);
        mkdir(path, 0755);
        snprintf(path, sizeof(path), "%s/%s/%s/stale/cgroup.procs", V1_ROOT, v1_hier[i], parent);
        f = fopen(path, "we");
        if (f) {
            fputs(val, f);
            fclose(f);
        }
    }
    check(wr_cgroup_remove_stale(d, "stale", &err) < 0 && err.kind == WR_ECONFLICT,
          "remove_stale refuses a cgroup with processes");
    struct wr_cgroup_limits lim = {.pids_max = 8};
    rc = wr_cgroup_create(d, "stale", &lim, &cg, &err);
    check(rc == 0, "create over a stale cgroup: %s", err.msg);
    rc = reap(pid);
    check(WIFSIGNALED(rc) && WTERMSIG(rc) == SIGKILL, "the stale process was killed");
    close(go);
    close(report);
    if (cg != NULL) {
        is_int(wr_cgroup_nprocs(cg, &err), 0, "reused cgroup is empty");
        is_str(rd("pids", "stale/pids.max"), "8", "new limit applied");
        check(wr_cgroup_destroy(cg, &err) == 0, "destroy");
    }
    check(v1_gone("stale"), "directories gone");

    snprintf(path, sizeof(path), "%s/pids/%s/leftover", V1_ROOT, parent);
    mkdir(path, 0755);
    check(wr_cgroup_remove_stale(d, "leftover", &err) == 0 && v1_gone("leftover"),
          "remove_stale removes an empty cgroup");
    check(wr_cgroup_remove_stale(d, "never-existed", &err) == 0, "remove_stale of nothing is ok");
}

static void test_v1_oom(struct wr_cgroup_driver *d)
{
    struct wr_cgroup_limits lim = {.memory_bytes = 32 << 20};
    struct wr_cgroup *cg = NULL;
    struct wr_err err = {0};
    uint64_t usage = 0, kills = 0;
    int go, report, rc;
    pid_t pid;

    check(wr_cgroup_create(d, "oom", &lim, &cg, &err) == 0, "create 32 MiB cgroup: %s", err.msg);
    if (cg == NULL)
        return;
    pid = spawn(hog, &go, &report);
    check(wr_cgroup_attach(cg, pid, &err) == 0, "attach hog");
    (void)!write(go, "x", 1);
    rc = reap(pid);
    check(WIFSIGNALED(rc) && WTERMSIG(rc) == SIGKILL, "memory hog was OOM-killed (status %#x)", rc);
    check(wr_cgroup_memory(cg, &usage, &kills, &err) == 0, "read memory: %s", err.msg);
    check(kills >= 1, "oom_kill counted (%llu)", (unsigned long long)kills);
    check(true, "the test process survived");
    close(go);
    close(report);
    check(wr_cgroup_destroy(cg, &err) == 0, "destroy");
}

static void test_v1_pids(struct wr_cgroup_driver *d)
{
    struct wr_cgroup_limits lim = {.pids_max = 16};
    struct wr_cgroup *cg = NULL;
    struct wr_err err = {0};
    int go, report, rc, msg[2] = {-1, -1};
    pid_t pid;

    check(wr_cgroup_create(d, "pids", &lim, &cg, &err) == 0, "create pids.max=16: %s", err.msg);
    if (cg == NULL)
        return;
    pid = spawn(fork_loop, &go, &report);
    check(wr_cgroup_attach(cg, pid, &err) == 0, "attach fork loop");
    (void)!write(go, "x", 1);
    (void)!read(report, msg, sizeof(msg));
    is_int(msg[1], EAGAIN, "fork fails with EAGAIN");
    is_int(msg[0], 15, "15 children fit next to the parent");
    is_int(wr_cgroup_nprocs(cg, &err), 16, "nprocs == 16");
    check(wr_cgroup_kill(cg, &err) == 0, "kill 16 processes: %s", err.msg);
    rc = reap(pid);
    check(WIFSIGNALED(rc) && WTERMSIG(rc) == SIGKILL, "fork loop killed");
    close(go);
    close(report);
    check(wr_cgroup_destroy(cg, &err) == 0, "destroy with reparented zombies: %s", err.msg);
    check(v1_gone("pids"), "directories gone");
}

static void test_v2(void)
{
    struct wr_cgroup_driver *d = NULL;
    struct wr_cgroup_limits lim = {.memory_bytes = 64 << 20};
    struct wr_cgroup *cg = NULL;
    struct wr_err err = {0};
    char path[512];
    int go, report, rc;
    pid_t pid;

    rc = wr_cgroup_driver_open("v2", parent, V2_ROOT, &d, &err);
    check(rc == 0, "v2 driver on %s: %s", V2_ROOT, err.msg);
    if (rc < 0)
        return;
    is_int(wr_cgroup_driver_version(d), WR_CGROUP_V2, "version 2");
    snprintf(path, sizeof(path), "%s/%s/v2cg", V2_ROOT, parent);
    rc = wr_cgroup_create(d, "v2cg", &lim, &cg, &err);
    check(rc < 0 && err.kind == WR_EUNSUPPORTED,
          "memory limit without the controller: unsupported");
    check(strstr(err.msg, "controller `memory` not available") != NULL, "message: %s", err.msg);
    check(!exists(path), "nothing left behind");

    rc = wr_cgroup_create(d, "v2cg", NULL, &cg, &err);
    check(rc == 0, "v2 create without limits: %s", err.msg);
    if (rc < 0)
        goto out;
    check(exists(path), "directory exists");
    pid = spawn(NULL, &go, &report);
    check(wr_cgroup_attach(cg, pid, &err) == 0, "v2 attach: %s", err.msg);
    is_int(wr_cgroup_nprocs(cg, &err), 1, "v2 nprocs == 1");
    check(wr_cgroup_freeze(cg, true, &err) == 0, "v2 freeze: %s", err.msg);
    check(wr_cgroup_freeze(cg, false, &err) == 0, "v2 thaw: %s", err.msg);
    check(wr_cgroup_memory(cg, NULL, NULL, &err) < 0 && err.kind == WR_EUNSUPPORTED,
          "v2 memory stats unsupported without the controller");
    check(wr_cgroup_kill(cg, &err) == 0, "v2 kill: %s", err.msg);
    rc = reap(pid);
    check(WIFSIGNALED(rc) && WTERMSIG(rc) == SIGKILL, "v2 child died of SIGKILL");
    close(go);
    close(report);
    check(wr_cgroup_destroy(cg, &err) == 0, "v2 destroy: %s", err.msg);
    check(!exists(path), "v2 directory gone");
out:
    wr_cgroup_driver_close(d);
    snprintf(path, sizeof(path), "%s/%s", V2_ROOT, parent);
    rmdir(path);
}

int main(void)
{
    struct wr_cgroup_driver *d = NULL;
    struct wr_err err = {0};
    char path[512];
    int rc;

    if (geteuid() != 0) {
        printf("1..0 # SKIP needs root\n");
        return 77;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(parent, sizeof(parent), "warren-test-%d", (int)getpid());

    rc = wr_cgroup_driver_open("auto", parent, NULL, &d, &err);
    check(rc == 0, "auto driver: %s", err.msg);
    if (rc == 0) {
        is_int(wr_cgroup_driver_version(d), WR_CGROUP_V1, "auto picks v1 on this host");
        test_v1_basic(d);
        test_v1_destroy_waits(d);
        test_v1_stale(d);
        test_v1_oom(d);
        test_v1_pids(d);
        wr_cgroup_driver_close(d);
    }
    check(wr_cgroup_driver_open("v3", parent, NULL, &d, &err) < 0 && err.kind == WR_EINVAL,
          "unknown mode refused");
    check(wr_cgroup_driver_open("v1", "../escape", NULL, &d, &err) < 0 && err.kind == WR_EINVAL,
          "parent with .. refused");
    check(wr_cgroup_driver_open("v2", parent, "/tmp", &d, &err) < 0 && err.kind == WR_EUNSUPPORTED,
          "v2 on a non-cgroup2 path unsupported");
    test_v2();

    for (size_t i = 0; i < sizeof(v1_hier) / sizeof(v1_hier[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s/%s", V1_ROOT, v1_hier[i], parent);
        if (rmdir(path) < 0 && errno != ENOENT)
            printf("# rmdir %s: %s\n", path, strerror(errno));
    }
    snprintf(path, sizeof(path), "%s/%s", V2_ROOT, parent);
    check(v1_gone("") && !exists(path), "test parents removed");
    return done();
}
