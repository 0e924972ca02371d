#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for the Kubernetes API server, for tests/unit/test_discover.c: HTTPS on 127.0.0.1
with the given certificate, GET /api/v1/namespaces/NS/pods?labelSelector=SEL answered with a
PodList file when the Bearer token is right, and with a Status object as the API server does
otherwise (401 without the token, 403 for another namespace, 404 for any other path).

  k8s_api.py CERT KEY TOKEN PODLIST NAMESPACE SELECTOR

Prints its port on a line, then serves until killed."""
import http.server
import json
import os
import ssl
import sys
import urllib.parse

cert, key, token, podlist, namespace, selector = sys.argv[1:7]


class Handler(http.server.BaseHTTPRequestHandler):
    def status(self, code, reason, message):
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "message": message, "reason": reason, "code": code}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        parts = url.path.split("/")
        if self.headers.get("Authorization") != "Bearer " + token:
            return self.status(401, "Unauthorized", "Unauthorized")
        if len(parts) != 6 or parts[:4] != ["", "api", "v1", "namespaces"] or parts[5] != "pods":
            return self.status(404, "NotFound", "the server could not find the requested resource")
        if parts[4] != namespace:
            return self.status(403, "Forbidden", 'pods is forbidden: User "system:serviceaccount:'
                               + namespace + ':warren-gateway" cannot list resource "pods" in '
                               'API group "" in the namespace "' + parts[4] + '"')
        if query.get("labelSelector") != [selector]:
            body = b'{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}'
        else:
            with open(podlist, "rb") as f:
                body = f.read()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
# One write, then no more output: the test reads the line and closes its end.
os.write(1, b"%d\n" % server.server_address[1])
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
server.serve_forever()
