/* SPDX-License-Identifier: Apache-2.0 */
/* Moving warren-zygote's code and constants onto transparent huge pages (hugetext.c). */
#pragma once

/* Replace each read-only PT_LOAD segment of this program (code, constants) that starts on a
 * 2 MiB boundary and is at least 256 KiB long with an anonymous copy on one transparent huge
 * page per 2 MiB, at the same address and with the same protection.
 *
 * Why: on the paravirtualised guests Warren runs on, a forked child pays for its first touch of
 * every page it inherited, 4.7 µs per 4 KiB page read against 1 µs for a 2 MiB one
 * (docs/benchmarks.md). Every sandbox's setup and its warren-init run out of the zygote's code.
 *
 * Contract: call once, first thing in main, while the process has a single thread. The program
 * must be linked with its segments 2 MiB-aligned (-z max-page-size=0x200000; the Makefile does
 * this for warren-zygote); the gap from a segment's end to the next 2 MiB boundary must be
 * unmapped. A segment that does not qualify, transparent huge pages set to "never", or any
 * failure leaves that segment as it was: the program runs the same, only slower. Returns the
 * number of segments moved.
 *
 * Cost: the moved segments are private memory (2 MiB each) instead of shared page cache, once
 * per zygote; the zygote's clones share it. Debuggers and perf see the code as anonymous memory:
 * docs/operations.md says how to symbolize it. */
int wr_hugetext(void);
