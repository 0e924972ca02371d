/* SPDX-License-Identifier: Apache-2.0 */
/* The default seccomp policy: allow by default, deny (EPERM) the calls that reach kernel
 * surface a sandbox has no business touching. Built once with libseccomp, exported as raw BPF,
 * installed with two raw syscalls in each sandbox's child. Reasoning:
 * docs/design/cgroups-seccomp.md. */
#include "seccomp.h"

#include <elf.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/xalloc.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* Denied outright with EPERM. Names the host's libseccomp does not know, or that do not exist
 * on an architecture (stime on x86_64), are skipped there. */
static const char *const deny_eperm[] = {
    /* Replace or extend the running kernel. */
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "create_module",
    /* Large, historically exploit-rich kernel interfaces that sandboxed code does not need:
     * eBPF programs, perf counters (also a side channel), userfaultfd (used to stall the kernel
     * mid-copy in many exploits), io_uring (its own syscall path, bypassing this filter's view
     * of the operations it performs). */
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    /* The kernel keyring is not namespaced by user namespace for every key type. */
    "add_key",
    "request_key",
    "keyctl",
    /* File handles address inodes directly and skip path checks: the classic container breakout
     * (open_by_handle_at, "shocker"). */
    "open_by_handle_at",
    "name_to_handle_at",
    /* Host-wide state: power, swap, clocks, process accounting, quotas, kernel log, ttys. */
    "reboot",
    "swapon",
    "swapoff",
    "clock_settime",
    "clock_adjtime",
    "settimeofday",
    "adjtimex",
    "stime",
    "acct",
    "quotactl",
    "quotactl_fd",
    "lookup_dcookie",
    "nfsservctl",
    "syslog",
    "vhangup",
    "iopl",
    "ioperm",
    "uselib",
    "_sysctl",
    "ustat",
    "sysfs",
    /* The mount table and namespaces. Mounts handed in as detached fds are read-only only as
     * long as nothing in the sandbox can remount or move them (docs/design/isolation.md); new
     * namespaces are also where most user-namespace kernel bugs are reached. clone and unshare
     * are filtered on their flags below. */
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "mount_setattr",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "setns",
    /* Writing another process's memory; ptrace itself stays allowed (root in a sandbox may
     * debug its own processes) and the sandbox's PID 1 is protected separately. */
    "process_vm_writev",
};

/* The namespace flags clone() and unshare() accept. CLONE_NEWTIME is unshare-only: in clone's
 * flags that bit is part of the exit signal. */
static const unsigned long clone_ns_flags[] = {
    CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
    CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET,
};

#if defined(__x86_64__)
/* personality(2) is allowed only with the values programs use: PER_LINUX, PER_LINUX32, each
 * with UNAME26, and the query 0xffffffff. Others turn on READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE,
 * MMAP_PAGE_ZERO or rarely tested execution domains. libseccomp ANDs the comparisons of a rule
 * and refuses two on one argument, so "not one of these" cannot be a libseccomp rule; this
 * prefix runs before the libseccomp program instead. It compares only the low 32 bits of the
 * argument, as the kernel reads an unsigned int. */
#define X32_BIT          0x40000000u
#define NR_PERSONALITY64 135u                                   /* x86_64 and x32 */
#define NR_PERSONALITY32 136u                                   /* i386 */
#define ARG0_LO          offsetof(struct seccomp_data, args[0]) /* little-endian */
#define PREFIX_LEN       15
static const struct sock_filter personality_prefix[PREFIX_LEN] = {
    /* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    /* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
    /* 2 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    /* 3 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NR_PERSONALITY64, 4, 0),
    /* 4 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NR_PERSONALITY64 | X32_BIT, 3, 10),
    /* 5 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_I386, 0, 9),
    /* 6 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    /* 7 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NR_PERSONALITY32, 0, 7),
    /* 8 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG0_LO),
    /* 9 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x0, 5, 0),
    /* 10 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x8, 4, 0),
    /* 11 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x20000, 3, 0),
    /* 12 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x20008, 2, 0),
    /* 13 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xffffffff, 1, 0),
    /* 14 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    /* 15: the libseccomp program */
};
#else
#define PREFIX_LEN 0
#endif

static int add(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n,
               const struct scmp_arg_cmp *cmp, struct wr_err *err)
{
    int nr = seccomp_syscall_resolve_name(name);
    int rc;

    if (nr == __NR_SCMP_ERROR) {
        log_debug("seccomp: libseccomp does not know `%s`; not filtered", name);
        return 0;
    }
    rc = seccomp_rule_add_array(ctx, action, nr, n, cmp);
    if (rc < 0)
        return wr_err_set(err, WR_EINTERNAL, -rc, "seccomp: rule for `%s`", name);
    return 0;
}

static int build_rules(scmp_filter_ctx ctx, struct wr_err *err)
{
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    struct scmp_arg_cmp cmp[1];

    for (size_t i = 0; i < WR_ARRAY_SIZE(deny_eperm); i++)
        if (add(ctx, eperm, deny_eperm[i], 0, NULL, err) < 0)
            return -1;
    /* A rule's comparisons are ANDed and rules are ORed, so "any namespace flag set" is one
     * rule per flag. */
    for (size_t i = 0; i < WR_ARRAY_SIZE(clone_ns_flags); i++) {
        unsigned long f = clone_ns_flags[i];
        cmp[0] = SCMP_A0(SCMP_CMP_MASKED_EQ, f, f);
        if (add(ctx, eperm, "clone", 1, cmp, err) < 0 ||
            add(ctx, eperm, "unshare", 1, cmp, err) < 0)
            return -1;
    }
    cmp[0] = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWTIME, CLONE_NEWTIME);
    if (add(ctx, eperm, "unshare", 1, cmp, err) < 0)
        return -1;
    /* clone3 passes its flags in memory, which seccomp cannot read. ENOSYS makes glibc (2.34+)
     * fall back to clone, whose flags are filtered above. */
    if (add(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL, err) < 0)
        return -1;
    return 0;
}

int wr_seccomp_build(struct wr_seccomp *out, struct wr_err *err)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    _cleanup_close_ int fd = -1;
    struct sock_filter *insns;
    struct stat st;
    size_t n;
    int rc;

    memset(out, 0, sizeof(*out));
    if (ctx == NULL)
        return wr_err_set(err, WR_EINTERNAL, 0, "seccomp: init");
#if defined(__x86_64__)
    /* Both compat ABIs enter the kernel with their own syscall numbers: without their own
     * copies of the rules, `int 0x80` (i386) or an x32 number would walk around them. */
    if ((rc = seccomp_arch_add(ctx, SCMP_ARCH_X86)) < 0 ||
        (rc = seccomp_arch_add(ctx, SCMP_ARCH_X32)) < 0) {
        seccomp_release(ctx);
        return wr_err_set(err, WR_EINTERNAL, -rc, "seccomp: add compat architectures");
    }
#endif
    /* A binary tree instead of a linear list: most syscalls are allowed, and with a list each
     * would walk past every rule. */
    (void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    if (build_rules(ctx, err) < 0) {
        seccomp_release(ctx);
        return -1;
    }
    fd = memfd_create("warren-seccomp", MFD_CLOEXEC);
    if (fd < 0) {
        seccomp_release(ctx);
        return wr_err_sys(err, "seccomp: memfd_create");
    }
    rc = seccomp_export_bpf(ctx, fd);
    seccomp_release(ctx);
    if (rc < 0)
        return wr_err_set(err, WR_EINTERNAL, -rc, "seccomp: export");
    if (fstat(fd, &st) < 0)
        return wr_err_sys(err, "seccomp: stat memfd");
    if (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) != 0)
        return wr_err_set(err, WR_EINTERNAL, 0, "seccomp: exported %lld bytes",
                          (long long)st.st_size);
    n = (size_t)st.st_size / sizeof(struct sock_filter);
    if (n + PREFIX_LEN > BPF_MAXINSNS)
        return wr_err_set(err, WR_EINTERNAL, 0, "seccomp: filter of %zu instructions", n);
    insns = xcalloc(n + PREFIX_LEN, sizeof(*insns));
#if PREFIX_LEN > 0
    memcpy(insns, personality_prefix, sizeof(personality_prefix));
#endif
    if (pread(fd, insns + PREFIX_LEN, (size_t)st.st_size, 0) != st.st_size) {
        free(insns);
        return wr_err_sys(err, "seccomp: read exported filter");
    }
    out->insns = insns;
    out->len = (unsigned short)(n + PREFIX_LEN);
    return 0;
}

void wr_seccomp_free(struct wr_seccomp *f)
{
    if (f == NULL)
        return;
    free(f->insns);
    f->insns = NULL;
    f->len = 0;
}

int wr_seccomp_install(const struct wr_seccomp *f, bool nnp)
{
    struct sock_fprog prog = {.len = f->len, .filter = f->insns};

    /* Without no_new_privs only a holder of CAP_SYS_ADMIN may install a filter (the sandbox's
     * child is one, in its own user namespace); with it no setuid or file-capability exec can
     * gain privileges afterwards. */
    if (nnp && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -errno;
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
        return -errno;
    return 0;
}

/* The GNU build id of the main executable, as hex, from its PT_NOTE segments. */
struct build_id {
    char hex[2 * 64 + 1];
};

static int find_build_id(struct dl_phdr_info *info, size_t size, void *data)
{
    struct build_id *out = data;

    if (info->dlpi_name != NULL && info->dlpi_name[0] != '\0')
        return 0; /* not the main program */
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        const char *p, *end;

        if (ph->p_type != PT_NOTE)
            continue;
        p = (const char *)(info->dlpi_addr + ph->p_vaddr);
        end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
            const char *name = p + sizeof(*nh);
            const unsigned char *desc = (const unsigned char *)name + ((nh->n_namesz + 3) & ~3u);

            if ((const char *)desc + nh->n_descsz > end)
                break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
                nh->n_descsz > 0 && nh->n_descsz <= 64) {
                for (unsigned j = 0; j < nh->n_descsz; j++)
                    snprintf(out->hex + 2 * j, 3, "%02x", desc[j]);
                return 1;
            }
            p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
    return 1;
}

#define DAY_SECS (24 * 60 * 60)

/* Remove the regular files `seccomp-*` in dir (cached filters, and temporary files a crash left)
 * not modified for WR_SECCOMP_CACHE_DAYS days, except keep. Best effort. */
static void cache_prune(const char *dir, const char *keep)
{
    time_t cutoff = time(NULL) - (time_t)WR_SECCOMP_CACHE_DAYS * DAY_SECS;
    DIR *d = opendir(dir);
    struct dirent *de;

    if (d == NULL)
        return;
    while ((de = readdir(d)) != NULL) {
        struct stat st;

        if (strncmp(de->d_name, "seccomp-", 8) != 0 || strcmp(de->d_name, keep) == 0 ||
            fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISREG(st.st_mode) && st.st_mtime < cutoff)
            (void)unlinkat(dirfd(d), de->d_name, 0);
    }
    closedir(d);
}

int wr_seccomp_load(const char *dir, struct wr_seccomp *out, struct wr_err *err)
{
    const struct scmp_version *v = seccomp_version();
    struct build_id id = {{0}};
    char path[4096], tmp[4200];
    struct stat st;
    int fd;

    (void)dl_iterate_phdr(find_build_id, &id);
    if (id.hex[0] == '\0' || v == NULL)
        return wr_seccomp_build(out, err);
    snprintf(path, sizeof(path), "%s/seccomp-%s-%u.%u.%u.bpf", dir, id.hex, v->major, v->minor,
             v->micro);

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
            (st.st_mode & 022) == 0 && st.st_size > 0 &&
            st.st_size % sizeof(struct sock_filter) == 0 &&
            st.st_size / sizeof(struct sock_filter) <= BPF_MAXINSNS) {
            struct sock_filter *insns = xmalloc((size_t)st.st_size);
            if (wr_read_all(fd, insns, (size_t)st.st_size) == st.st_size) {
                /* In use: keep it out of other builds' cache_prune. */
                if (st.st_mtime < time(NULL) - DAY_SECS)
                    (void)futimens(fd, NULL);
                close(fd);
                out->insns = insns;
                out->len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
                return 0;
            }
            free(insns);
        }
        close(fd);
    }

    if (wr_seccomp_build(out, err) < 0)
        return -1;
    /* Best effort: write a private temporary file and rename it into place, so a reader never
     * sees half a filter. */
    snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
        bool ok = wr_write_all(fd, out->insns, out->len * sizeof(struct sock_filter)) == 0;
        close(fd);
        if (!ok || rename(tmp, path) < 0)
            (void)unlink(tmp);
    }
    cache_prune(dir, strrchr(path, '/') + 1);
    return 0;
}
