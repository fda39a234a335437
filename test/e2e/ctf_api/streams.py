"""streams.py - GET /api/v1/teams/{team}/events over time: the streams a
team may hold (429 past the limit), and the streams of a token that is
rotated, deleted or re-created, also between a stream's authentication and
its opening.
"""
import http.client
import json
import queue
import socket
import subprocess
import threading
import time

from .common import (ADMIN, CODES_SEEN, Fail, HOST, KUBECONFIG, KUBECTL, PORT, SEEN, Stream, TEAMS,
                     call, check, expect, first_snapshot, heartbeats, kubectl, log, ok,
                     open_stream, open_stream_soon, patch_tokens, secrets_hex, still_open,
                     wait_eof, wait_for)


def test_stream_limit():
    log("event streams per team")
    tb = TEAMS["team-b"]
    streams = []
    for i in range(8):
        s = open_stream("team-b", tb if i % 2 else ADMIN)
        first_snapshot(s)
        streams.append(s)
    s9 = Stream("team-b", tb)
    check(s9.status == 429 and s9.body and s9.body["error"]["code"] == "TooManyRequests",
          f"the 9th stream: {s9.status} {s9.body}")
    check("team team-b already holds 8 event streams" in s9.body["error"]["message"],
          f"the 9th stream's refusal names the wrong cause: {s9.body}")
    other = open_stream("team-a", TEAMS["team-a"])
    first_snapshot(other)
    other.close()
    ok("8 streams of one team (admin and team tokens) are served, the 9th is 429; another team's is not")

    # Streams closed before (team-a's above, earlier tests') count until their heartbeat
    # shows the server they are gone; two heartbeats on a live stream mean all had theirs.
    heartbeats(streams[0], 2)
    # Fair shares (the operator runs with --api-max-streams 16): team-a and team-b fill the
    # API with 8 each; team-c still gets its share (16 / 3 teams = 5), each new stream ending
    # the oldest of the biggest holder; its 6th is refused, saying why.
    a_streams = [open_stream_soon("team-a", ADMIN) for _ in range(8)]
    for st in a_streams:
        first_snapshot(st)
    c_streams = []
    for i in range(5):
        st = open_stream("team-c", TEAMS["team-c"])
        first_snapshot(st)
        c_streams.append(st)

        def one_more_ended():
            ended = [x for x in streams + a_streams if x.ended()]
            return len(ended) >= i + 1
        wait_for(30, f"a stream of the biggest holder to end for team-c's stream {i + 1}", one_more_ended)
    six = Stream("team-c", TEAMS["team-c"])
    check(six.status == 429 and "has its fair share (5)" in six.body["error"]["message"],
          f"team-c's 6th stream with the API full: {six.status} {six.body}")
    ended_b = sum(x.ended() for x in streams)
    ended_a = sum(x.ended() for x in a_streams)
    check(ended_a + ended_b == 5 and max(ended_a, ended_b) <= 3,
          f"streams ended to make room: team-a {ended_a}, team-b {ended_b} (want 5, taken from the biggest)")
    ok(f"with the API full (16), team-c gets its fair share of 5, ending the biggest holders' oldest "
       f"(team-a {ended_a}, team-b {ended_b}); its 6th is refused saying it has its fair share")
    for st in c_streams + a_streams:
        st.close()
    for s in streams:
        s.close()

    def again():
        s = Stream("team-b", tb)
        if s.status == 200:
            first_snapshot(s)
            s.close()
            return True
        return False
    wait_for(30, "a stream after the others closed", again)
    ok("once streams close, a new one is served")


def test_stream_authorization():
    log("streams and their tokens over time: rotate, delete and re-create the token Secret")
    t_old, t_new = secrets_hex(), secrets_hex()
    patch_tokens({"team-s": t_old})
    wait_for(30, "team-s's token to work", lambda: call("GET", "/api/v1/whoami", t_old).status == 200)
    mine, admins = open_stream_soon("team-s", t_old), open_stream_soon("team-s", ADMIN)
    other = open_stream_soon("team-a", TEAMS["team-a"])
    for st in (mine, admins, other):
        first_snapshot(st)
    patch_tokens({"team-s": t_new})
    wait_eof(mine, 30, "team-s's token was rotated")
    still_open(admins, "the admin's stream of team-s ended with the team's rotation")
    still_open(other, "team-a's stream ended with team-s's rotation")
    ok("rotating a team's token ends the team's streams opened with the old one; the admin's and other teams' go on")

    fresh = open_stream_soon("team-s", t_new)
    first_snapshot(fresh)
    saved = kubectl("-n", "kopc-system", "get", "secret", "ctf-team-tokens", "-o", "json").stdout
    kubectl("-n", "kopc-system", "delete", "secret", "ctf-team-tokens")
    wait_eof(fresh, 30, "the token Secret was deleted")
    wait_eof(other, 30, "the token Secret was deleted")
    still_open(admins, "the admin's stream ended when the team tokens went")
    obj = json.loads(saved)
    for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
        obj["metadata"].pop(k, None)
    p = subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, "create", "-f", "-"], input=json.dumps(obj),
                       capture_output=True, text=True)
    check(p.returncode == 0, f"re-creating the token Secret: {p.stderr}")
    wait_for(30, "team tokens to work again", lambda: call("GET", "/api/v1/whoami", t_new).status == 200)
    again = open_stream_soon("team-s", t_new)
    first_snapshot(again)
    for st in (again, admins):
        st.close()
    ok("deleting the token Secret ends every team-token stream (the admin's goes on); re-created, streams open again")


class HeldStream(Stream):
    """A GET .../events whose headers go out now and whose one-byte body later
    (release): the API authenticates a request on its headers and opens the
    stream once the body is in, so whatever happens in between happens after
    the authentication and before the stream is stamped."""

    def __init__(self, team, token):
        self.team = team
        self.q = queue.Queue()
        self.path = f"/api/v1/teams/{team}/events"
        self.conn = None  # a socket alone: the request is written by hand
        self.sock = socket.create_connection((HOST, PORT), timeout=60)
        self.sock.sendall((f"GET {self.path} HTTP/1.1\r\nHost: {HOST}:{PORT}\r\n"
                           f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n"
                           "Content-Length: 1\r\n\r\n").encode())

    def release(self):
        """Sends the body; returns the status the API answered."""
        self.sock.sendall(b"x")
        self.resp = http.client.HTTPResponse(self.sock, method="GET")
        self.resp.begin()
        self.status = self.resp.status
        self.headers = {k.lower(): v for k, v in self.resp.getheaders()}
        CODES_SEEN.add(self.status)
        SEEN.extend(v.encode() for v in self.headers.values())
        if self.status == 200:
            self.thread = threading.Thread(target=self._read, daemon=True)
            self.thread.start()
        else:
            SEEN.append(self.resp.read())
        return self.status


def test_stream_revoked_while_opening():
    log("a stream whose token is rotated between its authentication and its opening")
    t_old, t_new = secrets_hex(), secrets_hex()
    patch_tokens({"team-v": t_old})
    wait_for(30, "team-v's token to work", lambda: call("GET", "/api/v1/whoami", t_old).status == 200)
    held, kept = HeldStream("team-v", t_old), HeldStream("team-a", TEAMS["team-a"])
    # The API has both requests' headers (and so has authenticated them) once it
    # answers a request sent after them on another connection.
    expect(call("GET", "/api/v1/whoami", t_old), 200, what="team-v's old token before the rotation")
    patch_tokens({"team-v": t_new})
    # The body must follow within the API's body deadline (10 s after the headers).
    wait_for(8, "team-v's old token to stop working", lambda: call("GET", "/api/v1/whoami", t_old).status == 401)
    start = time.monotonic()
    code = held.release()
    check(kept.release() == 200, f"team-a's held stream: {kept.status}")
    first_snapshot(kept)
    if code == 200:
        events = []
        end = time.monotonic() + 30
        while True:
            try:
                item = held.q.get(timeout=max(0.1, end - time.monotonic()))
            except queue.Empty:
                raise Fail(f"team-v's stream opened with a revoked token still open 30s later: {events}")
            if item[0] == "eof":
                break
            events.append(item)
        took = time.monotonic() - start
        check(not any(i[0] == "event" for i in events),
              f"team-v's stream opened with a revoked token sent events: {events}")
    else:
        check(code == 401, f"team-v's stream opened with a revoked token: {code}")
        took = time.monotonic() - start
    still_open(kept, "team-a's stream ended with team-v's rotation")
    held.close()
    kept.close()
    ok(f"a stream whose token was rotated after its authentication and before it opened ends "
       f"in {took:.1f}s without an event (answer {code}); another team's stream opened alike goes on")
