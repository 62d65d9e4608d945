#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A tiny stand-in for Azure IMDS, for the tollgate-ipam integration tests.

Serves GET /metadata/instance/network?api-version=2021-02-01 from a fixture
file. Run it inside the test node's network namespace, on 127.0.0.1:

    ip netns exec NODE python3 fake_imds.py --port 18080 --fixture F --log L [options]

Behaviour (argv, overridden by --control FILE when that file exists; it is
re-read at every request, so a test switches behaviour without a restart):

  mode normal      answer with the status sequence (default: 200 always)
  mode hang        accept, read the request, never answer (until --hang-seconds)
  mode cut         200 with a Content-Length larger than the body sent, then close
  mode stall       a request that arrives before stallUntil (unix seconds) is
                   answered only then (as in normal mode); later ones at once
  statuses         e.g. 429,429,200: one per request, the last one repeats;
                   any 200 serves the fixture
  retryAfter       seconds, sent as Retry-After with 429/410/5xx answers

Control file (JSON, every key optional):
  {"fixture": "/path.json", "mode": "normal", "statuses": [410, 410, 200], "retryAfter": 0,
   "stallUntil": 1700000000.5}
The status sequence restarts whenever the control file's content changes.

Like IMDS, a request without the header "Metadata: true" gets 400, a wrong or
missing api-version gets 400, any other path 404.

Every request is logged to --log, one line each:
  <unix time, ms precision> <answer: status|hang|cut|stall> <path> metadata=<header or ->
(a stalled request is logged once, when it arrives, as "stall": one line a request)
so tests can count requests and check their spacing (no retry storm).
"""

import argparse
import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

NETWORK_PATH = "/metadata/instance/network"
API_VERSION = "2021-02-01"
REASONS = {
    400: "Bad request",
    404: "Not found",
    410: "Gone",
    429: "Too many requests",
    500: "Internal server error",
    503: "Service unavailable",
}


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.control_raw = None
        self.index = 0
        self.log = open(args.log, "a", buffering=1)
        self.stop = threading.Event()

    def settings(self):
        """Current behaviour: argv defaults overridden by the control file."""
        a = self.args
        s = {
            "fixture": a.fixture,
            "mode": a.mode,
            "statuses": [int(x) for x in a.statuses.split(",") if x.strip()],
            "retryAfter": a.retry_after,
            "stallUntil": 0,
        }
        raw = None
        if a.control and os.path.exists(a.control):
            try:
                with open(a.control, "rb") as f:
                    raw = f.read()
                ctl = json.loads(raw.decode() or "{}")
                for k in ("fixture", "mode", "statuses", "retryAfter", "stallUntil"):
                    if k in ctl:
                        s[k] = ctl[k]
            except (OSError, ValueError) as e:
                print("fake_imds: bad control file: %s" % e, file=sys.stderr)
        return s, raw

    def next_status(self, s, raw):
        with self.lock:
            if raw != self.control_raw:
                self.control_raw = raw
                self.index = 0
            seq = s["statuses"] or [200]
            st = seq[min(self.index, len(seq) - 1)]
            self.index += 1
            return int(st)

    def record(self, what, path, metadata):
        with self.lock:
            self.log.write("%.3f %s %s metadata=%s\n" % (time.time(), what, path, metadata))


class Quiet:
    """A State whose record() writes nothing (a request logged already)."""

    def __init__(self, st):
        self.st = st

    def next_status(self, s, raw):
        return self.st.next_status(s, raw)

    def record(self, what, path, metadata):
        pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-imds/1"

    def log_message(self, fmt, *args):  # quiet: the request log is ours
        pass

    def send_body(self, status, body, extra=None):
        self.send_response(status, REASONS.get(status))
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def error(self, status, msg, extra=None):
        self.send_body(status, json.dumps({"error": msg}).encode(), extra)

    def do_GET(self):
        st = self.server.st
        md = self.headers.get("Metadata")
        md_log = md if md is not None else "-"
        url = urlsplit(self.path)
        if md != "true":
            st.record(400, self.path, md_log)
            self.error(400, "Bad request. Required metadata header not specified")
            return
        if url.path.rstrip("/") != NETWORK_PATH:
            st.record(404, self.path, md_log)
            self.error(404, "Not found")
            return
        if parse_qs(url.query).get("api-version") != [API_VERSION]:
            st.record(400, self.path, md_log)
            self.error(400, "Bad request. api-version was not specified or is invalid")
            return
        s, raw = st.settings()
        mode = s["mode"]
        if mode == "hang":
            st.record("hang", self.path, md_log)
            # never answer; the client gives up first
            st.stop.wait(self.server.st.args.hang_seconds)
            self.close_connection = True
            return
        if mode == "stall":
            left = float(s.get("stallUntil") or 0) - time.time()
            if left > 0:
                st.record("stall", self.path, md_log)
                if st.stop.wait(left):
                    return
                # logged already: answered as normal mode would, unlogged
                st = Quiet(st)
        try:
            self.answer(st, s, raw, mode, md_log)
        except OSError:
            pass  # the client gave up waiting

    def answer(self, st, s, raw, mode, md_log):
        status = st.next_status(s, raw)
        if status != 200:
            extra = {}
            if s.get("retryAfter"):
                extra["Retry-After"] = str(int(s["retryAfter"]))
            st.record(status, self.path, md_log)
            self.error(status, REASONS.get(status, "error"), extra)
            return
        try:
            with open(s["fixture"], "rb") as f:
                body = f.read()
        except OSError as e:
            st.record(500, self.path, md_log)
            self.error(500, "fixture: %s" % e)
            return
        if mode == "cut":
            st.record("cut", self.path, md_log)
            self.send_response(200, "OK")
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body) + 4096))
            self.end_headers()
            self.wfile.write(body[: max(1, len(body) // 2)])
            self.wfile.flush()
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        st.record(200, self.path, md_log)
        self.send_body(200, body)

    # IMDS answers other methods with 405; nobody should send them
    def do_POST(self):
        self.server.st.record(405, self.path, self.headers.get("Metadata") or "-")
        self.error(405, "Method not allowed")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--bind", default="127.0.0.1")
    p.add_argument("--fixture", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--mode", default="normal", choices=["normal", "hang", "cut", "stall"])
    p.add_argument("--statuses", default="200")
    p.add_argument("--retry-after", type=int, default=0)
    p.add_argument("--control")
    p.add_argument("--hang-seconds", type=float, default=60.0)
    args = p.parse_args()
    if args.bind not in ("127.0.0.1", "::1"):
        p.error("listens on loopback only")
    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer.daemon_threads = True
    srv = ThreadingHTTPServer((args.bind, args.port), Handler)
    srv.st = State(args)
    try:
        srv.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        srv.st.stop.set()
        srv.server_close()


if __name__ == "__main__":
    main()
