#!/usr/bin/env python3
"""Load for tests/integration/test_metrics_http.sh: slow clients, scrapers and
a Prometheus-like watcher against the metrics endpoint. Run inside a test
namespace (ip netns exec NS python3 http_load.py ...); it only talks to
--host. Every mode is bounded in time and prints one JSON object.

  slow    --conns N --interval I --seconds S    N connections, each sending one byte
                                                of a never-ending request header every I s;
                                                a connection the server closes is opened
                                                again after I s. Per connection: how long
                                                the server kept it and how it ended.
  scrape  --threads N --seconds S [--pause P]   N threads, each GET /metrics on a new
          [--once] [--src-base IP] [--window W] connection in a loop (--once: one request
                                                each, all released together); --src-base:
                                                thread i binds to IP + i. Statuses, refusals
                                                and the pages' tollgate_scrape_collections_total
                                                (--window: also of the answers within the
                                                first cache window).
  watch   --interval I --seconds S --limit L    one GET /metrics at a time, as Prometheus
          [--pid PID]                           scrapes; latency of each, and the peak
                                                VmRSS of PID meanwhile.
"""
import argparse
import ipaddress
import json
import re
import selectors
import socket
import threading
import time

A = None
COLL_RE = re.compile(rb"^tollgate_scrape_collections_total (\d+)$", re.M)


def get(path="/metrics", timeout=5.0, src=None):
    """One request on a new connection (Connection: close): dict with status,
    secs, collections (from the page) or error."""
    t0 = time.monotonic()
    data = b""
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(timeout)
        if src:
            s.bind((src, 0))
        s.connect((A.host, A.port))
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: load\r\nConnection: close\r\n\r\n"
                   % (path, A.host)).encode())
        while True:
            b = s.recv(1 << 16)
            if not b:
                break
            if not data:
                t_first = time.monotonic()
            data += b
        s.close()
    except (OSError, socket.timeout) as e:
        return {"error": "%s: %s" % (type(e).__name__, e), "secs": time.monotonic() - t0,
                "got": len(data)}
    secs = time.monotonic() - t0
    if not data:
        return {"error": "closed without a response", "secs": secs, "got": 0}
    m = re.match(rb"HTTP/1\.[01] (\d{3})", data)
    if not m:
        return {"error": "bad status line %r" % data[:40], "secs": secs, "got": len(data)}
    r = {"status": int(m.group(1)), "secs": secs, "len": len(data), "t_first": t_first}
    c = COLL_RE.search(data)
    if c:
        r["collections"] = int(c.group(1))
    return r


def refused(r):
    """Closed or reset at once by a connection limit (no status at all)."""
    return "error" in r and r.get("got", 0) == 0 and re.search(
        r"Reset|Refused|closed without|Broken", r["error"]) is not None


def vm_rss(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


# ------------------------------------------------------------------ slow
def cmd_slow(a):
    # A header that never ends within the run: one byte per interval.
    req = (b"GET /metrics HTTP/1.1\r\nHost: x\r\nUser-Agent: slow\r\nX-Pad: " + b"a" * 4000
           + b"\r\n\r\n")
    sel = selectors.DefaultSelector()
    t_start = time.monotonic()
    end = t_start + a.seconds
    done = []  # finished connections
    live = {}  # fd -> record
    pending = [t_start] * a.conns  # when each client (re)connects

    def finish(rec, how, now):
        sel.unregister(rec["sock"])
        rec["sock"].close()
        live.pop(rec["fd"], None)
        done.append({"t": round(rec["t0"] - t_start, 3), "held": round(now - rec["t0"], 3),
                     "sent": rec["sent"], "how": how})
        pending.append(now + a.interval)

    while True:
        now = time.monotonic()
        if now >= end:
            break
        # (re)connect the clients whose turn it is
        due = [t for t in pending if t <= now]
        pending[:] = [t for t in pending if t > now]
        for _ in due:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(2)
            t0 = time.monotonic()
            try:
                s.connect((a.host, a.port))
            except OSError as e:
                s.close()
                done.append({"t": round(t0 - t_start, 3), "held": 0, "sent": 0,
                             "how": "connect: %s" % e})
                pending.append(time.monotonic() + a.interval)
                continue
            s.setblocking(False)
            rec = {"sock": s, "fd": s.fileno(), "t0": t0, "sent": 0, "next": t0}
            live[rec["fd"]] = rec
            sel.register(s, selectors.EVENT_READ, rec)
        # one byte from every connection whose turn it is
        now = time.monotonic()
        for rec in list(live.values()):
            if rec["next"] > now:
                continue
            try:
                rec["sock"].send(req[rec["sent"] % len(req):][:1])
                rec["sent"] += 1
                rec["next"] = now + a.interval
            except OSError as e:
                finish(rec, "send: %s" % e.__class__.__name__, now)
        # the server's side: a close, a reset, or (never expected) an answer
        nxt = min([r["next"] for r in live.values()] + pending + [end])
        for key, _ in sel.select(max(0.0, min(nxt - time.monotonic(), 0.2))):
            rec = key.data
            now = time.monotonic()
            try:
                b = rec["sock"].recv(4096)
            except ConnectionResetError:
                finish(rec, "reset", now)
                continue
            except OSError as e:
                finish(rec, "recv: %s" % e.__class__.__name__, now)
                continue
            if not b:
                finish(rec, "closed", now)
            else:
                rec.setdefault("answer", b[:40].decode("latin-1"))
                finish(rec, "answered %r" % b[:24], now)
    now = time.monotonic()
    for rec in list(live.values()):
        done.append({"t": round(rec["t0"] - t_start, 3), "held": round(now - rec["t0"], 3),
                     "sent": rec["sent"], "how": "open"})
        rec["sock"].close()
    print(json.dumps({"conns": done}, sort_keys=True))
    return 0


# ------------------------------------------------------------------ scrape
def cmd_scrape(a):
    res = [[] for _ in range(a.threads)]
    end = time.monotonic() + a.seconds
    barrier = threading.Barrier(a.threads) if a.once else None
    base = ipaddress.IPv4Address(a.src_base) if a.src_base else None

    def one(i):
        src = str(base + i) if base else None
        if barrier:
            try:
                barrier.wait(timeout=10)
            except threading.BrokenBarrierError:
                pass
        while True:
            r = get(timeout=a.timeout, src=src)
            res[i].append(r)
            if a.once or time.monotonic() + a.pause >= end:
                break
            time.sleep(a.pause)

    th = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(a.threads)]
    t0 = time.monotonic()
    for t in th:
        t.start()
    for t in th:
        t.join(a.seconds + a.timeout + 5)
    elapsed = time.monotonic() - t0
    flat = [r for rs in res for r in rs]
    ok = [r for r in flat if r.get("status") == 200]
    out = {"requests": len(flat), "ok": len(ok),
           "refused": sum(1 for r in flat if refused(r)),
           "bad": sorted({r.get("error") or "status %d" % r["status"] for r in flat
                          if r.get("status") != 200 and not refused(r)})[:10],
           "collections": sorted({r["collections"] for r in ok if "collections" in r}),
           "max_secs": round(max([r["secs"] for r in flat] or [0]), 3),
           "elapsed": round(elapsed, 3)}
    if a.window and ok:
        # Answers that began within the cache window of the first one (less
        # a margin for the collection itself) were all handled inside it.
        t0 = min(r["t_first"] for r in ok)
        inside = [r for r in ok if r["t_first"] < t0 + a.window - 0.2 and "collections" in r]
        out["first_window"] = {"requests": len(inside),
                               "collections": sorted({r["collections"] for r in inside})}
    print(json.dumps(out, sort_keys=True))
    return 0


# ------------------------------------------------------------------ watch
def cmd_watch(a):
    rss = {"max": 0, "alive": True}
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            kb = vm_rss(a.pid)
            if kb is None:
                rss["alive"] = False
                return
            rss["max"] = max(rss["max"], kb)
            stop.wait(0.05)

    th = None
    if a.pid:
        th = threading.Thread(target=sample, daemon=True)
        th.start()
    res = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < a.seconds:
        r = get(timeout=a.limit + 2.0)
        r["t"] = round(time.monotonic() - t0, 3)
        res.append(r)
        time.sleep(a.interval)
    stop.set()
    if th:
        th.join(2)
    fails = [r for r in res if r.get("status") != 200]
    colls = [(r["t"], r["collections"]) for r in res if "collections" in r]
    out = {"scrapes": len(res), "n_failures": len(fails),
           "failures": [{"t": r["t"], "error": r.get("error") or r.get("status")}
                        for r in fails][:10],
           "over_limit": sum(1 for r in res if r["secs"] > a.limit),
           "max_secs": round(max([r["secs"] for r in res] or [0]), 3),
           "collections_first": colls[0] if colls else None,
           "collections_last": colls[-1] if colls else None,
           "rss_max_kb": rss["max"], "alive": rss["alive"]}
    print(json.dumps(out, sort_keys=True))
    return 0


def main():
    global A
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, default=9617)
    sub = p.add_subparsers(dest="mode", required=True)
    q = sub.add_parser("slow")
    q.add_argument("--conns", type=int, default=16)
    q.add_argument("--interval", type=float, default=0.5)
    q.add_argument("--seconds", type=float, required=True)
    q = sub.add_parser("scrape")
    q.add_argument("--threads", type=int, default=50)
    q.add_argument("--seconds", type=float, default=10)
    q.add_argument("--pause", type=float, default=0.2)
    q.add_argument("--timeout", type=float, default=5.0)
    q.add_argument("--once", action="store_true")
    q.add_argument("--src-base", default="")
    q.add_argument("--window", type=float, default=0,
                   help="the server's page cache window (s): report the answers within the first")
    q = sub.add_parser("watch")
    q.add_argument("--interval", type=float, default=0.25)
    q.add_argument("--seconds", type=float, required=True)
    q.add_argument("--limit", type=float, default=1.0)
    q.add_argument("--pid", type=int, default=0)
    A = p.parse_args()
    if not (0 < getattr(A, "seconds", 1) <= 120):
        p.error("--seconds must be in (0, 120]")
    return {"slow": cmd_slow, "scrape": cmd_scrape, "watch": cmd_watch}[A.mode](A)


if __name__ == "__main__":
    raise SystemExit(main())
