#!/usr/bin/env python3
"""A stand-in for the cloud's metadata endpoints, for tests/integration/test_node_access.sh.

Run inside a throwaway network namespace whose loopback holds the
addresses (ip netns exec NS python3 cloud_serve.py ...); never on the host.

  --http ADDR:PORT   answers every GET with 200 and the body "ADDR" (repeatable)
  --echo ADDR:PORT   UDP and TCP echo, a stand-in for a DNS server (repeatable)
"""
import argparse
import http.server
import socket
import socketserver
import sys
import threading


def addr(s):
    host, port = s.rsplit(":", 1)
    return host, int(port)


class Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = self.server.server_address[0].encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def udp_echo(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(a)
    while True:
        data, peer = s.recvfrom(2048)
        s.sendto(data, peer)


class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        data = self.request.recv(2048)
        if data:
            self.request.sendall(data)


class TcpEcho(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--http", action="append", default=[], type=addr)
    p.add_argument("--echo", action="append", default=[], type=addr)
    a = p.parse_args()
    threads = []
    for h in a.http:
        threads.append(threading.Thread(target=Server(h, Quiet).serve_forever, daemon=True))
    for e in a.echo:
        threads.append(threading.Thread(target=udp_echo, args=(e,), daemon=True))
        threads.append(threading.Thread(target=TcpEcho(e, Echo).serve_forever, daemon=True))
    for t in threads:
        t.start()
    print("ready", flush=True)
    for t in threads:
        t.join()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except OSError as e:
        print("cloud_serve.py: %s" % e, file=sys.stderr)
        sys.exit(1)
