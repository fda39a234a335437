"""harness.py - what every measurement of bench.py shares besides its cluster
and its operator: the quiet gate (wait for a quiet machine right before the
measured phase, or mark the measurement noisy), the bench-loader's run, and
the run's pacing (a burst over 10 s; 2 s in the quick mode).
"""
import json
import os
import subprocess
import time

from common import BIN, log
from workloads import WORKLOADS

BURST_MS = 10000  # the burst scenario: N teams press Create within 10 s
# The quick mode (make test's e2e_bench_smoke) checks that every team is
# served, never how fast: its bursts and renewals are paced over 2 s instead
# of 10 (still spread, through the same code), and it does not idle before
# a measurement. The full run is unchanged.
QUICK_SPREAD_MS = 2000


def burst_ms(args):
    """How long a burst of this run is paced over, in ms."""
    return QUICK_SPREAD_MS if args.quick else BURST_MS


# The phases whose objects are created by the operator's API at a team's
# request: the create is the operator's write there, not the workload's input.
API_PHASES = {"burst", "claims-fresh", "claims-pool"}


def loader(cluster, workload, n, mode, out, threads, t0=None, timeout=1800, extra=()):
    objects = WORKLOADS[workload]["objects"]
    cmd = [os.path.join(BIN, "bench-loader"), "--kubeconfig", cluster.kubeconfig, "--workload",
           objects, "--count", str(n), "--namespace", WORKLOADS[workload]["namespace"],
           "--mode", mode, "--out", out, "--threads", str(threads), "--timeout", str(timeout),
           *extra]
    if objects == "challenges":
        cmd += ["--definition", "bench"]
    if t0 is not None:
        cmd += ["--t0-ms", f"{t0 * 1000:.3f}"]
    with open(os.path.join(out, f"loader-{mode}.log"), "w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    s["exit"] = r.returncode
    return s



def quiet_gate(args):
    """The quiet gate: with the cluster up (and the operator ready, when one
    runs), wait until the 1-minute load average is at most --max-load, right
    before the measured phase; the load it starts with is recorded."""
    load, quiet = wait_quiet(args.max_load, args.quiet_timeout)
    if not quiet:
        log(f"  load average {load[0]:.2f} above {args.max_load}: measured, marked noisy")
    args.gate = {"load_before": load, "noisy": not quiet}



def wait_quiet(max_load, timeout):
    """wait_quiet waits until the 1-minute load average is at most max_load
    (what a measurement alone leaves behind) or timeout seconds passed;
    returns the load average it starts the measurement with and whether it
    was quiet enough."""
    end = time.time() + timeout
    while True:
        load = os.getloadavg()
        if load[0] <= max_load:
            return load, True
        if time.time() >= end:
            return load, False
        time.sleep(5)

