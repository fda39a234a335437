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
    merged["latency_ms"] = {p: median([r["latency_ms"][p] for r in good if r.get("latency_ms")])
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
    claims = [r["claim_ms"] for r in good if r.get("claim_ms")]
    if claims:
        merged["claim_ms"] = {p: median([c[p] for c in claims if c.get(p) is not None])
                              for p in ("p50", "p99", "max")}
    strs = [r["streams"] for r in good if r.get("streams")]
    if strs:
        merged["streams"] = {k: median([x[k] for x in strs if x.get(k) is not None])
                             for k in strs[0] if k != "delivery_ms"}
        merged["streams"]["delivery_ms"] = {
            p: median([x["delivery_ms"][p] for x in strs if x["delivery_ms"].get(p) is not None])
            for p in ("p50", "p99", "max")}
        merged["streams"]["trials"] = len(strs)
    return merged


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
                   key=lambda x: (x[0] != "flighttickets", x[1]))
    per_cell = {c: cell_trials(results, *c) for c in sizes}
    usual = max(set(per_cell.values()), key=list(per_cell.values()).count, default=1)
    lines.append(f"Each figure is the median of {usual} trials (unless a heading says "
                 f"otherwise), run "
                 f"interleaved (the limit, then each operator, then again); (min–max) gives "
                 f"the spread. Writes per object: POST, PUT, PATCH and DELETE requests of the "
                 f"operator (its rest_client_requests_total), or of the loader doing the "
                 f"operator's work for the limit, divided by N; Events included.\n")
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
        what = "FlightTickets" if workload == "flighttickets" else "Challenges"
        k = per_cell[(workload, n)]
        lines.append(f"### {n:,} {what}" + (f" ({k} trial{'s' if k != 1 else ''})"
                                            if k != usual else "") + "\n")
        lines.append("| operator | all done (s) | × limit | p50 latency (ms) | p99 latency (ms) "
                     "| CPU (s) | CPU per object (ms) | reconciles | writes per object "
                     "| peak RSS (MiB) | steady RSS (MiB) | of it anon / file | PSS (MiB) "
                     "| cold start (s) | apiserver CPU (s) |")
        lines.append("|---|" + "---:|" * 14)
        limit = find(results, workload, n, "limit", "limit")
        for op in ORDER:
            if op == "limit":
                r = limit
                if not r:
                    continue
                if r.get("done") != n:
                    lines.append(f"| the limit | FAILED ({r.get('done')}/{n}) |" + " |" * 13)
                    continue
                lines.append(f"| the limit: loader alone | {with_spread(r, 'converge_s', 2)} | 1.00 "
                             f"| {fmt(r['latency_ms']['p50'], 0)} | {fmt(r['latency_ms']['p99'], 0)} "
                             f"| – | – | – | {fmt(r.get('writes_per_object'), 1)} | – | – | – | – "
                             f"| – | {fmt(r.get('devcluster_cpu_s'))} |")
                continue
            w, c = find(results, workload, n, op, "warm"), find(results, workload, n, op, "cold")
            if not w:
                continue
            if w.get("done") != n:
                lines.append(f"| {op} | FAILED ({w.get('done')}/{n}) {w.get('error', '')[:80]} |"
                             + " |" * 13)
                continue
            lat = w.get("latency_ms", {})
            lines.append(
                f"| {op} | {with_spread(w, 'converge_s', 2)} "
                f"| {ratio(w.get('converge_s'), limit and limit.get('converge_s'))} "
                f"| {fmt(lat.get('p50'), 0)} | {fmt(lat.get('p99'), 0)} | {fmt(w.get('cpu_s'), 2)} "
                f"| {with_spread(w, 'cpu_ms_per_object', 3)} | {fmt(w.get('reconciles'))} "
                f"| {fmt(w.get('writes_per_object'), 1)} "
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
            rows = [("peak RSS", "peak_rss_mib", "warm"), ("steady RSS", "steady_rss_mib", "warm"),
                    ("PSS", "pss_mib", "warm"), ("writes per object", "writes_per_object", "warm"),
                    ("CPU per object", "cpu_ms_per_object", "warm"),
                    ("time until all done", "converge_s", "warm"),
                    ("cold start", "cold_start_s", "cold")]
            for label, key, phase in rows:
                cells = []
                for p in peers:
                    pr = find(results, workload, n, p, phase)
                    kr = find(results, workload, n, "kopc", phase)
                    cells.append(ratio(kr and kr.get(key), pr and pr.get(key)))
                lim = ratio(k.get(key), limit and limit.get(key)) \
                    if key in ("converge_s", "writes_per_object") else "–"
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
                         "| writes per object |")
            lines.append("|---|---:|---:|---:|---:|---:|---:|")
            for label, r in (("the limit: loader alone", bl), ("kopc", bk)):
                if not r:
                    continue
                if r.get("done") != n:
                    lines.append(f"| {label} | FAILED ({r.get('done')}/{n}) |" + " |" * 5)
                    continue
                lat = r.get("latency_ms", {})
                lines.append(f"| {label} | {with_spread(r, 'converge_s', 2)} | {fmt(lat.get('p50'), 0)} "
                             f"| {fmt(lat.get('p99'), 0)} | {fmt(lat.get('max'), 0)} "
                             f"| {ratio(lat.get('p99'), bl and bl.get('latency_ms', {}).get('p99'))} "
                             f"| {fmt(r.get('writes_per_object'), 1)} |")
            lines.append("")
        cf = find(results, workload, n, "kopc", "claims-fresh")
        cp = find(results, workload, n, "kopc", "claims-pool")
        if cf or cp:
            lines.append(claims_table(n, cf, cp))
        api = k and k.get("api")
        if api:
            lines.append(f"API read path (`GET /api/v1/teams/team-00001/instances/bench`, "
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


def claims_table(n, fresh, pooled):
    """The burst as the teams see it (bench/pool.py), without and with a warm pool."""
    lines = [
        f"Claims: {n:,} teams each hold their event stream open, then ask for an instance "
        f"within 10 s; latency: the PUT sent → Running on that team's own stream. With a "
        f"pool: spec.pool.min = {n}, every warm instance Ready before the first request "
        f"(bench/pool.py).\n",
        "| kopc | Running | served from the pool | p50 (ms) | p99 (ms) | max (ms) "
        "| within 250 ms | pool warm-up (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, r in (("no pool", fresh), (f"warm pool of {n:,}", pooled)):
        if not r:
            continue
        if r.get("done") != n:
            lines.append(f"| {label} | FAILED ({r.get('done')}/{n}) |" + " |" * 6)
            continue
        c = r.get("claim_ms", {})
        lines.append(f"| {label} | {r['done']:,.0f} | {fmt(r.get('served_from_pool'), 0)} "
                     f"| {fmt(c.get('p50'), 0)} | {fmt(c.get('p99'), 0)} | {fmt(c.get('max'), 0)} "
                     f"| {r.get('within_250ms', 0):,.0f} | {fmt(r.get('pool_warmup_s'), 0)} |")
    lines.append("")
    return "\n".join(lines)


def streams_table(st):
    """The event streams held after the warm run (bench/streams.py), medians over trials."""
    d = st["delivery_ms"]
    return "\n".join([
        f"Event streams: {st['streams']:,.0f} held open at once (one per team, from 20 loopback "
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
    return None


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
    if os.path.exists(os.path.join(out, "bench-scale.png")):
        shutil.copy(os.path.join(out, "bench-scale.png"),
                    os.path.join(ROOT, "docs", "benchmarks-scale.png"))
