#!/usr/bin/env python3
"""ctf_api_test.py - the CTF operator's instance API (docs/api.md) against a
running operator on a devcluster; ctf_api_test.sh sets it all up.

Every answer is checked against the operator's own OpenAPI document: the
status must be one the document lists for that route and method, the body
must match its schema, and the headers it marks required (Location,
Retry-After, Allow, WWW-Authenticate) must be there. On top of that each
scenario asserts what docs/api.md promises, and the cluster (through
kubectl) that a refused request changed nothing.

Standard library only. Env: API (base URL), METRICS (base URL), ADMIN_TOKEN,
TEAM_TOKENS (JSON: team -> token), ROTATE_TOKENS (two spare tokens), FLAG,
KUBECTL, KUBECONFIG, SRC, PASSED (checks the shell passed before),
PASSED_FILE (where to write the total).
"""
import datetime
import http.client
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

API = os.environ["API"].rstrip("/")
METRICS = os.environ["METRICS"].rstrip("/")
ADMIN = os.environ["ADMIN_TOKEN"]
TEAMS = json.loads(os.environ["TEAM_TOKENS"])
ROTATE = os.environ["ROTATE_TOKENS"].split()
FLAG = os.environ["FLAG"]
KUBECTL = os.environ["KUBECTL"]
KUBECONFIG = os.environ["KUBECONFIG"]
SRC = os.environ["SRC"]
NS = "ctf"
_u = urllib.parse.urlsplit(API)
HOST, PORT = _u.hostname, _u.port

passed = int(os.environ.get("PASSED", "0"))
SEEN = []          # every body and header value the API sent, for the leak check
CODES_SEEN = set()  # every status the API answered


def ok(what):
    global passed
    passed += 1
    print(f"ok {passed} - {what}", flush=True)


class Fail(Exception):
    pass


class Errored(Fail):
    """The awaited instance went Error: wait_for fails at once with this."""


def check(cond, what):
    if not cond:
        raise Fail(what)


def log(what):
    print(f"=== {what}", flush=True)


def wait_for(secs, what, fn):
    """Calls fn until it returns something truthy (returned); fails after secs."""
    end = time.monotonic() + secs
    last = None
    while True:
        try:
            r = fn()
            if r:
                return r
        except Errored as e:
            raise Fail(f"while waiting for {what}: {e}") from e
        except Fail as e:
            last = e
        if time.monotonic() > end:
            raise Fail(f"timed out after {secs}s waiting for: {what}" + (f" ({last})" if last else ""))
        time.sleep(0.5)


def ts(s):
    check(isinstance(s, str), f"not a time: {s!r}")
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))


def secs(a, b):
    return int((ts(b) - ts(a)).total_seconds())


# ---- the OpenAPI document and a small JSON Schema checker ---------------------

with open(os.path.join(SRC, "operators/ctf/web/openapi.json"), "rb") as f:
    DOC_BYTES = f.read()
DOC = json.loads(DOC_BYTES)
RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def resolve(node):
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        check(ref.startswith("#/"), f"remote $ref {ref}")
        node = DOC
        for part in ref[2:].split("/"):
            node = node[part]
    return node


def is_type(v, t):
    return {
        "object": lambda: isinstance(v, dict),
        "array": lambda: isinstance(v, list),
        "string": lambda: isinstance(v, str),
        "integer": lambda: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda: isinstance(v, (int, float)) and not isinstance(v, bool),
        "boolean": lambda: isinstance(v, bool),
        "null": lambda: v is None,
    }[t]()


def validate(v, schema, where="$"):
    """Raises Fail when v does not match schema (the subset the document uses)."""
    schema = resolve(schema)
    t = schema.get("type")
    if t is not None:
        types = t if isinstance(t, list) else [t]
        check(any(is_type(v, x) for x in types), f"{where}: {v!r} is not {t}")
    if "enum" in schema:
        check(v in schema["enum"], f"{where}: {v!r} not one of {schema['enum']}")
    if isinstance(v, dict):
        for r in schema.get("required", []):
            check(r in v, f"{where}: required field {r} missing")
        props = schema.get("properties", {})
        for k, x in v.items():
            if k in props:
                validate(x, props[k], f"{where}.{k}")
            elif schema.get("additionalProperties") is False:
                raise Fail(f"{where}: unexpected field {k}")
        if "maxProperties" in schema:
            check(len(v) <= schema["maxProperties"], f"{where}: too many fields")
    if isinstance(v, list) and "items" in schema:
        for i, x in enumerate(v):
            validate(x, schema["items"], f"{where}[{i}]")
    if isinstance(v, str):
        if "pattern" in schema:
            check(re.search(schema["pattern"], v), f"{where}: {v!r} does not match {schema['pattern']}")
        if "maxLength" in schema:
            check(len(v) <= schema["maxLength"], f"{where}: longer than {schema['maxLength']}")
        if "minLength" in schema:
            check(len(v) >= schema["minLength"], f"{where}: shorter than {schema['minLength']}")
        if schema.get("format") == "date-time":
            check(RFC3339_UTC.match(v), f"{where}: {v!r} is not an RFC 3339 UTC time")
    if is_type(v, "number") and "minimum" in schema:
        check(v >= schema["minimum"], f"{where}: {v} below {schema['minimum']}")


def template_of(path):
    """The document's path template a request path falls under, or None."""
    for tmpl in DOC["paths"]:
        rx = "^" + re.sub(r"\\\{[a-z]+\\\}", "[^/]+", re.escape(tmpl)) + "$"
        if re.match(rx, path):
            return tmpl
    return None


def documented_response(method, path, status):
    """The document's Response object for this answer (or a Fail)."""
    tmpl = template_of(path)
    comp = DOC["components"]["responses"]
    if status == 401 and path.startswith("/api/v1/"):
        return comp["Unauthorized"]
    if tmpl is None:
        check(status == 404, f"{method} {path}: {status} for a path the document does not have")
        return comp["NotFound"]
    item = DOC["paths"][tmpl]
    m = "get" if method == "HEAD" else method.lower()
    if m not in item:
        check(status == 405, f"{method} {path}: {status} for a method {tmpl} does not take")
        return comp["MethodNotAllowed"]
    responses = item[m]["responses"]
    check(str(status) in responses,
          f"{method} {path}: status {status} is not documented for {m.upper()} {tmpl}")
    return resolve(responses[str(status)])


def conform(method, path, status, headers, raw, parsed):
    """Checks one answer against the document."""
    resp = documented_response(method, path, status)
    for name, h in resp.get("headers", {}).items():
        h = resolve(h)
        val = headers.get(name.lower())
        if h.get("required"):
            check(val is not None, f"{method} {path} -> {status}: no {name} header")
        if val is not None:
            schema = h.get("schema", {})
            if schema.get("type") == "integer":
                check(re.fullmatch(r"\d+", val), f"{method} {path}: {name}: {val!r} is not an integer")
                validate(int(val), schema, name)
            else:
                validate(val, schema, name)
    content = resp.get("content")
    if not content or method == "HEAD":
        return
    ctype = headers.get("content-type", "").split(";")[0].strip().lower()
    check(ctype in content, f"{method} {path} -> {status}: Content-Type {ctype!r}, document says {list(content)}")
    if ctype == "application/json":
        check(parsed is not None, f"{method} {path} -> {status}: body is not JSON: {raw[:200]!r}")
        try:
            validate(parsed, content[ctype]["schema"])
        except Fail as e:
            raise Fail(f"{method} {path} -> {status}: body does not match the document: {e}")


# ---- HTTP -----------------------------------------------------------------------


class Resp:
    def __init__(self, status, headers, raw, body):
        self.status, self.headers, self.raw, self.body = status, headers, raw, body

    def __repr__(self):
        return f"{self.status} {self.raw[:300]!r}"

    def code(self):
        try:
            return self.body["error"]["code"]
        except (TypeError, KeyError):
            return None


def call(method, path, token=None, body=None, auth=None, timeout=60):
    """One request on a new connection: returns a Resp checked against the document."""
    hdrs = {}
    if token is not None:
        hdrs["Authorization"] = "Bearer " + token
    if auth is not None:
        hdrs["Authorization"] = auth
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    if body is not None:
        hdrs["Content-Type"] = "application/json"
    conn = http.client.HTTPConnection(HOST, PORT, timeout=timeout)
    try:
        try:
            conn.request(method, path, body=body, headers=hdrs)
        except (BrokenPipeError, ConnectionResetError):
            pass  # a server may answer (413) before reading all of a large body
        r = conn.getresponse()
        raw = r.read() if method != "HEAD" else b""
        headers = {k.lower(): v for k, v in r.getheaders()}
        status = r.status
    except (OSError, http.client.HTTPException) as e:
        raise Fail(f"{method} {path}: {type(e).__name__}: {e}")
    finally:
        conn.close()
    SEEN.append(raw)
    SEEN.extend(v.encode() for v in headers.values())
    CODES_SEEN.add(status)
    parsed = None
    if headers.get("content-type", "").startswith("application/json"):
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
    conform(method, path, status, headers, raw, parsed)
    return Resp(status, headers, raw, parsed)


def expect(resp, status, code=None, what=""):
    check(resp.status == status, f"{what}: want {status}, got {resp!r}")
    if code is not None:
        check(resp.code() == code, f"{what}: want error code {code}, got {resp!r}")
        check(resp.body["error"]["message"], f"{what}: empty error message")
    return resp


def team_path(team, challenge=None, tail=None):
    p = f"/api/v1/teams/{team}/instances"
    if challenge is not None:
        p += "/" + challenge
    if tail:
        p += "/" + tail
    return p


def get_instance(team, challenge, token=ADMIN):
    r = call("GET", team_path(team, challenge), token)
    if r.status == 404:
        return None
    expect(r, 200, what=f"GET {team}/{challenge}")
    return r.body


def running(team, challenge, token=ADMIN):
    """The Instance once Running with endpoints (else None)."""
    i = get_instance(team, challenge, token)
    if i and i["state"] == "Error":
        raise Errored(f"{team}/{challenge} went Error: {i.get('reason')}: {i.get('message')}")
    return i if i and i["state"] == "Running" and i["endpoints"] else None


# ---- the cluster ----------------------------------------------------------------


def kubectl(*args, check_rc=True):
    p = subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, "--request-timeout=30s", *args],
                       capture_output=True, text=True)
    if check_rc and p.returncode:
        raise Fail(f"kubectl {' '.join(args)}: {p.stderr.strip()}")
    return p


def challenges_in_cluster(team=None, definition=None):
    items = json.loads(kubectl("-n", NS, "get", "challenges", "-o", "json").stdout)["items"]
    return [c for c in items
            if (team is None or c["spec"]["team"] == team)
            and (definition is None or c["spec"]["definition"] == definition)]


def challenge_object(name):
    p = kubectl("-n", NS, "get", "challenge", name, "-o", "json", check_rc=False)
    return json.loads(p.stdout) if p.returncode == 0 else None


def namespace_exists(name):
    return kubectl("get", "namespace", name, check_rc=False).returncode == 0


# ---- event streams --------------------------------------------------------------


class Stream:
    """One GET .../events: a thread parses it into a queue of
    ("event", name, data) / ("comment", text) / ("retry", value) / ("eof",)."""

    def __init__(self, team, token):
        self.team = team
        self.q = queue.Queue()
        self.path = f"/api/v1/teams/{team}/events"
        self.conn = http.client.HTTPConnection(HOST, PORT, timeout=60)
        self.conn.connect()
        self.sock = self.conn.sock
        self.conn.request("GET", self.path, headers={"Authorization": "Bearer " + token,
                                                     "Accept": "text/event-stream"})
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = {k.lower(): v for k, v in self.resp.getheaders()}
        CODES_SEEN.add(self.status)
        SEEN.extend(v.encode() for v in self.headers.values())
        self.body = None
        if self.status != 200:
            raw = self.resp.read()
            SEEN.append(raw)
            try:
                self.body = json.loads(raw)
            except ValueError:
                pass
            conform("GET", self.path, self.status, self.headers, raw, self.body)
            self.close()
            return
        conform("GET", self.path, 200, self.headers, b"", None)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        name, data = None, []
        try:
            while True:
                line = self.resp.readline()
                if not line:
                    break
                SEEN.append(line)
                line = line.decode().rstrip("\r\n")
                if line == "":
                    if data:
                        self.q.put(("event", name or "message", "\n".join(data)))
                    name, data = None, []
                elif line.startswith(":"):
                    self.q.put(("comment", line[1:].strip()))
                else:
                    field, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if field == "event":
                        name = value
                    elif field == "data":
                        data.append(value)
                    elif field == "retry":
                        self.q.put(("retry", value))
        except Exception:  # noqa: BLE001 - our close() ends the read any which way
            pass
        self.q.put(("eof",))

    def next(self, timeout, what):
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            raise Fail(f"event stream of {self.team}: nothing within {timeout}s while waiting for {what}")

    def next_event(self, timeout, what):
        """The next event (comments and retry skipped), its data parsed and checked."""
        end = time.monotonic() + timeout
        while True:
            item = self.next(max(0.1, end - time.monotonic()), what)
            if item[0] == "eof":
                raise Fail(f"event stream of {self.team} ended while waiting for {what}")
            if item[0] != "event":
                continue
            _, name, data = item
            schemas = DOC["paths"]["/api/v1/teams/{team}/events"]["get"]["responses"]["200"][
                "content"]["text/event-stream"]["x-events"]
            check(name in schemas, f"unknown event {name!r}: {data[:200]}")
            try:
                parsed = json.loads(data)
            except ValueError:
                raise Fail(f"event {name} data is not JSON: {data[:200]!r}")
            try:
                validate(parsed, schemas[name])
            except Fail as e:
                raise Fail(f"event {name} does not match the document: {e}")
            return name, parsed

    def ended(self):
        """Whether the server ended the stream (its reader met the end)."""
        return not self.thread.is_alive()

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        if self.conn:  # a HeldStream has a socket alone
            self.conn.close()


def open_stream(team, token):
    s = Stream(team, token)
    check(s.status == 200, f"events of {team}: {s.status} {s.body}")
    return s


def heartbeats(s, n):
    """Reads stream s until n new heartbeats came (what was queued before is skipped)."""
    while True:
        try:
            check(s.q.get_nowait()[0] != "eof", f"the stream of {s.team} ended")
        except queue.Empty:
            break
    seen = 0
    while seen < n:
        item = s.next(30, "a heartbeat")
        check(item[0] != "eof", f"the stream of {s.team} ended while waiting for heartbeats")
        seen += item[0] == "comment"


def open_stream_soon(team, token):
    """open_stream, again while refused: a stream a client closed while it was parked counts
    until the server next writes to it (its heartbeat), as a suspended connection's hang-up
    is not seen before."""
    got = []

    def attempt():
        st = Stream(team, token)
        if st.status == 200:
            got.append(st)
            return True
        check(st.status == 429, f"events of {team}: {st.status} {st.body}")
        return False
    wait_for(30, f"a stream of {team}", attempt)
    return got[0]


def first_snapshot(s):
    """Reads up to the first event: retry: 2000, then the snapshot."""
    retry = None
    while True:
        item = s.next(30, "the snapshot")
        if item[0] == "retry":
            retry = item[1]
        elif item[0] == "event":
            break
        elif item[0] == "eof":
            raise Fail("stream ended before its snapshot")
    _, name, data = item
    check(name == "snapshot", f"first event of a stream is {name!r}, not snapshot")
    check(retry == "2000", f"no 'retry: 2000' before the snapshot (got {retry!r})")
    snap = json.loads(data)
    validate(snap, {"$ref": "#/components/schemas/InstanceList"})
    check(snap["team"] == s.team, f"snapshot of {s.team} says team {snap['team']}")
    return snap


RANK = {"Starting": 0, "Running": 1, "Stopping": 2, "Stopped": 3}


def watch_states(s, challenge, until, timeout, seq):
    """Appends the states of challenge's instance events to seq until `until`;
    every step must go forward (Starting -> Running -> Stopping -> Stopped)."""
    end = time.monotonic() + timeout
    while True:
        name, ev = s.next_event(max(0.1, end - time.monotonic()), f"{challenge} {until}")
        if name != "instance" or ev["challenge"] != challenge:
            continue
        check(ev["team"] == s.team, f"event for team {ev['team']} on {s.team}'s stream")
        st = ev["state"]
        check(st in RANK, f"{challenge}: unexpected state {st} in events ({seq})")
        if seq:
            check(RANK[st] >= RANK[seq[-1]], f"{challenge}: state went back {seq[-1]} -> {st} (all: {seq + [st]})")
        seq.append(st)
        if st == until:
            return ev


# ---- the scenarios ----------------------------------------------------------------

ALL_PATHS = {
    "/api/v1/whoami": {"get"},
    "/api/v1/challenges": {"get"},
    "/api/v1/teams/{team}/instances": {"get"},
    "/api/v1/teams/{team}/instances/{challenge}": {"get", "put", "delete"},
    "/api/v1/teams/{team}/instances/{challenge}/renew": {"post"},
    "/api/v1/teams/{team}/instances/{challenge}/flag": {"post"},
    "/api/v1/teams/{team}/events": {"get"},
    "/api/openapi.json": {"get"},
    "/": {"get"},
    "/app.js": {"get"},
    "/style.css": {"get"},
}


def fill(tmpl, team="team-a", challenge="web"):
    return tmpl.replace("{team}", team).replace("{challenge}", challenge)


def test_openapi():
    log("the OpenAPI document")
    r = call("GET", "/api/openapi.json")
    expect(r, 200, what="GET /api/openapi.json without a token")
    check(r.raw == DOC_BYTES, "served /api/openapi.json differs from operators/ctf/web/openapi.json")
    check(str(DOC.get("openapi", "")).startswith("3.1"), f"openapi version {DOC.get('openapi')}")
    have = {p: {m for m in item if m in ("get", "put", "post", "delete", "patch", "head", "options")}
            for p, item in DOC["paths"].items()}
    check(have == ALL_PATHS, f"paths of the document: {have}, want {ALL_PATHS}")
    schemas = DOC["components"]["schemas"]
    for s in ("Challenge", "Instance", "InstanceList", "Error", "Whoami", "PutBody"):
        check(s in schemas, f"schema {s} missing")
    check(schemas["PutBody"].get("additionalProperties") is False, "PutBody allows unknown fields")
    params = DOC["components"]["parameters"]
    check(params["team"]["schema"]["pattern"] == "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
          and params["team"]["schema"]["maxLength"] == 63, "team parameter")
    check(params["challenge"]["schema"]["maxLength"] == 253, "challenge parameter")
    sec = DOC["components"]["securitySchemes"]
    check(any(v.get("scheme") == "bearer" for v in sec.values()), "no bearer security scheme")
    ok("GET /api/openapi.json: no token needed, the file verbatim, OpenAPI 3.1, every route, schema and parameter")

    # Every method of every path the API serves is in the document, and no other:
    # a method the document does not list is 405 with exactly those in Allow.
    for tmpl, methods in ALL_PATHS.items():
        path = fill(tmpl)
        r = call("PATCH", path, ADMIN)
        expect(r, 405, "MethodNotAllowed" if path.startswith("/api/") else None, f"PATCH {path}")
        allow = {m.strip().lower() for m in r.headers["allow"].split(",")} - {"head", "options"}
        check(allow == methods, f"PATCH {path}: Allow {r.headers['allow']!r}, the document has {sorted(methods)}")
    ok("405 with Allow on every route, and Allow lists exactly the document's methods")

    r = expect(call("GET", "/"), 200, what="GET /")
    check(r.headers.get("content-type", "").startswith("text/html") and r.raw, "GET / is not an HTML page")
    r = expect(call("GET", "/app.js"), 200, what="GET /app.js")
    check(r.raw, "empty /app.js")
    r = expect(call("GET", "/style.css"), 200, what="GET /style.css")
    check(r.raw, "empty /style.css")
    expect(call("GET", "/no-such-file.js"), 404, what="GET /no-such-file.js")
    ok("the page: / (text/html), /app.js, /style.css served without a token; an unknown file is 404")


def test_auth():
    log("authentication and authorization")
    ta = TEAMS["team-a"]
    routes = [("GET", "/api/v1/whoami"), ("GET", "/api/v1/challenges"),
              ("GET", team_path("team-a")), ("GET", team_path("team-a", "web")),
              ("PUT", team_path("team-a", "web")), ("DELETE", team_path("team-a", "web")),
              ("POST", team_path("team-a", "web", "renew")), ("GET", "/api/v1/teams/team-a/events"),
              ("GET", team_path("team-a", "no-such-challenge")), ("GET", team_path("Team_A")),
              ("PATCH", team_path("team-a", "web"))]
    bad = [None, "Basic " + ADMIN, "Bearer", "Bearer ", "Bearer not-a-token-" + ADMIN[:8],
           "Bearer " + "x" * 600, "Bearer " + ADMIN + "x", "Bearer " + ADMIN[:-1]]
    before = len(challenges_in_cluster())
    for method, path in routes:
        for auth in bad:
            r = call(method, path, auth=auth)
            expect(r, 401, "Unauthorized", f"{method} {path} with Authorization {auth and auth[:20]!r}")
            check(r.headers.get("www-authenticate", "").startswith("Bearer"),
                  f"{method} {path}: 401 without WWW-Authenticate: Bearer")
    check(len(challenges_in_cluster()) == before, "a 401 request created a Challenge")
    ok("401 Unauthorized with WWW-Authenticate: Bearer on every /api/v1 route (before 400, 404 and 405) for no header, "
       "another scheme, an empty, unknown, too long, extended or truncated token")

    r = expect(call("GET", "/api/v1/whoami", ta), 200, what="whoami team-a")
    check(r.body == {"team": "team-a", "admin": False}, f"whoami team-a: {r.body}")
    r = expect(call("GET", "/api/v1/whoami", ADMIN), 200, what="whoami admin")
    check(r.body == {"team": None, "admin": True}, f"whoami admin: {r.body}")
    ok("whoami: {team: team-a, admin: false} for a team token, {team: null, admin: true} for the admin")

    for method, path in [("GET", team_path("team-b")), ("GET", team_path("team-b", "web")),
                         ("PUT", team_path("team-b", "web")), ("DELETE", team_path("team-b", "web")),
                         ("POST", team_path("team-b", "web", "renew")),
                         ("GET", team_path("team-b", "no-such-challenge")),
                         ("PUT", team_path("team-b", "no-such-challenge")),
                         ("GET", "/api/v1/teams/team-b/events")]:
        expect(call(method, path, ta), 403, "Forbidden", f"{method} {path} with team-a's token")
    check(not challenges_in_cluster(team="team-b"), "a 403 PUT created a Challenge for team-b")
    ok("403 Forbidden for team-a's token on team-b's paths (before 404), nothing created")

    # The token Secret is watched: a new team's token starts working, a rotated one stops.
    t1, t2 = ROTATE
    kubectl("-n", "kopc-system", "patch", "secret", "ctf-team-tokens", "--type", "merge",
            "-p", json.dumps({"stringData": {"team-r": t1}}))
    wait_for(30, "a new team token to work",
             lambda: call("GET", "/api/v1/whoami", t1).status == 200)
    check(call("GET", "/api/v1/whoami", t1).body == {"team": "team-r", "admin": False}, "whoami team-r")
    kubectl("-n", "kopc-system", "patch", "secret", "ctf-team-tokens", "--type", "merge",
            "-p", json.dumps({"stringData": {"team-r": t2}}))
    wait_for(30, "the rotated token to work", lambda: call("GET", "/api/v1/whoami", t2).status == 200)
    wait_for(30, "the old token to stop working", lambda: call("GET", "/api/v1/whoami", t1).status == 401)
    expect(call("GET", "/api/v1/whoami", ta), 200, what="team-a after another team's rotation")
    ok("the token Secret is watched: a new team token works, a rotated one stops working, without a restart")


def test_challenges():
    log("GET /api/v1/challenges")
    r = expect(call("GET", "/api/v1/challenges", TEAMS["team-a"]), 200, what="challenges")
    ch = r.body["challenges"]
    names = [c["name"] for c in ch]
    defs = sorted(d["metadata"]["name"] for d in json.loads(
        kubectl("-n", NS, "get", "challengedefinitions", "-o", "json").stdout)["items"])
    check(names == defs, f"challenges {names}, definitions in the cluster {defs} (sorted by name)")
    by = {c["name"]: c for c in ch}
    web = by["web"]
    check(web["title"] == "Cookie Monster" and web["category"] == "web" and web["points"] == 100
          and web["description"] == "The admin panel trusts its cookies a little too much.", f"web: {web}")
    check(web["expose"] == [{"name": "http", "type": "HTTP"}], f"web expose: {web['expose']}")
    check(web["lifetimeSeconds"] == {"default": 1800, "max": 7200, "renewBy": 1800}, f"web lifetime: {web}")
    check(by["tcp"]["expose"] == [{"name": "nc", "type": "TCP"}], f"tcp expose: {by['tcp']}")
    check(by["short"]["lifetimeSeconds"] == {"default": 120, "max": 300, "renewBy": 120}, f"short: {by['short']}")
    check(by["plain"]["category"] is None and by["plain"]["description"] is None and by["plain"]["points"] == 0,
          f"plain (no category, description, points): {by['plain']}")
    for leak in (FLAG, "registry.example", "containerPort", "8080", "pods", "flag", "image"):
        check(leak.encode() not in r.raw, f"GET /challenges shows {leak!r}")
    ok("GET /challenges: sorted, public fields only (title, category, description, points, expose name/type, "
       "lifetimeSeconds), no pods, images, ports or flag")


def test_refusals():
    log("refusals change nothing")
    before = len(challenges_in_cluster())
    cases = [  # body, what
        ("{", "malformed JSON"), ('{"expiresAt": "2030-01-01T00:00:00Z"', "truncated JSON"),
        ("[]", "an array"), ('"x"', "a string"), ("null", "null"), ('{"foo": 1}', "an unknown field"),
        ('{"expiresAt": 5}', "expiresAt a number"), ('{"expiresAt": true}', "expiresAt a boolean"),
        ('{"expiresAt": "tomorrow"}', "expiresAt not a time"),
        ('{"expiresAt": "2030-01-01T00:00:00Z", "x": 1}', "a good and an unknown field"),
    ]
    for i, (body, what) in enumerate(cases):
        team = f"bad-body-{i}"  # each its own write budget: only the refusal is tested here
        expect(call("PUT", team_path(team, "web"), ADMIN, body), 400, "BadRequest", f"PUT with {what}")
    expect(call("POST", team_path("bad-body-x", "web", "renew"), ADMIN, '{"foo": 1}'), 400, "BadRequest",
           "renew with an unknown field")
    ok(f"400 BadRequest for PUT bodies: {', '.join(w for _, w in cases)}")

    bad_teams = ["Team_A", "TEAM-A", "..", "%2e%2e", "a%2Fb", "a%2fb", "-team", "team-", "team.a",
                 "a" * 64, "team%20a", "t%00", "%F0%9F%9A%A9"]
    for t in bad_teams:
        for method, path in [("GET", team_path(t)), ("PUT", team_path(t, "web")),
                             ("GET", f"/api/v1/teams/{t}/events"), ("DELETE", team_path(t, "web")),
                             ("POST", team_path(t, "web", "renew"))]:
            expect(call(method, path, ADMIN), 400, "BadRequest", f"{method} {path}")
    bad_chals = ["Web", "web_1", "..", "%2e%2e", "a%2Fb", "-web", "web-", "web..x", ".web",
                 "a" * 254, "web%00"]
    for c in bad_chals:
        for method in ("GET", "PUT", "DELETE"):
            expect(call(method, team_path("bad-name", c), ADMIN), 400, "BadRequest", f"{method} challenge {c!r}")
        expect(call("POST", team_path("bad-name", c, "renew"), ADMIN), 400, "BadRequest", f"renew challenge {c!r}")
    ok("400 BadRequest for invalid team names (case, '_', '..', %2e%2e, %2F, edges, 64 bytes, NUL, UTF-8) "
       "and challenge names (also 254 bytes) on every route")

    expect(call("PUT", team_path("nf", "no-such-challenge"), ADMIN), 404, "NotFound", "PUT an unknown challenge")
    expect(call("GET", team_path("nf", "web"), ADMIN), 404, "NotFound", "GET a missing instance")
    expect(call("DELETE", team_path("nf", "web"), ADMIN), 404, "NotFound", "DELETE a missing instance")
    expect(call("POST", team_path("nf", "web", "renew"), ADMIN), 404, "NotFound", "renew a missing instance")
    expect(call("GET", team_path("nf", "no-such-challenge"), ADMIN), 404, "NotFound", "GET an unknown challenge")
    for p in ["/api/v1/nope", "/api/v1", "/api/v1/", "/api/v1/teams", "/api/v1/teams/nf",
              "/api/v1/teams/nf/instances/web/renew/x", "/api/v1/teams/nf/instances/web/", "/api/v1/teams/nf/things",
              "/api/v1/challenges/web", "/api/v2/challenges", "/api/nope"]:
        expect(call("GET", p, ADMIN), 404, "NotFound" if p.startswith("/api/v1/") else None, f"GET {p}")
    ok("404 NotFound for an unknown challenge, a missing instance (GET, DELETE, renew) and unknown routes")

    r = call("GET", team_path("nf"), ADMIN)
    expect(r, 200, what="instances of a team with none")
    check(r.body == {"team": "nf", "instances": []}, f"instances of nf: {r.body}")
    ok("a team without instances lists {team, instances: []}")

    big = '{"expiresAt": "' + "x" * (70 * 1024) + '"}'
    expect(call("PUT", team_path("big", "web"), ADMIN, big), 413, "PayloadTooLarge", "PUT with a 70 KiB body")
    expect(call("PUT", team_path("big", "web"), ADMIN, " " * (64 * 1024 + 1)), 413, "PayloadTooLarge",
           "PUT with a 64 KiB + 1 body")
    expect(call("POST", team_path("big", "web", "renew"), ADMIN, "{}" + " " * (70 * 1024)), 413,
           "PayloadTooLarge", "renew with a 70 KiB body")
    ok("413 PayloadTooLarge for bodies over 64 KiB")

    after = len(challenges_in_cluster())
    check(after == before, f"refused requests changed the Challenges: {before} before, {after} after")
    ok("no refused request (400, 401, 403, 404, 405, 413) created anything")


def test_lifecycle_and_events():
    log("one instance's life, through the API and its event stream (team-a's token)")
    ta = TEAMS["team-a"]
    s1 = open_stream("team-a", ta)
    snap = first_snapshot(s1)
    check(snap["instances"] == [], f"team-a starts with {snap['instances']}")
    wait_for(30, "a heartbeat comment", lambda: _heartbeat(s1))
    ok("events: retry 2000, a snapshot first (empty), then ': heartbeat' comments")

    r = expect(call("PUT", team_path("team-a", "web"), ta), 201, what="first PUT")
    inst = r.body
    name = inst["name"]
    check(r.headers["location"].endswith(team_path("team-a", "web")), f"Location {r.headers['location']}")
    check(inst["team"] == "team-a" and inst["challenge"] == "web" and name, f"PUT answered {inst}")
    check(inst["state"] in ("Starting", "Running"), f"new instance state {inst['state']}")
    r2 = expect(call("PUT", team_path("team-a", "web"), ta), 200, what="second PUT")
    check(r2.body["name"] == name, f"second PUT names {r2.body['name']}, first {name}")
    r3 = expect(call("PUT", team_path("team-a", "web"), ta, "{}"), 200, what="PUT {}")
    check(r3.body["name"] == name, "PUT {} names another instance")
    objs = challenges_in_cluster("team-a", "web")
    check(len(objs) == 1 and objs[0]["metadata"]["name"] == name, f"Challenges for team-a/web: {objs}")
    ok("PUT: 201 with Location, then 200 with the same name (also with {}); one Challenge in the cluster")

    inst = wait_for(120, "team-a/web Running", lambda: running("team-a", "web", ta))
    check(inst["status"] == "Running" and inst["reason"] is None, f"running instance {inst}")
    check(all(e["type"] == "HTTP" and re.match(r"^http://[^/\s:]+(:\d+)?$", e["address"]) for e in inst["endpoints"])
          and inst["endpoints"][0]["name"] == "http", f"endpoints {inst['endpoints']}")
    check(secs(inst["createdAt"], inst["expiresAt"]) == 1800, f"expiresAt not createdAt + 30m: {inst}")
    check(secs(inst["createdAt"], inst["maxExpiresAt"]) == 7200, f"maxExpiresAt not createdAt + 2h: {inst}")
    check(ts(inst["createdAt"]) <= ts(inst["startedAt"]), f"startedAt before createdAt: {inst}")
    check(0 < inst["secondsLeft"] <= 1800 and inst["renewable"] is True, f"secondsLeft/renewable: {inst}")
    lst = expect(call("GET", team_path("team-a"), ta), 200, what="list").body
    check([i["name"] for i in lst["instances"]] == [name] and lst["team"] == "team-a", f"list: {lst}")
    obj = challenge_object(name)
    check(obj["spec"] == {**obj["spec"], "team": "team-a", "definition": "web"}, f"Challenge spec {obj['spec']}")
    ok("the instance goes Running: HTTP endpoint, expiry = created + 30m, max = created + 2h, listed")

    seq = []
    watch_states(s1, "web", "Running", 60, seq)
    ok(f"events: the instance's states in order ({' -> '.join(seq)})")

    # Hold the Challenge with a finalizer of ours, so Stopping lasts until we let go.
    ns = obj["status"]["namespace"]
    kubectl("-n", NS, "patch", "challenge", name, "--type", "json",
            "-p", '[{"op":"add","path":"/metadata/finalizers/-","value":"kopc.test/hold"}]')
    r = expect(call("DELETE", team_path("team-a", "web"), ta), 202, what="DELETE")
    check(r.body["state"] == "Stopping" and r.body["name"] == name, f"DELETE answered {r.body}")
    wait_for(30, "GET shows Stopping", lambda: get_instance("team-a", "web", ta)["state"] == "Stopping")
    r = expect(call("DELETE", team_path("team-a", "web"), ta), 202, what="DELETE again")
    check(r.body["state"] == "Stopping", f"second DELETE answered {r.body}")
    expect(call("PUT", team_path("team-a", "web"), ta), 409, "InstanceStopping", "PUT while stopping")
    expect(call("POST", team_path("team-a", "web", "renew"), ta), 409, "InstanceStopping", "renew while stopping")
    check(len(challenges_in_cluster("team-a", "web")) == 1, "PUT while stopping created a Challenge")
    ok("DELETE: 202 Stopping (again 202); PUT and renew while stopping are 409 InstanceStopping, nothing created")

    wait_for(120, f"instance namespace {ns} gone", lambda: not namespace_exists(ns))
    check(get_instance("team-a", "web", ta)["state"] == "Stopping", "held instance is not Stopping")

    def release():
        p = kubectl("-n", NS, "patch", "challenge", name, "--type", "json", "-p",
                    '[{"op":"test","path":"/metadata/finalizers","value":["kopc.test/hold"]},'
                    '{"op":"remove","path":"/metadata/finalizers"}]', check_rc=False)
        return p.returncode == 0
    wait_for(120, "the operator to release its finalizer (ours left)", release)
    wait_for(60, "GET -> 404 after the instance went away", lambda: get_instance("team-a", "web", ta) is None)
    check(not challenges_in_cluster("team-a", "web"), "the Challenge is still there")
    stopped = watch_states(s1, "web", "Stopped", 60, seq)
    check(seq[-2] == "Stopping" and "Running" in seq, f"states {seq}")
    check(stopped["team"] == "team-a" and stopped["challenge"] == "web", f"Stopped event {stopped}")
    ok(f"the instance goes away: namespace removed, GET 404, events {' -> '.join(seq)}")

    s2 = open_stream("team-a", ta)
    snap = first_snapshot(s2)
    check(snap["instances"] == [], f"reconnect snapshot after the instance stopped: {snap}")
    s2.close()

    r = expect(call("PUT", team_path("team-a", "web"), ta), 201, what="PUT after the old one went")
    check(r.headers.get("location"), "no Location")
    seq2 = []
    watch_states(s1, "web", "Running", 120, seq2)
    inst = wait_for(60, "team-a/web Running again", lambda: running("team-a", "web", ta))
    s3 = open_stream("team-a", ta)
    snap = first_snapshot(s3)
    check([(i["name"], i["state"]) for i in snap["instances"]] == [(inst["name"], "Running")],
          f"reconnect snapshot {snap}, GET says {inst['name']} Running")
    s3.close()
    s1.close()
    ok(f"a new PUT after it went is 201 and runs ({' -> '.join(seq2)}); a reconnect's snapshot shows the "
       "current state first")


def _heartbeat(s):
    while True:
        try:
            item = s.q.get_nowait()
        except queue.Empty:
            return False
        if item[0] == "comment" and item[1] == "heartbeat":
            return True
        check(item[0] != "eof", "stream ended")
        check(item[0] != "event", f"unexpected event before any change: {item}")


def test_concurrent_put_and_rate_limit():
    log("20 concurrent PUTs make one instance; the 21st write is over the burst")
    team = "team-c"
    barrier = threading.Barrier(20)
    results = [None] * 20

    def one(i):
        barrier.wait()
        try:
            results[i] = call("PUT", team_path(team, "web"), ADMIN)
        except Fail as e:
            results[i] = e
    start = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - start
    for r in results:
        check(isinstance(r, Resp), f"a concurrent PUT failed: {r}")
    statuses = sorted(r.status for r in results)
    check(set(statuses) <= {200, 201} and statuses.count(201) == 1,
          f"20 concurrent PUTs answered {statuses} (want one 201, nineteen 200)")
    names = {r.body["name"] for r in results}
    check(len(names) == 1, f"concurrent PUTs name several instances: {names}")
    creator = [r for r in results if r.status == 201][0]
    check(creator.headers.get("location", "").endswith(team_path(team, "web")), "the 201 has no Location")
    objs = challenges_in_cluster(team, "web")
    check(len(objs) == 1 and objs[0]["metadata"]["name"] in names, f"Challenges of {team}/web: {objs}")
    ok(f"20 concurrent PUTs: one 201 with Location, nineteen 200, one name, one Challenge ({took:.1f}s)")

    # The burst (20) is spent and one write per minute comes back: unless the PUTs
    # took most of a minute, the next writes are refused and change nothing.
    check(took < 45, f"the 20 PUTs took {took:.0f}s: too slow to test the burst (a write came back)")
    before = challenges_in_cluster(team, "web")[0]
    for method, path, what in [("PUT", team_path(team, "tcp"), "PUT of another challenge"),
                               ("DELETE", team_path(team, "web"), "DELETE"),
                               ("POST", team_path(team, "web", "renew"), "renew"),
                               ("PUT", team_path(team, "web"), "PUT of the same")]:
        r = expect(call(method, path, ADMIN), 429, "TooManyRequests", f"{what} over the burst")
        check(int(r.headers["retry-after"]) >= 1, f"Retry-After {r.headers['retry-after']}")
    r = expect(call("PUT", team_path(team, "tcp"), TEAMS[team]), 429, "TooManyRequests",
               "the team's own token shares its budget")
    check(not challenges_in_cluster(team, "tcp"), "a 429 PUT created a Challenge")
    obj = challenges_in_cluster(team, "web")
    check(len(obj) == 1 and not obj[0]["metadata"].get("deletionTimestamp"), "a 429 DELETE deleted")
    check(obj[0]["spec"] == before["spec"], f"a 429 write changed the spec: {before['spec']} -> {obj[0]['spec']}")
    expect(call("GET", team_path(team, "web"), ADMIN), 200, what="reads are not limited")
    expect(call("PUT", team_path("team-d", "web"), ADMIN), 201, what="another team's budget is its own")
    ok("429 TooManyRequests with Retry-After >= 1 on the 21st write (admin or team token), nothing changed; "
       "reads and other teams unaffected")

    inst = wait_for(120, f"{team}/web Running", lambda: running(team, "web"))
    check(inst["name"] in names, "a different instance runs")
    ok("the concurrently created instance goes Running with endpoints")


def test_quota_and_delete():
    log("quota: a team's fourth instance (team-d, admin token)")
    team = "team-d"  # web was created by the previous scenario
    for c in ("tcp", "plain"):
        expect(call("PUT", team_path(team, c), ADMIN), 201, what=f"PUT {team}/{c}")
    for c in ("web", "tcp", "plain"):
        wait_for(120, f"{team}/{c} Running", lambda c=c: running(team, c))
    inst = get_instance(team, "tcp")
    check(re.match(r"^[^/\s:]+:\d+$", inst["endpoints"][0]["address"]) and inst["endpoints"][0]["type"] == "TCP",
          f"TCP endpoint {inst['endpoints']}")
    r = expect(call("PUT", team_path(team, "short"), ADMIN), 409, "QuotaExceeded", "a fourth instance")
    check(not challenges_in_cluster(team, "short"), "the refused fourth instance was created")
    check(len(challenges_in_cluster(team)) == 3, "team-d does not have 3 Challenges")
    lst = expect(call("GET", team_path(team), ADMIN), 200, what="list").body
    check([i["challenge"] for i in lst["instances"]] == ["plain", "tcp", "web"], f"list not sorted: {lst}")
    ok("three instances run (TCP endpoint host:port); the fourth PUT is 409 QuotaExceeded and creates nothing; "
       "the list is sorted by challenge")

    ns = challenge_object(inst["name"])["status"]["namespace"]
    r = expect(call("DELETE", team_path(team, "tcp"), ADMIN), 202, what="DELETE tcp")
    check(r.body["state"] == "Stopping", f"DELETE answered {r.body}")
    wait_for(120, "GET -> 404 after DELETE", lambda: get_instance(team, "tcp") is None)
    wait_for(120, f"namespace {ns} gone", lambda: not namespace_exists(ns))
    expect(call("GET", team_path(team, "tcp"), ADMIN), 404, "NotFound", "GET after it went")
    expect(call("DELETE", team_path(team, "tcp"), ADMIN), 404, "NotFound", "DELETE after it went")
    ok("DELETE: 202 Stopping, then GET 404 and the instance namespace removed; DELETE again is 404")
    r = expect(call("PUT", team_path(team, "short"), ADMIN), 201, what="PUT once a slot is free")
    ok("with a slot free the fourth challenge's PUT is 201")


def next_instance_event(s, challenge, pred, timeout, what):
    """The next instance event of challenge on s for which pred holds."""
    end = time.monotonic() + timeout
    while True:
        name, ev = s.next_event(max(0.1, end - time.monotonic()), what)
        if name == "instance" and ev["challenge"] == challenge and pred(ev):
            return ev


def test_renew():
    log("renew until the limit (team-e's token, lifetime 2m, renewBy 2m, max 5m)")
    te, team = TEAMS["team-e"], "team-e"
    s = open_stream(team, te)
    first_snapshot(s)
    expect(call("PUT", team_path(team, "short"), te), 201, what="PUT short")
    inst = wait_for(120, "short Running with an expiry", lambda: (lambda i: i if i and i["expiresAt"] else None)(
        running(team, "short", te)))
    created, mx = inst["createdAt"], inst["maxExpiresAt"]
    check(secs(created, inst["expiresAt"]) == 120 and secs(created, mx) == 300, f"short instance {inst}")
    check(inst["renewable"] is True, "not renewable")
    r = call("POST", team_path(team, "short", "renew"), te, '{"foo": 1}')
    expect(r, 400, "BadRequest", "renew with an unknown field")
    check(get_instance(team, "short", te)["expiresAt"] == inst["expiresAt"], "a 400 renew moved the expiry")
    # Back to back, as a client clicking twice would: each renewal counts.
    prev, moves = inst["expiresAt"], []
    for _ in range(5):
        if ts(prev) >= ts(mx):
            break
        r = expect(call("POST", team_path(team, "short", "renew"), te, "{}" if moves else None), 200, what="renew")
        e = r.body["expiresAt"]
        want = min(ts(prev) + datetime.timedelta(seconds=120), ts(mx))
        check(ts(e) > ts(prev) and ts(e) <= ts(mx), f"renew moved expiresAt {prev} -> {e} (max {mx})")
        check(ts(e) == want, f"renew: expiresAt {e}, want min(expiresAt + renewBy, max) = {want}")
        check(r.body["maxExpiresAt"] == mx and r.body["name"] == inst["name"], f"renew answered {r.body}")
        moves.append(e)
        prev = e
    check(ts(prev) == ts(mx) and len(moves) == 2, f"renewals {moves}, max {mx}")
    # The stream may fold changes that come close together into one event, but
    # never reorders them: the expiries it shows only grow, up to the last.
    shown = []
    while not shown or shown[-1] != moves[-1]:
        ev = next_instance_event(s, "short", lambda ev: True, 30, f"an event with expiresAt {moves[-1]}")
        if ev["expiresAt"] != (shown[-1] if shown else None):
            shown.append(ev["expiresAt"])
    renewed = [e for e in shown if ts(e) > ts(inst["expiresAt"])]
    check(renewed and all(ts(a) < ts(b) for a, b in zip(renewed, renewed[1:])) and set(renewed) <= set(moves),
          f"expiries in events {shown}, renewals {moves}")
    s.close()
    inst = wait_for(30, "GET shows the last expiry", lambda: (lambda i: i if i["expiresAt"] == mx else None)(
        get_instance(team, "short", te)))
    check(inst["renewable"] is False, f"renewable at max: {inst}")
    expect(call("POST", team_path(team, "short", "renew"), te), 409, "RenewLimitReached", "renew at max")
    check(get_instance(team, "short", te)["expiresAt"] == mx, "the refused renew moved the expiry")
    spec = challenge_object(inst["name"])["spec"]
    check(ts(spec["expiresAt"]) == ts(mx), f"spec.expiresAt {spec.get('expiresAt')}, max {mx}")
    ok(f"renew moves expiresAt by renewBy, clamped at max ({' -> '.join(moves)}), events show it in order; "
       "renewable false; then 409 RenewLimitReached, unchanged")


def test_put_expiry():
    log("PUT with an expiresAt, concurrent renewals (team-g)")
    team = "team-g"
    r = expect(call("PUT", team_path(team, "short"), ADMIN, {"expiresAt": "2099-01-01T00:00:00Z"}), 201,
               what="PUT with a far expiry")
    inst = wait_for(60, "the far expiry clamped at max", lambda: (
        lambda i: i if i and i["expiresAt"] and i["expiresAt"] == i["maxExpiresAt"] else None)(
        get_instance(team, "short")))
    check(secs(inst["createdAt"], inst["expiresAt"]) == 300 and inst["renewable"] is False, f"{inst}")
    expect(call("POST", team_path(team, "short", "renew"), ADMIN), 409, "RenewLimitReached", "renew at max")
    soon = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=10)).replace(microsecond=0)
    want = soon.strftime("%Y-%m-%dT%H:%M:%SZ")
    expect(call("PUT", team_path(team, "web"), ADMIN, {"expiresAt": want}), 201, what="PUT with an earlier expiry")
    inst = wait_for(60, "the earlier expiry", lambda: (lambda i: i if i and i["expiresAt"] == want else None)(
        get_instance(team, "web")))
    ok("PUT {expiresAt}: a far one is clamped to max (then renew is 409), an earlier one is kept")

    # Three renewals at once (30m each, 2h max): none is lost. A renewal that loses
    # every optimistic retry may answer 503 (documented); the ones that answer
    # 200 each moved the expiry by renewBy, to distinct times.
    results = [None] * 3
    barrier = threading.Barrier(3)

    def one(i):
        barrier.wait()
        try:
            results[i] = call("POST", team_path(team, "web", "renew"), ADMIN)
        except Fail as e:
            results[i] = e
    threads = [threading.Thread(target=one, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        check(isinstance(r, Resp) and r.status in (200, 503), f"a concurrent renew answered {r}")
    got = sorted(ts(r.body["expiresAt"]) for r in results if r.status == 200)
    n = len(got)
    check(n >= 1, "no concurrent renew succeeded")
    step = datetime.timedelta(seconds=1800)
    check(got == [ts(want) + step * k for k in range(1, n + 1)],
          f"{n} concurrent renewals from {want} gave {[str(g) for g in got]}")
    final = (ts(want) + step * n).strftime("%Y-%m-%dT%H:%M:%SZ")
    wait_for(30, "GET shows the renewed expiry", lambda: get_instance(team, "web")["expiresAt"] == final)
    ok(f"3 concurrent renewals: {n} answered 200, each moved the expiry by renewBy, none lost")


def test_error_state():
    log("an instance that cannot start (team-x)")
    team = "team-x"
    expect(call("PUT", team_path(team, "broken"), ADMIN), 201, what="PUT broken")
    inst = wait_for(90, "state Error", lambda: (lambda i: i if i and i["state"] == "Error" else None)(
        get_instance(team, "broken")))
    check(inst["status"] == "Error" and inst["reason"] == "ImagePullFailed" and inst["message"]
          and inst["endpoints"] == [], f"broken instance {inst}")
    r = expect(call("PUT", team_path(team, "broken"), ADMIN), 200, what="PUT of an instance in Error")
    check(r.body["name"] == inst["name"], "PUT of an Error instance made another")
    expect(call("DELETE", team_path(team, "broken"), ADMIN), 202, what="DELETE an Error instance")
    wait_for(120, "the Error instance gone", lambda: get_instance(team, "broken") is None)
    ok("an instance whose image cannot be pulled shows state Error, reason ImagePullFailed and a message; "
       "PUT returns it (200), DELETE removes it")


def test_made_with_kubectl():
    log("a Challenge made with kubectl is the team's instance too (team-h)")
    team = "team-h"
    p = subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, "--request-timeout=30s", "create", "-f", "-"],
                       input=json.dumps({"apiVersion": "ctf.kopc.io/v1alpha1", "kind": "Challenge",
                                         "metadata": {"name": "by-hand", "namespace": NS},
                                         "spec": {"definition": "tcp", "team": team}}),
                       capture_output=True, text=True)
    check(p.returncode == 0, f"kubectl create: {p.stderr}")
    inst = wait_for(60, "GET shows it", lambda: get_instance(team, "tcp"))
    check(inst["name"] == "by-hand", f"GET {team}/tcp: {inst}")
    r = expect(call("PUT", team_path(team, "tcp"), ADMIN), 200, what="PUT over a kubectl-made Challenge")
    check(r.body["name"] == "by-hand", f"PUT answered {r.body}")
    check(len(challenges_in_cluster(team, "tcp")) == 1, "PUT made a second Challenge beside the kubectl-made one")
    ok("a Challenge made with kubectl shows in GET, and PUT returns it (200) rather than making another")


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


def wait_eof(s, secs, what):
    """Waits until stream s ends (events before that are skipped)."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        try:
            item = s.q.get(timeout=max(0.1, end - time.monotonic()))
        except queue.Empty:
            break
        if item[0] == "eof":
            return
    raise Fail(f"event stream of {s.team} still open {secs}s after {what}")


def still_open(s, what):
    """Checks that stream s is still open: after what is queued, something new comes."""
    while True:
        try:
            item = s.q.get_nowait()
        except queue.Empty:
            break
        check(item[0] != "eof", f"the stream of {s.team} ended: {what}")
    item = s.next(30, "a heartbeat")
    check(item[0] != "eof", f"the stream of {s.team} ended: {what}")


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


def secrets_hex():
    return os.urandom(24).hex()


def patch_tokens(tokens):
    kubectl("-n", "kopc-system", "patch", "secret", "ctf-team-tokens", "--type", "merge",
            "-p", json.dumps({"stringData": tokens}))


def test_flag_check():
    log("the flag check: admin only, yes or no, no instance needed, no write spent")
    team, path = "flag-team", team_path("flag-team", "web", "flag")
    ta = TEAMS["team-a"]
    expect(call("POST", team_path("team-a", "web", "flag"), ta, {"flag": FLAG}), 403, "Forbidden",
           "a team token asks for its own flag check")
    expect(call("POST", path, None, {"flag": FLAG}), 401, "Unauthorized", "a flag check without a token")
    for bad in (None, "{}", {"flag": ""}, {"flag": 5}, {"flag": FLAG, "team": "x"}, {"flag": "x" * 1025}, "[1]"):
        expect(call("POST", path, ADMIN, bad), 400, "BadRequest", f"a flag check with body {str(bad)[:40]}")
    r = expect(call("POST", path, ADMIN, {"flag": FLAG}), 200, what="the right flag")
    check(r.body == {"correct": True}, f"the right flag: {r.body}")
    for wrong in (FLAG[:-1], FLAG + "x", FLAG.upper(), " " + FLAG, "flag{}"):
        r = expect(call("POST", path, ADMIN, {"flag": wrong}), 200, what=f"a wrong flag {wrong!r}")
        check(r.body == {"correct": False}, f"a wrong flag {wrong!r}: {r.body}")
    check(get_instance(team, "web") is None, "a flag check made an instance")
    expect(call("POST", team_path(team, "tcp", "flag"), ADMIN, {"flag": FLAG}), 409, "NoFlag",
           "a flag check of a definition without a flag")
    expect(call("POST", team_path(team, "nope", "flag"), ADMIN, {"flag": FLAG}), 404, "NotFound",
           "a flag check of an unknown challenge")
    # Checks spend none of the team's writes: far more than its burst all answer 200.
    for _ in range(30):
        expect(call("POST", path, ADMIN, {"flag": "flag{guess}"}), 200, what="a repeated flag check")
    expect(call("PUT", team_path(team, "web"), ADMIN), 201, what="a PUT after 30 flag checks")
    expect(call("DELETE", team_path(team, "web"), ADMIN), 202, what="DELETE")
    ok("POST .../flag: 403 for a team token, 400 for a bad body, true only for the exact flag, "
       "409 NoFlag, 404; no instance made, no write spent")


def test_no_leaks():
    log("no flag and no token in any answer")
    blob = b"\n".join(SEEN)
    check(FLAG.encode() not in blob, "the flag appears in an API answer")
    for t in [ADMIN, *TEAMS.values(), *ROTATE]:
        check(t.encode() not in blob, "a token appears in an API answer")
    ok(f"the flag and every token are absent from all {len(SEEN)} bodies, headers and stream lines")


def test_metrics():
    log("metrics")
    with urllib.request.urlopen(METRICS + "/metrics", timeout=30) as r:
        page = r.read().decode()
    lines = [l for l in page.splitlines() if l.startswith("ctf_api_requests_total{")]
    check(lines, "no ctf_api_requests_total series")
    for code in sorted({200, 201, 202, 400, 401, 403, 404, 405, 409, 413, 429} & CODES_SEEN):
        check(any(f'="{code}"' in l for l in lines), f"ctf_api_requests_total has no series for code {code}")
    ok("ctf_api_requests_total counts every status the test provoked (200, 201, 202, 4xx)")


def main():
    try:
        test_openapi()
        test_auth()
        test_challenges()
        test_refusals()
        test_lifecycle_and_events()
        test_concurrent_put_and_rate_limit()
        test_quota_and_delete()
        test_renew()
        test_put_expiry()
        test_error_state()
        test_made_with_kubectl()
        test_stream_limit()
        test_stream_authorization()
        test_stream_revoked_while_opening()
        test_flag_check()
        test_no_leaks()
        test_metrics()
    except Fail as e:
        print(f"FAIL: {e}", file=sys.stderr, flush=True)
        return 1
    finally:
        pf = os.environ.get("PASSED_FILE")
        if pf:
            with open(pf, "w") as f:
                f.write(str(passed))
    return 0



if __name__ == "__main__":
    sys.exit(main())
