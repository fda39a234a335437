#!/usr/bin/env python3
"""faultproxy.py - a loopback proxy between an operator and the kube-apiserver
that injects the faults the fault tests need (test/e2e/fault_*_test.sh).

Two modes:

  tcp   (default) bytes pass through untouched, TLS included, so the client
        still verifies the apiserver's own certificate. Faults: "drop" kills
        live connections at random (RST) and refuses some new ones; "refuse"
        refuses every new connection.

  http  (--cert/--key given) terminates TLS with a certificate the test
        signed with the cluster's CA (so the client keeps verifying), speaks
        HTTP/1.1 to the client and forwards each request over TLS (verified
        against --upstream-ca) to the apiserver. Faults: "error" answers
        requests with --code (429 with Retry-After, 500, ...) instead of
        forwarding them; "gone" answers watches with 200 and a 410 Expired
        ERROR event, as the apiserver does for a compacted resourceVersion;
        "eof" answers watches with 200 and an empty stream; "drop" closes
        client connections at random; "delay" holds every chunk of every
        watch stream (open or opened later) for --seconds before passing it
        on, in order: the client sees each event that much late, as behind
        a slow network or an overloaded apiserver. Every request is recorded
        (method, path, query, content type, Host, code, injected or not),
        and so is the server name (SNI) each TLS hello asked for.

Beside the mode, http mode takes one rule for one kind of request (a
method, a path regex, and optionally a content-type substring and a body
regex), which acts on the Nth matching request only, whatever the mode:
"drop" forwards it, reads the apiserver's whole answer (so the write is
committed) and then cuts the client's connection (RST) without passing the
answer on, as a network that loses a response does; "hold" keeps it for
--seconds before forwarding it, as a slow network or a stalled client does.

A control endpoint (plain HTTP on --control) sets the fault and reads the
counters; faults change for requests and connections from then on:

  GET /mode?set=pass|drop|refuse|error|gone|eof|delay[&code=500][&retry_after=1]
            [&ratio=1.0][&min=0.2][&max=2.0][&seconds=5]
  GET /rule?action=drop|hold&method=PATCH&path=REGEX[&ctype=SUBSTRING]
            [&body=REGEX][&nth=1][&seconds=5]
                                 set the rule (GET /rule alone clears it); its
                                 matches and firings show in /stats as "rule"
  GET /kill                      drop every live connection now (RST)
  GET /stats[?since=UNIX_TIME]   counters, SNI names, and requests per kind since a time
  GET /requests                  every request recorded (http mode), JSON lines

It prints "ready" on stdout once listening. Python 3 standard library only.
"""

import argparse
import json
import random
import re
import select
import socket
import ssl
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

HEAD_MAX = 64 << 10  # request and response heads
BODY_MAX = 8 << 20   # request bodies


class State:
    """What the control endpoint sets and the connections read; one lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.mode = "pass"
        self.code = 500
        self.retry_after = None
        self.ratio = 1.0
        self.drop_min = 0.2
        self.drop_max = 2.0
        self.delay = 0.0  # seconds watch chunks are held ("delay" mode)
        self.conns = set()
        self.connections = 0
        self.dropped = 0
        self.refused = 0
        self.requests = []  # dicts, in arrival order
        self.rule = None  # {"action", "method", "path", "ctype", "body", "nth", "seconds"}
        self.rule_matched = 0
        self.rule_fired = 0
        self.sni = {}  # server name the clients' TLS hellos asked for -> count (http mode)

    def snapshot(self):
        with self.lock:
            return self.mode, self.code, self.retry_after, self.ratio

    def match_rule(self, method, path, ctype, body):
        """match_rule counts a request the rule matches; the rule's action and
        seconds when this is its Nth match, else None."""
        with self.lock:
            r = self.rule
            if (r is None or method != r["method"] or not re.search(r["path"], path)
                    or r["ctype"] not in ctype
                    or (r["body"] and not re.search(r["body"], body.decode("latin-1")))):
                return None
            self.rule_matched += 1
            if self.rule_matched != r["nth"]:
                return None
            self.rule_fired += 1
            return r["action"], r["seconds"]

    def record(self, **req):
        req["t"] = time.time()
        with self.lock:
            self.requests.append(req)


STATE = State()


def abort(sock):
    """abort closes sock with a RST rather than a FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class Conn:
    """One client connection; kill() makes its thread drop it."""

    def __init__(self, client):
        self.client = client
        self.up = None
        self.killed = False

    def kill(self):
        self.killed = True
        for s in (self.client, self.up):
            if s is not None:
                try:
                    s.shutdown(socket.SHUT_RDWR)  # wakes the thread in select/recv
                except OSError:
                    pass

    def close(self):
        for s in (self.client, self.up):
            if s is not None:
                if self.killed:
                    abort(s)
                else:
                    try:
                        s.close()
                    except OSError:
                        pass
        with STATE.lock:
            STATE.conns.discard(self)
            if self.killed:
                STATE.dropped += 1


# ---- tcp mode -----------------------------------------------------------------


def pump_tcp(conn):
    a, b = conn.client, conn.up
    try:
        while not conn.killed:
            r, _, _ = select.select([a, b], [], [], 1.0)
            for s in r:
                data = s.recv(65536)
                if not data:
                    return
                (b if s is a else a).sendall(data)
    except OSError:
        pass
    finally:
        conn.close()


def serve_tcp(conn, upstream):
    try:
        conn.up = socket.create_connection(upstream, timeout=10)
        conn.up.settimeout(None)
    except OSError:
        conn.killed = True
        conn.close()
        return
    pump_tcp(conn)


# ---- http mode ----------------------------------------------------------------


class Reader:
    """Buffered reads from a (TLS) socket: lines, exact counts, heads."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError
        self.buf += data

    def pending(self):
        return bool(self.buf) or (hasattr(self.sock, "pending") and self.sock.pending() > 0)

    def head(self):
        while b"\r\n\r\n" not in self.buf:
            if len(self.buf) > HEAD_MAX:
                raise ValueError("head too big")
            self.fill()
        i = self.buf.index(b"\r\n\r\n") + 4
        h, self.buf = self.buf[:i], self.buf[i:]
        return h

    def line(self):
        while b"\r\n" not in self.buf:
            if len(self.buf) > HEAD_MAX:
                raise ValueError("line too long")
            self.fill()
        i = self.buf.index(b"\r\n") + 2
        ln, self.buf = self.buf[:i], self.buf[i:]
        return ln

    def exact(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def some(self):
        if not self.buf:
            self.fill()
        out, self.buf = self.buf, b""
        return out


def parse_head(raw):
    lines = raw.decode("latin-1").split("\r\n")
    first = lines[0].split(" ", 2)
    headers = []
    for ln in lines[1:]:
        if ln:
            k, _, v = ln.partition(":")
            headers.append((k.strip(), v.strip()))
    return first, headers


def header(headers, name):
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def build_head(first, headers):
    out = " ".join(first) + "\r\n"
    out += "".join(f"{k}: {v}\r\n" for k, v in headers)
    return (out + "\r\n").encode("latin-1")


def read_body(r, headers):
    """read_body returns a request body exactly as framed on the wire."""
    if (header(headers, "transfer-encoding") or "").lower() == "chunked":
        out = b""
        while True:
            ln = r.line()
            out += ln
            n = int(ln.split(b";")[0], 16)
            if n == 0:
                while True:  # trailers
                    t = r.line()
                    out += t
                    if t == b"\r\n":
                        return out
            out += r.exact(n + 2)
            if len(out) > BODY_MAX:
                raise ValueError("body too big")
    n = int(header(headers, "content-length") or 0)
    if n > BODY_MAX:
        raise ValueError("body too big")
    return r.exact(n)


def status_body(code, reason, message):
    return json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": message, "reason": reason, "code": code}).encode()


REASONS = {429: "TooManyRequests", 500: "InternalError", 502: "BadGateway",
           503: "ServiceUnavailable", 504: "Timeout"}


def send_injected_error(conn, code, retry_after):
    body = status_body(code, REASONS.get(code, "InternalError"), "injected by faultproxy")
    hdrs = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    if retry_after:
        hdrs.append(("Retry-After", str(retry_after)))
    text = {429: "Too Many Requests", 500: "Internal Server Error"}.get(code, "Error")
    conn.client.sendall(build_head(["HTTP/1.1", str(code), text], hdrs) + body)


def send_watch_stream(conn, events):
    """send_watch_stream answers a watch with 200 and the given event lines."""
    hdrs = [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")]
    out = build_head(["HTTP/1.1", "200", "OK"], hdrs)
    for ev in events:
        line = json.dumps(ev).encode() + b"\n"
        out += b"%x\r\n" % len(line) + line + b"\r\n"
    conn.client.sendall(out + b"0\r\n\r\n")


GONE_EVENT = {"type": "ERROR", "object": json.loads(status_body(
    410, "Expired", "too old resource version: injected by faultproxy"))}


class Delayer:
    """Delayer holds the pieces of one watch body for STATE.delay seconds (as
    it was when each came), in order. One thread: the relay loop flushes
    what is due and bounds its waits by the next due time."""

    def __init__(self, sock):
        self.sock = sock
        self.items = []  # (due, data)

    def put(self, data):
        with STATE.lock:
            delay = STATE.delay
        due = time.monotonic() + delay
        if self.items:
            due = max(due, self.items[-1][0])  # never overtake
        self.items.append((due, data))
        self.flush()

    def flush(self):
        now = time.monotonic()
        while self.items and self.items[0][0] <= now:
            self.sock.sendall(self.items.pop(0)[1])

    def timeout(self):
        if not self.items:
            return 1.0
        return min(1.0, max(0.0, self.items[0][0] - time.monotonic()))

    def finish(self):
        while self.items:
            time.sleep(self.timeout())
            self.flush()


def relay_body(conn, up, method, code, headers, watch=False, send=None):
    """relay_body copies one response body from upstream to the client as
    framed, watching for the client going away. False: close the connection.
    A watch's body goes through a Delayer, which in mode "delay" holds it.
    send, when given, takes the body instead of the client."""
    if method == "HEAD" or code in (204, 304) or 100 <= code < 200:
        return True
    client = conn.client
    delayer = Delayer(client) if watch and send is None else None
    if send is None:
        send = delayer.put if delayer else client.sendall
    ok = relay_framed(conn, up, headers, send, client, delayer)
    if delayer:
        delayer.finish()
    return ok


def relay_framed(conn, up, headers, send, client, delayer):

    def wait_upstream():
        # Block until upstream has bytes; notice a client that hung up.
        while not up.pending():
            if delayer:
                delayer.flush()
            r, _, _ = select.select([up.sock, client], [], [], delayer.timeout() if delayer else 1.0)
            if conn.killed:
                raise EOFError
            if client in r:
                # Readable while we wait for the upstream: the client hung up
                # (HTTP/1.1 clients do not pipeline), unless the record was
                # not application data, which a non-blocking read tells.
                client.setblocking(False)
                try:
                    client.recv(1)
                    raise EOFError
                except (ssl.SSLWantReadError, BlockingIOError):
                    pass
                except (OSError, ssl.SSLError):
                    raise EOFError
                finally:
                    client.setblocking(True)
            if up.sock in r:
                return

    if (header(headers, "transfer-encoding") or "").lower() == "chunked":
        while True:
            wait_upstream()
            ln = up.line()
            n = int(ln.split(b";")[0], 16)
            if n == 0:
                trailer = b""
                while True:
                    t = up.line()
                    trailer += t
                    if t == b"\r\n":
                        break
                send(ln + trailer)
                return True
            data = up.exact(n + 2)
            send(ln + data)
    cl = header(headers, "content-length")
    if cl is not None:
        left = int(cl)
        while left > 0:
            wait_upstream()
            data = up.some()
            if len(data) > left:
                raise ValueError("upstream sent more than its content-length")
            left -= len(data)
            send(data)
        return True
    while True:  # neither: until the upstream closes
        try:
            wait_upstream()
            send(up.some())
        except EOFError:
            return False


def connect_upstream(upstream, ctx):
    raw = socket.create_connection(upstream, timeout=10)
    s = ctx.wrap_socket(raw, server_hostname=upstream[0])
    s.settimeout(None)
    return s


def serve_http(conn, upstream, up_ctx):
    cr = Reader(conn.client)
    up = None
    try:
        while not conn.killed:
            try:
                raw = cr.head()
            except (EOFError, OSError, ssl.SSLError):
                return
            first, headers = parse_head(raw)
            if len(first) != 3:
                return
            method, target, _ = first
            if (header(headers, "expect") or "").lower() == "100-continue":
                conn.client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                headers = [(k, v) for k, v in headers if k.lower() != "expect"]
            body = read_body(cr, headers)
            u = urlsplit(target)
            q = parse_qs(u.query)
            watch = q.get("watch", [""])[0] in ("true", "1")
            rec = {"method": method, "path": u.path, "query": u.query, "watch": watch,
                   "content_type": header(headers, "content-type") or "",
                   "host": header(headers, "host") or ""}
            mode, code, retry_after, ratio = STATE.snapshot()
            fired = STATE.match_rule(method, u.path, rec["content_type"], body)
            if fired and fired[0] == "hold":
                time.sleep(fired[1])
                rec["fault"] = "hold"
            if mode == "error" and random.random() < ratio:
                send_injected_error(conn, code, retry_after)
                STATE.record(code=code, injected=True, **rec)
                continue
            if mode == "gone" and watch:
                send_watch_stream(conn, [GONE_EVENT])
                STATE.record(code=200, injected=True, **rec)
                continue
            if mode == "eof" and watch:
                send_watch_stream(conn, [])
                STATE.record(code=200, injected=True, **rec)
                continue
            if up is None:
                try:
                    conn.up = connect_upstream(upstream, up_ctx)
                except (OSError, ssl.SSLError):
                    STATE.record(code=0, injected=False, **rec)
                    return  # as if the apiserver were unreachable
                up = Reader(conn.up)
            conn.up.sendall(build_head(first, headers) + body)
            try:
                resp = up.head()
            except (EOFError, OSError, ssl.SSLError):
                STATE.record(code=0, injected=False, **rec)
                return
            rfirst, rheaders = parse_head(resp)
            rcode = int(rfirst[1])
            if fired and fired[0] == "drop":
                # The whole answer is read (the write is done), then lost.
                relay_body(conn, up, method, rcode, rheaders, send=lambda data: None)
                STATE.record(code=rcode, injected=True, fault="drop-response", **rec)
                conn.killed = True
                return
            STATE.record(code=rcode, injected="fault" in rec, **rec)
            conn.client.sendall(resp)
            if not relay_body(conn, up, method, rcode, rheaders, watch):
                return
            if (header(rheaders, "connection") or "").lower() == "close":
                return
    except (EOFError, OSError, ssl.SSLError, ValueError):
        return
    finally:
        conn.close()


def tls_handshake_then(conn, ctx, upstream, up_ctx):
    try:
        conn.client.settimeout(10)
        conn.client = ctx.wrap_socket(conn.client, server_side=True)
        conn.client.settimeout(None)
    except (OSError, ssl.SSLError):
        conn.close()
        return
    serve_http(conn, upstream, up_ctx)


# ---- accept, drop -------------------------------------------------------------


def accept_loop(listener, args, ctx, up_ctx):
    upstream = (args.upstream_host, args.upstream_port)
    while True:
        client, _ = listener.accept()
        mode, _, _, ratio = STATE.snapshot()
        with STATE.lock:
            STATE.connections += 1
        if mode == "refuse" or (mode == "drop" and random.random() < 0.2 * ratio):
            with STATE.lock:
                STATE.refused += 1
            abort(client)
            continue
        conn = Conn(client)
        with STATE.lock:
            STATE.conns.add(conn)
        if ctx is None:
            target, targs = serve_tcp, (conn, upstream)
        else:
            target, targs = tls_handshake_then, (conn, ctx, upstream, up_ctx)
        threading.Thread(target=target, args=targs, daemon=True).start()


def dropper():
    """While the mode is drop, kill a random live connection every min..max s."""
    while True:
        with STATE.lock:
            mode, lo, hi = STATE.mode, STATE.drop_min, STATE.drop_max
        time.sleep(random.uniform(lo, hi) if mode == "drop" else 0.2)
        with STATE.lock:
            if STATE.mode != "drop" or not STATE.conns:
                continue
            victim = random.choice(list(STATE.conns))
        victim.kill()


# ---- control ------------------------------------------------------------------


class Control(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def reply(self, obj, text=None):
        body = (text if text is not None else json.dumps(obj) + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        u = urlsplit(self.path)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        if u.path == "/mode":
            with STATE.lock:
                STATE.mode = q.get("set", "pass")
                STATE.code = int(q.get("code", 500))
                STATE.retry_after = int(q["retry_after"]) if "retry_after" in q else None
                STATE.ratio = float(q.get("ratio", 1.0))
                STATE.drop_min = float(q.get("min", 0.2))
                STATE.drop_max = float(q.get("max", 2.0))
                STATE.delay = float(q.get("seconds", 5.0)) if STATE.mode == "delay" else 0.0
            self.reply({"mode": STATE.mode})
        elif u.path == "/rule":
            rule = None
            if "action" in q:
                if q["action"] not in ("drop", "hold") or "method" not in q or "path" not in q:
                    self.send_error(400, "action drop|hold, method and path are needed")
                    return
                rule = {"action": q["action"], "method": q["method"], "path": q["path"],
                        "ctype": q.get("ctype", ""), "body": q.get("body", ""),
                        "nth": int(q.get("nth", 1)), "seconds": float(q.get("seconds", 5.0))}
            with STATE.lock:
                STATE.rule = rule
                STATE.rule_matched = 0
                STATE.rule_fired = 0
            self.reply({"rule": rule})
        elif u.path == "/kill":
            with STATE.lock:
                victims = list(STATE.conns)
            for c in victims:
                c.kill()
            self.reply({"killed": len(victims)})
        elif u.path == "/stats":
            since = float(q.get("since", 0))
            with STATE.lock:
                reqs = [r for r in STATE.requests if r["t"] >= since]
                out = {"now": time.time(), "mode": STATE.mode, "connections": STATE.connections,
                       "live": len(STATE.conns), "dropped": STATE.dropped,
                       "refused": STATE.refused, "requests": len(STATE.requests),
                       "rule": {"matched": STATE.rule_matched, "fired": STATE.rule_fired},
                       "sni": dict(STATE.sni)}
            by = {}
            for r in reqs:
                kind = "watch" if r["watch"] else r["method"]
                key = f'{kind} {r["code"]}{" injected" if r["injected"] else ""}'
                by[key] = by.get(key, 0) + 1
            out["since"] = {"requests": len(reqs),
                            "injected": sum(1 for r in reqs if r["injected"]),
                            "by_kind": by}
            self.reply(out)
        elif u.path == "/requests":
            with STATE.lock:
                text = "".join(json.dumps(r) + "\n" for r in STATE.requests)
            self.reply(None, text)
        else:
            self.send_error(404)


def count_sni(sock, name, ctx):
    """count_sni counts the server name (SNI) of a client's hello, "" for none."""
    with STATE.lock:
        STATE.sni[name or ""] = STATE.sni.get(name or "", 0) + 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--listen", type=int, required=True, help="port on 127.0.0.1")
    ap.add_argument("--upstream", required=True, help="HOST:PORT of the apiserver")
    ap.add_argument("--control", type=int, required=True, help="control port on 127.0.0.1")
    ap.add_argument("--cert", help="serving certificate (http mode)")
    ap.add_argument("--key", help="its key")
    ap.add_argument("--upstream-ca", help="CA that signed the apiserver's certificate")
    args = ap.parse_args()
    args.upstream_host, _, port = args.upstream.rpartition(":")
    args.upstream_port = int(port)

    ctx = up_ctx = None
    if args.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        ctx.set_alpn_protocols(["http/1.1"])
        ctx.sni_callback = count_sni
        up_ctx = ssl.create_default_context(cafile=args.upstream_ca)
        up_ctx.set_alpn_protocols(["http/1.1"])

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.listen))
    listener.listen(256)
    control = ThreadingHTTPServer(("127.0.0.1", args.control), Control)
    control.daemon_threads = True
    threading.Thread(target=control.serve_forever, daemon=True).start()
    threading.Thread(target=dropper, daemon=True).start()
    sys.stdout.write("ready\n")  # one write, also when unbuffered
    sys.stdout.flush()
    accept_loop(listener, args, ctx, up_ctx)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
