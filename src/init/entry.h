/* SPDX-License-Identifier: Apache-2.0 */
/* warren-init's body as a function, for the two ways a sandbox's PID 1 starts:
 *
 *  - the warren-init program (exe.c), exec'd by fd by the runtime's child;
 *  - without an exec: a runtime child cloned from a small single-threaded program that holds
 *    nothing another sandbox must not see (warren-zygote, `warren run`) calls it in place
 *    (wr_runtime_config.init_main).
 *
 * Either way it expects fds 3..6 as src/runtime/sandbox.c arranges them, stdio open and an empty
 * environment, and ends the process with _exit: it never runs its host program's atexit
 * handlers or flushes its stdio. */
#pragma once

__attribute__((noreturn)) void wr_init_main(int argc, char **argv);

/* What a creator passes as wr_runtime_config.init_main. In a sanitizer build, NULL: the child
 * execs the static, unsanitized warren-init instead, since ASan's shadow and quarantine in PID 1
 * would count against the sandbox's memory limit (a 256 MiB upload got init OOM-killed). */
#if defined(__SANITIZE_ADDRESS__)
#define WR_INIT_MAIN NULL
#else
#define WR_INIT_MAIN wr_init_main
#endif
