#!/usr/bin/env python3
"""Connection flood for the internet guard tests.

  conn_flood.py serve PORT                 accept and echo, forever (run in the host)
  conn_flood.py open HOST PORT COUNT [--probe N] [--hold SECONDS] [--timeout S]

`open` starts COUNT TCP connections at once (non-blocking), waits until each
has connected or failed, then sends a line on N of the connected ones and
checks it comes back (established flows still move). Prints one JSON object:
{"connected": c, "refused": r, "timeout": t, "errors": {errno name: n},
 "probed": N, "echoed": e, "seconds": s}. With --hold, keeps the connected
ones open that long (or until stdin closes) before closing them.
"""
import ctypes
import errno
import json
import os
import resource
import selectors
import signal
import socket
import sys
import time


def raise_fd_limit(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if n <= soft:
        return
    if n > hard and os.geteuid() == 0:
        hard = n  # root may raise the hard limit (up to fs.nr_open)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))


WORKERS = 4  # a process holds at most its descriptor limit: the load is split


def die_with_parent():
    """A forked worker ends when the process the test started ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:
        os._exit(0)


def serve(port):
    raise_fd_limit(resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    for _ in range(WORKERS - 1):
        if os.fork() == 0:
            die_with_parent()
            break
    sel = selectors.DefaultSelector()
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(65535)
    ls.setblocking(False)
    sel.register(ls, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            s = key.fileobj
            if s is ls:
                while True:
                    try:
                        c, _ = ls.accept()
                    except BlockingIOError:
                        break
                    c.setblocking(False)
                    sel.register(c, selectors.EVENT_READ)
                continue
            try:
                data = s.recv(4096)
            except (ConnectionError, BlockingIOError):
                data = b""
            if data:
                try:
                    s.send(data)
                except OSError:
                    pass
            else:
                sel.unregister(s)
                s.close()


def open_many(host, port, count, probe, hold, timeout):
    """Splits the work over WORKERS processes and prints their sum."""
    share = [count // WORKERS + (i < count % WORKERS) for i in range(WORKERS)]
    pshare = [probe // WORKERS + (i < probe % WORKERS) for i in range(WORKERS)]
    results, release, kids = [], [], []
    for i in range(WORKERS):
        r, w = os.pipe()
        rr, rw = os.pipe()
        pid = os.fork()
        if pid == 0:
            die_with_parent()
            os.close(r)
            os.close(rw)
            out = os.fdopen(w, "w")
            open_part(host, port, share[i], pshare[i], timeout, out, rr)
            os._exit(0)
        os.close(w)
        os.close(rr)
        results.append(os.fdopen(r))
        release.append(rw)
        kids.append(pid)
    total = {"connected": 0, "refused": 0, "timeout": 0, "errors": {}, "probed": 0,
             "echoed": 0, "seconds": 0.0}
    for f in results:
        line = f.readline()
        part = json.loads(line) if line else {}
        for k in ("connected", "refused", "timeout", "probed", "echoed"):
            total[k] += part.get(k, 0)
        total["seconds"] = max(total["seconds"], part.get("seconds", 0.0))
        for k, v in part.get("errors", {}).items():
            total["errors"][k] = total["errors"].get(k, 0) + v
    print(json.dumps(total), flush=True)
    if hold:
        end = time.monotonic() + hold
        sel = selectors.DefaultSelector()
        sel.register(sys.stdin, selectors.EVENT_READ)
        while time.monotonic() < end:
            if sel.select(timeout=max(0.0, end - time.monotonic())):
                if not os.read(sys.stdin.fileno(), 4096):
                    break
    for fd in release:
        os.close(fd)  # each worker closes what it holds
    for pid in kids:
        os.waitpid(pid, 0)


def open_part(host, port, count, probe, timeout, out, release_fd):
    raise_fd_limit(count + 64)
    sel = selectors.DefaultSelector()
    pending, connected = {}, []
    errors = {}
    t0 = time.monotonic()
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        r = s.connect_ex((host, port))
        if r in (0, errno.EINPROGRESS):
            sel.register(s, selectors.EVENT_WRITE)
            pending[s.fileno()] = s
        else:
            name = errno.errorcode.get(r, str(r))
            errors[name] = errors.get(name, 0) + 1
            s.close()
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=0.5):
            s = key.fileobj
            sel.unregister(s)
            del pending[s.fileno()]
            r = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if r == 0:
                connected.append(s)
            else:
                name = errno.errorcode.get(r, str(r))
                errors[name] = errors.get(name, 0) + 1
                s.close()
    seconds = time.monotonic() - t0
    timed_out = len(pending)
    for s in pending.values():
        s.close()
    echoed = 0
    probed = connected[:probe]
    for s in probed:
        s.setblocking(True)
        s.settimeout(5)
        try:
            s.sendall(b"ping\n")
            if s.recv(16) == b"ping\n":
                echoed += 1
        except OSError:
            pass
    refused = errors.get("ECONNREFUSED", 0)
    out.write(json.dumps({"connected": len(connected), "refused": refused, "timeout": timed_out,
                          "errors": errors, "probed": len(probed), "echoed": echoed,
                          "seconds": round(seconds, 3)}) + "\n")
    out.flush()
    os.read(release_fd, 1)  # until the parent closes its end
    for s in connected:
        s.close()


def main():
    a = sys.argv[1:]
    if a and a[0] == "serve":
        serve(int(a[1]))
        return
    if len(a) < 4 or a[0] != "open":
        sys.exit(__doc__)
    opts = {"--probe": 0, "--hold": 0, "--timeout": 10}
    rest = a[4:]
    while rest:
        opts[rest[0]] = float(rest[1])
        rest = rest[2:]
    open_many(a[1], int(a[2]), int(a[3]), int(opts["--probe"]), opts["--hold"],
              opts["--timeout"])


if __name__ == "__main__":
    main()
