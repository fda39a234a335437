"""operators.py - the operators under test and one measured run of one:
Operator (start, ready, /metrics, stop) and the five of the benchmark
(operators()), the Sampler of CPU and RSS, Profile (perf over the loader's
run), and measured_operator, the one frame of every measurement:

    c = fresh_cluster(args, workload, n, "warm")
    with measured_operator(op, c, out, n, settle_s) as run:
        ... the load, the figures (run.pid, run.t_ready, run.sampler) ...
        run.stop()  # the operator, then the sampler, before the last figures

On every path out of the block, the operator is killed if it still runs,
the sampler is stopped and the cluster is stopped (Cluster.stop: in the
quick mode, retired to Spares), in that order. start=False leaves the start
to the block (run.start(), e.g. the cold start after the creates); op None
is a limit's run: the sampler alone, on the devcluster.
"""
import contextlib
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request

from common import BIN, PEERS, ROOT, VENV, free_port, proc_cpu, proc_status

def reconciles_of(text, controller=None):
    """controller_runtime_reconcile_total of a /metrics text, summed (over one
    controller's results only, when named); None without one."""
    if text is None:
        return None
    label = f'controller="{controller}"' if controller else ""
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("controller_runtime_reconcile_total{") and label in line))


def requests_of(text):
    """Requests to the apiserver by method from a /metrics text's
    rest_client_requests_total (client-go's metric, which libkop exports
    too); None when it has none (kopf)."""
    by = {}
    for line in (text or "").splitlines():
        if line.startswith("rest_client_requests_total{"):
            m = re.search(r'method="([A-Z]+)"', line)
            if m:
                by[m.group(1)] = by.get(m.group(1), 0) + float(line.rsplit(" ", 1)[1])
    return by or None


class Sampler(threading.Thread):
    """Samples the operator's and the devcluster's CPU and RSS every 200 ms."""

    def __init__(self, path, op_pid, dc_pid, t0):
        super().__init__(daemon=True)
        self.path, self.op_pid, self.dc_pid, self.t0 = path, op_pid, dc_pid, t0
        self.stopped = threading.Event()
        self.rows = []

    def run(self):
        with open(self.path, "w") as f:
            f.write("t_s,op_cpu_s,op_rss_kib,dc_cpu_s,dc_rss_kib\n")
            while not self.stopped.is_set():
                t = time.time() - self.t0
                oc = proc_cpu(self.op_pid) if self.op_pid else None
                orss = proc_status(self.op_pid).get("VmRSS") if self.op_pid else None
                dc = proc_cpu(self.dc_pid)
                drss = proc_status(self.dc_pid).get("VmRSS")
                row = (t, oc, orss, dc, drss)
                self.rows.append(row)
                f.write(",".join("" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))
                                 for v in row) + "\n")
                f.flush()
                self.stopped.wait(0.2)

    def stop(self):
        self.stopped.set()
        self.join()


class Operator:
    """How to start one operator and see that it is ready."""

    def __init__(self, name, label, workload, argv, ready_path, metrics_path=None,
                 metrics_on_probe_port=False, api=False):
        self.name, self.label, self.workload, self.api = name, label, workload, api
        self.argv, self.ready_path, self.metrics_path = argv, ready_path, metrics_path
        self.metrics_on_probe_port = metrics_on_probe_port

    def start(self, cluster, logpath, n, extra=()):
        port, mport = free_port(), free_port()
        if self.metrics_on_probe_port:  # libkop serves /readyz beside /metrics
            mport = port
        self.port, self.mport = port, mport
        self.api_port = free_port()
        argv = [a.format(port=port, mport=mport, api=self.api_port, n=n + 100)
                for a in self.argv] + list(extra)
        env = dict(os.environ, KUBECONFIG=cluster.kubeconfig, PYTHONUNBUFFERED="1")
        self.log = open(logpath, "w")
        self.t_start = time.time()
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     cwd=os.path.dirname(logpath))
        return self.proc.pid

    def wait_ready(self, timeout=120):
        url = f"http://127.0.0.1:{self.port}{self.ready_path}"
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return time.time()
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} not ready after {timeout}s")

    def metrics(self, save=None):
        """The operator's /metrics text (None without one: kopf), also
        written to the file save."""
        if not self.metrics_path:
            return None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.mport}{self.metrics_path}",
                                        timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return None
        if save:
            with open(save, "w") as f:
                f.write(text)
        return text

    def reconciles(self, save=None):
        """controller_runtime_reconcile_total summed over results, or None;
        the whole /metrics text goes to the file save."""
        return reconciles_of(self.metrics(save))

    def requests(self):
        """The operator's requests to the apiserver by method (requests_of)."""
        return requests_of(self.metrics())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def operators():
    kopf = os.path.join(VENV, "bin", "kopf")
    ft_kopf = os.path.join(ROOT, "bench/peers/flightticket-kopf/operator.py")
    return [
        Operator("kopc", "kopc (C, libkop)", "flighttickets",
                 [os.path.join(BIN, "flightticket-operator"), "--metrics-bind", "127.0.0.1:{port}"],
                 "/readyz", "/metrics", True),
        Operator("controller-runtime", "controller-runtime (Go)", "flighttickets",
                 [os.path.join(PEERS, "flightticket-go"), "--metrics-bind-address",
                  "127.0.0.1:{mport}", "--health-probe-bind-address", "127.0.0.1:{port}"],
                 "/readyz", "/metrics"),
        Operator("kopf", "kopf (Python)", "flighttickets",
                 [kopf, "run", "--standalone", "--all-namespaces",
                  "--liveness=http://127.0.0.1:{port}/healthz", ft_kopf],
                 "/healthz"),
        Operator("kopc", "kopc (C, ctf-operator)", "challenges",
                 [os.path.join(BIN, "ctf-operator"), "--metrics-bind", "127.0.0.1:{port}",
                  "--api-bind", "127.0.0.1:{api}", "--max-instances", "{n}"],
                 "/readyz", "/metrics", True, api=True),
        Operator("controller-runtime", "controller-runtime (Go)", "challenges",
                 [os.path.join(PEERS, "challenge-go"), "--metrics-bind-address",
                  "127.0.0.1:{mport}", "--health-probe-bind-address", "127.0.0.1:{port}",
                  "--max-instances", "{n}"],
                 "/readyz", "/metrics"),
    ]


class Profile:
    """Profile records op's process with perf while the loader runs (when
    op is one of --perf) and summarizes it into OUT/perf.txt. With op None,
    the devcluster's process pid when --perf names "devcluster", into
    OUT/perf-devcluster.txt: Go keeps frame pointers, so its call graphs
    need no DWARF copies of the stack (a tenth of the data)."""

    def __init__(self, args, op, pid, out):
        self.proc, self.out = None, out
        name = op.name if op is not None else "devcluster"
        if name not in args.perf:
            return
        self.stem = "perf" if op is not None else "perf-devcluster"
        self.data = os.path.join(out, self.stem + ".data")
        graph = "dwarf,8192" if op is not None else "fp"
        self.proc = subprocess.Popen(["perf", "record", "-q", "-F", "199", "--call-graph",
                                      graph, "-p", str(pid), "-o", self.data],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self):
        if not self.proc:
            return
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(60)
        with open(os.path.join(self.out, self.stem + ".txt"), "w") as f:
            # By library, by function, then each function with what it calls (the
            # operator's own functions show where the libraries' time is spent).
            for extra in (["--no-children", "--sort", "dso", "--percent-limit", "0.5"],
                          ["--no-children", "--sort", "dso,sym", "--percent-limit", "0.5"],
                          ["--children", "--sort", "sym", "--percent-limit", "2"]):
                f.flush()
                subprocess.run(["perf", "report", "-i", self.data, "--stdio", "-g", "none",
                                *extra],
                               stdout=f, stderr=subprocess.DEVNULL)



class MeasuredRun:
    """One measured run on one cluster (measured_operator): the operator's
    process id, its sampler, and the time it was ready."""

    def __init__(self, op, cluster, out, n):
        self.op, self.cluster, self.out, self.n = op, cluster, out, n
        self.pid = self.sampler = self.t_ready = None
        self.stopped = False

    def start(self, settle_s=2, extra=(), ready=True):
        """Start op on the cluster with a sampler; with ready, wait until it
        is ready and its start-up work settled (settle_s: 0 in the quick
        mode, which times nothing). extra: more arguments for the operator.
        Without an operator (a limit), the sampler alone, from now."""
        c = self.cluster
        samples = os.path.join(self.out, "samples.csv")
        if self.op is None:
            self.sampler = Sampler(samples, None, c.pid, time.time())
            self.sampler.start()
            return None
        self.pid = self.op.start(c, os.path.join(self.out, "operator.log"), self.n, extra)
        self.sampler = Sampler(samples, self.pid, c.pid, self.op.t_start)
        self.sampler.start()
        if ready:
            self.t_ready = self.op.wait_ready()
            time.sleep(settle_s)  # let start-up work settle before the load
        return self.pid

    def stop(self):
        """The end of the measured run: the operator stopped (SIGTERM, its
        log closed), then the sampler; its exit code in op.proc.returncode."""
        if self.stopped:
            return
        self.stopped = True
        try:
            if self.op is not None and self.pid is not None:
                self.op.stop()
        finally:
            if self.sampler is not None:
                self.sampler.stop()

    def _abandon(self):
        """The way out after a failure: the operator killed if it still runs,
        the sampler stopped."""
        if self.stopped:
            return
        self.stopped = True
        if self.op is not None and self.pid is not None and self.op.proc.poll() is None:
            self.op.proc.kill()
        if self.sampler is not None:
            self.sampler.stop()


@contextlib.contextmanager
def measured_operator(op, cluster, out, n, settle_s=2, extra=(), start=True):
    """The frame of one measurement on cluster (see the top of the file):
    op started and ready (unless start is False), the block's MeasuredRun
    given; on every way out the operator and the sampler stopped, then the
    cluster."""
    run = MeasuredRun(op, cluster, out, n)
    try:
        if start:
            run.start(settle_s, extra)
        yield run
    finally:
        try:
            run._abandon()
        finally:
            cluster.stop()
