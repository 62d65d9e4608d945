#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The API server's service-account issuer discovery, for the allocator's tests.

  issuer_serve.py --bind A --port P --jwks FILE --token FILE --cert C --key K --log L

Serves GET /openid/v1/jwks over HTTPS: FILE as it is at each request (the
test rewrites it to rotate the issuer's keys), only to a request whose
Authorization is "Bearer <the token in --token>" (401 otherwise), as an API
server answers a ServiceAccount bound to system:service-account-issuer-discovery.
Each request is one line of --log: {"path", "authorized"}.
"""
import argparse
import json
import ssl
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        srv = self.server
        with open(srv.token_file) as f:
            want = "Bearer " + f.read().strip()
        ok = self.headers.get("Authorization") == want
        with open(srv.log, "a") as f:
            f.write(json.dumps({"path": self.path, "authorized": ok}) + "\n")
        if self.path != "/openid/v1/jwks":
            status, body = 404, b"not found\n"
        elif not ok:
            status, body = 401, b"Unauthorized\n"
        else:
            with open(srv.jwks, "rb") as f:
                status, body = 200, f.read()
        self.send_response(status)
        self.send_header("Content-Type", "application/jwk-set+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    p = argparse.ArgumentParser()
    for a in ("--bind", "--jwks", "--token", "--cert", "--key", "--log"):
        p.add_argument(a, required=True)
    p.add_argument("--port", type=int, required=True)
    a = p.parse_args()
    srv = ThreadingHTTPServer((a.bind, a.port), Handler)
    srv.daemon_threads = True
    srv.jwks, srv.token_file, srv.log = a.jwks, a.token, a.log
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    open(a.log, "a").close()
    srv.serve_forever()


if __name__ == "__main__":
    main()
