#!/usr/bin/env python3
"""check.py RESULTS_DIR - assert that a bench.py run produced sane output
(bench/smoke_test.sh): every operator reconciled every object in every
phase with no failed write, each measured run left a non-empty samples.csv
(with operator rows) and a latency.csv with one row per object, its writes
per object and PSS were counted, kopc's event streams each showed their
team's renewal, every team of the claims runs saw Running on its stream (all
served from the warm pool in the pooled run), and the table and the plot
exist. Timing is never asserted."""
import csv
import json
import os
import sys

out = sys.argv[1]
fails = []
with open(os.path.join(out, "results.json")) as f:
    results = json.load(f)
want = {("flighttickets", op) for op in ("limit", "kopc", "controller-runtime", "kopf")}
want |= {("challenges", op) for op in ("limit", "kopc", "controller-runtime")}
want |= {("challenges", op, "burst") for op in ("limit", "kopc")}  # the burst scenario
want |= {("challenges", "kopc", p) for p in ("claims-fresh", "claims-pool")}  # on the streams
seen = set()
for r in results["runs"]:
    if r["phase"] in ("burst", "claims-fresh", "claims-pool"):
        seen.add((r["workload"], r["operator"], r["phase"]))
    name = f"{r['workload']}-{r['n']} {r['operator']} {r['phase']}"
    seen.add((r["workload"], r["operator"]))
    if r.get("done") != r["n"] or r.get("errors"):
        fails.append(f"{name}: {r.get('done')}/{r['n']} done, {r.get('errors')} errors {r.get('error', '')}")
        continue
    d = os.path.join(out, f"{r['workload']}-{r['n']}", f"trial-{r.get('trial', 1)}",
                     "limit" if r["phase"] == "limit" else f"{r['operator']}-{r['phase']}")
    with open(os.path.join(d, "samples.csv")) as f:
        rows = list(csv.DictReader(f))
    if not rows or (r["operator"] != "limit" and not any(x["op_rss_kib"] for x in rows)):
        fails.append(f"{name}: samples.csv empty")
    if r["phase"].startswith("claims"):
        # Every team saw Running on its own stream; with a pool sized for the burst, every
        # one of them was served from it.
        want_pool = r["n"] if r["phase"] == "claims-pool" else 0
        if r.get("served_from_pool") != want_pool:
            fails.append(f"{name}: {r.get('served_from_pool')} served from the pool, not {want_pool}")
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
for w in sorted(want - seen):
    fails.append(f"{' '.join(w)}: not run")
for f in ("table.md", "bench.png"):
    if not os.path.getsize(os.path.join(out, f)):
        fails.append(f"{f} empty")
for f in fails:
    print("FAIL:", f)
bad = {f.split(":")[0] for f in fails}
ok = sum(1 for r in results["runs"]
         if "%s-%s %s %s" % (r["workload"], r["n"], r["operator"], r["phase"]) not in bad)
print(f"{ok} passed, {len(fails)} failed")
sys.exit(1 if fails else 0)
