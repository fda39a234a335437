"""gateway.py - the gateway of the teams-gw cells (issue 29, item 4): Traefik
(the devcluster's build, build/bin/traefik) run as a process on the host
against a devcluster started with --gateway-domain, as bench/gateway_scale.sh
runs it. The devcluster makes the Gateway API CRDs, the GatewayClass
`traefik`, the Gateway kopc-gateway/ctf (listeners `tls` and `https` on
443 for *.DOMAIN) and its wildcard certificate; Traefik watches them with a
token of its own, programs the Gateway and writes each route's status
(Accepted, ResolvedRefs), which is what Running waits for in the gateway
mode, for ctf-operator and for the limit alike.

Fake nodes run no pods, so nothing is served or probed through the gateway:
the operator runs without --gateway-probe-address, and the figure ends at
the route accepted, not at the first byte through the gateway (the
real-node figures of docs/running-a-ctf.md cover that part).

Each cluster gets its own loopback address for Traefik's entry point (port
443: a Gateway listener attaches to the entry point of its port), so the
quick mode's spare cluster and the one measured never share one. The
process is stopped with its cluster (Cluster.stop, Spares.retire).
"""
import os
import random
import socket
import subprocess

from common import BIN, free_port, proc_cpu, wait_until

GATEWAY_DOMAIN = "ctf.test"


def _free_loopback_443():
    """A loopback address whose port 443 is free now."""
    for _ in range(50):
        addr = f"127.77.{random.randint(0, 255)}.{random.randint(1, 254)}"
        s = socket.socket()
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((addr, 443))
            return addr
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no loopback address with port 443 free for Traefik")


def start_traefik(c, timeout=120):
    """Run Traefik against cluster c (started with --gateway-domain) until
    c stops; returns once it has programmed the Gateway. c.traefik is the
    process (its CPU: traefik_cpu)."""
    c.kubectl("-n", "kopc-gateway", "create", "serviceaccount", "traefik-bench")
    c.kubectl("create", "clusterrolebinding", "traefik-bench", "--clusterrole=cluster-admin",
              "--serviceaccount=kopc-gateway:traefik-bench")
    token = c.kubectl("-n", "kopc-gateway", "create", "token", "traefik-bench",
                      "--duration=6h").strip()
    server = c.kubectl("config", "view", "--minify", "-o",
                       "jsonpath={.clusters[0].cluster.server}").strip()
    argv = [os.path.join(BIN, "traefik"),
            f"--entryPoints.websecure.address={_free_loopback_443()}:443",
            f"--entryPoints.traefik.address=127.0.0.1:{free_port()}",
            "--providers.kubernetesGateway=true",
            "--providers.kubernetesGateway.experimentalChannel=true",
            f"--providers.kubernetesGateway.endpoint={server}",
            f"--providers.kubernetesGateway.token={token}",
            f"--providers.kubernetesGateway.certAuthFilePath={os.path.join(c.dir, 'ca.crt')}",
            "--providers.kubernetesGateway.statusAddress.ip=127.0.0.1",
            "--global.checkNewVersion=false", "--global.sendAnonymousUsage=false",
            "--log.level=ERROR", "--log.noColor=true"]
    log = open(os.path.join(c.dir, "traefik.log"), "w")
    c.traefik = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    c.procs.append(c.traefik)
    def programmed():
        if c.traefik.poll() is not None:
            raise RuntimeError(f"Traefik exited with {c.traefik.returncode} (see {c.dir}/traefik.log)")
        r = subprocess.run([os.path.join(BIN, "kubectl"), "--kubeconfig", c.kubeconfig, "-n",
                            "kopc-gateway", "get", "gateway.gateway.networking.k8s.io", "ctf", "-o",
                            "jsonpath={.status.conditions[?(@.type==\"Programmed\")].status}"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return r.stdout.strip() == "True"
    wait_until(programmed, timeout, "Traefik did not program the Gateway", step=0.5)


def traefik_cpu(c):
    """Traefik's CPU seconds so far on cluster c (None without one)."""
    t = getattr(c, "traefik", None)
    return proc_cpu(t.pid) if t is not None and t.poll() is None else None
