#!/usr/bin/env python3
"""The internet host's side of tests/bench/budgets_traffic.sh, and its load.

Bounded in time (--seconds) like every helper of the integration tests; run
inside a test network namespace (ip netns exec NS python3 inet_meter.py ...).

  serve  --tcp-port P --udp-port Q --table T --out FILE --ready FILE
         [--interval 0.1] --seconds S
         the internet host: accepts TCP streams on P and UDP datagrams on Q
         and discards them; meanwhile reads the named counters of nftables
         table inet T every --interval seconds (one `nft -j` dump each) and
         appends one line per read to FILE:
             TIME NAME BYTES PACKETS NAME BYTES PACKETS ...
         TIME is the read's midpoint (seconds since the epoch, as bash's
         EPOCHREALTIME). The counters are the exact figures (the kernel's);
         the sockets only make the traffic arrive.
  load   --dst IP --port P (--tcp N | --udp-bps R) [--size S] --seconds S
         [--ready FILE] [--go FILE]
         a pod's demand: N TCP streams sending as fast as they may, or UDP
         datagrams of S payload bytes paced to R bits/s counted on the wire
         (Ethernet frame: S + 8 + 20 + 14 bytes), until S seconds pass.
         With --go (UDP), it writes --ready once started and sends nothing
         until FILE exists (at most 10 s), so that the traffic starts when
         the caller says, not when Python has started.
  nogso  IFNAME
         turns TSO and GSO off on IFNAME (the SIOCETHTOOL ioctl ethtool -K
         uses), so that every TCP segment travels as its own packet: a counter
         that sees packets then counts every frame's headers, as HTB does.

Reading serve's FILE afterwards (rates in bits/s of Ethernet frames: a
counter's IP bytes plus 14 per packet, what HTB's ceil counts):
  stats  --file F --from T0 --to T1 [--names a,b] [--width 1]
         the sum of the named counters (default: all) over [T0, T1]: its mean
         (bytes over the whole interval), and over every window of --width
         seconds starting at a read within it (ending at the first read
         --width later) the p99, max and min; prints
             mean P99 max MAX min MIN windows N
  windows --file F --from T0 --to T1 [--names a,b] [--width 1]
         those windows, one a line: START END BITS_PER_SECOND
  fair   --budget B --demand a=R,b=inf,...
         the max-min fair shares of B for those demands; prints "a=S b=S ..."
  converge --file F --from T0 --to T1 --budget B --demand a=R,... [--tol 0.1]
         [--width 1]
         how long after T0 every named counter's rate is within --tol of its
         fair share in every window that ends from then until T1; prints
             after SECONDS|never  then per name: NAME=RATE/SHARE over the last
         window
"""
import argparse
import ctypes
import fcntl
import json
import os
import selectors
import socket
import struct
import subprocess
import sys
import threading
import time


def ready(path):
    if path:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % os.getpid())
        os.rename(tmp, path)


# ------------------------------------------------------------------ serve
def read_counters(table):
    """{name: (bytes, packets)} of table inet TABLE's named counters."""
    out = subprocess.run(["nft", "-j", "list", "counters", "table", "inet", table],
                         capture_output=True, text=True, timeout=5, check=True).stdout
    got = {}
    for item in json.loads(out).get("nftables", []):
        c = item.get("counter")
        if c and c.get("table") == table:
            got[c["name"]] = (c.get("bytes", 0), c.get("packets", 0))
    return got


def meter(a, stop):
    failed = 0
    with open(a.out, "a", buffering=1) as f:
        nxt = time.time()
        while not stop.is_set():
            t0 = time.time()
            try:
                got = read_counters(a.table)
            except (subprocess.SubprocessError, ValueError, OSError) as e:
                failed += 1
                if failed == 1 or failed % 100 == 0:
                    print("meter: read %d failed: %s" % (failed, e), file=sys.stderr)
                got = None
            t1 = time.time()
            if got is not None:
                f.write("%.6f %s\n" % ((t0 + t1) / 2, " ".join(
                    "%s %d %d" % (n, b, p) for n, (b, p) in sorted(got.items()))))
            nxt += a.interval
            # behind (a slow read): the next read at once, not a burst of them
            nxt = max(nxt, time.time())
            stop.wait(nxt - time.time())


def cmd_serve(a):
    sel = selectors.DefaultSelector()
    lt = socket.socket()
    lt.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lt.bind(("0.0.0.0", a.tcp_port))
    lt.listen(256)
    lt.setblocking(False)
    sel.register(lt, selectors.EVENT_READ, "listen")
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    u.bind(("0.0.0.0", a.udp_port))
    u.setblocking(False)
    sel.register(u, selectors.EVENT_READ, "udp")
    stop = threading.Event()
    th = threading.Thread(target=meter, args=(a, stop), daemon=True)
    th.start()
    ready(a.ready)
    buf = bytearray(1 << 18)
    deadline = time.monotonic() + a.seconds
    while time.monotonic() < deadline:
        for key, _ in sel.select(timeout=min(0.5, max(0.01, deadline - time.monotonic()))):
            s = key.fileobj
            if key.data == "listen":
                try:
                    c, _ = s.accept()
                except OSError:
                    continue
                c.setblocking(False)
                sel.register(c, selectors.EVENT_READ, "tcp")
            elif key.data == "udp":
                for _ in range(64):
                    try:
                        s.recv_into(buf)
                    except BlockingIOError:
                        break
            else:
                try:
                    n = s.recv_into(buf)
                except BlockingIOError:
                    continue
                except OSError:
                    n = 0
                if n == 0:
                    sel.unregister(s)
                    s.close()
    stop.set()
    th.join(2)
    return 0


# ------------------------------------------------------------------- load
def tcp_stream(dst, port, deadline, errors):
    try:
        s = socket.create_connection((dst, port), timeout=3)
    except OSError as e:
        errors.append(str(e))
        return
    # A stop is a stop: a small send buffer leaves little for the kernel to
    # send on once the sender is killed (autotuned, 8 streams hold tens of
    # MB: demand that has moved in the test would flow on for seconds). A
    # reset instead would leave conntrack to call the pod's answers to the
    # host's late ACKs invalid.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32768)
    s.settimeout(1)
    chunk = b"x" * 65536
    try:
        while time.monotonic() < deadline:
            try:
                s.send(chunk)
            except socket.timeout:
                pass
    except OSError as e:
        errors.append(str(e))
    finally:
        s.close()


def cmd_load(a):
    deadline = time.monotonic() + a.seconds
    if a.tcp:
        errors = []
        ths = [threading.Thread(target=tcp_stream, args=(a.dst, a.port, deadline, errors), daemon=True)
               for _ in range(a.tcp)]
        for t in ths:
            t.start()
        ready(a.ready)
        for t in ths:
            t.join(a.seconds + 5)
        if errors:
            print("load: %s" % errors[0], file=sys.stderr)
            return 1
        return 0
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = b"x" * a.size
    frame_bits = (a.size + 8 + 20 + 14) * 8
    per_s = a.udp_bps / frame_bits
    ready(a.ready)
    if a.go:
        wait_until = time.monotonic() + 10
        while not os.path.exists(a.go) and time.monotonic() < wait_until:
            time.sleep(0.001)
        deadline = time.monotonic() + a.seconds
    t0 = time.monotonic()
    sent = 0
    while True:
        now = time.monotonic()
        if now >= deadline:
            break
        due = int((now - t0) * per_s) + 1
        while sent < due:
            try:
                s.sendto(payload, (a.dst, a.port))
            except OSError:
                pass  # a full queue: the datagram is lost, as on a wire
            sent += 1
        time.sleep(min(0.002, max(0.0, deadline - time.monotonic())))
    return 0


# ------------------------------------------------------------------ nogso
SIOCETHTOOL = 0x8946
ETHTOOL_STSO = 0x1f
ETHTOOL_SGSO = 0x24


def cmd_nogso(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for cmd in (ETHTOOL_STSO, ETHTOOL_SGSO):
        val = ctypes.create_string_buffer(struct.pack("II", cmd, 0))
        ifr = struct.pack("16sP", a.ifname.encode(), ctypes.addressof(val))
        fcntl.ioctl(s.fileno(), SIOCETHTOOL, ifr)
    return 0


# ------------------------------------------------------------- analysis
def load_reads(path, names=None):
    """[(time, {name: frame_bytes})] of serve's FILE, in order."""
    reads = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) < 1 or (len(p) - 1) % 3:
                continue
            d = {}
            for i in range(1, len(p), 3):
                d[p[i]] = int(p[i + 1]) + 14 * int(p[i + 2])
            if names:
                d = {n: d.get(n, 0) for n in names}
            reads.append((float(p[0]), d))
    return reads


def windows(reads, t0, t1, width):
    """(start, end, {name: bits/s}) of every window within [t0, t1]."""
    inside = [r for r in reads if t0 <= r[0] <= t1]
    out, j = [], 0
    for i, (ta, da) in enumerate(inside):
        j = max(j, i + 1)
        while j < len(inside) and inside[j][0] < ta + width:
            j += 1
        if j >= len(inside):
            break
        tb, db = inside[j]
        out.append((ta, tb, {n: (db.get(n, 0) - da.get(n, 0)) * 8 / (tb - ta) for n in db}))
    return out


def percentile(v, q):
    v = sorted(v)
    if not v:
        return float("nan")
    k = max(0, min(len(v) - 1, int(-(-q * len(v) // 1)) - 1))
    return v[k]


def cmd_stats(a):
    names = a.names.split(",") if a.names else None
    reads = load_reads(a.file, names)
    inside = [r for r in reads if a.t0 <= r[0] <= a.t1]
    if len(inside) < 2:
        print("mean nan p99 nan max nan min nan windows 0")
        return 1
    tot = lambda d: sum(d.values())
    mean = (tot(inside[-1][1]) - tot(inside[0][1])) * 8 / (inside[-1][0] - inside[0][0])
    w = [tot(r) for _, _, r in windows(reads, a.t0, a.t1, a.width)]
    print("mean %.0f p99 %.0f max %.0f min %.0f windows %d" % (
        mean, percentile(w, 0.99), max(w) if w else float("nan"), min(w) if w else float("nan"), len(w)))
    return 0


def cmd_windows(a):
    names = a.names.split(",") if a.names else None
    for ta, tb, r in windows(load_reads(a.file, names), a.t0, a.t1, a.width):
        print("%.6f %.6f %.0f" % (ta, tb, sum(r.values())))
    return 0


def parse_demand(spec):
    d = {}
    for item in spec.split(","):
        n, v = item.split("=")
        d[n] = float("inf") if v == "inf" else float(v)
    return d


def fair_shares(budget, demand):
    share, left, todo = {}, budget, dict(demand)
    while todo:
        equal = left / len(todo)
        small = {n: v for n, v in todo.items() if v <= equal}
        if not small:
            for n in todo:
                share[n] = equal
            break
        for n, v in small.items():
            share[n] = v
            left -= v
            del todo[n]
    return share


def cmd_fair(a):
    s = fair_shares(a.budget, parse_demand(a.demand))
    print(" ".join("%s=%.0f" % (n, s[n]) for n in sorted(s)))
    return 0


def cmd_converge(a):
    share = fair_shares(a.budget, parse_demand(a.demand))
    w = windows(load_reads(a.file, sorted(share)), a.t0, a.t1, a.width)
    ok = [all(abs(r[n] - share[n]) <= a.tol * share[n] for n in share) for _, _, r in w]
    after = None
    for i in range(len(w) - 1, -1, -1):
        if not ok[i]:
            break
        after = w[i][1] - a.t0
    last = w[-1][2] if w else {}
    print("after %s %s" % ("never" if after is None else "%.2f" % after, " ".join(
        "%s=%.0f/%.0f" % (n, last.get(n, float("nan")), share[n]) for n in sorted(share))))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("serve")
    q.add_argument("--tcp-port", type=int, required=True)
    q.add_argument("--udp-port", type=int, required=True)
    q.add_argument("--table", required=True)
    q.add_argument("--out", required=True)
    q.add_argument("--ready")
    q.add_argument("--interval", type=float, default=0.1)
    q.add_argument("--seconds", type=float, required=True)
    q = sub.add_parser("load")
    q.add_argument("--dst", required=True)
    q.add_argument("--port", type=int, required=True)
    q.add_argument("--tcp", type=int, default=0)
    q.add_argument("--udp-bps", type=float, default=0)
    q.add_argument("--size", type=int, default=1400)
    q.add_argument("--seconds", type=float, required=True)
    q.add_argument("--ready")
    q.add_argument("--go")
    q = sub.add_parser("nogso")
    q.add_argument("ifname")
    for name in ("stats", "windows", "converge"):
        q = sub.add_parser(name)
        q.add_argument("--file", required=True)
        q.add_argument("--from", dest="t0", type=float, required=True)
        q.add_argument("--to", dest="t1", type=float, required=True)
        q.add_argument("--width", type=float, default=1.0)
        if name in ("stats", "windows"):
            q.add_argument("--names")
        else:
            q.add_argument("--budget", type=float, required=True)
            q.add_argument("--demand", required=True)
            q.add_argument("--tol", type=float, default=0.1)
    q = sub.add_parser("fair")
    q.add_argument("--budget", type=float, required=True)
    q.add_argument("--demand", required=True)
    a = p.parse_args()
    if a.cmd == "load" and (a.tcp > 0) == (a.udp_bps > 0):
        p.error("load: one of --tcp N or --udp-bps R")
    if getattr(a, "seconds", 1) > 600:
        p.error("--seconds: at most 600")
    return {"serve": cmd_serve, "load": cmd_load, "nogso": cmd_nogso, "stats": cmd_stats, "windows": cmd_windows,
            "fair": cmd_fair, "converge": cmd_converge}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
