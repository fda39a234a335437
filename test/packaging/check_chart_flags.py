#!/usr/bin/env python3
"""check_chart_flags.py - the Helm chart offers every gateway flag the CTF
operator has, rendered without a cluster (helm template):

  - the operator's gateway flags are the `--gateway*` lines of its usage
    text (operators/ctf/main.c), so a flag added there is known here at once;
  - SAMPLE below sets every value of the chart's operator.gateway (and the
    check fails when values.yaml has a key SAMPLE does not set, so a new
    value cannot be left out of it); rendered with it, the operator's
    container gets every one of those flags, each followed by a value
    (not another flag), and no --gateway* flag the operator does not know;
  - a flag the operator has and the chart cannot pass fails the check,
    naming the flag;
  - the probe's CA: from a ConfigMap or a Secret, mounted read-only at the
    directory whose file --gateway-probe-ca names; none by default (the
    system store); off without the gateway mode.

Usage: check_chart_flags.py SRC HELM
"""
import re
import subprocess
import sys

import yaml

SRC, HELM = sys.argv[1:3]
failures = []

# Every value of operator.gateway set, as an operator of the gateway mode would.
SAMPLE = {
    "domain": "ctf.example.org",
    "ref": "gw-ns/gw-name",
    "tlsListener": "tls-x",
    "httpsListener": "https-x",
    "port": 8443,
    "connectAddress": "203.0.113.7",
    "podNamespace": "traefik",
    "podSelector": "app.kubernetes.io/name=traefik",
    "probeAddress": "traefik.traefik.svc:443",
    "probeCA": {"configMap": "gateway-ca", "secret": "", "key": "bundle.pem"},
    "keySecret": "my-host-key",
}


def fail(msg):
    failures.append(msg)


def operator_gateway_flags():
    """The --gateway* flags of ctf-operator's usage text."""
    text = open(f"{SRC}/operators/ctf/main.c").read()
    usage = text[text.index("usage_text[]"):]
    usage = usage[:usage.index('";\n')]
    return sorted(set(re.findall(r'"\s+(--gateway[a-z-]*)\b', usage)))


def render(values):
    """The operator container's args and the pod spec of the chart rendered with values."""
    args = [HELM, "template", "t", f"{SRC}/charts/kopc-ctf", "-n", "kopc-system", "-f", "-"]
    r = subprocess.run(args, input=yaml.safe_dump(values), capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: helm template: {r.stderr.strip()}")
    for doc in yaml.safe_load_all(r.stdout):
        if doc and doc.get("kind") == "Deployment":
            pod = doc["spec"]["template"]["spec"]
            c = [c for c in pod["containers"] if c["name"] == "operator"][0]
            return c["args"], pod, c
    raise SystemExit("FAIL: no Deployment rendered")


def flag_values(args):
    """{flag: value} of the --gateway* flags in args; a flag followed by
    another flag (or by nothing) maps to None."""
    out = {}
    for i, a in enumerate(args):
        if a.startswith("--gateway"):
            v = args[i + 1] if i + 1 < len(args) else None
            out[a] = None if v is None or v.startswith("--") else v
    return out


flags = operator_gateway_flags()
if len(flags) < 10:
    fail(f"only {flags} read from operators/ctf/main.c's usage text")

defaults = yaml.safe_load(open(f"{SRC}/charts/kopc-ctf/values.yaml"))["operator"]["gateway"]
missing = sorted(set(defaults) - set(SAMPLE)) + sorted(
    f"probeCA.{k}" for k in set(defaults.get("probeCA") or {}) - set(SAMPLE["probeCA"]))
if missing:
    fail(f"values.yaml's operator.gateway has {missing}, which SAMPLE here does not set")

args, pod, container = render({"operator": {"gateway": SAMPLE}})
got = flag_values(args)
for f in flags:
    if f not in got:
        fail(f"ctf-operator has {f} but the chart passes no value for it "
             f"(add one under operator.gateway in values.yaml and templates/deployment.yaml)")
    elif got[f] is None:
        fail(f"the chart passes {f} without a value: {args}")
for f in got:
    if f not in flags:
        fail(f"the chart passes {f}, which ctf-operator does not have")
want = {"--gateway-domain": "ctf.example.org", "--gateway": "gw-ns/gw-name", "--gateway-port": "8443",
        "--gateway-connect-address": "203.0.113.7", "--gateway-probe-address": "traefik.traefik.svc:443",
        "--gateway-probe-ca": "/etc/kopc/gateway-ca/bundle.pem", "--gateway-key-secret": "my-host-key"}
for f, v in want.items():
    if got.get(f) != v:
        fail(f"{f} is {got.get(f)!r}, not {v!r}")

# The CA's file is where the flag says, from the ConfigMap, read-only.
mounts = {m["name"]: m for m in container.get("volumeMounts", [])}
vols = {v["name"]: v for v in pod.get("volumes", [])}
m, v = mounts.get("gateway-ca"), vols.get("gateway-ca")
if not m or m["mountPath"] != "/etc/kopc/gateway-ca" or not m.get("readOnly"):
    fail(f"the gateway CA is not mounted read-only at /etc/kopc/gateway-ca: {container.get('volumeMounts')}")
if not v or v.get("configMap", {}).get("name") != "gateway-ca" or \
        v["configMap"].get("items") != [{"key": "bundle.pem", "path": "bundle.pem"}]:
    fail(f"the gateway CA volume is not the ConfigMap gateway-ca's bundle.pem: {v}")

# From a Secret instead.
secret_ca = dict(SAMPLE, probeCA={"configMap": "", "secret": "gw-ca-secret", "key": "ca.crt"})
args, pod, _ = render({"operator": {"gateway": secret_ca}})
v = {v["name"]: v for v in pod.get("volumes", [])}.get("gateway-ca")
if not v or v.get("secret", {}).get("secretName") != "gw-ca-secret" or \
        flag_values(args).get("--gateway-probe-ca") != "/etc/kopc/gateway-ca/ca.crt":
    fail(f"probeCA.secret does not mount the Secret's ca.crt for --gateway-probe-ca: {v}")

# By default: the system store (no flag, no volume); without the domain no gateway flag at all.
args, pod, _ = render({"operator": {"gateway": {"domain": "ctf.example.org"}}})
if "--gateway-probe-ca" in args or "gateway-ca" in {v["name"] for v in pod.get("volumes", [])}:
    fail("the chart's defaults pass --gateway-probe-ca or mount a CA")
args, _, _ = render({})
if any(a.startswith("--gateway") for a in args):
    fail(f"the gateway mode is off by default, yet: {[a for a in args if a.startswith('--gateway')]}")

for f in failures:
    print("FAIL:", f)
if failures:
    sys.exit(1)
print(f"the chart passes all {len(flags)} gateway flags of ctf-operator: {' '.join(flags)}")
