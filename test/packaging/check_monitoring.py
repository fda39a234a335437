#!/usr/bin/env python3
"""check_monitoring.py - the alert rules and the Grafana dashboard ask for
series the operator really exports.

    check_monitoring.py --source DIR [FILE...]    against the names the code registers
    check_monitoring.py --metrics SCRAPE [FILE...] against a scrape of a running operator

FILEs default to config/monitoring/alerts.yaml and grafana-dashboard.json.
Both modes first check the files' shape: the rules file has groups of rules,
each alert with an expr, a severity label, a summary and a valid `for`; the
dashboard is JSON whose panels have unique ids and whose targets have exprs.
Then every metric name in every PromQL expression must be one the operator
exports. With --source, that is a name registered in DIR/src or
DIR/operators (a histogram's _bucket, _sum and _count included). With
--metrics, it is a series in the scrape; and every label matcher written on a
metric must name a label that metric has, and an equality matcher a value it
has (job and instance are the scraper's labels and are not checked); the
drop counters, which get series only when something is dropped, need only be
registered in the source. `up` is Prometheus' own series and is allowed.
"""
import argparse
import json
import pathlib
import re
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
DEFAULT_FILES = [ROOT / "config/monitoring/alerts.yaml", ROOT / "config/monitoring/grafana-dashboard.json"]
PROMETHEUS_OWN = {"up"}
# Families whose series appear only at their first event (a drop), so that a
# scrape of a healthy operator cannot show them: with --metrics they must be
# registered in the source instead.
LAZY = {"kop_workqueue_dropped_total", "kop_metrics_dropped_series_total"}
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "endpoint", "container"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "inf", "nan", "le"}
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")

errors = []


def err(where, msg):
    errors.append(f"{where}: {msg}")


# ---- the files' shape --------------------------------------------------------

def rules_exprs(path):
    doc = yaml.safe_load(path.read_text())
    out = []
    if not isinstance(doc, dict) or not isinstance(doc.get("groups"), list) or not doc["groups"]:
        err(path.name, "not a rules file: no groups")
        return out
    names = set()
    for g in doc["groups"]:
        if not g.get("name") or not isinstance(g.get("rules"), list) or not g["rules"]:
            err(path.name, f"group {g.get('name')!r} has no name or no rules")
            continue
        for r in g["rules"]:
            name = r.get("alert") or r.get("record")
            where = f"{path.name}: {name}"
            if not name or not isinstance(r.get("expr"), str):
                err(where, "a rule needs alert (or record) and expr")
                continue
            if r.get("alert"):
                if name in names:
                    err(where, "duplicate alert name")
                names.add(name)
                if r.get("labels", {}).get("severity") not in ("critical", "warning", "info"):
                    err(where, "labels.severity must be critical, warning or info")
                if not r.get("annotations", {}).get("summary"):
                    err(where, "annotations.summary is missing")
                if "for" in r and not DURATION.match(str(r["for"])):
                    err(where, f"bad for: {r['for']!r}")
            out.append((where, r["expr"]))
    return out


def dashboard_exprs(path):
    try:
        d = json.loads(path.read_text())
    except ValueError as e:
        err(path.name, f"not JSON: {e}")
        return []
    out, ids = [], set()
    if not d.get("title") or not d.get("uid") or not isinstance(d.get("panels"), list):
        err(path.name, "a dashboard needs title, uid and panels")
        return out

    def walk(panels):
        for p in panels:
            where = f"{path.name}: panel {p.get('title')!r}"
            if p.get("id") in ids:
                err(where, f"duplicate panel id {p.get('id')}")
            ids.add(p.get("id"))
            if "gridPos" not in p:
                err(where, "no gridPos")
            if p.get("type") != "row":
                if not p.get("targets"):
                    err(where, "no targets")
                for t in p.get("targets", []):
                    if not t.get("expr"):
                        err(where, "a target without expr")
                    else:
                        out.append((where, t["expr"]))
            walk(p.get("panels", []))

    walk(d["panels"])
    for v in d.get("templating", {}).get("list", []):
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = re.match(r"label_values\((.*),\s*(\w+)\)$", q or "")
        if m:
            out.append((f"{path.name}: variable {v.get('name')}", m.group(1)))
    return out


# ---- PromQL --------------------------------------------------------------------

MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


def selectors(expr):
    """[(metric, [(label, op, value)])] for every metric named in expr."""
    e = expr.replace("$__rate_interval", "5m").replace("$__interval", "1m")
    found = []
    # Metric selectors: a name, optionally with {matchers}.
    pos = 0
    clean = []
    for m in re.finditer(r"\{[^{}]*\}", e):
        clean.append(e[pos:m.start()])
        clean.append(" \x00%d " % len(found))
        found.append(m.group(0))
        pos = m.end()
    clean.append(e[pos:])
    e = "".join(clean)
    e = re.sub(r"\[[^\]]*\]", " ", e)                                    # ranges
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    out = []
    tokens = re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*|\x00(\d+)", e)
    prev = None
    for t in tokens:
        if t.group(0).startswith("\x00"):
            block = found[int(t.group(1))]
            if prev is not None:
                out[-1][1].extend(MATCHER.findall(block))
            prev = None
            continue
        name = t.group(0)
        rest = e[t.end():]
        if re.match(r"\s*\(", rest) or name in KEYWORDS or re.match(r"^\d", name):
            prev = None
            continue
        out.append((name, []))
        prev = name
        # Only a block directly after the name belongs to it.
        if not re.match(r"\s*\x00", rest):
            prev = None
    return out


# ---- what the operator exports -------------------------------------------------

def source_names(src):
    """The metric names registered in src/ and operators/ (kop_metrics_counter
    and _gauge with a literal name or a *_NAME macro, and a kop_histogram_opts
    whose .name is either), with the series names of histograms."""
    reg = re.compile(r'kop_metrics_(counter|gauge)\(\s*[^,"]*?,\s*(?:"(\w+)"|(\w+_NAME))'
                     r'|(kop_histogram_opts)\)?\s*(?:\w+\s*=\s*)?\{\s*\.name\s*=\s*(?:"(\w+)"|(\w+_NAME))')
    names = set()
    for d in ("src", "operators"):
        for f in pathlib.Path(src, d).rglob("*.c"):
            text = f.read_text(errors="replace")
            macros = dict(re.findall(r'#define\s+(\w+_NAME)\s+"(\w+)"', text))
            for kind, lit, macro, hist, hlit, hmacro in reg.findall(text):
                name = lit or hlit or macros.get(macro or hmacro)
                if not name:
                    continue
                names.add(name)
                if hist:
                    names.update({name + "_bucket", name + "_sum", name + "_count"})
    return names


def scrape_series(path):
    """{name: [labels dict]} of every sample in a text exposition."""
    series = {}
    for line in pathlib.Path(path).read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s", line)
        if not m:
            err(path, f"cannot parse sample line: {line}")
            continue
        labels = dict((k, v) for k, v in re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        series.setdefault(m.group(1), []).append(labels)
    return series


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--source", help="repo root: check names against what the code registers")
    g.add_argument("--metrics", help="a /metrics scrape: check names, labels and values")
    ap.add_argument("files", nargs="*", type=pathlib.Path)
    args = ap.parse_args()

    exprs = []
    for f in args.files or DEFAULT_FILES:
        exprs += dashboard_exprs(f) if f.suffix == ".json" else rules_exprs(f)
    if not exprs:
        err("files", "no expressions found")

    series = scrape_series(args.metrics) if args.metrics else None
    if series is not None:
        registered = source_names(ROOT)
        known = set(series) | (LAZY & registered)
    else:
        known = source_names(args.source)
    if not known:
        err("operator", "no metric names found")
    used = set()
    for where, expr in exprs:
        sels = selectors(expr)
        if not sels:
            err(where, f"no metric in {expr!r}")
        for name, matchers in sels:
            used.add(name)
            if name in PROMETHEUS_OWN:
                continue
            if name not in known:
                err(where, f"{name} is not exported by the operator")
                continue
            if series is None or name not in series:
                continue
            have = series[name]
            for label, op, value in matchers:
                if label in TARGET_LABELS:
                    continue
                if not any(label in s for s in have):
                    err(where, f"{name} has no label {label}")
                elif op == "=" and not any(s.get(label) == value for s in have):
                    err(where, f'{name} has no series with {label}="{value}"')
    for e in errors:
        print("FAIL:", e, file=sys.stderr)
    if errors:
        return 1
    mode = "the scrape" if series is not None else "the source"
    print(f"{len(exprs)} expressions, {len(used)} metrics, all in {mode}: "
          + ", ".join(sorted(used)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
