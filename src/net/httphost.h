/* SPDX-License-Identifier: Apache-2.0 */
/* The Host of the first HTTP/1.x request head a client sends: what the egress proxy (proxy.h)
 * matches a sandbox's allow-list against on port 80. The input is every byte the client sent so
 * far; the caller appends and calls again while the answer is WR_HOST_MORE. Parsed by llhttp
 * (strict mode, as the daemon's HTTP server). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "policy.h"

/* The most bytes of a request head looked at: a head not complete within them is WR_HOST_BAD. */
#define WR_HTTP_HEAD_MAX 8192

enum wr_host_result {
    WR_HOST_MORE, /* the head is not complete yet */
    WR_HOST_NONE, /* a complete head without a Host (HTTP/1.0) */
    WR_HOST_BAD,  /* not HTTP/1.x, malformed, two Host headers, a Host that is not a host name or
                     address (with an optional port), an absolute-form target naming another
                     host, or a head over WR_HTTP_HEAD_MAX */
    WR_HOST_NAME, /* the host is in out */
};

/* Read the Host of the request head in the first len bytes. On WR_HOST_NAME out holds the host
 * without its port, lowercased, without a trailing dot: letters, digits, '-', '_' and '.' only
 * (an IPv4 literal comes out as it is: the caller tells it from a name). Only the head is parsed;
 * bytes after it are ignored. The verdict for a prefix is final except for WR_HOST_MORE. */
enum wr_host_result wr_http_host(const uint8_t *buf, size_t len, char out[WR_NET_NAME_BUF]);
