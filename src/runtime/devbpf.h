/* SPDX-License-Identifier: Apache-2.0 */
/* The devices a cgroup v2 sandbox may open and make: an eBPF program of type
 * BPF_PROG_TYPE_CGROUP_DEVICE (cgroup v2 has no devices.allow) that allows the standard nodes
 * (null, zero, full, random, urandom, tty, ptmx and the pts) and the given devices with their
 * access, and refuses every other. */
#pragma once

#include <stddef.h>

struct wr_device_node; /* runtime.h */

/* Load the program for devices[0..n) (at most WR_MAX_DEVICE_NODES). Its fd, or -errno. */
int wr_devbpf_load(const struct wr_device_node *devices, size_t n);
/* Attach it to the cgroup directory cgroup_fd (BPF_CGROUP_DEVICE), where it stays while the
 * cgroup lives (the fd may be closed after). 0 or -errno. */
int wr_devbpf_attach(int prog_fd, int cgroup_fd);
