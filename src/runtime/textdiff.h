/* SPDX-License-Identifier: Apache-2.0 */
/* A unified diff of two texts, made by the host's /usr/bin/diff (GNU diffutils, `diff -u`).
 *
 * Why a program and whom it trusts: the texts come from sandboxes, but diff never sees a path a
 * sandbox controls. The caller has read the bytes already (bounded); they are copied into two
 * sealed memfds that the child gets as fds 3 and 4 (its only other fds: /dev/null on 0 and 2, a
 * pipe on 1), and it reads them as /dev/fd/3 and /dev/fd/4. The child drops every privilege
 * before the exec (no groups, uid and gid 65534, no_new_privs, an empty environment but
 * LC_ALL=C), with limits on its memory (512 MiB), CPU time (10 s) and output (what the caller
 * allows; past it the child is killed): a diff confused by its input can use up only those. */
#pragma once

#include <stddef.h>

#include "../util/err.h"

/* The unified diff (-u, 3 lines of context) from text a (na bytes) to text b, with the labels
 * given for the two header lines (e.g. "a/etc/motd" and "b/etc/motd", or "/dev/null"). *out gets
 * a new NUL-terminated string ("" when the texts are equal; free it). -1 with err: WR_ETOOBIG if
 * the diff is over max_out bytes, WR_EUNSUPPORTED if /usr/bin/diff is missing, WR_ESYS (killed,
 * or failed: its exit status). */
int wr_text_diff(const char *a, size_t na, const char *b, size_t nb, const char *label_a,
                 const char *label_b, size_t max_out, char **out, struct wr_err *err);
