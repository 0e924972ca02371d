/* SPDX-License-Identifier: Apache-2.0 */
/* The pool of host id ranges: slot i owns host uids and gids [base + i*65536, base + (i+1)*65536).
 * A slot is taken by holding an exclusive flock on <dir>/<i>; the lock fd goes into the
 * sandbox's warren-init, so a slot is free exactly when no process holds it any more: after
 * teardown, or after a crash of everything that held it. Several processes (daemons, `warren
 * run`) can allocate from one pool at once, under one layout (base and slots, recorded in
 * <dir>/layout): opening it with another while a slot is held fails with WR_ECONFLICT. */
#pragma once

#include <stdint.h>

#include "../util/err.h"

#define WR_UID_RANGE 65536u

struct wr_uidpool;

int wr_uidpool_open(const char *dir, uint32_t base, uint32_t slots, struct wr_uidpool **out,
                    struct wr_err *err);
void wr_uidpool_close(struct wr_uidpool *p);

/* The pool's directory fd (for a process that closes everything else). */
int wr__uidpool_dirfd(const struct wr_uidpool *p);

/* Take a free slot. Returns 0 with *host_base (the first host id of the range) and *lock_fd
 * (O_CLOEXEC; closing every copy frees the slot), or -1 with WR_ELIMIT when all are taken. */
int wr_uidpool_alloc(struct wr_uidpool *p, uint32_t *host_base, int *lock_fd, struct wr_err *err);
