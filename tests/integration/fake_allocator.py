#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An allocator that misbehaves on purpose, for the agent's budget tests.

The real tollgate-allocator answers correctly; this one answers what the test
asks, so that the agent is seen against a slow, broken or hostile allocator:

    ip netns exec NODE python3 fake_allocator.py --port P --log L --control C

The control file (JSON, re-read at every request; every key optional):
  {"mode": "grant",         grant: answer with "grants" below (default)
                  "slow",   answer after "delay" seconds
                  "garbage",  200 with a body that is not JSON
                  "version2", a well-formed answer of version 2
                  "oversize", 200 with a 128 KiB body
                  "status",   answer "status" (e.g. 500) with no body
                  "close",    read the request, close without answering
                  "redirect", 307 naming "leader" of "epoch", as a replica that
                              does not lead answers
   "grants": {"datasets": {"grant": 1250000, "safeShare": 500000, "nodes": 3}},
   "leaseMs": 4000, "nextReportMs": 300, "delay": 5, "status": 500,
   "epoch": 7 (the answer's term; absent: none), "leader": "http://...",
   "policy": {"datasets": 15000000} (the budgets, bytes/s, the answers carry
             as the real allocator's do: whole, when the report names another
             id; absent: {"datasets": 15000000}; null: none carried),
   "policyId": "..." (the id to say instead of the right one)}

Every report received is appended to --log as one JSON line:
  {"t": <unix time>, "mode": "...", "report": <the report as sent>,
   "authorization": <the Authorization header, or null>}

With --tls-cert and --tls-key it serves HTTPS (a replica, or an impostor
whose certificate another CA signed).
"""

import argparse
import json
import os
import ssl
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def policy_id(budgets):
    """The id tollgate-allocator gives a policy (budget/set.c): FNV-1a 64 over
    each namespace in order, its name, a NUL and its budget's 8 bytes, little
    end first."""
    h = 0xcbf29ce484222325
    for ns, budget in sorted(budgets.items()):
        for b in ns.encode() + b"\0" + int(budget).to_bytes(8, "little"):
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def control(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send(self, status, body, ctype="application/json", location=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n)
        c = control(self.server.control)
        mode = c.get("mode", "grant")
        try:
            report = json.loads(raw)
        except ValueError:
            report = None
        with open(self.server.log, "a") as f:
            f.write(json.dumps({"t": time.time(), "mode": mode, "path": self.path,
                                "report": report,
                                "authorization": self.headers.get("Authorization")}) + "\n")
        if mode == "close":
            self.close_connection = True
            return
        if mode == "slow":
            time.sleep(float(c.get("delay", 5)))
        if mode == "garbage":
            return self.send(200, b"this is not json {")
        if mode == "oversize":
            return self.send(200, b"{" + b" " * (128 << 10) + b"}")
        if mode == "status":
            return self.send(int(c.get("status", 500)), b"")
        if mode == "redirect":
            body = {"version": 1, "leader": c.get("leader", ""), "epoch": c.get("epoch", 0)}
            return self.send(307, json.dumps(body).encode(), location=c.get("leader"))
        grants = []
        for ns, g in sorted(c.get("grants", {}).items()):
            grants.append({"namespace": ns, "grant": g.get("grant", 0),
                           "safeShare": g.get("safeShare", 0), "nodes": g.get("nodes", 1)})
        answer = {"version": 2 if mode == "version2" else 1,
                  "leaseMs": c.get("leaseMs", 4000), "grants": grants}
        if "nextReportMs" in c:
            answer["nextReportMs"] = c["nextReportMs"]
        if "epoch" in c:
            answer["epoch"] = c["epoch"]
        budgets = c.get("policy", {"datasets": 15000000})
        if budgets is not None:
            pid = c.get("policyId", policy_id(budgets))
            if not isinstance(report, dict) or report.get("policy") != pid:
                answer["policy"] = {"id": pid, "namespaces": [
                    {"namespace": ns, "internetEgress": b} for ns, b in sorted(budgets.items())]}
        self.send(200, json.dumps(answer).encode())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--bind", default="127.0.0.1")
    p.add_argument("--log", required=True)
    p.add_argument("--control", required=True)
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    a = p.parse_args()
    srv = ThreadingHTTPServer((a.bind, a.port), Handler)
    if a.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.tls_cert, a.tls_key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.daemon_threads = True
    srv.log = a.log
    srv.control = a.control
    open(a.log, "a").close()
    print("listening", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    os.umask(0o022)
    main()
