#!/usr/bin/env python3
"""hostPort helper for tests/integration/test_hostport.sh. Every wait is bounded.

  serve PORT [--bind ADDR]
      answers on TCP and UDP port PORT with the address it saw the client
      come from and its own name (argv NAME via --name), one line; runs
      until killed
  tcp ADDR PORT / udp ADDR PORT
      one connection (1 s to connect) or one datagram (1 s for the answer);
      prints the answer ("NAME FROM") or "no: WHY"; exit status 0 only with
      an answer
  loopback-syn --ifname IF --dst-mac MAC --src IP --port P
      what a tenant that is root in its pod can send: a TCP SYN to
      127.0.0.1:P from the pod's address, written straight onto the pod's
      interface (a packet socket, so the pod's own routing, which keeps
      127/8 for itself, does not stand in the way); prints "answered" when
      a SYN-ACK from 127.0.0.1 comes back within 1 s, else "no answer"
"""
import argparse
import os
import select
import socket
import struct
import sys
import threading
import time

from spoof_send import csum  # the Internet checksum, as the other forged-traffic helper computes it

ETH_P_IP = 0x0800


def serve(args):
    name = args.name.encode()

    def tcp():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((args.bind, args.port))
        s.listen(64)
        while True:
            c, peer = s.accept()
            try:
                c.sendall(name + b" " + peer[0].encode() + b"\n")
            finally:
                c.close()

    threading.Thread(target=tcp, daemon=True).start()
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((args.bind, args.port))
    while True:
        _, peer = u.recvfrom(512)
        u.sendto(name + b" " + peer[0].encode() + b"\n", peer)


def probe(args):
    try:
        if args.cmd == "tcp":
            s = socket.create_connection((args.addr, args.port), timeout=1)
            s.settimeout(1)
            data = s.recv(128)
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(1)
            s.sendto(b"?\n", (args.addr, args.port))
            data = s.recv(128)
    except socket.timeout:
        print("no: timed out")
        return 1
    except OSError as e:
        print("no: " + (os.strerror(e.errno) if e.errno else str(e)))
        return 1
    text = data.decode(errors="replace").strip()
    if not text:
        print("no: closed without an answer")
        return 1
    print(text)
    return 0


def loopback_syn(args):
    src = socket.inet_aton(args.src)
    dst = socket.inet_aton("127.0.0.1")
    sport = 40000 + os.getpid() % 20000
    tcp = struct.pack("!HHIIBBHHH", sport, args.port, 1, 0, 5 << 4, 0x02, 65535, 0, 0)
    pseudo = src + dst + struct.pack("!BBH", 0, socket.IPPROTO_TCP, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 1, 0, 64, socket.IPPROTO_TCP, 0,
                     src, dst)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IP))
    s.bind((args.ifname, ETH_P_IP))
    own = s.getsockname()[4]
    dst_mac = bytes.fromhex(args.dst_mac.replace(":", ""))
    s.send(dst_mac + own + struct.pack("!H", ETH_P_IP) + ip + tcp)
    deadline = time.monotonic() + 1.0
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([s], [], [], left)[0]:
            print("no answer")
            return 1
        frame = s.recv(2048)
        pkt = frame[14:]
        if len(pkt) < 40 or pkt[9] != socket.IPPROTO_TCP or pkt[12:16] != dst:
            continue
        ihl = (pkt[0] & 0x0F) * 4
        sp, dp = struct.unpack("!HH", pkt[ihl:ihl + 4])
        flags = pkt[ihl + 13]
        if sp == args.port and dp == sport and flags & 0x12 == 0x12:
            print("answered")
            return 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    sv = sub.add_parser("serve")
    sv.add_argument("port", type=int)
    sv.add_argument("--bind", default="0.0.0.0")
    sv.add_argument("--name", default="server")
    for kind in ("tcp", "udp"):
        c = sub.add_parser(kind)
        c.add_argument("addr")
        c.add_argument("port", type=int)
    ls = sub.add_parser("loopback-syn")
    ls.add_argument("--ifname", required=True)
    ls.add_argument("--dst-mac", required=True)
    ls.add_argument("--src", required=True)
    ls.add_argument("--port", type=int, required=True)
    args = p.parse_args()
    if args.cmd == "serve":
        serve(args)
        return 0
    if args.cmd == "loopback-syn":
        return loopback_syn(args)
    return probe(args)


if __name__ == "__main__":
    sys.exit(main())
