"""common.py - what every part of the instance API's end-to-end test shares:
the handles ctf_api_test.sh passes (the API's and the metrics' URLs, the
admin and team tokens, the flag, kubectl and the cluster's kubeconfig), the
count of passed checks (ok), check and wait_for, the operator's OpenAPI
document with a small JSON Schema checker that every answer goes through
(call), the HTTP helpers, the cluster seen through kubectl, the event
streams, and the token Secret's helpers. Standard library only.
"""
import datetime
import http.client
import json
import os
import queue
import re
import socket
import subprocess
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

    def __init__(self, team, token, path=None):
        self.team = team
        self.q = queue.Queue()
        self.path = path or f"/api/v1/teams/{team}/events"
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
            schemas = DOC["paths"][template_of(self.path)]["get"]["responses"]["200"][
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


def secrets_hex():
    return os.urandom(24).hex()


def patch_tokens(tokens):
    kubectl("-n", "kopc-system", "patch", "secret", "ctf-team-tokens", "--type", "merge",
            "-p", json.dumps({"stringData": tokens}))
