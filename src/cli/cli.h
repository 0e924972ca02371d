/* SPDX-License-Identifier: Apache-2.0 */
/* The `warren` command: one file per verb, dispatched from main.c. */
#pragma once

/* Exit statuses of warren's own failures (as docker run): the command's status passes through
 * otherwise. */
#define WR_EXIT_ERROR    125 /* warren could not run the sandbox */
#define WR_EXIT_NOEXEC   126 /* the command exists but cannot be executed */
#define WR_EXIT_NOTFOUND 127 /* the command was not found */
#define WR_EXIT_TIMEOUT  124 /* --timeout expired (as timeout(1)) */

int cmd_run(int argc, char **argv);

/* Print "warren: <message>" on stderr. */
void cli_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
