"""workloads.py - what each workload's cluster holds before a measurement:
the setups (the CRDs, namespaces, the instance API's tokens, the definition,
one unmeasured warm-up write of the kind; on a real node, the greeter image
and the realflag definition's flag key), and the table WORKLOADS that says
for each workload its setup, its namespace, the kind of its objects and how
many nodes a cluster of N objects needs. OPERATOR_RESOURCES: the resources
an operator of each kind writes (the apiserver's count, cluster.ApiWrites).
"""
import json
import os
import subprocess
import time

from common import ADMIN_TOKEN, BIN, ROOT, log, run, team_token
from gateway import GATEWAY_DOMAIN, start_traefik

# The resources an operator of the workload (or the loader in its place)
# writes; the control plane's own writes to them (Events about Deployments
# and Pods, the namespace controller's deletions) are taken out with the
# limit's run of the same phase (report.py, api_writes_per_object).
OPERATOR_RESOURCES = {
    "flighttickets": {"flighttickets", "flighttickets/status", "configmaps", "events"},
    "challenges": {"challenges", "challenges/status", "namespaces", "secrets", "resourcequotas",
                   "limitranges", "networkpolicies", "deployments", "services", "ingresses",
                   "events",
                   # the gateway mode's routes (their status is the gateway's write, not counted)
                   "tlsroutes", "httproutes"},
}


def setup_tickets(c, n=0):
    c.kubectl("apply", "-f", os.path.join(ROOT, "examples/flightticket/crd.yaml"))
    wait_established(c, "flighttickets.flights.com")
    c.kubectl("create", "namespace", "bench")
    wait_served(c, "flighttickets")
    warm_up(c, {"apiVersion": "flights.com/v1", "kind": "FlightTicket",
                "metadata": {"name": "warm-up", "namespace": "default"},
                "spec": {"from": "A", "to": "B", "number": 1}})


def warm_up(c, obj):
    """One write of the kind, before anything is measured: the apiserver's
    first write of a new custom resource waits about 2 s for its schema
    models, which would otherwise land on whoever writes first."""
    c.kubectl("create", "-f", "-", stdin=json.dumps(obj))
    c.kubectl("delete", obj["kind"].lower() + "." + obj["apiVersion"].split("/")[0],
              "-n", obj["metadata"]["namespace"], obj["metadata"]["name"], "--wait=false")


def setup_challenges(c, n=1, definition="bench/challenge/definition.yaml"):
    c.kubectl("apply", "-k", os.path.join(ROOT, "config/crd"))
    for crd in ("challenges.ctf.kopc.io", "challengedefinitions.ctf.kopc.io"):
        wait_established(c, crd)
    for ns in ("kopc-system", "ctf"):
        c.kubectl("create", "namespace", ns)
    wait_served(c, "challengedefinitions")
    c.kubectl("apply", "-f", os.path.join(ROOT, definition))
    c.kubectl("-n", "kopc-system", "create", "secret", "generic", "ctf-api-admin",
              f"--from-literal=token={ADMIN_TOKEN}")
    # One token per team, as a CTF gives each team its own (docs/api.md): the
    # API read path and the teams' checks use them, not the admin token.
    c.kubectl("create", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "ctf-team-tokens", "namespace": "kopc-system"},
        "stringData": {"team-%05d" % i: team_token(i) for i in range(max(n, 1))}}))
    warm_up(c, {"apiVersion": "ctf.kopc.io/v1alpha1", "kind": "Challenge",
                "metadata": {"name": "warm-up", "namespace": "default"},
                "spec": {"definition": "none", "team": "none"}})


def setup_teams_gateway(c, n=1):
    """The teams-gw cells: the challenges' setup on a devcluster started with
    --gateway-domain (the Gateway API CRDs and the Gateway), and Traefik
    serving that Gateway (bench/gateway.py)."""
    setup_challenges(c, n)
    start_traefik(c)


def setup_rolling(c, n=1):
    """The Challenge cells' setup, and the definition's spec.update Rolling
    with maxUnavailable 10 % (bench/rolling.py), before any instance."""
    from rolling import update_strategy
    setup_challenges(c, n)
    c.kubectl("-n", "ctf", "patch", "chaldef", "bench", "--type", "merge", "-p",
              json.dumps({"spec": {"update": update_strategy()}}))


REALFLAG_KEY = "bench-realflag-hmac-key-" + "0123456789abcdef" * 2  # the dynamic flag's key


def setup_realflag(c, n=1):
    """A real node's cluster: the sample greeter image pushed to its registry
    (tools/images.sh, as the real-node e2e tests do), the CRDs, the tokens,
    the definition realflag and its flag key; the node's address in c.node_ip."""
    out = run([os.path.join(ROOT, "tools/images.sh"), c.dir, "greeter"])
    log("  image " + out.strip().splitlines()[-1])
    setup_challenges(c, n, "bench/challenge/realflag.yaml")
    c.kubectl("-n", "ctf", "create", "secret", "generic", "realflag-key",
              f"--from-literal=key={REALFLAG_KEY}")
    c.node_ip = c.kubectl("get", "node", "real-node-0", "-o",
                          "jsonpath={.status.addresses[?(@.type==\"InternalIP\")].address}").strip()
    if not c.node_ip:
        raise RuntimeError("the real node has no InternalIP")


def wait_established(c, crd):
    """kubectl wait fails instead of waiting while a new CRD has no conditions yet: poll."""
    for _ in range(120):
        r = subprocess.run([os.path.join(BIN, "kubectl"), "--kubeconfig", c.kubeconfig, "get", "crd",
                            crd, "-o", "jsonpath={.status.conditions[?(@.type==\"Established\")].status}"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if r.stdout.strip() == "True":
            return
        time.sleep(0.5)
    raise RuntimeError(f"CRD {crd} not established")


def wait_served(c, resource):
    for _ in range(120):
        r = subprocess.run([os.path.join(BIN, "kubectl"), "--kubeconfig", c.kubeconfig, "get",
                            resource, "-A"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode == 0:
            return
        time.sleep(0.5)
    raise RuntimeError(f"{resource} not served")


WORKLOADS = {
    "flighttickets": {"setup": setup_tickets, "namespace": "bench", "objects": "flighttickets",
                      "nodes": lambda n: 1},
    "challenges": {"setup": setup_challenges, "namespace": "ctf", "objects": "challenges",
                   "nodes": lambda n: 1 + (n + 99) // 100},  # KWOK nodes hold 110 pods
    # The first minute of a CTF: N teams within 10 s, on their own streams,
    # with a warm pool sized for them and without (issue 26).
    "teams": {"setup": setup_challenges, "namespace": "ctf", "objects": "challenges",
              "nodes": lambda n: 1 + (n + 99) // 100},
    # The same claims in ctf-operator's gateway mode (issue 29, item 4): a claim
    # writes the team's route, Running waits for the gateway (Traefik) to accept it.
    "teams-gw": {"setup": setup_teams_gateway, "namespace": "ctf", "objects": "challenges",
                 "nodes": lambda n: 1 + (n + 99) // 100, "gateway_domain": GATEWAY_DOMAIN},
    # Mass expiry: N instances expiring within EXPIRY_SPREAD_S.
    "expiry": {"setup": setup_challenges, "namespace": "ctf", "objects": "challenges",
               "nodes": lambda n: 1 + (n + 99) // 100},
    # A live update at scale: N Running instances, the definition's image
    # changed with spec.update Rolling, maxUnavailable 10 % (issue 30). A
    # replacement's new pod sits beside the old one until it is Ready: 10 %
    # more pods at most, which the nodes' 110 pods each leave room for.
    "rolling": {"setup": setup_rolling, "namespace": "ctf", "objects": "challenges",
                "nodes": lambda n: 1 + (n + 99) // 100},
    # On a real node: N teams press Start together; PUT -> their own flag
    # (issue 26). One real node (110 pods: N claimed instances and the N
    # warm ones the pool refills with), no fake ones.
    "realflag": {"setup": setup_realflag, "namespace": "ctf", "objects": "challenges",
                 "nodes": lambda n: 0, "real_nodes": 1},
}
