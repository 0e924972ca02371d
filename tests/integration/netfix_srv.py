"""The servers of the tests' "internet" (netfix.py), run inside the namespace the test made:
`python3 netfix_srv.py CONFIG.json`. One asyncio process serves, on every address of the config:

- TCP 80: HTTP/1.1; every answer is JSON {"host": <Host>, "path": ..., "server": <local address>,
  "peer": <client address>}, so a test sees which server it reached, under which name, and from
  which source (the NAT's).
- TCP 443: TLS with the test CA's certificate for every test name, then the same HTTP.
- TCP 7 (echo) and UDP 7 (echo), UDP 443 (answers "quic"), so a test can tell a dropped datagram
  from a refused one.
- TCP 9 (sink): counts bytes, for throughput.
- UDP 8 (witness): remembers the source address of every datagram; HTTP `/udp-seen` lists
  them, so a test sees whether a spoofed packet arrived.

It prints "ready" on stdout once every socket listens.
"""
import asyncio
import json
import ssl
import sys


SEEN = []


class Http(asyncio.Protocol):
    def __init__(self, server):
        self.server = server
        self.buf = b""

    def connection_made(self, transport):
        self.t = transport

    def data_received(self, data):
        self.buf += data
        while b"\r\n\r\n" in self.buf:
            head, _, rest = self.buf.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            n = int(headers.get("content-length", "0") or 0)
            if len(rest) < n:
                return
            self.buf = rest[n:]
            peer = self.t.get_extra_info("peername")
            if len(parts) > 1 and parts[1] == "/udp-seen":
                body = json.dumps(SEEN).encode()
                self.t.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                continue
            body = json.dumps({
                "host": headers.get("host", ""),
                "path": parts[1] if len(parts) > 1 else "",
                "server": self.server,
                "peer": peer[0] if peer else "",
            }).encode()
            self.t.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                         % len(body) + body)


class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        self.t = transport

    def data_received(self, data):
        self.t.write(data)


class Sink(asyncio.Protocol):
    def connection_made(self, transport):
        self.t = transport
        self.n = 0

    def data_received(self, data):
        self.n += len(data)

    def eof_received(self):
        self.t.write(b"%d\n" % self.n)
        self.t.close()


class UdpWitness(asyncio.DatagramProtocol):
    def datagram_received(self, data, addr):
        SEEN.append(addr[0])


class UdpEcho(asyncio.DatagramProtocol):
    def __init__(self, reply=None):
        self.reply = reply

    def connection_made(self, transport):
        self.t = transport

    def datagram_received(self, data, addr):
        self.t.sendto(self.reply if self.reply is not None else data, addr)


async def main(cfg):
    loop = asyncio.get_running_loop()
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cfg["cert"], cfg["key"])
    for addr in cfg["addresses"]:
        await loop.create_server(lambda a=addr: Http(a), addr, 80)
        await loop.create_server(lambda a=addr: Http(a), addr, 443, ssl=tls)
        await loop.create_server(Echo, addr, 7)
        await loop.create_server(Sink, addr, 9)
        await loop.create_datagram_endpoint(UdpEcho, local_addr=(addr, 7))
        await loop.create_datagram_endpoint(lambda: UdpEcho(b"quic"), local_addr=(addr, 443))
        await loop.create_datagram_endpoint(UdpWitness, local_addr=(addr, 8))
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        asyncio.run(main(json.load(f)))
