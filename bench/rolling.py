"""rolling.py - a live update at scale (the rolling cells, issue 30): N
Running instances of a definition whose spec.update is Rolling with
maxUnavailable 10 %; then its pod template's image changes. With
ctf-operator (which replaces the instances, at most maxUnavailable at a
time, each waiting for its new pod to be Ready before its slot goes to the
next) and its limit (the harness alone does the same Deployment updates,
with the same bound, and patches each Challenge's status Running on the new
generation once its Deployment is rolled out and available).

The figures come from two watches the harness holds open over the measured
phase, of the instances' Deployments and of the Challenges, feeding one copy
of their state (Tracker):

  done        an instance is done when its Challenge shows Running on the
              definition's new generation (status.definitionGeneration) and
              its Deployments carry the new template, rolled out and
              available; per instance, the change sent -> done; all done:
              the change -> the last instance done;
  unavailable the instances whose Deployments are in the middle of a
              replacement (a template not yet observed, replicas not all
              updated, old ones left) or not available: sampled every
              SAMPLE_S from the copy (max_unavailable), and also counted at
              every watch event (max_unavailable_events: every state the
              apiserver went through, in its order). kopc's run also counts
              the Challenges showing Updating (max_updating).

At the end a list of every instance Deployment checks the template of each
(deployments_updated) and of every Challenge its generation
(on_new_generation): bench/check.py asserts both are N and that the sampled
maximum never exceeded maxUnavailable.
"""
import concurrent.futures
import csv
import http.client
import json
import os
import threading
import time
import urllib.parse

import streams  # the percentiles (streams.spread)
from cluster import ApiWrites, Kube, fresh_cluster
from common import proc_cpu
from harness import loader, quiet_gate
from operators import Profile, measured_operator

ROLLING_PERCENT = 10  # spec.update.maxUnavailable of the benchmark's definition, in %
SAMPLE_S = 0.25       # how often the instances unavailable at once are sampled
NEW_IMAGE = "registry.example/ctf/echo:2"  # the change: bench/challenge/definition.yaml has :1
SELECTOR = "app.kubernetes.io/managed-by=kopc-ctf"
CHALLENGES = "/apis/ctf.kopc.io/v1alpha1/namespaces/ctf/challenges"
DEFINITION = "/apis/ctf.kopc.io/v1alpha1/namespaces/ctf/challengedefinitions/bench"
DEPLOYMENTS = "/apis/apps/v1/deployments?labelSelector=" + urllib.parse.quote(SELECTOR)
GEN_ANNOTATION = "ctf.kopc.io/definition-generation"


def max_unavailable(n):
    """The definition's maxUnavailable for N instances: ROLLING_PERCENT of
    them, rounded down, at least 1 (docs/ctf-resources.md)."""
    return max(1, n * ROLLING_PERCENT // 100)


def update_strategy():
    """The definition's spec.update (v1alpha1; v1beta1 nests maxUnavailable
    under rolling): set before the instances are made, unmeasured."""
    return {"strategy": "Rolling", "maxUnavailable": f"{ROLLING_PERCENT}%"}


def deployment_rolling(d):
    """Whether Deployment d is in the middle of a replacement or unavailable
    (ctf_update_deployment_rolling, plus availability)."""
    spec, st = d.get("spec", {}), d.get("status", {})
    want = spec.get("replicas", 1)
    updated = st.get("updatedReplicas", 0)
    return (st.get("observedGeneration", 0) < d["metadata"].get("generation", 0)
            or updated < want or st.get("replicas", 0) > updated
            or st.get("availableReplicas", 0) < want)


def deployment_image(d):
    cs = d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
    return cs[0].get("image") if cs else None


class Watch(threading.Thread):
    """A list, then a watch from its resourceVersion, of one collection;
    each object goes to on_object(type, object) on this thread. The watch is
    opened again from the last resourceVersion seen when the apiserver ends
    it."""

    def __init__(self, kube, path, on_object):
        super().__init__(daemon=True)
        self.kube, self.path, self.on_object = kube, path, on_object
        self.stopped = threading.Event()
        self.conn = None
        st, body = kube.request("GET", path)
        if st != 200:
            raise RuntimeError(f"list {path}: HTTP {st}")
        lst = json.loads(body)
        self.rv = lst["metadata"]["resourceVersion"]
        for o in lst["items"]:
            on_object("ADDED", o)

    def run(self):
        sep = "&" if "?" in self.path else "?"
        while not self.stopped.is_set():
            try:
                self.conn = http.client.HTTPSConnection(self.kube.host, self.kube.port,
                                                        context=self.kube.ctx, timeout=3600)
                self.conn.request("GET", f"{self.path}{sep}watch=1&resourceVersion={self.rv}"
                                  "&timeoutSeconds=3000")
                r = self.conn.getresponse()
                if r.status != 200:
                    raise RuntimeError(f"watch {self.path}: HTTP {r.status}")
                for line in iter(r.readline, b""):
                    ev = json.loads(line)
                    if ev["type"] == "ERROR":
                        raise RuntimeError(f"watch {self.path}: {ev['object'].get('message')}")
                    self.rv = ev["object"]["metadata"]["resourceVersion"]
                    self.on_object(ev["type"], ev["object"])
            except (OSError, http.client.HTTPException, ValueError):
                if self.stopped.is_set():
                    return
                time.sleep(0.2)
            finally:
                self.conn.close()

    def stop(self):
        self.stopped.set()
        if self.conn is not None and self.conn.sock is not None:
            try:  # unblock the read
                import socket
                self.conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.join(10)


class Tracker:
    """The state of the instances' Deployments and Challenges as the two
    watches show it; which instances are unavailable now (and the most at
    once, at any event) and when each became done on generation gen (set by
    start()). on_rolled(index) is called, on a watch's thread, the first
    time instance index's Deployments show the new template rolled out and
    available (the limit's driver frees its slot there)."""

    def __init__(self, n):
        self.n = n
        self.lock = threading.Lock()
        self.deps = {}   # instance namespace -> {Deployment: (rolling, new image)}
        self.chals = {}  # index -> (namespace, currentStatus, definitionGeneration)
        self.ns_of = {}  # instance namespace -> index
        self.unavailable = set()  # instance namespaces
        self.gen = None
        self.max_events = 0
        self.rolled, self.done = {}, {}
        self.on_rolled = None

    def start(self, gen):
        """From now on, instances are done on generation gen (each looked
        at again: an event may have come before gen was known)."""
        with self.lock:
            self.gen = gen
            for ns in list(self.deps):
                self._instance(ns)

    def on_deployment(self, typ, d):
        ns, name = d["metadata"]["namespace"], d["metadata"]["name"]
        with self.lock:
            if typ == "DELETED":
                self.deps.get(ns, {}).pop(name, None)
            else:
                self.deps.setdefault(ns, {})[name] = (deployment_rolling(d),
                                                      deployment_image(d) == NEW_IMAGE)
            self._instance(ns)

    def on_challenge(self, typ, c):
        name = c["metadata"]["name"]
        if not name.startswith("chal-") or typ == "DELETED":
            return
        i, st = int(name[5:]), c.get("status", {})
        with self.lock:
            ns = st.get("namespace")
            self.chals[i] = (ns, st.get("currentStatus"), st.get("definitionGeneration"))
            if ns:
                self.ns_of[ns] = i
                self._instance(ns)

    def _instance(self, ns):
        """Instance ns's figures again, after an event of it (lock held)."""
        deps = list(self.deps.get(ns, {}).values())
        if any(rolling for rolling, _ in deps):
            self.unavailable.add(ns)
        else:
            self.unavailable.discard(ns)
        self.max_events = max(self.max_events, len(self.unavailable))
        i = self.ns_of.get(ns)
        if self.gen is None or i is None or not deps:
            return
        now = time.time()
        if i not in self.rolled and all(new and not rolling for rolling, new in deps):
            self.rolled[i] = now
            if self.on_rolled:
                self.on_rolled(i)
        _, state, gen = self.chals.get(i, (None, None, None))
        if i in self.rolled and i not in self.done and state == "Running" and gen == self.gen:
            self.done[i] = now

    def sample(self):
        """(instances unavailable now, Challenges showing Updating now)."""
        with self.lock:
            return len(self.unavailable), sum(1 for _, s, _ in self.chals.values()
                                              if s == "Updating")


class Sampling(threading.Thread):
    """Samples the Tracker every SAMPLE_S into rolling.csv."""

    def __init__(self, tracker, path, t0):
        super().__init__(daemon=True)
        self.tracker, self.path, self.t0 = tracker, path, t0
        self.stopped = threading.Event()
        self.most = self.most_updating = self.count = 0

    def run(self):
        with open(self.path, "w") as f:
            f.write("t_s,unavailable,updating,done\n")
            while not self.stopped.is_set():
                u, upd = self.tracker.sample()
                self.count += 1
                self.most, self.most_updating = max(self.most, u), max(self.most_updating, upd)
                f.write(f"{time.time() - self.t0:.3f},{u},{upd},{len(self.tracker.done)}\n")
                self.stopped.wait(SAMPLE_S)

    def stop(self):
        self.stopped.set()
        self.join()


def change_definition(kube):
    """The change: the pod template's image; returns the definition's new
    metadata.generation."""
    st, body = kube.request("PATCH", DEFINITION, [
        {"op": "replace", "path": "/spec/pods/0/template/containers/0/image", "value": NEW_IMAGE}],
        "application/json-patch+json")
    if st != 200:
        raise RuntimeError(f"the definition's image: HTTP {st} {body[:200]!r}")
    return json.loads(body)["metadata"]["generation"]


def made_instances(args, c, workload, n, out, mode):
    """The N instances, made unmeasured (the loader's files in out/made)
    and Running; the definition's update strategy set before them."""
    kube = Kube(c.kubeconfig, os.path.join(c.dir, "harness"))
    made = os.path.join(out, "made")
    os.makedirs(made, exist_ok=True)
    pre = loader(c, workload, n, mode, made, args.threads)
    if pre["done"] != n:
        raise RuntimeError(f"rolling: {pre['done']} of {n} instances Running before it")
    return kube


def wait_done(tracker, n, timeout):
    end = time.time() + timeout
    while len(tracker.done) < n and time.time() < end:
        time.sleep(0.1)


def final_state(kube, gen):
    """A list of every instance Deployment and Challenge at the end: how
    many Deployments carry the new template, rolled out, and how many
    Challenges run the new generation."""
    st, body = kube.request("GET", DEPLOYMENTS)
    deps = json.loads(body)["items"] if st == 200 else []
    st, body = kube.request("GET", CHALLENGES)
    chals = json.loads(body)["items"] if st == 200 else []
    return {"deployments_updated": sum(1 for d in deps if deployment_image(d) == NEW_IMAGE
                                       and not deployment_rolling(d)),
            "deployments": len(deps),
            "on_new_generation": sum(1 for x in chals if x["metadata"]["name"].startswith("chal-")
                                     and x.get("status", {}).get("currentStatus") == "Running"
                                     and x.get("status", {}).get("definitionGeneration") == gen)}


def measured_update(args, kube, n, out, t_change, gen, tracker, sampling):
    """The figures of the phase once it is over (or timed out)."""
    wait_done(tracker, n, 1800)
    sampling.stop()
    done = dict(tracker.done)
    lat = [(t - t_change) * 1000 for t in done.values()]
    with open(os.path.join(out, "latency.csv"), "w") as f:
        w = csv.writer(f)
        w.writerow(["index", "change_ms", "rolled_ms", "done_ms"])
        for i in sorted(done):
            w.writerow([i, f"{t_change * 1000:.3f}", f"{tracker.rolled.get(i, 0) * 1000:.3f}",
                        f"{done[i] * 1000:.3f}"])
    s = {"done": len(done), "generation": gen, "max_allowed": max_unavailable(n),
         "latency_ms": {"n": len(lat), "p90": streams._percentile(lat, 90), **streams.spread(lat)},
         "converge_s": (max(done.values()) - t_change) if len(done) == n else None,
         "max_unavailable": sampling.most, "max_unavailable_events": tracker.max_events,
         "max_updating": sampling.most_updating, "samples": sampling.count,
         "sample_s": SAMPLE_S}
    s.update(final_state(kube, gen))
    return s


def track(kube, n, out):
    """The two watches and their Tracker, from the state before the change."""
    tracker = Tracker(n)
    watches = [Watch(kube, DEPLOYMENTS, tracker.on_deployment),
               Watch(kube, CHALLENGES, tracker.on_challenge)]
    for w in watches:
        w.start()
    return tracker, watches


def measure_rolling(args, op, workload, n, out):
    """A live update with ctf-operator: N Running instances, then the
    definition's image changes; the operator replaces them by its Rolling
    strategy. The change -> every instance Running on the new generation."""
    os.makedirs(out, exist_ok=True)
    c = fresh_cluster(args, workload, n, "rolling")
    with measured_operator(op, c, out, n, 0 if args.quick else 2) as run:
        pid = run.pid
        kube = made_instances(args, c, workload, n, out, "operator")
        tracker, watches = track(kube, n, out)
        try:
            quiet_gate(args)
            writes = ApiWrites(c, workload)
            cpu0, dc0 = proc_cpu(pid), proc_cpu(c.pid)
            prof = Profile(args, op, pid, out)
            dc_prof = Profile(args, None, c.pid, out)  # --perf devcluster
            t_change = time.time()
            sampling = Sampling(tracker, os.path.join(out, "rolling.csv"), t_change)
            sampling.start()
            gen = change_definition(kube)
            tracker.start(gen)
            s = measured_update(args, kube, n, out, t_change, gen, tracker, sampling)
            s["cpu_s"] = proc_cpu(pid) - cpu0
            s["devcluster_cpu_s"] = proc_cpu(c.pid) - dc0
            prof.stop()
            dc_prof.stop()
            if prof.proc or dc_prof.proc:
                s["profiled"] = True
            s["cpu_ms_per_object"] = s["cpu_s"] * 1000 / n
            s.update(writes.done(0))  # the definition's patch is not an operator resource
        finally:
            for w in watches:
                w.stop()
        s["reconciles"] = op.reconciles(os.path.join(out, "metrics.txt"))
        run.stop()
        s["operator_exit"] = op.proc.returncode
        return s


def measure_limit_rolling(args, workload, n, out):
    """The limit of the live update: the loader alone made the N instances;
    after the same change of the definition the harness updates each
    instance's Deployment itself (a JSON patch of its template's image and
    its generation annotation), at most maxUnavailable in flight, the next
    one as soon as the watch shows one rolled out and available, and then
    patches its Challenge's status Running on the new generation: the
    writes of the update no operator can do without, as fast as the
    apiserver and the Deployment controller allow."""
    os.makedirs(out, exist_ok=True)
    c = fresh_cluster(args, workload, n, "limit")
    with measured_operator(None, c, out, n, start=False) as run:
        kube = made_instances(args, c, workload, n, out, "alone")
        tracker, watches = track(kube, n, out)
        pool = concurrent.futures.ThreadPoolExecutor(args.threads)
        errors = []
        try:
            quiet_gate(args)
            with tracker.lock:
                deps = {i: list(tracker.deps.get(ns, {})) for ns, i in tracker.ns_of.items()}
            if len(deps) != n or not all(deps.values()):
                raise RuntimeError(f"{len(deps)} instances with Deployments of {n}")
            ns_of = {i: ns for ns, i in tracker.ns_of.items()}
            slots = threading.Semaphore(max_unavailable(n))
            writes = ApiWrites(c, workload)
            run.start()
            dc0 = proc_cpu(c.pid)
            dc_prof = Profile(args, None, c.pid, out)  # --perf devcluster
            t_change = time.time()
            sampling = Sampling(tracker, os.path.join(out, "rolling.csv"), t_change)
            sampling.start()
            gen = change_definition(kube)

            def update(i):
                for name in deps[i]:
                    st, body = kube.request(
                        "PATCH", f"/apis/apps/v1/namespaces/{ns_of[i]}/deployments/{name}", [
                            {"op": "replace", "path": "/spec/template/spec/containers/0/image",
                             "value": NEW_IMAGE},
                            {"op": "add", "path": "/metadata/annotations/"
                             + GEN_ANNOTATION.replace("/", "~1"), "value": str(gen)}],
                        "application/json-patch+json")
                    if st != 200:
                        errors.append(f"PATCH deployment {ns_of[i]}/{name}: HTTP {st}")

            def running(i):
                st, _ = kube.request("PATCH", f"{CHALLENGES}/chal-{i:05d}/status",
                                     {"status": {"currentStatus": "Running",
                                                 "definitionGeneration": gen}},
                                     "application/merge-patch+json")
                if st != 200:
                    errors.append(f"PATCH chal-{i:05d}/status: HTTP {st}")

            def rolled(i):  # a watch's thread: hand over, never block it
                slots.release()
                pool.submit(running, i)
            tracker.on_rolled = rolled
            tracker.start(gen)
            for i in sorted(deps):
                if not slots.acquire(timeout=1800):
                    raise RuntimeError(f"no slot freed for instance {i} in 1800 s")
                pool.submit(update, i)
            s = measured_update(args, kube, n, out, t_change, gen, tracker, sampling)
            s["devcluster_cpu_s"] = proc_cpu(c.pid) - dc0
            dc_prof.stop()
            if dc_prof.proc:
                s["profiled"] = True
            pool.shutdown(wait=True)
            run.stop()
        finally:
            pool.shutdown(wait=False)
            for w in watches:
                w.stop()
        if errors:
            raise RuntimeError(f"{len(errors)} writes failed: {errors[0]}")
        own = sum(len(v) for v in deps.values()) + n
        s.update({"own_writes": own, "writes_per_object": own / n})
        s.update(writes.done(0))
        return s
