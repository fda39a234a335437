#!/usr/bin/env python3
"""upgrade_state.py - what install_upgrade_test.sh compares across an upgrade
and a rollback of the CTF operator.

  upgrade_state.py snapshot OUT    the CTF's state, as canonical JSON, in OUT
  upgrade_state.py diff A B        the differences between two snapshots
                                   (exit 1 and one line each when any)
  upgrade_state.py versions V...   every Challenge and ChallengeDefinition
                                   read at each served version V (v1alpha1,
                                   v1beta1) is the same object (exit 1 and
                                   what differs otherwise)

A snapshot holds, for every Challenge in the namespace ctf (read at
v1alpha1, the version every release serves): its uid, spec, status
(currentStatus, namespace, endpoints, startedAt, expiresAt); its instance
namespace's uid; every pod there with its uid, node, and each container's
restart count and container id (a restarted container changes both); the
uids of its Deployments, Services (with their node ports) and Secrets, and
a digest of each Secret's data (the flag lives there); and the flag the
instance itself says on its endpoint (a TCP connection to host:port, the
greeter's "Your flag: ..." line): what a team would see. An instance that
does not answer with a flag makes the snapshot fail: the comparison would
otherwise hide a dead instance behind another dead one.

Env: KUBECTL, KUBECONFIG.
"""
import hashlib
import json
import os
import socket
import subprocess
import sys
import time

GROUP = "ctf.kopc.io"


def kubectl(*args):
    out = subprocess.run([os.environ["KUBECTL"], "--kubeconfig", os.environ["KUBECONFIG"],
                          "--request-timeout=60s", *args],
                         check=True, capture_output=True, text=True)
    return out.stdout


def items(resource, *args):
    return json.loads(kubectl("get", resource, "-o", "json", *args))["items"]


def greeting_flag(address, deadline_s=30):
    """The flag the instance at host:port greets with; retried for a while
    (a kube-proxy rule being rewritten), then an error."""
    host, port = address.rsplit(":", 1)
    end = time.monotonic() + deadline_s
    last = None
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=3) as s:
                s.settimeout(3)
                data = b""
                while b"}" not in data and len(data) < 4096:
                    chunk = s.recv(512)
                    if not chunk:
                        break
                    data += chunk
            text = data.decode(errors="replace")
            i = text.find("Your flag: ")
            if i >= 0 and "}" in text[i:]:
                return text[i + len("Your flag: "):text.index("}", i) + 1]
            last = f"no flag in {text!r}"
        except OSError as e:
            last = str(e)
        if time.monotonic() > end:
            raise RuntimeError(f"{address}: {last}")
        time.sleep(0.5)


def endpoint_address(ep):
    """host:port of a status.endpoints entry (an address, or a url's authority)."""
    if ep.get("address"):
        return ep["address"]
    url = ep.get("url", "")
    return url.split("://", 1)[-1].split("/", 1)[0]


def snapshot():
    chals = items(f"challenges.v1alpha1.{GROUP}", "-n", "ctf")
    namespaces = {n["metadata"]["name"]: n for n in items("namespaces")}
    by_ns = {}
    for kind in ("pods", "deployments", "services", "secrets"):
        for o in items(kind, "-A"):
            by_ns.setdefault(o["metadata"]["namespace"], {}).setdefault(kind, []).append(o)
    state = {}
    for c in chals:
        st = c.get("status", {})
        ns = st.get("namespace", "")
        objs = by_ns.get(ns, {})
        inst = {
            "uid": c["metadata"]["uid"],
            "spec": c["spec"],
            "status": {k: st.get(k) for k in
                       ("currentStatus", "namespace", "endpoints", "startedAt", "expiresAt")},
            "namespaceUid": namespaces.get(ns, {}).get("metadata", {}).get("uid"),
            "pods": sorted(
                {"name": p["metadata"]["name"], "uid": p["metadata"]["uid"],
                 "node": p["spec"].get("nodeName"),
                 "containers": sorted(
                     [cs["name"], cs.get("restartCount"), cs.get("containerID")]
                     for cs in p.get("status", {}).get("containerStatuses", []))}
                for p in objs.get("pods", [])),
            "deployments": sorted([d["metadata"]["name"], d["metadata"]["uid"]]
                                  for d in objs.get("deployments", [])),
            "services": sorted([s["metadata"]["name"], s["metadata"]["uid"],
                                sorted(p.get("nodePort", 0) for p in s["spec"].get("ports", []))]
                               for s in objs.get("services", [])),
            "secrets": sorted([s["metadata"]["name"], s["metadata"]["uid"],
                               hashlib.sha256(json.dumps(s.get("data", {}), sort_keys=True)
                                              .encode()).hexdigest()]
                              for s in objs.get("secrets", [])),
        }
        eps = st.get("endpoints") or []
        if st.get("currentStatus") != "Running" or not eps:
            raise RuntimeError(f"{c['metadata']['name']}: {st.get('currentStatus')}, endpoints {eps}")
        inst["flags"] = [greeting_flag(endpoint_address(ep)) for ep in eps]
        state[c["metadata"]["name"]] = inst
    return state


def diff(a, b):
    bad = []
    for name in sorted(set(a) | set(b)):
        if name not in b:
            bad.append(f"{name}: lost")
        elif name not in a:
            bad.append(f"{name}: new")
        else:
            for key in sorted(set(a[name]) | set(b[name])):
                if a[name].get(key) != b[name].get(key):
                    bad.append(f"{name}: {key} {json.dumps(a[name].get(key))} -> "
                               f"{json.dumps(b[name].get(key))}")
    return bad


def beta_update(update):
    """v1alpha1's spec.update as v1beta1 writes it (docs/crd-versions.md)."""
    if not isinstance(update, dict) or "maxUnavailable" not in update:
        return update
    u = dict(update)
    u["rolling"] = {"maxUnavailable": u.pop("maxUnavailable")}
    return u


def versions(vs):
    bad = []
    for plural in ("challenges", "challengedefinitions"):
        read = {v: {(o["metadata"]["namespace"], o["metadata"]["name"]): o
                    for o in items(f"{plural}.{v}.{GROUP}", "-A")} for v in vs}
        first = vs[0]
        for v in vs:
            for key, o in read[v].items():
                if o["apiVersion"] != f"{GROUP}/{v}":
                    bad.append(f"{plural} {key} read at {v} says {o['apiVersion']}")
            if sorted(read[v]) != sorted(read[first]):
                bad.append(f"{plural}: {v} lists {sorted(read[v])}, {first} {sorted(read[first])}")
        for key, a in read[first].items():
            for v in vs[1:]:
                b = read[v].get(key)
                if b is None:
                    continue
                sa, sb = dict(a["spec"]), dict(b["spec"])
                if plural == "challengedefinitions":
                    # Compare in v1beta1's shape: the one field that moves.
                    if first == "v1alpha1":
                        sa["update"] = beta_update(sa.get("update"))
                    if v == "v1alpha1":
                        sb["update"] = beta_update(sb.get("update"))
                    sa = {k: x for k, x in sa.items() if x is not None}
                    sb = {k: x for k, x in sb.items() if x is not None}
                if sa != sb:
                    bad.append(f"{plural} {key}: spec at {first} {sa} != at {v} {sb}")
                for f in ("uid", "generation", "labels"):
                    if a["metadata"].get(f) != b["metadata"].get(f):
                        bad.append(f"{plural} {key}: metadata.{f} differs between {first} and {v}")
                if a.get("status") != b.get("status"):
                    bad.append(f"{plural} {key}: status differs between {first} and {v}")
        if not read[first]:
            bad.append(f"no {plural} at all")
    return bad


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "snapshot":
        with open(sys.argv[2], "w") as f:
            json.dump(snapshot(), f, indent=1, sort_keys=True)
        return 0
    if cmd == "diff":
        a, b = (json.load(open(p)) for p in sys.argv[2:4])
        bad = diff(a, b)
    elif cmd == "versions":
        bad = versions(sys.argv[2:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for line in bad[:40]:
        print(line)
    if len(bad) > 40:
        print(f"... and {len(bad) - 40} more")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
