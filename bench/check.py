#!/usr/bin/env python3
"""check.py RESULTS_DIR [WORKLOAD...] - assert that a bench.py run produced sane output
(bench/smoke_test.sh): every operator reconciled every object in every
phase with no failed write; each measured run left a non-empty samples.csv
(with operator rows) and, where the loader times it, a latency.csv with one
row per object; its writes per object were counted by the operator (the Go
and C ones) and by the apiserver (every peer, kopf included), and the
limit's apiserver count agrees with the loader's own; every measurement was
gated after its cluster came up and has its place in its trial's rotated
order; kopc's event streams each showed their team's renewal, and every team
read its instance with its own token and was refused another's; in the teams
cells every team saw Running on its stream (each served from the warm pool
in the pooled runs, kopc's and the limit's alike) and kopc's Challenge
controller made at most 4 passes per claim from the pool; in the expiry cells every
instance namespace went (and every Challenge, with kopc); in the rolling
cells every instance ended Running on the definition's new generation with
its Deployment's new template rolled out, and the instances unavailable at
once (sampled, at every watch event, and kopc's Updating) never exceeded
maxUnavailable; in the realflag
cells (a real node; not in the quick run) every team read its own flag
through its endpoint (flag.csv: one row per team, none with another team's
or a stale flag), every team served from the pool in the pooled run and none
in the other; the table and the plots exist. Timing is never asserted. WORKLOAD...: check a run of those
cells only (e.g. realflag); by default every cell of the quick run must be
there."""
import csv
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402  (the apiserver-side writes per object, as the tables show them)

out = sys.argv[1]
fails = []
MAX_PASSES_PER_CLAIM = 4
with open(os.path.join(out, "results.json")) as f:
    results = json.load(f)
want = {("flighttickets", op, p) for op, p in (("limit", "limit"), ("kopc", "warm"),
                                                 ("controller-runtime", "warm"), ("kopf", "warm"))}
want |= {("challenges", op, p) for op, p in (("limit", "limit"), ("kopc", "warm"),
                                               ("controller-runtime", "warm"), ("limit", "burst"),
                                               ("kopc", "burst"))}
want |= {("teams", op, p) for op in ("limit", "kopc") for p in ("claims-fresh", "claims-pool")}
want |= {("expiry", op, "expiry") for op in ("limit", "kopc")}
want |= {("rolling", op, "rolling") for op in ("limit", "kopc")}
seen = set()
for r in results["runs"]:
    seen.add((r["workload"], r["operator"], r["phase"]))
    name = f"{r['workload']}-{r['n']} {r['operator']} {r['phase']}"
    if r.get("done") != r["n"] or r.get("errors"):
        fails.append(f"{name}: {r.get('done')}/{r['n']} done, {r.get('errors')} errors {r.get('error', '')}")
        continue
    # The quiet gate ran inside the measurement, once its cluster was up.
    if r.get("not_gated") or not r.get("load_before"):
        fails.append(f"{name}: not gated after its cluster came up")
    order = results.get("order", {}).get(f"{r['workload']}-{r['n']}", {}).get(str(r.get("trial", 1)))
    if not order or r.get("order") is None or order[r["order"] - 1] != r["operator"]:
        fails.append(f"{name}: no place in its trial's order ({order}, {r.get('order')})")
    d = os.path.join(out, f"{r['workload']}-{r['n']}", f"trial-{r.get('trial', 1)}",
                     "limit" if r["phase"] == "limit" else f"{r['operator']}-{r['phase']}")
    with open(os.path.join(d, "samples.csv")) as f:
        rows = list(csv.DictReader(f))
    if not rows or (r["operator"] != "limit" and not any(x["op_rss_kib"] for x in rows)):
        fails.append(f"{name}: samples.csv empty")
    # Writes counted from the apiserver's side, for every peer and phase but the
    # cold start (whose operator may find its work done in part).
    api = report.api_writes_per_object(results, r)
    if r["phase"] != "cold" and not (api or 0) >= 1:
        fails.append(f"{name}: no apiserver-side writes per object ({api}, "
                     f"{r.get('apiserver_writes')})")
    if r["operator"] == "limit" and r.get("own_writes") is not None and api is not None \
            and abs(api - r["own_writes"] / r["n"]) > 0.05 * r["own_writes"] / r["n"] + 0.01:
        fails.append(f"{name}: the apiserver counted {api:.2f} writes per object, the loader "
                     f"{r['own_writes'] / r['n']:.2f}")
    if r["phase"].startswith("claims"):
        # Every team saw Running; with a pool sized for the burst, every one of them was
        # served from it (kopc's warm instances, the limit's warm namespaces).
        want_pool = r["n"] if r["phase"] == "claims-pool" else 0
        if (r["operator"] == "kopc" or want_pool) and r.get("served_from_pool") != want_pool:
            fails.append(f"{name}: {r.get('served_from_pool')} served from the pool, not {want_pool}")
        if r["operator"] == "kopc" and r.get("accepted") != r["n"]:
            fails.append(f"{name}: {r.get('accepted')} of {r['n']} requests accepted")
        # A claim from the pool is one or two passes (the create, its namespace's claim
        # label; 2.0-2.4 measured at 1,000); 5-8 meant status writes waking Challenges
        # again (issue 26). A fresh instance's passes follow its children's progress.
        passes = r.get("passes_per_claim")
        if r["operator"] == "kopc" and r["phase"] == "claims-pool" and (
                passes is None or passes > MAX_PASSES_PER_CLAIM):
            fails.append(f"{name}: {passes} Challenge passes per claim, more than "
                         f"{MAX_PASSES_PER_CLAIM}")
        continue
    if r["workload"] == "realflag":
        with open(os.path.join(d, "flag.csv")) as f:
            teams = list(csv.DictReader(f))
        if len(teams) != r["n"] or any(not x["flag_ms"] or float(x["flag_ms"]) <= 0 or x["error"]
                                       for x in teams):
            fails.append(f"{name}: flag.csv lacks teams or holds a failed one")
        if r.get("wrong_flag") != 0 or any(x["wrong_flag"] != "0" for x in teams):
            fails.append(f"{name}: {r.get('wrong_flag')} greetings with a flag not the team's")
        if r["operator"] == "limit" and not (r.get("solo_ms") or 0) > 0:
            fails.append(f"{name}: no figure of the floor's pod alone")
        if r["operator"] == "kopc":
            want_pool = r["n"] if r["phase"] == "realflag-pool" else 0
            if r.get("served_from_pool") != want_pool:
                fails.append(f"{name}: {r.get('served_from_pool')} served from the pool, "
                             f"not {want_pool}")
        continue
    if r["phase"] == "expiry":
        if r["operator"] == "kopc" and r.get("challenges_left") != 0:
            fails.append(f"{name}: {r.get('challenges_left')} Challenges left after expiry")
        if not r.get("converge_s"):
            fails.append(f"{name}: no time until all gone")
        continue
    if r["phase"] == "rolling":
        # A live update: every instance on the new generation, every Deployment with the
        # new template rolled out, and never more than maxUnavailable replaced at once
        # (sampled, and at every watch event), kopc's Updating Challenges included.
        if r.get("on_new_generation") != r["n"] or r.get("deployments_updated") != r["n"]:
            fails.append(f"{name}: {r.get('on_new_generation')} on the new generation, "
                         f"{r.get('deployments_updated')} Deployments updated, of {r['n']}")
        allowed = r.get("max_allowed")
        most = [r.get(k) for k in ("max_unavailable", "max_unavailable_events", "max_updating")]
        if not allowed or any(m is None or m > allowed for m in most):
            fails.append(f"{name}: at most {allowed} unavailable at once, seen {most} "
                         "(sampled, events, Updating)")
        if not r.get("max_unavailable") or not r.get("samples"):
            fails.append(f"{name}: no instance seen unavailable ({r.get('samples')} samples)")
        if not r.get("converge_s"):
            fails.append(f"{name}: no time until all done")
        continue
    with open(os.path.join(d, "latency.csv")) as f:
        lat = list(csv.DictReader(f))
    if len(lat) != r["n"] or any(float(x["done_ms"]) <= 0 for x in lat):
        fails.append(f"{name}: latency.csv lacks objects")
    if r["phase"] == "warm" and not (r.get("peak_rss_mib") and r.get("cpu_s") is not None):
        fails.append(f"{name}: no RSS or CPU figures")
    # Requests per object: from each Go or C operator's rest_client_requests_total, and
    # the loader's own count for the limit; each must have written something per object.
    if (r["phase"] == "limit" or (r["phase"] == "warm" and r["operator"] != "kopf")) \
            and not (r.get("writes_per_object") or 0) >= 1:
        fails.append(f"{name}: no writes per object counted ({r.get('writes_per_object')})")
    if r["phase"] == "warm" and not r.get("pss_mib"):
        fails.append(f"{name}: no PSS")
    if r["phase"] == "warm" and r["workload"] == "challenges" and r["operator"] == "kopc":
        # Every stream opened, saw its team's snapshot and then its renewal.
        st = r.get("streams") or {}
        if not (st.get("streams") == r["n"] and st.get("renewed") == r["n"]
                and st.get("delivered") == r["n"]):
            fails.append(f"{name}: event streams {st.get('streams')} held, {st.get('renewed')} "
                         f"renewed, {st.get('delivered')} delivered of {r['n']}")
        # Every team read its own instance with its own token, and not another's.
        tr = r.get("team_reads") or {}
        if not (tr.get("teams") == r["n"] and tr.get("own_token_ok") == r["n"]
                and tr.get("other_token_refused") == r["n"]):
            fails.append(f"{name}: team tokens {tr}")
only = set(sys.argv[2:])
for w in sorted(x for x in want - seen if not only or x[0] in only):
    fails.append(f"{' '.join(w)}: not run")
if not results.get("ratios"):
    fails.append("results.json: no paired ratios")
# The plots of the cells the run holds (a run of the realflag cells alone has none).
kinds = {r["workload"] for r in results["runs"]}
plots = ["table.md"] + (["bench.png"] if kinds & {"flighttickets", "challenges"} else []) \
    + (["bench-claims.png"] if kinds & {"flighttickets", "challenges", "teams"} else [])
for f in plots:
    p = os.path.join(out, f)
    if not os.path.exists(p) or not os.path.getsize(p):
        fails.append(f"{f} missing or empty")
for f in fails:
    print("FAIL:", f)
bad = {f.split(":")[0] for f in fails}
ok = sum(1 for r in results["runs"]
         if "%s-%s %s %s" % (r["workload"], r["n"], r["operator"], r["phase"]) not in bad)
print(f"{ok} passed, {len(fails)} failed")
sys.exit(1 if fails else 0)
