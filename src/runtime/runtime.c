/* SPDX-License-Identifier: Apache-2.0 */
/* Opening the runtime (host checks done once) and sweeping what crashed sandboxes left. */
#include "runtime_int.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/parse.h"
#include "../util/xalloc.h"
#include "sysctl.h"
#include "uidpool.h"

#define DEFAULT_RUN_DIR "/run/warren"
/* 2^20: above the users of a distribution and the /etc/subuid ranges useradd hands out (from
 * 100000, 65536 each: the first 14 users'); 32,752 ranges of 65,536 ids then end at 2^31, so
 * every id stays positive as a signed int (docs/operations.md, "Id ranges"). */
#define DEFAULT_UID_BASE 1048576u
#define SWEEP_MIN_AGE_S  10

static const char *const backend_names[WR_BACKENDS] = {"ns", "gvisor"};

const char *wr_backend_name(enum wr_backend b)
{
    return (unsigned)b < WR_BACKENDS ? backend_names[b] : "?";
}

int wr_backend_parse(const char *name, enum wr_backend *out, struct wr_err *err)
{
    for (unsigned i = 0; i < WR_BACKENDS; i++)
        if (name != NULL && strcmp(name, backend_names[i]) == 0) {
            *out = (enum wr_backend)i;
            return 0;
        }
    return wr_err_set(err, WR_EINVAL, 0, "runtime `%s` is not one of: ns, gvisor",
                      name ? name : "");
}

bool wr_runtime_has_backend(const struct wr_runtime *rt, enum wr_backend b, struct wr_err *err)
{
    if (b == WR_BACKEND_NS)
        return true;
    if (b != WR_BACKEND_GVISOR) {
        wr_err_set(err, WR_EINVAL, 0, "no runtime number %d", (int)b);
        return false;
    }
    if (rt->runsc_path == NULL) {
        wr_err_set(
            err, WR_EUNSUPPORTED, 0,
            "the gvisor runtime needs runsc (apt-get install runsc), not found on this host");
        return false;
    }
    if (access(rt->shim_path, X_OK) < 0) {
        wr_err_set(err, WR_EUNSUPPORTED, errno, "the gvisor runtime needs warren-shim at `%s`",
                   rt->shim_path);
        return false;
    }
    return true;
}

/* path, or the program `name` next to the running executable. */
static char *next_to_self(const char *path, const char *name)
{
    char self[PATH_MAX];
    ssize_t n;

    if (path != NULL)
        return xstrdup(path);
    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n < 0)
        return xasprintf("/usr/local/bin/%s", name);
    self[n] = '\0';
    return xasprintf("%s/%s", dirname(self), name);
}

/* runsc: the configured path if executable, else Debian's. NULL if none. */
static char *find_runsc(const char *path)
{
    static const char *const guesses[] = {"/usr/bin/runsc", "/usr/sbin/runsc",
                                          "/usr/local/bin/runsc"};

    if (path != NULL)
        return access(path, X_OK) == 0 ? xstrdup(path) : NULL;
    for (size_t i = 0; i < sizeof(guesses) / sizeof(guesses[0]); i++)
        if (access(guesses[i], X_OK) == 0)
            return xstrdup(guesses[i]);
    return NULL;
}

static int open_init(const char *path, struct wr_err *err)
{
    struct stat st;
    int fd;

    fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return wr_err_set(err, WR_EUNSUPPORTED, errno, "warren-init at `%s`", path);
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return wr_err_set(err, WR_EUNSUPPORTED, 0, "warren-init at `%s` is not a file", path);
    }
    /* The protection of PID 1 against ptrace from inside relies on the sandbox's root being
     * unable to read the binary (see sandbox.c). Refuse a binary that anyone but its owner can
     * read, or that is not owned by the host's root. */
    if (st.st_uid != 0 || (st.st_mode & 0044) != 0) {
        close(fd);
        return wr_err_set(err, WR_EUNSUPPORTED, 0,
                          "warren-init at `%s` must be owned by root and not readable by others "
                          "(chmod 0111)",
                          path);
    }
    return fd;
}

/* Where this process's argv and environment strings are (fields 48 to 51 of /proc/self/stat),
 * for a child that becomes warren-init in place to overwrite. Left NULL if they cannot be
 * read. */
static void find_cmdline(struct wr_runtime *rt)
{
    char buf[2048], *p;
    unsigned long long a[4] = {0};
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* the name (field 2) may hold spaces and parentheses */
    for (int field = 2; p != NULL && field < 48; field++)
        p = strchr(p + 1, ' ');
    if (p == NULL || sscanf(p, " %llu %llu %llu %llu", &a[0], &a[1], &a[2], &a[3]) != 4)
        return;
    if (a[0] != 0 && a[1] > a[0]) {
        rt->cmdline = (char *)(uintptr_t)a[0];
        rt->cmdline_len = (size_t)(a[1] - a[0]);
    }
    if (a[2] != 0 && a[3] > a[2]) {
        rt->environ_area = (char *)(uintptr_t)a[2];
        rt->environ_len = (size_t)(a[3] - a[2]);
    }
}

int wr_runtime_open(const struct wr_runtime_config *cfg, struct wr_runtime **out,
                    struct wr_err *err)
{
    struct wr_runtime *rt = xcalloc(1, sizeof(*rt));
    const char *run_dir = cfg->run_dir ? cfg->run_dir : DEFAULT_RUN_DIR;
    _cleanup_free_ char *uids_dir = NULL;

    rt->init_fd = -1;
    pthread_mutex_init(&rt->pool_lock, NULL);
    pthread_mutex_init(&rt->zygote_lock, NULL);
    rt->zygote_fd = -1;
    rt->pool = xcalloc(WR__POOL_MAX, sizeof(*rt->pool));
    rt->netpool = xcalloc(WR__POOL_MAX, sizeof(*rt->netpool));
    rt->fault = cfg->fault ? xstrdup(cfg->fault) : NULL;
    rt->crash = cfg->crash ? xstrdup(cfg->crash) : NULL;
    rt->pool_taken = cfg->pool_taken;
    rt->pool_taken_arg = cfg->pool_taken_arg;
    rt->init_main = cfg->init_main;
    if (rt->init_main != NULL)
        find_cmdline(rt);
    rt->run_dir = xstrdup(run_dir);
    rt->sandboxes_dir = xasprintf("%s/sandboxes", run_dir);
    rt->stage_dir = xasprintf("%s/stage", run_dir);
    uids_dir = xasprintf("%s/uids", run_dir);

    if (geteuid() != 0) {
        wr_err_set(err, WR_EUNSUPPORTED, 0, "the ns runtime needs root");
        goto fail;
    }
    if (wr_mkdir_p(rt->sandboxes_dir, 0700, err) < 0 || wr_mkdir_p(rt->stage_dir, 0755, err) < 0)
        goto fail;
    /* The child reaches the stage directory after it became its range's root, which the host
     * treats as an unprivileged user: run_dir must be traversable (0711; the state below it,
     * sandboxes/ and uids/, stays 0700). */
    if (chmod(run_dir, 0711) < 0 || chmod(rt->sandboxes_dir, 0700) < 0 ||
        chmod(rt->stage_dir, 0755) < 0) {
        wr_err_sys(err, "chmod `%s`", run_dir);
        goto fail;
    }
    rt->init_path = next_to_self(cfg->init_path, "warren-init");
    rt->shim_path = next_to_self(cfg->shim_path, "warren-shim");
    rt->gv_points = xasprintf("%s/gvisor-points", rt->run_dir);
    rt->runsc_path = find_runsc(cfg->runsc_path);
    rt->init_fd = open_init(rt->init_path, err);
    if (rt->init_fd < 0)
        goto fail;
    if (wr_uidpool_open(uids_dir, cfg->uid_base ? cfg->uid_base : DEFAULT_UID_BASE,
                        cfg->uid_slots ? cfg->uid_slots : WR_UID_SLOTS, &rt->uids, err) < 0)
        goto fail;
    if (wr_cgroup_driver_open(cfg->cgroup_mode ? cfg->cgroup_mode : "auto",
                              cfg->cgroup_parent ? cfg->cgroup_parent : "warren",
                              cfg->cgroup_v2_root, &rt->cg, err) < 0)
        goto fail;
    if (wr_seccomp_load(rt->run_dir, &rt->seccomp, err) < 0)
        goto fail;
    (void)wr_sysctl_raise_limits(NULL);
    {
        char adj[16] = "";
        rt->oom_adj_inherited =
            wr_read_fileat(AT_FDCWD, "/proc/self/oom_score_adj", adj, sizeof(adj), NULL) < 0 ||
            strtol(adj, NULL, 10) != 0;
    }
    if (cfg->zygote && wr__zygote_start(rt, cfg, err) < 0)
        goto fail;
    log_info("runtime open: run_dir=%s cgroup=%s", run_dir, wr_runtime_cgroup_version(rt));
    *out = rt;
    return 0;
fail:
    wr_runtime_close(rt);
    return wr_err_wrap(err, "runtime");
}

void wr_runtime_close(struct wr_runtime *rt)
{
    if (rt == NULL)
        return;
    if (rt->pool != NULL) {
        wr__runtime_pool_drain(rt);
        free(rt->pool);
        free(rt->netpool);
    }
    wr__zygote_stop(rt);
    pthread_mutex_destroy(&rt->pool_lock);
    pthread_mutex_destroy(&rt->zygote_lock);
    if (rt->init_fd >= 0)
        close(rt->init_fd);
    wr_uidpool_close(rt->uids);
    if (rt->cg != NULL)
        wr_cgroup_driver_close(rt->cg);
    wr_seccomp_free(&rt->seccomp);
    free(rt->init_path);
    free(rt->shim_path);
    free(rt->gv_points);
    free(rt->runsc_path);
    free(rt->run_dir);
    free(rt->sandboxes_dir);
    free(rt->stage_dir);
    free(rt->fault);
    free(rt->crash);
    free(rt);
}

void wr_runtime_config_from_env(struct wr_runtime_config *cfg)
{
    const char *s;
    uint64_t v;

    cfg->cgroup_parent = getenv("WARREN_CGROUP_PARENT");
    if ((s = getenv("WARREN_UID_BASE")) != NULL && wr_parse_uint(s, UINT32_MAX, &v, NULL) == 0)
        cfg->uid_base = (uint32_t)v;
    if ((s = getenv("WARREN_UID_SLOTS")) != NULL && wr_parse_uint(s, 65535, &v, NULL) == 0)
        cfg->uid_slots = (uint32_t)v;
#ifdef WR_TESTING
    cfg->fault = getenv("WARREN_FAULT");
#endif
}

void wr_runtime_crash_point(const struct wr_runtime *rt, const char *step)
{
#ifndef WR_TESTING
    return;
#endif
    if (rt->crash == NULL || strcmp(rt->crash, step) != 0)
        return;
    log_warn("WARREN_CRASH=%s: killing this process", step);
    (void)kill(getpid(), SIGKILL);
    abort(); /* not reached: SIGKILL cannot be caught */
}

const char *wr_runtime_cgroup_version(const struct wr_runtime *rt)
{
    return wr_cgroup_driver_version(rt->cg) == WR_CGROUP_V2 ? "v2" : "v1";
}

int wr_runtime_sweep(struct wr_runtime *rt, struct wr_err *err)
{
    _cleanup_closedir_ DIR *d = opendir(rt->sandboxes_dir);
    time_t now = time(NULL);

    if (d == NULL)
        return wr_err_sys(err, "open `%s`", rt->sandboxes_dir);
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        _cleanup_close_ int lock = -1;
        struct stat st;
        struct wr_err e2;

        if (de->d_name[0] == '.')
            continue;
        /* A directory this young may belong to a create that has not locked it yet. */
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            now - st.st_mtime < SWEEP_MIN_AGE_S)
            continue;
        {
            _cleanup_free_ char *p = xasprintf("%s/lock", de->d_name);
            lock = openat(dirfd(d), p, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        }
        if (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) < 0)
            continue; /* alive */
        log_info("sweep: removing leftovers of sandbox %s", de->d_name);
        {
            _cleanup_free_ char *sbdir = xasprintf("%s/%s", rt->sandboxes_dir, de->d_name);
            wr__gvisor_unmount(sbdir);
        }
        if (wr_cgroup_remove_stale(rt->cg, de->d_name, &e2) < 0)
            log_warn("sweep %s: %s", de->d_name, e2.msg);
        if (wr_rm_rf_at(dirfd(d), de->d_name, &e2) < 0)
            log_warn("sweep %s: %s", de->d_name, e2.msg);
    }
    return 0;
}
