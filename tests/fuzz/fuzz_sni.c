/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for src/net/tls.c: the input is what a sandbox sends to port 443. A name comes
 * out lowercase within the limits, and a prefix's verdict is MORE or the whole input's verdict
 * (with the same name): bytes arriving later never change a decision made. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/net/tls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char whole[WR_NET_NAME_BUF], part[WR_NET_NAME_BUF];
    enum wr_sni_result w = wr_tls_sni(data, size, whole), r;

    if (w == WR_SNI_NAME) {
        size_t n = strlen(whole);
        check(n > 0 && n <= WR_NET_NAME_MAX && whole[n - 1] != '.');
        for (size_t i = 0; i < n; i++)
            check((whole[i] >= 'a' && whole[i] <= 'z') || (whole[i] >= '0' && whole[i] <= '9') ||
                  whole[i] == '-' || whole[i] == '_' || whole[i] == '.');
    }
    for (size_t i = 0; i < size; i += 1 + i / 64) {
        r = wr_tls_sni(data, i, part);
        check(r == WR_SNI_MORE || r == w);
        if (r == WR_SNI_NAME)
            check(strcmp(part, whole) == 0);
    }
    return 0;
}
