#!/usr/bin/env python3
"""ctf_check.py - what the fault and security scenarios assert about the
cluster, computed from kubectl's JSON. Exit 0 when the check holds, else 1
with the reasons on stderr (the first few).

  converged [--expect FILE] [--absent FILE] [--pool DEFINITION=N]...
      Every Challenge in namespace ctf is Running with a namespace of its own
      (annotated with its UID and labelled with its name), no two share one,
      and every namespace the operator manages belongs to a live Challenge or
      is an unclaimed warm instance of a pool: no orphans, no duplicates.
      --expect: the Challenges are exactly the names in FILE. --absent: none
      of the names in FILE exists. --pool: DEFINITION's pool holds exactly N
      unclaimed warm instances (any other pool: none).

  cache --api URL --token TOKEN --teams FILE
      The operator's cache, as its instance API shows it (GET
      /api/v1/teams/T/instances reads the informer's cache), equals the
      server: for every team in FILE the same Challenges, with the same
      status and expiry.

  isolation
      Evaluates the NetworkPolicies of every instance namespace (see
      netpol_allows) for each pair of instance pods, and for DNS and an
      outside client: a pod may reach a pod of another instance never, a pod
      of its own instance always, kube-system DNS always, the internet only
      when its definition allows egress; an outside address reaches exposed
      ports only.

  rbac --requests FILE --role FILE... [--allow RESOURCE:VERB:WHY]...
      FILE holds the requests faultproxy.py recorded from the operator.
      Maps each to (group, resource[/subresource], verb) as the apiserver's
      authorizer does and compares with the rules of the given Role and
      ClusterRole manifests: every use must be granted, and every grant used
      or listed with --allow and a reason.
"""

import argparse
import ipaddress
import json
import os
import subprocess
import sys

MANAGED = "app.kubernetes.io/managed-by=kopc-ctf"


def kubectl(args, ns=None):
    cmd = [ARGS.kubectl, "--kubeconfig", ARGS.kubeconfig, "--request-timeout=30s"]
    if ns:
        cmd += ["-n", ns]
    out = subprocess.run(cmd + args + ["-o", "json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["items"]


def names_in(path):
    with open(path) as f:
        return {ln.strip() for ln in f if ln.strip()}


def report(problems):
    for p in problems[:15]:
        print("  " + p, file=sys.stderr)
    if len(problems) > 15:
        print(f"  ... and {len(problems) - 15} more", file=sys.stderr)
    return 1 if problems else 0


# ---- converged ------------------------------------------------------------------


def converged():
    chals = kubectl(["get", "challenges.ctf.kopc.io"], ns="ctf")
    nss = kubectl(["get", "namespaces", "-l", MANAGED])
    problems = []
    by_ns = {}
    names = set()
    for c in chals:
        name = c["metadata"]["name"]
        names.add(name)
        st = c.get("status") or {}
        if c["metadata"].get("deletionTimestamp"):
            problems.append(f"{name} is still being deleted ({st.get('currentStatus')})")
            continue
        if st.get("currentStatus") != "Running":
            problems.append(f"{name} is {st.get('currentStatus')} "
                            f"{st.get('reason') or ''} {st.get('message') or ''}".rstrip())
        ns = st.get("namespace")
        if not ns:
            problems.append(f"{name} has no namespace")
            continue
        if ns in by_ns:
            problems.append(f"{name} and {by_ns[ns]['metadata']['name']} share namespace {ns}")
        by_ns[ns] = c
    live = {}
    warm = {}
    for n in nss:
        nsname = n["metadata"]["name"]
        live[nsname] = n
        owner = by_ns.get(nsname)
        labels = n["metadata"].get("labels") or {}
        if n["metadata"].get("deletionTimestamp"):
            problems.append(f"namespace {nsname} is still being deleted")
        elif "ctf.kopc.io/pool" in labels and "ctf.kopc.io/challenge" not in labels:
            warm.setdefault(labels.get("ctf.kopc.io/definition"), []).append(nsname)
        elif owner is None:
            problems.append(f"namespace {nsname} is an orphan (no live Challenge has it)")
        else:
            uid = (n["metadata"].get("annotations") or {}).get("ctf.kopc.io/challenge-uid")
            if uid != owner["metadata"]["uid"]:
                problems.append(f"namespace {nsname} belongs to UID {uid}, "
                                f"not to {owner['metadata']['name']}")
            if labels.get("ctf.kopc.io/challenge") != owner["metadata"]["name"]:
                problems.append(f"namespace {nsname} is labelled for "
                                f"{labels.get('ctf.kopc.io/challenge')}, "
                                f"not {owner['metadata']['name']}")
    want_warm = dict(p.split("=", 1) for p in ARGS.pool)
    for d in sorted(set(warm) | set(want_warm)):
        got, want = len(warm.get(d, [])), int(want_warm.get(d, 0))
        if got != want:
            problems.append(f"the pool of {d} holds {got} unclaimed warm instances, not {want}")
    for nsname, c in by_ns.items():
        if nsname not in live:
            problems.append(f"{c['metadata']['name']}'s namespace {nsname} does not exist")
    if ARGS.expect:
        want = names_in(ARGS.expect)
        for n in sorted(want - names):
            problems.append(f"{n} was requested but does not exist")
        for n in sorted(names - want):
            problems.append(f"{n} exists but was not requested (or was deleted)")
    if ARGS.absent:
        for n in sorted(names_in(ARGS.absent) & names):
            problems.append(f"{n} was deleted but still exists")
    return report(problems)


# ---- cache ------------------------------------------------------------------------


def cache():
    import urllib.request
    server = {}
    for c in kubectl(["get", "challenges.ctf.kopc.io"], ns="ctf"):
        st = c.get("status") or {}
        server.setdefault(c["spec"]["team"], set()).add(
            (c["metadata"]["name"], st.get("currentStatus") or "None", st.get("expiresAt")))
    problems = []
    teams = sorted(names_in(ARGS.teams))
    for team in teams:
        req = urllib.request.Request(f"{ARGS.api}/api/v1/teams/{team}/instances",
                                     headers={"Authorization": f"Bearer {ARGS.token}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            body = json.load(r)
        cached = {(i["name"], i["status"], i["expiresAt"]) for i in body["instances"]}
        want = server.get(team, set())
        if cached != want:
            problems.append(f"team {team}: the cache has {sorted(cached)}, the server {sorted(want)}")
    print(f"cache: {len(teams)} teams compared", file=sys.stderr)
    return report(problems)


# ---- isolation ------------------------------------------------------------------


def matches(selector, labels):
    """matches applies a LabelSelector (matchLabels and matchExpressions)."""
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        k, op, vals = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(k) not in vals:
            return False
        if op == "NotIn" and labels.get(k) in vals:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


def peer_matches(peer, own_ns, other):
    """peer_matches: does a NetworkPolicyPeer of a policy in own_ns select
    other ({ip, ns, ns_labels, labels}; ns None for an outside address)?"""
    if "ipBlock" in peer:
        ip = ipaddress.ip_address(other["ip"])
        block = peer["ipBlock"]
        net = ipaddress.ip_network(block["cidr"])
        if ip.version != net.version or ip not in net:
            return False
        return not any(ip.version == ipaddress.ip_network(x).version and ip in ipaddress.ip_network(x)
                       for x in block.get("except") or [])
    if other["ns"] is None:
        return False  # pod and namespace selectors select pods only
    if "namespaceSelector" in peer:
        if not matches(peer["namespaceSelector"], other["ns_labels"]):
            return False
    elif other["ns"] != own_ns:
        return False
    if "podSelector" in peer:
        return matches(peer["podSelector"], other["labels"])
    return True


def port_matches(ports, port, proto):
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") == proto and (p.get("port") is None or p["port"] == port):
            return True
    return False


def direction_allows(policies, ns, pod_labels, kind, other, port, proto):
    """direction_allows applies the policies of ns to traffic of kind
    (Ingress or Egress) for a pod: isolated when some policy selects it for
    that kind, then allowed only when some rule of such a policy admits it."""
    selecting = [p for p in policies
                 if p["metadata"]["namespace"] == ns
                 and kind in (p["spec"].get("policyTypes") or ["Ingress"])
                 and matches(p["spec"].get("podSelector") or {}, pod_labels)]
    if not selecting:
        return True
    field, peers = ("ingress", "from") if kind == "Ingress" else ("egress", "to")
    for p in selecting:
        for rule in p["spec"].get(field) or []:
            if not port_matches(rule.get("ports"), port, proto):
                continue
            rp = rule.get(peers)
            if not rp or any(peer_matches(x, ns, other) for x in rp):
                return True
    return False


def netpol_allows(policies, src, dst, port, proto="TCP"):
    """A connection from src to dst (endpoint dicts) is allowed when src's
    egress (if src is a pod) and dst's ingress (if dst is a pod) allow it."""
    if src["ns"] is not None and not direction_allows(policies, src["ns"], src["labels"], "Egress",
                                                      dst, port, proto):
        return False
    if dst["ns"] is not None and not direction_allows(policies, dst["ns"], dst["labels"], "Ingress",
                                                      src, port, proto):
        return False
    return True


def isolation():
    nss = {n["metadata"]["name"]: n for n in kubectl(["get", "namespaces"])}
    managed = {n["metadata"]["name"] for n in kubectl(["get", "namespaces", "-l", MANAGED])}
    policies = kubectl(["get", "networkpolicies", "-A"])
    pods = []
    for p in kubectl(["get", "pods", "-A"]):
        ns = p["metadata"]["namespace"]
        if ns not in managed or not p.get("status", {}).get("podIP"):
            continue
        ports = [c["containerPort"] for ct in p["spec"]["containers"] for c in ct.get("ports") or []]
        pods.append({"name": f'{ns}/{p["metadata"]["name"]}', "ns": ns, "ip": p["status"]["podIP"],
                     "labels": p["metadata"].get("labels") or {},
                     "ns_labels": nss[ns]["metadata"].get("labels") or {}, "ports": ports or [80]})
    ingress_backends = {}
    for i in kubectl(["get", "ingresses", "-A"]):
        for r in i["spec"].get("rules") or []:
            for path in (r.get("http") or {}).get("paths") or []:
                name = path["backend"].get("service", {}).get("name")
                if name:
                    ingress_backends.setdefault(i["metadata"]["namespace"], set()).add(name)
    exposed = {}
    for s in kubectl(["get", "services", "-A"]):
        # An exposure's Service is a NodePort, or the ClusterIP an Ingress
        # routes to; the ClusterIP Service named after a pod is the
        # instance's own way to reach it by name, not an exposure.
        ingress_backed = s["metadata"]["name"] in ingress_backends.get(s["metadata"]["namespace"], set())
        if s["metadata"]["namespace"] in managed and (s["spec"].get("type") == "NodePort" or ingress_backed):
            sel = s["spec"].get("selector") or {}
            for sp in s["spec"].get("ports") or []:
                tp = sp.get("targetPort", sp["port"])
                exposed.setdefault(s["metadata"]["namespace"], []).append((sel, tp))
    problems = []
    checked = 0
    if len({p["ns"] for p in pods}) < 2:
        problems.append(f"need pods of two instances at least, have {len(pods)} pods")
    dns = {"ns": "kube-system", "ip": "10.96.0.10", "labels": {"k8s-app": "kube-dns"},
           "ns_labels": nss.get("kube-system", {}).get("metadata", {}).get("labels") or
           {"kubernetes.io/metadata.name": "kube-system"}}
    outside = {"ns": None, "ip": "203.0.113.7", "labels": {}, "ns_labels": {}}
    for src in pods:
        team = src["ns_labels"].get("ctf.kopc.io/team")
        for dst in pods:
            for port in dst["ports"]:
                checked += 1
                ok = netpol_allows(policies, src, dst, port)
                if dst["ns"] != src["ns"] and ok:
                    problems.append(f"{src['name']} (team {team}) can reach {dst['name']}:{port} "
                                    f"(team {dst['ns_labels'].get('ctf.kopc.io/team')})")
                if dst["ns"] == src["ns"] and not ok:
                    problems.append(f"{src['name']} cannot reach {dst['name']}:{port} of its own instance")
        for proto in ("UDP", "TCP"):
            checked += 1
            if not netpol_allows(policies, src, dns, 53, proto):
                problems.append(f"{src['name']} cannot resolve names (DNS {proto}/53)")
        internet = {"ns": None, "ip": "93.184.216.34", "labels": {}, "ns_labels": {}}
        want_net = src["ns_labels"].get("ctf.kopc.io/definition") in ARGS.egress_definitions
        checked += 1
        if netpol_allows(policies, src, internet, 443) != want_net:
            problems.append(f"{src['name']}: internet egress is {not want_net}, want {want_net}")
        for meta in ("169.254.169.254", "10.96.0.1", "192.168.1.1"):
            checked += 1
            if netpol_allows(policies, src, {"ns": None, "ip": meta, "labels": {}, "ns_labels": {}}, 443):
                problems.append(f"{src['name']} can reach private address {meta}")
        # From outside: exposed target ports only.
        open_ports = {tp for sel, tp in exposed.get(src["ns"], []) if matches({"matchLabels": sel}, src["labels"])}
        for port in set(src["ports"]) | {12345}:
            checked += 1
            ok = netpol_allows(policies, outside, src, port)
            if ok != (port in open_ports):
                problems.append(f"outside -> {src['name']}:{port}: allowed={ok}, exposed={port in open_ports}")
    print(f"isolation: {len(pods)} pods in {len({p['ns'] for p in pods})} instances, "
          f"{checked} connections evaluated", file=sys.stderr)
    return report(problems)


# ---- rbac -----------------------------------------------------------------------


def load_rules(paths):
    """Rules of every Role/ClusterRole document in the files (YAML via kubectl)."""
    rules = []
    for p in paths:
        out = subprocess.run([ARGS.kubectl, "--kubeconfig", ARGS.kubeconfig, "create",
                              "--dry-run=client", "-o", "json", "-f", p],
                             check=True, capture_output=True, text=True).stdout
        docs, dec, i = [], json.JSONDecoder(), 0
        while out[i:].strip():
            i += len(out[i:]) - len(out[i:].lstrip())
            d, n = dec.raw_decode(out, i)
            docs.append(d)
            i = n
        for d in docs:
            if d["kind"] in ("Role", "ClusterRole"):
                ns = d["metadata"].get("namespace") if d["kind"] == "Role" else None
                for r in d.get("rules") or []:
                    rules.append((ns, r))
    return rules


def request_attributes(r):
    """(group, resource, namespace, verbs) of a recorded request, as the
    apiserver's RequestInfoFactory derives them; None for non-resource URLs."""
    parts = [p for p in r["path"].split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        return None
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        if len(parts) < 3:
            return None  # discovery
        group, rest = parts[1], parts[3:]
    if not rest:
        return None
    ns = None
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
        ns, rest = rest[1], rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    m = r["method"]
    if r["watch"]:
        verbs = ["watch"]
    elif m == "GET":
        verbs = ["get" if name else "list"]
    elif m == "POST":
        verbs = ["create"]
    elif m == "PUT":
        verbs = ["update"]
    elif m == "PATCH":
        verbs = ["patch"]
        if "apply-patch" in r["content_type"]:
            verbs.append("create")  # an apply that creates is authorized as create too
    elif m == "DELETE":
        verbs = ["delete" if name else "deletecollection"]
    else:
        return None
    return group, resource + (f"/{sub}" if sub else ""), ns, verbs


def rbac():
    rules = load_rules(ARGS.role)
    used = {}
    with open(ARGS.requests) as f:
        for ln in f:
            r = json.loads(ln)
            if r.get("injected"):
                continue
            a = request_attributes(r)
            if a:
                g, res, ns, verbs = a
                for v in verbs:
                    used.setdefault((g, res, v), set()).add(ns or "")
    granted = {}
    for ns, rule in rules:
        for g in rule.get("apiGroups", []):
            for res in rule.get("resources", []):
                for v in rule.get("verbs", []):
                    granted.setdefault((g, res, v), set()).add(ns or "*")
    problems = []
    for (g, res, v), nss in sorted(used.items()):
        where = granted.get((g, res, v))
        if where is None:
            problems.append(f"used but not granted: {v} {res}.{g or 'core'}")
        elif "*" not in where and not nss <= where:
            problems.append(f"used outside the granted namespaces: {v} {res}.{g or 'core'} in {sorted(nss)}")
    allowed = {}
    for a in ARGS.allow:
        res, v, why = a.split(":", 2)
        allowed[(res, v)] = why
    for (g, res, v) in sorted(granted):
        if (g, res, v) not in used and (res, v) not in allowed:
            problems.append(f"granted but never used: {v} {res}.{g or 'core'}")
    print(f"rbac: {sum(1 for _ in open(ARGS.requests))} requests, {len(used)} (resource, verb) "
          f"pairs used, {len(granted)} granted", file=sys.stderr)
    for (g, res, v), nss in sorted(used.items()):
        print(f"  used: {v:8} {res}.{g or 'core'} in {','.join(sorted(n or '(cluster)' for n in nss))}",
              file=sys.stderr)
    return report(problems)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubectl", default=os.environ.get("KUBECTL", "kubectl"))
    ap.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG", ""))
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("converged")
    c.add_argument("--expect")
    c.add_argument("--absent")
    c.add_argument("--pool", action="append", default=[], metavar="DEFINITION=N")
    k = sub.add_parser("cache")
    k.add_argument("--api", required=True)
    k.add_argument("--token", required=True)
    k.add_argument("--teams", required=True)
    i = sub.add_parser("isolation")
    i.add_argument("--egress-definitions", default="", type=lambda s: set(s.split(",")),
                   help="definitions whose network.egress is Internet")
    r = sub.add_parser("rbac")
    r.add_argument("--requests", required=True)
    r.add_argument("--role", action="append", required=True)
    r.add_argument("--allow", action="append", default=[])
    ARGS = ap.parse_args()
    sys.exit({"converged": converged, "cache": cache, "isolation": isolation, "rbac": rbac}[ARGS.cmd]())


if __name__ == "__main__":
    main()
