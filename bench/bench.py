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
         the burst and once without (bench/pool.py); --phases claims-pool
         or claims-fresh runs one of the two. The teams-gw cells: the pooled
         claims in the gateway mode (a route written at the claim, Running
         once Traefik accepted it), against the limit doing the same.
  streams (challenges, kopc, after warm) N event streams held open while
         each instance is renewed: memory per stream, and renewal -> event
         seen on the team's stream (bench/streams.py).
  rolling (the rolling cells, kopc and its limit) N Running instances,
         then their definition's image changes with spec.update Rolling,
         maxUnavailable 10 %: the change -> every instance Running on the
         new generation; the most instances unavailable at once, sampled
         (bench/rolling.py).
  realflag (a real node: kubelet, containerd, kube-proxy) N teams press
         Start together, each with its own token; the PUT -> the first byte
         of the team's own flag read through the endpoint the API reports,
         with a warm pool of N and without (bench/realflag.py); the floor:
         N bare pods of the same image, create -> flag through a node port.

--perf OPS profiles the warm phase of the named operators with perf (the
loader's run only; in the rolling cells the update; in the teams cells the
burst; 199 Hz, DWARF call graphs) and writes perf.txt beside the run's
figures: the top of the report by library and symbol. "devcluster" among
OPS profiles the control plane's process (frame pointers) over the rolling
update, over the teams cells' burst, over every operator's warm phase and
over every limit's run (perf-devcluster.txt): what the apiserver spends on
each.
A profiled run
is slower, so its figures are never published.

A sampler reads /proc/PID/stat (utime + stime) and /proc/PID/status (VmRSS)
of the operator and of the devcluster every 200 ms into samples.csv.

Results go to OUT/<workload>-<N>/<operator>-<phase>/ plus OUT/results.json,
OUT/table.md and OUT/bench.png; --write-doc puts the table into
docs/benchmarks.md between its markers. Only the standard library is needed,
except matplotlib for the plot (skipped, with a note, when missing).
"""

# The harness in modules, by concept (this file is the entry point: the
# arguments, the plan of a cell, the Latin-square trials, measure() and
# results.json):
#
#   common.py      paths, log, run, the /proc readers, the teams' tokens
#   workloads.py   each workload's cluster setup and shape (WORKLOADS)
#   cluster.py     Cluster, Spares, fresh_cluster, Kube, ApiWrites
#   operators.py   the operators, Sampler, Profile, and measured_operator: the
#                  one frame (start, measure, stop; cleanup on every path)
#   harness.py     the quiet gate, the loader's run, the pacing
#   converge.py    limit, warm, cold (flighttickets and challenges cells)
#   challenges.py  the burst
#   pool.py        the claims (teams cells), with and without a warm pool
#   expiry.py      mass expiry and its limit
#   rolling.py     a live update of N instances (Rolling) and its limit
#   api.py         the instance API's read path (team reads, wrk and nginx)
#   streams.py     the event streams
#   realflag.py    PUT -> the team's own flag on a real node, and the floor
#   report.py      the tables and the plot; check.py: the smoke run's checks
import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time

# The modules beside this file (bench/), also when it is imported.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from challenges import measure_burst  # noqa: E402
from cluster import Spares  # noqa: E402
from common import ROOT, VENV, log, shutil_which  # noqa: E402
from converge import measure_cold, measure_limit, measure_warm  # noqa: E402
from expiry import measure_expiry, measure_limit_expiry  # noqa: E402
from gateway import GATEWAY_DOMAIN  # noqa: E402
from harness import burst_ms  # noqa: E402
from operators import operators  # noqa: E402
from pool import measure_claims  # noqa: E402
from realflag import measure_limit_realflag, measure_realflag  # noqa: E402
from rolling import measure_limit_rolling, measure_rolling  # noqa: E402
from workloads import WORKLOADS  # noqa: E402


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
    # The claims phases: both with "claims"; one with "claims-pool" or "claims-fresh". The
    # teams-gw cells measure the pooled claims only, in the gateway mode.
    claims = [p for p in ("claims-fresh", "claims-pool") if p in phases or "claims" in phases]
    gw_loader, gw_operator = (), ()
    if workload == "teams-gw":
        claims = [p for p in claims if p == "claims-pool"]
        gw_loader = ("--gateway-domain", GATEWAY_DOMAIN)
        gw_operator = ("--gateway-domain", GATEWAY_DOMAIN)

    def want(name):
        return not only_ops or name in only_ops
    lim = []
    if workload in ("flighttickets", "challenges"):
        if {"warm", "cold"} & set(phases):
            lim.append(("limit", lambda out: measure_limit(args, workload, n, out), None))
        if workload == "challenges" and "burst" in phases:
            lim.append(("burst", lambda out: measure_limit(
                args, workload, n, out, ("--spread-ms", str(burst_ms(args))), "burst"), None))
    elif workload in ("teams", "teams-gw") and claims:
        # The same arrival rate: N creates paced over 10 s, the loader doing
        # an instance's writes (no pool) or a claim's (a warm namespace; in
        # the gateway mode the route too, and Running once it is accepted).
        if "claims-fresh" in claims:
            lim.append(("claims-fresh", lambda out: measure_limit(
                args, workload, n, out, ("--spread-ms", str(burst_ms(args))), "claims-fresh"),
                None))
        if "claims-pool" in claims:
            lim.append(("claims-pool", lambda out: measure_limit(
                args, workload, n, out, ("--spread-ms", str(burst_ms(args)), "--claim", "1")
                + gw_loader, "claims-pool"), None))
    elif workload == "expiry" and "expiry" in phases:
        lim.append(("expiry", lambda out: measure_limit_expiry(args, workload, n, out), None))
    elif workload == "rolling" and "rolling" in phases:
        lim.append(("rolling", lambda out: measure_limit_rolling(args, workload, n, out), None))
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
        elif workload in ("teams", "teams-gw") and claims and op.name == "kopc":
            if "claims-fresh" in claims:
                step("claims-fresh", lambda *a: measure_claims(*a, False))
            if "claims-pool" in claims:
                step("claims-pool", lambda *a: measure_claims(*a, True, gw_operator))
        elif workload == "expiry" and "expiry" in phases and op.name == "kopc":
            step("expiry", measure_expiry)
        elif workload == "rolling" and "rolling" in phases and op.name == "kopc":
            step("rolling", measure_rolling)
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
    ap.add_argument("--phases", default="warm,cold,burst,claims,expiry,rolling,realflag",
                    help="warm, cold, burst (challenges: the instance API, paced), claims "
                    "(the teams cells: the burst on the teams' event streams, with and without "
                    "a warm pool, and the limit of each; claims-pool or claims-fresh: one of "
                    "them; the teams-gw cells: the pooled one in the gateway mode) and/or expiry (the expiry cells: mass "
                    "expiry, kopc and the limit) and/or realflag (a real node: PUT -> the "
                    "team's own flag, with and without a pool, and the floor) and/or rolling (the "
                    "rolling cells: a live update of N instances, Rolling, maxUnavailable 10 %%, "
                    "kopc and the limit)")
    ap.add_argument("--sizes", default="", help="override N, e.g. challenges=100,1000,5000")
    ap.add_argument("--max-load", type=float, default=2.5,
                    help="1-minute load average a measurement waits for (the measurement alone "
                    "leaves about 2 on 2 cores); a measurement started above it is marked noisy")
    ap.add_argument("--quiet-timeout", type=float, default=600)
    ap.add_argument("--no-api", dest="api", action="store_false")
    ap.add_argument("--write-doc", action="store_true",
                    help="publish into docs/benchmarks.md: refused from a dirty tree or a noisy run")
    ap.add_argument("--perf", default="",
                    help="comma list of operators whose warm phase (rolling cells: the update) is "
                    "profiled with perf "
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
    sizes = ({"flighttickets": [50], "challenges": [10], "teams": [5], "expiry": [5],
              "rolling": [20]}
             if args.quick else {"flighttickets": [1000, 10000], "challenges": [100, 1000],
                                 "teams": [100, 1000, 2000], "teams-gw": [100, 1000],
                                 "expiry": [1000], "rolling": [1000],
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
    old = None
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
    measured = False
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
                        measured = True
            if args.spares:
                args.spares.close()
            subprocess.run(["rm", "-rf", args.clusters])
    if old and not measured:
        # Nothing measured now (--only none: a run published again, perhaps by a later
        # commit's report): the versions are those it was measured with.
        results["versions"], results["dirty"] = old["versions"], old["dirty"]
        results["load_after"], results["finished"] = old["load_after"], old["finished"]
    else:
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
    sys.exit(main())
