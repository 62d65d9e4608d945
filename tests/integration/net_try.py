#!/usr/bin/env python3
"""One bounded attempt, for tests/integration/test_node_access.sh: prints "ok" or why not.

  tcp ADDR PORT   connect within 0.5 s (one SYN: the first retransmission
                  comes after 1 s), send a line, wait for an answer
  udp ADDR PORT   one datagram, wait 1 s for an answer

Exit status 0 only when an answer came.
"""
import socket
import sys


def main():
    kind, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    msg = b"tollgate-test\n"
    try:
        if kind == "tcp":
            s = socket.create_connection((host, port), timeout=0.5)
            s.settimeout(2)
            s.sendall(b"GET / HTTP/1.0\r\n\r\n" if port != 53 else msg)
            data = s.recv(64)
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(1)
            s.sendto(msg, (host, port))
            data = s.recv(64)
    except socket.timeout:
        print("no: timed out")
        return 1
    except OSError as e:
        print("no: %s" % (e.strerror or e.__class__.__name__))
        return 1
    print("ok" if data else "no: empty")
    return 0 if data else 1


if __name__ == "__main__":
    sys.exit(main())
