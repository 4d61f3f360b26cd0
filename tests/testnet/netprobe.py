#!/usr/bin/env python3
"""netprobe.py: the project's small TCP/DNS peers for egress-jail tests (stdlib only).

  netprobe.py serve ADDR:PORT TOKEN [SECONDS]  accept TCP connections, send TOKEN to each and
                                               close; stop after SECONDS (default 30)
  netprobe.py dns ADDR [SECONDS] [NAME=IP ...]
                                               UDP DNS on ADDR:53: an A query for a NAME given
                                               answered with its IP (an address of the test
                                               network), every other A query with 203.0.113.10;
                                               stop after SECONDS (default 30)
  netprobe.py connect [--via MODE] ADDR:PORT [...]
                                               one line per target:
                                               "ADDR:PORT REACHED <what it sent>" or
                                               "ADDR:PORT BLOCKED <reason>"
  netprobe.py resolve NAME                     the first IPv4 address of NAME, or "NORESOLVE <reason>"
  netprobe.py query [--via MODE] ADDR NAME     one DNS A query for NAME sent over UDP to ADDR:53
                                               (not through the system's resolver): the first
                                               address answered, or "NOANSWER <reason>"

  netprobe.py gather PORT FILE SECONDS GROUP...
                                               UDP on 0.0.0.0:PORT, joined to each multicast
                                               GROUP, broadcasts accepted: each datagram's text
                                               appended to FILE as a line; stop after SECONDS
  netprobe.py shout TAG ADDR:PORT [...]        to each target (a test-network address, a
                                               multicast group or 255.255.255.255) one UDP
                                               datagram "TAG ADDR:PORT HOW" for each way a
                                               process may send it: HOW "plain", "source" (bound
                                               to the default interface's address), "mcif"
                                               (IP_MULTICAST_IF), and the --via modes; prints
                                               "HOW ADDR:PORT sent" or "HOW ADDR:PORT refused ..."
--via MODE sends through the interface of the default route (the jail's tap),
named to the socket as an unprivileged process may: "device" (SO_BINDTODEVICE),
"ifindex" (SO_BINDTOIFINDEX), and for query also "unicast-if" (IP_UNICAST_IF)
and "pktinfo" (an IP_PKTINFO message naming the interface).
  netprobe.py unix-serve PATH TOKEN [SECONDS]  a unix socket at PATH (mode 0777) sending TOKEN to
                                               each connection; stop after SECONDS (default 30) or
                                               as soon as the process that started it is gone
  netprobe.py web ADDR:PORT DIR [SECONDS] [--tls CERT KEY]
                                               a static HTTP/1.0 server (one thread per
                                               connection) of the files under DIR, over TLS with
                                               CERT and KEY (PEM files) when given; GET /host
                                               answers the Host header it got, GET /front
                                               plays a shared front routing by host: it answers
                                               "backend=B hosts=N real=yes|no", B the host an
                                               absolute target, X-Forwarded-Host or the first
                                               Host names, N the Host headers, real whether
                                               `Authorization: token T` carried a token listed
                                               in DIR/../auth-token (never the value); GET /trickle
                                               answers 200 and then one byte every 0.1 s until the
                                               client goes (a download that stays open); GET
                                               /user and every path under /private/ need a token
                                               listed (one a line) in DIR/../auth-token (as
                                               `Authorization: token|Bearer T`, Basic's password,
                                               `PRIVATE-TOKEN: T` (GitLab)
                                               or `x-api-key: T`): 401 naming what came without
                                               one, else "authenticated" or the file under
                                               /private/ stripped; POST /v1/oauth/token with a JSON
                                               refresh of a token listed in DIR/../oauth-refresh
                                               answers new tokens (the access one added to
                                               auth-token, the refresh one replacing the list, both
                                               a line of DIR/../oauth-issued), else 400 with what
                                               it got; GET and POST under /smart/ (same token
                                               needed) are git's smart HTTP of the repositories
                                               under DIR (git http-backend as CGI: clone, fetch and
                                               push); stop after SECONDS (default 30)
  netprobe.py echo ADDR:PORT [SECONDS]         an HTTP/1.1 peer that shows what reached it: each
                                               request it reads (its head, then a chunked or
                                               Content-Length body, chunked first) is answered
                                               200 with the body "connection N" (its connections
                                               counted from 1), a newline and the request exactly
                                               as received; it answers every request it reads,
                                               whatever `Connection` says, until the client
                                               closes; stop after SECONDS (default 30)

IPv6 is written [addr]:port. Every wait is bounded: 2 s per connection attempt,
10 s of silence on a web connection, and a listener's lifetime is at most 600 s.
The web server binds a test address only (no wildcard). It only ever talks to loopback and the
addresses of the namespaces tests/testnet/lan.sh creates (and the bridge of
tests/docker.rs's private Docker engine); any other target is
refused before anything is sent. So every packet stays in namespaces the test
created.
"""
import ipaddress
import socket
import struct
import sys
import time

# The answer for every A query, and the "internet" host of lan.sh.
ANSWER = "203.0.113.10"
CONNECT_TIMEOUT = 2.0
MAX_LIFETIME = 600.0
DEFAULT_LIFETIME = 30.0

# Loopback and lan.sh's network: the only destinations this tool talks to.
TEST_NETWORKS = [
    ipaddress.ip_network(n)
    for n in (
        "127.0.0.0/8",
        "::1/128",
        "10.77.0.0/24",
        "fd77::/64",
        "172.16.5.9/32",
        "192.168.5.9/32",
        "198.18.0.1/32",
        "240.0.0.1/32",
        "192.0.0.8/32",
        "100.64.5.9/32",
        "169.254.169.254/32",
        "169.254.0.53/32",
        "203.0.113.10/32",
        # The bridge address of the Docker engine tests/docker.rs starts in
        # a network namespace of its own (--bip).
        "172.17.0.1/32",
    )
]


def fail(msg):
    print(f"netprobe: {msg}", file=sys.stderr)
    sys.exit(2)


def parse_addr(text, wildcard_ok):
    """An IP literal of the test network (or, for a listener, a wildcard)."""
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        fail(f"{text!r} is not an IP address")
    if wildcard_ok and ip.is_unspecified:
        return ip
    if not any(ip in net for net in TEST_NETWORKS):
        fail(f"{ip} is neither loopback nor an address of the test network")
    return ip


def parse_endpoint(target, wildcard_ok=False):
    """'1.2.3.4:80' or '[::1]:80' -> (ip, port)."""
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        fail(f"{target!r} is not ADDR:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return parse_addr(host, wildcard_ok), int(port)


def family(ip):
    return socket.AF_INET6 if ip.version == 6 else socket.AF_INET


def lifetime(args, i):
    if len(args) <= i:
        return DEFAULT_LIFETIME
    try:
        s = float(args[i])
    except ValueError:
        fail(f"{args[i]!r} is not a number of seconds")
    if not 0 < s <= MAX_LIFETIME:
        fail(f"lifetime must be in (0, {MAX_LIFETIME:.0f}] seconds")
    return s


def bound_socket(ip, port, kind):
    s = socket.socket(family(ip), kind)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if ip.version == 6:
        # "[::]" serves IPv4 too, whatever the namespace's bindv6only default.
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind((str(ip), port))
    return s


def until(deadline):
    """Seconds left before `deadline`, or None once it has passed."""
    left = deadline - time.monotonic()
    return left if left > 0 else None


def serve(target, token, seconds):
    ip, port = parse_endpoint(target, wildcard_ok=True)
    payload = token.encode()
    deadline = time.monotonic() + seconds
    with bound_socket(ip, port, socket.SOCK_STREAM) as srv:
        srv.listen(16)
        while (left := until(deadline)) is not None:
            srv.settimeout(left)
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                break
            with conn:
                conn.settimeout(CONNECT_TIMEOUT)
                try:
                    conn.sendall(payload)
                except OSError:
                    pass


def unix_serve(path, token, seconds):
    import os
    parent = os.getppid()
    payload = token.encode()
    deadline = time.monotonic() + seconds
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as srv:
        srv.bind(path)
        os.chmod(path, 0o777)
        srv.listen(16)
        # Short waits, so the end of the launch that needed it ends it too.
        while until(deadline) is not None and os.getppid() == parent:
            srv.settimeout(0.1)
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(CONNECT_TIMEOUT)
                try:
                    conn.sendall(payload)
                except OSError:
                    pass


def labels_end(msg, pos):
    """Offset just past the (uncompressed) name starting at `pos`, or None."""
    while pos < len(msg):
        n = msg[pos]
        if n == 0:
            return pos + 1
        if n & 0xC0:
            return None
        pos += 1 + n
    return None


def qname(msg, pos):
    """The (uncompressed, already checked) name at `pos`, lower-case, dotted."""
    labels = []
    while msg[pos]:
        n = msg[pos]
        labels.append(msg[pos + 1 : pos + 1 + n].decode("ascii", "replace").lower())
        pos += 1 + n
    return ".".join(labels)


def dns_reply(query, names=None):
    """The reply to one DNS query, or None for anything that is not one.
    `names` maps lower-case names (no trailing dot) to the IPv4 address
    their A query gets; any other name gets ANSWER."""
    if len(query) < 12:
        return None
    qid, flags, qdcount = struct.unpack(">HHH", query[:6])
    if flags & 0x8000 or (flags >> 11) & 0xF or qdcount < 1:
        return None  # a response, a non-QUERY opcode, or no question
    name_end = labels_end(query, 12)
    if name_end is None or name_end + 4 > len(query):
        return None
    question = query[12 : name_end + 4]
    qtype, qclass = struct.unpack(">HH", question[-4:])
    answers = b""
    if qtype == 1 and qclass == 1:
        # Name as a pointer to the question (offset 12), A, IN, TTL 30, 4 bytes.
        addr = (names or {}).get(qname(query, 12), ANSWER)
        answers = struct.pack(">HHHIH", 0xC00C, 1, 1, 30, 4) + socket.inet_aton(addr)
    # QR, the query's RD, RA; NOERROR (no answer for other types: NODATA).
    rflags = 0x8000 | (flags & 0x0100) | 0x0080
    header = struct.pack(">HHHHHH", qid, rflags, 1, 1 if answers else 0, 0, 0)
    return header + question + answers


def dns_names(pairs):
    """NAME=IP arguments -> {name: ip}; each IP an IPv4 address of the test network."""
    names = {}
    for pair in pairs:
        name, sep, addr = pair.partition("=")
        if not sep or not name:
            fail(f"{pair!r} is not NAME=IP")
        ip = parse_addr(addr, wildcard_ok=False)
        if ip.version != 4:
            fail(f"{pair!r}: A answers are IPv4 addresses")
        names[name.lower().rstrip(".")] = str(ip)
    return names


def dns(addr, seconds, names=None):
    ip = parse_addr(addr, wildcard_ok=True)
    deadline = time.monotonic() + seconds
    with bound_socket(ip, 53, socket.SOCK_DGRAM) as srv:
        while (left := until(deadline)) is not None:
            srv.settimeout(left)
            try:
                query, peer = srv.recvfrom(512)
            except socket.timeout:
                break
            reply = dns_reply(query, names)
            if reply is not None:
                srv.sendto(reply, peer)


WEB_IDLE = 10.0
TRICKLE_EVERY = 0.1


def web(target, root, seconds, tls=None):
    """Serve the files under `root` at `target` (a test address) for `seconds`."""
    import functools
    import http.server
    import os
    import socketserver
    import threading

    ip, port = parse_endpoint(target, wildcard_ok=False)
    if not os.path.isdir(root):
        fail(f"{root!r} is not a directory")
    deadline = time.monotonic() + seconds

    class Handler(http.server.SimpleHTTPRequestHandler):
        timeout = WEB_IDLE

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if path == "/trickle":
                self.trickle()
            elif path.startswith("/smart/"):
                self.smart(path)
            elif path == "/user" or path.startswith("/private/"):
                self.authenticated(path)
            elif path == "/front" or ("://" in path and path.endswith("/front")):
                self.front()
            elif path == "/host":
                body = f"{self.headers.get('Host', '')}\n".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                super().do_GET()

        def do_POST(self):
            path = self.path.split("?", 1)[0]
            if path == "/v1/oauth/token":
                self.token()
            elif path.startswith("/smart/"):
                self.smart(path)
            else:
                self.send_error(405)

        def token(self):
            """A refresh token endpoint: a refresh token listed in
            DIR/../oauth-refresh is exchanged (once) for a new access token
            (added to DIR/../auth-token) and a new refresh token (replacing
            the list); each exchange a line of DIR/../oauth-issued."""
            import json
            import secrets

            base = os.path.join(root, os.pardir)
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                req = json.loads(raw)
                with open(os.path.join(base, "oauth-refresh")) as f:
                    valid = {t.strip() for t in f if t.strip()}
            except (ValueError, OSError):
                req, valid = {}, set()
            if req.get("grant_type") == "refresh_token" and req.get("refresh_token") in valid:
                access = "sk-ant-oat01-" + secrets.token_hex(20)
                refresh = "sk-ant-ort01-" + secrets.token_hex(20)
                with open(os.path.join(base, "auth-token"), "a") as f:
                    f.write(access + "\n")
                with open(os.path.join(base, "oauth-refresh"), "w") as f:
                    f.write(refresh + "\n")
                with open(os.path.join(base, "oauth-issued"), "a") as f:
                    f.write(f"{access} {refresh}\n")
                status, answer = 200, {
                    "token_type": "Bearer",
                    "access_token": access,
                    "refresh_token": refresh,
                    "expires_in": 28800,
                    "scope": "user:inference user:profile",
                }
            else:
                status, answer = 400, {"error": "invalid_grant", "got": raw.decode(errors="replace")}
            body = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def smart(self, path):
            """Git's smart HTTP (fetch and push) of the repositories under
            the root, by git-http-backend as CGI; a token is needed."""
            import subprocess

            if not self.token_sent():
                return
            n = int(self.headers.get("Content-Length") or 0)
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                body = self.chunked_body()
            else:
                body = self.rfile.read(n) if n else b""
            env = {
                "PATH": "/usr/bin:/bin",
                "GIT_PROJECT_ROOT": root,
                "GIT_HTTP_EXPORT_ALL": "1",
                "REMOTE_USER": "octo",
                "REMOTE_ADDR": self.client_address[0],
                "PATH_INFO": path[len("/smart") :],
                "QUERY_STRING": self.path.partition("?")[2],
                "REQUEST_METHOD": self.command,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                "HTTP_GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": "/dev/null",
            }
            r = subprocess.run(
                ["git", "http-backend"], input=body, env=env, capture_output=True, timeout=60
            )
            head, _, out = r.stdout.partition(b"\r\n\r\n")
            if not _:
                head, _, out = r.stdout.partition(b"\n\n")
            fields = [l.split(b":", 1) for l in head.splitlines() if b":" in l]
            status = [v.strip() for k, v in fields if k.strip().lower() == b"status"]
            code = int(status[0].split()[0]) if status else (200 if r.returncode == 0 else 500)
            self.send_response(code)
            for k, v in fields:
                if k.strip().lower() != b"status":
                    self.send_header(k.strip().decode(), v.strip().decode())
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def chunked_body(self):
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():
                        pass
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()

        def token_sent(self):
            """Whether a listed token came; if not, 401 is answered."""
            import base64

            try:
                with open(os.path.join(root, os.pardir, "auth-token")) as f:
                    tokens = {t.strip() for t in f if t.strip()}
            except OSError:
                tokens = set()
            auth = self.headers.get("Authorization", "")
            key = self.headers.get("x-api-key", "") or self.headers.get("PRIVATE-TOKEN", "")
            sent = {key}
            scheme, _, param = auth.partition(" ")
            if scheme.lower() in ("token", "bearer"):
                sent.add(param.strip())
            elif scheme.lower() == "basic":
                try:
                    sent.add(base64.b64decode(param).decode().partition(":")[2])
                except ValueError:
                    pass
            if tokens & (sent - {""}):
                return True
            body = f"got: {auth or key}\n".encode()
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="test"')
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return False

        def front(self):
            """A shared front that routes by host (issue #45): the backend
            an absolute target, X-Forwarded-Host or the first Host header
            names, how many Host headers came, and whether a listed token
            came with it (never the value)."""
            from urllib.parse import urlsplit

            hosts = self.headers.get_all("Host") or []
            absolute = urlsplit(self.path).netloc if "://" in self.path else ""
            backend = absolute or self.headers.get("X-Forwarded-Host") or (hosts[0] if hosts else "")
            try:
                with open(os.path.join(root, os.pardir, "auth-token")) as f:
                    tokens = {t.strip() for t in f if t.strip()}
            except OSError:
                tokens = set()
            scheme, _, param = self.headers.get("Authorization", "").partition(" ")
            real = "yes" if param.strip() in tokens else "no"
            body = f"backend={backend} hosts={len(hosts)} real={real}\n".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def authenticated(self, path):
            if not self.token_sent():
                return
            if path == "/user":
                body = b"authenticated\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self.path = self.path[len("/private") :]
                super().do_GET()

        def trickle(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            try:
                while until(deadline) is not None:
                    self.wfile.write(b".")
                    self.wfile.flush()
                    time.sleep(TRICKLE_EVERY)
            except OSError:
                pass  # the client went

        def log_message(self, format, *args):
            pass

    class Server(http.server.ThreadingHTTPServer):
        address_family = family(ip)
        daemon_threads = True
        request_queue_size = 16

        def server_bind(self):
            # HTTPServer's own asks DNS for the address's name (getfqdn),
            # which in a test namespace waits for a resolver that is not there.
            socketserver.TCPServer.server_bind(self)
            self.server_name, self.server_port = str(ip), port

    handler = functools.partial(Handler, directory=root)
    with Server((str(ip), port), handler) as srv:
        if tls:
            import ssl

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            # The handshake happens in the connection's thread (on its first
            # read), so a client that never speaks TLS blocks nobody else.
            srv.socket = ctx.wrap_socket(
                srv.socket, server_side=True, do_handshake_on_connect=False
            )
        stop = threading.Timer(seconds, srv.shutdown)
        stop.daemon = True
        stop.start()
        srv.serve_forever(poll_interval=0.1)


VIA_MODES = ("device", "ifindex", "unicast-if", "pktinfo")


def split_via(args, modes):
    """(MODE or None, the other arguments) of `[--via MODE] ARGS...`."""
    if args[:1] != ["--via"]:
        return None, args
    if len(args) < 2 or args[1] not in modes:
        fail(f"--via takes one of {', '.join(modes)}")
    return args[1], args[2:]


def default_iface():
    """The interface of the IPv4 default route (/proc/net/route)."""
    with open("/proc/net/route") as f:
        for line in f.read().splitlines()[1:]:
            cols = line.split()
            if len(cols) > 7 and cols[1] == "00000000" and cols[7] == "00000000":
                return cols[0]
    fail("no IPv4 default route to take the interface of")


def bind_via(s, mode):
    """Name the default route's interface to socket `s` as `mode` says
    (pktinfo: nothing here, see pktinfo_cmsg)."""
    iface = default_iface()
    if mode == "device":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, iface.encode())
    elif mode == "ifindex":
        SO_BINDTOIFINDEX = 62
        idx = socket.if_nametoindex(iface)
        s.setsockopt(socket.SOL_SOCKET, SO_BINDTOIFINDEX, struct.pack("=I", idx))
    elif mode == "unicast-if":
        IP_UNICAST_IF = 50
        idx = socket.if_nametoindex(iface)
        s.setsockopt(socket.IPPROTO_IP, IP_UNICAST_IF, struct.pack(">I", idx))


def pktinfo_cmsg():
    """An IP_PKTINFO control message naming the default route's interface."""
    IP_PKTINFO = 8
    idx = socket.if_nametoindex(default_iface())
    return [(socket.IPPROTO_IP, IP_PKTINFO, struct.pack("=I4s4s", idx, bytes(4), bytes(4)))]


def connect(targets, via=None):
    # Every target is checked before the first packet is sent.
    parsed = [(t, *parse_endpoint(t)) for t in targets]
    for text, ip, port in parsed:
        with socket.socket(family(ip), socket.SOCK_STREAM) as s:
            s.settimeout(CONNECT_TIMEOUT)
            try:
                if via:
                    bind_via(s, via)
                s.connect((str(ip), port))
            except OSError as e:
                print(f"{text} BLOCKED {type(e).__name__}: {e}", flush=True)
                continue
            # Connected: the target was reached. Show what it sent, if anything.
            got = b""
            deadline = time.monotonic() + CONNECT_TIMEOUT
            try:
                while len(got) < 4096 and (left := until(deadline)) is not None:
                    s.settimeout(left)
                    chunk = s.recv(4096 - len(got))
                    if not chunk:
                        break
                    got += chunk
            except OSError:
                pass
            print(f"{text} REACHED {got.decode(errors='replace')}", flush=True)


def dns_query(name):
    """A recursive A query for `name`, id 0x4e50."""
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split("."))
    return struct.pack(">HHHHHH", 0x4E50, 0x0100, 1, 0, 0, 0) + labels + b"\0" + struct.pack(">HH", 1, 1)


def first_a(reply):
    """The first A record's address in `reply` (names compressed to the question)."""
    if len(reply) < 12 or struct.unpack(">H", reply[:2])[0] != 0x4E50:
        return None
    ancount = struct.unpack(">H", reply[6:8])[0]
    end = labels_end(reply, 12)
    pos = end + 4 if end else len(reply)
    for _ in range(ancount):
        if pos + 12 > len(reply) or reply[pos] & 0xC0 != 0xC0:
            return None
        rtype, _, _, rdlen = struct.unpack(">HHIH", reply[pos + 2 : pos + 12])
        if rtype == 1 and rdlen == 4 and pos + 16 <= len(reply):
            return socket.inet_ntoa(reply[pos + 12 : pos + 16])
        pos += 12 + rdlen
    return None


def query(addr, name, via=None):
    ip = parse_addr(addr, wildcard_ok=False)
    if ip.version != 4:
        fail("query is IPv4 only")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(CONNECT_TIMEOUT)
        try:
            if via and via != "pktinfo":
                bind_via(s, via)
            cmsg = pktinfo_cmsg() if via == "pktinfo" else []
            s.sendmsg([dns_query(name)], cmsg, 0, (str(ip), 53))
            answer = first_a(s.recv(512))
        except OSError as e:
            print(f"NOANSWER {type(e).__name__}: {e}", flush=True)
            return
    print(answer or "NOANSWER no A record", flush=True)


def resolve(name):
    try:
        infos = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)
        print(infos[0][4][0])
    except OSError as e:
        print(f"NORESOLVE {e}")


def echo_request(conn, buf):
    """The next whole request on `conn` (buf: bytes already read), and what
    follows it; None when the client closed or went quiet."""
    def more():
        chunk = conn.recv(65536)
        if not chunk:
            raise EOFError
        return chunk

    try:
        while b"\r\n\r\n" not in buf:
            buf += more()
        head, _, rest = buf.partition(b"\r\n\r\n")
        head += b"\r\n\r\n"
        fields = [line.split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line]
        te = [v.strip().lower() for k, v in fields if k.strip().lower() == b"transfer-encoding"]
        cl = [v.strip() for k, v in fields if k.strip().lower() == b"content-length"]
        if te and te[-1].endswith(b"chunked"):
            body = b""
            while True:
                while b"\r\n" not in rest:
                    rest += more()
                line, _, rest = rest.partition(b"\r\n")
                size = int(line.split(b";")[0], 16)
                while len(rest) < size + 2:
                    rest += more()
                body += line + b"\r\n" + rest[: size + 2]
                rest = rest[size + 2 :]
                if size == 0:
                    return head + body, rest
        n = int(cl[0]) if cl else 0
        while len(rest) < n:
            rest += more()
        return head + rest[:n], rest[n:]
    except (EOFError, OSError, ValueError):
        return None


def echo(target, seconds):
    """HTTP/1.1 that answers each request with what reached it (see above)."""
    import threading

    ip, port = parse_endpoint(target, wildcard_ok=False)
    deadline = time.monotonic() + seconds
    count = [0]

    def serve_one(conn, n):
        with conn:
            conn.settimeout(WEB_IDLE)
            buf = b""
            while until(deadline) is not None:
                got = echo_request(conn, buf)
                if got is None:
                    return
                request, buf = got
                body = f"connection {n}\n".encode() + request
                head = f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n\r\n"
                try:
                    conn.sendall(head.encode() + body)
                except OSError:
                    return

    with bound_socket(ip, port, socket.SOCK_STREAM) as srv:
        srv.listen(16)
        while (left := until(deadline)) is not None:
            srv.settimeout(left)
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                break
            count[0] += 1
            threading.Thread(target=serve_one, args=(conn, count[0]), daemon=True).start()


def gather(port, path, seconds, groups):
    """Datagrams to PORT (unicast, broadcast, each multicast GROUP): a line
    of FILE each."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    for g in groups:
        mreq = struct.pack("4s4s", socket.inet_aton(g), bytes(4))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    deadline = time.monotonic() + seconds
    with open(path, "a") as out:
        while (left := until(deadline)) is not None:
            s.settimeout(left)
            try:
                data = s.recv(2048)
            except OSError:
                break
            out.write(data.decode(errors="replace") + "\n")
            out.flush()


def shout_target(target):
    """A target of shout: a test-network address, a multicast group or the
    limited broadcast (sent only from a test's own namespaces)."""
    host, sep, port = target.rpartition(":")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        fail(f"{target!r} is not ADDR:PORT")
    if not (ip.is_multicast or str(ip) == "255.255.255.255"):
        ip, _ = parse_endpoint(target)
    if ip.version != 4 or not port.isdigit():
        fail(f"{target!r} is not an IPv4 ADDR:PORT")
    return str(ip), int(port)


def iface_addr(iface):
    """The first IPv4 address of interface `iface` (SIOCGIFADDR)."""
    import fcntl
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("256s", iface.encode()[:15])
        return socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x8915, req)[20:24])


def shout(tag, targets):
    parsed = [(t, *shout_target(t)) for t in targets]
    for text, ip, port in parsed:
        for how in ("plain", "source", "mcif") + VIA_MODES:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
                    cmsg = []
                    if how == "source":
                        s.bind((iface_addr(default_iface()), 0))
                    elif how == "mcif":
                        addr = socket.inet_aton(iface_addr(default_iface()))
                        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, addr)
                    elif how == "pktinfo":
                        cmsg = pktinfo_cmsg()
                    elif how != "plain":
                        bind_via(s, how)
                    s.sendmsg([f"{tag} {text} {how}".encode()], cmsg, 0, (ip, port))
                except OSError as e:
                    print(f"{how} {text} refused {type(e).__name__}: {e}", flush=True)
                    continue
            print(f"{how} {text} sent", flush=True)


def main(args):
    cmd = args[0] if args else ""
    if cmd == "serve" and len(args) in (3, 4):
        serve(args[1], args[2], lifetime(args, 3))
    elif cmd == "dns" and len(args) >= 2:
        # SECONDS is optional: the first NAME=IP ends the fixed arguments.
        fixed = 3 if len(args) > 2 and "=" not in args[2] else 2
        dns(args[1], lifetime(args[:fixed], 2), dns_names(args[fixed:]))
    elif cmd == "connect" and len(args) >= 2:
        via, targets = split_via(args[1:], ("device", "ifindex"))
        if not targets:
            sys.exit(__doc__)
        connect(targets, via)
    elif cmd == "query" and len(args) >= 3:
        via, rest = split_via(args[1:], VIA_MODES)
        if len(rest) != 2:
            sys.exit(__doc__)
        query(rest[0], rest[1], via)
    elif cmd == "resolve" and len(args) == 2:
        resolve(args[1])
    elif cmd == "unix-serve" and len(args) in (3, 4):
        unix_serve(args[1], args[2], lifetime(args, 3))
    elif cmd == "web" and len(args) >= 3:
        rest = args[3:]
        tls = None
        if len(rest) >= 3 and rest[-3] == "--tls":
            tls = (rest[-2], rest[-1])
            rest = rest[:-3]
        if len(rest) > 1:
            sys.exit(__doc__)
        web(args[1], args[2], lifetime(args[:3] + rest, 3), tls)
    elif cmd == "echo" and len(args) in (2, 3):
        echo(args[1], lifetime(args, 2))
    elif cmd == "gather" and len(args) >= 4 and args[1].isdigit():
        gather(int(args[1]), args[2], lifetime(args, 3), args[4:])
    elif cmd == "shout" and len(args) >= 3:
        shout(args[1], args[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
