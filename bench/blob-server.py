#!/usr/bin/env python3
"""blob-server.py ADDR PORT FILE SECONDS: answer every HTTP GET with FILE,
sent with sendfile(2) so the server is never what a throughput benchmark
measures. Part of `just bench`; it runs in the benchmark's own site network
(tests/testnet/lan.sh) and stops after SECONDS (at most 900)."""
import os, socket, sys, threading, time

addr, port, path, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], min(float(sys.argv[4]), 900.0)
size = os.path.getsize(path)


def serve(conn):
    with conn:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            chunk = conn.recv(4096)
            if not chunk:
                return
            head += chunk
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n" % size)
        with open(path, "rb") as f:
            conn.sendfile(f)


srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((addr, port))
srv.listen(64)
deadline = time.monotonic() + seconds
while (left := deadline - time.monotonic()) > 0:
    srv.settimeout(left)
    try:
        conn, _ = srv.accept()
    except socket.timeout:
        break
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
