#!/usr/bin/env python3
"""ctf_real_test.py - the CTF operator's instances on a real node, driven
through the instance API and checked by connecting to them.

Run by ctf_real_test.sh (scenario "lifecycle"), ctf_isolation_test.sh
(scenario "isolation"), ctf_pool_test.sh (scenario "pool") and
ctf_gateway_real_test.sh (scenario "gateway"), which set up the cluster and the operator
(ctf_real_lib.sh) and pass, in the environment: API, METRICS, ADMIN_TOKEN,
TEAM_TOKENS (JSON), NODE_IP, KUBECTL, KUBECONFIG, OP_LOG, PASSED_FILE.

Every check prints "ok N - what" or raises; waits poll for a condition with
a generous bound and never assert a duration.
"""
import base64
import calendar
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

API = os.environ["API"]
METRICS = os.environ["METRICS"]
ADMIN = os.environ["ADMIN_TOKEN"]
TEAM_TOKENS = json.loads(os.environ["TEAM_TOKENS"])
NODE_IP = os.environ["NODE_IP"]
KUBECTL = os.environ["KUBECTL"]
KUBECONFIG = os.environ["KUBECONFIG"]
OP_LOG = os.environ["OP_LOG"]
from e2e_check import Errored, Fail, check, greeting, log, not_error, ok, wait  # noqa: E402


# ---- the instance API ------------------------------------------------------

def api(method, path, token=ADMIN, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(API + path, data=data, method=method,
                                 headers={"Authorization": f"Bearer {token}"})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, json.loads(raw) if raw else None


def instance(team, chal):
    code, body = api("GET", f"/api/v1/teams/{team}/instances/{chal}")
    return body if code == 200 else None


def start(team, chal):
    code, body = api("PUT", f"/api/v1/teams/{team}/instances/{chal}", TEAM_TOKENS[team])
    check(code in (200, 201), f"PUT {team}/{chal}: {code} {body}")
    return body


def stop(team, chal):
    code, body = api("DELETE", f"/api/v1/teams/{team}/instances/{chal}", TEAM_TOKENS[team])
    check(code == 202, f"DELETE {team}/{chal}: {code} {body}")


def state_is(team, chal, state):
    i = instance(team, chal)
    return i if i and i["state"] == state else None


def running(team, chal, secs=180, through_error=False):
    """Wait for Running; return the Instance the moment it is first seen. An
    Error fails at once, unless through_error (an instance being fixed)."""
    def probe():
        i = instance(team, chal)
        if not through_error:
            not_error(i, f"{team}/{chal}")
        return i if i and i["state"] == "Running" else None
    return wait(secs, f"{team}/{chal} Running", probe, every=0.1)


def endpoint(inst, name=None):
    for e in inst["endpoints"]:
        if name is None or e["name"] == name:
            return e["address"]
    raise Fail(f"no endpoint {name} in {inst['endpoints']}")


# ---- talking to instances --------------------------------------------------

def flag_of(line):
    check("Your flag: " in line, f"no flag in greeting {line!r}")
    return line.split("Your flag: ", 1)[1].strip()


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def refused(addr, timeout=3):
    host, port = addr.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
        return False
    except OSError:
        return True


# ---- the cluster -----------------------------------------------------------

def kubectl(*args, check_rc=True, input=None):
    r = subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, "--request-timeout=30s", *args],
                       capture_output=True, text=True, input=input)
    if check_rc and r.returncode != 0:
        raise Fail(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def kjson(*args):
    return json.loads(kubectl(*args, "-o", "json"))


def challenge(inst):
    return kjson("-n", "ctf", "get", "challenge", inst["name"])


def namespace_of(inst):
    return challenge(inst)["status"]["namespace"]


def pod_of(ns, pod_label=None):
    sel = "app.kubernetes.io/managed-by=kopc-ctf"
    if pod_label:
        sel += f",ctf.kopc.io/pod={pod_label}"
    pods = kjson("-n", ns, "get", "pods", "-l", sel)["items"]
    pods = [p for p in pods if p["status"].get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")]
    check(pods, f"no running pod in {ns} ({sel})")
    return pods[0]


def exec_in(ns, pod, script, check_rc=False):
    """Run sh -c script in the pod's first container; return (rc, output)."""
    r = subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, "--request-timeout=60s", "-n", ns,
                        "exec", pod, "--", "sh", "-c", script], capture_output=True, text=True)
    if check_rc and r.returncode != 0:
        raise Fail(f"exec in {ns}/{pod}: {script}: rc {r.returncode}: {r.stderr.strip()}")
    return r.returncode, (r.stdout + r.stderr).strip()


def connects(ns, pod, host, port, secs=3):
    """Whether pod can open a TCP connection to host:port and get bytes back,
    or (for a silent port) at least complete the handshake."""
    rc, out = exec_in(ns, pod, f"nc -w {secs} {host} {port} </dev/null; echo rc=$?")
    return "rc=0" in out or ("rc=" in out and out.split("rc=")[0].strip() != ""), out


def edit_definition(name, fn):
    o = kjson("-n", "ctf", "get", "chaldef", name)
    fn(o["spec"])
    kubectl("replace", "-f", "-", input=json.dumps(o))


def copy_definition(src, dst, fn):
    o = kjson("-n", "ctf", "get", "chaldef", src)
    o["metadata"] = {"name": dst, "namespace": "ctf"}
    o.pop("status", None)
    fn(o["spec"])
    kubectl("apply", "-f", "-", input=json.dumps(o))
    wait(30, f"the API to list the definition {dst}", lambda: listed(dst))


def listed(name):
    """The definition is in the operator's cache: kubectl apply returns
    when the apiserver has it, a watch event later the API knows it."""
    code, body = api("GET", "/api/v1/challenges")
    return code == 200 and any(c["name"] == name for c in body["challenges"])


def secret_bytes_everywhere():
    """Everything an operator or user reads besides the flag's Secret: every
    Challenge, every Event, the operator's log, its metrics."""
    parts = [kubectl("get", "challenges.ctf.kopc.io", "-A", "-o", "json"),
             kubectl("get", "events", "-A", "-o", "json"),
             open(OP_LOG, errors="replace").read()]
    with urllib.request.urlopen(METRICS + "/metrics", timeout=10) as r:
        parts.append(r.read().decode())
    return "\n".join(parts)


# ---- scenarios -------------------------------------------------------------

def greeting_soon(addr, secs=8):
    """The greeting, from the first connection that succeeds within secs:
    room for kube-proxy to program a NodePort it has just been told of (a
    second or so, more on a loaded machine), far less than the slow
    program below takes to start listening."""
    return wait(secs, f"a greeting from {addr}", lambda: _try_greeting(addr), every=0.2)


def _try_http(url):
    try:
        return http_get(url, timeout=2)
    except OSError:
        return None


def _try_greeting(addr):
    try:
        return greeting(addr, timeout=2)
    except OSError:
        return None


def scenario_lifecycle():
    log("create through the API, Running means answering")
    start("team-a", "nc")
    start("team-b", "nc")
    a = running("team-a", "nc")
    flag_a = flag_of(greeting_soon(endpoint(a)))
    b = running("team-b", "nc")
    flag_b = flag_of(greeting_soon(endpoint(b)))
    check(flag_a.startswith("flag{") and flag_b.startswith("flag{"), f"flags {flag_a} {flag_b}")
    check(flag_a != flag_b, "two teams got the same dynamic flag")
    check(endpoint(a).split(":")[0] == NODE_IP, f"endpoint {endpoint(a)} is not on the node {NODE_IP}")
    ok(f"team-a's instance answers at {endpoint(a)} once Running, with its own flag")
    ok("team-b's instance of the same challenge answers with a different flag")


    start("team-a", "web")
    w = running("team-a", "web")
    url = endpoint(w)
    check(url.startswith("http://"), f"web endpoint {url}")
    status, robots = wait(3, f"{url} to answer", lambda: _try_http(url + "/robots.txt"), every=0.2)
    path = [l.split(":", 1)[1].strip() for l in robots.splitlines() if l.startswith("Disallow:")][0]
    status, body = http_get(url + path)
    check(status == 200 and body.strip() == "flag{r0b0ts_txt_t3lls_4ll}", f"{url}{path}: {status} {body!r}")
    ok(f"the web instance serves its page and, behind {path}, the static flag")

    log("hardening, read from inside the container")
    ns = namespace_of(a)
    pod = pod_of(ns)["metadata"]["name"]
    _, uid = exec_in(ns, pod, "id -u", check_rc=True)
    check(uid.strip() not in ("", "0"), f"uid {uid}")
    rc, out = exec_in(ns, pod, "touch /probe 2>&1 || echo refused")
    check("refused" in out and "Read-only file system" in out, f"root filesystem writable: {out}")
    _, out = exec_in(ns, pod, "ls /var/run/secrets/kubernetes.io/serviceaccount 2>&1; echo done")
    check("No such file" in out, f"a service-account token is mounted: {out}")
    _, status = exec_in(ns, pod, "cat /proc/self/status", check_rc=True)
    fields = dict(l.split(":\t", 1) for l in status.splitlines() if ":\t" in l)
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        check(int(fields[cap].strip(), 16) == 0, f"{cap} is {fields[cap].strip()}")
    check(fields["NoNewPrivs"].strip() == "1", "no_new_privs is off")
    check(fields["Seccomp"].strip() == "2", f"seccomp mode {fields['Seccomp'].strip()}, not filtering")
    ok(f"inside: uid {uid.strip()}, read-only root, no service-account token, no capabilities, "
       "no_new_privs, seccomp filtering")

    log("the flag reaches the container only")
    _, env_flag = exec_in(ns, pod, 'printf %s "$FLAG"', check_rc=True)
    _, file_flag = exec_in(ns, pod, "cat /flag/flag", check_rc=True)
    check(env_flag == flag_a and file_flag.strip() == flag_a, f"env {env_flag!r} file {file_flag!r}")
    leaks = secret_bytes_everywhere()
    for f in (flag_a, flag_b, "flag{r0b0ts_txt_t3lls_4ll}"):
        check(f not in leaks, f"flag {f} appears in a Challenge, an Event, the log or the metrics")
    ok("the flag is in the container's env FLAG and /flag/flag, and in no Challenge, Event, log or metric")

    log("a changed flag")
    wns = namespace_of(w)
    web_pod = pod_of(wns)
    edit_definition("web", lambda d: d["flag"].update({"static": "flag{n3w_r0b0ts}"}))

    def new_flag_served():
        try:
            return http_get(url + path)[1].strip() == "flag{n3w_r0b0ts}"
        except OSError:
            return False
    wait(120, "the running web instance to serve the new flag", new_flag_served)
    now = pod_of(wns)
    check(now["metadata"]["uid"] == web_pod["metadata"]["uid"] and
          now["status"]["containerStatuses"][0]["restartCount"] == 0,
          "the web instance's pod was replaced or restarted for the new flag")
    ok("changing the definition's flag reaches the running instance through /flag/flag, "
       "without restarting it (docs/ctf-resources.md)")
    check("flag{n3w_r0b0ts}" not in secret_bytes_everywhere(), "the new flag leaked")
    ok("the new flag leaks nowhere either")

    scenario_rolling_update(w, url, "flag{n3w_r0b0ts}")

    log("renew, expire, delete: nothing left")
    before = instance("team-a", "nc")
    code, after = api("POST", "/api/v1/teams/team-a/instances/nc/renew", TEAM_TOKENS["team-a"])
    check(code == 200 and after["expiresAt"] > before["expiresAt"], f"renew: {code} {after}")
    ok(f"renew moves the expiry from {before['expiresAt']} to {after['expiresAt']}")

    # Expiry: move team-b's expiry to a few seconds from now, as an organizer can.
    nsb = namespace_of(b)
    soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 5))
    kubectl("-n", "ctf", "patch", "challenge", b["name"], "--type", "merge",
            "-p", json.dumps({"spec": {"expiresAt": soon}}))
    wait(120, "team-b's expired instance to go", lambda: instance("team-b", "nc") is None)
    wait(120, f"namespace {nsb} to go",
         lambda: kubectl("get", "namespace", nsb, check_rc=False).strip() == "")
    wait(30, "team-b's node port to close", lambda: refused(endpoint(b)))
    ok("at expiry the instance, its namespace and its node port are gone")

    stop("team-a", "web")
    stop("team-a", "nc")
    for inst in (w, a):
        wait(120, f"{inst['challenge']} to go", lambda: instance("team-a", inst["challenge"]) is None)
    for addr in (endpoint(a), url.replace("http://", "")):
        wait(60, f"{addr} to close", lambda: refused(addr))
    left = [n["metadata"]["name"] for n in kjson("get", "namespaces", "-l", "app.kubernetes.io/managed-by=kopc-ctf")["items"]]
    check(not left, f"instance namespaces left: {left}")
    services = kjson("get", "services", "-A")["items"]
    ports = {p.get("nodePort") for s in services for p in s["spec"].get("ports", [])}
    for inst_addr in (endpoint(a), endpoint(b), url.replace("http://", "")):
        check(int(inst_addr.rsplit(":", 1)[1]) not in ports, f"node port of {inst_addr} still allocated")
    ok("DELETE removes every instance: no namespace, pod or Service left, node ports freed")

    log("real failures are reported, and recover")
    copy_definition("nc", "missing", lambda d: d["pods"][0]["template"]["containers"][0].update(
        {"image": "registry.devcluster.test/kopc/not-built:1"}))
    copy_definition("nc", "crashing", lambda d: d["pods"][0]["template"]["containers"][0].update(
        {"command": ["/bin/sh", "-c", "echo crashing on purpose; exit 3"]}))
    start("team-c", "missing")
    start("team-c", "crashing")

    def error(chal, reason):
        i = instance("team-c", chal)
        return i if i and i["state"] == "Error" and i["reason"] == reason else None
    m = wait(180, "missing to be Error/ImagePullFailed", lambda: error("missing", "ImagePullFailed"))
    check("registry.devcluster.test/kopc/not-built:1" in m["message"], f"message {m['message']!r}")
    ok(f"an image the registry lacks: Error ImagePullFailed, \"{m['message']}\"")
    c = wait(240, "crashing to be Error/CrashLoop", lambda: error("crashing", "CrashLoop"))
    ok(f"a program that exits: Error CrashLoop, \"{c['message']}\"")
    edit_definition("missing", lambda d: d["pods"][0]["template"]["containers"][0].update(
        {"image": "registry.devcluster.test/kopc/ctf-greeter:0.2.0"}))
    edit_definition("crashing", lambda d: d["pods"][0]["template"]["containers"][0].pop("command"))
    for chal in ("missing", "crashing"):
        i = running("team-c", chal, secs=300, through_error=True)
        flag_of(greeting_soon(endpoint(i)))
    ok("fixing the definitions brings both instances to Running, answering")
    stop("team-c", "missing")
    stop("team-c", "crashing")

    log("Running waits for the program to answer")
    # A program that takes a while to listen: Running must wait for it (the
    # pods' readiness probes, which the operator sets from the exposed ports
    # when the definition has none, and the Service's ready endpoints).
    copy_definition("nc", "slow", lambda d: d["pods"][0]["template"]["containers"][0].update(
        {"command": ["/bin/sh", "-c", "sleep 20; exec /usr/local/bin/ctf-greeter"]}))
    start("team-c", "slow")
    s = running("team-c", "slow")
    flag_of(greeting_soon(endpoint(s)))
    ok("an instance whose program listens only after 20 s is reported Running only once it answers")
    stop("team-c", "slow")


class EventStream:
    """A team's event stream (GET /api/v1/teams/T/events) read in the
    background: text holds everything received so far."""

    def __init__(self, team):
        import threading
        self.text = ""
        req = urllib.request.Request(API + f"/api/v1/teams/{team}/events",
                                     headers={"Authorization": f"Bearer {TEAM_TOKENS[team]}"})
        self.resp = urllib.request.urlopen(req, timeout=600)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            for line in self.resp:
                self.text += line.decode(errors="replace")
        except OSError:
            pass

    def close(self):
        try:
            self.resp.close()
        except OSError:
            pass


# A new version must answer within this bound once the definition changed
# (docs/ctf-resources.md: Rolling replaces one instance's pod next to the
# old one, then moves on; the measured time is printed).
UPDATE_BOUND_S = 180


def scenario_rolling_update(w, url, flag):
    """A fixed version of the web challenge pushed with spec.update Rolling:
    the running instance of team-a answers the new version (robots.txt names
    /v2flag, behind which the same flag is served) within UPDATE_BOUND_S,
    on the same endpoint, with the same expiry, after a new pod replaced the
    old one; the team's event stream told it "updated to the new version"."""
    log("a new version of the web challenge, Rolling")
    ns = namespace_of(w)
    pod_before = pod_of(ns)["metadata"]["uid"]
    before = instance("team-a", "web")
    stream = EventStream("team-a")
    wait(30, "the stream's snapshot", lambda: "event: snapshot" in stream.text)

    def v2(d):
        d["update"] = {"strategy": "Rolling", "maxUnavailable": 1}
        c = d["pods"][0]["template"]["containers"][0]
        c["env"] = [e for e in c.get("env", []) if e.get("name") != "FLAG_PATH"] + \
            [{"name": "FLAG_PATH", "value": "/v2flag"}]
    t0 = time.monotonic()
    edit_definition("web", v2)

    def answers_v2():
        got = _try_http(url + "/robots.txt")
        if not got or got[0] != 200 or "Disallow: /v2flag" not in got[1]:
            return False
        status, body = http_get(url + "/v2flag")
        return status == 200 and body.strip() == flag
    wait(UPDATE_BOUND_S, "the endpoint to answer version 2", answers_v2, every=0.5)
    took = time.monotonic() - t0
    ok(f"team-a's endpoint {url} answers version 2 (robots.txt names /v2flag, the flag behind it) "
       f"{took:.1f} s after the change (bound {UPDATE_BOUND_S} s)")
    after = wait(120, "the instance Running with the update's notice",
                 lambda: (lambda i: i if i and i["status"] == "Running" and
                          (i["message"] or "").startswith("updated to the new version") else None)(
                     instance("team-a", "web")))
    check(after["endpoints"] == before["endpoints"], f"endpoints {before['endpoints']} -> {after['endpoints']}")
    check(after["expiresAt"] == before["expiresAt"], f"expiry {before['expiresAt']} -> {after['expiresAt']}")
    check(pod_of(ns)["metadata"]["uid"] != pod_before, "the pod was not replaced")
    ok(f"same endpoint, same expiry ({after['expiresAt']}), same flag, a new pod; the API says "
       f"{after['message']!r}")
    wait(30, "the notice in the team's event stream", lambda: "updated to the new version" in stream.text)
    stream.close()
    chal = kjson("-n", "ctf", "get", "challenges.ctf.kopc.io")["items"]
    gen = kjson("-n", "ctf", "get", "chaldef")["items"]
    web_gen = [d["metadata"]["generation"] for d in gen if d["metadata"]["name"] == "web"][0]
    mine = [c for c in chal if c["metadata"]["name"] == after["name"]][0]
    check(mine["status"].get("definitionGeneration") == web_gen,
          f"status.definitionGeneration {mine['status'].get('definitionGeneration')}, definition at {web_gen}")
    ok(f"the team's event stream said so; status.definitionGeneration is {web_gen}")


def reach(ns, pod, host, port, secs=3):
    """Whether a TCP connection from the pod to host:port completes (busybox
    nc exits 0). A port no policy allows is refused at once (kube-router
    answers with ICMP port-unreachable) or times out: both are False."""
    rc, out = exec_in(ns, pod, f"nc -w {secs} {host} {port} </dev/null >/dev/null 2>&1; echo rc=$?")
    check("rc=" in out, f"exec in {ns}/{pod} failed: {out}")
    return out.strip().endswith("rc=0")


def greets_from(ns, pod, host, port, secs=3):
    """Whether the pod gets a flag greeting from host:port."""
    _, out = exec_in(ns, pod, f"nc -w {secs} {host} {port} </dev/null 2>&1")
    return "Your flag: flag{" in out


def isolation_targets(a_ns, b, apiserver):
    """The connections team-a's nc pod must not make, as (what, host, port)."""
    b_ns = namespace_of(b)
    b_pod = pod_of(b_ns)["status"]["podIP"]
    b_svc = kjson("-n", b_ns, "get", "service", "-l", "app.kubernetes.io/managed-by=kopc-ctf")["items"][0]
    b_node_port = endpoint(b).rsplit(":", 1)[1]
    ah, ap = apiserver
    return [
        ("team-b's pod", b_pod, 1337),
        ("team-b's Service", b_svc["spec"]["clusterIP"], b_svc["spec"]["ports"][0]["port"]),
        ("team-b's Service by name", f"{b_svc['metadata']['name']}.{b_ns}.svc.cluster.local",
         b_svc["spec"]["ports"][0]["port"]),
        ("team-b's NodePort", NODE_IP, b_node_port),
        ("the apiserver's Service", "10.96.0.1", 443),
        ("the apiserver", ah, ap),
        ("the node's kubelet", NODE_IP, 10250),
    ]


def scenario_isolation():
    log("instances of two teams, and one with internet egress")
    for team, chal in (("team-a", "nc"), ("team-b", "nc"), ("team-a", "twopod"), ("team-b", "twopod")):
        start(team, chal)
    copy_definition("nc", "ncnet", lambda d: d.setdefault("network", {}).update({"egress": "Internet"}))
    start("team-c", "ncnet")
    a, b = running("team-a", "nc"), running("team-b", "nc")
    ta, tb = running("team-a", "twopod"), running("team-b", "twopod")
    c = running("team-c", "ncnet")
    a_ns, c_ns = namespace_of(a), namespace_of(c)
    a_pod = pod_of(a_ns)["metadata"]["name"]
    c_pod = pod_of(c_ns)["metadata"]["name"]
    server = kubectl("config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}")
    # The apiserver's address on the bridge: the kubernetes Service's endpoint.
    eps = kjson("-n", "default", "get", "endpointslices", "-l", "kubernetes.io/service-name=kubernetes")["items"][0]
    apiserver = (eps["endpoints"][0]["addresses"][0], eps["ports"][0]["port"])
    targets = isolation_targets(a_ns, b, apiserver)
    ok(f"five instances Running (apiserver {apiserver[0]}:{apiserver[1]}, kubeconfig {server})")

    log("what an instance reaches, and what it does not")
    ta_ns, tb_ns = namespace_of(ta), namespace_of(tb)
    app = pod_of(ta_ns, "app")["metadata"]["name"]
    check(wait(30, "team-a's app to greet its db by name", lambda: greets_from(ta_ns, app, "db", 5432)),
          "team-a's app cannot reach its database")
    _, out = exec_in(ta_ns, app, "nslookup db")
    check(f"db.{ta_ns}.svc.cluster.local" in out, f"cluster DNS from the app: {out}")
    ok("a pod of a two-pod instance reaches its database by Service name (cluster DNS allowed)")
    tb_db = pod_of(tb_ns, "db")["status"]["podIP"]
    check(not reach(ta_ns, app, tb_db, 5432), "team-a's app reaches team-b's database")
    check(not reach(ta_ns, app, f"db.{tb_ns}.svc.cluster.local", 5432), "team-a's app reaches team-b's db Service")
    ok("team-a's app reaches neither team-b's database pod nor its Service")
    for what, host, port in targets:
        check(not reach(a_ns, a_pod, host, port), f"team-a's instance reaches {what} ({host}:{port})")
    ok("team-a's instance reaches none of: " + ", ".join(t[0] for t in targets))
    for what, host, port in targets[1:]:
        if what.startswith("team-b's Service by name"):
            continue
        check(not reach(c_ns, c_pod, host, port), f"an instance with internet egress reaches {what} ({host}:{port})")
    ok("internet egress opens no private, cluster or node address")

    log("each of these is the NetworkPolicies' doing")
    stop_operator()
    kubectl("-n", a_ns, "delete", "networkpolicy", "--all")
    kubectl("-n", ta_ns, "delete", "networkpolicy", "--all")
    kubectl("-n", namespace_of(b), "delete", "networkpolicy", "--all")
    kubectl("-n", tb_ns, "delete", "networkpolicy", "--all")
    for what, host, port in targets:
        check(wait(60, f"{what} to become reachable without policies", lambda: reach(a_ns, a_pod, host, port)),
              f"{what} stays unreachable without NetworkPolicies: the check above proved nothing")
    check(wait(60, "team-b's database without policies", lambda: reach(ta_ns, app, tb_db, 5432)),
          "team-b's database stays unreachable without NetworkPolicies")
    ok("with the policies deleted (operator stopped) every one of those connections succeeds")
    start_operator()
    for what, host, port in targets:
        wait(120, f"{what} to be cut off again", lambda: not reach(a_ns, a_pod, host, port))
    wait(120, "team-b's database to be cut off again", lambda: not reach(ta_ns, app, tb_db, 5432))
    ok("the restarted operator re-applies the policies and the isolation holds again")


def expected_flag(definition, team):
    """The dynamic flag of the sample key (docs/ctf-resources.md), computed here."""
    import hashlib
    import hmac
    secret = kjson("-n", "ctf", "get", "secret", "ctf-flag-key")
    key = base64.b64decode(secret["data"]["key"])
    mac = hmac.new(key, f"{definition}:{team}".encode(), hashlib.sha256).hexdigest()[:32]
    return "flag{" + mac + "}"


def pool_status(name):
    return (kjson("-n", "ctf", "get", "chaldef", name).get("status") or {}).get("pool") or {}


def warm_namespaces(name):
    """The unclaimed warm namespaces of definition name, not being deleted."""
    items = kjson("get", "ns", "-l", f"ctf.kopc.io/definition={name},ctf.kopc.io/pool,"
                  "!ctf.kopc.io/challenge")["items"]
    return sorted(n["metadata"]["name"] for n in items if not n["metadata"].get("deletionTimestamp"))


def pool_ready(name, n):
    p = pool_status(name)
    return p if p.get("ready") == n and p.get("size") == n and len(warm_namespaces(name)) == n else None


def served_flag(inst, want, secs=60):
    """Connect until the instance greets with want; return the seconds it took."""
    t0 = time.monotonic()

    def got():
        try:
            line = greeting(endpoint(inst), timeout=2)
        except OSError:
            return None
        return "Your flag: " in line and flag_of(line) == want
    wait(secs, f"{endpoint(inst)} to serve {want}", got, every=0.1)
    return time.monotonic() - t0


def scenario_pool():
    log("a warm pool of 3, with a dynamic flag")
    copy_definition("nc", "warm", lambda d: d.update({"pool": {"min": 3}}))
    wait(180, "3 warm instances Ready", lambda: pool_ready("warm", 3))
    before = warm_namespaces("warm")
    header = kubectl("-n", "ctf", "get", "chaldef", "warm").splitlines()[0].split()
    check(all(c in header for c in ("POOL", "READY", "CLAIMED")), f"kubectl get chaldef: {header}")
    pod = pod_of(before[0])["metadata"]["name"]
    _, env_flag = exec_in(before[0], pod, 'printf %s "${FLAG-unset}"', check_rc=True)
    _, file_flag = exec_in(before[0], pod, "cat /flag/flag; echo .", check_rc=True)
    check(env_flag == "unset" and file_flag == ".", f"a warm instance holds a flag: env {env_flag!r} file {file_flag!r}")
    ok(f"3 warm instances Ready ({', '.join(before)}); kubectl shows POOL/READY/CLAIMED; "
       "a warm instance holds no flag (empty /flag/flag, no env FLAG)")

    log("four teams at once: three claims, one fresh")
    teams = ["team-a", "team-b", "team-c", "team-d"]
    t0 = {}
    import threading

    def put(team):
        t0[team] = time.monotonic()
        start(team, "warm")
    threads = [threading.Thread(target=put, args=(t,)) for t in teams]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    inst, took, delays = {}, {}, {}
    for team in teams:  # each team's flag is looked for as soon as it is seen Running
        inst[team] = running(team, "warm")
        took[team] = time.monotonic() - t0[team]
        delays[team] = served_flag(inst[team], expected_flag("warm", team))
    nss = {team: namespace_of(inst[team]) for team in teams}
    pooled = sorted(t for t in teams if nss[t] in before)
    fresh = [t for t in teams if nss[t] not in before]
    check(len(pooled) == 3 and len(set(nss.values())) == 4, f"namespaces {nss}, warm were {before}")
    check(kjson("get", "ns", nss[fresh[0]])["metadata"].get("labels", {}).get("ctf.kopc.io/pool") is None,
          f"{fresh[0]}'s instance is a warm one that was not Ready yet: {nss[fresh[0]]}")
    ok(f"{', '.join(pooled)} were served from the pool, {fresh[0]} fresh "
       f"(PUT to Running seen: " + ", ".join(f"{t} {took[t]:.2f} s" for t in teams) + ")")

    ok("every team's instance greets with that team's flag; from Running seen to the flag "
       "served: " + ", ".join(f"{t} {delays[t]:.2f} s" for t in teams))
    a_ns = nss[pooled[0]]
    a_pod = pod_of(a_ns)
    check(a_pod["status"]["containerStatuses"][0]["restartCount"] == 0, "a claimed pod restarted")
    ok(f"{pooled[0]}'s pod was not restarted to get its flag")

    log("the pool refills; expiry of a claimed instance deletes it")
    wait(180, "the pool to refill to 3", lambda: pool_ready("warm", 3))
    refilled = warm_namespaces("warm")
    check(not set(refilled) & set(nss.values()), f"a claimed namespace is back in the pool: {refilled}")
    ok(f"the pool refilled to 3 with new instances ({', '.join(refilled)})")
    victim = pooled[0]
    soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3))
    kubectl("-n", "ctf", "patch", "challenge", inst[victim]["name"], "--type", "merge",
            "-p", json.dumps({"spec": {"expiresAt": soon}}))
    wait(120, f"{victim}'s expired instance to go", lambda: instance(victim, "warm") is None)
    wait(120, f"namespace {nss[victim]} to go",
         lambda: nss[victim] not in kubectl("get", "ns", "-o", "name"))
    check(nss[victim] not in warm_namespaces("warm"), "the expired instance went back to the pool")
    ok(f"{victim}'s expired instance was deleted with its namespace, not returned to the pool")

    log("a later claim by another team never sees an earlier team's flag")
    late = "team-e"
    start(late, "warm")
    again = running(late, "warm")
    again_ns = namespace_of(again)
    check(again_ns in refilled, f"the new claim was not served from the refilled pool: {again_ns}")
    served_flag(again, expected_flag("warm", late))
    for team in teams:
        if team != victim:
            line = greeting(endpoint(inst[team]))
            check(flag_of(line) == expected_flag("warm", team), f"{team} now sees {line!r}")
    wait(180, "the pool to refill to 3 after that claim", lambda: pool_ready("warm", 3))
    for ns in warm_namespaces("warm"):
        pod = pod_of(ns)["metadata"]["name"]
        _, file_flag = exec_in(ns, pod, "cat /flag/flag; echo .", check_rc=True)
        check(file_flag == ".", f"warm instance {ns} holds a flag after claims: {file_flag!r}")
    ok(f"{late}'s later claim gets a refilled instance with {late}'s flag; the other teams keep "
       "theirs; the warm ones still hold none")

    log("lowering min, then deleting the definition, deletes the unclaimed instances")
    kubectl("-n", "ctf", "patch", "chaldef", "warm", "--type", "merge", "-p", '{"spec":{"pool":{"min":1}}}')
    wait(120, "the pool lowered to 1", lambda: len(warm_namespaces("warm")) == 1 and pool_status("warm").get("size") == 1)
    kubectl("-n", "ctf", "delete", "chaldef", "warm")
    wait(120, "the warm instances gone", lambda: not warm_namespaces("warm"))
    for ns in [nss[t] for t in teams if t != victim] + [again_ns]:
        check(kjson("get", "ns", ns), f"claimed instance {ns} went with the pool")
    ok("min 3 -> 1 deleted 2 warm instances; deleting the definition deleted the last one; "
       "claimed instances stay with their teams")
    pool_failing()


def pool_events(name, reason):
    """Events of definition name with reason, oldest first."""
    items = kjson("-n", "ctf", "get", "events", "--field-selector",
                  f"involvedObject.name={name},reason={reason}")["items"]
    return sorted(items, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")


def pool_series(name):
    """The operator's ctf_pool_* series of definition name."""
    with urllib.request.urlopen(METRICS + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return [line for line in text.splitlines()
            if line.startswith("ctf_pool_") and f'definition="{name}"' in line]


def pool_failing():
    """A pool whose instances cannot start replaces each one, waiting longer
    every time; a fixed definition fills it; a deleted one leaves no series."""
    log("a pool whose instances cannot start: replaced after a growing wait")
    wait(60, "the series of the deleted definition warm to go", lambda: not pool_series("warm"))
    ok("the deleted definition's ctf_pool_* series are gone from /metrics")
    good = kjson("-n", "ctf", "get", "chaldef", "nc")["spec"]["pods"][0]["template"]["containers"][0]["image"]

    def broken(d):
        d["pods"][0]["template"]["containers"][0]["image"] = "registry.devcluster.test/kopc/not-built:1"
        d["pool"] = {"min": 1}
    copy_definition("nc", "broken", broken)
    waits = wait(240, "two PoolBackoff Events for broken",
                 lambda: (lambda evs: evs if len(evs) >= 2 else None)(pool_events("broken", "PoolBackoff")))
    failed = pool_events("broken", "WarmInstanceFailed")
    check(failed and "not-built:1" in failed[0]["message"], f"WarmInstanceFailed: {failed}")
    secs = [int(re.search(r"start in (\d+) s", e["message"]).group(1)) for e in waits[:2]]
    check(secs[0] == 5 and secs[1] > secs[0], f"waits not growing: {[e['message'] for e in waits]}")
    t = [time_of(e) for e in waits[:2]]
    check(t[1] - t[0] >= secs[0] - 1, f"a new warm instance started within the wait: {t}")
    ok(f"each failed warm instance is replaced, after {secs[0]} s, then {secs[1]} s "
       f"(\"{failed[0]['message']}\")")

    kubectl("-n", "ctf", "patch", "chaldef", "broken", "--type", "json", "-p", json.dumps(
        [{"op": "replace", "path": "/spec/pods/0/template/containers/0/image", "value": good}]))
    wait(180, "the fixed pool Ready", lambda: pool_ready("broken", 1))
    check(pool_series("broken"), "no ctf_pool_* series for broken")
    kubectl("-n", "ctf", "delete", "chaldef", "broken")
    wait(120, "broken's warm instance gone", lambda: not warm_namespaces("broken"))
    wait(60, "broken's series gone", lambda: not pool_series("broken"))
    ok("the fixed image fills the pool at once; deleting the definition removes its series")


def time_of(event):
    stamp = event.get("lastTimestamp") or event.get("eventTime")
    return calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))


def stop_operator():
    """SIGTERM the operator the shell started (pid in $WORK/op.pid)."""
    pid = int(open(os.path.join(os.environ["WORK"], "op.pid")).read())
    os.kill(pid, 15)
    wait(40, "the operator to stop", lambda: not _alive(pid))


def operator_cmd():
    """The operator's command line as the shell started it (one argument a line in op.cmd)."""
    return open(os.path.join(os.environ["WORK"], "op.cmd")).read().splitlines()


def start_operator(cmd=None):
    """Start the operator again with the command line the shell used, or cmd."""
    work = os.environ["WORK"]
    cmd = cmd or operator_cmd()
    with open(OP_LOG, "a") as logf:
        p = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    with open(os.path.join(work, "op.pid"), "w") as f:
        f.write(f"{p.pid}\n")

    def ready():
        try:
            with urllib.request.urlopen(METRICS + "/readyz", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False
    wait(60, "the restarted operator to be ready", ready)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not reaped by the shell yet) counts as gone.
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# ---- the gateway mode ---------------------------------------------------------

def gw_connect(host, timeout=3):
    """A TLS connection to the gateway (127.0.0.1:GATEWAY_PORT) with SNI host,
    its certificate checked against the devcluster's gateway CA."""
    import ssl
    ctx = ssl.create_default_context(cafile=os.environ["GATEWAY_CA"])
    raw = socket.create_connection(("127.0.0.1", int(os.environ["GATEWAY_PORT"])), timeout=timeout)
    try:
        s = ctx.wrap_socket(raw, server_hostname=host)
    except Exception:
        raw.close()
        raise
    s.settimeout(timeout)
    return s


def gw_greeting(host, timeout=3):
    """The first line an instance sends through the gateway to SNI host, or
    None when the gateway refuses the handshake or closes without a line."""
    try:
        with gw_connect(host, timeout) as s:
            data = b""
            while b"\n" not in data:
                chunk = s.recv(512)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    line = data.decode(errors="replace").split("\n", 1)[0]
    return line or None


def gw_https(host, path, timeout=5):
    """GET https://host/path through the gateway: (status, body), or None."""
    try:
        with gw_connect(host, timeout) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    head, _, body = data.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None
    if b"chunked" in head.lower():
        out, rest = b"", body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            n = int(size_line.split(b";")[0] or b"0", 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        body = out
    return status, body.decode(errors="replace")


def gw_endpoint(inst, name=None):
    for e in inst["endpoints"]:
        if name is None or e["name"] == name:
            return e
    raise Fail(f"no endpoint {name} in {inst['endpoints']}")


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


PROBING = os.environ.get("GATEWAY_PROBE", "1") != "0"


def served_at_running(what, got):
    """Running must mean served: the first connection made once Running is seen is
    the instance's. With the operator's probe off (GATEWAY_PROBE=0) only noted."""
    if PROBING:
        check(got, f"{what} was Running but the first connection got {got!r} from the gateway")
    elif not got:
        log(f"(no probe) {what}: Running, and the first connection was not served")
    return got


def gw_first_greeting(host, timeout=3, want="Your flag"):
    """The greeting of one connection made now if it holds want, or None (no retry). A request
    line goes right after the handshake, so that a gateway that has not applied
    the route yet answers at once (Traefik's HTTP handler: 404) instead of
    waiting for the timeout; an instance that greets first greets first."""
    try:
        with gw_connect(host, timeout) as s:
            s.sendall(f"GET / HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
            data = b""
            while b"\n" not in data:
                chunk = s.recv(512)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    line = data.decode(errors="replace").split("\n", 1)[0]
    return line if want in line else None


def scenario_gateway():
    domain = os.environ["GATEWAY_DOMAIN"]
    port = int(os.environ["GATEWAY_PORT"])
    host_re = re.compile(r"^[a-z2-7]{16}\." + re.escape(domain) + "$")

    log("team A reaches its TCP instance through the gateway, by TLS and its SNI")
    t_put = time.monotonic()
    start("team-a", "nc")
    start("team-b", "nc")
    a = running("team-a", "nc")
    t_running = time.monotonic()
    ea = gw_endpoint(a)
    host_a = ea["host"]
    served_at_running(f"team-a's nc at {host_a}", gw_first_greeting(host_a))
    check(host_re.match(host_a), f"team-a's host {host_a!r} is not <16 base32>.{domain}")
    check(ea["port"] == port and ea["address"] == f"{host_a}:{port}", f"team-a's endpoint {ea}")
    line = wait(20, f"a greeting through the gateway for {host_a}", lambda: gw_greeting(host_a), every=0.1)
    t_answer = time.monotonic()
    flag_a = flag_of(line)
    check(flag_a == expected_flag("nc", "team-a"), f"team-a read {flag_a}, not its own flag")
    b = running("team-b", "nc")
    host_b = gw_endpoint(b)["host"]
    served_at_running(f"team-b's nc at {host_b}", gw_first_greeting(host_b))
    check(host_b != host_a, "team-a and team-b share a host")
    flag_b = flag_of(wait(20, f"a greeting for {host_b}", lambda: gw_greeting(host_b), every=0.1))
    check(flag_b == expected_flag("nc", "team-b") and flag_b != flag_a, f"team-b read {flag_b}")
    ok(f"team-a reads its own flag through the gateway at {host_a}:443 (TLS, SNI, "
       f"certificate checked); team-b its own at its own host; PUT->Running "
       f"{t_running - t_put:.2f}s, Running->first greeting {t_answer - t_running:.2f}s")

    log("someone without team A's host reaches nothing")
    for wrong in ("aaaaaaaaaaaaaaaa." + domain, host_a.replace(host_a[0], "a" if host_a[0] != "a" else "b", 1),
                  domain, "nc." + domain):
        got = gw_greeting(wrong)
        check(got is None or "Your flag" not in got, f"SNI {wrong} got {got!r}")
    # Without SNI at all: no certificate name to check, so no hostname check either.
    import ssl
    ctx = ssl.create_default_context(cafile=os.environ["GATEWAY_CA"])
    ctx.check_hostname = False
    try:
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=3)) as s:
            s.settimeout(3)
            got = s.recv(512)
    except OSError:
        got = b""
    check(b"Your flag" not in got, f"no SNI got {got!r}")
    ns_a = namespace_of(a)
    svcs = kjson("get", "svc", "-A", "-l", "app.kubernetes.io/managed-by=kopc-ctf")["items"]
    check(svcs and all(x["spec"]["type"] == "ClusterIP" for x in svcs),
          f"Services: {[(x['metadata']['name'], x['spec']['type']) for x in svcs]}")
    pod_a = pod_of(ns_a)
    pod_ip = pod_a["status"]["podIP"]
    check(refused(f"{pod_ip}:1337"), f"the host connects to team-a's pod {pod_ip}:1337 directly")
    # A pod outside every instance, under no policy of its own: in NodePort mode the exposed
    # port admits it (allow-exposed has no "from"); here only the gateway's pods get in.
    image = kjson("-n", "ctf", "get", "chaldef", "nc")["spec"]["pods"][0]["template"]["containers"][0]["image"]
    kubectl("-n", "default", "run", "gwprobe", f"--image={image}", "--restart=Never",
            "--command", "--", "sleep", "3600")
    wait(120, "the probe pod Running",
         lambda: kjson("-n", "default", "get", "pod", "gwprobe")["status"].get("phase") == "Running")
    check(reach("default", "gwprobe", "10.96.0.10", 53), "the probe pod reaches nothing at all (CoreDNS)")
    check(not reach("default", "gwprobe", pod_ip, 1337),
          f"a pod outside the gateway connects to team-a's pod {pod_ip}:1337 directly")
    kubectl("-n", "default", "delete", "pod", "gwprobe", "--wait=false")
    ok("a wrong, unknown or missing SNI gets no instance; no NodePort exists (every instance "
       "Service is ClusterIP); neither the host nor a pod outside the gateway (which reaches "
       "CoreDNS) connects to team-a's pod")

    log("after Stop the host stops answering; after Start it answers again, same host")
    stop("team-a", "nc")
    wait(120, "team-a's nc gone", lambda: instance("team-a", "nc") is None)
    wait(60, f"{host_a} to stop answering", lambda: "Your flag" not in (gw_greeting(host_a) or ""), every=0.5)
    check("Your flag" not in (gw_greeting(host_a) or ""), "the stopped instance still answers")
    start("team-a", "nc")
    a2 = running("team-a", "nc")
    served_at_running(f"team-a's nc started again at {host_a}", gw_first_greeting(host_a))
    check(gw_endpoint(a2)["host"] == host_a, f"the host changed: {gw_endpoint(a2)['host']} != {host_a}")
    flag_a2 = flag_of(wait(20, f"a greeting for {host_a} again", lambda: gw_greeting(host_a), every=0.1))
    check(flag_a2 == flag_a, "another flag after stop/start")
    ok(f"stopped: {host_a} answers nothing; started again: the same host answers with the same flag")

    log("the page's pwntools line, run with pwntools, reads team-a's flag through the gateway")
    line = pwntools_from_page("team-a", "nc", flag_a, resolve="127.0.0.1")
    check(line == f'remote("{host_a}", {port}, ssl=True, sni="{host_a}")', f"the page's line: {line}")
    ok(f"the page's `{line}`, run with pwntools (its host resolving to the gateway, as the wildcard "
       f"DNS record makes it), reads team-a's flag; with ssl_context=ssl.create_default_context("
       f"cafile=<the gateway's CA>) added too")

    log("warm pools: a claimed warm instance answers on its team's host, an unclaimed one on none")
    copy_definition("nc", "warmgw", lambda d: d.update({"pool": {"min": 1}}))
    wait(180, "1 warm instance Ready", lambda: pool_ready("warmgw", 1))
    warm = warm_namespaces("warmgw")[0]
    check(not kjson("-n", warm, "get", "tlsroutes.gateway.networking.k8s.io")["items"],
          f"the unclaimed warm instance {warm} has a route")
    uid = pod_of(warm)["metadata"]["uid"]
    t0 = time.monotonic()
    start("team-c", "warmgw")
    c = running("team-c", "warmgw")
    t_run = time.monotonic() - t0
    host_c = gw_endpoint(c)["host"]
    # Served by the instance at Running; its flag file may come a moment later (the kubelet
    # rewrites the claimed pod's /flag/flag, docs/ctf-resources.md "Warm pools"), checked below.
    served_at_running(f"team-c's claimed warmgw at {host_c}", gw_first_greeting(host_c, want="Welcome to"))
    check(namespace_of(c) == warm, f"team-c got {namespace_of(c)}, not the warm {warm}")
    line = wait(20, f"a greeting for {host_c}", lambda: gw_greeting(host_c), every=0.1)
    t_answer = time.monotonic() - t0
    want_c = expected_flag("warmgw", "team-c")
    wait(60, "team-c's flag in the claimed pod",
         lambda: (lambda l: l if l and "Your flag: " in l and flag_of(l) == want_c else None)(gw_greeting(host_c)),
         every=0.1)
    t_flag = time.monotonic() - t0
    check(pod_of(warm)["metadata"]["uid"] == uid, "the claim restarted the warm pod")
    ok(f"claimed warm instance: PUT->Running {t_run:.2f}s, PUT->first greeting {t_answer:.2f}s, "
       f"PUT->team-c's flag {t_flag:.2f}s at {host_c}, the same pod; unclaimed it had no route")

    log("HTTP through the gateway, by Host")
    start("team-a", "web")
    w = running("team-a", "web")
    ew = gw_endpoint(w)
    first = gw_https(ew["host"], "/robots.txt")
    served_at_running(f"team-a's web at {ew['host']}", first if first and first[0] == 200 else None)
    check(ew["address"] == f"https://{ew['host']}:{port}", f"web endpoint {ew}")
    def robots():
        got = gw_https(ew["host"], "/robots.txt")
        return got if got and got[0] == 200 else None
    try:
        r = wait(60, "robots.txt through the gateway (200)", robots, every=0.5)
    except Fail:
        ns_w = namespace_of(w)
        print("--- HTTPRoute:", kubectl("-n", ns_w, "get", "httproutes.gateway.networking.k8s.io", "-o", "yaml"),
              "--- EndpointSlices:", kubectl("-n", ns_w, "get", "endpointslices", "-o", "yaml"),
              "--- last answer:", gw_https(ew["host"], "/robots.txt"),
              "--- Traefik:", kubectl("-n", "kopc-gateway", "logs", "deploy/traefik", "--tail=40", check_rc=False),
              sep="\n", file=sys.stderr)
        raise
    path = [l.split(":", 1)[1].strip() for l in r[1].splitlines() if l.startswith("Disallow:")][0]
    st, body = gw_https(ew["host"], path)
    check(st == 200 and "flag{" in body, f"GET {path}: {st} {body[:200]!r}")
    other = gw_https(host_b, "/robots.txt")
    check(other is None or other[0] != 200 or "Disallow" not in other[1],
          f"the web instance answered another host: {other}")
    ok(f"https://{ew['host']} serves team-a's web flag behind {path}; a TCP host does not serve it")

    if PROBING:
        scenario_gateway_untrusted()

    rounds = int(os.environ.get("GATEWAY_ROUNDS", "5"))
    log(f"a new route's time to answer (Stop and Start, {rounds} rounds, probe "
        f"{'on' if PROBING else 'off'})")
    to_run, to_answer, after_run, missed = [], [], [], 0
    for i in range(rounds):
        stop("team-b", "nc")
        wait(120, "team-b's nc gone", lambda: instance("team-b", "nc") is None)
        wait(60, f"{host_b} to stop answering", lambda: not gw_first_greeting(host_b), every=0.2)
        t0 = time.monotonic()
        start("team-b", "nc")
        running("team-b", "nc")
        t_run = time.monotonic()
        if not served_at_running(f"round {i}: team-b's nc at {host_b}", gw_first_greeting(host_b)):
            missed += 1
        wait(30, f"{host_b} answering", lambda: gw_first_greeting(host_b), every=0.05)
        t_ans = time.monotonic()
        to_run.append(t_run - t0)
        to_answer.append(t_ans - t0)
        after_run.append(t_ans - t_run)
    def fig(xs):
        return f"p50 {pct(xs, 0.5):.2f}s p99 {pct(xs, 0.99):.2f}s max {max(xs):.2f}s"
    ok(f"over {rounds} starts (probe {'on' if PROBING else 'off'}): PUT -> Running {fig(to_run)}; "
       f"PUT -> first greeting {fig(to_answer)}; Running -> first greeting {fig(after_run)}; "
       f"first connection at Running not served in {missed} of {rounds}")
    with open(os.path.join(os.environ["WORK"], "gateway-times.json"), "w") as f:
        json.dump({"probe": PROBING, "to_running": to_run, "to_answer": to_answer,
                   "running_to_answer": after_run, "missed": missed}, f)


def pwntools_from_page(team, chal, want, resolve=None):
    """The pwntools line team's page shows for its chal, read in headless Chromium
    as a participant copies it (page/demo_page.mjs: the Copy buttons' text), run
    with pwntools itself (PWN_PYTHON: tools/pwntools-venv.sh's venv) through the
    gateway by pwntools_line.py, exactly as shown and once more with the
    certificate checked against the gateway's CA: both must read the team's flag.
    resolve: the address the line's host resolves to (the wildcard DNS record a
    real CTF has; *.ctf.localhost does not resolve through glibc)."""
    src = os.environ["SRC"]
    r = subprocess.run([os.environ.get("NODE", "node"), os.path.join(src, "test/e2e/page/demo_page.mjs")],
                       env={**os.environ, "PAGE_URL": API + "/", "PAGE_TOKEN": TEAM_TOKENS[team],
                            "PAGE_CHALLENGE": chal},
                       capture_output=True, text=True, timeout=400)
    check(r.returncode == 0, f"the page did not show {team}'s {chal} Running: {r.stdout}{r.stderr}")
    card = json.loads(r.stdout.strip().splitlines()[-1])
    lines = [c for c in card["copy"] if c.startswith("remote(")]
    check(len(lines) == 1, f"the card offers no pwntools line: {card}")
    line = lines[0]
    cmd = [os.environ["PWN_PYTHON"], os.path.join(src, "test/e2e/pwntools_line.py"), line,
           "--ca", os.environ["GATEWAY_CA"]]
    if resolve:
        cmd += ["--resolve", resolve]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    got = r.stdout.splitlines()
    check(r.returncode == 0 and len(got) == 2 and all(f"Your flag: {want}" in g for g in got),
          f"pwntools ran {line!r}: rc {r.returncode}, {r.stdout!r} {r.stderr[-800:]!r}")
    return line


def scenario_gateway_untrusted():
    """The operator's probe trusts --gateway-probe-ca only: restarted with the
    cluster's CA (which vouches for no gateway host) in place of the gateway's,
    it keeps a new instance Pending with GatewayCertificateInvalid, however well
    Traefik serves it; given the gateway's CA again, the same instance goes Running."""
    log("an operator that does not trust the gateway's certificate calls no instance Running")
    gateway_ca, cluster_ca = os.environ["GATEWAY_CA"], os.environ["CLUSTER_CA"]
    cmd = operator_cmd()
    check(gateway_ca in cmd, f"the operator runs without --gateway-probe-ca {gateway_ca}: {cmd}")
    stop_operator()
    start_operator([cluster_ca if a == gateway_ca else a for a in cmd])
    start("team-c", "nc")

    def ready_condition():
        i = instance("team-c", "nc")
        if i and i["state"] in ("Running", "Error"):
            raise Errored(f"team-c's nc is {i['state']} behind an untrusted certificate: {i}")
        if not i or not i.get("name"):
            return None
        conds = challenge(i).get("status", {}).get("conditions", [])
        ready = [c for c in conds if c["type"] == "Ready"]
        return ready[0] if ready and ready[0].get("reason") == "GatewayCertificateInvalid" else None
    cond = wait(180, "team-c's nc Pending with GatewayCertificateInvalid", ready_condition, every=0.5)
    i = instance("team-c", "nc")
    host_c = gw_endpoint(i)["host"]
    check(i["state"] == "Starting" and i["status"] == "Pending",
          f"team-c's nc is {i['state']} ({i['status']}), not Starting (Pending)")
    check(host_c in cond["message"] and cluster_ca in cond["message"] and "not trusted" in cond["message"],
          f"the Ready condition's message does not say which host, which CA, what: {cond['message']!r}")
    check(host_c in i.get("message", ""), f"the API's Instance message: {i.get('message')!r}")
    # Traefik serves it all the while: only the operator's trust is missing.
    line = wait(20, f"a greeting for {host_c} (checked against the right CA)", lambda: gw_greeting(host_c), every=0.2)
    check(flag_of(line) == expected_flag("nc", "team-c"), f"team-c read {line!r}")
    ok(f"trusting {cluster_ca} only: team-c's nc stays Pending, Ready=False GatewayCertificateInvalid "
       f"({cond['message'][:160]}...), while Traefik serves {host_c}")
    # Back to the gateway's CA, and as `make run` runs it: hosts that do not resolve, so
    # TCP commands dial 127.0.0.1 with the host as SNI (--gateway-connect-address).
    stop_operator()
    start_operator(cmd + ["--gateway-connect-address", "127.0.0.1"])
    running("team-c", "nc")
    ok("given the gateway's CA again, the same instance goes Running")
    line = pwntools_from_page("team-c", "nc", expected_flag("nc", "team-c"))
    check(line == f'remote("127.0.0.1", {os.environ["GATEWAY_PORT"]}, ssl=True, sni="{host_c}")',
          f"the page's line with --gateway-connect-address: {line}")
    ok(f"with --gateway-connect-address 127.0.0.1 (make run's), the page's `{line}`, run with "
       "pwntools as it is, reads team-c's flag (and with the gateway's CA checked)")
    stop("team-c", "nc")


def main():
    scenario = sys.argv[1] if len(sys.argv) > 1 else "lifecycle"
    try:
        {"lifecycle": scenario_lifecycle, "isolation": scenario_isolation,
         "pool": scenario_pool, "gateway": scenario_gateway}[scenario]()
    except Fail as e:
        print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
