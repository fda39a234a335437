"""converge.py - N objects created, the operator converges them: the limit,
warm and cold phases of the flighttickets and challenges cells (the limit
also of the teams cells' claims).

  limit  the loader alone does the operator's writes itself;
  warm   the operator ready, the loader creates the N objects and watches
         their status; after it, on ctf-operator, the teams' reads
         (bench/api.py) and the event streams (bench/streams.py);
  cold   the N objects first, then the operator starts.

Each runs on a fresh cluster in the frame operators.measured_operator.
"""
import os
import statistics
import time

import api
import streams
from cluster import ApiWrites, fresh_cluster
from common import proc_cpu, proc_pss_kib, proc_status, team_token, writes_of
from gateway import traefik_cpu
from harness import API_PHASES, QUICK_SPREAD_MS, loader, quiet_gate
from operators import Profile, measured_operator, reconciles_of, requests_of
from pool import make_warm_instances


def measure_limit(args, workload, n, out, extra=(), phase="limit"):
    """The loader alone doing the operator's writes (the limit) on a fresh
    cluster; phase names the operator phase it is the limit of."""
    os.makedirs(out, exist_ok=True)
    c = fresh_cluster(args, workload, n, "limit")
    with measured_operator(None, c, out, n, start=False) as run:
        if "--claim" in extra:  # a warm pool to claim from, as kopc's
            gw = extra[extra.index("--gateway-domain"):][:2] if "--gateway-domain" in extra else ()
            make_warm_instances(c, workload, n, out, args.threads, gateway=tuple(gw))
        quiet_gate(args)
        writes = ApiWrites(c, workload)
        run.start()
        dc0, tr0 = proc_cpu(c.pid), traefik_cpu(c)
        dc_prof = Profile(args, None, c.pid, out)  # --perf devcluster
        s = loader(c, workload, n, "alone", out, args.threads, extra=extra)
        dc1, tr1 = proc_cpu(c.pid), traefik_cpu(c)
        dc_prof.stop()
        if dc_prof.proc:
            s["profiled"] = True
        if tr0 is not None and tr1 is not None:
            s["traefik_cpu_s"] = tr1 - tr0
        run.stop()
        # In an API phase the create is the operator's write (a team's request).
        s.update(writes.done(0 if phase in API_PHASES else n))
        s["own_writes"] = s.get("operator_writes", 0) + (n if phase in API_PHASES else 0)
        s["devcluster_cpu_s"] = dc1 - dc0
        s["writes_per_object"] = s.get("operator_writes", 0) / n
        if "--claim" in extra:
            s["served_from_pool"] = len(c.kubectl(
                "get", "ns", "-l", "ctf.kopc.io/pool,ctf.kopc.io/challenge", "-o", "name").split())
        return s


def stats_after(rows, t_from, t_to):
    vals = [r[2] for r in rows if t_from <= r[0] <= t_to and r[2]]
    return statistics.median(vals) if vals else None


def measure_warm(args, op, workload, n, out):
    os.makedirs(out, exist_ok=True)
    c = fresh_cluster(args, workload, n, "warm")
    with measured_operator(op, c, out, n, 0 if args.quick else 2) as run:
        pid = run.pid
        quiet_gate(args)
        writes = ApiWrites(c, workload)
        cpu0, dc0 = proc_cpu(pid), proc_cpu(c.pid)
        prof = Profile(args, op, pid, out)
        dc_prof = Profile(args, None, c.pid, out)  # --perf devcluster
        s = loader(c, workload, n, "operator", out, args.threads)
        cpu1, dc1 = proc_cpu(pid), proc_cpu(c.pid)
        s.update(writes.done(n))  # the loader's creates are the input, not the operator's
        prof.stop()
        dc_prof.stop()
        if prof.proc or dc_prof.proc:
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
            s["team_reads"] = api.team_reads(op, min(n, api.MAX_TOKEN_TEAMS))
            if args.api:
                s["api"] = api.measure_api(op, out, min(n, api.MAX_TOKEN_TEAMS))
        if workload == "challenges" and op.name == "kopc":
            s["streams"] = streams.measure(pid, op.api_port, team_token,  # each team its own
                                           min(n, streams.MAX_STREAMS), out,
                                           spread_ms=QUICK_SPREAD_MS if args.quick else streams.RENEW_MS)
        run.stop()
        if reconciles is None and op.name == "kopf":
            with open(os.path.join(out, "operator.log")) as f:
                reconciles = sum(1 for line in f if "succeeded" in line and "Handler" in line)
        s.update({
            "ready_s": run.t_ready - op.t_start,
            "cpu_s": cpu1 - cpu0,
            "cpu_ms_per_object": (cpu1 - cpu0) * 1000 / n,
            "reconciles": reconciles,
            "devcluster_cpu_s": dc1 - dc0,
            "peak_rss_mib": hwm / 1024 if hwm else None,
            "steady_rss_mib": (stats_after(run.sampler.rows, t_done - op.t_start + 1,
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


def measure_cold(args, op, workload, n, out):
    os.makedirs(out, exist_ok=True)
    c = fresh_cluster(args, workload, n, "cold")
    with measured_operator(op, c, out, n, start=False) as run:
        pre = loader(c, workload, n, "create", out, args.threads)
        if pre["errors"]:
            raise RuntimeError(f"cold start: {pre['errors']} creates failed")
        quiet_gate(args)
        writes = ApiWrites(c, workload)
        pid = run.start(ready=False)  # timed from the process's start, not from ready
        s = loader(c, workload, n, "wait", out, 1, t0=op.t_start)
        cpu = proc_cpu(pid)
        s.update(writes.done(0))  # the creates came before the count began
        s["reconciles"] = op.reconciles(os.path.join(out, "metrics.txt"))
        hwm = proc_status(pid).get("VmHWM")
        run.stop()
        s.update({"cpu_s": cpu, "peak_rss_mib": hwm / 1024 if hwm else None,
                  "cold_start_s": s["converge_s"], "operator_exit": op.proc.returncode})
        return s
