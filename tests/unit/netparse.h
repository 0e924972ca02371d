/* SPDX-License-Identifier: Apache-2.0 */
/* A ClientHello made by hand for the tests of src/net/tls.c and src/net/proxy.c. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Write a TLS 1.2-style ClientHello for sni (NULL: no server_name extension) into out, split into
 * records of at most rec bytes of handshake data each. Returns its length. out must hold 1024
 * bytes plus the name. */
static inline size_t make_client_hello(uint8_t *out, const char *sni, size_t rec)
{
    uint8_t hs[1024];
    size_t n = 0, sl = sni ? strlen(sni) : 0, o = 0;

    hs[n++] = 1; /* ClientHello */
    n += 3;      /* length, below */
    hs[n++] = 3;
    hs[n++] = 3;
    for (int i = 0; i < 32; i++)
        hs[n++] = (uint8_t)(i * 7);
    hs[n++] = 0; /* session id */
    hs[n++] = 0;
    hs[n++] = 4;
    hs[n++] = 0x13;
    hs[n++] = 0x01;
    hs[n++] = 0xc0;
    hs[n++] = 0x2f;
    hs[n++] = 1; /* compression: null */
    hs[n++] = 0;
    size_t ext_at = n;
    n += 2;
    /* supported_groups, a distraction before the SNI */
    hs[n++] = 0;
    hs[n++] = 10;
    hs[n++] = 0;
    hs[n++] = 4;
    hs[n++] = 0;
    hs[n++] = 2;
    hs[n++] = 0;
    hs[n++] = 29;
    if (sni != NULL) {
        hs[n++] = 0;
        hs[n++] = 0;
        hs[n++] = (uint8_t)((sl + 5) >> 8);
        hs[n++] = (uint8_t)(sl + 5);
        hs[n++] = (uint8_t)((sl + 3) >> 8);
        hs[n++] = (uint8_t)(sl + 3);
        hs[n++] = 0;
        hs[n++] = (uint8_t)(sl >> 8);
        hs[n++] = (uint8_t)sl;
        memcpy(hs + n, sni, sl);
        n += sl;
    }
    hs[ext_at] = (uint8_t)((n - ext_at - 2) >> 8);
    hs[ext_at + 1] = (uint8_t)(n - ext_at - 2);
    hs[1] = (uint8_t)((n - 4) >> 16);
    hs[2] = (uint8_t)((n - 4) >> 8);
    hs[3] = (uint8_t)(n - 4);
    for (size_t at = 0; at < n; at += rec) {
        size_t k = n - at < rec ? n - at : rec;
        out[o++] = 22;
        out[o++] = 3;
        out[o++] = 1;
        out[o++] = (uint8_t)(k >> 8);
        out[o++] = (uint8_t)k;
        memcpy(out + o, hs + at, k);
        o += k;
    }
    return o;
}
