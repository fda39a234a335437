#!/usr/bin/env python3
"""bench.py - kopc against controller-runtime and kopf, side by side, on one
machine (docs/benchmarks.md). bench/run.sh builds what it needs and calls it.

For each workload and N, every operator gets the same measurements, each on a
fresh devcluster (same binary, same flags, same etcd state at the start):

  limit  the loader alone does the operator's writes itself: the ceiling
         the apiserver allows for this workload ("the limit");
  warm   the operator runs and is ready; the loader creates N objects and
         watches their status: time until all are done, per-object latency
         (create sent -> status seen by a watch), operator CPU seconds, peak
         RSS (VmHWM) and steady RSS (median over the idle seconds after);
  cold   N objects are created with no operator; then the operator starts:
         time from its process start until every object is done.
  burst  (challenges) N teams ask the instance API for an instance within
         10 s: request -> Running per team.
  claims (challenges, kopc) the burst as the teams see it: each team holds
         its event stream open and PUTs its instance, paced over 10 s;
         PUT sent -> Running on its stream, once with a warm pool sized for
         the burst and once without (bench/pool.py).
  streams (challenges, kopc, after warm) N event streams held open while
         each instance is renewed: memory per stream, and renewal -> event
         seen on the team's stream (bench/streams.py).
  realflag (a real node: kubelet, containerd, kube-proxy) N teams press
         Start together, each with its own token; the PUT -> the first byte
         of the team's own flag read through the endpoint the API reports,
         with a warm pool of N and without (bench/realflag.py); the floor:
         N bare pods of the same image, create -> flag through a node port.

--perf OPS profiles the warm phase of the named operators with perf (the
loader's run only, 199 Hz, DWARF call graphs) and writes perf.txt beside the
run's figures: the top of the report by library and symbol. A profiled run
is slower, so its figures are never published.

A sampler reads /proc/PID/stat (utime + stime) and /proc/PID/status (VmRSS)
of the operator and of the devcluster every 200 ms into samples.csv.

Results go to OUT/<workload>-<N>/<operator>-<phase>/ plus OUT/results.json,
OUT/table.md and OUT/bench.png; --write-doc puts the table into
docs/benchmarks.md between its markers. Only the standard library is needed,
except matplotlib for the plot (skipped, with a note, when missing).
"""
import argparse
import hashlib
import json
import os
import platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

import pool  # bench/pool.py: the burst seen on the teams' event streams, with and without a pool
import realflag  # bench/realflag.py: PUT -> the team's own flag, on a real node
import streams  # bench/streams.py: the event streams held while instances are renewed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")
PEERS = os.path.join(ROOT, "build", "bench")
# The venv of kopf and matplotlib: run.sh names it (build/bench-venv, or a cache's).
VENV = os.path.abspath(os.environ.get("BENCH_VENV") or os.path.join(ROOT, "build", "bench-venv"))
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
ADMIN_TOKEN = "bench-admin-token-0123456789abcdef"


def log(*a):
    print("bench:", *a, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(cmd, **kw):
    """run a command, failing loudly with its output."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout[-3000:]}")
    return r.stdout


# ---- /proc ---------------------------------------------------------------------

def proc_cpu(pid):
    """utime + stime of pid (all its threads) in seconds, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def proc_status(pid):
    """VmRSS and VmHWM of pid in KiB."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:", "RssAnon:", "RssFile:")):
                    out[line.split(":")[0]] = int(line.split()[1])
    except OSError:
        pass
    return out


def proc_pss_kib(pid):
    """Pss of pid (/proc/PID/smaps_rollup): shared library pages counted in
    proportion to the processes that map them, unlike VmRSS."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


WRITES = ("POST", "PUT", "PATCH", "DELETE")


def writes_of(by_method):
    return sum(v for k, v in by_method.items() if k in WRITES) if by_method else None


class Sampler(threading.Thread):
    """Samples the operator's and the devcluster's CPU and RSS every 200 ms."""

    def __init__(self, path, op_pid, dc_pid, t0):
        super().__init__(daemon=True)
        self.path, self.op_pid, self.dc_pid, self.t0 = path, op_pid, dc_pid, t0
        self.stopped = threading.Event()
        self.rows = []

    def run(self):
        with open(self.path, "w") as f:
            f.write("t_s,op_cpu_s,op_rss_kib,dc_cpu_s,dc_rss_kib\n")
            while not self.stopped.is_set():
                t = time.time() - self.t0
                oc = proc_cpu(self.op_pid) if self.op_pid else None
                orss = proc_status(self.op_pid).get("VmRSS") if self.op_pid else None
                dc = proc_cpu(self.dc_pid)
                drss = proc_status(self.dc_pid).get("VmRSS")
                row = (t, oc, orss, dc, drss)
                self.rows.append(row)
                f.write(",".join("" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))
                                 for v in row) + "\n")
                f.flush()
                self.stopped.wait(0.2)

    def stop(self):
        self.stopped.set()
        self.join()


# ---- the cluster -----------------------------------------------------------------

class Cluster:
    def __init__(self, dir_, nodes, real_nodes=0):
        self.dir = dir_
        self.kubeconfig = os.path.join(dir_, "kubeconfig")
        t0 = time.time()
        run([os.path.join(BIN, "devcluster"), "start", "--dir", dir_, "--nodes", str(nodes)]
            + (["--real-nodes", str(real_nodes)] if real_nodes else []))
        self.start_s = time.time() - t0
        with open(os.path.join(dir_, "devcluster.pid")) as f:
            self.pid = int(f.read().split()[0])

    def kubectl(self, *args, stdin=None):
        return run([os.path.join(BIN, "kubectl"), "--kubeconfig", self.kubeconfig,
                    "--request-timeout=60s", *args], input=stdin)

    def stop(self):
        if getattr(self, "spares", None):  # quick mode: the stop goes on behind the next measurement
            self.spares.retire(self)
            return
        subprocess.run([os.path.join(BIN, "devcluster"), "stop", "--dir", self.dir],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Spares:
    """Spares, in the quick mode only, starts the next measurement's cluster
    (and runs its workload's setup) in the background while the current
    measurement runs, and stops used clusters in the background: a smoke run
    checks that every measurement works, never how fast, so it need not wait
    for start-ups and stops (about 7 s a measurement). Every measurement
    still gets a fresh cluster nobody used before; a spare that does not fit
    the next measurement (another workload, N or node count) is stopped
    unused. The full run never uses it: there nothing else runs beside a
    measurement."""

    def __init__(self, root):
        self.root, self.seq = root, 0
        self.thread, self.key, self.ready, self.stopping = None, None, None, []
        self.remaining = 0  # measurements left in the cell after the current one

    def _collect(self):
        """The spare being made, once made (None when its start failed)."""
        if self.thread is None:
            return None
        self.thread.join()
        self.thread, c, self.ready = None, self.ready, None
        return c

    def take(self, key):
        """A ready cluster for key (workload, N, pods per object), or None."""
        c = self._collect()
        if c is not None and self.key != key:
            self.retire(c)
            c = None
        return c

    def prepare(self, key):
        """Start making a spare for key in the background."""
        self.seq += 1
        d = os.path.join(self.root, f"spare-{self.seq}")
        workload, n, per_object = key

        def make():
            subprocess.run(["rm", "-rf", d])
            try:
                c = Cluster(d, WORKLOADS[workload]["nodes"](n * per_object),
                            WORKLOADS[workload].get("real_nodes", 0))
            except Exception as e:  # the measurement starts its own instead
                log(f"  a spare cluster did not start: {e}")
                return
            try:
                WORKLOADS[workload]["setup"](c, n)
            except Exception as e:
                log(f"  a spare cluster's setup failed: {e}")
                self.retire(c)
                return
            self.ready = c
        self.key = key
        self.thread = threading.Thread(target=make, daemon=True)
        self.thread.start()

    def retire(self, c):
        """Stop c in the background."""
        self.stopping.append(subprocess.Popen(
            [os.path.join(BIN, "devcluster"), "stop", "--dir", c.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def close(self):
        """Stop the spare, if any, and wait for every stop."""
        c = self._collect()
        if c is not None:
            self.retire(c)
        for p in self.stopping:
            p.wait()
        self.stopping = []


class Kube:
    """A small client of the apiserver with the devcluster's admin
    kubeconfig (its client certificate), one keep-alive connection per
    thread: the harness's own reads and writes (the apiserver's /metrics,
    the expiry's patches and deletes, the namespaces' count)."""

    def __init__(self, kubeconfig, scratch):
        import base64
        import ssl
        cfg = json.loads(run([os.path.join(BIN, "kubectl"), "--kubeconfig", kubeconfig, "config",
                              "view", "--raw", "--minify", "-o", "json"]))
        cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
        os.makedirs(scratch, exist_ok=True)
        files = {}
        for key, name in (("client-certificate-data", "admin.crt"), ("client-key-data", "admin.key"),
                          ("certificate-authority-data", "ca.crt")):
            src = cluster if key.startswith("certificate-authority") else user
            files[key] = os.path.join(scratch, name)
            with open(files[key], "wb") as f:
                f.write(base64.b64decode(src[key]))
        self.ctx = ssl.create_default_context(cafile=files["certificate-authority-data"])
        self.ctx.check_hostname = False
        self.ctx.load_cert_chain(files["client-certificate-data"], files["client-key-data"])
        u = urllib.parse.urlparse(cluster["server"])
        self.host, self.port = u.hostname, u.port or 443
        self.local = threading.local()

    def request(self, method, path, body=None, ctype="application/json"):
        """(status, body bytes); one retry on a dropped keep-alive connection."""
        import http.client
        for attempt in (1, 2):
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = http.client.HTTPSConnection(
                    self.host, self.port, context=self.ctx, timeout=60)
            try:
                data = None if body is None else (body if isinstance(body, bytes)
                                                   else json.dumps(body).encode())
                conn.request(method, path, body=data,
                             headers={"Content-Type": ctype} if data is not None else {})
                r = conn.getresponse()
                return r.status, r.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                self.local.conn = None
                if attempt == 2:
                    raise


# Writes as the apiserver counts them (apiserver_request_total's verb label;
# APPLY is a server-side apply).
API_WRITE_VERBS = {"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"}
# Not writes of any operator: node heartbeats, leases, access reviews.
API_IGNORED = {"leases", "nodes", "tokenreviews", "subjectaccessreviews",
               "selfsubjectaccessreviews", "selfsubjectrulesreviews"}
# The resources an operator of the workload (or the loader in its place)
# writes; the control plane's own writes to them (Events about Deployments
# and Pods, the namespace controller's deletions) are taken out with the
# limit's run of the same phase (report.py, api_writes_per_object).
OPERATOR_RESOURCES = {
    "flighttickets": {"flighttickets", "flighttickets/status", "configmaps", "events"},
    "challenges": {"challenges", "challenges/status", "namespaces", "secrets", "resourcequotas",
                   "limitranges", "networkpolicies", "deployments", "services", "ingresses",
                   "events"},
}


def apiserver_writes(kube):
    """The apiserver's write requests so far by "VERB resource[/subresource]"
    (apiserver_request_total from its /metrics, every client, every
    response code), or None when /metrics cannot be read."""
    import http.client
    try:
        status, body = kube.request("GET", "/metrics")
    except (OSError, http.client.HTTPException):
        return None
    if status != 200:
        return None
    by = {}
    for line in body.decode().splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0]))
        if labels.get("verb") not in API_WRITE_VERBS or labels.get("resource") in API_IGNORED:
            continue
        key = labels["verb"] + " " + labels.get("resource", "") + (
            "/" + labels["subresource"] if labels.get("subresource") else "")
        by[key] = by.get(key, 0) + float(line.rsplit(" ", 1)[1])
    return by


class ApiWrites:
    """Counts the apiserver's writes over one measured phase: started just
    before it, done just after; the difference by resource, and the part
    that went to the workload's operator resources less what the harness
    itself wrote there (harness_writes: the loader's creates when they are
    the workload's input, the expiry's patches)."""

    def __init__(self, cluster, workload):
        self.kube = Kube(cluster.kubeconfig, os.path.join(cluster.dir, "harness"))
        self.workload = workload
        self.before = apiserver_writes(self.kube)

    def done(self, harness_writes=0):
        after = apiserver_writes(self.kube)
        if self.before is None or after is None:
            return {"apiserver_writes": None}
        delta = {k: int(v - self.before.get(k, 0)) for k, v in after.items()
                 if v - self.before.get(k, 0) > 0}
        res = OPERATOR_RESOURCES[WORKLOADS[self.workload]["objects"]]
        mine = sum(v for k, v in delta.items() if k.split(" ", 1)[1] in res)
        return {"apiserver_writes": delta, "apiserver_op_writes": mine - harness_writes,
                "apiserver_events": sum(v for k, v in delta.items() if k.endswith(" events")),
                "harness_writes": harness_writes}


def setup_tickets(c, n=0):
    c.kubectl("apply", "-f", os.path.join(ROOT, "examples/flightticket/crd.yaml"))
    wait_established(c, "flighttickets.flights.com")
    c.kubectl("create", "namespace", "bench")
    wait_served(c, "flighttickets")
    warm_up(c, {"apiVersion": "flights.com/v1", "kind": "FlightTicket",
                "metadata": {"name": "warm-up", "namespace": "default"},
                "spec": {"from": "A", "to": "B", "number": 1}})


def warm_up(c, obj):
    """One write of the kind, before anything is measured: the apiserver's
    first write of a new custom resource waits about 2 s for its schema
    models, which would otherwise land on whoever writes first."""
    c.kubectl("create", "-f", "-", stdin=json.dumps(obj))
    c.kubectl("delete", obj["kind"].lower() + "." + obj["apiVersion"].split("/")[0],
              "-n", obj["metadata"]["namespace"], obj["metadata"]["name"], "--wait=false")


def team_token(i):
    """Team i's own token for the instance API (the Secret ctf-team-tokens)."""
    return "bench-team-%05d-" % i + hashlib.sha256(b"team-%d" % i).hexdigest()[:32]


def setup_challenges(c, n=1, definition="bench/challenge/definition.yaml"):
    c.kubectl("apply", "-k", os.path.join(ROOT, "config/crd"))
    for crd in ("challenges.ctf.kopc.io", "challengedefinitions.ctf.kopc.io"):
        wait_established(c, crd)
    for ns in ("kopc-system", "ctf"):
        c.kubectl("create", "namespace", ns)
    wait_served(c, "challengedefinitions")
    c.kubectl("apply", "-f", os.path.join(ROOT, definition))
    c.kubectl("-n", "kopc-system", "create", "secret", "generic", "ctf-api-admin",
              f"--from-literal=token={ADMIN_TOKEN}")
    # One token per team, as a CTF gives each team its own (docs/api.md): the
    # API read path and the teams' checks use them, not the admin token.
    c.kubectl("create", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "ctf-team-tokens", "namespace": "kopc-system"},
        "stringData": {"team-%05d" % i: team_token(i) for i in range(max(n, 1))}}))
    warm_up(c, {"apiVersion": "ctf.kopc.io/v1alpha1", "kind": "Challenge",
                "metadata": {"name": "warm-up", "namespace": "default"},
                "spec": {"definition": "none", "team": "none"}})


REALFLAG_KEY = "bench-realflag-hmac-key-" + "0123456789abcdef" * 2  # the dynamic flag's key


def realflag_of(team):
    """Team's flag in the realflag cells (the definition realflag's dynamic flag)."""
    return realflag.dynamic_flag(REALFLAG_KEY, "realflag", team)


def setup_realflag(c, n=1):
    """A real node's cluster: the sample greeter image pushed to its registry
    (tools/images.sh, as the real-node e2e tests do), the CRDs, the tokens,
    the definition realflag and its flag key; the node's address in c.node_ip."""
    out = run([os.path.join(ROOT, "tools/images.sh"), c.dir, "greeter"])
    log("  image " + out.strip().splitlines()[-1])
    setup_challenges(c, n, "bench/challenge/realflag.yaml")
    c.kubectl("-n", "ctf", "create", "secret", "generic", "realflag-key",
              f"--from-literal=key={REALFLAG_KEY}")
    c.node_ip = c.kubectl("get", "node", "real-node-0", "-o",
                          "jsonpath={.status.addresses[?(@.type==\"InternalIP\")].address}").strip()
    if not c.node_ip:
        raise RuntimeError("the real node has no InternalIP")


def wait_established(c, crd):
    """kubectl wait fails instead of waiting while a new CRD has no conditions yet: poll."""
    for _ in range(120):
        r = subprocess.run([os.path.join(BIN, "kubectl"), "--kubeconfig", c.kubeconfig, "get", "crd",
                            crd, "-o", "jsonpath={.status.conditions[?(@.type==\"Established\")].status}"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if r.stdout.strip() == "True":
            return
        time.sleep(0.5)
    raise RuntimeError(f"CRD {crd} not established")


def wait_served(c, resource):
    for _ in range(120):
        r = subprocess.run([os.path.join(BIN, "kubectl"), "--kubeconfig", c.kubeconfig, "get",
                            resource, "-A"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode == 0:
            return
        time.sleep(0.5)
    raise RuntimeError(f"{resource} not served")


# ---- operators -------------------------------------------------------------------

def reconciles_of(text):
    """controller_runtime_reconcile_total of a /metrics text, summed; None without one."""
    if text is None:
        return None
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("controller_runtime_reconcile_total{")))


def requests_of(text):
    """Requests to the apiserver by method from a /metrics text's
    rest_client_requests_total (client-go's metric, which libkop exports
    too); None when it has none (kopf)."""
    by = {}
    for line in (text or "").splitlines():
        if line.startswith("rest_client_requests_total{"):
            m = re.search(r'method="([A-Z]+)"', line)
            if m:
                by[m.group(1)] = by.get(m.group(1), 0) + float(line.rsplit(" ", 1)[1])
    return by or None


def start_measured(op, c, out, n, settle_s=2, extra=()):
    """start_measured starts op on cluster c with a sampler, waits until it is
    ready and its start-up work settled (settle_s: 0 in the quick mode, which
    times nothing); returns (pid, sampler, ready time). extra: more arguments
    for the operator."""
    pid = op.start(c, os.path.join(out, "operator.log"), n, extra)
    sampler = Sampler(os.path.join(out, "samples.csv"), pid, c.pid, op.t_start)
    sampler.start()
    t_ready = op.wait_ready()
    time.sleep(settle_s)  # let start-up work settle before the load
    return pid, sampler, t_ready


class Operator:
    """How to start one operator and see that it is ready."""

    def __init__(self, name, label, workload, argv, ready_path, metrics_path=None,
                 metrics_on_probe_port=False, api=False):
        self.name, self.label, self.workload, self.api = name, label, workload, api
        self.argv, self.ready_path, self.metrics_path = argv, ready_path, metrics_path
        self.metrics_on_probe_port = metrics_on_probe_port

    def start(self, cluster, logpath, n, extra=()):
        port, mport = free_port(), free_port()
        if self.metrics_on_probe_port:  # libkop serves /readyz beside /metrics
            mport = port
        self.port, self.mport = port, mport
        self.api_port = free_port()
        argv = [a.format(port=port, mport=mport, api=self.api_port, n=n + 100)
                for a in self.argv] + list(extra)
        env = dict(os.environ, KUBECONFIG=cluster.kubeconfig, PYTHONUNBUFFERED="1")
        self.log = open(logpath, "w")
        self.t_start = time.time()
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     cwd=os.path.dirname(logpath))
        return self.proc.pid

    def wait_ready(self, timeout=120):
        url = f"http://127.0.0.1:{self.port}{self.ready_path}"
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return time.time()
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} not ready after {timeout}s")

    def metrics(self, save=None):
        """The operator's /metrics text (None without one: kopf), also
        written to the file save."""
        if not self.metrics_path:
            return None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.mport}{self.metrics_path}",
                                        timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return None
        if save:
            with open(save, "w") as f:
                f.write(text)
        return text

    def reconciles(self, save=None):
        """controller_runtime_reconcile_total summed over results, or None;
        the whole /metrics text goes to the file save."""
        return reconciles_of(self.metrics(save))

    def requests(self):
        """The operator's requests to the apiserver by method (requests_of)."""
        return requests_of(self.metrics())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def operators():
    kopf = os.path.join(VENV, "bin", "kopf")
    ft_kopf = os.path.join(ROOT, "bench/peers/flightticket-kopf/operator.py")
    return [
        Operator("kopc", "kopc (C, libkop)", "flighttickets",
                 [os.path.join(BIN, "flightticket-operator"), "--metrics-bind", "127.0.0.1:{port}"],
                 "/readyz", "/metrics", True),
        Operator("controller-runtime", "controller-runtime (Go)", "flighttickets",
                 [os.path.join(PEERS, "flightticket-go"), "--metrics-bind-address",
                  "127.0.0.1:{mport}", "--health-probe-bind-address", "127.0.0.1:{port}"],
                 "/readyz", "/metrics"),
        Operator("kopf", "kopf (Python)", "flighttickets",
                 [kopf, "run", "--standalone", "--all-namespaces",
                  "--liveness=http://127.0.0.1:{port}/healthz", ft_kopf],
                 "/healthz"),
        Operator("kopc", "kopc (C, ctf-operator)", "challenges",
                 [os.path.join(BIN, "ctf-operator"), "--metrics-bind", "127.0.0.1:{port}",
                  "--api-bind", "127.0.0.1:{api}", "--max-instances", "{n}"],
                 "/readyz", "/metrics", True, api=True),
        Operator("controller-runtime", "controller-runtime (Go)", "challenges",
                 [os.path.join(PEERS, "challenge-go"), "--metrics-bind-address",
                  "127.0.0.1:{mport}", "--health-probe-bind-address", "127.0.0.1:{port}",
                  "--max-instances", "{n}"],
                 "/readyz", "/metrics"),
    ]


# ---- one measurement -----------------------------------------------------------

WORKLOADS = {
    "flighttickets": {"setup": setup_tickets, "namespace": "bench", "objects": "flighttickets",
                      "nodes": lambda n: 1},
    "challenges": {"setup": setup_challenges, "namespace": "ctf", "objects": "challenges",
                   "nodes": lambda n: 1 + (n + 99) // 100},  # KWOK nodes hold 110 pods
    # The first minute of a CTF: N teams within 10 s, on their own streams,
    # with a warm pool sized for them and without (issue 26).
    "teams": {"setup": setup_challenges, "namespace": "ctf", "objects": "challenges",
              "nodes": lambda n: 1 + (n + 99) // 100},
    # Mass expiry: N instances expiring within EXPIRY_SPREAD_S.
    "expiry": {"setup": setup_challenges, "namespace": "ctf", "objects": "challenges",
               "nodes": lambda n: 1 + (n + 99) // 100},
    # On a real node: N teams press Start together; PUT -> their own flag
    # (issue 26). One real node (110 pods: N claimed instances and the N
    # warm ones the pool refills with), no fake ones.
    "realflag": {"setup": setup_realflag, "namespace": "ctf", "objects": "challenges",
                 "nodes": lambda n: 0, "real_nodes": 1},
}


BURST_MS = 10000  # the burst scenario: N teams press Create within 10 s
# The quick mode (make test's e2e_bench_smoke) checks that every team is
# served, never how fast: its bursts and renewals are paced over 2 s instead
# of 10 (still spread, through the same code), and it does not idle before
# a measurement. The full run is unchanged.
QUICK_SPREAD_MS = 2000


def burst_ms(args):
    """How long a burst of this run is paced over, in ms."""
    return QUICK_SPREAD_MS if args.quick else BURST_MS
EXPIRY_SPREAD_S = 60  # mass expiry: N instances expire within one minute
EXPIRY_LEAD_S = 15    # the first expiry this long after the expiry times are set
# The phases whose objects are created by the operator's API at a team's
# request: the create is the operator's write there, not the workload's input.
API_PHASES = {"burst", "claims-fresh", "claims-pool"}


def loader(cluster, workload, n, mode, out, threads, t0=None, timeout=1800, extra=()):
    objects = WORKLOADS[workload]["objects"]
    cmd = [os.path.join(BIN, "bench-loader"), "--kubeconfig", cluster.kubeconfig, "--workload",
           objects, "--count", str(n), "--namespace", WORKLOADS[workload]["namespace"],
           "--mode", mode, "--out", out, "--threads", str(threads), "--timeout", str(timeout),
           *extra]
    if objects == "challenges":
        cmd += ["--definition", "bench"]
    if t0 is not None:
        cmd += ["--t0-ms", f"{t0 * 1000:.3f}"]
    with open(os.path.join(out, f"loader-{mode}.log"), "w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    s["exit"] = r.returncode
    return s


def fresh_cluster(args, workload, n, tag, pods_per_object=1):
    spares = getattr(args, "spares", None)  # the quick mode's (Spares)
    key = (workload, n, pods_per_object)
    c = spares.take(key) if spares else None
    if c is None:
        d = os.path.join(args.clusters, tag)
        subprocess.run(["rm", "-rf", d])
        c = Cluster(d, WORKLOADS[workload]["nodes"](n * pods_per_object),
                    WORKLOADS[workload].get("real_nodes", 0))
        WORKLOADS[workload]["setup"](c, n)
    if spares:
        c.spares = spares
        if spares.remaining > 0:
            spares.prepare(key)  # the next measurement's, most likely alike
    return c


def quiet_gate(args):
    """The quiet gate: with the cluster up (and the operator ready, when one
    runs), wait until the 1-minute load average is at most --max-load, right
    before the measured phase; the load it starts with is recorded."""
    load, quiet = wait_quiet(args.max_load, args.quiet_timeout)
    if not quiet:
        log(f"  load average {load[0]:.2f} above {args.max_load}: measured, marked noisy")
    args.gate = {"load_before": load, "noisy": not quiet}


def parallel(fn, items, workers=8):
    """fn over items on a few threads; the results in order."""
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(workers) as ex:
        return list(ex.map(fn, items))


def make_warm_namespaces(c, n):
    """The limit of a claim: namespaces bench-warm-<i> with a warm pool's
    label, for the loader (--claim) to claim; made before the gate, unmeasured."""
    kube = Kube(c.kubeconfig, os.path.join(c.dir, "harness"))

    def make(i):
        st, body = kube.request("POST", "/api/v1/namespaces", {
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "bench-warm-%05d" % i, "labels": {"ctf.kopc.io/pool": "bench"}}})
        if st not in (200, 201):
            raise RuntimeError(f"warm namespace {i}: HTTP {st} {body[:200]!r}")
    parallel(make, range(n))


def measure_limit(args, workload, n, out, extra=(), phase="limit"):
    """The loader alone doing the operator's writes (the limit) on a fresh
    cluster; phase names the operator phase it is the limit of."""
    os.makedirs(out, exist_ok=True)
    c = fresh_cluster(args, workload, n, "limit")
    try:
        if "--claim" in extra:
            make_warm_namespaces(c, n)
        quiet_gate(args)
        writes = ApiWrites(c, workload)
        sampler = Sampler(os.path.join(out, "samples.csv"), None, c.pid, time.time())
        sampler.start()
        dc0 = proc_cpu(c.pid)
        s = loader(c, workload, n, "alone", out, args.threads, extra=extra)
        dc1 = proc_cpu(c.pid)
        sampler.stop()
        # In an API phase the create is the operator's write (a team's request).
        s.update(writes.done(0 if phase in API_PHASES else n))
        s["own_writes"] = s.get("operator_writes", 0) + (n if phase in API_PHASES else 0)
        s["devcluster_cpu_s"] = dc1 - dc0
        s["writes_per_object"] = s.get("operator_writes", 0) / n
        if "--claim" in extra:
            s["served_from_pool"] = len(c.kubectl(
                "get", "ns", "-l", "ctf.kopc.io/pool,ctf.kopc.io/challenge", "-o", "name").split())
        return s
    finally:
        c.stop()


class Profile:
    """Profile records op's process with perf while the loader runs (when
    op is one of --perf) and summarizes it into OUT/perf.txt."""

    def __init__(self, args, op, pid, out):
        self.proc, self.out = None, out
        if op.name not in args.perf:
            return
        self.data = os.path.join(out, "perf.data")
        self.proc = subprocess.Popen(["perf", "record", "-q", "-F", "199", "--call-graph",
                                      "dwarf,8192", "-p", str(pid), "-o", self.data],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self):
        if not self.proc:
            return
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(60)
        with open(os.path.join(self.out, "perf.txt"), "w") as f:
            # By library, by function, then each function with what it calls (the
            # operator's own functions show where the libraries' time is spent).
            for extra in (["--no-children", "--sort", "dso", "--percent-limit", "0.5"],
                          ["--no-children", "--sort", "dso,sym", "--percent-limit", "0.5"],
                          ["--children", "--sort", "sym", "--percent-limit", "2"]):
                f.flush()
                subprocess.run(["perf", "report", "-i", self.data, "--stdio", "-g", "none",
                                *extra],
                               stdout=f, stderr=subprocess.DEVNULL)


def stats_after(rows, t_from, t_to):
    vals = [r[2] for r in rows if t_from <= r[0] <= t_to and r[2]]
    return statistics.median(vals) if vals else None


def measure_warm(args, op, workload, n, out):
    os.makedirs(out, exist_ok=True)
    c = fresh_cluster(args, workload, n, "warm")
    try:
        pid, sampler, t_ready = start_measured(op, c, out, n, 0 if args.quick else 2)
        quiet_gate(args)
        writes = ApiWrites(c, workload)
        cpu0, dc0 = proc_cpu(pid), proc_cpu(c.pid)
        prof = Profile(args, op, pid, out)
        s = loader(c, workload, n, "operator", out, args.threads)
        cpu1, dc1 = proc_cpu(pid), proc_cpu(c.pid)
        s.update(writes.done(n))  # the loader's creates are the input, not the operator's
        prof.stop()
        if prof.proc:
            s["profiled"] = True
        t_done = time.time()
        time.sleep(args.settle)  # idle: the steady state
        t_end = time.time()
        text = op.metrics(os.path.join(out, "metrics.txt"))
        reconciles, by_method = reconciles_of(text), requests_of(text)
        pss = proc_pss_kib(pid)
        mem = proc_status(pid)
        hwm = mem.get("VmHWM")
        if workload == "challenges" and op.name == "kopc":
            # Every team reads its own instance with its own token (and is
            # refused another's); then the read path's speed, by wrk.
            s["team_reads"] = team_reads(op, min(n, MAX_TOKEN_TEAMS))
            if args.api:
                s["api"] = measure_api(op, out, min(n, MAX_TOKEN_TEAMS))
        if workload == "challenges" and op.name == "kopc":
            s["streams"] = streams.measure(pid, op.api_port, team_token,  # each team its own
                                           min(n, streams.MAX_STREAMS), out,
                                           spread_ms=QUICK_SPREAD_MS if args.quick else streams.RENEW_MS)
        op.stop()
        sampler.stop()
        if reconciles is None and op.name == "kopf":
            with open(os.path.join(out, "operator.log")) as f:
                reconciles = sum(1 for line in f if "succeeded" in line and "Handler" in line)
        s.update({
            "ready_s": t_ready - op.t_start,
            "cpu_s": cpu1 - cpu0,
            "cpu_ms_per_object": (cpu1 - cpu0) * 1000 / n,
            "reconciles": reconciles,
            "devcluster_cpu_s": dc1 - dc0,
            "peak_rss_mib": hwm / 1024 if hwm else None,
            "steady_rss_mib": (stats_after(sampler.rows, t_done - op.t_start + 1,
                                           t_end - op.t_start) or 0) / 1024,
            # the steady RSS split: private memory, and pages of the binary and libraries
            "rss_anon_mib": mem.get("RssAnon", 0) / 1024,
            "rss_file_mib": mem.get("RssFile", 0) / 1024,
            "pss_mib": pss / 1024 if pss else None,
            "requests_by_method": by_method,
            "writes_per_object": writes_of(by_method) / n if by_method else None,
            "operator_exit": op.proc.returncode,
        })
        return s
    finally:
        if op.proc.poll() is None:
            op.proc.kill()
        c.stop()


def measure_burst(args, op, workload, n, out):
    """The start of a CTF: N teams each ask the instance API for an instance,
    paced over BURST_MS; create -> Running per team, as the team sees it."""
    os.makedirs(out, exist_ok=True)
    c = fresh_cluster(args, workload, n, "burst")
    try:
        pid, sampler, _ = start_measured(op, c, out, n, 0 if args.quick else 2)
        quiet_gate(args)
        writes = ApiWrites(c, workload)
        cpu0 = proc_cpu(pid)
        s = loader(c, workload, n, "api", out, args.threads,
                   extra=("--spread-ms", str(burst_ms(args)), "--api", f"http://127.0.0.1:{op.api_port}",
                          "--api-token", ADMIN_TOKEN))
        s["cpu_s"] = proc_cpu(pid) - cpu0
        s.update(writes.done(0))
        by_method = op.requests()
        s["writes_per_object"] = writes_of(by_method) / n if by_method else None
        op.stop()
        sampler.stop()
        s["operator_exit"] = op.proc.returncode
        return s
    finally:
        if op.proc.poll() is None:
            op.proc.kill()
        c.stop()


def wait_pool_ready(c, n, timeout=1800, definition="bench"):
    """Wait until the definition's warm pool reports n Ready; the seconds it took."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        r = subprocess.run([os.path.join(BIN, "kubectl"), "--kubeconfig", c.kubeconfig, "-n", "ctf",
                            "get", "chaldef", definition, "-o", "jsonpath={.status.pool.ready}"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if r.stdout.strip() == str(n):
            return time.time() - t0
        time.sleep(1)
    raise RuntimeError(f"the warm pool of {n} was not Ready within {timeout} s")


def measure_claims(args, op, workload, n, out, pooled):
    """The burst on the teams' event streams (bench/pool.py), with a warm
    pool of n (pooled) or none."""
    os.makedirs(out, exist_ok=True)
    # Room for the warm pods and the fresh ones a refill or a miss makes.
    c = fresh_cluster(args, workload, n, "claims", pods_per_object=2 if pooled else 1)
    try:
        pid, sampler, _ = start_measured(op, c, out, n, 0 if args.quick else 2)
        warmup_s = None
        if pooled:
            c.kubectl("-n", "ctf", "patch", "chaldef", "bench", "--type", "merge",
                      "-p", json.dumps({"spec": {"pool": {"min": n}}}))
            warmup_s = wait_pool_ready(c, n)
            time.sleep(2)  # the pool's own writes settle before the burst
        quiet_gate(args)
        writes = ApiWrites(c, workload)
        cpu0 = proc_cpu(pid)
        s = pool.measure(op.api_port, team_token, n, "bench", out,  # each team its own token
                         spread_ms=burst_ms(args))
        s.update(writes.done(0))
        claimed = c.kubectl("get", "ns", "-l", "ctf.kopc.io/pool,ctf.kopc.io/challenge", "-o", "name")
        s.update({"pool": n if pooled else 0, "pool_warmup_s": warmup_s,
                  "served_from_pool": sum(1 for x in claimed.split() if x.startswith("namespace/")),
                  "cpu_s": proc_cpu(pid) - cpu0,
                  "cpu_ms_per_object": (proc_cpu(pid) - cpu0) * 1000 / n})
        op.stop()
        sampler.stop()
        s["operator_exit"] = op.proc.returncode
        return s
    finally:
        if op.proc.poll() is None:
            op.proc.kill()
        c.stop()


def pool_claims(c):
    """How many instance namespaces came from a warm pool (claimed ones)."""
    claimed = c.kubectl("get", "ns", "-l", "ctf.kopc.io/pool,ctf.kopc.io/challenge", "-o", "name")
    return sum(1 for x in claimed.split() if x.startswith("namespace/"))


def measure_realflag(args, op, workload, n, out, pooled):
    """On a real node, N teams press Start together (bench/realflag.py): the
    PUT -> the first byte of the team's own flag through its endpoint, with a
    warm pool of n (pooled) or none."""
    os.makedirs(out, exist_ok=True)
    c = fresh_cluster(args, workload, n, "realflag")
    try:
        pid, sampler, _ = start_measured(op, c, out, n, extra=("--node-address", c.node_ip))
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
        s = realflag.teams(op.api_port, team_token, n, "realflag", realflag_of, out)
        s["wall_s"] = time.time() - t0
        s.update(writes.done(0))
        s.update({"pool": n if pooled else 0, "pool_warmup_s": warmup_s,
                  "served_from_pool": pool_claims(c), "cluster_start_s": c.start_s,
                  "cpu_s": proc_cpu(pid) - cpu0,
                  "cpu_ms_per_object": (proc_cpu(pid) - cpu0) * 1000 / n})
        op.stop()
        sampler.stop()
        s["operator_exit"] = op.proc.returncode
        return s
    finally:
        if op.proc.poll() is None:
            op.proc.kill()
        c.stop()


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
    -> the flag through the node port (bench/realflag.py floor)."""
    os.makedirs(out, exist_ok=True)
    c = fresh_cluster(args, workload, n, "limit")
    try:
        kube = Kube(c.kubeconfig, os.path.join(c.dir, "harness"))
        quiet_gate(args)
        writes = ApiWrites(c, workload)
        sampler = Sampler(os.path.join(out, "samples.csv"), None, c.pid, time.time())
        sampler.start()
        t0 = time.time()
        s = realflag.floor(kube, c.node_ip, n, floor_pod_spec(c), realflag_of, out)
        s["wall_s"] = time.time() - t0
        sampler.stop()
        # The harness's Services and its namespace are the writes among an
        # operator's resources (Pods are not among them); the Events about the
        # pods are the control plane's, which the operators' runs are corrected by.
        s["own_writes"] = n + 1
        s["cluster_start_s"] = c.start_s
        s.update(writes.done(0))
        return s
    finally:
        c.stop()


def measure_cold(args, op, workload, n, out):
    os.makedirs(out, exist_ok=True)
    c = fresh_cluster(args, workload, n, "cold")
    try:
        pre = loader(c, workload, n, "create", out, args.threads)
        if pre["errors"]:
            raise RuntimeError(f"cold start: {pre['errors']} creates failed")
        quiet_gate(args)
        writes = ApiWrites(c, workload)
        t0 = time.time()
        pid = op.start(c, os.path.join(out, "operator.log"), n)
        sampler = Sampler(os.path.join(out, "samples.csv"), pid, c.pid, op.t_start)
        sampler.start()
        s = loader(c, workload, n, "wait", out, 1, t0=op.t_start)
        cpu = proc_cpu(pid)
        s.update(writes.done(0))  # the creates came before the count began
        s["reconciles"] = op.reconciles(os.path.join(out, "metrics.txt"))
        hwm = proc_status(pid).get("VmHWM")
        op.stop()
        sampler.stop()
        s.update({"cpu_s": cpu, "peak_rss_mib": hwm / 1024 if hwm else None,
                  "cold_start_s": s["converge_s"], "operator_exit": op.proc.returncode})
        del t0
        return s
    finally:
        if op.proc.poll() is None:
            op.proc.kill()
        c.stop()


# ---- mass expiry ------------------------------------------------------------------

NS_SELECTOR = "app.kubernetes.io/managed-by=kopc-ctf"


def instance_namespaces(kube):
    """The instance namespaces now: {name: the Challenge's name}."""
    st, body = kube.request("GET", "/api/v1/namespaces?labelSelector="
                            + urllib.parse.quote(NS_SELECTOR))
    if st != 200:
        raise RuntimeError(f"list namespaces: HTTP {st}")
    return {x["metadata"]["name"]: x["metadata"].get("labels", {}).get("ctf.kopc.io/challenge")
            for x in json.loads(body)["items"]}


def expiry_schedule(n, quick):
    """When instance i expires: whole seconds (expiresAt's resolution), the
    N spread over EXPIRY_SPREAD_S (QUICK_SPREAD_MS in the quick mode), the first
    EXPIRY_LEAD_S (3 s) from now."""
    import math
    spread, lead = (QUICK_SPREAD_MS // 1000, 3) if quick else (EXPIRY_SPREAD_S, EXPIRY_LEAD_S)
    base = math.ceil(time.time() + lead)
    return [base + math.ceil(spread * i / n) for i in range(n)]


def wait_gone(kube, names, due, timeout):
    """Poll until every instance namespace in names (index -> name) is gone;
    the figures: per instance its due time -> gone, and the due time of the
    first -> the last gone."""
    gone = {}
    end = max(due) + timeout
    while len(gone) < len(names) and time.time() < end:
        now = time.time()
        present = instance_namespaces(kube)
        for i, name in names.items():
            if i not in gone and name not in present:
                gone[i] = now
        time.sleep(0.5)
    lat = [(gone[i] - due[i]) * 1000 for i in gone]
    return {"done": len(gone), "latency_ms": {"n": len(lat), "p90": streams._percentile(lat, 90),
                                              **streams.spread(lat)},
            "converge_s": (max(gone.values()) - min(due)) if len(gone) == len(names) else None,
            "first_due_to_last_due_s": max(due) - min(due)}


def instance_names(kube, n):
    """index -> instance namespace of the loader's Challenges chal-<i>."""
    names = {}
    for ns, chal in instance_namespaces(kube).items():
        if chal and chal.startswith("chal-"):
            names[int(chal[5:])] = ns
    if len(names) != n:
        raise RuntimeError(f"{len(names)} instance namespaces of {n}")
    return names


def measure_expiry(args, op, workload, n, out):
    """Mass expiry with the operator: N Running instances, each Challenge's
    spec.expiresAt set so that they expire within EXPIRY_SPREAD_S; the
    operator deletes each expired Challenge, its finalizer the namespace.
    Due time -> namespace gone, and the first due -> the last gone."""
    os.makedirs(out, exist_ok=True)
    c = fresh_cluster(args, workload, n, "expiry")
    try:
        pid, sampler, _ = start_measured(op, c, out, n, 0 if args.quick else 2)
        pre = loader(c, workload, n, "operator", out, args.threads)  # unmeasured: the instances
        if pre["done"] != n:
            raise RuntimeError(f"expiry: {pre['done']} of {n} instances Running before it")
        kube = Kube(c.kubeconfig, os.path.join(c.dir, "harness"))
        names = instance_names(kube, n)
        quiet_gate(args)
        writes = ApiWrites(c, workload)
        cpu0 = proc_cpu(pid)
        due = expiry_schedule(n, args.quick)

        def set_expiry(i):
            at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(due[i]))
            st, body = kube.request(
                "PATCH", f"/apis/ctf.kopc.io/v1alpha1/namespaces/ctf/challenges/chal-{i:05d}",
                {"spec": {"expiresAt": at}}, "application/merge-patch+json")
            if st != 200:
                raise RuntimeError(f"expiresAt of chal-{i:05d}: HTTP {st} {body[:200]!r}")
        parallel(set_expiry, range(n))
        late = max(0.0, time.time() - min(due))
        s = wait_gone(kube, names, due, 1800)
        st, body = kube.request("GET", "/apis/ctf.kopc.io/v1alpha1/namespaces/ctf/challenges")
        left = len(json.loads(body)["items"]) if st == 200 else None
        s.update({"challenges_left": left, "expiry_set_late_s": late,
                  "cpu_s": proc_cpu(pid) - cpu0})
        s.update(writes.done(n))  # the harness's expiresAt patches
        op.stop()
        sampler.stop()
        s["operator_exit"] = op.proc.returncode
        return s
    finally:
        if op.proc.poll() is None:
            op.proc.kill()
        c.stop()


def measure_limit_expiry(args, workload, n, out):
    """The limit of mass expiry: the loader alone made the N instances; at
    instance i's due time the harness deletes its Challenge and its
    namespace, as the operator does; due time -> namespace gone."""
    os.makedirs(out, exist_ok=True)
    c = fresh_cluster(args, workload, n, "limit")
    try:
        pre = loader(c, workload, n, "alone", out, args.threads)  # unmeasured: the instances
        if pre["done"] != n:
            raise RuntimeError(f"expiry: {pre['done']} of {n} instances Running before it")
        kube = Kube(c.kubeconfig, os.path.join(c.dir, "harness"))
        names = instance_names(kube, n)
        quiet_gate(args)
        writes = ApiWrites(c, workload)
        sampler = Sampler(os.path.join(out, "samples.csv"), None, c.pid, time.time())
        sampler.start()
        due = expiry_schedule(n, args.quick)
        errors = []

        def expire(i):
            time.sleep(max(0.0, due[i] - time.time()))
            for path in (f"/apis/ctf.kopc.io/v1alpha1/namespaces/ctf/challenges/chal-{i:05d}",
                         f"/api/v1/namespaces/{names[i]}"):
                st, _ = kube.request("DELETE", path)
                if st not in (200, 202):
                    errors.append(f"DELETE {path}: HTTP {st}")
        t = threading.Thread(target=parallel, args=(expire, range(n)), daemon=True)
        t.start()
        s = wait_gone(kube, names, due, 1800)
        t.join()
        sampler.stop()
        if errors:
            raise RuntimeError(f"{len(errors)} deletes failed: {errors[0]}")
        s.update({"own_writes": 2 * n, "writes_per_object": 2.0})
        s.update(writes.done(0))
        return s
    finally:
        c.stop()


# ---- the API read path ---------------------------------------------------------

MAX_TOKEN_TEAMS = 1000  # the API read path: this many teams, each with its own token


def team_reads(op, n):
    """Each of n teams reads its own instance with its own token (200), and
    is refused with another team's token; the counts."""
    ok = refused = 0
    for i in range(n):
        for token, want in ((team_token(i), True), (team_token((i + 1) % n), False)):
            if n == 1 and not want:
                continue
            req = urllib.request.Request(
                f"http://127.0.0.1:{op.api_port}/api/v1/teams/team-{i:05d}/instances/bench",
                headers={"Authorization": f"Bearer {token}"})
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    code = r.status
            except urllib.error.HTTPError as e:
                code = e.code
            if want and code == 200:
                ok += 1
            elif not want and code in (401, 403, 404):
                refused += 1
    return {"teams": n, "own_token_ok": ok, "other_token_refused": refused if n > 1 else None}

def wrk(url, header, out, name, duration, script=None):
    cmd = ["wrk", "-t2", "-c32", f"-d{duration}s", "--latency", url]
    if header:
        cmd[1:1] = ["-H", header]
    if script:
        cmd[1:1] = ["-s", script]
    text = run(cmd)
    with open(os.path.join(out, f"wrk-{name}.txt"), "w") as f:
        f.write(text)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", text)
    scale = {"us": 1e-3, "ms": 1, "s": 1e3}[p99.group(2)]
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    return {"rps": rps, "p99_ms": float(p99.group(1)) * scale,
            "non2xx": int(non2xx.group(1)) if non2xx else 0}


def measure_api(op, out, n):
    """wrk against GET .../instances/{challenge} and against nginx serving the same bytes."""
    if not shutil_which("wrk") or not shutil_which("nginx"):
        log("wrk or nginx missing: API read path skipped")
        return None
    url = f"http://127.0.0.1:{op.api_port}/api/v1/teams/team-00001/instances/bench"
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {team_token(1 % n)}"})
    with urllib.request.urlopen(req, timeout=5) as r:
        body = r.read()
    # Each request: a team drawn at random of the n, reading its own
    # instance with its own token (not the admin token).
    script = os.path.join(out, "teams.lua")
    with open(script, "w") as f:
        f.write("local tokens = {" + ",".join(f'"{team_token(i)}"' for i in range(n)) + "}\n")
        f.write(f"local n = {n}\n")
        f.write("request = function()\n  local i = math.random(0, n - 1)\n"
                "  return wrk.format(\"GET\", string.format("
                "\"/api/v1/teams/team-%05d/instances/bench\", i),\n"
                "    {[\"Authorization\"] = \"Bearer \" .. tokens[i + 1]})\nend\n")
    dur = 3 if n < 100 else 10
    res = {"bytes": len(body), "teams": n, "token": "each team its own",
           "kopc": wrk(url, None, out, "kopc", dur, script)}
    www = os.path.join(out, "nginx")
    os.makedirs(www, exist_ok=True)
    with open(os.path.join(www, "instance.json"), "wb") as f:
        f.write(body)
    port = free_port()
    conf = os.path.join(www, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off; worker_processes auto; pid {www}/nginx.pid;
error_log {www}/error.log;
events {{ worker_connections 1024; }}
http {{ access_log off; client_body_temp_path {www}; proxy_temp_path {www};
  fastcgi_temp_path {www}; uwsgi_temp_path {www}; scgi_temp_path {www};
  server {{ listen 127.0.0.1:{port}; root {www};
    location / {{ default_type application/json; }} }} }}
""")
    ng = subprocess.Popen(["nginx", "-c", conf, "-p", www], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/instance.json", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        res["nginx"] = wrk(f"http://127.0.0.1:{port}/instance.json", None, out, "nginx", dur)
    finally:
        ng.terminate()
        ng.wait()
    return res


def shutil_which(name):
    import shutil
    return shutil.which(name)


# ---- the run --------------------------------------------------------------------

def versions():
    def sh(cmd):
        try:
            return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                  cwd=ROOT, shell=True).stdout.strip()
        except OSError:
            return ""
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kib = int(f.readline().split()[1])
    gomod = open(os.path.join(ROOT, "bench/peers/flightticket-go/go.mod")).read()
    cr = re.search(r"sigs.k8s.io/controller-runtime (\S+)", gomod).group(1)
    k8s = re.search(r"k8s.io/client-go (\S+)", gomod).group(1)
    dc = open(os.path.join(ROOT, "tools/devcluster/go.mod")).read()
    return {
        "kopc": sh("git rev-parse --short HEAD") + (" (dirty tree)" if sh("git status --porcelain -uno") else ""),
        "go": sh("go env GOVERSION"),
        "controller-runtime": cr,
        "client-go (peers)": k8s,
        "kopf": sh(f"{VENV}/bin/python -c 'import kopf, importlib.metadata as m; print(m.version(\"kopf\"))'"),
        "python": sh(f"{VENV}/bin/python -c 'import platform; print(platform.python_version())'"),
        "kubernetes (devcluster)": re.search(r"k8s.io/kubernetes (\S+)", dc).group(1),
        "jansson": sh("pkg-config --modversion jansson"),
        "libcurl": sh("pkg-config --modversion libcurl"),
        "machine": f"{os.cpu_count()} CPUs, {model}, {mem_kib / 1024 / 1024:.1f} GiB RAM, "
                   f"{platform.system()} {platform.release()}",
    }


def record(results, run, out):
    """record adds (or replaces) one measurement and saves results.json at once."""
    def key(r):
        return (r["workload"], r["n"], r["operator"], r["phase"], r.get("trial", 1))
    results["runs"] = [r for r in results["runs"] if key(r) != key(run)] + [run]
    results["load_after"] = os.getloadavg()
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)


def wait_quiet(max_load, timeout):
    """wait_quiet waits until the 1-minute load average is at most max_load
    (what a measurement alone leaves behind) or timeout seconds passed;
    returns the load average it starts the measurement with and whether it
    was quiet enough."""
    end = time.time() + timeout
    while True:
        load = os.getloadavg()
        if load[0] <= max_load:
            return load, True
        if time.time() >= end:
            return load, False
        time.sleep(5)


def measure(args, results, workload, n, trial, name, phase, fn, label=None, order=None):
    """measure runs one measurement and records it. The measurement itself
    calls quiet_gate once its cluster is up, right before the measured
    phase; order is the operator's place in its trial's rotation."""
    tag = f"{workload}-{n}"
    log(f"{tag} trial {trial}: {name} {phase}")
    args.gate = None
    try:
        s = fn()
        s["load_after"] = os.getloadavg()
    except Exception as e:  # report, keep going
        log(f"  FAILED: {e}")
        s = {"done": 0, "error": str(e)}
    gate = args.gate or {"load_before": os.getloadavg(), "noisy": False, "not_gated": True}
    # What the measurement returned, under the run's own identity (the
    # loader's summary names its objects' kind, not the cell).
    run = {**gate, **s, "workload": workload, "n": n, "operator": name, "phase": phase,
           "trial": trial, "order": order, "commit": results["versions"]["kopc"]}
    if label:
        run["label"] = label
    record(results, run, args.out)
    if "converge_s" in s:
        log(f"  done {s['done']}/{n} in {s['converge_s']:.2f}s"
            + (f", peak RSS {s['peak_rss_mib']:.1f} MiB" if s.get("peak_rss_mib") else ""))


def plan(args, ops, workload, n, phases, only_ops):
    """What a cell measures: [(operator, [(phase, fn(out), label), ...])],
    the limit first; its order is rotated per trial (main)."""
    objects = WORKLOADS[workload]["objects"]
    units = []

    def want(name):
        return not only_ops or name in only_ops
    lim = []
    if workload in ("flighttickets", "challenges"):
        if {"warm", "cold"} & set(phases):
            lim.append(("limit", lambda out: measure_limit(args, workload, n, out), None))
        if workload == "challenges" and "burst" in phases:
            lim.append(("burst", lambda out: measure_limit(
                args, workload, n, out, ("--spread-ms", str(burst_ms(args))), "burst"), None))
    elif workload == "teams" and "claims" in phases:
        # The same arrival rate: N creates paced over 10 s, the loader doing
        # an instance's writes (no pool) or a claim's (a warm namespace).
        lim.append(("claims-fresh", lambda out: measure_limit(
            args, workload, n, out, ("--spread-ms", str(burst_ms(args))), "claims-fresh"), None))
        lim.append(("claims-pool", lambda out: measure_limit(
            args, workload, n, out, ("--spread-ms", str(burst_ms(args)), "--claim", "1"),
            "claims-pool"), None))
    elif workload == "expiry" and "expiry" in phases:
        lim.append(("expiry", lambda out: measure_limit_expiry(args, workload, n, out), None))
    elif workload == "realflag" and "realflag" in phases:
        lim.append(("realflag-floor", lambda out: measure_limit_realflag(args, workload, n, out),
                    None))
    if lim and want("limit"):
        units.append(("limit", lim))
    for op in ops:
        if op.workload != objects or not want(op.name):
            continue
        steps = []

        def step(phase, fn, op=op):
            steps.append((phase, lambda out: fn(args, op, workload, n, out), op.label))
        if workload in ("flighttickets", "challenges"):
            if "warm" in phases:
                step("warm", measure_warm)
            if "cold" in phases:
                step("cold", measure_cold)
            if "burst" in phases and op.api:
                step("burst", measure_burst)
        elif workload == "teams" and "claims" in phases and op.name == "kopc":
            step("claims-fresh", lambda *a: measure_claims(*a, False))
            step("claims-pool", lambda *a: measure_claims(*a, True))
        elif workload == "expiry" and "expiry" in phases and op.name == "kopc":
            step("expiry", measure_expiry)
        elif workload == "realflag" and "realflag" in phases and op.name == "kopc":
            step("realflag-fresh", lambda *a: measure_realflag(*a, False))
            step("realflag-pool", lambda *a: measure_realflag(*a, True))
        if steps:
            units.append((op.name, steps))
    return units


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke mode: small N, one trial")
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=8, help="loader threads (connections)")
    ap.add_argument("--settle", type=float, default=None, help="idle seconds after convergence")
    ap.add_argument("--only", default="", help="comma list of workloads (flighttickets, "
                    "challenges-1000, ...) and/or operators (limit, kopc, controller-runtime, kopf)")
    ap.add_argument("--trials", type=int, default=None,
                    help="measurements of each operator, interleaved and rotated (default: the "
                    "least multiple of the cell's operator count that is 3 or more; quick: 1)")
    ap.add_argument("--phases", default="warm,cold,burst,claims,expiry,realflag",
                    help="warm, cold, burst (challenges: the instance API, paced), claims "
                    "(the teams cells: the burst on the teams' event streams, with and without "
                    "a warm pool, and the limit of each) and/or expiry (the expiry cells: mass "
                    "expiry, kopc and the limit) and/or realflag (a real node: PUT -> the "
                    "team's own flag, with and without a pool, and the floor)")
    ap.add_argument("--sizes", default="", help="override N, e.g. challenges=100,1000,5000")
    ap.add_argument("--max-load", type=float, default=2.5,
                    help="1-minute load average a measurement waits for (the measurement alone "
                    "leaves about 2 on 2 cores); a measurement started above it is marked noisy")
    ap.add_argument("--quiet-timeout", type=float, default=600)
    ap.add_argument("--no-api", dest="api", action="store_false")
    ap.add_argument("--write-doc", action="store_true",
                    help="publish into docs/benchmarks.md: refused from a dirty tree or a noisy run")
    ap.add_argument("--perf", default="",
                    help="comma list of operators whose warm phase is profiled with perf "
                    "(OUT/.../perf.txt); such a run is never published")
    ap.add_argument("--merge", action="store_true",
                    help="keep the measurements of OUT/results.json not measured again")
    args = ap.parse_args()
    args.out = os.path.abspath(args.out)  # operators run in their output directories
    args.perf = {x for x in args.perf.split(",") if x}
    if args.perf and args.write_doc:
        log("refusing --write-doc with --perf: a profiled operator runs slower")
        return 2
    if args.perf and not shutil_which("perf"):
        log("--perf needs perf (Debian: linux-perf)")
        return 2
    if args.quick:
        args.quiet_timeout = 0  # a smoke run proves the harness, not a speed: no waiting
    phases = [p for p in args.phases.split(",") if p]

    def interrupted(signum, frame):
        raise KeyboardInterrupt  # unwinds through the finally blocks: clusters stopped
    signal.signal(signal.SIGTERM, interrupted)
    sizes = ({"flighttickets": [50], "challenges": [10], "teams": [5], "expiry": [5]}
             if args.quick else {"flighttickets": [1000, 10000], "challenges": [100, 1000],
                                 "teams": [100, 1000, 2000], "expiry": [1000],
                                 # A real node holds 110 pods: 50 claimed instances and
                                 # the 50 warm ones the pool refills with, and its own.
                                 "realflag": [50]})
    for spec in filter(None, args.sizes.split(";")):
        w, ns = spec.split("=")
        sizes[w] = [int(x) for x in ns.split(",")]
    if args.settle is None:
        args.settle = 3 if args.quick else 10
    os.makedirs(args.out, exist_ok=True)
    args.clusters = os.path.join(args.out, "clusters")
    args.spares = Spares(args.clusters) if args.quick else None
    if args.spares:
        import atexit
        atexit.register(args.spares.close)  # no spare outlives the run, however it ends
    only = [x for x in args.only.split(",") if x]

    vers = versions()
    results = {"quick": args.quick, "versions": vers, "runs": [], "trials": args.trials or "rotated",
               "max_load": args.max_load, "dirty": vers["kopc"].endswith("(dirty tree)"),
               "load_before": os.getloadavg(),
               "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    if args.write_doc and results["dirty"]:
        log("refusing --write-doc: the tree is dirty (commit first: the run records the commit)")
        return 2
    prev = os.path.join(args.out, "results.json")
    if args.merge and os.path.exists(prev):  # keep what an earlier (partial) run measured
        with open(prev) as f:
            old = json.load(f)
        results["runs"], results["started"] = old["runs"], old["started"]
        results["load_before"] = old["load_before"]
        results["order"] = old.get("order", {})  # the rotations of the cells not measured again
        for r in results["runs"]:  # measured at the commit that run recorded
            r.setdefault("commit", old["versions"]["kopc"])
    ops = operators()
    op_names = {"limit", "kopc", "controller-runtime", "kopf"}
    only_ops = {x for x in only if x in op_names}
    only_sizes = {x for x in only if x not in op_names}
    results["order"] = results.get("order", {})
    for workload, ns in sizes.items():
        for n in ns:
            tag = f"{workload}-{n}"
            if only_sizes and not ({workload, tag} & only_sizes):
                continue
            units = plan(args, ops, workload, n, phases, only_ops)
            if not units:
                continue
            # Trials interleaved and rotated (a Latin square): trial k starts
            # with the k-th operator of the cell, so over a multiple of the
            # operators' count every one runs first, second, ... and last
            # equally often, and a slow spell of the machine, or the load a
            # heavy phase leaves behind, lands on every one alike.
            k = len(units)
            trials = args.trials or (1 if args.quick else k * -(-3 // k))
            results["order"][tag] = {}
            for trial in range(1, trials + 1):
                tdir = os.path.join(args.out, tag, f"trial-{trial}")
                shift = (trial - 1) % k
                rotated = units[shift:] + units[:shift]
                results["order"][tag][str(trial)] = [name for name, _ in rotated]
                left = sum(len(steps) for _, steps in rotated)
                for pos, (name, steps) in enumerate(rotated, 1):
                    for phase, fn, label in steps:
                        left -= 1
                        if args.spares:
                            args.spares.remaining = left + (trials - trial) * sum(
                                len(st) for _, st in rotated)
                        out = os.path.join(tdir, "limit" if phase == "limit" else f"{name}-{phase}")
                        measure(args, results, workload, n, trial, name, phase,
                                lambda: fn(out), label, order=pos)
            if args.spares:
                args.spares.close()
            subprocess.run(["rm", "-rf", args.clusters])
    results["load_after"] = os.getloadavg()
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    noisy = [r for r in results["runs"] if r.get("noisy")]
    if args.write_doc and any(r.get("profiled") for r in results["runs"]):
        log("refusing --write-doc: the results hold a profiled measurement")
        args.write_doc = False
    if args.write_doc and noisy:
        log(f"refusing --write-doc: {len(noisy)} measurements began above load {args.max_load}")
        args.write_doc = False
    import report
    report.write(args.out, results, write_doc=args.write_doc)
    failed = [r for r in results["runs"] if r.get("done") != r["n"]]
    for r in failed:
        log(f"INCOMPLETE: {r['workload']}-{r['n']} {r['operator']} {r['phase']} "
            f"trial {r.get('trial', 1)}: {r.get('done')}/{r['n']} {r.get('error', '')}")
    return 1 if failed or (noisy and "--write-doc" in sys.argv) else 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
