/* SPDX-License-Identifier: Apache-2.0 */
/* cgroup v2's device rules (devbpf.h): cgroup v2 has no devices.allow; a program of type
 * BPF_PROG_TYPE_CGROUP_DEVICE, attached to the cgroup, is asked for every open and mknod of a
 * device node with {access_type, major, minor} and answers 1 (allow) or 0 (deny), as runc, crun
 * and systemd's DeviceAllow= generate them. The program is a list of rules, each a few
 * compares that jump to the next rule on a mismatch, then "deny". */
#include "devbpf.h"

#include <errno.h>
#include <linux/bpf.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime.h"

/* The instructions this program needs (linux/bpf.h has the encoding, not these helpers). */
static struct bpf_insn ldx_w(int dst, int src, short off)
{
    return (struct bpf_insn){.code = BPF_LDX | BPF_MEM | BPF_W,
                             .dst_reg = (uint8_t)dst,
                             .src_reg = (uint8_t)src,
                             .off = off};
}

static struct bpf_insn alu32_imm(int op, int dst, int imm)
{
    return (struct bpf_insn){.code = BPF_ALU | op | BPF_K, .dst_reg = (uint8_t)dst, .imm = imm};
}

static struct bpf_insn mov32_reg(int dst, int src)
{
    return (struct bpf_insn){
        .code = BPF_ALU | BPF_MOV | BPF_X, .dst_reg = (uint8_t)dst, .src_reg = (uint8_t)src};
}

static struct bpf_insn jne_imm(int dst, int imm, short off)
{
    return (struct bpf_insn){
        .code = BPF_JMP32 | BPF_JNE | BPF_K, .dst_reg = (uint8_t)dst, .off = off, .imm = imm};
}

static struct bpf_insn mov64_imm(int dst, int imm)
{
    return (struct bpf_insn){
        .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = (uint8_t)dst, .imm = imm};
}

static struct bpf_insn exit_insn(void)
{
    return (struct bpf_insn){.code = BPF_JMP | BPF_EXIT};
}

struct rule {
    char type;        /* 'c' or 'b' */
    int64_t major;    /* -1: any */
    int64_t minor;    /* -1: any */
    const char *perm; /* of "rwm" */
};

/* One rule: r2 the type, r3 the access, r4 the major, r5 the minor. */
static size_t emit_rule(struct bpf_insn *p, const struct rule *r)
{
    int acc = (strchr(r->perm, 'm') ? BPF_DEVCG_ACC_MKNOD : 0) |
              (strchr(r->perm, 'r') ? BPF_DEVCG_ACC_READ : 0) |
              (strchr(r->perm, 'w') ? BPF_DEVCG_ACC_WRITE : 0);
    size_t n = 0, len = 6 + (r->major >= 0) + (r->minor >= 0);

    /* Each jump goes to the first instruction after this rule. */
    p[n] =
        jne_imm(2, r->type == 'b' ? BPF_DEVCG_DEV_BLOCK : BPF_DEVCG_DEV_CHAR, (short)(len - n - 1));
    n++;
    p[n++] = mov32_reg(6, 3);
    p[n++] = alu32_imm(BPF_AND, 6, ~acc);
    p[n] = jne_imm(6, 0, (short)(len - n - 1));
    n++;
    if (r->major >= 0) {
        p[n] = jne_imm(4, (int)r->major, (short)(len - n - 1));
        n++;
    }
    if (r->minor >= 0) {
        p[n] = jne_imm(5, (int)r->minor, (short)(len - n - 1));
        n++;
    }
    /* Matched: allow. */
    p[n++] = mov64_imm(0, 1);
    p[n++] = exit_insn();
    return n;
}

int wr_devbpf_load(const struct wr_device_node *d, size_t n)
{
    static const struct rule standard[] = {
        {'c', 1, 3, "rwm"}, {'c', 1, 5, "rwm"}, {'c', 1, 7, "rwm"}, {'c', 1, 8, "rwm"},
        {'c', 1, 9, "rwm"}, {'c', 5, 0, "rwm"}, {'c', 5, 2, "rwm"}, {'c', 136, -1, "rwm"},
    };
    struct bpf_insn prog[8 + (sizeof(standard) / sizeof(standard[0]) + WR_MAX_DEVICE_NODES) * 7];
    size_t len = 0;
    union bpf_attr attr;
    int fd;

    /* r1: the context. r2 = type, r3 = access, r4 = major, r5 = minor. */
    prog[len++] = ldx_w(2, 1, 0);
    prog[len++] = mov32_reg(3, 2);
    prog[len++] = alu32_imm(BPF_AND, 2, 0xffff);
    prog[len++] = alu32_imm(BPF_RSH, 3, 16);
    prog[len++] = ldx_w(4, 1, 4);
    prog[len++] = ldx_w(5, 1, 8);
    for (size_t i = 0; i < sizeof(standard) / sizeof(standard[0]); i++)
        len += emit_rule(prog + len, &standard[i]);
    for (size_t i = 0; i < n && i < WR_MAX_DEVICE_NODES; i++) {
        struct rule r = {d[i].type, d[i].major, d[i].minor, d[i].access};
        if (d[i].access[0] != '\0')
            len += emit_rule(prog + len, &r);
    }
    prog[len++] = mov64_imm(0, 0);
    prog[len++] = exit_insn();

    memset(&attr, 0, sizeof(attr));
    attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
    attr.insns = (uint64_t)(uintptr_t)prog;
    attr.insn_cnt = (uint32_t)len;
    attr.license = (uint64_t)(uintptr_t) "Apache-2.0";
    fd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));
    return fd < 0 ? -errno : fd;
}

int wr_devbpf_attach(int prog_fd, int cgroup_fd)
{
    union bpf_attr attr;

    memset(&attr, 0, sizeof(attr));
    attr.target_fd = (uint32_t)cgroup_fd;
    attr.attach_bpf_fd = (uint32_t)prog_fd;
    attr.attach_type = BPF_CGROUP_DEVICE;
    return syscall(SYS_bpf, BPF_PROG_ATTACH, &attr, sizeof(attr)) < 0 ? -errno : 0;
}
