/* SPDX-License-Identifier: Apache-2.0 */
/* src/net/tls.c (ClientHello SNI) and src/net/httphost.c (the Host of a request head), fed
 * whole, byte by byte and split across records. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/net/httphost.h"
#include "../../src/net/tls.h"
#include "netparse.h"
#include "tap.h"

/* The verdict of every prefix of buf: MORE until the last, then the same as the whole. */
static enum wr_sni_result sni_bytewise(const uint8_t *buf, size_t n, char out[WR_NET_NAME_BUF])
{
    for (size_t i = 0; i < n; i++)
        if (wr_tls_sni(buf, i, out) != WR_SNI_MORE)
            return WR_SNI_BAD;
    return wr_tls_sni(buf, n, out);
}

static void sni(void)
{
    uint8_t b[2048];
    char name[WR_NET_NAME_BUF];
    size_t n;

    n = make_client_hello(b, "Api.Example.TEST.", 4096);
    is_int(wr_tls_sni(b, n, name), WR_SNI_NAME, "one record: a name");
    is_str(name, "api.example.test", "lowercased, dot dropped");
    is_int(sni_bytewise(b, n, name), WR_SNI_NAME, "byte by byte: MORE until the end");
    n = make_client_hello(b, "split.example.test", 7);
    is_int(wr_tls_sni(b, n, name), WR_SNI_NAME, "split over records of 7 bytes");
    is_str(name, "split.example.test", "its name");
    is_int(sni_bytewise(b, n, name), WR_SNI_NAME, "split records, byte by byte");
    n = make_client_hello(b, "x.test", 1);
    is_int(wr_tls_sni(b, n, name), WR_SNI_NAME, "records of one byte");
    n = make_client_hello(b, NULL, 4096);
    is_int(wr_tls_sni(b, n, name), WR_SNI_NONE, "no server_name: NONE");
    n = make_client_hello(b, "a\x01.test", 4096);
    is_int(wr_tls_sni(b, n, name), WR_SNI_BAD, "control byte in the name: BAD");
    n = make_client_hello(b, "", 4096);
    is_int(wr_tls_sni(b, n, name), WR_SNI_BAD, "empty name: BAD");

    is_int(wr_tls_sni((const uint8_t *)"SSH-2.0-OpenSSH_9.2\r\n", 21, name), WR_SNI_BAD,
           "SSH on 443: BAD");
    is_int(wr_tls_sni((const uint8_t *)"GET / HTTP/1.1\r\n", 16, name), WR_SNI_BAD,
           "HTTP on 443: BAD");
    is_int(wr_tls_sni((const uint8_t *)"\x16", 1, name), WR_SNI_MORE, "one byte of a record: MORE");
    is_int(wr_tls_sni((const uint8_t *)"\x16\x04", 2, name), WR_SNI_BAD, "version 4: BAD");
    n = make_client_hello(b, "a.test", 4096);
    b[5] = 2; /* ServerHello */
    is_int(wr_tls_sni(b, n, name), WR_SNI_BAD, "not a ClientHello: BAD");
    /* a record header that claims a hello longer than the limit */
    uint8_t big[9] = {22, 3, 1, 0x40, 0x00, 1, 0x01, 0x00, 0x00};
    is_int(wr_tls_sni(big, sizeof(big), name), WR_SNI_BAD, "a 64 KiB hello: BAD");
    /* an endless stream of tiny records never reaches a name and is cut at the cap */
    uint8_t *junk = malloc(WR_TLS_PEEK_MAX + 16);
    size_t o = 0;
    uint8_t hdr[9] = {22, 3, 1, 0, 4, 1, 0, 0x3f, 0xff};
    memcpy(junk, hdr, sizeof(hdr));
    o = sizeof(hdr);
    while (o + 6 < WR_TLS_PEEK_MAX + 10) {
        uint8_t r[6] = {22, 3, 1, 0, 1, 0};
        memcpy(junk + o, r, 6);
        o += 6;
    }
    is_int(wr_tls_sni(junk, o, name), WR_SNI_BAD, "over the peek cap: BAD, not MORE");
    free(junk);

    FILE *f = fopen("tests/fuzz/corpus/sni/openssl-sni", "rb");
    if (f != NULL) {
        n = fread(b, 1, sizeof(b), f);
        fclose(f);
        is_int(wr_tls_sni(b, n, name), WR_SNI_NAME, "openssl s_client's hello");
        is_str(name, "www.example.test", "its name");
        is_int(sni_bytewise(b, n, name), WR_SNI_NAME, "openssl's hello byte by byte");
    }
}

static enum wr_host_result host(const char *s, char out[WR_NET_NAME_BUF])
{
    size_t n = strlen(s);
    enum wr_host_result whole = wr_http_host((const uint8_t *)s, n, out), r;
    char tmp[WR_NET_NAME_BUF];

    /* a prefix says MORE or already what the whole says */
    for (size_t i = 0; i < n; i++)
        if ((r = wr_http_host((const uint8_t *)s, i, tmp)) != WR_HOST_MORE && r != whole)
            return WR_HOST_MORE;
    return whole;
}

static void hosts(void)
{
    char name[WR_NET_NAME_BUF];

    is_int(host("GET / HTTP/1.1\r\nHost: Example.TEST.:8080\r\nAccept: */*\r\n\r\n", name),
           WR_HOST_NAME, "Host with a port, upper case, trailing dot");
    is_str(name, "example.test", "port and dot dropped, lowercased");
    is_int(host("GET / HTTP/1.1\r\nUser-Agent: x\r\nhOsT:   a.test  \r\n\r\n", name), WR_HOST_NAME,
           "any case, spaces around");
    is_str(name, "a.test", "its name");
    is_int(host("GET / HTTP/1.1\r\nHost: 198.18.0.9\r\n\r\n", name), WR_HOST_NAME, "an address");
    is_str(name, "198.18.0.9", "as it is");
    is_int(host("GET / HTTP/1.0\r\n\r\n", name), WR_HOST_NONE, "HTTP/1.0 without Host: NONE");
    is_int(host("GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n", name), WR_HOST_BAD,
           "two Host headers: BAD");
    is_int(host("GET / HTTP/1.1\r\nHost: a.test:99999x\r\n\r\n", name), WR_HOST_BAD,
           "bad port: BAD");
    is_int(host("GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n", name), WR_HOST_BAD, "IPv6: BAD");
    is_int(host("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", name), WR_HOST_BAD, "space inside: BAD");
    is_int(host("GET http://a.test/x HTTP/1.1\r\nHost: a.test\r\n\r\n", name), WR_HOST_NAME,
           "absolute form that agrees");
    is_int(host("GET http://evil.test/x HTTP/1.1\r\nHost: a.test\r\n\r\n", name), WR_HOST_BAD,
           "absolute form naming another host: BAD");
    is_int(host("GET http://a.test@evil.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", name), WR_HOST_BAD,
           "userinfo games: BAD");
    is_int(host("CONNECT evil.test:443 HTTP/1.1\r\nHost: a.test\r\n\r\n", name), WR_HOST_BAD,
           "CONNECT: BAD");
    is_int(host("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", name), WR_HOST_BAD, "HTTP/2 preface: BAD");
    is_int(host("GET / HTTP/1.1\r\nHo st: a\r\n\r\n", name), WR_HOST_BAD, "bad header name: BAD");
    is_int(wr_http_host((const uint8_t *)"\x16\x03\x01", 3, name), WR_HOST_BAD, "TLS on 80: BAD");

    char *big = malloc(WR_HTTP_HEAD_MAX + 100);
    int n = snprintf(big, 100, "GET / HTTP/1.1\r\nX: ");
    memset(big + n, 'a', WR_HTTP_HEAD_MAX);
    is_int(wr_http_host((const uint8_t *)big, WR_HTTP_HEAD_MAX, name), WR_HOST_MORE,
           "a head of exactly the cap, unfinished: MORE");
    is_int(wr_http_host((const uint8_t *)big, WR_HTTP_HEAD_MAX + 1, name), WR_HOST_BAD,
           "over the cap: BAD");
    free(big);
}

int main(void)
{
    sni();
    hosts();
    return done();
}
