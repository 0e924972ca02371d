/* SPDX-License-Identifier: Apache-2.0 */
/* Network slots: a network namespace owned by the host's user namespace, held by a bind mount at
 * <dir>/<i>, joined by a sandbox (clone3 without CLONE_NEWNET from a thread that setns()'d into
 * it), with a routed veth pair: host end `wr%08x` (the host-end address in hex) in the caller's
 * netns, `eth0` in the slot, a /31, permanent neighbours with deterministic MACs (host end
 * 02:57:<host addr>, eth0 02:58:<sandbox addr>), IPv6 off on both ends, lo and eth0 up, a default
 * route via the host end, and the slot's sysctls (ip_unprivileged_port_start=0, ping_group_range
 * "0 2147483647"). Slot i of pool P: host end P+2i, sandbox end P+2i+1 (docs: net-design).
 *
 * Everything is done through rtnetlink (libmnl) and /proc/sys; no `ip` process. Threads: every
 * function may run on any thread, concurrently for different slots (no global state; make
 * changes only the calling thread's network namespace, and puts it back). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"
#include "../util/inet.h"

struct wr_netslots;

struct wr_netslots_config {
    const char *dir;      /* <run_dir>/net/<table>: the bind mounts live here, named by index */
    struct wr_cidr4 pool; /* len <= 31; slot i uses pool.addr + 2i and + 2i + 1 */
};

/* The interface name of a host end: "wr" + 8 lowercase hex digits + NUL. */
#define WR_NETSLOT_IFNAMSIZ 11

/* How many slots the pool holds (2^(31 - len); 0 if len > 31). */
uint32_t wr_netslot_capacity(struct wr_cidr4 pool);
/* Host-end and sandbox-end addresses of slot i (host order). i must be < capacity. */
uint32_t wr_netslot_host_addr(struct wr_cidr4 pool, uint32_t i);
uint32_t wr_netslot_sandbox_addr(struct wr_cidr4 pool, uint32_t i);
/* The host end's name, e.g. "wr0ac80000" for 10.200.0.0. */
void wr_netslot_ifname(struct wr_cidr4 pool, uint32_t i, char buf[WR_NETSLOT_IFNAMSIZ]);
/* The slot index whose host end is called name, if name is one of this pool's. */
bool wr_netslot_from_ifname(struct wr_cidr4 pool, const char *name, uint32_t *i);

/* Open the slot directory (made, mode 0700, if missing). Files there that are not a live
 * netns bind mount (a make cut short by a crash) are removed. Returns 0 and *out, or -1 with
 * err (WR_EINVAL for a pool longer than /31). */
int wr_netslots_open(const struct wr_netslots_config *cfg, struct wr_netslots **out,
                     struct wr_err *err);
/* Free the handle; the slots stay (they outlive the daemon). NULL is fine. */
void wr_netslots_close(struct wr_netslots *s);

/* The slots that exist (a daemon restart finds them): *idx (malloc'd, ascending, the caller
 * frees it) and *n. Only indices inside the pool are listed. */
int wr_netslots_existing(struct wr_netslots *s, uint32_t **idx, size_t *n, struct wr_err *err);

/* Make slot i as described above. The calling thread must be in the host's network namespace
 * (the one the host ends go into) and have CAP_NET_ADMIN and CAP_SYS_ADMIN there; it is back in
 * it on return. WR_ECONFLICT if slot i exists; WR_EINVAL if i is outside the pool. On failure
 * nothing of the slot is left. */
int wr_netslot_make(struct wr_netslots *s, uint32_t i, struct wr_err *err);

/* Give slot i's eth0 its address, neighbour and default route again, as made. gVisor's own
 * network stack (runsc --network=sandbox) takes the addresses of the interfaces it is given
 * off the host's stack; this puts them back, for its restore or the slot's next sandbox. Any
 * thread, as make; a slot addressed already is left as it is. */
int wr_netslot_readdress(struct wr_netslots *s, uint32_t i, struct wr_err *err);

/* An O_RDONLY|O_CLOEXEC fd of slot i's network namespace (for setns), or -1 with errno set
 * (ENOENT: no such slot). */
int wr_netslot_open_fd(struct wr_netslots *s, uint32_t i);

/* Destroy slot i: detach and remove its bind mount. The kernel removes the namespace, and the
 * veth pair with it, once nothing else holds it (no process in it, no fd): in batches, off the
 * request path. A slot that does not exist is not an error. */
int wr_netslot_destroy(struct wr_netslots *s, uint32_t i, struct wr_err *err);

/* The pool and directory of the handle. */
struct wr_cidr4 wr_netslots_pool(const struct wr_netslots *s);
