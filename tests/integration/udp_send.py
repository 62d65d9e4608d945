#!/usr/bin/env python3
"""Traffic helper for tests/integration/test_accounting.sh.

Sends and receives an exact, known amount of traffic so that byte counters can
be checked to the byte. Every mode is bounded in time (--timeout) and size.
Run it inside a test network namespace (ip netns exec NS python3 udp_send.py ...).

  send     --dst IP --port P --count N --size S [--expect M] [--timeout T]
           send N UDP datagrams of S payload bytes; with --expect, then wait
           for M datagrams back on the same socket (exit 1 if fewer arrive)
  sink     --port P [--bind IP] [--tcp] --ready FILE [--timeout T]
           discard everything received (UDP datagrams, or TCP streams read to
           EOF and closed); never answers. Writes FILE once bound.
  reply    --port P --recv N --count M --size S --ready FILE [--timeout T]
           receive N datagrams, then send M datagrams of S bytes back to the
           sender's address (through its NAT), then exit
  tcp-send --dst IP --port P --bytes B [--timeout T]
           connect, send B bytes, half-close, wait for the peer to close
  stream   --dst IP --port P [--sport S] --interval MS --timeout T
           one datagram every MS milliseconds from one socket (source port
           S), until T seconds have passed: a client that keeps sending
  answer   --port P --interval MS --ready FILE --timeout T
           wait for one datagram, then send one every MS milliseconds back
           to its sender's address (through its NAT), until T seconds have passed
  count    --port P [--bind IP] --ready FILE --timeout T
           count the datagrams received for T seconds
Prints one line: the number of datagrams/bytes moved.
"""
import argparse
import os
import socket
import sys
import time


def ready(path):
    if path:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % os.getpid())
        os.rename(tmp, path)


def deadline_left(deadline):
    return max(0.01, deadline - time.monotonic())


def cmd_send(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = b"x" * a.size
    for _ in range(a.count):
        s.sendto(payload, (a.dst, a.port))
    got = 0
    if a.expect:
        deadline = time.monotonic() + a.timeout
        while got < a.expect and time.monotonic() < deadline:
            s.settimeout(deadline_left(deadline))
            try:
                s.recvfrom(65536)
            except socket.timeout:
                break
            got += 1
        print(got)
        return 0 if got == a.expect else 1
    print(a.count)
    return 0


def cmd_sink(a):
    deadline = time.monotonic() + a.timeout
    if a.tcp:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((a.bind, a.port))
        s.listen(8)
        ready(a.ready)
        while time.monotonic() < deadline:
            s.settimeout(deadline_left(deadline))
            try:
                c, _ = s.accept()
            except socket.timeout:
                break
            c.settimeout(deadline_left(deadline))
            n = 0
            try:
                while True:
                    b = c.recv(1 << 16)
                    if not b:
                        break
                    n += len(b)
            except socket.timeout:
                pass
            c.close()
            sys.stdout.write("%d\n" % n)
            sys.stdout.flush()
        return 0
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    s.bind((a.bind, a.port))
    ready(a.ready)
    while time.monotonic() < deadline:
        s.settimeout(deadline_left(deadline))
        try:
            s.recvfrom(65536)
        except socket.timeout:
            break
    return 0


def cmd_reply(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    s.bind((a.bind, a.port))
    ready(a.ready)
    deadline = time.monotonic() + a.timeout
    got, peer = 0, None
    while got < a.recv and time.monotonic() < deadline:
        s.settimeout(deadline_left(deadline))
        try:
            _, peer = s.recvfrom(65536)
        except socket.timeout:
            break
        got += 1
    if got < a.recv or peer is None:
        print("received %d of %d" % (got, a.recv), file=sys.stderr)
        return 1
    payload = b"y" * a.size
    for _ in range(a.count):
        s.sendto(payload, peer)
    print("%s:%d" % peer)
    return 0


def cmd_tcp_send(a):
    s = socket.create_connection((a.dst, a.port), timeout=a.timeout)
    s.settimeout(a.timeout)
    chunk = b"z" * 65536
    left = a.bytes
    while left > 0:
        n = min(left, len(chunk))
        s.sendall(chunk[:n])
        left -= n
    s.shutdown(socket.SHUT_WR)
    while s.recv(4096):
        pass
    s.close()
    print(a.bytes)
    return 0


def cmd_stream(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if a.sport:
        s.bind(("0.0.0.0", a.sport))
    deadline = time.monotonic() + a.timeout
    n = 0
    while time.monotonic() < deadline:
        try:
            s.sendto(b"s" * 64, (a.dst, a.port))
            n += 1
        except OSError:
            pass  # an ICMP error from an earlier datagram: keep sending
        time.sleep(a.interval / 1000.0)
    print(n)
    return 0


def cmd_answer(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((a.bind, a.port))
    ready(a.ready)
    deadline = time.monotonic() + a.timeout
    s.settimeout(deadline_left(deadline))
    try:
        _, peer = s.recvfrom(65536)
    except socket.timeout:
        print("no datagram came", file=sys.stderr)
        return 1
    n = 0
    while time.monotonic() < deadline:
        try:
            s.sendto(b"a" * 64, peer)
            n += 1
        except OSError:
            pass
        time.sleep(a.interval / 1000.0)
    print(n)
    return 0


def cmd_count(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((a.bind, a.port))
    ready(a.ready)
    deadline = time.monotonic() + a.timeout
    n = 0
    while time.monotonic() < deadline:
        s.settimeout(deadline_left(deadline))
        try:
            s.recvfrom(65536)
        except socket.timeout:
            break
        n += 1
    print(n)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("send", "sink", "reply", "tcp-send", "stream", "answer", "count"):
        q = sub.add_parser(name)
        q.add_argument("--port", type=int, required=True)
        q.add_argument("--timeout", type=float, default=10.0)
        if name in ("stream", "answer"):
            q.add_argument("--interval", type=float, required=True)
        if name == "stream":
            q.add_argument("--sport", type=int, default=0)
        if name in ("send", "tcp-send", "stream"):
            q.add_argument("--dst", required=True)
        else:
            q.add_argument("--bind", default="0.0.0.0")
            q.add_argument("--ready", default="")
        if name in ("send", "reply"):
            q.add_argument("--count", type=int, required=True)
            q.add_argument("--size", type=int, required=True)
        if name == "send":
            q.add_argument("--expect", type=int, default=0)
        if name == "reply":
            q.add_argument("--recv", type=int, required=True)
        if name == "sink":
            q.add_argument("--tcp", action="store_true")
        if name == "tcp-send":
            q.add_argument("--bytes", type=int, required=True)
    a = p.parse_args()
    if getattr(a, "size", 0) and not 0 <= a.size <= 65507:
        p.error("--size out of range")
    if getattr(a, "count", 0) and not 0 <= a.count <= 100000:
        p.error("--count out of range")
    if getattr(a, "interval", 1) < 1 or a.timeout > 600:
        p.error("--interval below 1 ms or --timeout above 600 s")
    return {"send": cmd_send, "sink": cmd_sink, "reply": cmd_reply, "tcp-send": cmd_tcp_send,
            "stream": cmd_stream, "answer": cmd_answer, "count": cmd_count}[a.cmd](a)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, socket.timeout) as e:
        print("udp_send.py: %s" % e, file=sys.stderr)
        sys.exit(1)
