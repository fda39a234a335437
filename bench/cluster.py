"""cluster.py - the devclusters a measurement runs on: Cluster (one
devcluster, started and stopped), Spares (the quick mode's clusters made in
the background), fresh_cluster (a cluster nobody used before, set up for its
workload), Kube (the harness's own client of the apiserver), ApiWrites (the
apiserver's count of writes over one measured phase), and the warm pool's
state as the cluster reports it.
"""
import json
import os
import re
import subprocess
import threading
import time
import urllib.parse

from common import BIN, log, run, wait_until
from workloads import OPERATOR_RESOURCES, WORKLOADS

class Cluster:
    def __init__(self, dir_, nodes, real_nodes=0, gateway_domain=None):
        self.dir = dir_
        self.kubeconfig = os.path.join(dir_, "kubeconfig")
        self.procs = []  # processes that live as long as the cluster (its gateway): stopped with it
        t0 = time.time()
        run([os.path.join(BIN, "devcluster"), "start", "--dir", dir_, "--nodes", str(nodes)]
            + (["--real-nodes", str(real_nodes)] if real_nodes else [])
            + (["--gateway-domain", gateway_domain] if gateway_domain else []))
        self.start_s = time.time() - t0
        with open(os.path.join(dir_, "devcluster.pid")) as f:
            self.pid = int(f.read().split()[0])

    def kubectl(self, *args, stdin=None):
        return run([os.path.join(BIN, "kubectl"), "--kubeconfig", self.kubeconfig,
                    "--request-timeout=60s", *args], input=stdin)

    def stop_procs(self):
        """Stop the processes that live as long as the cluster."""
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = []

    def stop(self):
        self.stop_procs()
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
                            WORKLOADS[workload].get("real_nodes", 0),
                            WORKLOADS[workload].get("gateway_domain"))
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
        c.stop_procs()
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

def fresh_cluster(args, workload, n, tag, pods_per_object=1):
    spares = getattr(args, "spares", None)  # the quick mode's (Spares)
    key = (workload, n, pods_per_object)
    c = spares.take(key) if spares else None
    if c is None:
        d = os.path.join(args.clusters, tag)
        subprocess.run(["rm", "-rf", d])
        c = Cluster(d, WORKLOADS[workload]["nodes"](n * pods_per_object),
                    WORKLOADS[workload].get("real_nodes", 0),
                    WORKLOADS[workload].get("gateway_domain"))
        WORKLOADS[workload]["setup"](c, n)
    if spares:
        c.spares = spares
        if spares.remaining > 0:
            spares.prepare(key)  # the next measurement's, most likely alike
    return c


def wait_pool_ready(c, n, timeout=1800, definition="bench"):
    """Wait until the definition's warm pool reports n Ready; the seconds it took."""
    def ready():
        r = subprocess.run([os.path.join(BIN, "kubectl"), "--kubeconfig", c.kubeconfig, "-n", "ctf",
                            "get", "chaldef", definition, "-o", "jsonpath={.status.pool.ready}"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return r.stdout.strip() == str(n)
    return wait_until(ready, timeout, f"the warm pool of {n} was not Ready")


def wait_namespaces_settled(c, prefix, n, timeout=600):
    """Wait until the control plane has made its own objects in the n
    namespaces named prefix*: each one's default ServiceAccount and its
    kube-root-ca.crt ConfigMap (the controller-manager writes both soon after
    a namespace appears). A phase that made its namespaces right before its
    measurement would otherwise measure those 2n writes with it."""
    def count(kind, name):
        out = c.kubectl("get", kind, "-A", "--field-selector", f"metadata.name={name}",
                        "-o", "jsonpath={.items[*].metadata.namespace}")
        return sum(1 for ns in out.split() if ns.startswith(prefix))
    return wait_until(lambda: count("serviceaccounts", "default") >= n and
                      count("configmaps", "kube-root-ca.crt") >= n,
                      timeout, f"the control plane did not settle {n} new namespaces")


def pool_claims(c):
    """How many instance namespaces came from a warm pool (claimed ones)."""
    claimed = c.kubectl("get", "ns", "-l", "ctf.kopc.io/pool,ctf.kopc.io/challenge", "-o", "name")
    return sum(1 for x in claimed.split() if x.startswith("namespace/"))

