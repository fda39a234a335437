"""pool.py - the claim benchmark (issue 16): the start of a CTF as the teams
see it. N teams each hold their event stream of the instance API open (as
the participant page does), then each asks for its instance with a PUT,
paced over BURST_MS; the latency is from the PUT sent to the first
`instance` event on that team's stream whose state is Running.

bench.py runs it twice on fresh clusters: with the definition's warm pool
sized for the burst (spec.pool.min = N, Ready before the first PUT) and
without a pool, so the two figures differ only in where the instances come
from. Each team uses its own token (token may be a function of the team's
index), as a participant's page would. The streams reuse bench/streams.py's
client; the figures are the median, 99th percentile and maximum, and how
many teams saw Running within DEADLINE_S. Python's asyncio, standard library only.

The cells (the teams cells' claims-fresh and claims-pool): measure_claims,
on a fresh cluster in the frame operators.measured_operator; the limit of a
claim claims the warm instances make_warm_instances made (the loader's
--mode warm; converge.measure_limit with the loader's --claim).

The teams-gw cells (issue 29, item 4) measure claims-pool in ctf-operator's
gateway mode: the operator runs with --gateway-domain (no probe address:
fake nodes serve nothing), Traefik serves the Gateway (bench/gateway.py),
a claim also writes the team's route, and Running waits for Traefik to
accept it. Their limit does the same: the loader's --claim with
--gateway-domain applies the route after the claim patch and writes Running
once a watch sees it accepted; the warm instance holds the exposed Service
the route names (Traefik refuses a route to a Service that does not
exist).
"""
import asyncio
import json
import os
import resource
import time

import streams
from cluster import ApiWrites, fresh_cluster, wait_namespaces_settled, wait_pool_ready
from common import proc_cpu, team_token, wait_until, writes_of
from gateway import traefik_cpu
from harness import burst_ms, loader, quiet_gate
from operators import Profile, measured_operator, reconciles_of, requests_of

BURST_MS = 10000        # N teams press Create within 10 s
PUT_CONCURRENCY = 32    # PUTs in flight at once
DEADLINE_S = 600        # a team that has not seen Running by then counts as not served
OPERATOR_MANAGER = "kopc-ctf"  # ctf-operator's field manager (CTF_FIELD_MANAGER)


class RunningStream(streams.Stream):
    """A team's stream: ready with its (empty) snapshot, then the time the
    first instance event saying Running arrived."""

    def _on(self, event, data):
        if event == "snapshot" and self.expires is None:
            self.expires = ""
            self.snapshot.set()
        elif (event == "instance" and self.changed_at is None and self.expires is not None
              and data.get("state") == "Running"):
            self.changed_at = time.time()
            self.changed.set()


async def _put(host, port, token, i, definition, sem):
    """PUT team i's instance; the time it was sent, or None when refused."""
    return await streams.request(host, port, token(i) if callable(token) else token, "PUT",
                                 f"/api/v1/teams/{streams._team(i)}/instances/{definition}", sem,
                                 ok=(200, 201))


async def _measure(host, port, token, n, definition, spread_ms):
    ss, tasks = await streams.open_streams(RunningStream, host, port, token, n)
    sent, lat = await streams.send_and_time(
        ss, tasks, lambda i, sem: _put(host, port, token, i, definition, sem),
        spread_ms, PUT_CONCURRENCY, DEADLINE_S)
    return {"teams": n, "accepted": sum(1 for x in sent if x is not None), "done": len(lat),
            # per team: the PUT sent and Running seen on its stream (epoch s; None: not)
            "times": [(sent[s.i], s.changed_at) for s in ss],
            "claim_ms": streams.spread(lat),
            "within_250ms": sum(1 for x in lat if x <= 250),
            "within_1s": sum(1 for x in lat if x <= 1000)}


def measure(api_port, token, n, definition, out, spread_ms=BURST_MS):
    """Run the burst against the API on api_port, the PUTs paced over
    spread_ms (BURST_MS; shorter in bench.py's quick mode); the figures as a
    dict (also written to out/claims.json)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2 * n + 256:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 2 * n + 1024), hard))
    res = asyncio.run(_measure("127.0.0.1", api_port, token, n, definition, spread_ms))
    with open(os.path.join(out, "claims.json"), "w") as f:
        json.dump(res, f, indent=1)
    return res


def _epoch(stamp):
    """Seconds since the epoch of an RFC 3339 time of the apiserver (whole seconds)."""
    import calendar
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


def route_split(c, times):
    """The gateway mode's claims split at the route (kopc's run): for each
    team, when the operator's apply of its TLSRoute and Traefik's write of
    its status happened, from the route's managedFields (the apiserver's
    clock, whole seconds: each time is up to 1 s early), against the PUT sent
    and Running seen on the team's stream (times, from measure). Returns
    p50/p99/max of PUT -> route applied, route applied -> accepted written,
    accepted written -> Running on the stream, in ms."""
    routes = json.loads(c.kubectl("get", "tlsroutes.gateway.networking.k8s.io", "-A", "-o", "json",
                                  "--show-managed-fields"))
    chals = json.loads(c.kubectl("-n", "ctf", "get", "challenges.ctf.kopc.io", "-o", "json"))
    team_of = {x["metadata"]["name"]: x["spec"].get("team", "") for x in chals["items"]}
    put_applied, applied_accepted, accepted_running = [], [], []
    for r in routes["items"]:
        md = r["metadata"]
        team = team_of.get(md.get("labels", {}).get("ctf.kopc.io/challenge", ""), "")
        if not team.startswith("team-"):
            continue
        sent, running = times[int(team[5:])]
        applied = accepted = None
        for m in md.get("managedFields", []):
            if m.get("subresource") == "status" and m.get("manager") != OPERATOR_MANAGER:
                accepted = _epoch(m["time"])  # the gateway's write
            elif m.get("manager") == OPERATOR_MANAGER and not m.get("subresource"):
                applied = _epoch(m["time"])
        if sent is None or running is None or applied is None or accepted is None:
            continue
        put_applied.append((applied - sent) * 1000)
        applied_accepted.append((accepted - applied) * 1000)
        accepted_running.append((running - accepted) * 1000)
    return {"routes_timed": len(put_applied),
            "put_to_route_applied_ms": streams.spread(put_applied),
            "route_applied_to_accepted_ms": streams.spread(applied_accepted),
            "accepted_to_running_ms": streams.spread(accepted_running)}


def make_warm_instances(c, workload, n, out, threads, gateway=()):
    """The limit of a claim: a warm pool of n for the loader (--claim) to
    claim, made before the gate, unmeasured: the loader's --mode warm
    applies every object of warm instance i as the pool would
    (ctf_build_pooled_children; in the gateway mode with gateway, the
    loader's --gateway-domain D, as ctf-operator's with it), then this
    waits for their pods Ready and their endpoints ready (what the pool's
    Ready means) and for the control plane's own writes for the new
    namespaces (a default ServiceAccount and a root CA ConfigMap each).
    So the limit's claims meet an apiserver holding what kopc's meet after
    the pool's warm-up, not n bare namespaces (a quarter of the memory: a
    cheaper apiserver)."""
    prep = os.path.join(out, "warm-pool")
    os.makedirs(prep, exist_ok=True)
    s = loader(c, workload, n, "warm", prep, threads, extra=gateway)
    if s.get("exit") != 0 or s.get("done") != n:
        raise RuntimeError(f"the limit's warm pool: {s.get('done')} of {n} made "
                           f"(see {prep}/loader-warm.log)")
    wait_warm_ready(c, n)
    wait_warm_serving(c, n)
    wait_namespaces_settled(c, "ctf-bench-", n)


def wait_warm_ready(c, n, timeout=1800):
    """Wait until n Deployments of warm instances (label ctf.kopc.io/pool)
    have every replica available."""
    def ready():
        out = c.kubectl("get", "deployments", "-A", "-l", "ctf.kopc.io/pool", "-o",
                        "jsonpath={range .items[*]}{.spec.replicas}/"
                        "{.status.availableReplicas} {end}")
        return sum(1 for x in out.split() if x.split("/")[0] == x.split("/")[1]) >= n
    return wait_until(ready, timeout, f"the limit's warm pool of {n} was not available", step=2)


def wait_warm_serving(c, n, timeout=1800):
    """Wait until n warm instances' namespaces (ctf-bench-*) each hold an
    EndpointSlice with a ready endpoint."""
    def serving():
        out = c.kubectl("get", "endpointslices", "-A", "-o",
                        "jsonpath={range .items[*]}{.metadata.namespace} "
                        "{.endpoints[*].conditions.ready}{\"\\n\"}{end}")
        return len({line.split()[0] for line in out.splitlines()
                    if line.startswith("ctf-bench-") and "true" in line.split()[1:]}) >= n
    return wait_until(serving, timeout, f"the limit's warm pool of {n} was not serving", step=2)


def deployment_generations(c):
    """{(namespace, name): metadata.generation} of every Deployment."""
    deps = json.loads(c.kubectl("get", "deployments", "-A", "-o", "json"))["items"]
    return {(d["metadata"]["namespace"], d["metadata"]["name"]): d["metadata"].get("generation")
            for d in deps}


def measure_claims(args, op, workload, n, out, pooled, extra=()):
    """The burst on the teams' event streams (measure), with a warm
    pool of n (pooled) or none; extra: the operator's own flags (the
    gateway mode's)."""
    os.makedirs(out, exist_ok=True)
    # Room for the warm pods and the fresh ones a refill or a miss makes.
    c = fresh_cluster(args, workload, n, "claims", pods_per_object=2 if pooled else 1)
    with measured_operator(op, c, out, n, 0 if args.quick else 2, extra=extra) as run:
        pid = run.pid
        warmup_s = None
        if pooled:
            c.kubectl("-n", "ctf", "patch", "chaldef", "bench", "--type", "merge",
                      "-p", json.dumps({"spec": {"pool": {"min": n}}}))
            warmup_s = wait_pool_ready(c, n)
            time.sleep(2)  # the pool's own writes settle before the burst
        gens0 = deployment_generations(c) if pooled else {}
        quiet_gate(args)
        writes = ApiWrites(c, workload)
        cpu0, dc0, tr0 = proc_cpu(pid), proc_cpu(c.pid), traefik_cpu(c)
        text0 = op.metrics()  # one scrape: the writes and the passes before the burst
        req0 = requests_of(text0) or {}
        passes0 = reconciles_of(text0, "challenge")
        prof = Profile(args, op, pid, out)  # --perf: the burst profiled
        dc_prof = Profile(args, None, c.pid, out)  # --perf devcluster
        s = measure(op.api_port, team_token, n, "bench", out,  # each team its own token
                    spread_ms=burst_ms(args))
        dc1 = proc_cpu(c.pid)
        prof.stop()
        dc_prof.stop()
        s["devcluster_cpu_s"] = dc1 - dc0
        if prof.proc or dc_prof.proc:
            s["profiled"] = True
        times = s.pop("times")
        s.update(writes.done(0))
        # The operator's own writes over the burst (its rest_client_requests_total), by method;
        # its /metrics (the work queues' wait and work times among them) kept in metrics.txt.
        text = op.metrics(os.path.join(out, "metrics.txt"))
        req1 = requests_of(text) or {}
        # The Challenge controller's passes over the burst, per claim: what a claim costs the
        # work queue (a status write or a definition's status that woke them again shows here).
        passes1 = reconciles_of(text, "challenge")
        if passes0 is not None and passes1 is not None:
            s["passes_per_claim"] = (passes1 - passes0) / n
        by = {k: v - req0.get(k, 0) for k, v in req1.items() if v - req0.get(k, 0) > 0}
        s["requests_by_method"] = by
        s["writes_per_object"] = (writes_of(by) or 0) / n
        tr1 = traefik_cpu(c)
        if tr0 is not None and tr1 is not None:
            s["traefik_cpu_s"] = tr1 - tr0
        if extra:  # the gateway mode: where the time went, at the route
            try:
                s["route_split"] = route_split(c, times)
            except (RuntimeError, ValueError, KeyError, IndexError) as e:  # a figure less
                s["route_split"] = {"error": f"{type(e).__name__}: {e}"}
        claimed = c.kubectl("get", "ns", "-l", "ctf.kopc.io/pool,ctf.kopc.io/challenge", "-o", "name")
        # No pod restarted at the claim: a claimed instance's Deployments are at the
        # generation they had before the burst (a changed pod template would roll its pods).
        names = {x.split("/", 1)[1] for x in claimed.split() if x.startswith("namespace/")}
        gens = deployment_generations(c)
        s["claimed_deployments_changed"] = sum(
            1 for k, g in gens.items() if k[0] in names and gens0.get(k, g) != g)
        s.update({"pool": n if pooled else 0, "pool_warmup_s": warmup_s,
                  "served_from_pool": sum(1 for x in claimed.split() if x.startswith("namespace/")),
                  "cpu_s": proc_cpu(pid) - cpu0,
                  "cpu_ms_per_object": (proc_cpu(pid) - cpu0) * 1000 / n})
        run.stop()
        s["operator_exit"] = op.proc.returncode
        return s
