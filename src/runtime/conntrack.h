/* SPDX-License-Identifier: Apache-2.0 */
/* Connection tracking entries of a sandbox address, removed when its slot is recycled so that a
 * later tenant of the address inherits none of the old one's flows (or NAT bindings). */
#pragma once

#include <stdint.h>

#include "../util/err.h"

/* Delete every IPv4 conntrack entry of the calling thread's network namespace whose original
 * source is addr (host order), in one netlink request that the kernel filters itself
 * (IPCTNL_MSG_CT_DELETE with CTA_FILTER). Returns 0 (also when there were none), or -1 with
 * err. */
int wr_conntrack_flush_addr(uint32_t addr, struct wr_err *err);
