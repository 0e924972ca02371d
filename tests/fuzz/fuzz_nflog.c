/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the IPv4 header reader of NFLOG records (src/runtime/nflog.c): the input
 * is the start of a packet a sandbox sent and the kernel's rules logged. A header is accepted
 * only when it is IPv4 and whole, its fields are the input's, and ports are read only from a
 * first fragment of TCP, UDP, SCTP or UDP-Lite that holds them. */
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>

#include "../../src/runtime/nflog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct wr_nflog_pkt p = {.sport = 1, .dport = 1};
    size_t ihl;

    if (!wr_rt_nflog_parse_ip(data, size, &p))
        return 0;
    check(size >= 20 && data[0] >> 4 == 4);
    ihl = (size_t)(data[0] & 15) * 4;
    check(ihl >= 20 && ihl <= size);
    check(p.proto == data[9]);
    check(p.src >> 24 == data[12] && (p.dst & 0xff) == data[19]);
    if (p.sport != 0 || p.dport != 0) {
        check(size >= ihl + 4);
        check(p.proto == IPPROTO_TCP || p.proto == IPPROTO_UDP || p.proto == IPPROTO_SCTP ||
              p.proto == IPPROTO_UDPLITE);
        check((data[6] & 0x1f) == 0 && data[7] == 0);
        check(p.dport == (uint16_t)(data[ihl + 2] << 8 | data[ihl + 3]));
    }
    return 0;
}
