"""report.py - the tables and the plot of a bench.py run (see bench.py).

write(out, results, write_doc) writes OUT/table.md and OUT/bench.png, and
with write_doc replaces the part of docs/benchmarks.md between
"<!-- bench:results:begin -->" and "<!-- bench:results:end -->" with the
table, and copies the plot to docs/benchmarks.png and the figures to
docs/benchmarks.json.
"""
import csv
import os
import shutil

import streams as streams_mod  # its source addresses, for the streams table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- bench:results:begin -->", "<!-- bench:results:end -->"
ORDER = ["limit", "kopc", "controller-runtime", "kopf"]


def fmt(v, digits=1):
    if v is None or v == "":
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def ratio(a, b, digits=2):
    if not a or not b:
        return "–"
    return f"{a / b:.{digits}f}"


SPREAD = ("converge_s", "cpu_ms_per_object", "peak_rss_mib")


def median(vals):
    vals = sorted(vals)
    k = len(vals)
    return None if not k else vals[k // 2] if k % 2 else (vals[k // 2 - 1] + vals[k // 2]) / 2


def find(results, workload, n, op, phase):
    """find merges the trials of one cell: every numeric figure (and latency
    percentile) is the median over the complete trials; "spread" holds the
    (min, max) of the figures in SPREAD, "trials" how many were complete. A
    cell with no complete trial returns its last failed one."""
    runs = [r for r in results["runs"] if r["workload"] == workload and r["n"] == n
            and r["operator"] == op and r["phase"] == phase]
    if not runs:
        return None
    good = [r for r in runs if r.get("done") == n]
    if not good:
        return runs[-1]
    merged = dict(good[0])
    for key, v in good[0].items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            vals = [r[key] for r in good if isinstance(r.get(key), (int, float))]
            merged[key] = median(vals)
    merged["latency_ms"] = {p: median([r["latency_ms"][p] for r in good
                                       if (r.get("latency_ms") or {}).get(p) is not None])
                            for p in ("p50", "p90", "p99", "max")}
    merged["spread"] = {k: (min(r[k] for r in good if r.get(k) is not None),
                            max(r[k] for r in good if r.get(k) is not None))
                        for k in SPREAD if any(r.get(k) is not None for r in good)}
    merged["trials"] = len(good)
    merged["noisy"] = any(r.get("noisy") for r in good)
    apis = [r["api"] for r in good if r.get("api")]
    if apis:
        merged["api"] = dict(apis[0])
        for name in ("kopc", "nginx"):
            merged["api"][name] = {k: median([a[name][k] for a in apis]) for k in apis[0][name]}
    for key in ("claim_ms", "flag_ms", "endpoint_ms"):  # per-team latencies (pool, realflag)
        lats = [r[key] for r in good if r.get(key)]
        if lats:
            merged[key] = {p: median([c[p] for c in lats if c.get(p) is not None])
                           for p in ("p50", "p99", "max")}
    strs = [r["streams"] for r in good if r.get("streams")]
    if strs:
        # Counts merge to their median; latencies (delivery_ms, answer_ms,
        # answer_to_event_ms: dicts of percentiles) percentile by percentile.
        merged["streams"] = {}
        for k, v in strs[0].items():
            if isinstance(v, dict):
                merged["streams"][k] = {
                    p: median([x[k][p] for x in strs if (x.get(k) or {}).get(p) is not None])
                    for p in v}
            else:
                merged["streams"][k] = median([x[k] for x in strs if x.get(k) is not None])
        merged["streams"]["trials"] = len(strs)
    return merged


# ---- paired ratios: trial i of one against trial i of the other -----------------

def runs_of(results, workload, n, op, phase):
    """The complete runs of one measurement by trial."""
    return {r.get("trial", 1): r for r in results["runs"]
            if r["workload"] == workload and r["n"] == n and r["operator"] == op
            and r["phase"] == phase and r.get("done") == n}


def paired(results, workload, n, a, b, value):
    """The ratio value(a's trial i) / value(b's trial i) over the trials both
    completed: {"median", "min", "max", "trials"}, or None. a and b are
    (operator, phase); value takes a run and gives a number or None."""
    ra, rb = runs_of(results, workload, n, *a), runs_of(results, workload, n, *b)
    ratios = []
    for t in sorted(set(ra) & set(rb)):
        x, y = value(ra[t]), value(rb[t])
        if x is not None and y:
            ratios.append(x / y)
    if not ratios:
        return None
    return {"median": median(ratios), "min": min(ratios), "max": max(ratios),
            "trials": len(ratios)}


def fmt_ratio(p, digits=2):
    """A paired ratio: the median, and (min–max) when more than one trial."""
    if not p:
        return "–"
    v = f"{p['median']:.{digits}f}"
    if p["trials"] > 1:
        v += f" ({p['min']:.{digits}f}–{p['max']:.{digits}f})"
    return v


def key_of(key):
    return lambda r: r.get(key)


def p99_of(r):
    """A run's p99 latency: a claim on the team's stream, the team's flag
    (realflag), else the loader's."""
    lat = r.get("claim_ms") or r.get("flag_ms") or r.get("latency_ms") or {}
    return lat.get("p99")


def p50_of(r):
    lat = r.get("claim_ms") or r.get("flag_ms") or r.get("latency_ms") or {}
    return lat.get("p50")


# The limit's phase against which an operator's phase is measured.
LIMIT_PHASE = {"warm": "limit", "cold": "limit", "limit": "limit", "burst": "burst",
               "claims-fresh": "claims-fresh", "claims-pool": "claims-pool", "expiry": "expiry",
               "rolling": "rolling",
               "realflag-fresh": "realflag-floor", "realflag-pool": "realflag-floor",
               "realflag-floor": "realflag-floor"}


def api_writes_per_object(results, r):
    """Writes per object as the apiserver counted them (apiserver_request_total,
    cluster.py ApiWrites): the writes to the workload's operator resources in
    the phase, less the harness's own, less the control plane's writes to
    them (Events about Deployments and Pods, the namespace controller's
    deletions), which the limit's run of the same phase gives: its count
    less the loader's own writes. For the limit itself: its count less the
    Events (no loader writes an Event), a check of the loader's own count."""
    if r.get("apiserver_op_writes") is None:
        return None
    if r["operator"] == "limit":
        if r["phase"] == "expiry":
            # The namespace controller's deletions cannot be told from the
            # loader's without an operator's run: the harness's own count.
            return r.get("own_writes", 0) / r["n"]
        return (r["apiserver_op_writes"] - (r.get("apiserver_events") or 0)) / r["n"]
    lim = runs_of(results, r["workload"], r["n"], "limit", LIMIT_PHASE.get(r["phase"], ""))
    lr = lim.get(r.get("trial", 1)) or (next(iter(lim.values())) if lim else None)
    control = 0
    if lr and lr.get("apiserver_op_writes") is not None and lr.get("own_writes") is not None:
        control = lr["apiserver_op_writes"] - lr["own_writes"]
    return (r["apiserver_op_writes"] - control) / r["n"]


def api_writes_median(results, workload, n, op, phase):
    vals = [api_writes_per_object(results, r)
            for r in runs_of(results, workload, n, op, phase).values()]
    vals = [v for v in vals if v is not None]
    return median(vals) if vals else None


def ratios(results):
    """Every headline ratio of the run as the median of paired per-trial
    ratios with its (min, max): {cell: {"kopc / peer": {figure: {...}}}}."""
    out = {}
    cells = sorted({(r["workload"], r["n"]) for r in results["runs"]})
    for workload, n in cells:
        cell = {}
        peers = [p for p in ORDER if p not in ("kopc", "limit")
                 if runs_of(results, workload, n, p, "warm")]
        for p in peers:
            cell[f"kopc / {p}"] = {
                label: paired(results, workload, n, ("kopc", phase), (p, phase), key_of(key))
                for label, key, phase in RATIO_ROWS}
            cell[f"kopc / {p}"]["writes per object (apiserver)"] = paired(
                results, workload, n, ("kopc", "warm"), (p, "warm"),
                lambda r: api_writes_per_object(results, r))
        lim = {}
        for phase, lphase, value, label in (
                ("warm", "limit", key_of("converge_s"), "time until all done"),
                ("burst", "burst", p99_of, "burst p99"),
                ("claims-fresh", "claims-fresh", p99_of, "claim p99, no pool"),
                ("claims-pool", "claims-pool", p99_of, "claim p99, warm pool"),
                ("claims-fresh", "claims-fresh", p50_of, "claim p50, no pool"),
                ("claims-pool", "claims-pool", p50_of, "claim p50, warm pool"),
                ("expiry", "expiry", key_of("converge_s"), "mass expiry, all namespaces gone"),
                ("rolling", "rolling", key_of("converge_s"),
                 "rolling update, all on the new generation"),
                ("rolling", "rolling", p99_of, "rolling update, p99 per instance"),
                ("realflag-fresh", "realflag-floor", p50_of, "PUT to own flag p50, no pool"),
                ("realflag-fresh", "realflag-floor", p99_of, "PUT to own flag p99, no pool"),
                ("realflag-pool", "realflag-floor", p99_of, "PUT to own flag p99, warm pool")):
            for op in [p for p in ORDER if p != "limit"]:
                pr = paired(results, workload, n, (op, phase), ("limit", lphase), value)
                if pr:
                    lim.setdefault(f"{op} / limit", {})[label] = pr
        cell.update(lim)
        if cell:
            out[f"{workload}-{n}"] = cell
    return out


RATIO_ROWS = [("peak RSS", "peak_rss_mib", "warm"), ("steady RSS", "steady_rss_mib", "warm"),
              ("PSS", "pss_mib", "warm"), ("writes per object", "writes_per_object", "warm"),
              ("CPU per object", "cpu_ms_per_object", "warm"),
              ("time until all done", "converge_s", "warm"),
              ("cold start", "cold_start_s", "cold")]


def with_spread(r, key, digits):
    """with_spread: the median, and (min–max) over the trials when there were several."""
    v = fmt(r.get(key), digits)
    lo_hi = r.get("spread", {}).get(key)
    if r.get("trials", 1) > 1 and lo_hi:
        v += f" ({lo_hi[0]:.{digits}f}–{lo_hi[1]:.{digits}f})"
    return v


def cell_trials(results, workload, n):
    """How many trials the cell workload-n had: the most of any operator and phase."""
    counts = {}
    for r in results["runs"]:
        if r["workload"] == workload and r["n"] == n:
            counts.setdefault((r["operator"], r["phase"]), set()).add(r.get("trial", 1))
    return max((len(t) for t in counts.values()), default=0)


def table(results):
    lines = []
    v = results["versions"]
    lines.append(f"Run {results['started']} – {results['finished']}"
                 f"{' (QUICK smoke run: numbers mean nothing)' if results['quick'] else ''}; "
                 f"load average (1/5/15 min) before {fmt_load(results['load_before'])}, "
                 f"after {fmt_load(results['load_after'])}.\n")
    before = [r["load_before"][0] for r in results["runs"] if r.get("load_before")]
    loads = [r["load_after"][0] for r in results["runs"] if r.get("load_after")]
    if before:
        noisy = sum(1 for r in results["runs"] if r.get("noisy"))
        lines.append(f"1-minute load average before each measurement: min {min(before):.2f}, "
                     f"median {median(before):.2f}, max {max(before):.2f}; each waited for "
                     f"{results.get('max_load', 2.5)} or less ({noisy} could not and "
                     f"{'are' if noisy != 1 else 'is'} marked noisy). After: min {min(loads):.2f}, "
                     f"median {median(loads):.2f}, max {max(loads):.2f} (a measurement alone "
                     f"makes about 2 on this machine).\n")
    sizes = sorted({(r["workload"], r["n"]) for r in results["runs"]},
                   key=lambda x: (WORKLOAD_ORDER.index(x[0]) if x[0] in WORKLOAD_ORDER
                                  else 9, x[1]))
    per_cell = {c: cell_trials(results, *c) for c in sizes}
    usual = max(set(per_cell.values()), key=list(per_cell.values()).count, default=1)
    lines.append(f"Each figure is the median of {usual} trials (unless a heading says "
                 f"otherwise), run interleaved and rotated: trial k starts with the k-th "
                 f"operator of the cell, so each runs first, in the middle and last alike "
                 f"(the order of every trial is in benchmarks.json, \"order\"); (min–max) gives "
                 f"the spread. Every ratio is the median of the per-trial paired ratios (kopc's "
                 f"trial i ÷ the other's trial i), with their (min–max). Writes per object: POST, "
                 f"PUT, PATCH and DELETE requests of the operator (its "
                 f"rest_client_requests_total; kopf has none), or of the loader doing the "
                 f"operator's work for the limit, divided by N; Events included. Writes per "
                 f"object (apiserver): the same counted by the apiserver "
                 f"(apiserver_request_total, scraped before and after the phase), every "
                 f"peer alike, kopf's progress annotations and Events included: the writes to "
                 f"the resources an operator of the workload writes, less the harness's own, "
                 f"less the control plane's writes to them as the limit's run of the same "
                 f"phase shows them; for the limit, its count less the control plane's "
                 f"Events (a check of the loader's own count).\n")
    by_phase = {}
    for r in results["runs"]:
        by_phase.setdefault(r.get("commit", v["kopc"]), set()).add(r["phase"])
    if len(by_phase) > 1:
        lines.append("Measured at more than one commit: " + "; ".join(
            f"{', '.join(sorted(ph))} at {c}" for c, ph in sorted(by_phase.items())) + ".\n")
    lines.append("| | version |\n|---|---|")
    for k, val in v.items():
        lines.append(f"| {k} | {val} |")
    lines.append("")
    for workload, n in sizes:
        if workload in ("teams", "teams-gw"):
            lines.append(claims_table(results, n, workload))
            continue
        if workload == "expiry":
            lines.append(expiry_table(results, n))
            continue
        if workload == "rolling":
            lines.append(rolling_table(results, n))
            continue
        if workload == "realflag":
            lines.append(realflag_table(results, n))
            continue
        what = "FlightTickets" if workload == "flighttickets" else "Challenges"
        k = per_cell[(workload, n)]
        lines.append(f"### {n:,} {what}" + (f" ({k} trial{'s' if k != 1 else ''})"
                                            if k != usual else "") + "\n")
        lines.append("| operator | all done (s) | × limit | p50 latency (ms) | p99 latency (ms) "
                     "| CPU (s) | CPU per object (ms) | reconciles | writes per object "
                     "| writes per object (apiserver) "
                     "| peak RSS (MiB) | steady RSS (MiB) | of it anon / file | PSS (MiB) "
                     "| cold start (s) | apiserver CPU (s) |")
        lines.append("|---|" + "---:|" * 15)
        limit = find(results, workload, n, "limit", "limit")
        for op in ORDER:
            if op == "limit":
                r = limit
                if not r:
                    continue
                if r.get("done") != n:
                    lines.append(f"| the limit | FAILED ({r.get('done')}/{n}) |" + " |" * 14)
                    continue
                lines.append(f"| the limit: loader alone | {with_spread(r, 'converge_s', 2)} | 1.00 "
                             f"| {fmt(r['latency_ms']['p50'], 0)} | {fmt(r['latency_ms']['p99'], 0)} "
                             f"| – | – | – | {fmt(r.get('writes_per_object'), 1)} "
                             f"| {fmt(api_writes_median(results, workload, n, 'limit', 'limit'), 1)} "
                             f"| – | – | – | – | – | {fmt(r.get('devcluster_cpu_s'))} |")
                continue
            w, c = find(results, workload, n, op, "warm"), find(results, workload, n, op, "cold")
            if not w:
                continue
            if w.get("done") != n:
                lines.append(f"| {op} | FAILED ({w.get('done')}/{n}) {w.get('error', '')[:80]} |"
                             + " |" * 14)
                continue
            lat = w.get("latency_ms", {})
            lines.append(
                f"| {op} | {with_spread(w, 'converge_s', 2)} "
                f"| {fmt_ratio(paired(results, workload, n, (op, 'warm'), ('limit', 'limit'), key_of('converge_s')))} "
                f"| {fmt(lat.get('p50'), 0)} | {fmt(lat.get('p99'), 0)} | {fmt(w.get('cpu_s'), 2)} "
                f"| {with_spread(w, 'cpu_ms_per_object', 3)} | {fmt(w.get('reconciles'))} "
                f"| {fmt(w.get('writes_per_object'), 1)} "
                f"| {fmt(api_writes_median(results, workload, n, op, 'warm'), 1)} "
                f"| {with_spread(w, 'peak_rss_mib', 1)} | {fmt(w.get('steady_rss_mib'))} "
                f"| {fmt(w.get('rss_anon_mib'))} / {fmt(w.get('rss_file_mib'))} "
                f"| {fmt(w.get('pss_mib'))} "
                f"| {fmt(c.get('cold_start_s') if c and c.get('done') == n else None, 2)} "
                f"| {fmt(w.get('devcluster_cpu_s'))} |")
        lines.append("")
        k = find(results, workload, n, "kopc", "warm")
        peers = [p for p in ("controller-runtime", "kopf") if find(results, workload, n, p, "warm")]
        if k and peers:
            lines.append("| ratio | " + " | ".join(f"kopc / {p}" for p in peers) + " | kopc / limit |")
            lines.append("|---|" + "---:|" * (len(peers) + 1))
            for label, key, phase in RATIO_ROWS + [("writes per object (apiserver)", None, "warm")]:
                value = key_of(key) if key else (lambda r: api_writes_per_object(results, r))
                cells = [fmt_ratio(paired(results, workload, n, ("kopc", phase), (p, phase), value))
                         for p in peers]
                lim = fmt_ratio(paired(results, workload, n, ("kopc", "warm"), ("limit", "limit"),
                                       value)) \
                    if key in ("converge_s", "writes_per_object", None) else "–"
                lines.append(f"| {label} | " + " | ".join(cells) + f" | {lim} |")
            lines.append("")
        bl, bk = find(results, workload, n, "limit", "burst"), find(results, workload, n, "kopc", "burst")
        if bl or bk:
            lines.append(f"The burst: {n:,} teams each ask for an instance within 10 s (kopc: "
                         f"`PUT /api/v1/teams/{{team}}/instances/bench` on its instance API; the "
                         f"limit: the loader creates each Challenge and does the operator's writes "
                         f"itself, paced alike). Latency: the request sent → Running seen by a "
                         f"watch.\n")
            lines.append("| | all done (s) | p50 (ms) | p99 (ms) | max (ms) | p99 × the limit's "
                         "| writes per object | writes per object (apiserver) |")
            lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
            for label, r in (("the limit: loader alone", bl), ("kopc", bk)):
                if not r:
                    continue
                if r.get("done") != n:
                    lines.append(f"| {label} | FAILED ({r.get('done')}/{n}) |" + " |" * 6)
                    continue
                lat = r.get("latency_ms", {})
                opname = "limit" if label.startswith("the limit") else "kopc"
                lines.append(f"| {label} | {with_spread(r, 'converge_s', 2)} | {fmt(lat.get('p50'), 0)} "
                             f"| {fmt(lat.get('p99'), 0)} | {fmt(lat.get('max'), 0)} "
                             f"| {fmt_ratio(paired(results, workload, n, (opname, 'burst'), ('limit', 'burst'), p99_of))} "
                             f"| {fmt(r.get('writes_per_object'), 1)} "
                             f"| {fmt(api_writes_median(results, workload, n, opname, 'burst'), 1)} |")
            lines.append("")
        tr = k and k.get("team_reads")
        if tr:
            lines.append(f"Team tokens: {tr['teams']:,.0f} teams each read their own instance "
                         f"with their own token (Secret ctf-team-tokens): {tr['own_token_ok']:,.0f} "
                         f"answered 200; with another team's token "
                         f"{fmt(tr.get('other_token_refused'), 0)} refused.\n")
        api = k and k.get("api")
        if api:
            lines.append(f"API read path (`GET /api/v1/teams/{{team}}/instances/bench`, each request "
                         f"a team drawn at random of {fmt(api.get('teams'), 0)} with its own token, "
                         f"{api['bytes']} bytes, wrk -t2 -c32, loopback, with {n:,} Challenges "
                         f"cached):\n")
            lines.append("| server | requests/s | p99 (ms) | non-2xx |")
            lines.append("|---|---:|---:|---:|")
            for name, label in (("kopc", "ctf-operator API"),
                                ("nginx", f"nginx, static file of {api['bytes']} bytes")):
                a = api[name]
                lines.append(f"| {label} | {a['rps']:,.0f} | {a['p99_ms']:.2f} | {a['non2xx']} |")
            lines.append(f"\nkopc / nginx: {api['kopc']['rps'] / api['nginx']['rps']:.2f} of the "
                         f"requests per second.\n")
        st = k and k.get("streams")
        if st:
            lines.append(streams_table(st))
    return "\n".join(lines) + "\n"


def claims_table(results, n, w="teams"):
    """The first minute of a CTF (a teams cell): N teams within 10 s, with
    and without a warm pool, each against its limit measured in the same
    run at the same arrival rate. w "teams-gw": the pooled claims in the
    gateway mode."""
    gw = w == "teams-gw"
    lines = [
        f"### {n:,} teams within 10 s" + (", the gateway mode" if gw else "") + "\n",
        f"kopc: every team holds its event stream open, then asks for an instance "
        f"(`PUT /api/v1/teams/{{team}}/instances/bench`) paced over 10 s; latency: the PUT sent "
        f"→ Running on that team's own stream. With a pool: spec.pool.min = {n:,}, every warm "
        f"instance Ready before the first request. The limit, at the same arrival rate: the "
        f"loader alone creates each Challenge and does an instance's writes (no pool), or a "
        f"claim's writes (a claim patch of a warm namespace and the status: with a pool); "
        f"latency: the create due → Running seen by a watch. Ratios: the median of per-trial "
        f"paired ratios (min–max). Control plane CPU per claim: the devcluster's process "
        f"(apiserver, etcd, controllers, fake nodes) over the burst ÷ N.\n" + (
            "\nThe gateway mode (`--gateway-domain`, Traefik as a process on the host, no "
            "probe address: fake nodes serve nothing): a claim also writes the team's TLSRoute, "
            "and Running (kopc's and the limit's) waits until Traefik has written the route "
            "Accepted and ResolvedRefs; the limit applies the same route after its claim patch. "
            "The figure ends at the route accepted, not at the first byte through the "
            "gateway.\n" if gw else ""),
        "| | Running | served from the pool | p50 (ms) | p99 (ms) | max (ms) "
        "| p50 × the limit's | p99 × the limit's | within 250 ms "
        "| writes per object (apiserver) "
        "| CPU per claim (ms) | control plane CPU per claim (ms) | passes per claim "
        "| pool warm-up (s) |" + (" Traefik CPU (s) |" if gw else ""),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        + ("---:|" if gw else "")]
    rows = (("the limit: an instance's writes", "limit", "claims-fresh"),
            ("kopc, no pool", "kopc", "claims-fresh"),
            ("the limit: a claim's writes", "limit", "claims-pool"),
            (f"kopc, warm pool of {n:,}", "kopc", "claims-pool"))
    for label, op, phase in rows:
        r = find(results, w, n, op, phase)
        if not r:
            continue
        if r.get("done") != n:
            lines.append(f"| {label} | FAILED ({r.get('done')}/{n}) {r.get('error', '')[:60]} |"
                         + " |" * 12)
            continue
        c = r.get("claim_ms") or r.get("latency_ms") or {}
        dc = r.get("devcluster_cpu_s")

        def vs_limit(value):
            if op == "limit":
                return "1.00"
            return fmt_ratio(paired(results, w, n, (op, phase), ("limit", phase), value))
        within = r.get("within_250ms")
        lines.append(
            f"| {label} | {r['done']:,.0f} | {fmt(r.get('served_from_pool'), 0)} "
            f"| {fmt(c.get('p50'), 0)} | {fmt(c.get('p99'), 0)} | {fmt(c.get('max'), 0)} "
            f"| {vs_limit(p50_of)} | {vs_limit(p99_of)} "
            f"| {fmt(within, 0)} | {fmt(api_writes_median(results, w, n, op, phase), 1)} "
            f"| {fmt(r.get('cpu_ms_per_object'), 2) if op != 'limit' else '–'} "
            f"| {fmt(dc * 1000 / n if dc is not None else None, 1)} "
            f"| {fmt(r.get('passes_per_claim'), 1) if op != 'limit' else '–'} "
            f"| {fmt(r.get('pool_warmup_s'), 0)} |"
            + (f" {fmt(r.get('traefik_cpu_s'), 1)} |" if gw else ""))
    lines.append("")
    return "\n".join(lines)


WORKLOAD_ORDER = ["flighttickets", "challenges", "teams", "teams-gw", "expiry", "rolling",
                  "realflag"]


def realflag_table(results, n):
    """On a real node (a realflag cell): N teams press Start together; the PUT
    -> the first byte of the team's own flag through its endpoint, with and
    without a warm pool, and the floor: bare pods of the same image."""
    w = "realflag"
    pool_r = find(results, w, n, "kopc", "realflag-pool") or {}
    lines = [
        f"### Real node: PUT to first flag byte, {n:,} teams at once\n",
        f"One real node (kubelet, containerd, runc, a CNI, kube-proxy; 110 pods at most: {n:,} "
        f"claimed instances, the {n:,} warm ones a pool refills with, and the node's own), the "
        f"sample TCP challenge (examples/challenges/greeter, 10m CPU and 16 MiB requested) with "
        f"a dynamic flag. {n:,} teams press Start together, each with its own token: "
        f"`PUT /api/v1/teams/{{team}}/instances/realflag`, then the team reads its instance until "
        f"the API reports an endpoint (a node port) and connects to it until the greeting "
        f"carries a flag. Latency: the PUT sent → the line with the team's own flag read (its "
        f"first byte and its last arrive in one segment). A flag that is not the team's "
        f"(another team's, a stale one) fails the team, never counts as served; a greeting with "
        f"no flag yet (a warm instance whose flag file the kubelet has not rewritten) and a "
        f"refused connection are counted and tried again. With a pool: spec.pool.min = {n:,}, "
        f"every warm instance Ready before the first PUT (warm-up "
        f"{fmt(pool_r.get('pool_warmup_s'), 0)} s). The floor, measured in the same run: {n:,} "
        f"bare pods of the same image, requests and hardening, each behind its own NodePort "
        f"Service, created together by the harness with no operator; create → the flag through "
        f"the node port; and before them one such pod alone, on the idle node. It is the floor of the no-pool figure (what the node takes to start a "
        f"container and kube-proxy to route to it; the {n:,} at once meet the kubelet's and "
        f"kube-proxy's batching in the same instant, so an operator's p99 can come out below "
        f"theirs); an instance adds a namespace, its quota, "
        f"network policies, a Deployment and the flag's Secret. A warm pool's floor is the "
        f"kubelet's rewrite of a running pod's flag file, not measured apart.\n",
        "| | own flag read | p50 (ms) | p99 (ms) | max (ms) | p50 × the floor's "
        "| p99 × the floor's | endpoint reported p50 (ms) | wrong flag | flagless greetings "
        "| refused connections | served from the pool |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, op, phase in ((f"the floor: {n:,} bare pods at once, no operator", "limit", "realflag-floor"),
                             ("kopc, no pool", "kopc", "realflag-fresh"),
                             (f"kopc, warm pool of {n:,}", "kopc", "realflag-pool")):
        r = find(results, w, n, op, phase)
        if not r:
            continue
        if r.get("done") != n:
            lines.append(f"| {label} | FAILED ({r.get('done')}/{n}) "
                         f"{(r.get('first_error') or r.get('error') or '')[:60]} |" + " |" * 10)
            continue
        c, e = r.get("flag_ms") or {}, r.get("endpoint_ms") or {}
        if op == "limit" and r.get("solo_ms") is not None:
            lines.append(f"| the floor: one bare pod alone, before the {n:,} | 1 "
                         f"| {fmt(r['solo_ms'], 0)} | | | | | | | | | – |")

        def vs(value):
            if op == "limit":
                return "1.00"
            return fmt_ratio(paired(results, w, n, (op, phase), ("limit", "realflag-floor"), value))
        lines.append(
            f"| {label} | {r['done']:,.0f} | {fmt(c.get('p50'), 0)} | {fmt(c.get('p99'), 0)} "
            f"| {fmt(c.get('max'), 0)} | {vs(p50_of)} | {vs(p99_of)} | {fmt(e.get('p50'), 0)} "
            f"| {fmt(r.get('wrong_flag'), 0)} | {fmt(r.get('flagless'), 0)} "
            f"| {fmt(r.get('refused'), 0)} "
            f"| {fmt(r.get('served_from_pool'), 0) if op != 'limit' else '–'} |")
    lines.append("")
    return "\n".join(lines)


def expiry_table(results, n):
    """Mass expiry (an expiry cell): N instances expiring within one minute."""
    w = "expiry"
    lines = [
        f"### Mass expiry: {n:,} instances expiring within one minute\n",
        f"{n:,} Running instances; each Challenge's expiry (spec.expiresAt) set so that they "
        f"expire one after another, evenly, within "
        f"{fmt((find(results, w, n, 'kopc', 'expiry') or {}).get('first_due_to_last_due_s'), 0)} s. "
        f"kopc deletes each expired Challenge and its finalizer the "
        "namespace; the limit: at each instance's expiry the harness deletes its Challenge and "
        "its namespace itself. All gone: the first expiry → the last instance namespace gone; "
        "per instance: its expiry → its namespace gone.\n",
        "| | namespaces gone | all gone (s) | × the limit's | p50 (ms) | p99 (ms) | max (ms) "
        "| writes per object (apiserver) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, op in (("the limit: deletes at expiry", "limit"), ("kopc", "kopc")):
        r = find(results, w, n, op, "expiry")
        if not r:
            continue
        if r.get("done") != n:
            lines.append(f"| {label} | FAILED ({r.get('done')}/{n}) {r.get('error', '')[:60]} |"
                         + " |" * 6)
            continue
        g = r.get("latency_ms") or {}
        lines.append(
            f"| {label} | {r['done']:,.0f} | {with_spread(r, 'converge_s', 1)} "
            f"| {fmt_ratio(paired(results, w, n, (op, 'expiry'), ('limit', 'expiry'), key_of('converge_s'))) if op != 'limit' else '1.00'} "
            f"| {fmt(g.get('p50'), 0)} | {fmt(g.get('p99'), 0)} | {fmt(g.get('max'), 0)} "
            f"| {fmt(api_writes_median(results, w, n, op, 'expiry'), 1)} |")
    lines.append("")
    return "\n".join(lines)


def rolling_table(results, n):
    """A live update (a rolling cell): N instances replaced, Rolling, 10 %."""
    w = "rolling"
    k = (find(results, w, n, "kopc", "rolling") or find(results, w, n, "limit", "rolling") or {})
    lines = [
        f"### A live update: {n:,} running instances, Rolling, maxUnavailable 10 %\n",
        f"{n:,} Running instances of a definition with spec.update Rolling, maxUnavailable 10 % "
        f"({fmt(k.get('max_allowed'), 0)} at once); then its pod template's image changes. kopc "
        "replaces them by its strategy; the limit: the harness alone patches each instance's "
        "Deployment (its image and generation annotation), at most as many in flight, the next "
        "as soon as a watch shows one rolled out and available, then the Challenge's status "
        "Running on the new generation. All done: the change → the last instance Running on the "
        "new generation with its Deployment rolled out; per instance: the change → done. "
        f"Unavailable: the instances whose Deployment is mid-replacement or unavailable, "
        f"sampled every {fmt(k.get('sample_s'), 2)} s from the harness's watches (the most at "
        "once; in brackets the most at any watch event). apiserver CPU: the devcluster's "
        "(etcd, apiserver, controllers, KWOK) over the same span.\n",
        "| | on the new generation | all done (s) | × the limit's | p50 (ms) | p99 (ms) "
        "| max unavailable (allowed) | CPU (s) | writes per object (apiserver) "
        "| apiserver CPU (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, op in (("the limit: the Deployment updates alone", "limit"), ("kopc", "kopc")):
        r = find(results, w, n, op, "rolling")
        if not r:
            continue
        if r.get("done") != n:
            lines.append(f"| {label} | FAILED ({r.get('done')}/{n}) {r.get('error', '')[:60]} |"
                         + " |" * 8)
            continue
        g = r.get("latency_ms") or {}
        # The most unavailable at once over every trial, not a median.
        most = {key: max((x.get(key) or 0 for x in runs_of(results, w, n, op, "rolling").values()),
                         default=None) for key in ("max_unavailable", "max_unavailable_events")}
        lines.append(
            f"| {label} | {fmt(r.get('on_new_generation'), 0)} | {with_spread(r, 'converge_s', 1)} "
            f"| {fmt_ratio(paired(results, w, n, (op, 'rolling'), ('limit', 'rolling'), key_of('converge_s'))) if op != 'limit' else '1.00'} "
            f"| {fmt(g.get('p50'), 0)} | {fmt(g.get('p99'), 0)} "
            f"| {fmt(most['max_unavailable'], 0)} [{fmt(most['max_unavailable_events'], 0)}] "
            f"({fmt(r.get('max_allowed'), 0)}) "
            f"| {fmt(r.get('cpu_s'), 1) if op != 'limit' else '–'} "
            f"| {fmt(api_writes_median(results, w, n, op, 'rolling'), 1)} "
            f"| {fmt(r.get('devcluster_cpu_s'), 1)} |")
    lines.append("")
    return "\n".join(lines)


def streams_table(st):
    """The event streams held after the warm run (bench/streams.py), medians over trials."""
    d = st["delivery_ms"]
    return "\n".join([
        f"Event streams: {st['streams']:,.0f} held open at once (one per team, from {streams_mod.ADDRESSES} loopback "
        f"addresses), then every team's instance renewed through the API, paced over 10 s; "
        f"delivery is the renewal sent → the team's stream shows the new expiry. Memory: the "
        f"operator's with every stream open and its snapshot sent, less before, per stream.\n",
        "| streams | renewed | delivered | within 1 s | delivery p50 (ms) | p99 (ms) | max (ms) "
        "| RSS per stream (KiB) | PSS per stream (KiB) | threads before → held |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        f"| {st['streams']:,.0f} | {st['renewed']:,.0f} | {st['delivered']:,.0f} "
        f"| {st['within_1s']:,.0f} | {fmt(d.get('p50'), 0)} | {fmt(d.get('p99'), 0)} "
        f"| {fmt(d.get('max'), 0)} | {fmt(st.get('rss_kib_per_stream'), 1)} "
        f"| {fmt(st.get('pss_kib_per_stream'), 1)} "
        f"| {st['threads_before']:.0f} → {st['threads_held']:.0f} |", ""])


def fmt_load(load):
    return "/".join(f"{x:.2f}" for x in load)


def read_csv(path):
    try:
        with open(path) as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def plot(out, results):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib missing: no plot"
    sizes = {}
    for r in results["runs"]:
        sizes[r["workload"]] = max(sizes.get(r["workload"], 0), r["n"])
    workloads = [w for w in ("flighttickets", "challenges") if w in sizes]
    if not workloads:  # a run of the teams or expiry cells only
        plot_claims(plt, out, results)
        return None
    fig, axes = plt.subplots(len(workloads), 2, figsize=(12, 4.5 * len(workloads)), squeeze=False)
    colors = {"limit": "grey", "kopc": "tab:blue", "controller-runtime": "tab:orange",
              "kopf": "tab:green"}
    for row, workload in enumerate(workloads):
        n = sizes[workload]
        tag = f"{workload}-{n}"
        ax = axes[row][0]
        for op in ORDER:
            d = os.path.join(out, tag, "trial-1", "limit" if op == "limit" else f"{op}-warm")
            lat = sorted(float(x["done_ms"]) - float(x["sent_ms"])
                         for x in read_csv(os.path.join(d, "latency.csv"))
                         if float(x["done_ms"] or 0) > 0 and float(x["sent_ms"] or 0) > 0)
            if not lat:
                continue
            pct = [100.0 * (i + 1) / len(lat) for i in range(len(lat))]
            ax.plot([v / 1000 for v in lat], pct, label="loader alone (the limit)" if op == "limit" else op,
                    color=colors[op])
        ax.set_xscale("log")
        ax.set_xlabel("seconds from create to status seen by a watch")
        ax.set_ylabel("percentile")
        ax.set_title(f"{n:,} {workload}: latency per object")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        ax = axes[row][1]
        for op in ORDER[1:]:
            rows = read_csv(os.path.join(out, tag, "trial-1", f"{op}-warm", "samples.csv"))
            pts = [(float(x["t_s"]), int(x["op_rss_kib"]) / 1024) for x in rows if x["op_rss_kib"]]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=op, color=colors[op])
        ax.set_xlabel("seconds since the operator started")
        ax.set_ylabel("RSS (MiB)")
        ax.set_title(f"{n:,} {workload}: operator RSS over time")
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "bench.png"), dpi=90)
    plt.close(fig)
    plot_scale(plt, out, results, colors)
    plot_claims(plt, out, results)
    return None


def plot_claims(plt, out, results):
    """bench-claims.png: claim p99 against the teams (the teams cells), for
    kopc with and without a pool and for the limit of each."""
    ns = sorted({r["n"] for r in results["runs"] if r["workload"] == "teams"})
    if not ns:
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for op, phase, label, style in (
            ("kopc", "claims-pool", "kopc, warm pool", ("tab:blue", "-")),
            ("limit", "claims-pool", "the limit: a claim's writes", ("grey", "-")),
            ("kopc", "claims-fresh", "kopc, no pool", ("tab:blue", "--")),
            ("limit", "claims-fresh", "the limit: an instance's writes", ("grey", "--"))):
        pts = []
        for n in ns:
            r = find(results, "teams", n, op, phase)
            if r and r.get("done") == n and p99_of(r):
                pts.append((n, p99_of(r)))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label,
                    color=style[0], linestyle=style[1])
    ax.axhline(250, color="tab:red", linestyle=":", linewidth=1, label="target: 250 ms")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(ns)  # the measured sizes, in plain numbers
    ax.set_xticklabels([f"{n:,}" for n in ns])
    ax.tick_params(axis="x", which="minor", bottom=False, labelbottom=False)
    ax.set_xlabel("teams asking within 10 s")
    ax.set_ylabel("claim p99 (ms): request → Running")
    ax.set_title("claim p99 against teams")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "bench-claims.png"), dpi=90)
    plt.close(fig)


def plot_scale(plt, out, results, colors):
    """bench-scale.png: the cost of one object against N, per workload: the
    operator's CPU and the time until all done per object (medians). Flat
    lines are linear growth."""
    workloads = [w for w in ("flighttickets", "challenges")
                 if len({r["n"] for r in results["runs"] if r["workload"] == w}) > 1]
    if not workloads:
        return
    fig, axes = plt.subplots(len(workloads), 2, figsize=(12, 4 * len(workloads)), squeeze=False)
    for row, workload in enumerate(workloads):
        ns = sorted({r["n"] for r in results["runs"] if r["workload"] == workload})
        for col, (key, label) in enumerate((("cpu_ms_per_object", "operator CPU per object (ms)"),
                                            ("converge_s", "time until all done per object (ms)"))):
            ax = axes[row][col]
            for op in ORDER:
                pts = []
                for n in ns:
                    r = find(results, workload, n, op, "limit" if op == "limit" else "warm")
                    if r and r.get("done") == n and r.get(key) is not None:
                        pts.append((n, r[key] * (1000 / n if key == "converge_s" else 1)))
                if pts and (op != "limit" or key == "converge_s"):
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=op,
                            color=colors[op])
            ax.set_xscale("log")
            ax.set_xlabel("N")
            ax.set_ylabel(label)
            ax.set_title(f"{workload}: {label} against N")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "bench-scale.png"), dpi=90)
    plt.close(fig)


def write(out, results, write_doc=False):
    # The headline ratios, paired per trial, go into results.json (and so
    # docs/benchmarks.json) beside the runs.
    results["ratios"] = ratios(results)
    import json
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    text = table(results)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text)
    note = plot(out, results)
    if note:
        print("bench:", note)
    if not write_doc:
        return
    doc = os.path.join(ROOT, "docs", "benchmarks.md")
    with open(doc) as f:
        cur = f.read()
    if BEGIN not in cur or END not in cur:
        print("bench: docs/benchmarks.md has no result markers; table left in", out)
        return
    head, rest = cur.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    with open(doc, "w") as f:
        f.write(head + BEGIN + "\n" + text + END + tail)
    shutil.copy(os.path.join(out, "results.json"), os.path.join(ROOT, "docs", "benchmarks.json"))
    if os.path.exists(os.path.join(out, "bench.png")):
        shutil.copy(os.path.join(out, "bench.png"), os.path.join(ROOT, "docs", "benchmarks.png"))
    if os.path.exists(os.path.join(out, "bench-claims.png")):
        shutil.copy(os.path.join(out, "bench-claims.png"),
                    os.path.join(ROOT, "docs", "benchmarks-claims.png"))
    if os.path.exists(os.path.join(out, "bench-scale.png")):
        shutil.copy(os.path.join(out, "bench-scale.png"),
                    os.path.join(ROOT, "docs", "benchmarks-scale.png"))
