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
         [--ready FILE] [--go FILE] [--retry]
         a pod's demand: N TCP streams sending as fast as they may, or UDP
         datagrams of S payload bytes paced to R bits/s counted on the wire
         (Ethernet frame: S + 8 + 20 + 14 bytes), until S seconds pass.
         With --go (UDP), it writes --ready once started and sends nothing
         until FILE exists (at most 10 s), so that the traffic starts when
         the caller says, not when Python has started. With --retry (TCP),
         a stream that cannot connect (the pod has no network yet) tries
         again every 20 ms until S seconds pass: the pod sends the instant
         its network exists, as a workload started before its ADD would.
  nogso  IFNAME
         turns TSO and GSO off on IFNAME (the SIOCETHTOOL ioctl ethtool -K
         uses), so that every TCP segment travels as its own packet: a counter
         that sees packets then counts every frame's headers, as HTB does.

  sample --nodes FILE --out FILE --seconds S [--interval 0.5]
         [--alloc NETNS=URL] [--netns-dir /var/run/netns]
         the test's view of the budget's control plane, beside the meter's
         view of the traffic: every --interval seconds, one line appended to
         --out, "TIME KEY=VALUE ...": the allocator's granted, committed,
         demand and usage for datasets (a.granted ...; its /metrics fetched
         from inside NETNS) and, for every node of FILE (re-read each time;
         lines "I NETNS URL STORE": the agent's /metrics URL, the node's
         state.json), the agent's state, grant and ceil (nI.st nI.g nI.c) and
         the namespace class's ceil in the kernel (nI.tc, as tc prints it).
         One process: it enters each network namespace (setns) for its
         request and comes back.

Reading serve's FILE afterwards (rates in bits/s of Ethernet frames: a
counter's IP bytes plus 14 per packet, what HTB's ceil counts):
  stats  --file F --from T0 --to T1 [--names a,b] [--width 1]
         the sum of the named counters (default: all) over [T0, T1]: its mean
         (bytes over the whole interval), and over every window of --width
         seconds starting at a read within it (ending at the first read
         --width later) the p99, max and min; prints
             mean P99 max MAX min MIN windows N
  windows --file F --from T0 --to T1 [--names a,b] [--width 1] [--each]
         those windows, one a line: START END BITS_PER_SECOND, and with
         --each then NAME=BITS_PER_SECOND of every named counter
  timeline --file F --from T0 --to T1 [--samples S] [--names a,b] [--step 1]
         [--width 1]
         one line every --step seconds: the window's end (seconds after T0),
         the aggregate and every named counter's rate (Mbit/s; the others
         summed as "rest"), beside the last line of S (the test's samples of
         the agents' and the allocator's metrics: "TIME KEY=VALUE ...", keys
         a.granted a.committed a.demand a.usage a.nodes (bytes/s) and per node
         nI.st nI.g nI.c (state, grant, ceil metric) nI.tc (class ceil)) read
         before the window's end
  fair   --budget B --demand a=R,b=inf,...
         the max-min fair shares of B for those demands; prints "a=S b=S ..."
  converge --file F --from T0 --to T1 --budget B --demand a=R,... [--tol 0.1]
         [--width 1] [--only a,b]
         how long after T0 every named counter's rate (with --only, every
         one of those: the shares are still those of all the demands) is
         within --tol of its fair share in every window that ends from then
         until T1; prints
             after SECONDS|never  then per name: NAME=RATE/SHARE over the last
         window
"""
import argparse
import ctypes
import fcntl
import http.client
import json
import os
import selectors
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request


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
def tcp_stream(dst, port, deadline, errors, retry=False):
    while True:
        try:
            s = socket.create_connection((dst, port), timeout=3)
            break
        except OSError as e:
            if not retry or time.monotonic() >= deadline:
                errors.append(str(e))
                return
            time.sleep(0.02)
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
        ths = [threading.Thread(target=tcp_stream, args=(a.dst, a.port, deadline, errors, a.retry), daemon=True)
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


# ----------------------------------------------------------------- sample
CLONE_NEWNET = 0x40000000
DS = '{namespace="datasets",direction="egress"}'


def metrics_of(text):
    m = {}
    for line in text.splitlines():
        p = line.split()
        if len(p) >= 2 and not line.startswith("#"):
            m[p[0]] = p[1]
    return m


def cmd_sample(a):
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    fds = {}

    def enter(fd):
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns")

    def get(ns, url):
        try:
            if ns not in fds:
                fds[ns] = os.open(os.path.join(a.netns_dir, ns), os.O_RDONLY)
            enter(fds[ns])
            try:
                with urllib.request.urlopen(url, timeout=a.timeout) as r:
                    return r.read().decode(errors="replace")
            finally:
                enter(home)
        except (OSError, ValueError, http.client.HTTPException):
            return ""

    alloc = a.alloc.split("=", 1) if a.alloc else None
    deadline = time.monotonic() + a.seconds
    with open(a.out, "a", buffering=1) as out:
        while time.monotonic() < deadline:
            t = time.time()
            parts = ["%.6f" % t]
            if alloc:
                m = metrics_of(get(alloc[0], alloc[1]))
                for k in ("granted", "committed", "demand", "usage"):
                    parts.append("a.%s=%s" % (k, m.get("tollgate_allocator_%s_bytes_per_second%s" % (k, DS), "?")))
            try:
                with open(a.nodes) as f:
                    nodes = [line.split() for line in f if len(line.split()) == 4]
            except OSError:
                nodes = []
            for i, ns, url, store in nodes:
                m = metrics_of(get(ns, url))
                st = "none"
                for s in ("granted", "lease-expired", "fallback"):
                    if m.get('tollgate_budget_state{namespace="datasets",direction="egress",state="%s"}' % s) == "1":
                        st = s
                tc = "?"
                try:
                    with open(store) as f:
                        cls = [x.get("shaping", {}).get("namespaceClass", 0) for x in json.load(f).get("attachments", [])
                               if x.get("namespace") == "datasets"]
                    if cls and cls[0]:
                        o = subprocess.run(["tc", "-n", ns, "class", "show", "dev", "tollgate-inet", "classid",
                                            "1:%x" % cls[0]], capture_output=True, text=True, timeout=2).stdout.split()
                        if "ceil" in o[:-1]:
                            tc = o[o.index("ceil") + 1]
                except (OSError, ValueError, subprocess.SubprocessError):
                    pass
                parts.append("n%s.st=%s n%s.g=%s n%s.c=%s n%s.tc=%s" % (
                    i, st, i, m.get("tollgate_budget_grant_bytes_per_second" + DS, "?"),
                    i, m.get("tollgate_budget_ceil_bytes_per_second" + DS, "?"), i, tc))
            out.write(" ".join(parts) + "\n")
            time.sleep(max(0.0, t + a.interval - time.time()))
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
        each = "".join(" %s=%.0f" % (n, r[n]) for n in sorted(r)) if a.each else ""
        print("%.6f %.6f %.0f%s" % (ta, tb, sum(r.values()), each))
    return 0


def mb(v):
    try:
        return "%.1f" % (float(v) * 8 / 1e6)
    except (TypeError, ValueError):
        return "?"


def node_key(n):
    return (0, int(n[1:])) if n[1:].isdigit() else (1, n)


STATE = {"granted": "G", "lease-expired": "X", "fallback": "F", "none": "-"}


def cmd_timeline(a):
    names = a.names.split(",") if a.names else None
    samples = []
    if a.samples and os.path.exists(a.samples):
        with open(a.samples) as f:
            for line in f:
                p = line.split()
                try:
                    t = float(p[0])
                except (ValueError, IndexError):
                    continue
                samples.append((t, dict(x.split("=", 1) for x in p[1:] if "=" in x)))
    print("(t s after T0: aggregate Mbit/s; allocator granted/committed/demand/usage Mbit/s; "
          "node rate Mbit/s [state G granted, X lease-expired, F fallback, - none; grant/ceil metric Mbit/s; class ceil])")
    nxt, j, last = a.t0, 0, {}
    for ta, tb, r in windows(load_reads(a.file), a.t0, a.t1, a.width):
        if ta < nxt:
            continue
        nxt = ta + a.step
        while j < len(samples) and samples[j][0] <= tb:
            last = samples[j][1]
            j += 1
        parts = ["%+6.1f %6.1f" % (tb - a.t0, sum(v for n, v in r.items() if n != "other") / 1e6)]
        if last:
            parts.append("alloc %s/%s/%s/%s" % tuple(mb(last.get("a." + k)) for k in
                                                  ("granted", "committed", "demand", "usage")))
        rest = 0.0
        for n in sorted(r, key=node_key):
            if n == "other":
                continue
            if names and n not in names:
                rest += r[n]
                continue
            st = last.get(n + ".st")
            info = "" if st is None else " [%s %s/%s %s]" % (
                STATE.get(st, st), mb(last.get(n + ".g")), mb(last.get(n + ".c")), last.get(n + ".tc", "?"))
            parts.append("%s %.1f%s" % (n, r[n] / 1e6, info))
        if names:
            parts.append("rest %.1f" % (rest / 1e6))
        print(" | ".join(parts))
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
    check = a.only.split(",") if a.only else sorted(share)
    ok = [all(abs(r[n] - share[n]) <= a.tol * share[n] for n in check) for _, _, r in w]
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
    q.add_argument("--retry", action="store_true")
    q = sub.add_parser("sample")
    q.add_argument("--nodes", required=True)
    q.add_argument("--out", required=True)
    q.add_argument("--seconds", type=float, required=True)
    q.add_argument("--interval", type=float, default=0.5)
    q.add_argument("--timeout", type=float, default=0.3)
    q.add_argument("--alloc")
    q.add_argument("--netns-dir", default="/var/run/netns")
    q = sub.add_parser("nogso")
    q.add_argument("ifname")
    for name in ("stats", "windows", "converge", "timeline"):
        q = sub.add_parser(name)
        q.add_argument("--file", required=True)
        q.add_argument("--from", dest="t0", type=float, required=True)
        q.add_argument("--to", dest="t1", type=float, required=True)
        q.add_argument("--width", type=float, default=1.0)
        if name == "timeline":
            q.add_argument("--names")
            q.add_argument("--samples")
            q.add_argument("--step", type=float, default=1.0)
        elif name in ("stats", "windows"):
            q.add_argument("--names")
            if name == "windows":
                q.add_argument("--each", action="store_true")
        else:
            q.add_argument("--budget", type=float, required=True)
            q.add_argument("--demand", required=True)
            q.add_argument("--tol", type=float, default=0.1)
            q.add_argument("--only")
    q = sub.add_parser("fair")
    q.add_argument("--budget", type=float, required=True)
    q.add_argument("--demand", required=True)
    a = p.parse_args()
    if a.cmd == "load" and (a.tcp > 0) == (a.udp_bps > 0):
        p.error("load: one of --tcp N or --udp-bps R")
    if getattr(a, "seconds", 1) > 1200:
        p.error("--seconds: at most 1200")
    return {"serve": cmd_serve, "load": cmd_load, "nogso": cmd_nogso, "stats": cmd_stats, "windows": cmd_windows,
            "fair": cmd_fair, "converge": cmd_converge, "sample": cmd_sample,
            "timeline": cmd_timeline}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
