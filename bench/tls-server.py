#!/usr/bin/env python3
"""tls-server.py ADDR PORT CERT KEY DIR SECONDS: HTTPS for the credential
broker's benchmark (bench/broker-speed.sh), in the benchmark's own site
network (tests/testnet/lan.sh); stops after SECONDS (at most 900).

  GET /stream  an SSE-like streamed answer: the head at once, then EVENTS
               events, one every PAUSE seconds, each flushed on its own,
               then the end (Connection: close)
  GET /...     the file under DIR (a dumb-HTTP git repository), with its
               Content-Length, in 256 KiB writes
"""
import http.server, os, shutil, socketserver, ssl, sys, threading, time

addr, port, cert, key, root = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
seconds = min(float(sys.argv[6]), 900.0)
EVENTS, PAUSE = 5, 0.02


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # As a real API server: each write leaves at once (TCP_NODELAY).
    disable_nagle_algorithm = True

    def do_GET(self):
        if self.path.split("?", 1)[0] == "/stream":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.flush()
            for i in range(EVENTS):
                time.sleep(PAUSE)
                self.wfile.write(b'event: content_block_delta\ndata: {"index":%d}\n\n' % i)
                self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()

    def copyfile(self, src, dst):
        shutil.copyfileobj(src, dst, 256 * 1024)

    def log_message(self, *a):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self):
        # No reverse lookup of the address (no resolver may be there).
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = addr, port


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv = Server((addr, port), lambda *a: Handler(*a, directory=root))
srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
threading.Timer(seconds, srv.shutdown).start()
srv.serve_forever(poll_interval=0.1)
