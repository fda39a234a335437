#!/usr/bin/env python3
"""ctf_api_abuse_test.py - hostile clients against the CTF operator's instance
API and its metrics/probe port, with raw sockets (run by
ctf_api_abuse_test.sh, which passes API_PORT, METRICS_PORT, OP_PID,
ADMIN_TOKEN and PASSED_FILE).

A well-behaved client always connects from 127.0.0.1; abusers connect from
other loopback addresses (127.0.0.0/8 all reach a server on 127.0.0.1), so
a per-address cap can be seen to hold them without touching the others.
Checks print "ok N - what" or raise; every wait is bounded and generous,
and no duration is asserted except "answered within the bound".
"""
import os
import resource
import socket
import sys
import time

from e2e_check import Fail, check, log, ok

API_PORT = int(os.environ["API_PORT"])
METRICS_PORT = int(os.environ["METRICS_PORT"])
OP_PID = int(os.environ["OP_PID"])
ADMIN = os.environ["ADMIN_TOKEN"]
ANSWER_S = 10  # a well-behaved request is answered within this, whatever the abuse
API_IDLE_S = 20  # the servers' idle timeouts (operators/ctf/api/internal.h, src/manager.c)
PROBE_IDLE_S = 10


def exchange(port, payload, src="127.0.0.1", timeout=ANSWER_S):
    """Sends payload on a new connection from src; returns the HTTP status the
    server answered (0: it closed the connection without an answer)."""
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((src, 0))
    try:
        s.connect(("127.0.0.1", port))
        try:
            s.sendall(payload)
        except OSError:
            pass  # the server may close before reading it all: fine
        data = b""
        while b"\r\n" not in data:
            try:
                chunk = s.recv(4096)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        raise Fail(f"no answer within {timeout}s to {payload[:60]!r}...")
    finally:
        s.close()
    if not data:
        return 0
    parts = data.split(b" ", 2)
    check(parts[0].startswith(b"HTTP/1."), f"not an HTTP answer: {data[:80]!r}")
    return int(parts[1])


def get(port, path, token=None, src="127.0.0.1"):
    hdr = f"Authorization: Bearer {token}\r\n" if token else ""
    return exchange(port, f"GET {path} HTTP/1.1\r\nHost: x\r\n{hdr}Connection: close\r\n\r\n".encode(), src)


def served(what):
    """The well-behaved client is served on both ports, within ANSWER_S each."""
    t0 = time.monotonic()
    check(get(API_PORT, "/") == 200, f"the page was not served {what}")
    check(get(API_PORT, "/api/v1/challenges", ADMIN) == 200, f"the API was not served {what}")
    check(get(METRICS_PORT, "/healthz") == 200, f"/healthz was not served {what}")
    check(get(METRICS_PORT, "/readyz") == 200, f"/readyz was not served {what}")
    return time.monotonic() - t0


def threads():
    with open(f"/proc/{OP_PID}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise Fail("no Threads line for the operator")


MALFORMED = [
    ("an empty method", b" / HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("a lone method", b"GET\r\n\r\n"),
    ("blank lines before the request line", b"\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("an odd method", b"FR\x00B / HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("a 64 KiB method", b"A" * 65536 + b" / HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("a 200 KiB path", b"GET /" + b"a" * 200000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("an unknown version", b"GET / HTTP/9.9\r\nHost: x\r\n\r\n"),
    ("HTTP/1.1 without Host", b"GET / HTTP/1.1\r\n\r\n"),
    ("10,000 headers", b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 10000 + b"\r\n"),
    ("a 200 KiB header", b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 200000 + b"\r\n\r\n"),
    ("a header without a colon", b"GET / HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n"),
    ("a bare LF request", b"GET / HTTP/1.1\nHost: x\n\n"),
    ("a body longer than its length", b"PUT /api/v1/teams/a/instances/web HTTP/1.1\r\nHost: x\r\n"
     b"Content-Length: 2\r\nAuthorization: Bearer x\r\n\r\n{}{}{}{}"),
    ("a negative content length", b"PUT /api/v1/teams/a/instances/web HTTP/1.1\r\nHost: x\r\n"
     b"Content-Length: -5\r\n\r\n"),
    ("a bad chunked body", b"PUT /api/v1/teams/a/instances/web HTTP/1.1\r\nHost: x\r\n"
     b"Transfer-Encoding: chunked\r\n\r\nzz\r\n"),
]


def test_malformed():
    log("malformed request lines and headers, on both ports")
    for port, name in ((API_PORT, "API"), (METRICS_PORT, "probe port")):
        for what, payload in MALFORMED:
            code = exchange(port, payload)
            lenient = what in ("a bare LF request", "blank lines before the request line")
            right = code == 0 or 400 <= code < 500 or (lenient and code in (200, 404)) or (
                what == "an unknown version" and code == 505)  # HTTP Version Not Supported
            check(right, f"{name}: {what}: answered {code}")
            served(f"after {what} on the {name}")
        ok(f"{name}: {len(MALFORMED)} malformed requests each get a 4xx or a closed connection; "
           "service goes on after each")
    code = exchange(API_PORT, b"GET / HTTP/1.0\r\n\r\n")
    check(code == 200, f"HTTP/1.0 without Host: {code}")
    ok("HTTP/1.0 without Host is still served (Host is optional there)")


class Herd:
    """Many connections from the given source addresses that send a request
    line and then nothing (idle), or a byte now and then (drip)."""

    def __init__(self, port, sources, per_source):
        self.started = time.monotonic()
        self.socks = []
        self.refused = 0
        for src in sources:
            for _ in range(per_source):
                s = socket.socket()
                s.setblocking(True)
                s.settimeout(5)
                s.bind((src, 0))
                try:
                    s.connect(("127.0.0.1", port))
                    s.sendall(b"GET / HTTP/1.1\r\n")
                    self.socks.append(s)
                except OSError:
                    self.refused += 1
                    s.close()

    def open_count(self):
        """How many the server still holds open (a closed one reads EOF or errs)."""
        alive = 0
        for s in self.socks:
            s.setblocking(False)
            try:
                alive += s.recv(1, socket.MSG_PEEK) != b""
            except BlockingIOError:
                alive += 1
            except OSError:
                pass
        return alive

    def held(self, cap, idle_s):
        """How many the server holds once it has caught up with the connects:
        the kernel completes a handshake before the server accepts (and, over
        the cap, closes) it, so a busy server shows more for a moment. Polled
        until at most cap, but only while the herd's first connection cannot
        yet have met the server's idle timeout, so that timeout cannot pass
        the check."""
        deadline = self.started + idle_s - 2
        n = self.open_count()
        while n > cap and time.monotonic() < deadline:
            time.sleep(0.2)
            n = self.open_count()
        return n

    def drip(self):
        for s in self.socks:
            try:
                s.send(b"X")
            except OSError:
                pass

    def close(self):
        for s in self.socks:
            s.close()


def test_exhaustion():
    log("idle and dripping connections: one address, many addresses, both ports")
    base = threads()
    one = Herd(API_PORT, ["127.0.0.2"], 600)
    held = one.held(64, API_IDLE_S)
    check(held <= 64, f"one address holds {held} of its 600 connections to the API, over the cap of 64")
    t = served("while one address tries 600 idle connections to the API")
    ok(f"one address, 600 idle connections to the API: {held} held (cap 64), the rest refused; "
       f"the page, the API and the probes answered in {t:.2f} s")

    many = Herd(API_PORT, [f"127.0.1.{i}" for i in range(1, 21)], 40)
    held_many = many.open_count()
    check(held_many >= 700, f"only {held_many} of 800 connections from 20 addresses held")
    now = threads()
    check(now <= base + 8, f"the operator went from {base} to {now} threads with {held + held_many} connections")
    for _ in range(3):
        many.drip()
        time.sleep(1)  # the drip itself is the abuse: one byte a second
    t = served("while 20 addresses hold 800 dripping connections to the API")
    ok(f"20 addresses x 40 dripping connections: {held_many} held, the operator's threads {base} -> {now}, "
       f"every other client served in {t:.2f} s")

    probe = Herd(METRICS_PORT, ["127.0.0.3"], 200)
    probe_many = Herd(METRICS_PORT, [f"127.0.2.{i}" for i in range(1, 11)], 20)
    held_p = probe.held(16, PROBE_IDLE_S)
    check(held_p <= 16, f"one address holds {held_p} connections to the probe port, over the cap of 16")
    t = served("while the probe port is flooded")
    ok(f"probe port: one address held to {held_p} of 200 (cap 16), 10 more addresses x 20; "
       f"/healthz and /readyz answered in {t:.2f} s")

    # An idle connection does not stay: each server closes it after its idle timeout.
    end = time.monotonic() + 60
    while time.monotonic() < end and (one.open_count() or probe.open_count()):
        time.sleep(1)
    check(one.open_count() == 0, f"{one.open_count()} idle API connections still open after 60 s")
    check(probe.open_count() == 0, f"{probe.open_count()} idle probe connections still open after 60 s")
    ok("idle connections are closed by the servers (API 20 s, probe port 10 s)")
    for h in (one, many, probe, probe_many):
        h.close()
    end = time.monotonic() + 30
    while time.monotonic() < end and threads() > base + 2:
        time.sleep(0.5)
    served("after the abusers let go")
    ok(f"after the abusers let go: served as before, {threads()} threads")


def raise_nofile():
    """This test itself holds about 2,000 sockets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    check(soft == resource.RLIM_INFINITY or soft >= 2500,
          f"the descriptor limit is {soft}; this test needs 2,500 (ulimit -Hn)")


def test_body_drip():
    log("a request body dripped in a byte every 2 s")
    s = socket.socket()
    s.settimeout(5)
    s.bind(("127.0.0.4", 0))
    s.connect(("127.0.0.1", API_PORT))
    s.sendall(f"PUT /api/v1/teams/drip/instances/web HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\n"
              "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{".encode())
    t0 = time.monotonic()
    closed = False
    while time.monotonic() - t0 < 60 and not closed:
        time.sleep(2)  # the drip is the abuse
        try:
            s.sendall(b" ")
            s.setblocking(False)
            try:
                closed = s.recv(1, socket.MSG_PEEK) == b""
            except BlockingIOError:
                pass
            finally:
                s.setblocking(True)
        except OSError:
            closed = True
    took = time.monotonic() - t0
    s.close()
    check(closed, "a body dripped for 60 s still held its connection")
    served("after the body drip")
    ok(f"a dripped body's connection is closed after {took:.0f} s (deadline 10 s after the headers)")


def main():
    try:
        raise_nofile()
        served("at the start")
        test_malformed()
        test_exhaustion()
        test_body_drip()
    except Fail as e:
        print(f"FAIL: {e}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
