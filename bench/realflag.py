"""realflag.py - the figure a participant feels (issue 26, item 5): on a
real node, N teams press Start together, and each measures the time from its
PUT to its own flag, read through the endpoint the instance API reports.

teams() runs the teams against the CTF operator's API: every team has its
own token (as its page would) and waits at one barrier, so the N PUTs leave
together. Each team then reads its instance (GET, its own token) until the
API reports an endpoint (the PUT's answer may already hold it), and connects
to that endpoint until the greeting (examples/challenges/greeter: one line,
"Welcome to ... Your flag: ...") carries a flag:
  - the team's own flag (the dynamic flag, HMAC-SHA256 of the definition and
    the team under the key the harness put in the definition's Secret): done,
    the latency is the PUT sent -> that line read (one segment of ~80 bytes:
    its first byte and its last arrive together);
  - no flag ("No flag was given": a warm instance whose flag file the kubelet
    has not rewritten yet): counted (flagless), tried again;
  - any other flag (another team's, the warm pool's, a stale one): counted
    (wrong_flag), the team fails; it is never a success;
  - a refused or silent connection (kube-proxy not yet programmed, the
    program not yet listening): counted (refused), tried again.
A team that has no flag within DEADLINE_S fails.

floor() is the limit this figure is set against, measured in the same run:
N bare pods of the same image with the same resources and the same
hardening, each behind its own NodePort Service, created together by the
harness with no operator; the time from a pod's create to its flag read
through its node port; and before them one such pod alone, on the idle
node (solo_ms): what no instance can beat. What an operator adds on top (a
namespace, a quota, network policies, a Deployment, the flag's Secret, its
own reaction time) is the difference.

The threads are plain threads (N is a real node's worth, about 50); the
figures are the median, the 99th percentile and the maximum, and a CSV with
one row per team (flag.csv). Standard library only.

The cells (realflag-fresh, realflag-pool and realflag-floor, on a real
node's cluster that workloads.setup_realflag prepared): measure_realflag
and measure_limit_realflag, on a fresh cluster in the frame
operators.measured_operator.
"""
import csv
import hashlib
import hmac
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

import streams  # the percentiles (streams.spread)
from cluster import ApiWrites, Kube, fresh_cluster, pool_claims, wait_pool_ready
from common import proc_cpu, team_token
from harness import quiet_gate
from operators import measured_operator
from workloads import REALFLAG_KEY

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "test", "e2e"))
from e2e_check import greeting  # noqa: E402  (the first line a TCP challenge sends)

DEADLINE_S = 600  # a team without its flag by then failed
# Between two reads of the API, or two connections: a team's page would
# poll about this often; 50 teams make 500 requests a second at most, which
# the 2-core machine's operator and kube-proxy serve beside the burst.
POLL_S = 0.1


def dynamic_flag(key, definition, team, prefix="flag{", suffix="}"):
    """The flag the operator derives for team (operators/ctf/core/flag.c): prefix,
    the first 32 hex digits of HMAC-SHA256(key, "definition:team"), suffix."""
    mac = hmac.new(key.encode(), f"{definition}:{team}".encode(), hashlib.sha256).hexdigest()
    return prefix + mac[:32] + suffix


def flag_in(line):
    """The flag a greeting line carries, or None."""
    return line.split("Your flag: ", 1)[1].strip() if "Your flag: " in line else None


def _api(base, method, path, token):
    req = urllib.request.Request(base + path, method=method,
                                 headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw) if raw else None
        except ValueError:
            return e.code, None


class Team:
    """One team's figures: times relative to its start (the PUT or the create)."""

    def __init__(self, i, expected):
        self.i, self.expected = i, expected
        self.t0 = None
        self.endpoint_ms = self.flag_ms = None
        self.refused = self.flagless = self.wrong_flag = 0
        self.error = ""

    def row(self):
        return {"team": self.i, "endpoint_ms": self.endpoint_ms, "flag_ms": self.flag_ms,
                "refused": self.refused, "flagless": self.flagless,
                "wrong_flag": self.wrong_flag, "error": self.error}

    def read_flag(self, addr, end):
        """Connect to addr until a greeting carries a flag; record it."""
        while time.time() < end:
            try:
                line = greeting(addr, timeout=2)
            except OSError:
                self.refused += 1
                time.sleep(POLL_S)
                continue
            t = time.time()
            flag = flag_in(line)
            if flag is None:
                self.flagless += 1
                time.sleep(POLL_S)
                continue
            if flag != self.expected:
                self.wrong_flag += 1
                self.error = "a flag not the team's own"  # the flag itself is not kept
                return
            self.flag_ms = (t - self.t0) * 1000
            return
        self.error = f"no flag within {DEADLINE_S} s"


def _team_run(base, team, token, definition, barrier):
    name = streams._team(team.i)
    path = f"/api/v1/teams/{name}/instances/{definition}"
    barrier.wait()
    team.t0 = time.time()
    end = team.t0 + DEADLINE_S
    code, inst = _api(base, "PUT", path, token)
    if code not in (200, 201):
        team.error = f"PUT: HTTP {code} {inst}"
        return
    while time.time() < end:
        if inst and inst.get("state") == "Error":
            team.error = f"Error: {inst.get('reason')}: {inst.get('message')}"
            return
        eps = (inst or {}).get("endpoints") or []
        if eps:
            team.endpoint_ms = (time.time() - team.t0) * 1000
            team.read_flag(eps[0]["address"], end)
            return
        time.sleep(POLL_S)
        code, inst = _api(base, "GET", path, token)
    team.error = f"no endpoint within {DEADLINE_S} s"


def _figures(teams, out):
    with open(os.path.join(out, "flag.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(teams[0].row()))
        w.writeheader()
        for t in teams:
            w.writerow(t.row())
    lat = [t.flag_ms for t in teams if t.flag_ms is not None]
    eps = [t.endpoint_ms for t in teams if t.endpoint_ms is not None]
    errors = [t.error for t in teams if t.error]
    res = {"teams": len(teams), "done": len(lat), "flag_ms": streams.spread(lat),
           "endpoint_ms": streams.spread(eps),
           "refused": sum(t.refused for t in teams),
           "flagless": sum(t.flagless for t in teams),
           "wrong_flag": sum(t.wrong_flag for t in teams),
           "failed": len(errors), "first_error": errors[0] if errors else None}
    with open(os.path.join(out, "flag.json"), "w") as f:
        json.dump(res, f, indent=1)
    return res


def _run_all(teams, fn):
    barrier = threading.Barrier(len(teams))
    threads = [threading.Thread(target=fn, args=(t, barrier), daemon=True) for t in teams]
    for th in threads:
        th.start()
    for th in threads:
        th.join(DEADLINE_S + 120)


def teams(api_port, token, n, definition, flag_of, out):
    """N teams press Start together against the API on api_port; token(i) is
    team i's token, flag_of(team name) its expected flag. The figures (also
    in out/flag.json, per team in out/flag.csv)."""
    base = f"http://127.0.0.1:{api_port}"
    ts = [Team(i, flag_of(streams._team(i))) for i in range(n)]
    _run_all(ts, lambda t, b: _team_run(base, t, token(t.i), definition, b))
    return _figures(ts, out)


def floor(kube, node_ip, n, pod_spec, flag_of, out, namespace="floor"):
    """The floor: n bare pods of pod_spec (a PodSpec with one container; its
    env FLAG set per pod to flag_of(i)), each behind a NodePort Service,
    created together through kube (cluster.py's Kube); create -> the flag read
    through the node port. The figures, as teams() gives them, and solo_ms:
    the same for one pod alone, made and read before the n."""
    st, body = kube.request("POST", "/api/v1/namespaces", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    if st not in (200, 201, 409):
        raise RuntimeError(f"namespace {namespace}: HTTP {st} {body[:200]!r}")
    port = pod_spec["containers"][0]["ports"][0]["containerPort"]
    ts = [Team(i, flag_of(streams._team(i))) for i in range(n)]

    def run(team, barrier):
        name = f"floor-{team.i:05d}"
        spec = json.loads(json.dumps(pod_spec))
        spec["containers"][0]["env"] = [{"name": "FLAG", "value": team.expected}]
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": namespace, "labels": {"floor": name}},
               "spec": spec}
        svc = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": name, "namespace": namespace},
               "spec": {"type": "NodePort", "selector": {"floor": name},
                        "ports": [{"port": port, "targetPort": port}]}}
        barrier.wait()
        team.t0 = time.time()
        for path, obj in ((f"/api/v1/namespaces/{namespace}/pods", pod),
                          (f"/api/v1/namespaces/{namespace}/services", svc)):
            st, body = kube.request("POST", path, obj)
            if st not in (200, 201):
                team.error = f"POST {obj['kind']}: HTTP {st} {body[:200]!r}"
                return
            if obj["kind"] == "Service":
                node_port = json.loads(body)["spec"]["ports"][0]["nodePort"]
        team.endpoint_ms = (time.time() - team.t0) * 1000
        team.read_flag(f"{node_ip}:{node_port}", team.t0 + DEADLINE_S)
    solo = Team(n, flag_of(streams._team(n)))  # an index none of the n has
    _run_all([solo], run)
    if solo.flag_ms is None:
        raise RuntimeError(f"the floor's pod alone: {solo.error}")
    _run_all(ts, run)
    res = _figures(ts, out)
    res["solo_ms"] = solo.flag_ms
    return res


def realflag_of(team):
    """Team's flag in the realflag cells (the definition realflag's dynamic flag)."""
    return dynamic_flag(REALFLAG_KEY, "realflag", team)


def measure_realflag(args, op, workload, n, out, pooled):
    """On a real node, N teams press Start together (teams()): the PUT ->
    the first byte of the team's own flag through its endpoint, with a warm
    pool of n (pooled) or none."""
    os.makedirs(out, exist_ok=True)
    c = fresh_cluster(args, workload, n, "realflag")
    with measured_operator(op, c, out, n, extra=("--node-address", c.node_ip)) as run:
        pid = run.pid
        warmup_s = None
        if pooled:
            c.kubectl("-n", "ctf", "patch", "chaldef", "realflag", "--type", "merge",
                      "-p", json.dumps({"spec": {"pool": {"min": n}}}))
            warmup_s = wait_pool_ready(c, n, definition="realflag")
            time.sleep(2)  # the pool's own writes settle before the teams press Start
        quiet_gate(args)
        writes = ApiWrites(c, workload)
        cpu0 = proc_cpu(pid)
        t0 = time.time()
        s = teams(op.api_port, team_token, n, "realflag", realflag_of, out)
        s["wall_s"] = time.time() - t0
        s.update(writes.done(0))
        s.update({"pool": n if pooled else 0, "pool_warmup_s": warmup_s,
                  "served_from_pool": pool_claims(c), "cluster_start_s": c.start_s,
                  "cpu_s": proc_cpu(pid) - cpu0,
                  "cpu_ms_per_object": (proc_cpu(pid) - cpu0) * 1000 / n})
        run.stop()
        s["operator_exit"] = op.proc.returncode
        return s

def floor_pod_spec(c):
    """The floor's PodSpec: the definition realflag's pod template (as the
    cluster holds it) with the hardening the operator gives every instance's
    pod (operators/ctf/core/pod.c: no token, no service links, non-root, no
    capabilities, no privilege escalation, seccomp, a read-only root)."""
    d = json.loads(c.kubectl("-n", "ctf", "get", "chaldef", "realflag", "-o", "json"))
    spec = d["spec"]["pods"][0]["template"]
    spec.update({"automountServiceAccountToken": False, "enableServiceLinks": False,
                 "securityContext": {"runAsNonRoot": True,
                                     "seccompProfile": {"type": "RuntimeDefault"}}})
    for ctr in spec["containers"]:
        ctr["securityContext"] = {
            "allowPrivilegeEscalation": False, "privileged": False, "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
            "readOnlyRootFilesystem": True}
    return spec



def measure_limit_realflag(args, workload, n, out):
    """The floor of the realflag cells on a real node: N bare pods of the same
    image, each behind a NodePort, created together by the harness; create
    -> the flag through the node port (floor())."""
    os.makedirs(out, exist_ok=True)
    c = fresh_cluster(args, workload, n, "limit")
    with measured_operator(None, c, out, n, start=False) as run:
        kube = Kube(c.kubeconfig, os.path.join(c.dir, "harness"))
        quiet_gate(args)
        writes = ApiWrites(c, workload)
        run.start()
        t0 = time.time()
        s = floor(kube, c.node_ip, n, floor_pod_spec(c), realflag_of, out)
        s["wall_s"] = time.time() - t0
        run.stop()
        # The harness's Services and its namespace are the writes among an
        # operator's resources (Pods are not among them); the Events about the
        # pods are the control plane's, which the operators' runs are corrected by.
        s["own_writes"] = n + 1
        s["cluster_start_s"] = c.start_s
        s.update(writes.done(0))
        return s
