"""challenges.py - the burst of the challenges cells: the start of a CTF, N
teams each ask ctf-operator's instance API (or the Go peer's) for an
instance, paced over harness.BURST_MS; create -> Running per team, as the
team sees it (the bench-loader's api mode). The cells' warm, cold and limit
phases are bench/converge.py's.
"""
import os

from cluster import ApiWrites, fresh_cluster
from common import ADMIN_TOKEN, proc_cpu, writes_of
from harness import burst_ms, loader, quiet_gate
from operators import measured_operator


def measure_burst(args, op, workload, n, out):
    """The start of a CTF: N teams each ask the instance API for an instance,
    paced over BURST_MS; create -> Running per team, as the team sees it."""
    os.makedirs(out, exist_ok=True)
    c = fresh_cluster(args, workload, n, "burst")
    with measured_operator(op, c, out, n, 0 if args.quick else 2) as run:
        pid = run.pid
        quiet_gate(args)
        writes = ApiWrites(c, workload)
        cpu0 = proc_cpu(pid)
        s = loader(c, workload, n, "api", out, args.threads,
                   extra=("--spread-ms", str(burst_ms(args)), "--api", f"http://127.0.0.1:{op.api_port}",
                          "--api-token", ADMIN_TOKEN))
        s["cpu_s"] = proc_cpu(pid) - cpu0
        s.update(writes.done(0))
        by_method = op.requests()
        s["writes_per_object"] = writes_of(by_method) / n if by_method else None
        run.stop()
        s["operator_exit"] = op.proc.returncode
        return s
