"""expiry.py - mass expiry (the expiry cells): N Running instances whose
Challenges' spec.expiresAt fall within EXPIRY_SPREAD_S; with ctf-operator
(which deletes each expired Challenge, its finalizer the namespace) and its
limit (the harness deletes both at each due time). Due time -> the instance
namespace gone, and the first due time -> the last gone.
"""
import json
import os
import threading
import time
import urllib.parse

import streams  # the percentiles (streams.spread)
from cluster import ApiWrites, Kube, fresh_cluster
from common import parallel, proc_cpu
from harness import QUICK_SPREAD_MS, loader, quiet_gate
from operators import measured_operator

EXPIRY_SPREAD_S = 60  # mass expiry: N instances expire within one minute
EXPIRY_LEAD_S = 15    # the first expiry this long after the expiry times are set

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


def made_instances(args, c, workload, n, out, mode):
    """made_instances has the N instances made, unmeasured (by the operator,
    or by the loader alone: mode as loader() takes it), then waits at the
    quiet gate; returns (the harness's Kube, the instances' namespaces)."""
    pre = loader(c, workload, n, mode, out, args.threads)
    if pre["done"] != n:
        raise RuntimeError(f"expiry: {pre['done']} of {n} instances Running before it")
    kube = Kube(c.kubeconfig, os.path.join(c.dir, "harness"))
    names = instance_names(kube, n)
    quiet_gate(args)
    return kube, names


def measure_expiry(args, op, workload, n, out):
    """Mass expiry with the operator: N Running instances, each Challenge's
    spec.expiresAt set so that they expire within EXPIRY_SPREAD_S; the
    operator deletes each expired Challenge, its finalizer the namespace.
    Due time -> namespace gone, and the first due -> the last gone."""
    os.makedirs(out, exist_ok=True)
    c = fresh_cluster(args, workload, n, "expiry")
    with measured_operator(op, c, out, n, 0 if args.quick else 2) as run:
        pid = run.pid
        kube, names = made_instances(args, c, workload, n, out, "operator")
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
        run.stop()
        s["operator_exit"] = op.proc.returncode
        return s


def measure_limit_expiry(args, workload, n, out):
    """The limit of mass expiry: the loader alone made the N instances; at
    instance i's due time the harness deletes its Challenge and its
    namespace, as the operator does; due time -> namespace gone."""
    os.makedirs(out, exist_ok=True)
    c = fresh_cluster(args, workload, n, "limit")
    with measured_operator(None, c, out, n, start=False) as run:
        kube, names = made_instances(args, c, workload, n, out, "alone")
        writes = ApiWrites(c, workload)
        run.start()
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
        run.stop()
        if errors:
            raise RuntimeError(f"{len(errors)} deletes failed: {errors[0]}")
        s.update({"own_writes": 2 * n, "writes_per_object": 2.0})
        s.update(writes.done(0))
        return s
