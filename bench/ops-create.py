"""Create latency of a team over TCP, for bench/ops-overhead.sh: N x { POST /v1/sandboxes ->
DELETE } one after the other on one keep-alive connection; prints "P50_MS P99_MS" of the creates.
Usage: python3 bench/ops-create.py URL KEY N"""
import http.client
import json
import sys
import time
import urllib.parse


def main():
    url, key, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    h = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
    took = []
    for _ in range(n):
        t0 = time.perf_counter()
        c.request("POST", "/v1/sandboxes", body=json.dumps({"timeout": 120}), headers=h)
        r = c.getresponse()
        body = r.read()
        took.append((time.perf_counter() - t0) * 1000)
        if r.status != 201:
            sys.exit("create: %d %s" % (r.status, body[:200]))
        c.request("DELETE", "/v1/sandboxes/" + json.loads(body)["id"], headers=h)
        r = c.getresponse()
        r.read()
        if r.status != 204:
            sys.exit("delete: %d" % r.status)
    took.sort()
    print("%.3f %.3f" % (took[len(took) // 2], took[min(len(took) - 1, int(len(took) * 0.99))]))


if __name__ == "__main__":
    main()
