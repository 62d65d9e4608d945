#!/usr/bin/env python3
"""Short-transfer timer for tests/bench/bench_shaping.sh (a helper, not a bench script).

  bench_shaping_xfer.py serve ADDR PORT
      accepts connections one after another until killed. A connection starts
      with one byte saying what to do, then an 8-byte size N:
        b"U": read N bytes, then answer with 4 bytes (any value): upload done
        b"D": send N bytes, wait for one byte from the client, answer with the
              sender's (this server's) TCP total_retrans as 4 bytes
  bench_shaping_xfer.py up|down ADDR PORT BYTES
      one transfer; prints "SECONDS RETRANS"
  bench_shaping_xfer.py seq ADDR PORT BYTES N
      N uploads, then N downloads, one connection each, one after another;
      prints "up SECONDS RETRANS" / "down SECONDS RETRANS" per transfer.
SECONDS is measured by the client (the pod) from connect() to "the last byte
has arrived": for an upload, until the server's answer after it has read all
BYTES; for a download, until the client has read all BYTES. Python start-up
is not included. RETRANS is the sending side's tcpi_total_retrans.
"""
import socket
import struct
import sys
import time

CHUNK = 65536
PAYLOAD = b"\0" * CHUNK
TCPI_TOTAL_RETRANS = 100  # offset in struct tcp_info (8 u8 fields, then u32s)


def total_retrans(s):
    info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    return struct.unpack_from("I", info, TCPI_TOTAL_RETRANS)[0] if len(info) >= 104 else -1


def recv_exact(s, n):
    got = bytearray()
    while len(got) < n:
        b = s.recv(min(CHUNK, n - len(got)))
        if not b:
            raise ConnectionError(f"peer closed after {len(got)} of {n} bytes")
        got += b
    return bytes(got)


def drain(s, n):
    got = 0
    while got < n:
        b = s.recv(min(CHUNK, n - got))
        if not b:
            raise ConnectionError(f"peer closed after {got} of {n} bytes")
        got += len(b)


def send_n(s, n):
    while n:
        k = min(CHUNK, n)
        s.sendall(PAYLOAD[:k])
        n -= k


def serve(addr, port):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(8)
    while True:
        c, _ = ls.accept()
        c.settimeout(30)
        try:
            hdr = recv_exact(c, 9)
            op, n = hdr[:1], struct.unpack("!Q", hdr[1:])[0]
            if op == b"U":
                drain(c, n)
                c.sendall(b"done")
            elif op == b"D":
                send_n(c, n)
                recv_exact(c, 1)
                c.sendall(struct.pack("!i", total_retrans(c)))
        except (OSError, ConnectionError) as e:
            print(f"xfer server: {e}", file=sys.stderr)
        finally:
            c.close()


def transfer(mode, addr, port, n):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(30)
    t0 = time.perf_counter()
    s.connect((addr, port))
    if mode == "up":
        s.sendall(b"U" + struct.pack("!Q", n))
        send_n(s, n)
        recv_exact(s, 4)
        t1 = time.perf_counter()
        retr = total_retrans(s)
    else:
        s.sendall(b"D" + struct.pack("!Q", n))
        drain(s, n)
        t1 = time.perf_counter()
        s.sendall(b"r")
        retr = struct.unpack("!i", recv_exact(s, 4))[0]
    s.close()
    return t1 - t0, retr


def main():
    a = sys.argv[1:]
    if len(a) == 3 and a[0] == "serve":
        serve(a[1], int(a[2]))
    elif len(a) == 4 and a[0] in ("up", "down"):
        t, r = transfer(a[0], a[1], int(a[2]), int(a[3]))
        print(f"{t:.6f} {r}")
    elif len(a) == 5 and a[0] == "seq":
        for mode in ("up", "down"):
            for _ in range(int(a[4])):
                t, r = transfer(mode, a[1], int(a[2]), int(a[3]))
                print(f"{mode} {t:.6f} {r}", flush=True)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
