#!/usr/bin/env python3
"""Forged-traffic helper for tests/integration/test_antispoof.sh.

Sends what a tenant with CAP_NET_RAW can send from a pod, a bounded number
of UDP datagrams, and prints how many went out. Run it inside the pod's
network namespace (ip netns exec NS python3 spoof_send.py ...).

  ipv4 --src IP --dst IP --port P --count N --size S
       IPv4 with any source: a raw socket with IP_HDRINCL, routed by the
       pod's own routes (default via 169.254.1.1). The kernel fills in the
       IP checksum and length; the UDP checksum is 0 (none, valid in IPv4).
  ipv4 ... --sport P: the source port (default 40000), to forge a datagram
       of another pod's connection
  arp --ifname IF --target IP --sender-net A.B --count N
       ARP requests "who-has TARGET tell A.B.x.y", broadcast, a new sender
       address each (x.y counting up from 0.1), from the interface's MAC
  tcp --src IP --dst IP --port P --flags SF --count N
       TCP segments with the given flags (S, F, R, A, P, U: any mix, such as
       SF for SYN|FIN, which conntrack calls invalid), each from its own
       source port (40000 up) so that each is a new 4-tuple; checksummed.
  ipv6 --ifname IF --dst-mac MAC --src IP6 --dst IP6 --port P --count N --size S
       IPv6 frames written straight onto the pod's interface (a packet
       socket), so they go out even with no IPv6 address on it; the UDP
       checksum is computed (IPv6 requires one).
"""
import argparse
import ipaddress
import socket
import struct
import sys

ETH_P_IPV6 = 0x86DD
ETH_P_ARP = 0x0806


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def cmd_ipv4(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
    src, dst = socket.inet_aton(a.src), socket.inet_aton(a.dst)
    payload = b"s" * a.size
    udp = struct.pack("!HHHH", a.sport, a.port, 8 + len(payload), 0) + payload
    for i in range(a.count):
        # version/IHL, TOS, total length, id, flags/fragment, TTL, protocol, checksum
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), (i + 1) & 0xFFFF, 0, 64,
                         socket.IPPROTO_UDP, 0, src, dst)
        s.sendto(ip + udp, (a.dst, 0))
    print(a.count)
    return 0


def cmd_tcp(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
    src, dst = socket.inet_aton(a.src), socket.inet_aton(a.dst)
    bits = {"F": 0x01, "S": 0x02, "R": 0x04, "P": 0x08, "A": 0x10, "U": 0x20}
    flags = 0
    for f in a.flags:
        flags |= bits[f]
    for i in range(a.count):
        sport = 40000 + i
        tcp = struct.pack("!HHIIBBHHH", sport, a.port, 1000 + i, 0, 5 << 4, flags, 64240, 0, 0)
        pseudo = src + dst + struct.pack("!BBH", 0, socket.IPPROTO_TCP, len(tcp))
        tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), (i + 1) & 0xFFFF, 0, 64,
                         socket.IPPROTO_TCP, 0, src, dst)
        s.sendto(ip + tcp, (a.dst, 0))
    print(a.count)
    return 0


def cmd_arp(a):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ARP))
    s.bind((a.ifname, ETH_P_ARP))
    mine = s.getsockname()[4]
    tpa = socket.inet_aton(a.target)
    net = [int(x) for x in a.sender_net.split(".")]
    for i in range(1, a.count + 1):
        spa = bytes(net + [i >> 8 & 0xFF, i & 0xFF])
        # htype, ptype, hlen, plen, op (request), sha, spa, tha, tpa
        arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, mine, spa, b"\0" * 6, tpa)
        s.send(b"\xff" * 6 + mine + struct.pack("!H", ETH_P_ARP) + arp)
    print(a.count)
    return 0


def cmd_ipv6(a):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IPV6))
    s.bind((a.ifname, ETH_P_IPV6))
    mine = s.getsockname()[4]
    dmac = bytes(int(x, 16) for x in a.dst_mac.split(":"))
    src = ipaddress.IPv6Address(a.src).packed
    dst = ipaddress.IPv6Address(a.dst).packed
    payload = b"6" * a.size
    ulen = 8 + len(payload)
    pseudo = src + dst + struct.pack("!I3xB", ulen, socket.IPPROTO_UDP)
    udp = struct.pack("!HHHH", 40000, a.port, ulen, 0) + payload
    c = csum(pseudo + udp) or 0xFFFF
    udp = udp[:6] + struct.pack("!H", c) + udp[8:]
    ip6 = struct.pack("!IHBB16s16s", 6 << 28, ulen, socket.IPPROTO_UDP, 64, src, dst)
    frame = dmac + mine + struct.pack("!H", ETH_P_IPV6) + ip6 + udp
    for _ in range(a.count):
        s.send(frame)
    print(a.count)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("arp")
    q.add_argument("--ifname", required=True)
    q.add_argument("--target", required=True)
    q.add_argument("--sender-net", required=True)
    q.add_argument("--count", type=int, required=True)
    q.set_defaults(size=0)
    q = sub.add_parser("tcp")
    q.add_argument("--src", required=True)
    q.add_argument("--dst", required=True)
    q.add_argument("--port", type=int, required=True)
    q.add_argument("--flags", required=True, help="any of S F R A P U, e.g. SF")
    q.add_argument("--count", type=int, required=True)
    q.set_defaults(size=0)
    for name in ("ipv4", "ipv6"):
        q = sub.add_parser(name)
        q.add_argument("--sport", type=int, default=40000)
        q.add_argument("--src", required=True)
        q.add_argument("--dst", required=True)
        q.add_argument("--port", type=int, required=True)
        q.add_argument("--count", type=int, required=True)
        q.add_argument("--size", type=int, required=True)
        if name == "ipv6":
            q.add_argument("--ifname", required=True)
            q.add_argument("--dst-mac", required=True)
    a = p.parse_args()
    if not 0 <= a.size <= 1400:
        p.error("--size out of range (0..1400)")
    if not 0 <= a.count <= 10000:
        p.error("--count out of range (0..10000)")
    if a.cmd == "tcp" and (not a.flags or set(a.flags) - set("SFRAPU")):
        p.error("--flags: letters of S F R A P U")
    return {"ipv4": cmd_ipv4, "ipv6": cmd_ipv6, "arp": cmd_arp, "tcp": cmd_tcp}[a.cmd](a)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except OSError as e:
        print("spoof_send.py: %s" % e, file=sys.stderr)
        sys.exit(1)
