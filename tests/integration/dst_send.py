#!/usr/bin/env python3
"""Traffic helper for tests/integration/test_destinations.sh.

Sends UDP datagrams of a known size to many destinations, so that bytes per
destination prefix can be checked to the byte. Bounded in count and time.
Run it inside a test network namespace (ip netns exec NS python3 dst_send.py ...).

  spray --first IP --count N --size S --port P [--skip IP,...]
        one datagram to each of N consecutive addresses from IP on (those in
        --skip left out, and not counted)
  send  --dst IP[,IP...] --count N[,N...] --size S --port P [--src IP] [--rate R]
        N datagrams to each destination (counts pair with destinations), from
        --src when given (an address of this namespace), at most R a second
        (round robin over the destinations when paced)
Prints one line: the number of datagrams sent. Exit 1 when a send failed.
"""
import argparse
import ipaddress
import socket
import sys
import time


def spray(a):
    first = int(ipaddress.IPv4Address(a.first))
    skip = {int(ipaddress.IPv4Address(x)) for x in a.skip.split(",") if x}
    payload = b"s" * a.size
    sent = 0
    deadline = time.monotonic() + a.timeout
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        addr = first
        while sent < a.count:
            if time.monotonic() > deadline:
                print(sent)
                return 1
            if addr not in skip:
                s.sendto(payload, (str(ipaddress.IPv4Address(addr)), a.port))
                sent += 1
            addr += 1
    print(sent)
    return 0


def send(a):
    dsts = a.dst.split(",")
    counts = [int(x) for x in a.count.split(",")]
    if len(counts) == 1:
        counts *= len(dsts)
    if len(counts) != len(dsts):
        print("--count: one per destination", file=sys.stderr)
        return 2
    payload = b"d" * a.size
    sent = 0
    deadline = time.monotonic() + a.timeout
    if a.rate:
        # round robin: every destination's traffic spread over the whole run
        order = []
        left = list(counts)
        while any(left):
            for i, n in enumerate(left):
                if n:
                    order.append(dsts[i])
                    left[i] -= 1
    else:
        order = [d for d, n in zip(dsts, counts) for _ in range(n)]
    start = time.monotonic()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        if a.src:
            s.bind((a.src, 0))
        for dst in order:
            if time.monotonic() > deadline:
                print(sent)
                return 1
            s.sendto(payload, (dst, a.port))
            sent += 1
            if a.rate:
                ahead = start + sent / a.rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            elif sent % 64 == 0:
                # no burst larger than the receiver's queue
                time.sleep(0.001)
    print(sent)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    sp = sub.add_parser("spray")
    sp.add_argument("--first", required=True)
    sp.add_argument("--count", type=int, required=True)
    sp.add_argument("--skip", default="")
    sd = sub.add_parser("send")
    sd.add_argument("--dst", required=True)
    sd.add_argument("--count", required=True)
    sd.add_argument("--src")
    sd.add_argument("--rate", type=float, default=0)
    for q in (sp, sd):
        q.add_argument("--size", type=int, required=True)
        q.add_argument("--port", type=int, default=9000)
        q.add_argument("--timeout", type=float, default=60)
    a = p.parse_args()
    if a.mode == "spray" and not 0 < a.count <= 200000:
        print("--count: 1 to 200000", file=sys.stderr)
        return 2
    return spray(a) if a.mode == "spray" else send(a)


if __name__ == "__main__":
    sys.exit(main())
