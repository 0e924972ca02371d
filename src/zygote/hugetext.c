/* SPDX-License-Identifier: Apache-2.0 */
/* Code on transparent huge pages: see hugetext.h for why and the contract.
 *
 * The sequence, for each qualifying segment at S of length L (rounded up to H, a multiple of
 * 2 MiB):
 *   1. claim [S+L, S+H) with a PROT_NONE mapping (MAP_FIXED_NOREPLACE): the gap must be free;
 *   2. map H bytes of anonymous memory at a 2 MiB-aligned address N, madvise(MADV_HUGEPAGE);
 *   3. copy the segment to N; make sure N is on huge pages (MADV_COLLAPSE: the copy's page
 *      faults fall back to 4 KiB pages when no huge page is free at once, and a segment of
 *      anonymous 4 KiB pages would gain nothing); give N the segment's protection;
 *   4. mremap(N → S, MREMAP_FIXED): one system call replaces the file-backed segment and the
 *      claimed gap with the copy. The code running this function is in the segment it replaces;
 *      it returns into identical bytes at the same address.
 * The program is position-independent and its code carries no relocations, so an exact copy at
 * the same address is the same program. */
#include "hugetext.h"

#include <fcntl.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "../util/fs.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1; glibc 2.36's headers predate it */
#endif

#define HUGE_SIZE   ((uintptr_t)2 << 20)
#define SEGMENT_MIN ((size_t)256 << 10)

static uintptr_t round_up(uintptr_t v, uintptr_t to)
{
    return (v + to - 1) & ~(to - 1);
}

/* True unless transparent huge pages are off for everyone ("[never]"). */
static bool thp_usable(void)
{
    char buf[128];

    if (wr_read_fileat(AT_FDCWD, "/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof(buf),
                       NULL) < 0)
        return false;
    return strstr(buf, "[never]") == NULL;
}

/* Steps 1-4 for the segment at start, len bytes (page-rounded), with protection prot. */
static bool move_segment(uintptr_t start, size_t len, int prot)
{
    size_t hlen = round_up(len, HUGE_SIZE);
    uint8_t *raw, *copy;

    if (hlen > len) {
        int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE;
        void *gap = (void *)(start + len);
        void *got = mmap(gap, hlen - len, PROT_NONE, flags, -1, 0);

        if (got != gap) {
            if (got != MAP_FAILED)
                munmap(got, hlen - len); /* a kernel that ignored the flag */
            return false;
        }
    }
    /* H + 2 MiB, then trimmed to the aligned H inside it. */
    raw = mmap(NULL, hlen + HUGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        goto unclaim;
    copy = (uint8_t *)round_up((uintptr_t)raw, HUGE_SIZE);
    if (copy > raw)
        munmap(raw, (size_t)(copy - raw));
    munmap(copy + hlen, (size_t)(raw + hlen + HUGE_SIZE - (copy + hlen)));
    if (madvise(copy, hlen, MADV_HUGEPAGE) < 0)
        goto drop;
    memcpy(copy, (const void *)start, len);
    if (madvise(copy, hlen, MADV_COLLAPSE) < 0 || mprotect(copy, hlen, prot) < 0 ||
        mremap(copy, hlen, hlen, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)start) != (void *)start)
        goto drop;
    return true;
drop:
    munmap(copy, hlen);
unclaim:
    if (hlen > len)
        munmap((void *)(start + len), hlen - len);
    return false;
}

static int each_segment(struct dl_phdr_info *info, size_t size, void *arg)
{
    int *moved = arg;

    (void)size;
    /* The first object is the program itself; a static program has no other. */
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        size_t len = round_up(ph->p_memsz, 4096);
        int prot = PROT_READ | (ph->p_flags & PF_X ? PROT_EXEC : 0);

        if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W) || start % HUGE_SIZE != 0 ||
            len < SEGMENT_MIN)
            continue;
        if (move_segment(start, len, prot))
            (*moved)++;
    }
    return 1; /* stop after the program */
}

int wr_hugetext(void)
{
    int moved = 0;

    if (thp_usable())
        dl_iterate_phdr(each_segment, &moved);
    return moved;
}
