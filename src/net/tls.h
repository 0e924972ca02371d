/* SPDX-License-Identifier: Apache-2.0 */
/* The server name (SNI) of a TLS ClientHello, read without terminating TLS: what the egress
 * proxy (proxy.h) matches a sandbox's allow-list against on port 443. The input is every byte
 * the client sent so far; the ClientHello may span several TLS records and arrive in any number
 * of reads, so the caller appends and calls again while the answer is WR_SNI_MORE. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "policy.h"

/* The largest ClientHello handshake message read (its body; real ones are 0.3-2 KiB, with
 * post-quantum key shares under 2 KiB), hence the most bytes a caller needs to keep. */
#define WR_TLS_HELLO_MAX 16384
/* Bytes of records (headers included) that can hold a ClientHello of WR_TLS_HELLO_MAX. */
#define WR_TLS_PEEK_MAX (WR_TLS_HELLO_MAX + 4 + 5 * 8)

enum wr_sni_result {
    WR_SNI_MORE, /* the ClientHello is not complete yet */
    WR_SNI_NONE, /* a complete ClientHello without a server_name of type host_name */
    WR_SNI_BAD,  /* not TLS, not a ClientHello, malformed, or over the limits */
    WR_SNI_NAME, /* the name is in out */
};

/* Read the SNI from the first len bytes of a TLS stream. On WR_SNI_NAME, out holds the name
 * lowercased without a trailing dot; it is made of letters, digits, '-', '_' and '.' only
 * (other bytes make it WR_SNI_BAD) and not yet checked as a host name (the policy does that).
 * The verdict for a prefix is final except for WR_SNI_MORE: more bytes never change a
 * WR_SNI_NONE, WR_SNI_BAD or WR_SNI_NAME answer. More than WR_TLS_PEEK_MAX bytes are never
 * looked at. */
enum wr_sni_result wr_tls_sni(const uint8_t *buf, size_t len, char out[WR_NET_NAME_BUF]);
