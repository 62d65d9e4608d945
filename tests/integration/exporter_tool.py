#!/usr/bin/env python3
"""Client-side helper for tests/integration/test_exporter.sh and
tests/bench/bench_exporter.sh. Run it inside the test's node namespace
(ip netns exec NODE python3 exporter_tool.py ...); it only ever talks to the
address given with --host (127.0.0.1 in the tests) and to test namespaces.
Every mode is bounded in time. Results are printed as one JSON object.

  sink     --port P --ready FILE [--timeout T]     discard UDP datagrams
  send     --dst IP --port P --count N --size S     send N UDP datagrams of S bytes
  parse    [--tsv] FILE                             /metrics text -> {"name{labels}": value}
  compare  --metrics FILE --nft FILE [--state FILE] /metrics vs `nft -j list counters`
  probe                                             one request per HTTP case (methods, paths,
                                                    HEAD, 100 KB header, ...)
  garbage  [--timeout T]                            garbage request lines, each on its own
                                                    connection, all at once
  robust   --pid PID [--seconds S]                  200 concurrent requests and slow clients
                                                    while scraping and sampling VmRSS
  hold     --pid PID [--conns N] [--src IP]         N idle connections held open while scraping
  mix      --rounds R --scrapes S [--cmd NAME=CMD]  benchmark: R rounds of S keep-alive and S
                                                    new-connection scrapes (alternating), then
                                                    each CMD once (spawn to exit)
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time

A = None  # parsed arguments


def out(obj):
    print(json.dumps(obj, sort_keys=True))


# ------------------------------------------------------------------ HTTP
def http(method, path, host=None, port=None, headers=None, raw=None, timeout=5.0, src=None,
         read_body=True):
    """One request on a fresh connection (Connection: close). Returns a dict
    {status, headers (lower-case names), body (bytes), secs} or {error, secs}."""
    host = host or A.host
    port = port or A.port
    t0 = time.monotonic()
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(timeout)
        if src:
            s.bind((src, 0))
        s.connect((host, port))
        if raw is None:
            h = "%s %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n" % (method, path, host, port)
            for k, v in (headers or {}).items():
                h += "%s: %s\r\n" % (k, v)
            raw = (h + "\r\n").encode()
        s.sendall(raw)
        data = b""
        while True:
            b = s.recv(1 << 16)
            if not b:
                break
            data += b
            if not read_body and b"\r\n\r\n" in data:
                break
        s.close()
    except (OSError, socket.timeout) as e:
        return {"error": "%s: %s" % (type(e).__name__, e), "secs": time.monotonic() - t0}
    secs = time.monotonic() - t0
    if not data:
        return {"error": "closed without a response", "secs": secs}
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    m = re.match(r"HTTP/1\.[01] (\d{3})", lines[0])
    if not m:
        return {"error": "bad status line %r" % lines[0][:80], "secs": secs}
    hdrs = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return {"status": int(m.group(1)), "headers": hdrs, "body": body, "secs": secs}


def summary(r):
    """JSON-friendly form of an http() result."""
    if "error" in r:
        return {"error": r["error"], "secs": round(r["secs"], 4)}
    return {"status": r["status"], "headers": r["headers"], "body_len": len(r["body"]),
            "body_head": r["body"][:200].decode("utf-8", "replace"), "secs": round(r["secs"], 4)}


class Watcher(threading.Thread):
    """Scrapes /metrics every `interval` s until stopped; records latency and failures."""

    def __init__(self, interval=0.1, limit=1.0, src=None):
        super().__init__(daemon=True)
        self.interval, self.limit, self.src = interval, limit, src
        self.stop_ev = threading.Event()
        self.lat, self.fail = [], []

    def run(self):
        while not self.stop_ev.is_set():
            r = http("GET", "/metrics", timeout=self.limit + 1.0, src=self.src)
            if "error" in r or r["status"] != 200:
                self.fail.append(r.get("error") or "status %d" % r["status"])
                self.lat.append(r["secs"])
            else:
                self.lat.append(r["secs"])
            self.stop_ev.wait(self.interval)

    def result(self):
        slow = [x for x in self.lat if x > self.limit]
        return {"scrapes": len(self.lat), "failures": self.fail[:10], "n_failures": len(self.fail),
                "max_secs": round(max(self.lat), 4) if self.lat else None,
                "over_limit": len(slow)}


class RssSampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.max_kb, self.alive = pid, 0, True
        self.stop_ev = threading.Event()

    def run(self):
        while not self.stop_ev.is_set():
            kb = vm(self.pid, "VmRSS")
            if kb is None:
                self.alive = False
                return
            self.max_kb = max(self.max_kb, kb)
            self.stop_ev.wait(0.05)


def vm(pid, key):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


# ------------------------------------------------------------------ modes
def cmd_sink(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    s.bind(("0.0.0.0", a.port))
    tmp = a.ready + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(tmp, a.ready)
    deadline = time.monotonic() + a.timeout
    n = 0
    while time.monotonic() < deadline:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            s.recvfrom(65536)
            n += 1
        except socket.timeout:
            break
    return 0


def cmd_send(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = b"x" * a.size
    for _ in range(a.count):
        s.sendto(payload, (a.dst, a.port))
    out({"sent": a.count, "ip_bytes": a.count * (a.size + 28)})
    return 0


LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """{(name, frozenset(labels)): float} of every sample line."""
    res = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        if not m:
            raise ValueError("unparsable line %r" % line[:120])
        labels = {}
        for k, v in LABEL.findall(m.group(3) or ""):
            labels[k] = v.replace('\\n', '\n').replace('\\"', '"').replace('\\\\', '\\')
        res[(m.group(1), frozenset(labels.items()))] = float(m.group(4))
    return res


def key_str(k):
    name, labels = k
    if not labels:
        return name
    return name + "{" + ",".join('%s="%s"' % kv for kv in sorted(labels)) + "}"


def cmd_parse(a):
    with open(a.file) as f:
        m = parse_metrics(f.read())
    if a.tsv:
        for k, v in m.items():
            print("%s\t%s" % (key_str(k), int(v) if v == v and abs(v) != float("inf") and v.is_integer() else v))
    else:
        out({key_str(k): v for k, v in m.items()})
    return 0


CLASSES = {"egress_internal": ("egress", "internal"), "egress_internet": ("egress", "internet"),
           "ingress_internal": ("ingress", "internal"), "ingress_internet": ("ingress", "internet")}


def cmd_compare(a):
    """Every named counter of the table must be on /metrics with the same
    bytes and packets (spoofed-packet counters: packets), and every
    tollgate_{namespace,pod,host}_* and tollgate_spoofed_packets_total
    sample must come from a counter. nodeAccess' drop counters (packets) too;
    the table is the inet one (ARP's counter lives in table arp tollgate)."""
    with open(a.metrics) as f:
        met = parse_metrics(f.read())
    with open(a.nft) as f:
        nft = json.load(f)
    veth = {}
    if a.state and os.path.exists(a.state):
        with open(a.state) as f:
            for att in json.load(f).get("attachments", []):
                veth[att["hostVeth"]] = (att.get("namespace", ""), att.get("pod", ""))
    problems, compared, expected_keys = [], 0, set()

    def packets_match(k, c):
        """1 when series k on /metrics equals counter c's packets; else a problem, 0."""
        expected_keys.add(k)
        if k not in met:
            problems.append("%s (counter %s) missing on /metrics" % (key_str(k), c["name"]))
        elif met[k] != c["packets"]:
            problems.append("%s = %r on /metrics, nft %s packets = %d" % (key_str(k), met[k], c["name"], c["packets"]))
        else:
            return 1
        return 0

    for item in nft.get("nftables", []):
        c = item.get("counter")
        if not c or c.get("table") != "tollgate" or c.get("family", "inet") != "inet":
            continue
        name = c["name"]
        m = re.match(r"^(?:ns_([^_]*)|node)_spoofed_(ipv4|ipv6)$", name)
        if m:
            labels = {"family": m.group(2)}
            if m.group(1) is not None:
                labels["namespace"] = m.group(1)
            compared += packets_match(("tollgate_spoofed_packets_total", frozenset(labels.items())), c)
            continue
        m = re.match(r"^ns_([^_]*)_(metadata|agent|invalid|neighbour)_dropped$", name)
        if m:
            fam = {"agent": "metrics_port"}.get(m.group(2), m.group(2))
            compared += packets_match(("tollgate_namespace_%s_dropped_packets_total" % fam,
                                       frozenset({"namespace": m.group(1)}.items())), c)
            continue
        m = re.match(r"^ns_([^_]*)_refused_(concurrent|rate|ceiling)$", name)
        if m:
            compared += packets_match(("tollgate_namespace_connections_refused_total",
                                       frozenset({"namespace": m.group(1), "reason": m.group(2)}.items())), c)
            continue
        cls = next((k for k in CLASSES if name.endswith("_" + k)), None)
        if cls is None:
            problems.append("counter %s has no class suffix" % name)
            continue
        d, t = CLASSES[cls]
        mid = name[: -len(cls) - 1]
        if mid.startswith("ns_"):
            fam, labels = "tollgate_namespace", {"namespace": mid[3:]}
        elif mid.startswith("pod_"):
            v = mid[4:]
            if v not in veth:
                problems.append("counter %s: host veth %s not in the store" % (name, v))
                continue
            fam, labels = "tollgate_pod", {"namespace": veth[v][0], "pod": veth[v][1]}
        elif mid == "host":
            fam, labels = "tollgate_host", {}
        else:
            problems.append("unexpected counter %s" % name)
            continue
        labels.update({"direction": d, "traffic": t})
        for kind in ("bytes", "packets"):
            k = ("%s_%s_total" % (fam, kind), frozenset(labels.items()))
            expected_keys.add(k)
            if k not in met:
                problems.append("%s (counter %s) missing on /metrics" % (key_str(k), name))
            elif met[k] != c[kind]:
                problems.append("%s = %r on /metrics, nft %s %s = %d" % (key_str(k), met[k], name, kind, c[kind]))
            else:
                compared += 1
    for k in met:
        if re.match(r"tollgate_((namespace|pod|host)_(bytes|packets)|spoofed_packets|namespace_(metadata|metrics_port|invalid|neighbour)_dropped_packets|namespace_connections_refused)_total$", k[0]) and k not in expected_keys:
            problems.append("%s on /metrics has no nft counter" % key_str(k))
    out({"compared": compared, "problems": problems[:20], "n_problems": len(problems)})
    return 0


TC_CLASS = re.compile(r"^class htb (\S+) .*\bceil (\d+(?:\.\d+)?)([KMG]?)bit\b")
TC_SENT = re.compile(r"^ Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+)")
TC_UNITS = {"": 1, "K": 1000, "M": 1000 ** 2, "G": 1000 ** 3}


def parse_tc(text):
    """{handle: {bytes, packets, drops, overlimits, limit (bytes/s)}} of `tc -s class show`."""
    res, cur = {}, None
    for line in text.splitlines():
        m = TC_CLASS.match(line)
        if m:
            cur = res.setdefault(m.group(1), {})
            cur["limit"] = int(round(float(m.group(2)) * TC_UNITS[m.group(3)])) // 8
            continue
        m = TC_SENT.match(line)
        if m and cur is not None:
            cur.update(zip(("bytes", "packets", "drops", "overlimits"), map(int, m.groups())))
    return res


TC_VALUES = {"sent_bytes_total": "bytes", "sent_packets_total": "packets",
             "dropped_packets_total": "drops", "overlimits_total": "overlimits",
             "limit_bytes_per_second": "limit"}


def cmd_compare_tc(a):
    """Every tollgate_shaper_* sample must equal the value `tc -s class show`
    gives for its class: node 1:1 and namespace/pod internet classes on
    tollgate-inet (egress) and tollgate-inetdl (ingress), a pod's ingress
    classes 1:1/1:3 on its host veth, its egress class 1:1 on its IFB.
    --tc DEV=TEXT, once per device."""
    with open(a.metrics) as f:
        met = parse_metrics(f.read())
    tc = {}
    for item in a.tc:
        dev, _, text = item.partition("=")
        tc[dev] = parse_tc(text)
    with open(a.state) as f:
        atts = json.load(f).get("attachments", [])
    by_pod = {(x.get("namespace", ""), x.get("pod", "")): x for x in atts}
    problems, compared = [], 0
    fam = re.compile(r"tollgate_shaper_(pod|namespace|node)_(\w+)$")
    for (name, lset), value in met.items():
        m = fam.match(name)
        if not m:
            continue
        level, what = m.groups()
        labels = dict(lset)
        if what not in TC_VALUES:
            problems.append("unknown family %s" % name)
            continue
        node_ifb = "tollgate-inetdl" if labels.get("direction") == "ingress" else "tollgate-inet"
        if level == "node":
            dev, handle = node_ifb, "1:1"
        elif level == "namespace":
            att = next((x for x in atts if x.get("namespace", "") == labels.get("namespace")
                        and (x.get("shaping") or {}).get("namespaceClass")), None)
            if not att:
                problems.append("%s: no shaped pod of that namespace in the store" % key_str((name, lset)))
                continue
            dev, handle = node_ifb, "1:%x" % att["shaping"]["namespaceClass"]
        else:
            att = by_pod.get((labels.get("namespace", ""), labels.get("pod", "")))
            if not att:
                problems.append("%s: pod not in the store" % key_str((name, lset)))
                continue
            veth, d, t = att["hostVeth"], labels.get("direction"), labels.get("traffic")
            if t == "internet":
                dev, handle = node_ifb, "1:%x" % (att.get("shaping") or {}).get("podClass", 0)
            elif (d, t) == ("egress", "all"):
                dev, handle = "ti" + veth[2:], "1:1"
            elif d == "ingress" and t in ("all", "internal"):
                dev, handle = veth, {"all": "1:1", "internal": "1:3"}[t]
            else:
                problems.append("%s: unexpected direction/traffic" % key_str((name, lset)))
                continue
        if dev not in tc:
            problems.append("%s: device %s not given" % (key_str((name, lset)), dev))
            continue
        cls = tc[dev].get(handle)
        if cls is None:
            problems.append("%s: no class %s on %s" % (key_str((name, lset)), handle, dev))
        elif cls.get(TC_VALUES[what]) != value:
            problems.append("%s = %r, tc %s %s %s = %r" % (key_str((name, lset)), value, dev, handle,
                                                           TC_VALUES[what], cls.get(TC_VALUES[what])))
        else:
            compared += 1
    out({"compared": compared, "problems": problems[:20], "n_problems": len(problems)})
    return 0


def cmd_probe(a):
    big = "a" * (100 * 1024)
    cases = {
        "get_metrics": http("GET", "/metrics"),
        "get_healthz": http("GET", "/healthz"),
        "get_root": http("GET", "/"),
        "head_metrics": http("HEAD", "/metrics", read_body=True),
        "post_metrics": http("POST", "/metrics", headers={"Content-Length": "3",
                                                           "Content-Type": "text/plain"},
                             raw=b"POST /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                 b"Content-Length: 3\r\n\r\nabc"),
        "put_metrics": http("PUT", "/metrics", raw=b"PUT /metrics HTTP/1.1\r\nHost: x\r\n"
                                                   b"Connection: close\r\nContent-Length: 0\r\n\r\n"),
        "delete_metrics": http("DELETE", "/metrics"),
        "options_metrics": http("OPTIONS", "/metrics"),
        "post_root": http("POST", "/", raw=b"POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                           b"Content-Length: 0\r\n\r\n"),
        "unknown_path": http("GET", "/nope"),
        "metrics_subpath": http("GET", "/metrics/x"),
        "big_header": http("GET", "/metrics", headers={"X-Big": big}),
        "long_url": http("GET", "/" + "a" * 40000),
        "http10": http("GET", "/metrics", raw=b"GET /metrics HTTP/1.0\r\n\r\n"),
    }
    out({k: summary(v) for k, v in cases.items()})
    return 0


GARBAGE = [b"GARBAGE\r\n\r\n", b"\x00\x01\xff\xfe junk junk\r\n\r\n", b"GET\r\n\r\n",
           b"GET / HTTP/9.9\r\n\r\n", b"GET / FOO/1.1\r\n\r\n", b"\r\n\r\n\r\n",
           b"GET /metrics HTTP/1.1\r\nHost: x\r\nno-colon-header\r\n\r\n",
           b"GET /metrics HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
           b"GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
           b"\xff" * 4000 + b"\r\n\r\n", b"GET /metrics/../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
           b"GET /%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
           b"GET /metrics HTTP/1.1\r\n" + b"H: v\r\n" * 3000 + b"\r\n"]


def cmd_garbage(a):
    """Every GARBAGE request on its own connection, all at once; each result
    (status, or closed) and how long the server kept the connection."""
    res = [None] * len(GARBAGE)

    def one(i):
        r = http("GET", "/", raw=GARBAGE[i], timeout=a.timeout, src=a.src)
        res[i] = {"req": GARBAGE[i][:24].decode("latin-1"), **summary(r)}
        res[i].pop("headers", None)
        res[i].pop("body_head", None)

    th = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(GARBAGE))]
    for t in th:
        t.start()
    for t in th:
        t.join(a.timeout + 2)
    out({"sent": len(GARBAGE), "garbage": res})
    return 0


def cmd_robust(a):
    """Storm (a.conns concurrent complete requests) and slow clients at once,
    from a.src, while a watcher (from the default source address, like
    Prometheus) scrapes every 0.1 s and the exporter's RSS is sampled."""
    rss = RssSampler(a.pid)
    rss.start()
    w = Watcher(interval=0.1, limit=a.limit)
    w.start()
    res = {}

    # slow clients: one byte a second of a valid request
    slow_res = [None] * a.slow

    def slow(i):
        req = b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        t0 = time.monotonic()
        try:
            s = socket.create_connection((a.host, a.port), timeout=3,
                                         source_address=(a.src, 0) if a.src else None)
            sent = 0
            while sent < len(req) and time.monotonic() - t0 < a.seconds:
                s.sendall(req[sent:sent + 1])
                sent += 1
                time.sleep(1.0)
            slow_res[i] = {"sent": sent, "secs": round(time.monotonic() - t0, 2)}
            s.close()
        except OSError as e:
            slow_res[i] = {"error": str(e), "secs": round(time.monotonic() - t0, 2)}

    threads = [threading.Thread(target=slow, args=(i,), daemon=True) for i in range(a.slow)]
    for t in threads:
        t.start()
    time.sleep(0.5)

    # the storm: a.conns connections opened at once, each a full GET /metrics
    storm_res = [None] * a.conns
    barrier = threading.Barrier(a.conns)

    def storm(i):
        try:
            barrier.wait(timeout=10)
        except threading.BrokenBarrierError:
            pass
        r = http("GET", "/metrics" if i % 2 == 0 else "/healthz", timeout=10, src=a.src)
        storm_res[i] = r.get("status") or r.get("error")

    st = [threading.Thread(target=storm, args=(i,), daemon=True) for i in range(a.conns)]
    t0 = time.monotonic()
    for t in st:
        t.start()
    for t in st:
        t.join(15)
    res["storm"] = {"secs": round(time.monotonic() - t0, 3),
                    "ok": sum(1 for x in storm_res if x == 200),
                    # refused/closed/reset by a connection limit: fine; a status
                    # other than 200, a timeout or no result at all: not
                    "bad": sorted({str(x) for x in storm_res
                                   if x != 200 and not (isinstance(x, str) and re.search(
                                       r"Refused|Reset|closed without|Broken", x))})[:10],
                    "other": sorted({str(x) for x in storm_res if x != 200})[:10]}
    for t in threads:
        t.join(a.seconds + 5)
    w.stop_ev.set()
    w.join(5)
    rss.stop_ev.set()
    rss.join(2)
    res["slow"] = slow_res
    res["watch"] = w.result()
    res["rss_max_kb"] = rss.max_kb
    res["alive"] = rss.alive and vm(a.pid, "VmRSS") is not None
    res["after"] = summary(http("GET", "/metrics"))
    out(res)
    return 0


def cmd_hold(a):
    """a.conns idle connections (nothing sent) from a.src, held a.seconds, while
    a watcher from 127.0.0.1 scrapes."""
    socks, refused = [], 0
    for _ in range(a.conns):
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(1)
            s.bind((a.src, 0))
            s.connect((a.host, a.port))
            socks.append(s)
        except OSError:
            refused += 1
    w = Watcher(interval=0.1, limit=a.limit)
    w.start()
    time.sleep(a.seconds)
    w.stop_ev.set()
    w.join(a.limit + 3)
    for s in socks:
        s.close()
    res = {"held": len(socks), "refused": refused, "watch": w.result(),
           "rss_kb": vm(a.pid, "VmRSS"), "alive": vm(a.pid, "VmRSS") is not None}
    # after release: the exporter answers again within a.limit (poll for 5 s)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 5:
        r = http("GET", "/healthz", timeout=a.limit)
        if r.get("status") == 200:
            break
    res["after_release"] = summary(r)
    out(res)
    return 0


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, max(0, int(round(p / 100.0 * len(v) + 0.5)) - 1))]


class Scraper:
    """GET /metrics as a scraper does: read the head, then exactly Content-Length
    bytes into one reused buffer (no per-chunk copies, so the client costs as
    little as it can). keepalive=True reuses one HTTP/1.1 connection, as
    Prometheus does; False opens a new one per request and closes it once the
    body is in, as curl does."""

    def __init__(self, path, keepalive):
        self.req = ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nAccept: text/plain\r\n\r\n"
                    % (path, A.host, A.port)).encode()
        self.keepalive = keepalive
        self.s = None
        self.buf = bytearray(1 << 20)

    def _room(self, n):
        if len(self.buf) < n:
            self.buf.extend(bytes(n - len(self.buf)))

    def get(self):
        if self.s is None:
            self.s = socket.create_connection((A.host, A.port), timeout=5)
            self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.s.sendall(self.req)
        mv, have, end = memoryview(self.buf), 0, -1
        while end < 0:
            got = self.s.recv_into(mv[have:])
            if not got:
                raise SystemExit("connection closed by the server before the head")
            end = self.buf.find(b"\r\n\r\n", max(0, have - 3), have + got)
            have += got
        head = bytes(self.buf[:end])
        m = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
        if not head.startswith(b"HTTP/1.1 200") or not m:
            raise SystemExit("bad response: %r" % head[:200])
        total = end + 4 + int(m.group(1))
        self._room(total)
        mv = memoryview(self.buf)
        while have < total:
            got = self.s.recv_into(mv[have:total])
            if not got:
                raise SystemExit("connection closed inside the body")
            have += got
        if not self.keepalive or re.search(rb"(?i)\r\nconnection: *close", head):
            self.s.close()
            self.s = None
        return bytes(mv[end + 4:total])


SERVER = re.compile(rb"\ntollgate_scrape_duration_seconds (\S+)")
NFTDUR = re.compile(rb'\ntollgate_collector_duration_seconds\{collector="nftables"\} (\S+)')
TCDUR = re.compile(rb'\ntollgate_collector_duration_seconds\{collector="shaper"\} (\S+)')


def stats(v):
    if not v:
        return {"n": 0}
    return {"n": len(v), "median_ms": statistics.median(v) * 1e3, "p99_ms": pct(v, 99) * 1e3,
            "max_ms": max(v) * 1e3}


def cmd_mix(a):
    """a.rounds rounds; each: a.scrapes keep-alive and a.scrapes new-connection
    scrapes (alternating), then every --cmd once (order rotating). Round 0 warms
    up and is not counted. Prints the stats of each series."""
    cmds = []
    for c in a.cmd:
        name, _, line = c.partition("=")
        cmds.append((name, line.split()))
    ka = Scraper(a.path, True)
    nc = Scraper(a.path, False)
    lat = {"keepalive": [], "newconn": [], "server": [], "server_nftables": [], "server_shaper": []}
    for name, _ in cmds:
        lat[name] = []
    size = {}
    for r in range(a.rounds + 1):
        for _ in range(a.scrapes):
            t0 = time.perf_counter()
            body = ka.get()
            t1 = time.perf_counter()
            body2 = nc.get()
            t2 = time.perf_counter()
            if r:
                lat["keepalive"].append(t1 - t0)
                lat["newconn"].append(t2 - t1)
                for b in (body, body2):
                    m = SERVER.search(b)
                    if m:
                        lat["server"].append(float(m.group(1)))
                    m = NFTDUR.search(b)
                    if m:
                        lat["server_nftables"].append(float(m.group(1)))
                    m = TCDUR.search(b)
                    if m:
                        lat["server_shaper"].append(float(m.group(1)))
            size["keepalive"] = size["newconn"] = len(body)
        for k in range(len(cmds)):
            name, argv = cmds[(k + r) % len(cmds)]
            t0 = time.perf_counter()
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            dt = time.perf_counter() - t0
            if p.returncode != 0:
                raise SystemExit("%s exited %d: %r" % (argv, p.returncode, p.stderr[:300]))
            if r:
                lat[name].append(dt)
            size[name] = len(p.stdout)
    o = {}
    for k, v in lat.items():
        o[k] = stats(v)
        o[k]["bytes"] = size.get(k, 0)
        o[k]["samples"] = v
    out(o)
    return 0


def main():
    global A
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9617)
    sub = p.add_subparsers(dest="mode", required=True)
    q = sub.add_parser("sink")
    q.add_argument("--udp-port", dest="port", type=int, required=True)
    q.add_argument("--ready", required=True)
    q.add_argument("--timeout", type=float, default=30)
    q = sub.add_parser("send")
    q.add_argument("--dst", required=True)
    q.add_argument("--udp-port", dest="port", type=int, required=True)
    q.add_argument("--count", type=int, required=True)
    q.add_argument("--size", type=int, required=True)
    q = sub.add_parser("parse")
    q.add_argument("--tsv", action="store_true", help="key<TAB>value lines instead of JSON")
    q.add_argument("file")
    q = sub.add_parser("compare")
    q.add_argument("--metrics", required=True)
    q.add_argument("--nft", required=True)
    q.add_argument("--state", default="")
    q = sub.add_parser("compare-tc")
    q.add_argument("--metrics", required=True)
    q.add_argument("--state", required=True)
    q.add_argument("--tc", action="append", default=[], help="DEV=output of tc -s class show dev DEV")
    sub.add_parser("probe")
    q = sub.add_parser("robust")
    q.add_argument("--pid", type=int, required=True)
    q.add_argument("--conns", type=int, default=200)
    q.add_argument("--slow", type=int, default=5)
    q.add_argument("--src", default="", help="source address of the storm and slow clients")
    q.add_argument("--seconds", type=float, default=6)
    q.add_argument("--limit", type=float, default=1.0)
    q = sub.add_parser("garbage")
    q.add_argument("--timeout", type=float, default=12)
    q.add_argument("--src", default="", help="source address of the garbage clients")
    q = sub.add_parser("hold")
    q.add_argument("--pid", type=int, required=True)
    q.add_argument("--conns", type=int, default=200)
    q.add_argument("--src", default="127.0.0.2")
    q.add_argument("--seconds", type=float, default=3)
    q.add_argument("--limit", type=float, default=1.0)
    q = sub.add_parser("mix")
    q.add_argument("--rounds", type=int, default=30)
    q.add_argument("--scrapes", type=int, default=4)
    q.add_argument("--path", default="/metrics")
    q.add_argument("--cmd", action="append", default=[], help="NAME=command line (split on spaces)")
    A = p.parse_args()
    fn = {"sink": cmd_sink, "send": cmd_send, "parse": cmd_parse, "compare": cmd_compare, "compare-tc": cmd_compare_tc,
          "probe": cmd_probe, "garbage": cmd_garbage, "robust": cmd_robust, "hold": cmd_hold, "mix": cmd_mix}[A.mode]
    return fn(A)


if __name__ == "__main__":
    sys.exit(main())
